//! Which handlers hold their executor host's slots long. A handler (a task's handler URL, or
//! its group member's URL and path) whose attempt held its slot for `slow_after` or longer (a
//! timed-out one too) is slow at once: every task of a hung handler moves to its host's slow
//! lane at its first timeout, before it fills the host. It is quick again after
//! `QUICK_AGAIN_AFTER` quick attempts in a row, so one quick reply does not undo it. Pure
//! bookkeeping: the host slots ask it which lane an attempt takes.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Quick attempts in a row that bring a slow handler back to the common lane.
pub const QUICK_AGAIN_AFTER: u32 = 3;

/// The slow handlers, each with its quick attempts since its last slow one. Only slow
/// handlers are kept.
#[derive(Debug)]
pub struct SlowHandlers {
    after: Duration,
    slow: HashMap<Arc<str>, u32>,
}

impl SlowHandlers {
    /// An attempt that holds its slot for `after` or longer makes its handler slow.
    pub fn new(after: Duration) -> Self {
        SlowHandlers {
            after,
            slow: HashMap::new(),
        }
    }

    pub fn is_slow(&self, handler: &str) -> bool {
        self.slow.contains_key(handler)
    }

    /// How many handlers are slow.
    pub fn count(&self) -> usize {
        self.slow.len()
    }

    /// Notes that an attempt to `handler` held its slot for `took`; answers the handler's lane
    /// when it changed (`Some(true)`: it is slow now, `Some(false)`: quick again).
    pub fn attempt_took(&mut self, handler: &str, took: Duration) -> Option<bool> {
        if took >= self.after {
            if let Some(quick) = self.slow.get_mut(handler) {
                *quick = 0;
                return None;
            }
            self.slow.insert(handler.into(), 0);
            return Some(true);
        }
        let quick = self.slow.get_mut(handler)?;
        *quick += 1;
        if *quick < QUICK_AGAIN_AFTER {
            return None;
        }
        self.slow.remove(handler);
        Some(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);
    const QUICK: Duration = Duration::from_millis(20);
    const HUNG: &str = "http://10.0.0.7:9000/hung";

    #[test]
    fn one_slow_attempt_makes_a_handler_slow() {
        let mut handlers = SlowHandlers::new(SECOND);
        assert_eq!(handlers.attempt_took(HUNG, QUICK), None);
        assert!(!handlers.is_slow(HUNG));
        assert_eq!(handlers.attempt_took(HUNG, SECOND), Some(true));
        assert!(handlers.is_slow(HUNG));
        assert_eq!(handlers.attempt_took(HUNG, 10 * SECOND), None, "no change");
        assert!(!handlers.is_slow("http://10.0.0.7:9000/quick"));
        assert_eq!(handlers.count(), 1);
    }

    #[test]
    fn a_slow_handler_is_quick_again_after_quick_attempts_in_a_row() {
        let mut handlers = SlowHandlers::new(SECOND);
        handlers.attempt_took(HUNG, SECOND);
        assert_eq!(handlers.attempt_took(HUNG, QUICK), None);
        assert_eq!(handlers.attempt_took(HUNG, QUICK), None);
        assert_eq!(
            handlers.attempt_took(HUNG, 2 * SECOND),
            None,
            "a slow attempt starts the count again"
        );
        for _ in 1..QUICK_AGAIN_AFTER {
            assert_eq!(handlers.attempt_took(HUNG, QUICK), None);
        }
        assert_eq!(handlers.attempt_took(HUNG, QUICK), Some(false));
        assert!(!handlers.is_slow(HUNG));
        assert_eq!(handlers.count(), 0, "quick handlers are not kept");
    }
}
