//! ax (Action eXecutor): a distributed cron scheduler that calls HTTP handlers.

pub mod actors;
pub mod api;
pub mod app;
pub mod bench;
pub mod clock;
pub mod config;
pub mod cron;
pub mod error;
pub mod health;
pub mod identity;
pub mod ids;
pub mod metrics;
pub mod schedule;
pub mod scheduler;
pub mod security;
pub mod store;
pub mod wheel;
