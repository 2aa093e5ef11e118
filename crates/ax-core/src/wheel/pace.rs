//! How far the wheel may run ahead of the fire pipeline. More load than ax can carry makes the
//! wheel fall behind the clock, taking each second in order once the pipeline has room, so runs
//! are delivered late rather than queued without bound. Pure: the wheel actor asks.

/// Bounds of the fire pipeline: batches taking their locks and committing, and runs between the
/// wheel and the dispatchers (planned, committing, or committed and waiting for a dispatcher).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PipelineLimits {
    pub committing_batches: usize,
    pub queued_runs: usize,
}

/// What is in the fire pipeline now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PipelineLoad {
    pub committing_batches: usize,
    pub queued_runs: usize,
}

impl PipelineLimits {
    /// Whether another batch may enter the pipeline.
    pub fn admit(&self, load: PipelineLoad) -> bool {
        load.committing_batches < self.committing_batches.max(1)
            && load.queued_runs < self.queued_runs.max(1)
    }
}

/// The second the wheel takes next, from `position` (the last second taken) toward `reach`:
/// one second at a time, so it never takes more than the pipeline can carry; at `reach`,
/// `reach` itself (which gives entries put in behind the position). Across a gap wider than
/// the wheel (the clock jumped, or ax was suspended) it takes everything at once: those tasks
/// are stalled, and the missed-run policy decides what fires.
pub fn next_step(position: i64, reach: i64, slots: usize) -> i64 {
    let slots = i64::try_from(slots).unwrap_or(i64::MAX);
    if position >= reach || reach.saturating_sub(position) > slots {
        reach
    } else {
        position + 1
    }
}

/// How far behind its schedule the wheel is, in seconds: 0 when it has taken every second up
/// to `reach`.
pub fn behind_secs(position: i64, reach: i64) -> i64 {
    reach.saturating_sub(position).max(0)
}

/// Being this far behind is worth a warning; a second or so is a busy moment.
pub const WARN_BEHIND_SECS: i64 = 2;
/// At most one warning per this many seconds, however long the overload lasts.
pub const WARN_EVERY_SECS: i64 = 60;

/// What to tell the operator about the wheel's lag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LagNote {
    /// It is this many seconds behind (a WARN).
    Behind(i64),
    /// It has caught up since the last warning.
    CaughtUp,
}

/// Turns the wheel's lag, seen at every tick, into at most one warning a minute.
#[derive(Debug, Default)]
pub struct LagLog {
    last_warning: Option<i64>,
    warned: bool,
}

impl LagLog {
    pub fn observe(&mut self, now_sec: i64, behind_secs: i64) -> Option<LagNote> {
        if behind_secs >= WARN_BEHIND_SECS {
            let due = self
                .last_warning
                .is_none_or(|at| now_sec - at >= WARN_EVERY_SECS);
            if due {
                self.last_warning = Some(now_sec);
                self.warned = true;
                return Some(LagNote::Behind(behind_secs));
            }
        } else if behind_secs == 0 && self.warned {
            self.warned = false;
            return Some(LagNote::CaughtUp);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wheel_steps_one_second_at_a_time_and_jumps_wide_gaps() {
        assert_eq!(next_step(100, 105, 600), 101);
        assert_eq!(next_step(104, 105, 600), 105);
        assert_eq!(next_step(105, 105, 600), 105);
        assert_eq!(next_step(110, 105, 600), 105);
        assert_eq!(next_step(100, 700, 600), 101);
        assert_eq!(next_step(100, 701, 600), 701);
        assert_eq!(next_step(i64::MIN, i64::MAX, 600), i64::MAX);
        assert_eq!(behind_secs(100, 105), 5);
        assert_eq!(behind_secs(105, 105), 0);
        assert_eq!(behind_secs(106, 105), 0);
    }

    #[test]
    fn a_full_pipeline_admits_nothing() {
        let limits = PipelineLimits {
            committing_batches: 2,
            queued_runs: 100,
        };
        let load = |committing_batches, queued_runs| PipelineLoad {
            committing_batches,
            queued_runs,
        };
        assert!(limits.admit(load(0, 0)));
        assert!(limits.admit(load(1, 99)));
        assert!(!limits.admit(load(2, 0)));
        assert!(!limits.admit(load(0, 100)));
        // A zero limit still lets one batch through at a time.
        let zero = PipelineLimits {
            committing_batches: 0,
            queued_runs: 0,
        };
        assert!(zero.admit(load(0, 0)));
        assert!(!zero.admit(load(1, 0)));
    }

    #[test]
    fn an_overload_is_told_once_a_minute_and_its_end_once() {
        let mut log = LagLog::default();
        assert_eq!(log.observe(0, 1), None, "a busy second is no overload");
        assert_eq!(log.observe(1, 2), Some(LagNote::Behind(2)));
        for now in 2..61 {
            assert_eq!(log.observe(now, 2 + now), None, "second {now}");
        }
        assert_eq!(log.observe(61, 70), Some(LagNote::Behind(70)));
        assert_eq!(log.observe(62, 1), None, "not caught up yet");
        assert_eq!(log.observe(63, 0), Some(LagNote::CaughtUp));
        assert_eq!(log.observe(64, 0), None);
        assert_eq!(log.observe(70, 5), None, "a minute has not passed");
        assert_eq!(log.observe(121, 5), Some(LagNote::Behind(5)));
    }
}
