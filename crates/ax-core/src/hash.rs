//! Hand-written hashes rather than std's, whose output may change between Rust versions: every
//! ax process, and every restart, must send a task to the same member, give it the same jitter
//! and count it in the same process's share.

/// The rendezvous weight of `name` for `key`: of several names, the one of highest weight
/// takes the key, and a name that comes or goes moves only the keys it takes or took.
pub fn rendezvous_weight(key: u64, name: &str) -> u64 {
    splitmix64(fnv1a64(name.as_bytes()) ^ splitmix64(key))
}

/// FNV-1a, 64 bits.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// SplitMix64's finaliser: spreads weak low bits (FNV's, a counter's) over the whole word.
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_pinned() {
        // Published FNV-1a and splitmix64 values: a change here moves every task.
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
        assert_eq!(splitmix64(0), 0xe220_a839_7b1d_cdaf);
        assert_eq!(rendezvous_weight(42, "http://a:1"), 0x53f4_bb17_01eb_a251);
    }
}
