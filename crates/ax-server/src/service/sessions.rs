//! Console sessions.

use chrono::Duration;

use super::error::Result;
use super::Service;
use crate::actors::store::boxed;
use ax_core::security;
use ax_store::queries::sessions;

impl Service {
    /// Opens a console session for the token named `token_name`, bound to the token's
    /// `token_digest`, until `lifetime` from now; returns the secret its cookie carries.
    pub async fn open_session(
        &self,
        token_name: &str,
        token_digest: &str,
        lifetime: Duration,
    ) -> Result<String> {
        let secret = security::new_secret();
        let key = security::session_key(&secret);
        let (name, digest) = (token_name.to_string(), token_digest.to_string());
        let now = self.clock.now();
        self.store
            .query(move |conn| {
                boxed(async move {
                    let token = (name.as_str(), digest.as_str());
                    sessions::open(conn, &key, token, now, now + lifetime).await
                })
            })
            .await?;
        Ok(secret)
    }

    /// The token name and token digest of the open session whose cookie carries `secret`.
    pub async fn session(&self, secret: &str) -> Result<Option<(String, String)>> {
        let key = security::session_key(secret);
        let now = self.clock.now();
        Ok(self
            .store
            .query(move |conn| boxed(async move { sessions::token_of(conn, &key, now).await }))
            .await?)
    }

    /// Ends the session whose cookie carries `secret`.
    pub async fn close_session(&self, secret: &str) -> Result<()> {
        let key = security::session_key(secret);
        Ok(self
            .store
            .query(move |conn| boxed(async move { sessions::close(conn, &key).await }))
            .await?)
    }
}
