//! The builder users configure, and `serve`: listening, registration, and the one shutdown
//! path (protocol.md, "Registration, heartbeats and removal").

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use actix_web::{middleware::DefaultHeaders, web, App, HttpServer};
use serde::de::DeserializeOwned;
use url::Url;

use crate::backoff::Backoff;
use crate::client::AxApi;
use crate::dedupe::{DedupeStore, DynDedupe, MemoryDedupe, NoDedupe};
use crate::error::Error;
use crate::handler::{Handler, Typed};
use crate::lifecycle::Runs;
use crate::outcome::{Failed, Outcome};
use crate::registration::Membership;
use crate::run::Run;
use crate::runner::Runner;
use crate::server::{self, Route, State, IDEMPOTENT_HEADER, PROTOCOL_VERSION};
use crate::shutdown::ShutdownHandle;

/// ax's API when neither `ax_url` nor `AX_URL` says.
pub const DEFAULT_AX_URL: &str = "http://127.0.0.1:8901";

/// An executor: its handlers, by path, and how it talks to ax. Build it, then [`serve`].
///
/// [`serve`]: Executor::serve
pub struct Executor {
    secret: String,
    ax_url: String,
    token: Option<String>,
    group: Option<(String, String)>,
    capacity: Option<u32>,
    reply_within: Duration,
    dedupe: Option<Arc<dyn DynDedupe>>,
    shutdown_grace: Duration,
    drain_delay: Duration,
    callback_retry_for: Duration,
    run_threads: usize,
    http_workers: Option<usize>,
    routes: Vec<(String, Option<Duration>, Arc<dyn Handler>)>,
    shutdown: ShutdownHandle,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|value| !value.is_empty())
}

impl Executor {
    /// An executor checking dispatches with `secret` (ax's `security.signing_secret`). ax's
    /// URL and the registration token come from `AX_URL` and `AX_EXECUTOR_TOKEN` unless set.
    /// An empty secret is refused.
    pub fn new(secret: impl Into<String>) -> Result<Executor, Error> {
        let secret = secret.into();
        if secret.is_empty() {
            return Err(Error::MissingSecret);
        }
        Ok(Executor {
            secret,
            ax_url: env("AX_URL").unwrap_or_else(|| DEFAULT_AX_URL.to_string()),
            token: env("AX_EXECUTOR_TOKEN"),
            group: None,
            capacity: None,
            reply_within: Duration::from_secs(2),
            dedupe: Some(Arc::new(MemoryDedupe::default())),
            shutdown_grace: Duration::from_secs(30),
            drain_delay: Duration::from_secs(2),
            callback_retry_for: Backoff::default().give_up_after,
            run_threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
            http_workers: None,
            routes: Vec::new(),
            shutdown: ShutdownHandle::default(),
        })
    }

    /// [`Executor::new`] with the secret from `AX_SIGNING_SECRET`.
    pub fn from_env() -> Result<Executor, Error> {
        Executor::new(env("AX_SIGNING_SECRET").ok_or(Error::MissingSecret)?)
    }

    /// ax's API (default `AX_URL`, else `http://127.0.0.1:8901`): for registration, and for
    /// results and log lines of dispatches that carry no `callbackUrl`/`logUrl`.
    pub fn ax_url(mut self, url: impl Into<String>) -> Executor {
        self.ax_url = url.into();
        self
    }

    /// The bearer token of registration and removal (default `AX_EXECUTOR_TOKEN`): a token of
    /// role `executor` listing the group, when ax has tokens.
    pub fn token(mut self, token: impl Into<String>) -> Executor {
        self.token = Some(token.into()).filter(|token| !token.is_empty());
        self
    }

    /// Joins executor group `name` as `url`, the base URL ax reaches this executor on
    /// (`http://10.0.0.7:9000`): registered once listening, kept by heartbeats, removed at
    /// shutdown. Without a group nothing is registered (tasks name a `handlerUrl`).
    pub fn group(mut self, name: impl Into<String>, url: impl Into<String>) -> Executor {
        self.group = Some((name.into(), url.into()));
        self
    }

