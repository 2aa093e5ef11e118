//! A task: its fields, declared once, and what is decided about tasks without I/O (labels,
//! executors, dependencies, the schedule's load, search).

pub mod dependencies;
pub mod executor;
pub mod fields;
pub mod labels;
pub mod schedule_load;
pub mod search;
