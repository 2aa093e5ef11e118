//! The fire pipeline: what happens to runs the wheel found due. A scheduled fire goes lock →
//! commit (ahead of its second) → release the lock → dispatch at its second; an attempt
//! (retry, released or manual run, lapsed claim) goes claim → dispatch at its second. Each
//! batch is committed first ([`commit_fires`], [`claim_attempts`]), which answers the runs to
//! dispatch; they reach the dispatchers through [`Release::dispatch_in_time`], never before
//! their rows are committed. The wheel paces both stages (`ax_core::wheel::pace`).

use ax_core::ids::ProcessId;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio::sync::watch;

use super::dispatch::{DispatchHandle, DispatchJob};
use super::lock::LockHandle;
use super::store::{boxed, StoreHandle};
use ax_core::cluster::fencing::SendGate;
use ax_core::metrics::{add, metrics};
use ax_core::plan::{FirePlan, RunDecision, TaskSpec};
use ax_core::run::{
    claim_until, dependency_deadline, jittered, shards, Event, NewRun, RequestId, RunStatus, Shard,
    TaskId, TriggerType,
};
use ax_core::time::clock::{rfc3339, ClockCheck};
use ax_store::queries::due::DueAttempt;
use ax_store::queries::runs::{FireOutcome, FireRecord};
use ax_store::queries::{calendars, tasks};
use ax_store::rows::models::{self, NewRunRow, RunOrigin};
use ax_store::{from_db, to_db, StoreError};

/// What the fire pipeline needs, shared by every batch.
#[derive(Clone)]
pub struct FireContext {
    pub lock: LockHandle,
    pub store: StoreHandle,
    pub dispatch: DispatchHandle,
    pub instance_id: ProcessId,
    /// Most runs per store transaction.
    pub batch_size: usize,
    /// How long a run waits for its upstreams, unless its task says otherwise.
    pub dependency_timeout_secs: i64,
    /// This process's clock against the cluster's: nothing is fired or claimed while skewed.
    pub clock_check: Arc<ClockCheck>,
    /// This process's promises: a run goes out once its second is promised (see
    /// `ax_core::cluster::fencing`).
    pub gate: SendGate,
}

/// A task's fires as planned by a tick: each plan with the time its runs fire at.
pub struct PlannedFire {
    pub spec: Arc<TaskSpec>,
    pub plans: Vec<(FirePlan, DateTime<Utc>)>,
    /// When the tick planned it: the rows' `created_at`.
    pub planned_at: DateTime<Utc>,
}

/// Holds committed runs back until the wheel reaches their second and this process has
/// promised it.
pub struct Release {
    pub reached: watch::Receiver<i64>,
    pub gate: SendGate,
}

/// A committed run's first (or next) attempt and the time it goes out.
pub type ReadyJob = (DateTime<Utc>, DispatchJob);

/// A batch's commit, done: the runs to dispatch, and the fire locks it took, to release.
#[derive(Default)]
pub struct Committed {
    pub jobs: Vec<ReadyJob>,
    pub locked: Vec<TaskId>,
    /// The store failed the batch: its tasks' runs were not recorded.
    pub failed: bool,
}

impl Release {
    /// Hands the runs to the dispatchers, each once the wheel has reached its second and this
    /// process has promised it.
    pub async fn dispatch_in_time(mut self, dispatch: &DispatchHandle, mut jobs: Vec<ReadyJob>) {
        jobs.sort_by_key(|(fire_at, _)| fire_at.timestamp());
        let mut jobs = jobs.into_iter().peekable();
        while let Some((fire_at, _)) = jobs.peek() {
            let second = fire_at.timestamp();
            // A wheel gone (shutdown) releases everything: the runs are committed and due.
            let _ = self.reached.wait_for(|reached| *reached >= second).await;
            self.gate.reached(second).await;
            let now: Vec<DispatchJob> =
                std::iter::from_fn(|| jobs.next_if(|(at, _)| at.timestamp() == second))
                    .map(|(_, job)| job)
                    .collect();
            dispatch.dispatch(now).await;
        }
    }
}

/// The new run a decision of a plan makes (see `ax_core::run::NewRun`).
fn new_run(
    spec: &TaskSpec,
    decision: RunDecision,
    fire_at: DateTime<Utc>,
    fire: &FireContext,
) -> NewRun {
    match decision {
        // It waits for its upstreams; the supervisor releases it.
        RunDecision::Fire(at) if spec.has_dependencies => {
            NewRun::waiting_for_upstreams(dependency_deadline(
                at,
                spec.dependency_timeout_secs
                    .unwrap_or(fire.dependency_timeout_secs),
            ))
        }
        // Due at its offset: the attempt scan claims and dispatches it then.
        RunDecision::Fire(at) if spec.jitter_secs > 0 => {
            NewRun::due(jittered(spec.id, at, spec.jitter_secs).max(fire_at))
        }
        RunDecision::Fire(_) => NewRun::fired(claim_until(fire_at, spec.timeout_ms)),
        RunDecision::Missed(_) => NewRun::missed(fire_at),
    }
}

