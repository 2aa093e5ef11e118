//! Back-pressure per executor host: each host has at most its cap of requests in flight, and
//! the attempts over it wait in that host's queue, in order, holding nothing another host
//! could use. Inside a host's cap, attempts to slow handlers share at most a part of its slots
//! (the slow lane), so one hung handler cannot starve the host's other handlers. Pure
//! bookkeeping; the dispatchers own one and do the sending.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use crate::dispatch::slow_handlers::SlowHandlers;

/// The host an attempt is sent to, as its slots are counted: the handler URL's host and port
/// (the scheme's default port when it names none), lower-cased. `None` for a URL without a
/// host, which fails at its send anyway.
pub fn host_key(handler_url: &str) -> Option<String> {
    let url = url::Url::parse(handler_url).ok()?;
    let host = url.host_str()?;
    let port = url.port_or_known_default()?;
    Some(format!("{}:{port}", host.to_ascii_lowercase()))
}

/// The cap of each host: one for every host, and the ones configured for some.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostCaps {
    pub default: usize,
    /// By `host:port` or by `host` (any port); `host:port` wins.
    pub hosts: HashMap<String, usize>,
}

impl HostCaps {
    /// The cap of the host `key` (as [`host_key`] makes it).
    pub fn of(&self, key: &str) -> usize {
        let host = key.rsplit_once(':').map_or(key, |(host, _)| host);
        self.hosts
            .get(key)
            .or_else(|| self.hosts.get(host))
            .copied()
            .unwrap_or(self.default)
            .max(1)
    }
}

/// The lane a slot of a host is taken in: attempts to slow handlers (see [`SlowHandlers`])
/// share at most the host's slow cap, so the rest of its slots always serve its other handlers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    Common,
    Slow,
}

/// How a host's slots are shared between the lanes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaneSettings {
    /// An attempt that holds its slot this long or longer makes its handler slow.
    pub slow_after: Duration,
    /// The share of each host's cap the slow lane may hold, in percent.
    pub slow_share_percent: usize,
}

impl LaneSettings {
    /// The slots of a host with `cap` that slow handlers may hold: at least one.
    pub fn slow_cap(&self, cap: usize) -> usize {
        (cap * self.slow_share_percent / 100).max(1)
    }
}

/// A job waiting for a slot, numbered as it came so a handler moved between lanes keeps its
/// place.
#[derive(Debug)]
struct Waiting<J> {
    seq: u64,
    handler: Arc<str>,
    job: J,
}

#[derive(Debug)]
struct Host<J> {
    /// Its cap as last offered.
    cap: usize,
    /// Slots taken, in both lanes.
    in_flight: usize,
    /// Slots taken in the slow lane.
    slow_in_flight: usize,
    waiting: VecDeque<Waiting<J>>,
    slow_waiting: VecDeque<Waiting<J>>,
}

impl<J> Host<J> {
    fn queue(&mut self, lane: Lane) -> &mut VecDeque<Waiting<J>> {
        match lane {
            Lane::Common => &mut self.waiting,
            Lane::Slow => &mut self.slow_waiting,
        }
    }

    /// Whether a slot is free in `lane`.
    fn free(&self, lane: Lane, lanes: &LaneSettings) -> bool {
        self.in_flight < self.cap
            && (lane == Lane::Common || self.slow_in_flight < lanes.slow_cap(self.cap))
    }

    fn take_slot(&mut self, lane: Lane) {
        self.in_flight += 1;
        if lane == Lane::Slow {
            self.slow_in_flight += 1;
        }
    }

    /// The next waiting job of `lane`, given a slot, if the lane has one free.
    fn next_of(&mut self, lane: Lane, lanes: &LaneSettings) -> Option<(J, Lane)> {
        if !self.free(lane, lanes) {
            return None;
        }
        let next = self.queue(lane).pop_front()?;
        self.take_slot(lane);
        Some((next.job, lane))
    }

    fn idle(&self) -> bool {
        self.in_flight == 0 && self.waiting.is_empty() && self.slow_waiting.is_empty()
    }
}

