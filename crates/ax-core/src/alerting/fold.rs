//! Threshold and folding, as PowerJob's: an alert when `threshold` events of one kind about
//! one subject happen within the window; then silence for that (subject, event), the events
//! in it folded and counted in the next alert. A resolution (the subject's first success
//! after an alert) is told once; the silence outlives it, so flapping does not flood. The state is plain values, kept by the store per
//! (subject, event), so every ax process folds alike and a restart forgets nothing.

use chrono::{DateTime, Duration, Utc};

use super::rule::AlertRule;

/// What is known of one (subject, event) between alerts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FoldState {
    /// The first event of the current window, and how many it holds.
    pub window_start: Option<DateTime<Utc>>,
    pub window_count: u32,
    /// After an alert: none again before this.
    pub silent_until: Option<DateTime<Utc>>,
    /// Events folded into the silence since the last alert, from `folded_since`.
    pub folded: u32,
    pub folded_since: Option<DateTime<Utc>>,
    /// An alert went out and nothing resolved it yet.
    pub alerted: bool,
}

/// What an event does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Alert now: `count` events within the window, plus `folded` from the last silence (the
    /// first of them at `folded_since`).
    Alert {
        count: u32,
        folded: u32,
        folded_since: Option<DateTime<Utc>>,
    },
    /// Within the silence after an alert: counted for the next one.
    Folded,
    /// Fewer than the threshold within the window yet.
    Below,
}

impl FoldState {
    /// Takes an event at `at` under `rule`.
    pub fn on_event(&mut self, rule: &AlertRule, at: DateTime<Utc>) -> Verdict {
        // No silence at all with 0: an event finished out of order (before the one that
        // alerted) alerts too.
        let silenced = rule.silence_secs > 0 && self.silent_until.is_some_and(|until| at < until);
        if silenced {
            self.folded += 1;
            self.folded_since.get_or_insert(at);
            return Verdict::Folded;
        }
        let window = Duration::seconds(rule.window_secs);
        match self.window_start {
            Some(start) if at - start < window => self.window_count += 1,
            _ => (self.window_start, self.window_count) = (Some(at), 1),
        }
        if self.window_count < rule.threshold.max(1) {
            return Verdict::Below;
        }
        let verdict = Verdict::Alert {
            count: self.window_count,
            folded: std::mem::take(&mut self.folded),
            folded_since: self.folded_since.take(),
        };
        (self.window_start, self.window_count) = (None, 0);
        self.silent_until = Some(at + Duration::seconds(rule.silence_secs));
        self.alerted = true;
        verdict
    }

    /// The subject succeeded (or came back): whether that resolves an alert. Its window
    /// starts over; its silence runs on, so a subject that flaps alerts once a silence, the
    /// failures between folded into the next alert.
    pub fn on_success(&mut self) -> bool {
        let resolved = std::mem::take(&mut self.alerted);
        (self.window_start, self.window_count) = (None, 0);
        resolved
    }
}

