//! Connecting to a store: which database a URL names, which of its servers answers, PostgreSQL's
//! connections (TLS), the migrations, SQLite's write turns,
//! the prepared statements of the batched writes, and the store's errors.

pub mod backend;
pub mod error;
pub mod hosts;
pub mod migrate;
pub mod postgres;
pub mod prepared;
pub mod write_turns;