/// One host's load, as shown and warned about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostLoad {
    pub host: Arc<str>,
    pub cap: usize,
    pub in_flight: usize,
    pub waiting: usize,
    /// Of those, in the slow lane, and the most it may hold.
    pub slow_in_flight: usize,
    pub slow_waiting: usize,
    pub slow_cap: usize,
}

/// What a slot freed comes to.
#[derive(Debug)]
pub struct Released<J> {
    /// The waiting job the slot goes to (send it now), with its lane.
    pub next: Option<(J, Lane)>,
    /// Jobs given a slot because their handler changed lanes (send them now), by host.
    pub moved: Vec<(Arc<str>, J, Lane)>,
}

/// Every host's requests in flight and attempts waiting, in two lanes. A host with neither is
/// forgotten, so the map holds only hosts with work.
#[derive(Debug)]
pub struct HostSlots<J> {
    hosts: HashMap<Arc<str>, Host<J>>,
    lanes: LaneSettings,
    slow: SlowHandlers,
    /// Jobs offered so far: each waiting job's number.
    offered: u64,
    /// When each host was last warned about (seconds): one warning a minute at most.
    warned: HashMap<Arc<str>, i64>,
}

impl<J> HostSlots<J> {
    pub fn new(lanes: LaneSettings) -> Self {
        HostSlots {
            hosts: HashMap::new(),
            lanes,
            slow: SlowHandlers::new(lanes.slow_after),
            offered: 0,
            warned: HashMap::new(),
        }
    }

    /// Offers `job`, an attempt to `handler`, to `host`: answered back with its lane when the
    /// host has a slot free in it under `cap` (it is taken: send the job now), else queued
    /// behind the lane's other waiting jobs.
    pub fn admit(
        &mut self,
        host: &Arc<str>,
        cap: usize,
        handler: &str,
        job: J,
    ) -> Option<(J, Lane)> {
        let lane = match self.slow.is_slow(handler) {
            true => Lane::Slow,
            false => Lane::Common,
        };
        let entry = self.hosts.entry(host.clone()).or_insert_with(|| Host {
            cap,
            in_flight: 0,
            slow_in_flight: 0,
            waiting: VecDeque::new(),
            slow_waiting: VecDeque::new(),
        });
        entry.cap = cap.max(1);
        if entry.free(lane, &self.lanes) && entry.queue(lane).is_empty() {
            entry.take_slot(lane);
            return Some((job, lane));
        }
        self.offered += 1;
        let seq = self.offered;
        let handler = handler.into();
        entry.queue(lane).push_back(Waiting { seq, handler, job });
        None
    }

    /// A request to `host`, taken in `lane` for an attempt to `handler`, ended after holding
    /// its slot for `took` (`None`: nothing was exchanged). The slot goes to the next waiting
    /// job, its own lane's first, or is freed.
    pub fn release(
        &mut self,
        host: &str,
        lane: Lane,
        (handler, took): (&str, Option<Duration>),
    ) -> Released<J> {
        let moved = took.and_then(|took| self.slow.attempt_took(handler, took));
        if let Some(slow) = moved {
            self.move_lane(handler, slow);
        }
        let next = self.hosts.get_mut(host).and_then(|entry| {
            entry.in_flight = entry.in_flight.saturating_sub(1);
            if lane == Lane::Slow {
                entry.slow_in_flight = entry.slow_in_flight.saturating_sub(1);
            }
            let other = match lane {
                Lane::Common => Lane::Slow,
                Lane::Slow => Lane::Common,
            };
            entry
                .next_of(lane, &self.lanes)
                .or_else(|| entry.next_of(other, &self.lanes))
        });
        let moved = match moved {
            Some(_) => self.send_what_fits(),
            None => Vec::new(),
        };
        self.hosts.retain(|_, host| !host.idle());
        Released { next, moved }
    }

    /// Moves the waiting jobs to `handler` to the slow lane (or back), each in its place by
    /// the order they came.
    fn move_lane(&mut self, handler: &str, slow: bool) {
        let (from, to) = match slow {
            true => (Lane::Common, Lane::Slow),
            false => (Lane::Slow, Lane::Common),
        };
        for host in self.hosts.values_mut() {
            let (moving, staying): (VecDeque<_>, VecDeque<_>) = std::mem::take(host.queue(from))
                .into_iter()
                .partition(|waiting| &*waiting.handler == handler);
            *host.queue(from) = staying;
            if moving.is_empty() {
                continue;
            }
            let mut merged: Vec<Waiting<J>> = std::mem::take(host.queue(to)).into();
            merged.extend(moving);
            merged.sort_by_key(|waiting| waiting.seq);
            *host.queue(to) = merged.into();
        }
    }

