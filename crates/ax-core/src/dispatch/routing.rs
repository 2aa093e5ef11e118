//! Routing inside an executor group: which member an attempt goes to, and each member's health:
//! what counts against a member (only a transport failure) and when it is set aside. Pure
//! decisions; the dispatchers hold the state, read the clock and do the sending.

use crate::hash::rendezvous_weight;

/// How a group (or a task overriding it) picks a member.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Routing {
    First,
    RoundRobin,
    Random,
    ConsistentHash,
    LeastBusy,
    Failover,
    Broadcast,
}

impl Routing {
    /// Every variant, in declaration order (the order of [`Routing::NAMES`]).
    const ALL: [Routing; 7] = [
        Routing::First,
        Routing::RoundRobin,
        Routing::Random,
        Routing::ConsistentHash,
        Routing::LeastBusy,
        Routing::Failover,
        Routing::Broadcast,
    ];

    /// Every name, in declaration order, as stored and serialized.
    pub const NAMES: &'static [&'static str] = &[
        "FIRST",
        "ROUND_ROBIN",
        "RANDOM",
        "CONSISTENT_HASH",
        "LEAST_BUSY",
        "FAILOVER",
        "BROADCAST",
    ];

    /// Spreads a group's load without any setting.
    pub const DEFAULT: Routing = Routing::RoundRobin;

    /// The stored and serialized name.
    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// Parses an exact name; `None` for anything else (no case folding, so one spelling is
    /// stored).
    pub fn parse(name: &str) -> Option<Routing> {
        Self::ALL.into_iter().find(|routing| routing.name() == name)
    }
}

/// A member as routing sees it at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate<'a> {
    /// The member's base URL: its identity.
    pub url: &'a str,
    /// Requests to it in flight now (this process).
    pub in_flight: usize,
    /// Its cap (>= 1).
    pub cap: usize,
    /// Healthy, or due its one probe (see [`Health::usable`]).
    pub usable: bool,
}

impl Candidate<'_> {
    /// A cap of 0 would make every ratio equal; count it as 1.
    fn cap(&self) -> usize {
        self.cap.max(1)
    }

    fn is_full(&self) -> bool {
        self.in_flight >= self.cap()
    }
}

/// Picks the member for an attempt, or `None` when no candidate is usable.
///
/// `candidates` are in registration order. `excluded`: urls already tried by this attempt
/// (failover inside an attempt), never picked. `key`: the task id (`CONSISTENT_HASH`).
/// `turn`: a counter the caller bumps per pick of the group (`ROUND_ROBIN`); `random`: a random
/// number the caller supplies (`RANDOM`). Returns the index into `candidates`.
pub fn pick(
    routing: Routing,
    candidates: &[Candidate],
    excluded: &[&str],
    key: u64,
    turn: u64,
    random: u64,
) -> Option<usize> {
    let open = |&i: &usize| {
        let candidate = &candidates[i];
        candidate.usable && !excluded.contains(&candidate.url)
    };
    let mut in_order = (0..candidates.len()).filter(open);
    match routing {
        Routing::First | Routing::Failover => in_order.next(),
        Routing::RoundRobin => walk_from(turn, candidates, open),
        Routing::Random => walk_from(random, candidates, open),
        // `min_by` keeps the first of equals: ties go to registration order. A broadcast
        // run without a member of its own (a manual run, a shard whose member is gone) goes
        // where it waits least.
        Routing::LeastBusy | Routing::Broadcast => in_order.min_by(|&a, &b| {
            let (a, b) = (&candidates[a], &candidates[b]);
            let load = |c: &Candidate, other: &Candidate| c.in_flight as u128 * other.cap() as u128;
            load(a, b).cmp(&load(b, a))
        }),
        // Regardless of fullness: a task stays on its member and queues there.
        Routing::ConsistentHash => in_order.max_by_key(|&i| {
            (
                rendezvous_weight(key, candidates[i].url),
                std::cmp::Reverse(i),
            )
        }),
    }
}

/// Picks the member for an attempt of a broadcast shard: `own`, the member it was given at
/// fire time, while that one is usable and not excluded; else as [`Routing::Broadcast`] does.
pub fn pick_shard(candidates: &[Candidate], excluded: &[&str], own: Option<&str>) -> Option<usize> {
    own.and_then(|own| {
        candidates
            .iter()
            .position(|c| c.url == own && c.usable && !excluded.contains(&own))
    })
    .or_else(|| pick(Routing::Broadcast, candidates, excluded, 0, 0, 0))
}

