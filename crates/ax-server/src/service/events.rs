//! Listening to run changes (`GET /api/events`): a queue from the feed actor.

use tokio::sync::mpsc;

use super::error::{Result, ServiceError};
use super::Service;
use crate::actors::feed::{Frame, Listen, MAX_LISTENERS};
use ax_core::run::feed::Interest;
use ax_store::StoreError;

impl Service {
    /// The changes `interest` wants, as event frames, from the next look on.
    pub async fn listen(&self, interest: Interest) -> Result<mpsc::Receiver<Frame>> {
        self.feed
            .send(Listen(interest))
            .await
            .map_err(|err| StoreError::Pool(format!("feed actor unavailable: {err}")))?
            .ok_or(ServiceError::TooManyListeners(MAX_LISTENERS))
    }
}
