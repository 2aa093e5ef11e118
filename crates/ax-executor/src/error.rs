//! What can keep an executor from starting or serving.

/// An executor's configuration or start-up failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "no signing secret: pass it to Executor::new or set AX_SIGNING_SECRET (ax's \
         security.signing_secret); an executor that does not check signatures runs anything \
         anyone POSTs"
    )]
    MissingSecret,
    #[error("{what} `{value}` is not an http(s) URL: {reason}")]
    BadUrl {
        what: &'static str,
        value: String,
        reason: String,
    },
    #[error("handler path `{0}` must start with `/`")]
    BadPath(String),
    #[error("two handlers for path `{0}`")]
    DuplicatePath(String),
    #[error("no handler: add one with .handle(path, …)")]
    NoHandler,
    #[error("serve_at_group_url needs a group URL: call .group(name, url) first")]
    NoGroup,
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
    #[error("cannot start the run threads: {0}")]
    Threads(std::io::Error),
    #[error("the HTTP server failed: {0}")]
    Server(std::io::Error),
}
