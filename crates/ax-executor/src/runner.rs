//! Threads the runs live on, apart from the HTTP workers: a run answered `202` goes on after
//! its request, and after the listener closes at shutdown, until its grace is over. Each
//! thread has its own single-threaded runtime, so a handler's future need not be `Send`.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use tokio::sync::mpsc;

/// A run to start: made on the thread it runs on, so its future may hold `Rc`s.
pub(crate) type Job = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()>>> + Send>;

pub(crate) struct Runner {
    /// `None` once stopped.
    threads: Mutex<Option<Vec<mpsc::UnboundedSender<Job>>>>,
    next: AtomicUsize,
}

impl Runner {
    pub fn start(threads: usize) -> std::io::Result<Runner> {
        let mut senders = Vec::new();
        for i in 0..threads.max(1) {
            let (tx, mut rx) = mpsc::unbounded_channel::<Job>();
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            std::thread::Builder::new()
                .name(format!("ax-executor-run-{i}"))
                .spawn(move || {
                    let local = tokio::task::LocalSet::new();
                    local.block_on(&runtime, async move {
                        while let Some(job) = rx.recv().await {
                            tokio::task::spawn_local(job());
                        }
                    });
                    // The channel closed (shutdown, past the grace): dropping `local` drops the
                    // runs still at work; they were reported already.
                })?;
            senders.push(tx);
        }
        Ok(Runner {
            threads: Mutex::new(Some(senders)),
            next: AtomicUsize::new(0),
        })
    }

    /// Starts `job` on one of the threads, in turn; `false` once stopped.
    pub fn spawn(&self, job: Job) -> bool {
        let threads = self.threads.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(senders) = threads.as_ref().filter(|senders| !senders.is_empty()) else {
            return false;
        };
        let i = self.next.fetch_add(1, Ordering::Relaxed) % senders.len();
        senders[i].send(job).is_ok()
    }

    /// Ends the threads, and with them every run still at work.
    pub fn stop(&self) {
        self.threads
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }
}