    /// The most runs ax sends this member at once (registered with the group).
    pub fn capacity(mut self, runs: u32) -> Executor {
        self.capacity = Some(runs);
        self
    }

    /// How long a dispatch's reply waits for its handler (default 2 s): a handler done by
    /// then answers in the reply, else the reply is `202` and the result follows by callback.
    /// Zero: always `202` and a callback.
    pub fn reply_within(mut self, wait: Duration) -> Executor {
        self.reply_within = wait;
        self
    }

    /// Where `requestId`s and results are kept (default [`MemoryDedupe`]).
    pub fn dedupe(mut self, store: impl DedupeStore) -> Executor {
        self.dedupe = Some(Arc::new(store));
        self
    }

    /// Runs every delivery, duplicates too; replies no longer say `X-Ax-Idempotent`.
    pub fn without_dedupe(mut self) -> Executor {
        self.dedupe = None;
        self
    }

    /// How long shutdown waits for runs in flight (default 30 s) before reporting them
    /// `EXECUTOR_SHUTDOWN` (retried by ax).
    pub fn shutdown_grace(mut self, grace: Duration) -> Executor {
        self.shutdown_grace = grace;
        self
    }

    /// How long dispatches are still taken after leaving the group at shutdown (default
    /// 2 s: ax re-reads its groups each second).
    pub fn drain_delay(mut self, delay: Duration) -> Executor {
        self.drain_delay = delay;
        self
    }

    /// How long a result ax cannot take is sent again (default 10 minutes).
    pub fn callback_retry_for(mut self, time: Duration) -> Executor {
        self.callback_retry_for = time;
        self
    }

    /// Threads the handlers run on (default: one per CPU).
    pub fn run_threads(mut self, threads: usize) -> Executor {
        self.run_threads = threads.max(1);
        self
    }

    /// Threads taking HTTP requests (default: actix-web's, one per physical CPU).
    pub fn http_workers(mut self, workers: usize) -> Executor {
        self.http_workers = Some(workers.max(1));
        self
    }

