//! StoreActor: owns the database pool and group-commits instance writes.
//!
//! Group commit is natural (`lane.rs` decides): the results lane commits as soon as it has work
//! and no commit of its own runs; whatever arrives meanwhile joins the next commit, at most
//! `batch_size` rows. An idle server so commits a callback in one round trip, a busy one in
//! few, full transactions. Fires commit at once. The two lanes commit side by side. Every caller
//! is answered only after its write is committed.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use tokio::sync::oneshot;

use ax_core::metrics::{add, metrics};
use ax_core::run::group_commit::{Lane, Policy, Queued};
use ax_core::run::{
    blind, rejected_result, supersede, Decided, Event, RequestId, RetryPolicy, RunStatus, TaskId,
    Write as RunWrite, RESULT_REJECTED_MESSAGE,
};
use ax_store::queries::due::{self, DueAttempt};
use ax_store::queries::run_writes::{self, Target};
use ax_store::queries::runs::{self, FireOutcome, FireRecord};
use ax_store::queries::success_watch::SuccessWatch;
use ax_store::queries::transitions;
use ax_store::rows::models::{cut, MAX_MESSAGE_CHARS};
use ax_store::{Conn, Db, StoreError};

/// An event for a run, to record (see `ax_core::run::Event`).
#[derive(Debug, Clone)]
pub struct RunEvent {
    pub request_id: RequestId,
    /// The run's task, when the sender knows it (the dispatcher does): a blind success of a
    /// task no alert watches is then written without a look-up.
    pub task_id: Option<TaskId>,
    pub event: Event,
    /// The caller needs no exact outcome (the dispatcher's replies): where the lifecycle can
    /// write the event without reading the run, it is applied many to a statement.
    pub blind: bool,
}

/// A write waiting for the next commit.
#[derive(Clone)]
enum Write {
    Fires(Vec<FireRecord>),
    Event(RunEvent),
    Claims(Vec<(DueAttempt, Event)>),
}

/// The way back to a write's caller.
enum Reply {
    Fires(oneshot::Sender<Result<Vec<FireOutcome>, StoreError>>),
    Event(oneshot::Sender<Result<Option<Decided>, StoreError>>),
    Claims(oneshot::Sender<Result<Vec<bool>, StoreError>>),
}

impl Reply {
    /// Tells the caller its write failed, and whether for a store out of reach.
    fn fail(self, err: &StoreError) {
        let err = if err.is_unreachable() {
            StoreError::Pool(err.to_string())
        } else {
            StoreError::Commit(err.to_string())
        };
        // A caller that gave up waiting (send fails) is no reason to fail the others.
        match self {
            Reply::Fires(tx) => drop(tx.send(Err(err))),
            Reply::Event(tx) => drop(tx.send(Err(err))),
            Reply::Claims(tx) => drop(tx.send(Err(err))),
        }
    }
}

/// A write's caller, and the callers of writes folded into it.
struct Replies(Reply, Vec<Reply>);

impl Replies {
    fn fail(self, err: &StoreError) {
        self.0.fail(err);
        self.1.into_iter().for_each(|reply| reply.fail(err));
    }
}

struct Pending {
    write: Write,
    reply: Reply,
    /// Callers of writes folded into this one (made moot by it): answered as blind writes
    /// once it commits.
    moot: Vec<Reply>,
}

impl Write {
    fn lane(&self) -> usize {
        match self {
            Write::Fires(..) | Write::Claims(..) => FIRES,
            Write::Event(..) => RESULTS,
        }
    }

    fn rows(&self) -> usize {
        match self {
            Write::Fires(fires) => fires.len(),
            Write::Claims(claims) => claims.len(),
            Write::Event(..) => 1,
        }
    }
}

impl Queued for Pending {
    fn rows(&self) -> usize {
        self.write.rows()
    }

    fn run(&self) -> Option<&RequestId> {
        match &self.write {
            Write::Event(event) => Some(&event.request_id),
            Write::Fires(..) | Write::Claims(..) => None,
        }
    }