/// The rows to record for one task's plan: each decision advances `next_run_at` from its own
/// time to the next decision's time, the last one to the plan's `next`. A broadcast task's
/// fire is one run per live member of its group (its shards).
fn fire_records(
    spec: &TaskSpec,
    (plan, fire_at): &(FirePlan, DateTime<Utc>),
    planned_at: DateTime<Utc>,
    fire: &FireContext,
) -> Vec<FireRecord> {
    let members = spec
        .executor
        .as_deref()
        .and_then(|executor| fire.dispatch.broadcast_members(executor));
    let mut records = Vec::with_capacity(plan.decisions.len());
    for (i, decision) in plan.decisions.iter().enumerate() {
        let advance_to = plan
            .decisions
            .get(i + 1)
            .map(|d| d.scheduled_at())
            .or(plan.next);
        let scheduled_at = decision.scheduled_at();
        let run = new_run(spec, *decision, *fire_at, fire);
        let origin = RunOrigin {
            task_id: spec.id,
            request_id: RequestId::scheduled(spec.id, scheduled_at),
            trigger_type: TriggerType::Schedule,
            scheduled_at,
            // A jittered run is due at its offset.
            trigger_at: run.next_attempt_at.unwrap_or(*fire_at),
            created_at: planned_at,
            fired_by: fire.instance_id.clone(),
            params: None,
        };
        let run = NewRunRow::new(origin, &run);
        let (instance, siblings) = match (&members, decision) {
            (Some(members), RunDecision::Fire(_)) => sharded(&run, members),
            _ => (run, Vec::new()),
        };
        records.push(FireRecord {
            scheduled_at: to_db(scheduled_at),
            next_run_at: advance_to.map(to_db),
            instance,
            siblings,
            overlap: spec.overlap,
            version: spec.version,
        });
    }
    records
}

/// A broadcast fire's shards: shard 0 and its siblings, one per member.
fn sharded(run: &NewRunRow, members: &[Arc<str>]) -> (NewRunRow, Vec<NewRunRow>) {
    let mut runs = shards(members.len())
        .map(|shard| run.shard(shard, members.get(shard.index as usize).map(|m| &**m)));
    let first = runs.next().unwrap_or_else(|| run.clone());
    (first, runs.collect())
}

/// What a batch of fires asks of the wheel that planned it: to take the schedules of tasks
/// that changed elsewhere as the database has them now. The wheel actor's handle implements
/// it; the fire pipeline does not name the actor, which calls it.
pub trait Reschedule: Clone + 'static {
    /// Replaces the wheel's entries of `task_ids` with `entries`.
    fn replace(&self, task_ids: &[TaskId], entries: Vec<(Arc<TaskSpec>, DateTime<Utc>)>);
}

