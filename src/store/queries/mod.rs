//! Every query ax runs, written once for all backends (see `with_conn!`).

pub mod attempts;
pub mod audit;
pub mod instances;
pub mod meta;
pub mod overlap;
pub mod overview;
pub mod runs;
pub mod sessions;
pub mod tasks;

/// One page of a listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    pub limit: i64,
    pub offset: i64,
}
