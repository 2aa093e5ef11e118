//! Every change of a run's row, decided here: one function per event, each returning the write
//! to make — with the compare-and-set condition that makes it safe against every other writer —
//! or a typed refusal. The store applies writes; it decides nothing.
//!
//! Attempts: `attempt` is the current one (in flight, or due next); `dispatched` is the highest
//! attempt handed to a dispatcher. An attempt is in flight while the run is open and
//! `dispatched == attempt`; its first result counts, any later one for it changes nothing.

mod blind;
mod changes;
mod decide;
mod event;
mod failure;
mod new_run;
mod report;
mod row;
mod upstreams;

pub use blind::blind;
pub use decide::on_event;
pub use event::{Event, Outcome, Report};
pub use new_run::NewRun;
pub use report::{ended_attempt, rejected_result, supersede, EndedAttempt};
pub use row::{Change, Expect, Refusal, RunState, Write};
pub use upstreams::{dependency_deadline, upstream_event};
