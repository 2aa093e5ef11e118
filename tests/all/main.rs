//! ax's integration tests, one binary (crates.io's shape): the harness ([`common`]) compiles
//! once, and each module is what was a test binary of its own. Every async test runs in a
//! [`common::TestSystem`], which stops whatever the test started — its ax, their actors,
//! arbiters, pools and servers — when it ends, failed or not: nothing outlives its test in the
//! one process. A scenario on both stores is declared with [`common::on_each_backend!`].
//!
//! `cargo test --test all MODULE::` runs one module (`cargo test --test all console::`). The
//! tests that must run one at a time in a process of their own are in `tests/alone/`.

mod common;

mod access;
mod alerts;
mod browser;
mod browser_attention;
mod browser_calendars;
mod browser_editor;
mod browser_first_hour;
mod browser_history;
mod browser_hosts;
mod browser_keys;
mod browser_tasks;
mod bulk;
mod calendars;
mod cli;
mod cli_commands;
mod client;
mod config;
mod console;
mod console_calendars;
mod console_friction;
mod copy;
mod crash;
mod dashboard;
mod docs;
mod e2e;
mod events;
mod executor_check;
mod executors;
mod input;
mod isolation;
mod labels;
mod lock;
mod logs;
mod openapi;
mod operations;
mod outage;
mod overload;
mod policies;
mod protocol;
mod python_executor;
mod quickstart;
mod recovery;
mod run_history;
mod run_logs;
mod schedule;
mod search;
mod security;
mod sites;
mod startup;
mod store;
mod task_files;
