//! What fires when: the plan for a task whose time came, including the missed-run policy, and
//! the dependency graph's one rule (no cycles).
//! Pure logic, no I/O: time is always an argument.

mod backfill;
mod dependencies;
mod fire;

pub use backfill::{fire_times, paced, MAX_BACKFILL_RUNS};
pub use dependencies::dependency_cycle;
pub use fire::{
    plan_each, plan_fires, FirePlan, MissedRunPolicy, RunDecision, TaskSpec, MAX_COUNTED_PERIODS,
};
