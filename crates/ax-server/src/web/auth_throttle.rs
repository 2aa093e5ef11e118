//! Failed authentications (a wrong token at the console's sign-in or on a console page, an API
//! 401) counted per client address in a sliding minute. After [`FREE_FAILURES`] from one
//! address, each further failure from it is answered later — [`STEP`] more each time, up to
//! [`MAX_DELAY`] — so guessing tokens costs time; requests that authenticate are never held up.
//! [`Failures`] is the pure count (times are passed in); [`AuthThrottle`] holds it for the
//! server, logs each failure and waits without blocking a worker.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How far back failures count.
const WINDOW: Duration = Duration::from_secs(60);
/// Failures an address may have in the window before its answers slow down.
const FREE_FAILURES: usize = 10;
/// How much later each failure past the free ones is answered than the one before.
const STEP: Duration = Duration::from_secs(1);
/// The longest an answer waits.
const MAX_DELAY: Duration = Duration::from_secs(5);
/// Failures kept per address: enough to reach the longest delay, so an address's memory is
/// bounded however fast it fails.
const KEPT: usize = FREE_FAILURES + (MAX_DELAY.as_secs() / STEP.as_secs()) as usize;
/// Addresses kept at most; past it the expired ones go, then the one that failed longest ago.
const MAX_CLIENTS: usize = 10_000;

/// Whom a failure is counted for: an IPv4 address, or the /64 of an IPv6 one (a single host
/// usually has a whole /64 to pick addresses from).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Client(IpAddr);

impl Client {
    fn of(ip: IpAddr) -> Client {
        match ip {
            IpAddr::V4(_) => Client(ip),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Client(IpAddr::V4(v4)),
                None => {
                    let prefix = u128::from(v6) & !(u128::from(u64::MAX));
                    Client(IpAddr::V6(Ipv6Addr::from(prefix)))
                }
            },
        }
    }
}

/// What counting one failure found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Counted {
    /// The client's failures in the window, this one included (at most [`KEPT`]).
    recent: usize,
    /// How long the answer to this one waits.
    delay: Duration,
}

/// The recent failures of every client that had one.
#[derive(Debug, Default)]
struct Failures {
    by_client: HashMap<Client, VecDeque<Instant>>,
}

impl Failures {
    /// Counts a failure of `client` at `now`.
    fn count(&mut self, client: Client, now: Instant) -> Counted {
        if !self.by_client.contains_key(&client) && self.by_client.len() >= MAX_CLIENTS {
            self.make_room(now);
        }
        let times = self.by_client.entry(client).or_default();
        while times
            .front()
            .is_some_and(|at| now.saturating_duration_since(*at) >= WINDOW)
        {
            times.pop_front();
        }
        if times.len() == KEPT {
            times.pop_front();
        }
        times.push_back(now);
        let recent = times.len();
        Counted {
            recent,
            delay: delay_after(recent),
        }
    }

    fn make_room(&mut self, now: Instant) {
        self.by_client.retain(|_, times| {
            times
                .back()
                .is_some_and(|at| now.saturating_duration_since(*at) < WINDOW)
        });
        if self.by_client.len() >= MAX_CLIENTS {
            let oldest = self
                .by_client
                .iter()
                .min_by_key(|(_, times)| times.back().copied())
                .map(|(client, _)| *client);
            if let Some(oldest) = oldest {
                self.by_client.remove(&oldest);
            }
        }
    }
}

/// How long the answer to a client's `recent`-th failure of the window waits.
fn delay_after(recent: usize) -> Duration {
    let past_free = recent.saturating_sub(FREE_FAILURES);
    STEP.saturating_mul(u32::try_from(past_free).unwrap_or(u32::MAX))
        .min(MAX_DELAY)
}

/// The failure counts of one ax process, shared by its HTTP workers.
#[derive(Debug, Clone, Default)]
pub struct AuthThrottle(Arc<Mutex<Failures>>);