    /// Gives a slot to every waiting job that has one free in its lane now (after a handler
    /// changed lanes), by host.
    fn send_what_fits(&mut self) -> Vec<(Arc<str>, J, Lane)> {
        let mut sent = Vec::new();
        for (name, host) in &mut self.hosts {
            while let Some((job, lane)) = host
                .next_of(Lane::Common, &self.lanes)
                .or_else(|| host.next_of(Lane::Slow, &self.lanes))
            {
                sent.push((name.clone(), job, lane));
            }
        }
        sent
    }

    /// How many handlers are slow.
    pub fn slow_handlers(&self) -> usize {
        self.slow.count()
    }

    /// Takes the waiting jobs `drop` picks out of every queue, keeping the others in order.
    pub fn remove_waiting(&mut self, mut drop: impl FnMut(&J) -> bool) -> Vec<J> {
        let mut removed = Vec::new();
        for host in self.hosts.values_mut() {
            for lane in [Lane::Common, Lane::Slow] {
                let (gone, kept): (VecDeque<_>, VecDeque<_>) = std::mem::take(host.queue(lane))
                    .into_iter()
                    .partition(|waiting| drop(&waiting.job));
                *host.queue(lane) = kept;
                removed.extend(gone.into_iter().map(|waiting| waiting.job));
            }
        }
        self.hosts.retain(|_, host| !host.idle());
        removed
    }

    /// Every waiting job, to look at (claims to renew).
    pub fn waiting_mut(&mut self) -> impl Iterator<Item = &mut J> {
        self.hosts.values_mut().flat_map(|host| {
            host.waiting
                .iter_mut()
                .chain(host.slow_waiting.iter_mut())
                .map(|waiting| &mut waiting.job)
        })
    }

    /// The requests in flight to `host` now.
    pub fn in_flight(&self, host: &str) -> usize {
        self.hosts.get(host).map_or(0, |h| h.in_flight)
    }

    /// Every host with work, by name.
    pub fn loads(&self) -> Vec<HostLoad> {
        let mut loads: Vec<HostLoad> = self
            .hosts
            .iter()
            .map(|(host, h)| HostLoad {
                host: host.clone(),
                cap: h.cap,
                in_flight: h.in_flight,
                waiting: h.waiting.len() + h.slow_waiting.len(),
                slow_in_flight: h.slow_in_flight,
                slow_waiting: h.slow_waiting.len(),
                slow_cap: self.lanes.slow_cap(h.cap),
            })
            .collect();
        loads.sort_by(|a, b| a.host.cmp(&b.host));
        loads
    }