    /// The handle that stops [`serve`](Executor::serve) as SIGTERM does.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        self.shutdown.clone()
    }

    /// Runs `handler` for dispatches POSTed to `path`, its params parsed as `P` (params that do
    /// not fit fail the run `BAD_PARAMS`, without retry). It returns `Ok(anything
    /// Into<Outcome>)` — `()`, a message, an [`Outcome`] — or `Err(Failed)`; any error `?`
    /// meets becomes `Failed` (code `ERROR`, retried), and so does a panic.
    pub fn handle<P, F, Fut, O>(self, path: impl Into<String>, handler: F) -> Executor
    where
        P: DeserializeOwned + 'static,
        F: Fn(Run<P>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, Failed>> + 'static,
        O: Into<Outcome> + 'static,
    {
        self.route(path.into(), None, Arc::new(Typed::new(handler)))
    }

    /// [`Executor::handle`] with this path's own `reply_within`.
    pub fn handle_with<P, F, Fut, O>(
        self,
        path: impl Into<String>,
        reply_within: Duration,
        handler: F,
    ) -> Executor
    where
        P: DeserializeOwned + 'static,
        F: Fn(Run<P>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, Failed>> + 'static,
        O: Into<Outcome> + 'static,
    {
        self.route(
            path.into(),
            Some(reply_within),
            Arc::new(Typed::new(handler)),
        )
    }

    fn route(mut self, path: String, within: Option<Duration>, h: Arc<dyn Handler>) -> Executor {
        self.routes.push((path, within, h));
        self
    }

    /// Listens on the host and port of the URL given to [`group`](Executor::group): its IP
    /// address or `localhost`, else every interface (`0.0.0.0`, a name such as a service's).
    pub async fn serve_at_group_url(self) -> Result<(), Error> {
        let (_, url) = self.group.as_ref().ok_or(Error::NoGroup)?;
        let addr = listen_addr(url)?;
        self.serve(addr).await
    }

    /// Serves until SIGTERM, SIGINT or the [`ShutdownHandle`], then shuts down gracefully:
    /// leaves the group, takes dispatches for the drain delay, closes the listener, waits for
    /// the runs in flight up to `shutdown_grace`, reports those still at work.
    pub async fn serve(self, addr: impl ToSocketAddrs) -> Result<(), Error> {
        // Every task serve starts is local (awc's client is bound to its thread), so this works
        // under `#[actix_web::main]` and `#[tokio::main]` alike.
        tokio::task::LocalSet::new()
            .run_until(self.serve_here(addr))
            .await
    }

    async fn serve_here(self, addr: impl ToSocketAddrs) -> Result<(), Error> {
        let routes = routes(self.routes, self.reply_within)?;
        let base = http_url("ax_url", &self.ax_url)?;
        let membership = match &self.group {
            Some((group, url)) => Some(Membership {
                group: group.clone(),
                url: http_url("the group URL", url)?
                    .to_string()
                    .trim_end_matches('/')
                    .into(),
                capacity: self.capacity,
            }),
            None => None,
        };
        let api = Arc::new(AxApi {
            base,
            token: self.token,
            callback_backoff: Backoff {
                give_up_after: self.callback_retry_for,
                ..Backoff::default()
            },
        });
        let idempotent = self.dedupe.is_some();
        let store = self.dedupe.unwrap_or_else(|| Arc::new(NoDedupe));
        let runner = Runner::start(self.run_threads).map_err(Error::Threads)?;
        let runs = Arc::new(Runs::new(store, api.clone(), runner));
        let closed = Arc::new(AtomicBool::new(false));
        let paths: Vec<String> = routes.keys().cloned().collect();
        let state = web::Data::new(State {
            secret: self.secret.into_bytes(),
            routes,
            runs: runs.clone(),
            closed: closed.clone(),
        });

        let mut server = HttpServer::new(move || {
            let mut headers = DefaultHeaders::new().add(("X-Ax-Protocol", PROTOCOL_VERSION));
            if idempotent {
                headers = headers.add((IDEMPOTENT_HEADER, "true"));
            }
            App::new()
                .app_data(state.clone())
                .wrap(headers)
                .default_service(web::to(server::dispatch))
        })
        // Signals are handled once, below, so shutdown has one path.
        .disable_signals()
        // The listener closes at once; requests in flight (replies waiting up to
        // reply_within) are given the grace.
        .shutdown_timeout(self.shutdown_grace.as_secs() + 5);
        if let Some(workers) = self.http_workers {
            server = server.workers(workers);
        }
        let addrs: Vec<SocketAddr> = addr
            .to_socket_addrs()
            .map_err(|source| Error::Bind {
                addr: "the address".into(),
                source,
            })?
            .collect();
        let server = server.bind(&addrs[..]).map_err(|source| Error::Bind {
            addr: format!("{addrs:?}"),
            source,
        })?;
        let bound = server.addrs();
        let server = server.run();
        let http = server.handle();
        let mut serving = tokio::task::spawn_local(server);
        log::info!("ax executor on {bound:?}, handlers {paths:?}");

        let (stop_beats, beats_stopped) = tokio::sync::watch::channel(false);
        let heartbeats = membership.clone().map(|membership| {
            let api = api.clone();
            tokio::task::spawn_local(async move {
                membership.keep_registered(&api, beats_stopped).await
            })
        });

        let failed = tokio::select! {
            _ = self.shutdown.wait() => None,
            ended = &mut serving => Some(match ended {
                Ok(Ok(())) => Error::Server(std::io::Error::other("stopped on its own")),
                Ok(Err(err)) => Error::Server(err),
                Err(err) => Error::Server(std::io::Error::other(err.to_string())),
            }),
        };

        // 1. Leave the group, tell the runs, and keep taking dispatches a little while.
        runs.begin_stopping();
        stop_beats.send_replace(true);
        if let Some(heartbeats) = heartbeats {
            let _ = heartbeats.await;
        }
        if let Some(membership) = &membership {
            membership.remove(&api).await;
        }
        if failed.is_none() {
            tokio::time::sleep(self.drain_delay).await;
        }
        // 2. Stop taking dispatches: the listener closes (a refused connection sends the
        // attempt to another member at once).
        closed.store(true, Ordering::Release);
        let stopping_http = tokio::task::spawn_local(http.stop(true));
        // 3. The runs in flight get the grace; those still at work are reported.
        if !runs.wait_idle(self.shutdown_grace).await {
            runs.abandon_all().await;
        }
        runs.stop_threads();
        let _ = stopping_http.await;
        if failed.is_none() {
            let _ = serving.await;
        }
        log::info!("ax executor stopped");
        failed.map_or(Ok(()), Err)
    }
}

/// The routes by path, each with its reply wait; paths checked.
fn routes(
    given: Vec<(String, Option<Duration>, Arc<dyn Handler>)>,
    reply_within: Duration,
) -> Result<HashMap<String, Route>, Error> {
    if given.is_empty() {
        return Err(Error::NoHandler);
    }
    let mut routes = HashMap::new();
    for (path, within, handler) in given {
        if !path.starts_with('/') {
            return Err(Error::BadPath(path));
        }
        let route = Route {
            handler,
            reply_within: within.unwrap_or(reply_within),
        };
        if routes.insert(path.clone(), route).is_some() {
            return Err(Error::DuplicatePath(path));
        }
    }
    Ok(routes)
}

fn http_url(what: &'static str, value: &str) -> Result<Url, Error> {
    let bad = |reason: String| Error::BadUrl {
        what,
        value: value.to_string(),
        reason,
    };
    let url = Url::parse(value).map_err(|err| bad(err.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(bad("give http://host:port or https://host:port".into()));
    }
    Ok(url)
}

/// Where to listen for a group URL: its IP or `localhost`, else every interface; its port.
fn listen_addr(url: &str) -> Result<(String, u16), Error> {
    let parsed = http_url("the group URL", url)?;
    let port = parsed.port_or_known_default().unwrap_or(80);
    let host = match parsed.host_str() {
        Some(host) if host == "localhost" => host.to_string(),
        Some(host) => {
            let bare = host.trim_start_matches('[').trim_end_matches(']');
            match bare.parse::<IpAddr>() {
                Ok(ip) => ip.to_string(),
                Err(_) => "0.0.0.0".to_string(),
            }
        }
        None => "0.0.0.0".to_string(),
    };
    Ok((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listen_address_comes_from_the_group_url() {
        let at = |url: &str| listen_addr(url).ok();
        assert_eq!(
            at("http://127.0.0.1:9000"),
            Some(("127.0.0.1".into(), 9000))
        );
        assert_eq!(
            at("http://localhost:9001/"),
            Some(("localhost".into(), 9001))
        );
        assert_eq!(
            at("http://billing.svc:9000"),
            Some(("0.0.0.0".into(), 9000))
        );
        assert_eq!(at("http://[::1]:9000"), Some(("::1".into(), 9000)));
        assert_eq!(at("https://10.0.0.7"), Some(("10.0.0.7".into(), 443)));
        assert!(at("10.0.0.7:9000").is_none());
    }

    #[test]
    fn a_secret_is_required() {
        assert!(matches!(Executor::new(""), Err(Error::MissingSecret)));
        assert!(Executor::new("a-signing-secret-of-16+").is_ok());
    }

    #[test]
    fn paths_are_checked() {
        let handler = || -> Arc<dyn Handler> {
            Arc::new(Typed::new(|_: Run<serde_json::Value>| async { Ok("") }))
        };
        let check = |paths: &[&str]| {
            let given = paths
                .iter()
                .map(|path| (path.to_string(), None, handler()))
                .collect();
            routes(given, Duration::ZERO)
                .err()
                .map(|err| err.to_string())
        };
        assert_eq!(check(&["/a", "/b"]), None);
        assert_eq!(check(&[]), Some(Error::NoHandler.to_string()));
        assert_eq!(check(&["a"]), Some(Error::BadPath("a".into()).to_string()));
        assert_eq!(
            check(&["/a", "/a"]),
            Some(Error::DuplicatePath("/a".into()).to_string())
        );
    }
}
