//! What `ax bench` reports: latencies and their analysis, the profile, and the report's fields.

pub mod analysis;
pub mod profile;
pub mod report;