    /// The hosts to warn about at `now` (seconds): those with jobs waiting (a lane at its cap),
    /// each at most once every `every` seconds.
    pub fn warnings(&mut self, now: i64, every: i64) -> Vec<HostLoad> {
        self.warned.retain(|_, at| now - *at < every);
        let due: Vec<HostLoad> = self
            .loads()
            .into_iter()
            .filter(|load| load.waiting > 0 && !self.warned.contains_key(&load.host))
            .collect();
        for load in &due {
            self.warned.insert(load.host.clone(), now);
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn host(name: &str) -> Arc<str> {
        Arc::from(name)
    }

    #[test]
    fn a_host_key_is_its_host_and_port() {
        assert_eq!(
            host_key("http://Exec.Example:9000/run").as_deref(),
            Some("exec.example:9000")
        );
        assert_eq!(host_key("https://a.b/x").as_deref(), Some("a.b:443"));
        assert_eq!(
            host_key("http://127.0.0.1/x").as_deref(),
            Some("127.0.0.1:80")
        );
        assert_eq!(host_key("http://[::1]:81/").as_deref(), Some("[::1]:81"));
        assert_eq!(host_key("not a url"), None);
    }

    #[test]
    fn a_configured_host_has_its_own_cap() {
        let caps = HostCaps {
            default: 64,
            hosts: HashMap::from([("a:9000".to_string(), 8), ("b".to_string(), 16)]),
        };
        assert_eq!(caps.of("a:9000"), 8);
        assert_eq!(caps.of("a:9001"), 64);
        assert_eq!(caps.of("b:1"), 16);
        assert_eq!(caps.of("[::1]:81"), 64);
    }

    const LANES: LaneSettings = LaneSettings {
        slow_after: Duration::from_secs(1),
        slow_share_percent: 50,
    };
    const QUICK: Option<Duration> = Some(Duration::from_millis(5));
    const QUICK_HANDLER: &str = "http://a:1/quick";
    const SLOW: Option<Duration> = Some(Duration::from_secs(10));

    fn slots() -> HostSlots<u32> {
        HostSlots::new(LANES)
    }

    /// Offers `job` to a quick handler.
    fn offer(slots: &mut HostSlots<u32>, host: &Arc<str>, cap: usize, job: u32) -> Option<u32> {
        slots
            .admit(host, cap, QUICK_HANDLER, job)
            .map(|(job, _)| job)
    }

    fn done(slots: &mut HostSlots<u32>, host: &str) -> Option<u32> {
        slots
            .release(host, Lane::Common, (QUICK_HANDLER, QUICK))
            .next
            .map(|(job, _)| job)
    }

    #[test]
    fn over_its_cap_a_host_queues_in_order_and_others_go_on() {
        let mut slots = slots();
        let (a, b) = (host("a:1"), host("b:1"));
        assert_eq!(offer(&mut slots, &a, 2, 1), Some(1));
        assert_eq!(offer(&mut slots, &a, 2, 2), Some(2));
        assert_eq!(offer(&mut slots, &a, 2, 3), None);
        assert_eq!(offer(&mut slots, &a, 2, 4), None);
        assert_eq!(offer(&mut slots, &b, 2, 10), Some(10));
        assert_eq!(done(&mut slots, "a:1"), Some(3));
        assert_eq!(done(&mut slots, "a:1"), Some(4));
        assert_eq!(done(&mut slots, "a:1"), None);
        assert_eq!(done(&mut slots, "a:1"), None);
        assert_eq!(slots.loads().len(), 1, "an idle host is forgotten");
    }

    #[test]
    fn the_slow_lane_holds_at_most_its_share_and_the_rest_serve_the_others() {
        let mut slots = slots();
        let a = host("a:1");
        let (hung, healthy) = ("http://a:1/hung", "http://a:1/ok");
        // Nothing is known of the hung handler yet: its first attempts take every slot.
        for job in 1..=4 {
            assert_eq!(slots.admit(&a, 4, hung, job), Some((job, Lane::Common)));
        }
        for job in 5..=8 {
            assert_eq!(slots.admit(&a, 4, hung, job), None);
        }
        assert_eq!(slots.admit(&a, 4, healthy, 100), None);
        // Its first attempt timed out: its waiting jobs move to the slow lane, which may hold
        // 2 of the 4 slots, and the healthy handler's job goes first.
        assert_eq!(
            slots.release("a:1", Lane::Common, (hung, SLOW)).next,
            Some((100, Lane::Common))
        );
        assert_eq!(slots.slow_handlers(), 1);
        assert_eq!(
            slots.release("a:1", Lane::Common, (hung, SLOW)).next,
            Some((5, Lane::Slow))
        );
        assert_eq!(
            slots.release("a:1", Lane::Common, (hung, SLOW)).next,
            Some((6, Lane::Slow))
        );
        // The slow lane is full: the freed slot waits for the healthy handler.
        assert_eq!(slots.release("a:1", Lane::Common, (hung, SLOW)).next, None);
        assert_eq!(slots.admit(&a, 4, healthy, 101), Some((101, Lane::Common)));
        assert_eq!(slots.admit(&a, 4, healthy, 102), None, "at the host's cap");
        let load = &slots.loads()[0];
        assert_eq!(
            (
                load.in_flight,
                load.slow_in_flight,
                load.waiting,
                load.slow_waiting
            ),
            (4, 2, 3, 2)
        );
        // A slow slot freed goes to the slow lane's next job first.
        assert_eq!(
            slots.release("a:1", Lane::Slow, (hung, SLOW)).next,
            Some((7, Lane::Slow))
        );
        assert_eq!(
            slots.release("a:1", Lane::Common, (healthy, QUICK)).next,
            Some((102, Lane::Common))
        );
    }

    #[test]
    fn a_handler_quick_again_goes_back_to_the_common_lane_in_its_place() {
        let mut slots = slots();
        let a = host("a:1");
        let (was_slow, other) = ("http://a:1/was-slow", "http://a:1/other");
        assert!(slots.admit(&a, 2, was_slow, 1).is_some());
        slots.release("a:1", Lane::Common, (was_slow, SLOW));
        assert_eq!(slots.admit(&a, 2, was_slow, 2), Some((2, Lane::Slow)));
        assert_eq!(
            slots.admit(&a, 2, was_slow, 3),
            None,
            "the slow lane is full"
        );
        assert_eq!(slots.admit(&a, 2, other, 4), Some((4, Lane::Common)));
        assert_eq!(slots.admit(&a, 2, other, 5), None);
        assert_eq!(slots.admit(&a, 2, was_slow, 6), None);
        assert_eq!(slots.admit(&a, 2, other, 7), None);
        // Quick attempts of the slow handler, one short of bringing it back.
        for n in 1..crate::dispatch::slow_handlers::QUICK_AGAIN_AFTER {
            slots.release("a:1", Lane::Slow, (was_slow, QUICK));
            slots.admit(&a, 2, was_slow, 100 + n);
        }
        assert_eq!(slots.admit(&a, 2, other, 8), None);
        assert_eq!(slots.slow_handlers(), 1);
        let released = slots.release("a:1", Lane::Slow, (was_slow, QUICK));
        assert_eq!(slots.slow_handlers(), 0);
        assert!(released.moved.is_empty(), "the host is full");
        // Its waiting jobs are in the common lane again, in their places by the order they
        // came: before the other handler's job 8, after its 5 and 7.
        let mut sent = vec![released.next.expect("the freed slot is taken")];
        sent.extend(std::iter::from_fn(|| {
            slots.release("a:1", Lane::Common, (other, QUICK)).next
        }));
        let jobs: Vec<u32> = sent.iter().map(|(job, _)| *job).collect();
        assert_eq!(jobs, vec![5, 7, 101, 102, 8]);
        assert!(sent.iter().all(|(_, lane)| *lane == Lane::Common));
    }

    #[test]
    fn a_handler_quick_again_takes_the_slots_free_at_once() {
        let mut slots = slots();
        let a = host("a:1");
        let handler = "http://a:1/run";
        slots.admit(&a, 4, handler, 1);
        slots.release("a:1", Lane::Common, (handler, SLOW));
        for job in 2..=5 {
            slots.admit(&a, 4, handler, job);
        }
        // Quick attempts, the slow lane full all along: two of its jobs wait.
        slots.release("a:1", Lane::Slow, (handler, QUICK));
        slots.release("a:1", Lane::Slow, (handler, QUICK));
        for job in 6..=8 {
            assert_eq!(slots.admit(&a, 4, handler, job), None);
        }
        assert_eq!(slots.loads()[0].slow_waiting, 3);
        let released = slots.release("a:1", Lane::Slow, (handler, QUICK));
        assert_eq!(released.next, Some((6, Lane::Common)));
        let moved: Vec<(&str, u32, Lane)> = released
            .moved
            .iter()
            .map(|(host, job, lane)| (&**host, *job, *lane))
            .collect();
        assert_eq!(
            moved,
            vec![("a:1", 7, Lane::Common), ("a:1", 8, Lane::Common)]
        );
    }

    #[test]
    fn waiting_jobs_can_be_taken_out() {
        let mut slots = slots();
        let a = host("a:1");
        for job in 1..=5 {
            offer(&mut slots, &a, 1, job);
        }
        assert_eq!(slots.remove_waiting(|job| job % 2 == 0), vec![2, 4]);
        assert_eq!(done(&mut slots, "a:1"), Some(3));
        assert_eq!(done(&mut slots, "a:1"), Some(5));
    }

    #[test]
    fn a_host_at_its_cap_is_warned_about_once_a_minute() {
        let mut slots = slots();
        let a = host("a:1");
        offer(&mut slots, &a, 1, 1);
        assert!(
            slots.warnings(0, 60).is_empty(),
            "at its cap, nothing waits"
        );
        offer(&mut slots, &a, 1, 2);
        let warned = slots.warnings(0, 60);
        assert_eq!(
            warned,
            vec![HostLoad {
                host: a.clone(),
                cap: 1,
                in_flight: 1,
                waiting: 1,
                slow_in_flight: 0,
                slow_waiting: 0,
                slow_cap: 1,
            }]
        );
        assert!(slots.warnings(59, 60).is_empty());
        assert_eq!(slots.warnings(60, 60).len(), 1);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Admit { host: usize, handler: usize },
        Release { host: usize, slow: bool },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0..3usize, 0..4usize).prop_map(|(host, handler)| Op::Admit { host, handler }),
            2 => (0..3usize, any::<bool>()).prop_map(|(host, slow)| Op::Release { host, slow }),
        ]
    }

