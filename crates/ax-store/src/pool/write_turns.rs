//! SQLite's one writer, handed from write to write in this process.
//!
//! SQLite lets one connection write at a time. A connection that finds the file locked waits in
//! its busy handler, which sleeps 1, 2, 5, … up to 100 ms between looks instead of waking when
//! the lock is let go: under steady writes (the fire and result lanes, each committing all the
//! time) a waiting writer overslept most of its wait, and a lane stood idle while the file was
//! free. Writes of one process take their turn here first, in arrival order, and find the file
//! free when they begin; the busy handler stays for writers of other processes.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Mutex, OwnedMutexGuard};

use crate::StoreError;

/// The turns of one SQLite file's writes.
#[derive(Clone, Default)]
pub struct WriteTurns(Arc<Mutex<()>>);

/// A write's turn: no other write of this process begins until it is dropped.
pub struct Turn {
    _held: OwnedMutexGuard<()>,
}

impl WriteTurns {
    /// Waits for the turn of a write, first come first served, at most `timeout`.
    pub async fn take(&self, timeout: Duration) -> Result<Turn, StoreError> {
        tokio::time::timeout(timeout, self.0.clone().lock_owned())
            .await
            .map(|held| Turn { _held: held })
            .map_err(|_| StoreError::WriteTurn(timeout))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Long enough for any turn these tests wait for.
    const TURN_TIMEOUT: Duration = Duration::from_secs(10);

    #[tokio::test]
    async fn turns_go_in_arrival_order_and_one_at_a_time() {
        let turns = WriteTurns::default();
        let first = turns.take(TURN_TIMEOUT).await.expect("a free turn");
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut waiting = Vec::new();
        for k in 0..3 {
            let (turns, order) = (turns.clone(), order.clone());
            waiting.push(tokio::spawn(async move {
                let _turn = turns.take(TURN_TIMEOUT).await.expect("a turn");
                order.lock().expect("order").push(k);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }));
            tokio::task::yield_now().await;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(
            order.lock().expect("order").is_empty(),
            "the first turn is held"
        );
        drop(first);
        for task in waiting {
            task.await.expect("the waiter ends");
        }
        assert_eq!(*order.lock().expect("order"), vec![0, 1, 2]);
    }

    #[tokio::test]
    async fn a_turn_held_too_long_is_an_error_not_a_wait_forever() {
        let turns = WriteTurns::default();
        let _held = turns.take(TURN_TIMEOUT).await.expect("a free turn");
        let err = turns
            .take(Duration::from_millis(20))
            .await
            .err()
            .expect("no second turn while the first is held");
        assert!(matches!(err, StoreError::WriteTurn(_)), "{err}");
        assert!(err.is_transient());
    }
}
