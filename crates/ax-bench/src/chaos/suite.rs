//! What every scenario of the chaos suite shares: the servers, the ax processes, the executor
//! and the load.

use std::path::PathBuf;

use ax_cron::CronSchedule;

use super::fixtures::{Mariadb, Netns, Redis};
use super::nodes::Nodes;
use crate::load::db::BenchStore;
use crate::load::executor::MockExecutor;

/// What every scenario shares. Fields drop in order: the ax processes before the servers they
/// use, the namespace last.
pub struct Suite {
    pub(super) nodes: Nodes,
    pub(super) executor: MockExecutor,
    pub(super) store: BenchStore,
    pub(super) redis: Redis,
    pub(super) mariadb: Mariadb,
    pub(super) netns: Option<Netns>,
    /// Why there is no namespace, when a scenario wanted one.
    pub(super) netns_error: Option<String>,
    pub(super) dir: PathBuf,
    pub(super) tasks: Vec<(i64, CronSchedule)>,
    /// The tasks' dispatch fields, for a scenario that registers them in another store.
    pub(super) target: serde_json::Value,
    pub(super) load: Load,
}

/// The load every scenario runs under.
#[derive(Debug, Clone, Copy)]
pub struct Load {
    pub tasks: u32,
    pub period: u32,
}
