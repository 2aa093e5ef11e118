//! ax (Action eXecutor): a distributed cron scheduler that calls HTTP handlers.

#[macro_use]
mod text_enum;

pub mod actors;
pub mod alerting;
pub mod api;
pub mod app;
pub mod attention;
pub mod audit;
pub mod auth_throttle;
pub mod bench;
pub mod client;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod console;
pub mod dependencies;
pub mod dispatch;
pub mod error;
pub mod etag;
pub mod fencing;
pub mod group_commit;
pub mod health;
pub mod http_errors;
pub mod labels;
pub mod metrics;
pub mod nesting;
pub mod notify;
pub mod percentile;
pub mod plan;
pub mod run;
pub mod run_feed;
pub mod run_history;
pub mod run_log;
pub mod schedule_load;
pub mod search;
pub mod security;
pub mod service;
pub mod store;
pub mod task_executor;
pub mod task_fields;
pub mod text;
pub mod web;
pub mod wheel;

/// The exit status of every `ax` command for bad input (an invalid expression, option, config
/// or file), with a message on stderr.
pub const EXIT_USAGE: u8 = 2;