/// When a failed send is tried again: 5 s doubling to at most 10 minutes, or never once
/// `retry_for` has passed since the alert was made.
pub fn retry_at(
    created_at: DateTime<Utc>,
    tries: i32,
    retry_for: Duration,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let wait = Duration::seconds(5 << tries.clamp(0, 7)).min(Duration::minutes(10));
    let next = now + wait;
    (next - created_at <= retry_for).then_some(next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + secs, 0).expect("time")
    }

    #[test]
    fn without_a_silence_every_event_alerts_even_out_of_order() {
        let (rule, mut state) = (rule(1, 60, 0), FoldState::default());
        assert!(matches!(
            state.on_event(&rule, at(10)),
            Verdict::Alert { .. }
        ));
        assert!(matches!(
            state.on_event(&rule, at(9)),
            Verdict::Alert { .. }
        ));
        assert!(matches!(
            state.on_event(&rule, at(10)),
            Verdict::Alert { .. }
        ));
    }

    fn rule(threshold: u32, window_secs: i64, silence_secs: i64) -> AlertRule {
        AlertRule {
            threshold,
            window_secs,
            silence_secs,
            ..AlertRule::default()
        }
    }

    #[test]
    fn one_failure_alerts_then_repeats_fold_into_the_next_alert() {
        let rule = rule(1, 300, 1800);
        let mut state = FoldState::default();
        let first = Verdict::Alert {
            count: 1,
            folded: 0,
            folded_since: None,
        };
        assert_eq!(state.on_event(&rule, at(0)), first);
        assert_eq!(state.on_event(&rule, at(60)), Verdict::Folded);
        assert_eq!(state.on_event(&rule, at(120)), Verdict::Folded);
        assert_eq!(
            state.on_event(&rule, at(1800)),
            Verdict::Alert {
                count: 1,
                folded: 2,
                folded_since: Some(at(60))
            },
            "after the silence: says how many were folded since when"
        );
    }

    #[test]
    fn a_threshold_needs_its_events_within_the_window() {
        let rule = rule(3, 60, 600);
        let mut state = FoldState::default();
        assert_eq!(state.on_event(&rule, at(0)), Verdict::Below);
        assert_eq!(state.on_event(&rule, at(30)), Verdict::Below);
        // The window of the first two is over: this one starts a new one.
        assert_eq!(state.on_event(&rule, at(61)), Verdict::Below);
        assert_eq!(state.on_event(&rule, at(70)), Verdict::Below);
        assert!(matches!(
            state.on_event(&rule, at(80)),
            Verdict::Alert { count: 3, .. }
        ));
    }

    #[test]
    fn a_success_resolves_an_alert_once_and_a_flap_folds_into_the_silence() {
        let rule = rule(1, 300, 1800);
        let mut state = FoldState::default();
        assert!(!state.on_success(), "nothing to resolve");
        state.on_event(&rule, at(0));
        assert!(state.on_success());
        assert!(!state.on_success(), "resolved once");
        assert_eq!(state.on_event(&rule, at(10)), Verdict::Folded);
        assert!(
            !state.on_success(),
            "a folded failure was not told: nothing to resolve"
        );
        assert_eq!(
            state.on_event(&rule, at(1800)),
            Verdict::Alert {
                count: 1,
                folded: 1,
                folded_since: Some(at(10))
            },
            "after the silence, the flap is told with its folded failure"
        );
        assert!(state.on_success());
    }

    #[test]
    fn a_failed_send_is_tried_again_with_back_off_until_the_retry_time() {
        let hour = Duration::hours(1);
        assert_eq!(retry_at(at(0), 0, hour, at(0)), Some(at(5)));
        assert_eq!(retry_at(at(0), 1, hour, at(5)), Some(at(15)));
        assert_eq!(
            retry_at(at(0), 9, hour, at(100)),
            Some(at(700)),
            "at most 10 minutes"
        );
        assert_eq!(
            retry_at(at(0), 9, hour, at(3500)),
            None,
            "past the retry time"
        );
    }

    proptest! {
        /// Alerts of one (subject, event) are at least the silence apart, and with a
        /// threshold of 1 every event is told: in an alert or folded into the next.
        #[test]
        fn alerts_keep_the_silence_and_lose_no_event(
            gaps in prop::collection::vec(0..900i64, 1..60),
            silence in 0..2000i64,
        ) {
            let rule = rule(1, 300, silence);
            let mut state = FoldState::default();
            let (mut now, mut last_alert, mut told) = (0, None::<i64>, 0u32);
            for gap in &gaps {
                now += gap;
                if let Verdict::Alert { count, folded, .. } = state.on_event(&rule, at(now)) {
                    if let Some(last) = last_alert {
                        prop_assert!(now - last >= silence);
                    }
                    last_alert = Some(now);
                    told += count + folded;
                }
            }
            prop_assert_eq!(told + state.folded, gaps.len() as u32);
        }

        /// Never an alert with fewer events than the threshold within its window.
        #[test]
        fn an_alert_has_its_threshold(
            gaps in prop::collection::vec(0..200i64, 1..60),
            threshold in 1..5u32,
        ) {
            let rule = rule(threshold, 120, 0);
            let mut state = FoldState::default();
            let mut now = 0;
            for gap in &gaps {
                now += gap;
                if let Verdict::Alert { count, .. } = state.on_event(&rule, at(now)) {
                    prop_assert_eq!(count, threshold);
                }
            }
        }
    }
}
