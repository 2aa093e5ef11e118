//! The one percentile of ax, nearest rank: the task stats, the console's lag chart and the
//! benches all report it alike.

/// The nearest-rank percentile `p` (0-100] of sorted values: the smallest value with at least
/// `p`% of them at or below it; `None` when there are none.
pub fn percentile<T: Copy>(sorted: &[T], p: f64) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&values, 50.0), Some(50.0));
        assert_eq!(percentile(&values, 99.0), Some(99.0));
        assert_eq!(percentile(&values, 100.0), Some(100.0));
        assert_eq!(percentile(&[7.0], 50.0), Some(7.0));
        assert_eq!(percentile(&[1.0, 2.0, 3.0], 99.0), Some(3.0));
        assert_eq!(percentile::<f64>(&[], 50.0), None);
    }

    #[test]
    fn whole_numbers_take_the_same_rank() {
        let values: Vec<i64> = (1..=100).collect();
        assert_eq!(percentile(&values, 50.0), Some(50));
        assert_eq!(percentile(&values, 90.0), Some(90));
        assert_eq!(percentile(&[10, 20, 30], 50.0), Some(20));
        assert_eq!(percentile::<i64>(&[], 99.0), None);
    }
}
