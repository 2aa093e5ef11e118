//! An outage as one process sees it: the store or Redis failing to answer, alerted once it
//! has lasted the configured time, and resolved when it answers again. Plain values, fed each
//! check's outcome and time.

use chrono::{DateTime, Duration, Utc};

/// What is known of one dependency's reachability.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outage {
    /// The first failed check of the current outage.
    since: Option<DateTime<Utc>>,
    /// Its alert went out.
    alerted: bool,
}

/// What a check's outcome asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutageVerdict {
    /// Unreachable since then, for longer than allowed: alert.
    Down { since: DateTime<Utc> },
    /// Reachable again after the outage that began then was alerted: resolve it.
    Back { since: DateTime<Utc> },
}

impl Outage {
    /// Takes a check at `now`: `up` when the dependency answered; `after` is how long an
    /// outage lasts before it alerts.
    pub fn observe(
        &mut self,
        up: bool,
        now: DateTime<Utc>,
        after: Duration,
    ) -> Option<OutageVerdict> {
        match (up, self.since) {
            (true, None) => None,
            (true, Some(since)) => {
                let alerted = std::mem::take(self).alerted;
                alerted.then_some(OutageVerdict::Back { since })
            }
            (false, None) => {
                self.since = Some(now);
                self.down_for(now, after)
            }
            (false, Some(_)) => self.down_for(now, after),
        }
    }

    fn down_for(&mut self, now: DateTime<Utc>, after: Duration) -> Option<OutageVerdict> {
        let since = self.since?;
        if self.alerted || now - since < after {
            return None;
        }
        self.alerted = true;
        Some(OutageVerdict::Down { since })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + secs, 0).expect("time")
    }

    #[test]
    fn an_outage_alerts_once_when_it_has_lasted_and_resolves_when_back() {
        let (mut outage, after) = (Outage::default(), Duration::seconds(60));
        assert_eq!(outage.observe(true, at(0), after), None);
        assert_eq!(outage.observe(false, at(1), after), None);
        assert_eq!(outage.observe(false, at(60), after), None);
        let down = Some(OutageVerdict::Down { since: at(1) });
        assert_eq!(outage.observe(false, at(61), after), down);
        assert_eq!(outage.observe(false, at(200), after), None);
        let back = Some(OutageVerdict::Back { since: at(1) });
        assert_eq!(outage.observe(true, at(201), after), back);
        assert_eq!(outage.observe(true, at(202), after), None);
    }

    #[test]
    fn a_short_outage_says_nothing() {
        let (mut outage, after) = (Outage::default(), Duration::seconds(60));
        assert_eq!(outage.observe(false, at(0), after), None);
        assert_eq!(outage.observe(true, at(30), after), None);
        assert_eq!(outage.observe(false, at(40), after), None);
        assert_eq!(outage.observe(false, at(99), after), None);
        let down = Some(OutageVerdict::Down { since: at(40) });
        assert_eq!(outage.observe(false, at(100), after), down);
    }

    proptest! {
        /// Over any sequence of checks, alerts and resolutions alternate, starting with an
        /// alert, and each alert comes after `after` of failed checks.
        #[test]
        fn downs_and_backs_alternate(checks in proptest::collection::vec(any::<bool>(), 1..200)) {
            let (mut outage, after) = (Outage::default(), Duration::seconds(5));
            let mut last_down = false;
            for (n, up) in checks.into_iter().enumerate() {
                let now = at(i64::try_from(n).unwrap_or(0));
                match outage.observe(up, now, after) {
                    Some(OutageVerdict::Down { since }) => {
                        prop_assert!(!last_down && now - since >= after && !up);
                        last_down = true;
                    }
                    Some(OutageVerdict::Back { .. }) => {
                        prop_assert!(last_down && up);
                        last_down = false;
                    }
                    None => {}
                }
            }
        }
    }
}
