//! Back-pressure per executor host: each host has at most its cap of requests in flight, and
//! the attempts over it wait in that host's queue, in order, holding nothing another host
//! could use. Pure bookkeeping; the dispatchers own one and do the sending.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

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

#[derive(Debug)]
struct Host<J> {
    in_flight: usize,
    waiting: VecDeque<J>,
}

/// One host's load, as shown and warned about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostLoad {
    pub host: Arc<str>,
    pub in_flight: usize,
    pub waiting: usize,
}

/// Every host's requests in flight and attempts waiting. A host with neither is forgotten, so
/// the map holds only hosts with work.
#[derive(Debug)]
pub struct HostSlots<J> {
    hosts: HashMap<Arc<str>, Host<J>>,
    /// When each host was last warned about (seconds): one warning a minute at most.
    warned: HashMap<Arc<str>, i64>,
}

impl<J> Default for HostSlots<J> {
    fn default() -> Self {
        HostSlots {
            hosts: HashMap::new(),
            warned: HashMap::new(),
        }
    }
}

impl<J> HostSlots<J> {
    /// Offers `job` to `host`: answered back when the host has a slot free under `cap` (it is
    /// taken: send the job now), else queued behind the host's other waiting jobs.
    pub fn admit(&mut self, host: &Arc<str>, cap: usize, job: J) -> Option<J> {
        let entry = self.hosts.entry(host.clone()).or_insert_with(|| Host {
            in_flight: 0,
            waiting: VecDeque::new(),
        });
        if entry.in_flight < cap.max(1) && entry.waiting.is_empty() {
            entry.in_flight += 1;
            Some(job)
        } else {
            entry.waiting.push_back(job);
            None
        }
    }

    /// A request to `host` ended: its slot goes to the host's next waiting job (answered: send
    /// it now), or is freed.
    pub fn release(&mut self, host: &str) -> Option<J> {
        let entry = self.hosts.get_mut(host)?;
        if let Some(next) = entry.waiting.pop_front() {
            return Some(next);
        }
        entry.in_flight = entry.in_flight.saturating_sub(1);
        if entry.in_flight == 0 {
            self.hosts.remove(host);
        }
        None
    }

    /// Takes the waiting jobs `drop` picks out of every queue, keeping the others in order.
    pub fn remove_waiting(&mut self, mut drop: impl FnMut(&J) -> bool) -> Vec<J> {
        let mut removed = Vec::new();
        for host in self.hosts.values_mut() {
            let (gone, kept): (VecDeque<J>, VecDeque<J>) = std::mem::take(&mut host.waiting)
                .into_iter()
                .partition(&mut drop);
            host.waiting = kept;
            removed.extend(gone);
        }
        removed
    }

    /// Every waiting job, to look at (claims to renew).
    pub fn waiting_mut(&mut self) -> impl Iterator<Item = &mut J> {
        self.hosts
            .values_mut()
            .flat_map(|host| host.waiting.iter_mut())
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
                in_flight: h.in_flight,
                waiting: h.waiting.len(),
            })
            .collect();
        loads.sort_by(|a, b| a.host.cmp(&b.host));
        loads
    }

    /// The hosts to warn about at `now` (seconds): those with jobs waiting (at their cap),
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

    #[test]
    fn over_its_cap_a_host_queues_in_order_and_others_go_on() {
        let mut slots = HostSlots::default();
        let (a, b) = (host("a:1"), host("b:1"));
        assert_eq!(slots.admit(&a, 2, 1), Some(1));
        assert_eq!(slots.admit(&a, 2, 2), Some(2));
        assert_eq!(slots.admit(&a, 2, 3), None);
        assert_eq!(slots.admit(&a, 2, 4), None);
        assert_eq!(slots.admit(&b, 2, 10), Some(10));
        assert_eq!(slots.release("a:1"), Some(3));
        assert_eq!(slots.release("a:1"), Some(4));
        assert_eq!(slots.release("a:1"), None);
        assert_eq!(slots.release("a:1"), None);
        assert_eq!(slots.loads().len(), 1, "an idle host is forgotten");
    }

    #[test]
    fn waiting_jobs_can_be_taken_out() {
        let mut slots = HostSlots::default();
        let a = host("a:1");
        for job in 1..=5 {
            slots.admit(&a, 1, job);
        }
        assert_eq!(slots.remove_waiting(|job| job % 2 == 0), vec![2, 4]);
        assert_eq!(slots.release("a:1"), Some(3));
        assert_eq!(slots.release("a:1"), Some(5));
    }

    #[test]
    fn a_host_at_its_cap_is_warned_about_once_a_minute() {
        let mut slots = HostSlots::default();
        let a = host("a:1");
        slots.admit(&a, 1, 1);
        assert!(
            slots.warnings(0, 60).is_empty(),
            "at its cap, nothing waits"
        );
        slots.admit(&a, 1, 2);
        let warned = slots.warnings(0, 60);
        assert_eq!(
            warned,
            vec![HostLoad {
                host: a.clone(),
                in_flight: 1,
                waiting: 1
            }]
        );
        assert!(slots.warnings(59, 60).is_empty());
        assert_eq!(slots.warnings(60, 60).len(), 1);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Admit { host: usize },
        Release { host: usize },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0..3usize).prop_map(|host| Op::Admit { host }),
            2 => (0..3usize).prop_map(|host| Op::Release { host }),
        ]
    }

    proptest! {
        /// Against a model of each host: never more in flight than the cap, every job sent
        /// once and in the order offered, none lost.
        #[test]
        fn each_host_keeps_its_cap_and_its_order(ops in prop::collection::vec(op(), 1..200)) {
            let names = [host("a:1"), host("b:1"), host("c:1")];
            let cap = 3;
            let mut slots = HostSlots::default();
            let mut in_flight = [0usize; 3];
            let mut offered: [Vec<u32>; 3] = Default::default();
            let mut sent: [Vec<u32>; 3] = Default::default();
            let mut next = 0u32;
            for op in ops {
                match op {
                    Op::Admit { host } => {
                        next += 1;
                        offered[host].push(next);
                        if let Some(job) = slots.admit(&names[host], cap, next) {
                            in_flight[host] += 1;
                            sent[host].push(job);
                        }
                    }
                    Op::Release { host } if in_flight[host] > 0 => {
                        in_flight[host] -= 1;
                        if let Some(job) = slots.release(&names[host]) {
                            in_flight[host] += 1;
                            sent[host].push(job);
                        }
                    }
                    Op::Release { .. } => {}
                }
                for h in 0..3 {
                    prop_assert!(in_flight[h] <= cap);
                    let waiting = offered[h].len() - sent[h].len();
                    // A job waits only while its host is full.
                    prop_assert!(waiting == 0 || in_flight[h] == cap);
                    prop_assert_eq!(&sent[h][..], &offered[h][..sent[h].len()]);
                }
            }
        }
    }
}
