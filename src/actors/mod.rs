//! The actors of ax, one per concern. Each is a thin shell owning state and doing I/O; the
//! decisions live in the pure modules (`cron`, `wheel`, `plan`, `run`).

pub mod dispatch;
pub mod fire;
pub mod lock;
pub mod store;
pub mod supervisor;
pub mod wheel;

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

/// Counts work under way (fire batches, result writes), so shutdown can wait for it.
#[derive(Clone, Default)]
pub struct InFlight(Arc<(AtomicUsize, Notify)>);

impl InFlight {
    /// Runs `work`, counted as in flight until it ends.
    pub fn track<F: Future<Output = ()>>(&self, work: F) -> impl Future<Output = ()> {
        let state = self.0.clone();
        state.0.fetch_add(1, Ordering::SeqCst);
        async move {
            work.await;
            if state.0.fetch_sub(1, Ordering::SeqCst) == 1 {
                state.1.notify_waiters();
            }
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