    proptest! {
        /// Against a model of each host: never more in flight than the cap nor in the slow lane
        /// than its share, a job waits only while its lane is full, every job sent once and
        /// each handler's in the order offered, none lost.
        #[test]
        fn each_host_keeps_its_caps_and_each_handler_its_order(
            ops in prop::collection::vec(op(), 1..300)
        ) {
            let names = [host("a:1"), host("b:1"), host("c:1")];
            let cap = 4;
            let slow_cap = LANES.slow_cap(cap);
            let mut slots = HostSlots::new(LANES);
            let handlers = ["/a", "/b", "/c", "/d"];
            // Each host's requests in flight: (job's handler, its lane).
            let mut in_flight: [Vec<(usize, Lane)>; 3] = Default::default();
            // By host and handler: the jobs offered and those sent.
            let mut offered: HashMap<(usize, usize), Vec<u32>> = HashMap::new();
            let mut sent: HashMap<(usize, usize), Vec<u32>> = HashMap::new();
            let mut handler_of: HashMap<u32, usize> = HashMap::new();
            let mut next = 0u32;
            for op in ops {
                let mut started: Vec<(usize, u32, Lane)> = Vec::new();
                match op {
                    Op::Admit { host, handler } => {
                        next += 1;
                        handler_of.insert(next, handler);
                        offered.entry((host, handler)).or_default().push(next);
                        if let Some((job, lane)) = slots.admit(&names[host], cap, handlers[handler], next) {
                            started.push((host, job, lane));
                        }
                    }
                    Op::Release { host, slow } if !in_flight[host].is_empty() => {
                        let (handler, lane) = in_flight[host].remove(0);
                        let took = if slow { SLOW } else { QUICK };
                        let released =
                            slots.release(&names[host], lane, (handlers[handler], took));
                        started.extend(released.next.map(|(job, lane)| (host, job, lane)));
                        for (name, job, lane) in released.moved {
                            let h = names.iter().position(|n| *n == name).unwrap();
                            started.push((h, job, lane));
                        }
                    }
                    Op::Release { .. } => {}
                }
                for (host, job, lane) in started {
                    let handler = handler_of[&job];
                    in_flight[host].push((handler, lane));
                    sent.entry((host, handler)).or_default().push(job);
                }
                let loads = slots.loads();
                for (h, flying) in in_flight.iter().enumerate() {
                    prop_assert!(flying.len() <= cap);
                    let slow = flying.iter().filter(|(_, lane)| *lane == Lane::Slow).count();
                    prop_assert!(slow <= slow_cap);
                    let load = loads.iter().find(|l| l.host == names[h]);
                    let (waiting, slow_waiting) =
                        load.map_or((0, 0), |l| (l.waiting - l.slow_waiting, l.slow_waiting));
                    prop_assert!(waiting == 0 || flying.len() == cap);
                    prop_assert!(slow_waiting == 0 || flying.len() == cap || slow == slow_cap);
                    prop_assert_eq!(load.map_or(0, |l| l.in_flight), flying.len());
                }
                for (key, jobs) in &sent {
                    prop_assert_eq!(&jobs[..], &offered[key][..jobs.len()]);
                }
            }
        }
    }
}