/// Commits one batch of fires under their tasks' locks; answers the committed runs to dispatch
/// and the locks to release (off the dispatch path: the runs' rows are committed, the locks
/// have done their work).
pub async fn commit_fires(
    fire: FireContext,
    wheel: impl Reschedule,
    batch: Vec<PlannedFire>,
) -> Committed {
    // Read before the claims are written: a fence while they are makes them count for less.
    let generation = fire.gate.generation();
    let held = fire
        .lock
        .acquire(batch.iter().map(|planned| planned.spec.id).collect())
        .await;
    let mut locked = Vec::new();
    let mut records = Vec::new();
    let mut runs = Vec::new();
    for (planned, held) in batch.into_iter().zip(held) {
        let spec = &planned.spec;
        if !held {
            log::debug!("task {}: fire lock held elsewhere", spec.id);
            add(&metrics().lock_conflicts, 1);
            continue;
        }
        locked.push(spec.id);
        for plan in &planned.plans {
            for record in fire_records(spec, plan, planned.planned_at, &fire) {
                let shards = std::iter::once(&record.instance)
                    .chain(&record.siblings)
                    .map(FiredShard::of)
                    .collect();
                runs.push(FiredRun {
                    spec: spec.clone(),
                    fire_at: plan.1,
                    shards,
                    status: record.instance.status,
                    dispatched: record.instance.dispatched_attempt == 1,
                    overlapped: false,
                    due_at: from_db(record.instance.trigger_at),
                    claimed_until: record.instance.claimed_until.map(from_db),
                    scheduled_at: record.scheduled_at,
                    periods: if plan.0.decisions.len() == 1 {
                        plan.0.periods
                    } else {
                        1
                    },
                });
                records.push(record);
            }
        }
    }
    if records.is_empty() {
        return Committed::default();
    }
    let recorded = fire.store.record_fires(records).await;
    let outcomes = match recorded {
        Ok(outcomes) => outcomes,
        Err(err) => {
            log::error!(
                "fires of {} tasks not recorded, will retry: {err}",
                locked.len()
            );
            refresh(&fire, &wheel, locked.clone()).await;
            return Committed {
                jobs: Vec::new(),
                locked,
                failed: true,
            };
        }
    };
    let mut stale = Vec::new();
    let mut jobs = Vec::with_capacity(runs.len());
    // `record_fires` answers one outcome per record, in order.
    for (mut run, outcome) in runs.into_iter().zip(outcomes) {
        let (task_id, request_id) = (run.spec.id, run.shards[0].request_id.clone());
        match outcome {
            FireOutcome::Fired | FireOutcome::Overlapped(_) => {
                if let FireOutcome::Overlapped(status) = outcome {
                    (run.status, run.dispatched, run.overlapped) = (status, false, true);
                }
                let counter = match run.status {
                    RunStatus::Missed => &metrics().missed,
                    _ => &metrics().fires,
                };
                add(counter, 1);
                log::info!("task {task_id} request {request_id}: {}", run.recorded());
                // A fired run's first attempt is claimed with its row; the others wait.
                if run.dispatched {
                    let fire_at = run.fire_at;
                    jobs.extend(run.jobs(generation).map(|job| (fire_at, job)));
                }
            }
            FireOutcome::Duplicate => log::warn!(
                "task {task_id} request {request_id}: run exists already, not fired again"
            ),
            FireOutcome::Stale => stale.push(task_id),
        }
    }
    if !stale.is_empty() {
        stale.dedup();
        log::debug!("tasks {stale:?}: schedule changed elsewhere, refreshing");
        // Off the dispatch path too: the committed runs go out meanwhile.
        actix::spawn(async move { refresh(&fire, &wheel, stale).await });
    }
    Committed {
        jobs,
        locked,
        failed: false,
    }
}

/// A run being fired, kept beside its record for dispatch after the commit.
struct FiredRun {
    spec: Arc<TaskSpec>,
    fire_at: DateTime<Utc>,
    /// Its one run, or a broadcast fire's shards (shard 0 first).
    shards: Vec<FiredShard>,
    status: RunStatus,
    /// Its first attempt is claimed with its row, for dispatch at `fire_at`.
    dispatched: bool,
    /// The overlap policy held it back or skipped it.
    overlapped: bool,
    /// When its first attempt is due: its time, or its jitter offset after.
    due_at: DateTime<Utc>,
    /// A dispatched run's claim, taken with its row.
    claimed_until: Option<DateTime<Utc>>,
    scheduled_at: chrono::NaiveDateTime,
    /// The schedule's periods it stands for: more than one for a stalled task's one run.
    periods: u64,
}

/// One run of a fire: a broadcast's shard with its member.
struct FiredShard {
    request_id: RequestId,
    shard: Option<Shard>,
    member: Option<Arc<str>>,
}

impl FiredShard {
    fn of(run: &NewRunRow) -> FiredShard {
        FiredShard {
            request_id: run.request_id.clone(),
            shard: Shard::of_row(run.shard_index, run.shard_total),
            member: run.member.as_deref().map(Arc::from),
        }
    }
}

impl FiredRun {
    /// What was recorded, for the log: dispatched or, if not, why not.
    fn recorded(&self) -> String {
        let at = rfc3339(from_db(self.scheduled_at));
        let mut folded = match self.periods {
            1 => String::new(),
            n => format!(", one run for the {n} periods the task missed"),
        };
        if let Some(shard) = self.shards[0].shard {
            folded.push_str(&format!(", as {} broadcast shards", shard.total));
        }
        match self.status {
            RunStatus::Ready if self.dispatched => format!("run scheduled at {at} fired{folded}"),
            RunStatus::Ready => format!(
                "run scheduled at {at} recorded, due at {} (jitter){folded}",
                rfc3339(self.due_at)
            ),
            RunStatus::Skipped => format!(
                "run scheduled at {at} recorded, not dispatched: SKIPPED, an earlier run is open \
                 (overlap {}){folded}",
                self.spec.overlap
            ),
            RunStatus::Pending if self.overlapped => format!(
                "run scheduled at {at} recorded, not dispatched yet: PENDING until the earlier \
                 run is final (overlap BUFFER_ONE){folded}"
            ),
            RunStatus::Missed => format!(
                "run scheduled at {at} recorded, not dispatched: MISSED, later than the misfire \
                 threshold{folded}"
            ),
            RunStatus::Pending => format!(
                "run scheduled at {at} recorded, not dispatched yet: PENDING, waiting for its \
                 upstreams{folded}"
            ),
            other => format!("run scheduled at {at} recorded {other}{folded}"),
        }
    }