    fn absorb(&mut self, later: Self) -> Result<(), Self> {
        let (Write::Event(earlier), Write::Event(next)) = (&self.write, &later.write) else {
            return Err(later);
        };
        // Only a blind write owes its caller nothing but its commit.
        let Some(event) = supersede(&earlier.event, &next.event).filter(|_| earlier.blind) else {
            return Err(later);
        };
        let task_id = next.task_id.or(earlier.task_id);
        let Pending {
            write: Write::Event(next),
            reply,
            moot,
        } = later
        else {
            return Err(later);
        };
        self.write = Write::Event(RunEvent {
            task_id,
            event,
            ..next
        });
        self.moot.push(std::mem::replace(&mut self.reply, reply));
        self.moot.extend(moot);
        add(&metrics().writes_folded, 1);
        Ok(())
    }
}

/// Fires and claims go in one lane, results in the other: a fire's dispatch waits for its
/// commit, so it never queues behind results, and the two commit side by side. Fire batches
/// touch distinct rows, so on MySQL several may commit at once (each locks its tasks in id
/// order); so may full batches of results, no two writing to one run.
const FIRES: usize = 0;
const RESULTS: usize = 1;

/// The actor owning the pool and the write queues.
pub struct StoreActor {
    db: Db,
    retry_defaults: RetryPolicy,
    /// The tasks whose successes alerts need, as this process last read them.
    watch: Arc<SuccessWatch>,
    lanes: [Lane<Pending>; 2],
    /// A lane with a look-again timer set: at most one timer a lane.
    timer_set: [bool; 2],
    flush_waiters: Vec<oneshot::Sender<()>>,
}

impl StoreActor {
    /// `batch_size`: most rows a commit; `max_wait`: how long a result waits for a running
    /// commit before it starts one beside it; `commits`: see [`LaneCommits::on`].
    pub fn new(
        db: Db,
        retry_defaults: RetryPolicy,
        batch_size: usize,
        max_wait: Duration,
        commits: LaneCommits,
    ) -> Self {
        StoreActor {
            lanes: [
                Lane::new(Policy::Eager, commits.fires, batch_size),
                Lane::new(Policy::Natural { max_wait }, commits.results, batch_size),
            ],
            timer_set: [false; 2],
            db,
            retry_defaults,
            watch: Arc::default(),
            flush_waiters: Vec::new(),
        }
    }

    fn enqueue(&mut self, pending: Pending, ctx: &mut Context<Self>) {
        let lane = pending.write.lane();
        self.lanes[lane].push(pending, Instant::now());
        self.commit_next(lane, ctx);
    }

    /// Queues a write; the returned future resolves once it is committed.
    fn enqueue_reply<T: Send + 'static>(
        &mut self,
        ctx: &mut Context<Self>,
        write: Write,
        reply: impl FnOnce(oneshot::Sender<Result<T, StoreError>>) -> Reply,
    ) -> ResponseFuture<Result<T, StoreError>> {
        let (tx, rx) = oneshot::channel();
        let reply = reply(tx);
        let moot = Vec::new();
        self.enqueue(Pending { write, reply, moot }, ctx);
        Box::pin(async move { rx.await.unwrap_or_else(|_| Err(dropped())) })
    }

    /// Starts every commit the lane's policy allows now, and sets a timer for the next moment
    /// it may allow one.
    fn commit_next(&mut self, lane: usize, ctx: &mut Context<Self>) {
        while let Some(taken) = self.lanes[lane].next_batch(Instant::now()) {
            let writer = Writer {
                db: self.db.clone(),
                retry_defaults: self.retry_defaults,
                watch: self.watch.clone(),
            };
            ctx.spawn(
                commit(writer, taken.writes)
                    .into_actor(self)
                    .map(move |_, act, ctx| {
                        act.lanes[lane].done(&taken.runs);
                        act.commit_next(lane, ctx);
                        act.notify_if_idle();
                    }),
            );
        }
        if let Some(deadline) = self.lanes[lane]
            .deadline()
            .filter(|_| !self.timer_set[lane])
        {
            self.timer_set[lane] = true;
            let wait = deadline.saturating_duration_since(Instant::now());
            ctx.run_later(wait, move |act, ctx| {
                act.timer_set[lane] = false;
                act.commit_next(lane, ctx);
            });
        }
    }

    fn notify_if_idle(&mut self) {
        if self.lanes.iter().all(Lane::is_idle) {
            for waiter in self.flush_waiters.drain(..) {
                let _ = waiter.send(());
            }
        }
    }
}

