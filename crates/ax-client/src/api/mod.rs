//! Talking to the API: requests, replies as they are printed, and the errors of both.

pub mod error;
pub mod http;
pub mod output;