/// Walks forward from `start % len`: the first open member with room, or, when every open one
/// is full, the first open one (the attempt queues there rather than on a busier guess).
fn walk_from(start: u64, candidates: &[Candidate], open: impl Fn(&usize) -> bool) -> Option<usize> {
    let len = candidates.len();
    if len == 0 {
        return None;
    }
    let start = (start % len as u64) as usize;
    let order = || (0..len).map(move |step| (start + step) % len).filter(&open);
    order()
        .find(|&i| !candidates[i].is_full())
        .or_else(|| order().next())
}

/// A member's health as shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum HealthState {
    Healthy,
    /// Cooling down: nothing is sent to it.
    Unhealthy,
    /// Its cool-down is over: one probe is due or out, and its answer decides.
    Probing,
    /// No longer a member: it expired or left. Listed for an hour with when and why, never
    /// dispatched to.
    Gone,
}

/// When a member is set aside, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthRule {
    /// Failures in a row that cool a member down.
    pub failures_to_cool: u32,
    /// How long it is left alone before one probe is sent.
    pub cool_down_ms: i64,
}

impl Default for HealthRule {
    fn default() -> Self {
        HealthRule {
            failures_to_cool: 3,
            cool_down_ms: 30_000,
        }
    }
}

/// A change of health worth a log line or an alert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// It has just been set aside.
    WentUnhealthy,
    /// It has answered again after being set aside.
    Recovered,
}

/// How an attempt's exchange with a member ended, as the member's health sees it. Only a
/// transport failure counts against a member: a reply of any HTTP status or result, or one
/// slower than the task's `timeoutMs`, is the job's outcome, and a job that fails must not take
/// its member (and every other task on it) out of its group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exchange {
    /// It replied: any HTTP status, any result (`FAILED` included).
    Replied,
    /// Nothing about the member: its reply took longer than `timeoutMs`, or ax did not send
    /// the attempt for reasons of its own (an address the allowlist refuses, params not JSON).
    Inconclusive,
    /// A transport failure, with why: refused, reset or closed before a reply, DNS failure,
    /// connect timeout.
    Unreachable(String),
}

/// A member's health as the cluster shares it (its row in the store): every process
/// dispatches by it and shows it. The later change of state wins.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SharedHealth {
    /// Set while it is set aside: until when (ms).
    pub unhealthy_until_ms: Option<i64>,
    /// Its last transport failure (ms) and what it said.
    pub last_failure_ms: Option<i64>,
    pub last_error: Option<String>,
    /// When its state (healthy, or set aside until when) last changed (ms).
    pub changed_ms: i64,
}

/// What an observation leaves for the cluster to learn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Share {
    /// Its state changed: written whole, over any earlier change.
    State,
    /// A transport failure that changed no state: only the last failure is written.
    Failure,
}

/// What noting an exchange came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Observed {
    pub transition: Option<Transition>,
    pub share: Option<Share>,
}

/// One member's health: a member that keeps failing in transport is left alone for a while,
/// then tried with a single probe, so a dead member costs one request per cool-down. Failures
/// in a row are counted by each process; a change of state is shared by the cluster (see
/// [`Health::adopt`]), so every process sets aside the same members.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Health {
    consecutive_failures: u32,
    /// Set while unhealthy: when its probe may be sent.
    cooling_until_ms: Option<i64>,
    probe_out: bool,
    successes: u64,
    failures: u64,
    last_error: Option<String>,
    last_failure_ms: Option<i64>,
    /// When its state last changed, here or as adopted (ms).
    changed_ms: i64,
}

impl Health {
    /// Its state at `now_ms`.
    pub fn state(&self, now_ms: i64) -> HealthState {
        match self.cooling_until_ms {
            None => HealthState::Healthy,
            Some(until) if now_ms < until => HealthState::Unhealthy,
            Some(_) => HealthState::Probing,
        }
    }

    /// May an attempt go to it now: healthy; or its cool-down is over and no probe is out.
    pub fn usable(&self, now_ms: i64) -> bool {
        match self.cooling_until_ms {
            None => true,
            Some(until) => now_ms >= until && !self.probe_out,
        }
    }

    /// An attempt is being sent to it; when its cool-down is over this send is the probe, and
    /// no second one is sent until it ends.
    pub fn sending(&mut self, now_ms: i64) {
        if self.cooling_until_ms.is_some_and(|until| now_ms >= until) {
            self.probe_out = true;
        }
    }

    /// An attempt to it succeeded: it is healthy again, whatever it was.
    pub fn succeeded(&mut self, now_ms: i64) -> Observed {
        let was_unhealthy = self.cooling_until_ms.take().is_some();
        self.consecutive_failures = 0;
        self.probe_out = false;
        self.successes += 1;
        if !was_unhealthy {
            return Observed::default();
        }
        self.changed_ms = now_ms;
        Observed {
            transition: Some(Transition::Recovered),
            share: Some(Share::State),
        }
    }