/// Transactions committing at once in each write lane.
#[derive(Debug, Clone, Copy)]
pub struct LaneCommits {
    pub fires: usize,
    pub results: usize,
}

impl LaneCommits {
    /// The configured `fires` and `results` on MySQL, one a lane on SQLite (one writer). Each
    /// fire commit beyond the database server's cores costs it CPU (its threads contend)
    /// without adding throughput: with MariaDB on ax's two cores, two instead of eight cut its
    /// CPU per fire by about a sixth past the ceiling. Results keep four: each callback waits
    /// for its result's commit, and a second's callbacks come together.
    pub fn on(db: &Db, fires: usize, results: usize) -> Self {
        match db {
            Db::Mysql(_) | Db::Postgres(_) => LaneCommits { fires, results },
            Db::Sqlite(..) => LaneCommits {
                fires: 1,
                results: 1,
            },
        }
    }
}

impl Actor for StoreActor {
    type Context = Context<Self>;
}

/// A write's result, handed to its caller after the commit.
enum Done {
    Fires(Vec<FireOutcome>),
    Event(Option<Decided>),
    Claims(Vec<bool>),
}

/// What a commit writes with.
struct Writer {
    db: Db,
    retry_defaults: RetryPolicy,
    watch: Arc<SuccessWatch>,
}

/// How often a batch (or an API's write) is tried when the database reports a deadlock, a busy lock or (Galera) a
/// certification conflict or a node not synced.
const COMMIT_TRIES: usize = 5;
/// The pause before the second try of a batch, doubled before each later one (50, 100, 200,
/// 400 ms): long enough for the write that won to commit, or a node to finish syncing, short
/// enough that fires stay within their second or two.
const COMMIT_BACKOFF: Duration = Duration::from_millis(50);

/// Commits one batch in one transaction, then answers every caller. A batch the database
/// refuses (not a lost connection: a statement it will not take) is committed again one write
/// at a time, so one bad write fails alone and the others commit.
async fn commit(writer: Writer, batch: Vec<Pending>) {
    let (writes, replies): (Vec<Write>, Vec<Replies>) = batch
        .into_iter()
        .map(|p| (p.write, Replies(p.reply, p.moot)))
        .unzip();
    let count = writes.len();
    let writes = Arc::new(writes);
    match commit_once(&writer, writes.clone()).await {
        Ok(done) => answer(replies, done),
        Err(err) if count > 1 && !err.is_unreachable() => {
            log::warn!("a batch of {count} writes failed ({err}); committing them one by one");
            let writes = Arc::try_unwrap(writes).unwrap_or_default();
            for (write, reply) in writes.into_iter().zip(replies) {
                commit_alone(&writer, write, reply).await;
            }
        }
        Err(err) => {
            log::error!("a batch of {count} writes failed: {err}");
            replies.into_iter().for_each(|replies| replies.fail(&err));
        }
    }
}

/// Commits one write of a refused batch. A result the database still refuses is recorded as
/// the attempt's failure, `RESULT_REJECTED` with the reason, so the run does not wait for its
/// claim to lapse and is not delivered again and again.
async fn commit_alone(writer: &Writer, write: Write, reply: Replies) {
    let err = match commit_once(writer, Arc::new(vec![write.clone()])).await {
        Ok(done) => return answer(vec![reply], done),
        Err(err) => err,
    };
    log::error!("a write failed: {err}");
    let Some(rejected) = rejection(&write, &err).filter(|_| !err.is_unreachable()) else {
        return reply.fail(&err);
    };
    match commit_once(writer, Arc::new(vec![rejected])).await {
        Ok(done) => answer(vec![reply], done),
        Err(err) => reply.fail(&err),
    }
}

