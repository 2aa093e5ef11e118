//! Work under way, counted so shutdown can wait for it.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

/// Counts work under way (fire batches, result writes), so shutdown can wait for it.
#[derive(Clone, Default)]
pub struct InFlight(Arc<(AtomicUsize, Notify)>);

impl InFlight {
    /// Runs `work`, counted as in flight until it ends.
    pub fn track<F: Future>(&self, work: F) -> impl Future<Output = F::Output> {
        let state = self.0.clone();
        state.0.fetch_add(1, Ordering::SeqCst);
        async move {
            let output = work.await;
            if state.0.fetch_sub(1, Ordering::SeqCst) == 1 {
                state.1.notify_waiters();
            }
            output
        }
    }

    /// Resolves when nothing is in flight.
    pub async fn idle(&self) {
        loop {
            let notified = self.0 .1.notified();
            if self.0 .0.load(Ordering::SeqCst) == 0 {
                return;
            }
            notified.await;
        }
    }
}
