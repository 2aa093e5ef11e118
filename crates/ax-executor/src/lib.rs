#![doc = include_str!("../README.md")]

mod backoff;
mod callback;
mod client;
mod dedupe;
mod dispatch;
mod error;
mod executor;
mod handler;
mod lifecycle;
mod logs;
mod outcome;
mod registration;
mod run;
mod runner;
mod server;
mod shutdown;
pub mod signature;

pub use dedupe::{Claim, DedupeError, DedupeStore, MemoryDedupe};
pub use error::Error;
pub use executor::Executor;
pub use handler::BAD_PARAMS_CODE;
pub use lifecycle::EXECUTOR_SHUTDOWN_CODE;
pub use outcome::{Failed, Outcome, Status, ERROR_CODE};
pub use run::Run;
pub use server::PROTOCOL_VERSION;
pub use shutdown::ShutdownHandle;