/// A result the database refused, as the failure of the attempt it reported on.
fn rejection(write: &Write, err: &StoreError) -> Option<Write> {
    let Write::Event(RunEvent {
        request_id,
        task_id,
        event: Event::Report(report),
        ..
    }) = write
    else {
        return None;
    };
    let message = cut(
        format!("{RESULT_REJECTED_MESSAGE}: {err}"),
        MAX_MESSAGE_CHARS,
    );
    Some(Write::Event(RunEvent {
        request_id: request_id.clone(),
        task_id: *task_id,
        event: Event::Report(rejected_result(report, message)),
        blind: false,
    }))
}

/// Commits writes in one transaction, tried again after a short pause when the database
/// reports a deadlock, a busy lock or a Galera conflict. Each of those rolls the whole
/// transaction back, so a try starts from nothing: its reads, compare-and-sets and inserts are
/// decided again on what is committed then (a fire another process recorded meanwhile is
/// `Stale` or `Duplicate`, a claim another won is lost), never applied twice.
async fn commit_once(writer: &Writer, writes: Arc<Vec<Write>>) -> Result<Vec<Done>, StoreError> {
    let rows: usize = writes.iter().map(Write::rows).sum();
    let started = Instant::now();
    let done = retry_transient("a batch of writes", || run_batch(writer, writes.clone())).await?;
    log::debug!(
        "committed {} writes in {:?}",
        writes.len(),
        started.elapsed()
    );
    metrics().commit_seconds.observe_duration(started.elapsed());
    metrics().batch_rows.observe(rows as f64);
    Ok(done)
}

/// Tries `attempt` again, after a pause that doubles each time, while the database rolls it
/// back for a reason that may pass ([`StoreError::is_transient`]), up to [`COMMIT_TRIES`] tries.
async fn retry_transient<T, F, Fut>(what: &str, mut attempt: F) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, StoreError>>,
{
    let mut tries = 0;
    loop {
        tries += 1;
        match attempt().await {
            Err(err) if err.is_transient() && tries < COMMIT_TRIES => {
                log::warn!("{what} rolled back, trying again: {err}");
                tokio::time::sleep(COMMIT_BACKOFF * (1 << (tries - 1))).await;
            }
            result => return result,
        }
    }
}

/// Hands each caller its write's outcome; `done` holds one per write, in the writes' order
/// (see `run_batch`).
fn answer(replies: Vec<Replies>, done: Vec<Done>) {
    for (Replies(reply, moot), done) in replies.into_iter().zip(done) {
        // A folded write is written as its caller asked: blind, so no outcome is owed.
        for folded in moot {
            if let Reply::Event(tx) = folded {
                drop(tx.send(Ok(None)));
            }
        }
        // A caller that gave up waiting (send fails) is no reason to fail the others.
        match (reply, done) {
            (Reply::Fires(tx), Done::Fires(outcomes)) => drop(tx.send(Ok(outcomes))),
            (Reply::Event(tx), Done::Event(decided)) => {
                if let Some(Decided::Applied(run)) = &decided {
                    if run.status == RunStatus::Ready && run.dispatched < run.attempt {
                        add(&metrics().retries, 1);
                    }
                }
                drop(tx.send(Ok(decided)))
            }
            (Reply::Claims(tx), Done::Claims(won)) => drop(tx.send(Ok(won))),
            (reply, _) => reply.fail(&StoreError::Commit("store reply out of order".into())),
        }
    }
}

async fn run_batch(writer: &Writer, batch: Arc<Vec<Write>>) -> Result<Vec<Done>, StoreError> {
    let mut conn = writer.db.conn().await?;
    let (retry_defaults, watch) = (writer.retry_defaults, writer.watch.clone());
    conn.transaction(|conn| {
        Box::pin(async move {
            let mut events = record_events(conn, &batch, retry_defaults, &watch)
                .await?
                .into_iter();
            let mut done = Vec::with_capacity(batch.len());
            for write in batch.iter() {
                done.push(match write {
                    Write::Fires(fires) => Done::Fires(runs::record_fires(conn, fires).await?),
                    Write::Event(_) => Done::Event(events.next().flatten()),
                    Write::Claims(claims) => {
                        let mut won = Vec::with_capacity(claims.len());
                        for (attempt, event) in claims {
                            won.push(due::claim(conn, attempt, event).await?);
                        }
                        Done::Claims(won)
                    }
                });
            }
            Ok(done)
        })
    })
    .await
}

