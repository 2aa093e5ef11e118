//! The executor groups as this process dispatches to them: their live members and each
//! member's health, read from the store each second (so every ax process of a cluster routes
//! over the same registrations and sets aside the same members), with the changes of health
//! seen here written in the same round trip. A dispatch reads only this cache. Which member an
//! attempt goes to is `ax_core::dispatch::routing`'s decision; this shell holds the state it decides on.

use ax_core::ids::GroupName;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use chrono::{DateTime, NaiveDateTime, Utc};

use super::store::{boxed, StoreHandle};
use ax_core::dispatch::routing::{
    pick, pick_shard, Candidate, Exchange, Health, HealthRule, HealthState, Routing, Share,
    SharedHealth, Transition,
};
use ax_core::metrics::{metrics, MemberGauge};
use ax_core::run::TaskId;
use ax_core::task::executor::TaskExecutor;
use ax_store::queries::executors::{self, GroupRow, HealthRow, MemberRow};
use ax_store::rows::models::{cut, MAX_MESSAGE_CHARS};
use ax_store::{from_db, to_db};

/// A group as routed over now.
#[derive(Debug, Clone)]
struct Group {
    routing: Routing,
    max_in_flight: usize,
    /// In registration order.
    members: Vec<Member>,
}

#[derive(Debug, Clone)]
struct Member {
    url: Arc<str>,
    /// The group's `maxInFlight`, or the member's registered capacity when lower.
    cap: usize,
}

/// Where an attempt goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    To {
        member: Arc<str>,
        cap: usize,
        /// The run is a broadcast's: it carries its shard.
        broadcast: bool,
    },
    /// No group of that name (yet): the message says so.
    NoMember(String),
}

/// A member's health (shared by the cluster) and its load here, as `GET /api/executors` shows
/// it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberState {
    pub state: HealthState,
    /// Set aside until then (while UNHEALTHY, and PROBING after).
    pub unhealthy_until: Option<DateTime<Utc>>,
    /// Its last transport failure, and what it said.
    pub last_failure_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
    /// This process's requests in flight to it, and its dispatches' ends here.
    pub in_flight: usize,
    pub successes: u64,
    pub failures: u64,
}

/// A member's health to write: whole (`state`), or only its last failure.
type Pending = HashMap<Arc<str>, (SharedHealth, bool)>;

/// The groups, their members' health, and the settings they are kept by.
pub struct ExecutorGroups {
    by_name: RwLock<HashMap<GroupName, Group>>,
    /// By member URL (a server in two groups is one member's health).
    health: Mutex<HashMap<Arc<str>, Health>>,
    /// Changes of health seen here, written at the next refresh.
    pending: Mutex<Pending>,
    /// Bumped at each pick: ROUND_ROBIN's position.
    turns: AtomicU64,
    rule: HealthRule,
    /// How long a registered member lives without a heartbeat, in seconds.
    member_ttl_secs: i64,
    /// Which groups' members `/metrics` shows (see `NEXT_SHOWN_AS`).
    shown_as: u64,
}

/// How the executor groups' members are kept.
#[derive(Debug, Clone, Copy)]
pub struct GroupSettings {
    pub failures_to_cool: u32,
    pub cool_down_secs: i64,
    pub member_ttl_secs: i64,
}

fn now_ms() -> i64 {
    Utc::now().timestamp_millis()
}

/// Expired registrations are deleted this often (each process filters them out at once).
const EXPIRY_EVERY_SECS: u64 = 10;

/// Numbers each `ExecutorGroups` of this process for `/metrics` (tests run several ax apps in
/// one process).
static NEXT_SHOWN_AS: AtomicU64 = AtomicU64::new(0);

impl ExecutorGroups {
    pub fn new(settings: GroupSettings) -> ExecutorGroups {
        ExecutorGroups {
            by_name: RwLock::default(),
            health: Mutex::default(),
            pending: Mutex::default(),
            turns: AtomicU64::new(0),
            rule: HealthRule {
                failures_to_cool: settings.failures_to_cool,
                cool_down_ms: settings.cool_down_secs * 1000,
            },
            member_ttl_secs: settings.member_ttl_secs,
            shown_as: NEXT_SHOWN_AS.fetch_add(1, Ordering::Relaxed),
        }
    }

