//! Prepared statements kept per connection for the batched writes of the fire and result
//! paths. Diesel prepares, runs and closes again every query whose SQL depends on its input
//! (a list of `?`, a raw query), since such texts could grow its cache without end; profiled,
//! that was a seventh of ax's CPU per fire and a round trip more for the database. These
//! statements have their lists padded ([`padded`]) or cut ([`chunks`]) to a few sizes, so
//! each has a handful of texts: [`Kept`] lets diesel keep them.

use diesel::backend::Backend;
use diesel::query_builder::{AstPass, Query, QueryFragment, QueryId};
use diesel::QueryResult;

/// A query whose SQL takes only a few shapes: prepared once per connection and kept.
#[derive(Debug, Clone)]
pub struct Kept<Q>(pub Q);

impl<Q> QueryId for Kept<Q> {
    type QueryId = ();
    // Cached by its SQL text, not by type.
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl<Q: Query> Query for Kept<Q> {
    type SqlType = Q::SqlType;
}

impl<DB: Backend, Q: QueryFragment<DB>> QueryFragment<DB> for Kept<Q> {
    fn walk_ast<'b>(&'b self, pass: AstPass<'_, 'b, DB>) -> QueryResult<()> {
        self.0.walk_ast(pass)
    }

    fn is_safe_to_cache_prepared(&self, _: &DB) -> QueryResult<bool> {
        Ok(true)
    }
}

/// The list sizes a kept statement is written for: powers of two.
pub fn size_for(n: usize) -> usize {
    n.max(1).next_power_of_two()
}

/// `items` with its last item repeated up to [`size_for`] its length: for an `IN (…)` list or
/// `CASE` arms, where a repeat changes nothing.
pub fn padded<T: Clone>(items: &[T]) -> Vec<T> {
    let mut padded = items.to_vec();
    if let Some(last) = items.last() {
        padded.resize(size_for(items.len()), last.clone());
    }
    padded
}

/// `items` cut into runs of power-of-two lengths, longest first and none longer than `max` (a
/// power of two): for a multi-row `INSERT`, where a repeat would be a second row.
///
/// The cap bounds memory, not only texts: a connection keeps each prepared statement with a
/// description of every one of its parameters (about 140 bytes each), so a kept 512-row
/// insert of 25 columns holds 1.7 MB on each connection that ever ran it.
pub fn chunks<T>(items: &[T], max: usize) -> Vec<&[T]> {
    debug_assert!(max.is_power_of_two());
    let mut chunks = Vec::new();
    let mut rest = items;
    while !rest.is_empty() {
        let size = (1 << rest.len().ilog2()).min(max);
        let (chunk, tail) = rest.split_at(size);
        chunks.push(chunk);
        rest = tail;
    }
    chunks
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn sizes_are_powers_of_two() {
        assert_eq!(
            [0, 1, 2, 3, 5, 64, 65, 100].map(size_for),
            [1, 1, 2, 4, 8, 64, 128, 128]
        );
        assert_eq!(padded(&[1, 2, 3]), vec![1, 2, 3, 3]);
        assert_eq!(padded::<u8>(&[]), Vec::<u8>::new());
        assert_eq!(
            chunks(&[1, 2, 3, 4, 5, 6, 7], 64),
            vec![&[1, 2, 3, 4][..], &[5, 6], &[7]]
        );
        assert_eq!(
            chunks(&[1, 2, 3, 4, 5, 6, 7], 2),
            vec![&[1, 2][..], &[3, 4], &[5, 6], &[7]]
        );
    }

    proptest! {
        #[test]
        fn padding_keeps_the_set_and_chunks_keep_the_order(items in proptest::collection::vec(0u32..50, 0..300), max_log in 0u32..10) {
            let padded = padded(&items);
            prop_assert!(padded.is_empty() || padded.len().is_power_of_two());
            prop_assert_eq!(&padded[..items.len()], &items[..]);
            prop_assert!(padded[items.len()..].iter().all(|x| Some(x) == items.last()));
            let max = 1 << max_log;
            let chunks = chunks(&items, max);
            prop_assert_eq!(chunks.concat(), items.clone());
            prop_assert!(chunks.iter().all(|c| c.len().is_power_of_two() && c.len() <= max));
            // Below the cap, at most one chunk of each size: few statements a batch.
            let below: Vec<usize> = chunks.iter().map(|c| c.len()).filter(|&n| n < max).collect();
            let sizes: std::collections::HashSet<usize> = below.iter().copied().collect();
            prop_assert_eq!(sizes.len(), below.len());
        }
    }
}