/// Records the batch's run events: the blind ones (dispatcher replies the lifecycle can write
/// without a read) many to a statement, the rest decided on one read of their runs. Returns,
/// per event in batch order, its outcome (`None` for a blind one).
async fn record_events(
    conn: &mut Conn,
    batch: &[Write],
    retry_defaults: RetryPolicy,
    watch: &SuccessWatch,
) -> Result<Vec<Option<Decided>>, StoreError> {
    let events: Vec<&RunEvent> = batch
        .iter()
        .filter_map(|write| match write {
            Write::Event(event) => Some(event),
            _ => None,
        })
        .collect();
    let blind_writes: Vec<Option<RunWrite>> = events
        .iter()
        .map(|e| e.blind.then(|| blind(&e.event)).flatten())
        .collect();
    let writes: Vec<(Target, &RunWrite)> = events
        .iter()
        .zip(&blind_writes)
        .filter_map(|(e, w)| {
            let target = Target {
                run: &e.request_id,
                task: e.task_id,
            };
            w.as_ref().map(|w| (target, w))
        })
        .collect();
    run_writes::apply_all(conn, &writes, Some(watch)).await?;
    let exact: Vec<(RequestId, Event)> = events
        .iter()
        .zip(&blind_writes)
        .filter(|(_, write)| write.is_none())
        .map(|(e, _)| (e.request_id.clone(), e.event.clone()))
        .collect();
    let mut decided = transitions::decide_many(conn, &exact, retry_defaults, Some(watch))
        .await?
        .into_iter();
    Ok(blind_writes
        .iter()
        .map(|write| match write {
            Some(_) => None,
            None => decided.next(),
        })
        .collect())
}

/// Records fires; answers once they are committed.
#[derive(Message)]
#[rtype(result = "Result<Vec<FireOutcome>, StoreError>")]
pub struct RecordFires(pub Vec<FireRecord>);

impl Handler<RecordFires> for StoreActor {
    type Result = ResponseFuture<Result<Vec<FireOutcome>, StoreError>>;

    fn handle(&mut self, msg: RecordFires, ctx: &mut Context<Self>) -> Self::Result {
        self.enqueue_reply(ctx, Write::Fires(msg.0), Reply::Fires)
    }
}

/// Records an event for a run; answers once it is committed, with its outcome (`None` for a
/// blind one).
#[derive(Message)]
#[rtype(result = "Result<Option<Decided>, StoreError>")]
pub struct RecordEvent(pub RunEvent);

impl Handler<RecordEvent> for StoreActor {
    type Result = ResponseFuture<Result<Option<Decided>, StoreError>>;

    fn handle(&mut self, msg: RecordEvent, ctx: &mut Context<Self>) -> Self::Result {
        self.enqueue_reply(ctx, Write::Event(msg.0), Reply::Event)
    }
}

fn dropped() -> StoreError {
    StoreError::Pool("the store stopped before committing".into())
}

/// Claims attempts for dispatch; answers, per claim, whether this process won it.
#[derive(Message)]
#[rtype(result = "Result<Vec<bool>, StoreError>")]
pub struct RecordClaims(pub Vec<(DueAttempt, Event)>);

impl Handler<RecordClaims> for StoreActor {
    type Result = ResponseFuture<Result<Vec<bool>, StoreError>>;

    fn handle(&mut self, msg: RecordClaims, ctx: &mut Context<Self>) -> Self::Result {
        self.enqueue_reply(ctx, Write::Claims(msg.0), Reply::Claims)
    }
}

/// A boxed query to run on a connection of the pool.
pub type QueryFn<T> = Box<dyn for<'c> FnOnce(&'c mut Conn) -> ax_store::ConnFuture<'c, T> + Send>;

