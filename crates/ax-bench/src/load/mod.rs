//! What `ax bench` runs: the design's load on one process or a cluster (executor, seeded
//! tasks, counters, event streams, the resource usage they cost) and the console bench
//! (`ax bench console`).

pub mod cluster;
pub mod console;
pub mod counters;
pub mod db;
pub mod event_streams;
pub mod executor;
pub mod kinds;
pub mod register;
pub mod seed;
pub mod timing;
pub mod usage;
