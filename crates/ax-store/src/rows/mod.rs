//! Rows as stored: the schema, the models, and times as the store keeps them.

pub mod models;
pub mod schema;
pub mod time;
