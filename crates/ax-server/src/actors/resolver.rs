//! The dispatchers' DNS resolver: a handler's host is allowed by the name written in its URL,
//! and again by the addresses that name resolves to when ax connects, so a name pointed at a
//! link-local or metadata address later (or a rebinding DNS answer) is not called.

use std::error::Error;
use std::fmt;
use std::net::SocketAddr;

use std::time::Duration;

use actix_tls::connect::{Connector, Resolve, Resolver};
use futures_util::future::LocalBoxFuture;

use ax_core::security::Allowlist;

/// An HTTP client that connects only to allowed addresses and follows no redirect, with at
/// most `limit` connections, each made within `connect_timeout`; `timeout`: a request's
/// whole bound, else awc's default. awc's client is bound to the thread that made it, so
/// each actor makes its own.
pub fn guarded_client(
    allowlist: Allowlist,
    limit: usize,
    connect_timeout: Duration,
    timeout: Option<Duration>,
) -> awc::Client {
    let resolver = Resolver::custom(GuardedResolver { allowlist });
    let connector = awc::Connector::new()
        .connector(Connector::new(resolver).service())
        .limit(limit)
        .timeout(connect_timeout);
    let builder = awc::Client::builder()
        .connector(connector)
        .disable_redirects();
    match timeout {
        Some(timeout) => builder.timeout(timeout).finish(),
        None => builder.finish(),
    }
}

/// Resolves with the system's resolver and refuses the host when any address is not allowed.
pub struct GuardedResolver {
    pub allowlist: Allowlist,
}

/// A handler host the allowlist refuses; the dispatcher records it as the attempt's failure.
#[derive(Debug)]
pub struct NotAllowed(pub String);

impl fmt::Display for NotAllowed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Error for NotAllowed {}

impl Resolve for GuardedResolver {
    fn lookup<'a>(
        &'a self,
        host: &'a str,
        port: u16,
    ) -> LocalBoxFuture<'a, Result<Vec<SocketAddr>, Box<dyn Error>>> {
        Box::pin(async move {
            // A refused name (a metadata service's) is not even looked up.
            if !self.allowlist.allows(host) {
                return Err(NotAllowed(format!(
                    "host `{host}` is not allowed by security.handler_allowlist"
                ))
                .into());
            }
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port)).await?.collect();
            if let Some(refused) = addrs
                .iter()
                .find(|addr| !self.allowlist.allows_resolved(host, addr.ip()))
            {
                return Err(NotAllowed(format!(
                    "host `{host}` resolves to {}, which security.handler_allowlist does not allow",
                    refused.ip()
                ))
                .into());
            }
            Ok(addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolver(entries: &[&str]) -> GuardedResolver {
        let entries: Vec<String> = entries.iter().map(|s| s.to_string()).collect();
        GuardedResolver {
            allowlist: Allowlist::parse(&entries).expect("valid"),
        }
    }

    #[actix_rt::test]
    async fn allowed_names_resolve_and_others_are_refused() {
        let addrs = resolver(&["localhost"])
            .lookup("localhost", 8080)
            .await
            .expect("resolves");
        assert!(addrs
            .iter()
            .all(|addr| addr.ip().is_loopback() && addr.port() == 8080));
        let err = resolver(&["executor.internal"])
            .lookup("localhost", 8080)
            .await
            .expect_err("refused");
        assert!(err.is::<NotAllowed>(), "{err}");
    }

    #[actix_rt::test]
    async fn metadata_hosts_are_refused_before_any_lookup() {
        for host in [
            "metadata.google.internal",
            "Metadata.Google.Internal.",
            "100.100.100.200",
            "::a9fe:a9fe",
            "64:ff9b::a9fe:a9fe",
        ] {
            let err = resolver(&[]).lookup(host, 80).await.expect_err("refused");
            assert!(err.is::<NotAllowed>(), "{host}: {err}");
        }
    }
}