    /// The first attempt of each of its runs, claimed in fencing `generation`.
    fn jobs(self, generation: u64) -> impl Iterator<Item = DispatchJob> {
        let scheduled_at = from_db(self.scheduled_at);
        let claimed_until = self
            .claimed_until
            .unwrap_or_else(|| claim_until(self.fire_at, self.spec.timeout_ms));
        let spec = self.spec;
        self.shards.into_iter().map(move |run| DispatchJob {
            task_id: spec.id,
            request_id: run.request_id,
            handler_url: spec.handler_url.clone(),
            executor: spec.executor.clone(),
            member: run.member,
            shard: run.shard,
            tried: Vec::new(),
            queued_at: None,
            params: spec.params.clone(),
            scheduled_at,
            due_at: scheduled_at,
            attempt: 1,
            timeout_ms: spec.timeout_ms,
            claimed_until,
            generation,
        })
    }
}

/// Claims runs whose attempt is due: retries, released and manual runs, and attempts whose
/// dispatcher died; answers the attempts won, to dispatch. Each is claimed first, so that of
/// several ax processes holding it only one dispatches. An attempt this process's dispatchers
/// hold (waiting for its host, or in flight) is not claimed again.
pub async fn claim_attempts(
    fire: FireContext,
    mut attempts: Vec<(Arc<DueAttempt>, DateTime<Utc>)>,
) -> Committed {
    attempts.retain(|(due, _)| !fire.dispatch.holds(&due.request_id));
    let generation = fire.gate.generation();
    let claims = attempts
        .iter()
        .map(|(due, fire_at)| {
            let event = Event::Claim {
                attempt: due.run.attempt,
                claimant: fire.instance_id.clone(),
                until: claim_until(*fire_at, due.timeout_ms),
                at: *fire_at,
            };
            (DueAttempt::clone(due), event)
        })
        .collect();
    let won = match fire.store.record_claims(claims).await {
        Ok(won) => won,
        Err(err) => {
            // Unclaimed attempts stay due in the database; the next scan offers them again.
            log::error!("{} attempts not claimed: {err}", attempts.len());
            return Committed::default();
        }
    };
    let mut jobs = Vec::new();
    for ((due, fire_at), won) in attempts.into_iter().zip(won) {
        if !won {
            continue;
        }
        log::info!(
            "task {} request {}: attempt {} of the run scheduled at {} claimed",
            due.task_id,
            due.request_id,
            due.run.attempt,
            rfc3339(due.run.scheduled_at)
        );
        jobs.push((
            fire_at,
            DispatchJob {
                task_id: due.task_id,
                request_id: due.request_id.clone(),
                handler_url: due.handler_url.clone(),
                executor: due.executor.clone().map(Arc::new),
                member: due.member.as_deref().map(Arc::from),
                shard: due.shard,
                tried: Vec::new(),
                queued_at: None,
                params: due.params.as_str().into(),
                scheduled_at: due.run.scheduled_at,
                due_at: due.first_due_at(),
                attempt: due.run.attempt,
                timeout_ms: due.timeout_ms,
                claimed_until: claim_until(fire_at, due.timeout_ms),
                generation,
            },
        ));
    }
    Committed {
        jobs,
        ..Committed::default()
    }
}

/// Re-reads tasks whose wheel entries may be wrong and reschedules them from the database.
pub async fn refresh(fire: &FireContext, wheel: &impl Reschedule, task_ids: Vec<TaskId>) {
    let ids = task_ids.clone();
    if let Err(err) = reload(&fire.store, wheel, ids).await {
        log::error!("tasks {task_ids:?} not refreshed: {err}");
    }
}

/// Puts tasks in the wheel as the database has them now: those deleted, paused or never
/// firing again leave it.
pub async fn reload(
    store: &StoreHandle,
    wheel: &impl Reschedule,
    task_ids: Vec<TaskId>,
) -> Result<(), StoreError> {
    let ids = task_ids.clone();
    let (tasks, book) = store
        .query(move |conn| {
            boxed(async move {
                let rows = tasks::find_many(conn, ids).await?;
                let book = calendars::book_for(conn, &rows).await?;
                Ok((tasks::with_upstreams_known(conn, rows).await?, book))
            })
        })
        .await?;
    wheel.replace(&task_ids, models::wheel_entries(&tasks, &book));
    Ok(())
}