/// Runs a query outside the write queue (reads and task changes), concurrently with others.
pub struct Query<T: 'static>(pub QueryFn<T>);

impl<T: 'static> Message for Query<T> {
    type Result = Result<T, StoreError>;
}

impl<T: Send + 'static> Handler<Query<T>> for StoreActor {
    type Result = ResponseFuture<Result<T, StoreError>>;

    fn handle(&mut self, msg: Query<T>, _: &mut Context<Self>) -> Self::Result {
        let db = self.db.clone();
        Box::pin(async move {
            let mut conn = db.conn().await?;
            (msg.0)(&mut conn).await
        })
    }
}

/// Commits everything queued; answers when the queue is empty (shutdown).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Flush;

impl Handler<Flush> for StoreActor {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, _: Flush, _: &mut Context<Self>) -> Self::Result {
        let (tx, rx) = oneshot::channel();
        self.flush_waiters.push(tx);
        self.notify_if_idle();
        Box::pin(async move {
            let _ = rx.await;
        })
    }
}

/// A handle to the StoreActor: the rest of ax calls these methods, not actix.
#[derive(Clone)]
pub struct StoreHandle {
    addr: Addr<StoreActor>,
}

impl StoreHandle {
    pub fn new(addr: Addr<StoreActor>) -> Self {
        StoreHandle { addr }
    }

    pub async fn record_fires(
        &self,
        fires: Vec<FireRecord>,
    ) -> Result<Vec<FireOutcome>, StoreError> {
        self.addr.send(RecordFires(fires)).await.map_err(mailbox)?
    }

    /// Records an event for a run; `None` for a blind one (see [`RunEvent::blind`]).
    pub async fn record_event(&self, event: RunEvent) -> Result<Option<Decided>, StoreError> {
        self.addr.send(RecordEvent(event)).await.map_err(mailbox)?
    }

    /// Records an event for a run and says what it did.
    pub async fn decide(&self, request_id: RequestId, event: Event) -> Result<Decided, StoreError> {
        let event = RunEvent {
            request_id,
            task_id: None,
            event,
            blind: false,
        };
        Ok(self.record_event(event).await?.unwrap_or(Decided::Unknown))
    }

    pub async fn record_claims(
        &self,
        claims: Vec<(DueAttempt, Event)>,
    ) -> Result<Vec<bool>, StoreError> {
        self.addr
            .send(RecordClaims(claims))
            .await
            .map_err(mailbox)?
    }

    /// Runs `query` on a pooled connection.
    pub async fn query<T, F>(&self, query: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&'c mut Conn) -> ax_store::ConnFuture<'c, T> + Send + 'static,
    {
        self.addr
            .send(Query(Box::new(query)))
            .await
            .map_err(mailbox)?
    }

    /// Runs `write` (a transaction, or one statement) with `input` on a pooled connection, and
    /// again with a copy of `input` on a connection taken anew while the database rolls it back
    /// for a reason that may pass: a deadlock, or a Galera node's certification conflict (a
    /// process writing through another node changed the same rows first). Each try is decided
    /// on what is committed when it runs.
    pub async fn write<I, T, F>(&self, input: I, write: F) -> Result<T, StoreError>
    where
        I: Clone + Send + 'static,
        T: Send + 'static,
        F: for<'c> Fn(&'c mut Conn, I) -> ax_store::ConnFuture<'c, T> + Send + Sync + 'static,
    {
        let write = Arc::new(write);
        retry_transient("a write", || {
            let (write, input) = (write.clone(), input.clone());
            self.query(move |conn| write(conn, input))
        })
        .await
    }

    pub async fn flush(&self) {
        let _ = self.addr.send(Flush).await;
    }
}

fn mailbox(err: MailboxError) -> StoreError {
    StoreError::Pool(format!("store actor unavailable: {err}"))
}

/// Makes a boxed future for [`StoreHandle::query`] closures.
pub fn boxed<'c, T, F>(fut: F) -> ax_store::ConnFuture<'c, T>
where
    F: Future<Output = Result<T, StoreError>> + Send + 'c,
{
    Box::pin(fut)
}
