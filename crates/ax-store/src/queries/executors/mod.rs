//! Executor groups and their members: defined by `PUT /api/executors/{group}` (`groups`),
//! joined by executors registering themselves (`registration`), listed as gone when they
//! leave (`gone`), their health shared by every ax process's dispatchers (`health`).

mod gone;
mod groups;
mod health;
mod registration;

pub use gone::{expire, gone, Gone, GoneRow, GONE_SHOWN_SECS};
pub use groups::{
    delete_group, group, groups, members, put_group, tasks_using, GroupRow, GroupSettings,
    MemberRow,
};
pub use health::{health, share_health, HealthRow};
pub use registration::{
    register, unregister, Holder, Joining, MemberCap, Registered, Registrant, Unregistered,
};
