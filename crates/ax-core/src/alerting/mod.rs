//! Alerts: which events tell people, on which channels, and how repeats fold instead of
//! flooding. Pure decisions — the rule that applies to a task, whether an event alerts now,
//! waits for its threshold or folds into a silence; the outbox that keeps alerts and the
//! channels that send them are the store's and the sender's.

mod batch;
mod channel;
mod fold;
mod group;
mod lane;
mod message;
mod outage;
mod outbox;
mod queued;
mod rule;
mod window;

pub use batch::{fold_asks, FoldStates, Folded, WatchChanges};
pub use channel::{check_channels, expand, Channel, ChannelError, ChannelKind};
pub use fold::{retry_at, FoldState, Verdict};
pub use group::{
    closed_window, group_message, group_of, member_subject, process_subject, Group, FIRST_NAMED,
};
pub use lane::AlertLane;
pub use message::{Alert, TemplateError};
pub use outage::{Outage, OutageVerdict};
pub use outbox::{outbox_rows, NewAlert};
pub use queued::{asked, Asked, QueuedEvent, Subject, TaskFacts};
pub use rule::{event_of, most_specific, AlertEvent, AlertRule, AlertStatus, RuleError};
pub use window::{closed_groups, window_rows};
