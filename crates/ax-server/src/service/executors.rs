//! Executor groups: their definitions, the members that register themselves, and what this
//! process's dispatchers know of each member's health.

use ax_core::ids::GroupName;
use std::collections::HashMap;

use chrono::{DateTime, Duration, Utc};

use super::error::{Result, ServiceError};
use super::Service;
pub use crate::actors::groups::MemberState;
use crate::actors::store::boxed;
use ax_core::dispatch::routing::Routing;
use ax_core::security::Principal;
use ax_store::queries::executors::{
    self, GoneRow, GroupRow, GroupSettings, Holder, Joining, MemberCap, MemberRow, Registered,
    Registrant, Unregistered, GONE_SHOWN_SECS,
};
use ax_store::rows::models::AuditAction;
use ax_store::to_db;

/// A group's definition, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupInput {
    pub routing: Routing,
    pub max_in_flight: i32,
    /// Members given by the definition, in order (they never expire).
    pub members: Vec<String>,
}

/// A member registering itself (or heartbeating).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    pub url: String,
    /// Caps its requests in flight below the group's `maxInFlight`.
    pub capacity: Option<i32>,
}

/// A group with its live members, and those gone from it in the last hour.
#[derive(Debug, Clone)]
pub struct GroupDetails {
    pub group: GroupRow,
    pub members: Vec<MemberRow>,
    pub gone: Vec<GoneRow>,
}

/// A group's per-member cap when its definition gives none.
pub const DEFAULT_MAX_IN_FLIGHT: i32 = 64;

/// The defaults of a group that a registration creates.
const DEFAULTS: GroupSettings<'static> = GroupSettings {
    routing: "ROUND_ROBIN",
    max_in_flight: DEFAULT_MAX_IN_FLIGHT,
};

impl Service {
    fn live_since(&self, now: DateTime<Utc>) -> chrono::NaiveDateTime {
        to_db(now - Duration::seconds(self.executors.member_ttl_secs))
    }

    /// Since when a gone member is listed.
    fn gone_since(&self, now: DateTime<Utc>) -> chrono::NaiveDateTime {
        to_db(now - Duration::seconds(GONE_SHOWN_SECS))
    }

    /// Creates or replaces group `name`; answers whether it was created.
    pub async fn put_executor_group(
        &self,
        name: GroupName,
        input: GroupInput,
        actor: &Principal,
    ) -> Result<bool> {
        let now = to_db(self.clock.now());
        let (group, members) = (name.clone(), input.members.clone());
        let routing = input.routing.name();
        let max_in_flight = input.max_in_flight;
        let created = self
            .store
            .write((group, members), move |conn, (group, members)| {
                boxed(async move {
                    let settings = GroupSettings {
                        routing,
                        max_in_flight,
                    };
                    executors::put_group(conn, &group, settings, &members, now).await
                })
            })
            .await?;
        let summary = format!(
            "{} routing {routing}, maxInFlight {max_in_flight}, {} defined members",
            if created { "created:" } else { "replaced:" },
            input.members.len()
        );
        self.dispatch.refresh_groups().await;
        let action = AuditAction::ExecutorGroupPut;
        self.audit(actor, action, format!("executor group {name}"), summary)
            .await;
        Ok(created)
    }

    /// Every group with its live members and those gone in the last hour.
    pub async fn executor_groups(&self) -> Result<Vec<GroupDetails>> {
        let now = self.clock.now();
        let (live_since, gone_since) = (self.live_since(now), self.gone_since(now));
        let (groups, mut members, mut gone) = self
            .store
            .query(move |conn| {
                boxed(async move {
                    let groups = executors::groups(conn).await?;
                    let members = executors::members(conn, None, live_since).await?;
                    let gone = executors::gone(conn, None, gone_since).await?;
                    Ok((groups, members, gone))
                })
            })
            .await?;
        Ok(groups
            .into_iter()
            .map(|group| GroupDetails {
                members: take_group(&mut members, &group.name, |m| &m.group_name),
                gone: take_group(&mut gone, &group.name, |m| &m.group_name),
                group,
            })
            .collect())
    }

    /// Group `name` with its live members and those gone in the last hour.
    pub async fn executor_group(&self, name: GroupName) -> Result<GroupDetails> {
        let now = self.clock.now();
        let (live_since, gone_since) = (self.live_since(now), self.gone_since(now));
        let wanted = name.clone();
        let found = self
            .store
            .query(move |conn| {
                boxed(async move {
                    let Some(group) = executors::group(conn, &wanted).await? else {
                        return Ok(None);
                    };
                    let members = executors::members(conn, Some(&wanted), live_since).await?;
                    let gone = executors::gone(conn, Some(&wanted), gone_since).await?;
                    Ok(Some(GroupDetails {
                        group,
                        members,
                        gone,
                    }))
                })
            })
            .await?;
        found.ok_or(ServiceError::GroupNotFound(name))
    }

    /// The members gone from their groups in the last hour (for the dashboard).
    pub async fn gone_members(&self) -> Result<Vec<GoneRow>> {
        let since = self.gone_since(self.clock.now());
        Ok(self
            .store
            .query(move |conn| boxed(async move { executors::gone(conn, None, since).await }))
            .await?)
    }

