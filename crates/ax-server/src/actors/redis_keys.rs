//! The name of every key ax writes in Redis, all under `redis.key_prefix` (`ax:` by default,
//! which gives the design's keys): two deployments with databases of their own share one
//! Redis under different prefixes, and never take each other's locks or heartbeats.

use std::sync::Arc;

use ax_core::run::TaskId;

/// The prefix the default `redis.key_prefix` gives: the design's keys.
pub const DEFAULT_PREFIX: &str = "ax:";

/// The Redis keys of one deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisKeys {
    prefix: Arc<str>,
}

impl RedisKeys {
    pub fn new(prefix: &str) -> Self {
        RedisKeys {
            prefix: prefix.into(),
        }
    }

    /// A task's fire lock.
    pub fn lock(&self, task_id: TaskId) -> String {
        format!("{}lock:{task_id}", self.prefix)
    }

    /// A process's heartbeat.
    pub fn heartbeat(&self, instance_id: &str) -> String {
        format!("{}instance:{instance_id}", self.prefix)
    }

    /// The set of processes that have announced themselves.
    pub fn members(&self) -> String {
        format!("{}instances", self.prefix)
    }
}

impl Default for RedisKeys {
    fn default() -> Self {
        RedisKeys::new(DEFAULT_PREFIX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_prefix_gives_the_designs_keys() {
        let keys = RedisKeys::default();
        assert_eq!(keys.lock(TaskId(42)), "ax:lock:42");
        assert_eq!(keys.heartbeat("node-1"), "ax:instance:node-1");
        assert_eq!(keys.members(), "ax:instances");
    }

    #[test]
    fn every_key_is_under_the_prefix() {
        let keys = RedisKeys::new("billing:ax:");
        for key in [keys.lock(TaskId(7)), keys.heartbeat("a"), keys.members()] {
            assert!(key.starts_with("billing:ax:"), "{key}");
        }
    }
}
