//! ax's dispatch signature (protocol.md, "Verifying the signature"): `X-Ax-Signature: v1=<hex>`,
//! the HMAC-SHA256 of `"{X-Ax-Timestamp}.{body}"` keyed with the signing secret.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// How far a dispatch's timestamp may be from this clock, either way: older is a replay.
pub const MAX_SKEW_SECS: i64 = 300;

/// Why a dispatch's signature does not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("missing X-Ax-Timestamp or X-Ax-Signature")]
    Missing,
    #[error("X-Ax-Timestamp is not Unix seconds")]
    BadTimestamp,
    #[error("X-Ax-Timestamp is more than 300 seconds from this executor's clock")]
    Stale,
    #[error("X-Ax-Signature does not match the body")]
    Mismatch,
}

fn mac(secret: &[u8], timestamp: &str, body: &[u8]) -> Hmac<Sha256> {
    // HMAC takes a key of any length, so this cannot fail; an empty key is refused earlier.
    let mut mac = match Hmac::<Sha256>::new_from_slice(secret) {
        Ok(mac) => mac,
        Err(_) => unreachable!("HMAC accepts keys of any length"),
    };
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

/// The `X-Ax-Signature` value ax sends for `body` signed at `timestamp` (Unix seconds): what a
/// test, or a tool playing ax, puts on its dispatches.
pub fn sign(secret: &[u8], timestamp: i64, body: &[u8]) -> String {
    let digest = mac(secret, &timestamp.to_string(), body)
        .finalize()
        .into_bytes();
    let hex: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
    format!("v1={hex}")
}

/// Checks a dispatch's headers against its body as received, at `now` (Unix seconds).
/// The digest is compared in constant time.
pub fn verify(
    secret: &[u8],
    timestamp: Option<&str>,
    signature: Option<&str>,
    body: &[u8],
    now: i64,
) -> Result<(), SignatureError> {
    let (Some(timestamp), Some(signature)) = (timestamp, signature) else {
        return Err(SignatureError::Missing);
    };
    let signed_at: i64 = timestamp
        .trim()
        .parse()
        .map_err(|_| SignatureError::BadTimestamp)?;
    if now.saturating_sub(signed_at).saturating_abs() > MAX_SKEW_SECS {
        return Err(SignatureError::Stale);
    }
    let expected = signature
        .trim()
        .strip_prefix("v1=")
        .and_then(from_hex)
        .ok_or(SignatureError::Mismatch)?;
    mac(secret, timestamp.trim(), body)
        .verify_slice(&expected)
        .map_err(|_| SignatureError::Mismatch)
}

fn from_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"a-signing-secret-of-16+";
    const BODY: &[u8] = br#"{"requestId":"r","attempt":1}"#;

    #[test]
    fn a_signature_made_here_verifies() {
        let signature = sign(SECRET, 1_700_000_000, BODY);
        assert!(signature.starts_with("v1=") && signature.len() == 3 + 64);
        let ok = verify(
            SECRET,
            Some("1700000000"),
            Some(&signature),
            BODY,
            1_700_000_000,
        );
        assert_eq!(ok, Ok(()));
    }

    #[test]
    fn a_known_vector_matches() {
        // HMAC-SHA256(key "key", "1.body"), computed independently with Python's hmac module.
        assert_eq!(
            sign(b"key", 1, b"body"),
            "v1=91b5374b153842ad05b2c4eab9349b8321b14703165bd3fb8b034dfb8be98ae5"
        );
    }

    #[test]
    fn anything_else_is_refused() {
        let now = 1_700_000_000;
        let good = sign(SECRET, now, BODY);
        let ts = now.to_string();
        let check = |ts: Option<&str>, sig: Option<&str>, body: &[u8], at: i64| {
            verify(SECRET, ts, sig, body, at)
        };
        assert_eq!(
            check(None, Some(&good), BODY, now),
            Err(SignatureError::Missing)
        );
        assert_eq!(
            check(Some(&ts), None, BODY, now),
            Err(SignatureError::Missing)
        );
        assert_eq!(
            check(Some("soon"), Some(&good), BODY, now),
            Err(SignatureError::BadTimestamp)
        );
        // Another body, another secret, another timestamp, a truncated or odd digest.
        assert_eq!(
            check(Some(&ts), Some(&good), b"{}", now),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify(b"another-secret-16chars", Some(&ts), Some(&good), BODY, now),
            Err(SignatureError::Mismatch)
        );
        let other_ts = (now - 1).to_string();
        assert_eq!(
            check(Some(&other_ts), Some(&good), BODY, now),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            check(Some(&ts), Some(&good[..good.len() - 2]), BODY, now),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            check(Some(&ts), Some(&good[..good.len() - 1]), BODY, now),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            check(Some(&ts), Some(good.trim_start_matches("v1=")), BODY, now),
            Err(SignatureError::Mismatch)
        );
    }

    #[test]
    fn the_timestamp_may_be_300_seconds_off_either_way() {
        let signed_at = 1_700_000_000;
        let signature = sign(SECRET, signed_at, BODY);
        let ts = signed_at.to_string();
        for (now, fresh) in [
            (signed_at + 300, true),
            (signed_at - 300, true),
            (signed_at + 301, false),
            (signed_at - 301, false),
            (signed_at + 600, false),
        ] {
            let got = verify(SECRET, Some(&ts), Some(&signature), BODY, now);
            assert_eq!(got.is_ok(), fresh, "now = signed + {}", now - signed_at);
            if !fresh {
                assert_eq!(got, Err(SignatureError::Stale));
            }
        }
    }
}