    /// Deletes group `name`, refused while tasks are dispatched to it.
    pub async fn delete_executor_group(&self, name: GroupName, actor: &Principal) -> Result<()> {
        let group = name.clone();
        let deleted = self
            .store
            .write(group, move |conn, group| {
                boxed(async move {
                    let users = executors::tasks_using(conn, &group).await?;
                    if !users.is_empty() {
                        return Ok(Err(users));
                    }
                    Ok(Ok(executors::delete_group(conn, &group).await?))
                })
            })
            .await?;
        match deleted {
            Err(tasks) => Err(ServiceError::GroupInUse { group: name, tasks }),
            Ok(false) => Err(ServiceError::GroupNotFound(name)),
            Ok(true) => {
                self.dispatch.refresh_groups().await;
                let target = format!("executor group {name}");
                self.audit(
                    actor,
                    AuditAction::ExecutorGroupDelete,
                    target,
                    "deleted".into(),
                )
                .await;
                Ok(())
            }
        }
    }

    /// Registers a member (its first call) or renews it (a heartbeat), creating its group
    /// with the defaults when there is none. An executor's token joins only its groups, renews
    /// only the members it registered, and a group takes `executors.max_registered_members`
    /// live registered members at most. Answers whether it joined (else it was renewed).
    /// Joining and leaving are audited, heartbeats not.
    pub async fn register_member(
        &self,
        group: GroupName,
        member: Registration,
        actor: &Principal,
    ) -> Result<bool> {
        may_join(actor, &group)?;
        let now = self.clock.now();
        let cap = MemberCap {
            max: self.executors.max_registered_members,
            live_since: self.live_since(now),
        };
        let (name, url, token) = (group.clone(), member.url.clone(), actor.name.clone());
        let capacity = member.capacity;
        let acts_on_any = actor.acts_on_any_member();
        let registered = self
            .store
            .write((name, url, token), move |conn, (name, url, token)| {
                boxed(async move {
                    let joining = Joining {
                        group: &name,
                        url: &url,
                        capacity,
                        by: Registrant {
                            token: &token,
                            acts_on_any,
                        },
                    };
                    executors::register(conn, joining, DEFAULTS, cap, to_db(now)).await
                })
            })
            .await?;
        let url = member.url;
        let group_created = match registered {
            Registered::Held => {
                let holder = Holder::OtherToken;
                return Err(ServiceError::MemberHeld { group, url, holder });
            }
            Registered::Full { max } => return Err(ServiceError::GroupFull { group, max }),
            Registered::Renewed => return Ok(false),
            Registered::Joined { group_created } => group_created,
        };
        self.dispatch.refresh_groups().await;
        log::info!(
            "executor group `{group}`: member {url} joined (token `{}`)",
            actor.name
        );
        let summary = match group_created {
            true => format!("{url} joined (group created)"),
            false => format!("{url} joined"),
        };
        let target = format!("executor group {group}");
        self.audit(actor, AuditAction::ExecutorMemberJoin, target, summary)
            .await;
        Ok(true)
    }

    /// Removes a member (a graceful shutdown); refused when it is not there, and to an
    /// executor's token for a member it did not register.
    pub async fn unregister_member(
        &self,
        group: GroupName,
        url: String,
        actor: &Principal,
    ) -> Result<()> {
        may_join(actor, &group)?;
        let (name, member, token) = (group.clone(), url.clone(), actor.name.clone());
        let acts_on_any = actor.acts_on_any_member();
        let now = to_db(self.clock.now());
        let unregistered = self
            .store
            .write((name, member, token), move |conn, (name, member, token)| {
                boxed(async move {
                    let by = Registrant {
                        token: &token,
                        acts_on_any,
                    };
                    executors::unregister(conn, &name, &member, by, now).await
                })
            })
            .await?;
        match unregistered {
            Unregistered::Removed => {}
            Unregistered::NotFound => return Err(ServiceError::MemberNotFound { group, url }),
            Unregistered::Held(holder) => {
                return Err(ServiceError::MemberHeld { group, url, holder })
            }
        }
        self.dispatch.refresh_groups().await;
        log::info!(
            "executor group `{group}`: member {url} left (token `{}`)",
            actor.name
        );
        let target = format!("executor group {group}");
        self.audit(
            actor,
            AuditAction::ExecutorMemberLeave,
            target,
            format!("{url} left"),
        )
        .await;
        Ok(())
    }

    /// Each member's health (shared by the cluster) and its load here, by URL.
    pub fn member_states(&self) -> HashMap<String, MemberState> {
        self.dispatch.member_states()
    }

    /// Each executor host's load in this process (its slots, in both lanes), and how many
    /// tasks are in the slow lane.
    pub fn host_loads(&self) -> (Vec<ax_core::dispatch::host_slots::HostLoad>, usize) {
        self.dispatch.host_loads()
    }

    /// How often a registered member is to heartbeat, in seconds.
    pub fn heartbeat_secs(&self) -> i64 {
        self.executors.heartbeat_secs
    }
}

/// Refuses a token that may not register members into `group` (an executor's token outside
/// its `groups`).
fn may_join(actor: &Principal, group: &str) -> Result<()> {
    match actor.may_join(group) {
        true => Ok(()),
        false => Err(ServiceError::NotInGroups {
            token: actor.name.clone(),
            group: group.to_string(),
            groups: actor.groups.shown(),
        }),
    }
}

/// Takes the rows of group `name` out of `rows`, keeping their order.
fn take_group<T>(rows: &mut Vec<T>, name: &str, group_of: impl Fn(&T) -> &GroupName) -> Vec<T> {
    let (mine, rest) = std::mem::take(rows)
        .into_iter()
        .partition(|row| group_of(row) == name);
    *rows = rest;
    mine
}
