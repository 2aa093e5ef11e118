//! The query layer on both real backends: every scenario is written once against `Db` and run
//! on a fresh SQLite file and on a fresh MariaDB database.
//!
//! The modules follow the code they test: `connect` the store itself (`crates/ax-store/src/lib.rs`),
//! `tasks`, `task_changes`, `meta`, `leases`, `executors`, `overview` and `search` their query modules,
//! `fires` and `history` the parts of
//! `queries/instances.rs`, `runs` (the writes themselves), `results`, `attempts` and `pending`
//! the parts of `queries/transitions.rs`, and `store_actor` the StoreActor (`crates/ax-server/src/actors/store.rs`).
//! `support` holds the helpers and `on_every_backend!`.

mod support;

mod alert_claims;
mod attempts;
mod connect;
mod executors;
mod fires;
mod history;
mod leases;
mod meta;
mod overview;
mod pending;
mod results;
mod runs;
mod search;
mod shards;
mod store_actor;
mod success_watch;
mod task_changes;
mod tasks;