    /// An attempt to it failed: it cools down at `rule.failures_to_cool` failures in a row;
    /// once unhealthy, any failure (its probe's above all) starts the cool-down again.
    pub fn failed(&mut self, rule: HealthRule, now_ms: i64, error: &str) -> Observed {
        let was_unhealthy = self.cooling_until_ms.is_some();
        self.probe_out = false;
        self.failures += 1;
        self.consecutive_failures = self.consecutive_failures.saturating_add(1);
        self.last_error = Some(error.to_owned());
        self.last_failure_ms = Some(now_ms);
        if !was_unhealthy && self.consecutive_failures < rule.failures_to_cool {
            return Observed {
                transition: None,
                share: Some(Share::Failure),
            };
        }
        self.cooling_until_ms = Some(now_ms.saturating_add(rule.cool_down_ms));
        self.changed_ms = now_ms;
        Observed {
            transition: (!was_unhealthy).then_some(Transition::WentUnhealthy),
            share: Some(Share::State),
        }
    }

    /// Notes how an exchange with it ended: a reply is a success (the member answered,
    /// whatever the job said), a transport failure a failure; an inconclusive one changes
    /// nothing but ends a probe, so the next attempt may probe again.
    pub fn observe(&mut self, exchange: &Exchange, rule: HealthRule, now_ms: i64) -> Observed {
        match exchange {
            Exchange::Replied => self.succeeded(now_ms),
            Exchange::Unreachable(why) => self.failed(rule, now_ms, why),
            Exchange::Inconclusive => {
                self.probe_out = false;
                Observed::default()
            }
        }
    }

    /// Its health as the cluster is to learn it.
    pub fn shared(&self) -> SharedHealth {
        SharedHealth {
            unhealthy_until_ms: self.cooling_until_ms,
            last_failure_ms: self.last_failure_ms,
            last_error: self.last_error.clone(),
            changed_ms: self.changed_ms,
        }
    }

    /// Takes the cluster's state of it when that changed later than this process last knew
    /// (another process set it aside, or saw it answer again), and its latest failure; this
    /// process's own counts stay. Answers the transition it made here.
    pub fn adopt(&mut self, shared: &SharedHealth) -> Option<Transition> {
        if shared.last_failure_ms > self.last_failure_ms {
            self.last_failure_ms = shared.last_failure_ms;
            self.last_error = shared.last_error.clone();
        }
        if shared.changed_ms <= self.changed_ms {
            return None;
        }
        self.changed_ms = shared.changed_ms;
        let was_unhealthy = self.cooling_until_ms.is_some();
        if self.cooling_until_ms != shared.unhealthy_until_ms {
            self.probe_out = false;
        }
        self.cooling_until_ms = shared.unhealthy_until_ms;
        match (was_unhealthy, self.cooling_until_ms.is_some()) {
            (false, true) => Some(Transition::WentUnhealthy),
            (true, false) => {
                self.consecutive_failures = 0;
                Some(Transition::Recovered)
            }
            _ => None,
        }
    }

    /// When it is set aside until, if it is (ms).
    pub fn unhealthy_until_ms(&self) -> Option<i64> {
        self.cooling_until_ms
    }

    /// When it last failed in transport (ms).
    pub fn last_failure_ms(&self) -> Option<i64> {
        self.last_failure_ms
    }

    /// Failures since its last success.
    pub fn consecutive_failures(&self) -> u32 {
        self.consecutive_failures
    }

    /// Successes in this process's life.
    pub fn successes(&self) -> u64 {
        self.successes
    }

    /// Failures in this process's life.
    pub fn failures(&self) -> u64 {
        self.failures
    }

    /// What its last failure said, shown next to its state.
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }
}

/// The URL of a task's `path` on a member: exactly one slash between the two, so a base with
/// or without a trailing slash (or with a base path) and a path with or without a leading one
/// all join the same way. An empty path is the base as given; a path that is only a query
/// attaches to the base as given.
pub fn member_url(base: &str, path: &str) -> String {
    if path.is_empty() || path.starts_with('?') {
        return format!("{base}{path}");
    }
    format!(
        "{}/{}",
        base.trim_end_matches('/'),
        path.trim_start_matches('/')
    )
}

/// Most members a group's definition lists (`PUT /api/executors/{group}`), and the default cap
/// of those that register themselves (`executors.max_registered_members`).
pub const MAX_DEFINED_MEMBERS: usize = 1000;

/// A group name: `[a-z0-9_.-]{1,64}`, so it is safe in a URL path, a metric label and a log
/// line as it is.
pub fn valid_group_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.' | b'-'))
}

#[cfg(test)]
mod tests;
