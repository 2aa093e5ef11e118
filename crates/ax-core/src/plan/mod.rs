//! What fires when: the plan for a task whose time came, including the missed-run policy.
//! Pure logic, no I/O: time is always an argument.

mod backfill;
mod fire;
pub mod sync;

pub use backfill::{fire_times, paced, MAX_BACKFILL_RUNS};
pub use fire::{
    periods, plan_each, plan_fires, FirePlan, MissedRunPolicy, RunDecision, TaskSpec,
    MAX_COUNTED_PERIODS,
};