impl AuthThrottle {
    /// Logs a failed authentication from `peer` (`what` says what failed; never the token) and
    /// waits as long as the address's recent failures say before the caller answers it.
    pub async fn failed(&self, peer: Option<SocketAddr>, what: &str) {
        let Some(ip) = peer.map(|peer| peer.ip()) else {
            log::warn!("auth: {what} failed, from an unknown address");
            return;
        };
        let counted = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .count(Client::of(ip), Instant::now());
        let Counted { recent, delay } = counted;
        if delay.is_zero() {
            log::warn!("auth: {what} failed, from {ip} ({recent} in the last minute)");
            return;
        }
        log::warn!(
            "auth: {what} failed, from {ip} ({recent} in the last minute: answered {} s late)",
            delay.as_secs()
        );
        actix_rt::time::sleep(delay).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(ip: &str) -> Client {
        Client::of(ip.parse().expect("an address"))
    }

    #[test]
    fn answers_slow_down_after_the_free_failures_up_to_the_longest_delay() {
        let mut failures = Failures::default();
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        for n in 1..=FREE_FAILURES {
            let counted = failures.count(client("10.0.0.1"), at(n as u64));
            assert_eq!(counted.recent, n);
            assert_eq!(counted.delay, Duration::ZERO, "failure {n}");
        }
        let delays: Vec<u64> = (0..8)
            .map(|n| {
                failures
                    .count(client("10.0.0.1"), at(100 + n))
                    .delay
                    .as_secs()
            })
            .collect();
        assert_eq!(delays, [1, 2, 3, 4, 5, 5, 5, 5]);
        // Another address is counted on its own.
        assert_eq!(
            failures.count(client("10.0.0.2"), at(200)).delay,
            Duration::ZERO
        );
    }

    #[test]
    fn failures_older_than_a_minute_no_longer_count() {
        let mut failures = Failures::default();
        let start = Instant::now();
        for n in 0..FREE_FAILURES as u64 {
            failures.count(client("10.0.0.1"), start + Duration::from_secs(n));
        }
        // The first has left the window: this is the tenth of the last minute, not the 11th.
        let later = start + WINDOW + Duration::from_millis(500);
        let counted = failures.count(client("10.0.0.1"), later);
        assert_eq!(
            (counted.recent, counted.delay),
            (FREE_FAILURES, Duration::ZERO)
        );
        let much_later = later + WINDOW;
        assert_eq!(failures.count(client("10.0.0.1"), much_later).recent, 1);
    }

    #[test]
    fn memory_is_bounded_by_client_and_in_all() {
        let mut failures = Failures::default();
        let now = Instant::now();
        for _ in 0..1_000 {
            failures.count(client("10.0.0.1"), now);
        }
        let times = &failures.by_client[&client("10.0.0.1")];
        assert_eq!(times.len(), KEPT);
        for n in 0..MAX_CLIENTS as u32 + 50 {
            let ip = IpAddr::from(std::net::Ipv4Addr::from(0x0a01_0000 + n));
            failures.count(Client::of(ip), now + Duration::from_millis(u64::from(n)));
        }
        assert_eq!(failures.by_client.len(), MAX_CLIENTS);
        // What is made room for is the client that failed longest ago, not the newest.
        let newest = IpAddr::from(std::net::Ipv4Addr::from(
            0x0a01_0000 + MAX_CLIENTS as u32 + 49,
        ));
        assert!(failures.by_client.contains_key(&Client::of(newest)));
        assert!(!failures.by_client.contains_key(&client("10.0.0.1")));
        // Once the window is over, room is made by dropping every expired client.
        failures.count(client("192.0.2.1"), now + WINDOW + WINDOW);
        assert_eq!(failures.by_client.len(), 1);
    }

    #[test]
    fn an_ipv6_host_is_counted_by_its_64_bit_prefix() {
        assert_eq!(client("2001:db8:1:2::1"), client("2001:db8:1:2:ffff::9"));
        assert_ne!(client("2001:db8:1:2::1"), client("2001:db8:1:3::1"));
        assert_eq!(client("::ffff:192.0.2.7"), client("192.0.2.7"));
        assert_ne!(client("192.0.2.7"), client("192.0.2.8"));
    }
}
