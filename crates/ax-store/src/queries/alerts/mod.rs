//! Alerts in the store: the queue of run ends (failures recorded by the database's triggers,
//! successes by their writer) and of events about no run (`queue`), folded into the outbox by
//! the rules (`fold`: one folder at a time over every ax process, holding the fold lock row's
//! lock; what it decides is `ax_core::alerting`'s), and the outbox's rows claimed, sent and
//! settled by the senders (`outbox`); the scenes' own rules (`scene_rules`).

mod fold;
mod outbox;
mod queue;
mod scene_rules;

pub use fold::{fold, FOLD_BATCH};
pub use outbox::{claim_due, list, settle_failed, settle_sent, AlertFilter, AlertRow};
pub use queue::{queue_successes, record, set_enabled};
pub use scene_rules::{scene_rule, set_scene_rule};