    fn health(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, Health>> {
        self.health
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The members a fire of a broadcast task is sharded over now, in registration order: the
    /// group's members not cooling down. `None` when the task's runs are not broadcast.
    pub fn broadcast_members(&self, executor: &TaskExecutor) -> Option<Vec<Arc<str>>> {
        let groups = self
            .by_name
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let group = groups.get(&executor.group);
        let routing = executor.routing.or(group.map(|g| g.routing));
        if routing != Some(Routing::Broadcast) {
            return None;
        }
        let now = now_ms();
        let health = self.health();
        let members = group.map(|g| g.members.as_slice()).unwrap_or_default();
        Some(
            members
                .iter()
                .filter(|m| health.get(&m.url).is_none_or(|h| h.usable(now)))
                .map(|m| m.url.clone())
                .collect(),
        )
    }

    /// Picks the member an attempt of `task` goes to, never one of `tried` (those this attempt
    /// could not reach); `own`: a broadcast shard's member, given at fire time; `in_flight`
    /// tells a member's requests in flight here.
    pub fn route(
        &self,
        executor: &TaskExecutor,
        task: TaskId,
        (tried, own): (&[Arc<str>], Option<&str>),
        in_flight: impl Fn(&str) -> usize,
    ) -> Route {
        let groups = self
            .by_name
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(group) = groups.get(&executor.group) else {
            return Route::NoMember(format!(
                "executor group `{}` does not exist (yet): no member to send to",
                executor.group
            ));
        };
        let now = now_ms();
        let mut health = self.health();
        let candidates: Vec<Candidate> = group
            .members
            .iter()
            .map(|member| Candidate {
                url: &member.url,
                in_flight: in_flight(&member.url),
                cap: member.cap,
                usable: health.get(&member.url).is_none_or(|h| h.usable(now)),
            })
            .collect();
        let tried: Vec<&str> = tried.iter().map(|url| &**url).collect();
        let routing = executor.routing.unwrap_or(group.routing);
        let turn = self.turns.fetch_add(1, Ordering::Relaxed);
        let random = uuid::Uuid::new_v4().as_u64_pair().0;
        let picked = match routing {
            Routing::Broadcast => pick_shard(&candidates, &tried, own),
            _ => pick(routing, &candidates, &tried, task.0 as u64, turn, random),
        };
        let Some(n) = picked else {
            let why = match (group.members.len(), tried.len()) {
                (0, _) => "has no member".to_string(),
                (_, 0) => "has no healthy member".to_string(),
                (_, n) => format!("has no healthy member left after {n} refused the attempt"),
            };
            return Route::NoMember(format!("executor group `{}` {why}", executor.group));
        };
        let member = &group.members[n];
        health.entry(member.url.clone()).or_default().sending(now);
        Route::To {
            member: member.url.clone(),
            cap: member.cap,
            broadcast: routing == Routing::Broadcast,
        }
    }

    /// Notes how an exchange with `member` of `group` ended (only a transport failure counts
    /// against it: see `routing::Exchange`).
    pub fn served(&self, group: &str, member: &Arc<str>, exchange: &Exchange) {
        let mut health = self.health();
        let entry = health.entry(member.clone()).or_default();
        let observed = entry.observe(exchange, self.rule, now_ms());
        if let Some(share) = observed.share {
            let mut pending = self.pending();
            let state = share == Share::State || pending.get(member).is_some_and(|(_, s)| *s);
            pending.insert(member.clone(), (entry.shared(), state));
        }
        if let Some(transition) = observed.transition {
            match transition {
                Transition::WentUnhealthy => log::warn!(
                    "executor group `{group}`: member {member} is unhealthy after {} transport \
                     failures ({}); skipped for {} s, then probed",
                    entry.consecutive_failures().max(1),
                    entry.last_error().unwrap_or_default(),
                    self.rule.cool_down_ms / 1000
                ),
                Transition::Recovered => {
                    log::info!("executor group `{group}`: member {member} is healthy again")
                }
            }
        }
    }

    /// Each member of each group with its health and load here, as `(group, url, state)`.
    fn members_now(
        &self,
        in_flight: impl Fn(&str) -> usize,
    ) -> Vec<(GroupName, String, MemberState)> {
        let now = now_ms();
        let groups = self
            .by_name
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let health = self.health();
        groups
            .iter()
            .flat_map(|(name, group)| group.members.iter().map(move |m| (name, m)))
            .map(|(name, member)| {
                let seen = health.get(&member.url).cloned().unwrap_or_default();
                let state = MemberState {
                    state: seen.state(now),
                    unhealthy_until: seen.unhealthy_until_ms().and_then(from_ms),
                    last_failure_at: seen.last_failure_ms().and_then(from_ms),
                    last_error: seen.last_error().map(str::to_string),
                    in_flight: in_flight(&member.url),
                    successes: seen.successes(),
                    failures: seen.failures(),
                };
                (name.clone(), member.url.to_string(), state)
            })
            .collect()
    }

    /// Each member's health here, by URL, with `in_flight` telling its requests in flight.
    pub fn states(&self, in_flight: impl Fn(&str) -> usize) -> HashMap<String, MemberState> {
        self.members_now(in_flight)
            .into_iter()
            .map(|(_, url, state)| (url, state))
            .collect()
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Writes the changes of health seen here, then reads the groups, their live members and
    /// every member's shared health from the store (and, every few seconds, deletes the
    /// registrations that expired), in one round trip; a store out of reach leaves them as
    /// they were and keeps the changes for the next.
    pub async fn refresh(&self, store: &StoreHandle, tick: u64) {
        let now = Utc::now();
        let cutoff = to_db(now - chrono::Duration::seconds(self.member_ttl_secs));
        let expire = tick.is_multiple_of(EXPIRY_EVERY_SECS);
        let writes: Vec<(HealthRow, bool)> = self
            .pending()
            .iter()
            .map(|(url, (shared, state))| (health_row(url, shared), *state))
            .collect();
        let written = writes.clone();
        let read = store
            .query(move |conn| {
                boxed(async move {
                    for (row, state) in writes {
                        executors::share_health(conn, row, state).await?;
                    }
                    if expire {
                        let gone = executors::expire(conn, cutoff, to_db(now)).await?;
                        if gone > 0 {
                            log::info!("{gone} executor members dropped: not heard from in time");
                        }
                    }
                    let groups = executors::groups(conn).await?;
                    let members = executors::members(conn, None, cutoff).await?;
                    let health = executors::health(conn).await?;
                    Ok((groups, members, health))
                })
            })
            .await;
        match read {
            Ok((groups, members, health)) => {
                self.forget_written(&written);
                self.replace(groups, members);
                self.adopt(health);
            }
            Err(err) => log::warn!("executor groups not refreshed: {err}"),
        }
    }

    /// Drops the pending changes that were written (not those seen again meanwhile).
    fn forget_written(&self, written: &[(HealthRow, bool)]) {
        let mut pending = self.pending();
        for (row, state) in written {
            let url: &str = &row.url;
            let same = pending
                .get(url)
                .is_some_and(|(shared, s)| health_row(url, shared) == *row && s == state);
            if same {
                pending.remove(url);
            }
        }
    }

    /// Takes the cluster's health of each member (see `Health::adopt`).
    fn adopt(&self, rows: Vec<HealthRow>) {
        let mut health = self.health();
        for row in rows {
            let shared = SharedHealth {
                unhealthy_until_ms: row.unhealthy_until.map(to_ms),
                last_failure_ms: row.last_failure_at.map(to_ms),
                last_error: row.last_error,
                changed_ms: to_ms(row.changed_at),
            };
            let url: Arc<str> = row.url.into();
            if let Some(transition) = health.entry(url.clone()).or_default().adopt(&shared) {
                log::info!("executor member {url}: {transition:?}, as another ax process saw");
            }
        }
    }

    fn replace(&self, rows: Vec<GroupRow>, members: Vec<MemberRow>) {
        let mut groups: HashMap<GroupName, Group> = rows
            .into_iter()
            .map(|row| {
                let group = Group {
                    routing: Routing::parse(&row.routing).unwrap_or(Routing::DEFAULT),
                    max_in_flight: usize::try_from(row.max_in_flight).unwrap_or(1).max(1),
                    members: Vec::new(),
                };
                (row.name, group)
            })
            .collect();
        for row in members {
            if let Some(group) = groups.get_mut(&row.group_name) {
                let capacity = row.capacity.and_then(|c| usize::try_from(c).ok());
                let cap = capacity.map_or(group.max_in_flight, |c| c.min(group.max_in_flight));
                group.members.push(Member {
                    url: row.url.into(),
                    cap: cap.max(1),
                });
            }
        }
        *self
            .by_name
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = groups;
    }

    /// Shows each member's health and load in `/metrics`.
    pub fn show(&self, in_flight: impl Fn(&str) -> usize) {
        let gauges = self
            .members_now(in_flight)
            .into_iter()
            .map(|(group, member, state)| MemberGauge {
                group,
                member,
                healthy: state.state == HealthState::Healthy,
                in_flight: state.in_flight,
                successes: state.successes,
                failures: state.failures,
            })
            .collect();
        metrics().executor_members(self.shown_as, Some(gauges));
    }
}

fn to_ms(at: NaiveDateTime) -> i64 {
    from_db(at).timestamp_millis()
}

fn from_ms(ms: i64) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp_millis(ms)
}

/// A member's health as its row is written.
fn health_row(url: &str, shared: &SharedHealth) -> HealthRow {
    let at = |ms: i64| to_db(from_ms(ms).unwrap_or(DateTime::UNIX_EPOCH));
    HealthRow {
        url: url.to_string(),
        unhealthy_until: shared.unhealthy_until_ms.map(at),
        last_failure_at: shared.last_failure_ms.map(at),
        last_error: shared.last_error.clone().map(|e| cut(e, MAX_MESSAGE_CHARS)),
        changed_at: at(shared.changed_ms),
    }
}

impl Drop for ExecutorGroups {
    fn drop(&mut self) {
        metrics().executor_members(self.shown_as, None);
    }
}
