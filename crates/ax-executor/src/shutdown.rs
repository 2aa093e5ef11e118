//! What starts a graceful shutdown: SIGTERM or SIGINT, or a [`ShutdownHandle`].

use std::sync::Arc;

use tokio::sync::watch;

/// Stops a serving executor gracefully from code (a test, an admin endpoint of your own):
/// the same path as SIGTERM. Cloneable and `Send`; take it before `serve`.
#[derive(Clone, Debug)]
pub struct ShutdownHandle {
    asked: Arc<watch::Sender<bool>>,
}

impl Default for ShutdownHandle {
    fn default() -> ShutdownHandle {
        ShutdownHandle {
            asked: Arc::new(watch::Sender::new(false)),
        }
    }
}

impl ShutdownHandle {
    /// Starts the shutdown; `serve` returns once it is complete.
    pub fn shutdown(&self) {
        self.asked.send_replace(true);
    }

    /// Resolves when asked through a handle, or on SIGTERM or SIGINT.
    pub(crate) async fn wait(&self) {
        let mut asked = self.asked.subscribe();
        tokio::select! {
            _ = asked.wait_for(|asked| *asked) => {}
            why = signal() => log::info!("{why}: shutting down"),
        }
    }
}

#[cfg(unix)]
async fn signal() -> &'static str {
    use tokio::signal::unix::{signal, SignalKind};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut term), Ok(mut int)) => tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        },
        (Err(err), _) | (_, Err(err)) => {
            log::error!("cannot listen for SIGTERM and SIGINT: {err}; stop with a ShutdownHandle");
            std::future::pending().await
        }
    }
}

#[cfg(not(unix))]
async fn signal() -> &'static str {
    match tokio::signal::ctrl_c().await {
        Ok(()) => "Ctrl-C",
        Err(_) => std::future::pending().await,
    }
}
