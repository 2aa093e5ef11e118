//! FeedActor: serves `GET /api/events`. While anyone listens it looks at the store once a
//! second (see `ax_core::run::feed`) and hands each listener the changes it wants; with no
//! listener it reads nothing. Each listener has a bounded queue: one that falls that far
//! behind is let go (its stream ends; an `EventSource` reconnects by itself) rather than
//! holding the others up or growing without end.

use std::time::Duration;

use actix::prelude::*;
use chrono::{DateTime, Utc};
use tokio::sync::{mpsc, oneshot};

use super::store::{boxed, StoreHandle};
use ax_core::run::feed::{Feed, Interest};
use ax_core::time::clock::SharedClock;
use ax_store::queries::run_feed;
use ax_store::to_db;

/// How often a look is taken while someone listens.
pub const LOOK_INTERVAL: Duration = Duration::from_secs(1);
/// How far back before the last look a look reads ended runs and logs: a write committed late,
/// or by a process whose clock is a little behind, is still seen.
const OVERLAP: Duration = Duration::from_secs(3);
/// Changes a listener may have waiting.
pub const QUEUE: usize = 512;
/// Listeners one process serves at most.
pub const MAX_LISTENERS: usize = 1_000;

/// A change as a listener gets it: the frame of one server-sent event.
pub type Frame = actix_web::web::Bytes;

pub struct FeedActor {
    store: StoreHandle,
    clock: SharedClock,
    feed: Feed,
    listeners: Vec<Listener>,
    /// When the last look began; `None` when nobody listened at the last tick.
    last: Option<DateTime<Utc>>,
    looking: bool,
    /// Listeners that joined before the baseline look, told when it is taken: their streams
    /// open only then, so a change made once a stream is open is never part of the baseline.
    waiting: Vec<oneshot::Sender<()>>,
}

struct Listener {
    interest: Interest,
    queue: mpsc::Sender<Frame>,
}

impl FeedActor {
    pub fn new(store: StoreHandle, clock: SharedClock) -> Self {
        FeedActor {
            store,
            clock,
            feed: Feed::default(),
            listeners: Vec::new(),
            last: None,
            looking: false,
            waiting: Vec::new(),
        }
    }

    fn tick(&mut self, ctx: &mut Context<Self>) {
        self.listeners.retain(|l| !l.queue.is_closed());
        if self.listeners.is_empty() {
            // A new listener starts from a fresh baseline, not from a stale one.
            self.feed = Feed::default();
            self.last = None;
            return;
        }
        if self.looking {
            return;
        }
        let now = self.clock.now();
        let from = self.last.unwrap_or(now) - OVERLAP;
        self.last = Some(now);
        self.looking = true;
        let store = self.store.clone();
        let since = to_db(from);
        ctx.spawn(
            async move {
                store
                    .query(move |conn| boxed(run_feed::look(conn, since)))
                    .await
            }
            .into_actor(self)
            .map(|look, act, _| {
                act.looking = false;
                // Released after a failed look too: the stream opens, and tells once the
                // store answers again.
                act.waiting.clear();
                match look {
                    Ok(look) => {
                        let changes = act.feed.advance(look);
                        act.tell(changes);
                    }
                    Err(err) => log::warn!("run feed: a look at the store failed: {err}"),
                }
            }),
        );
    }

    fn tell(&mut self, changes: Vec<ax_core::run::feed::Change>) {
        for change in changes {
            let frame = Frame::from(change.frame());
            // A full queue lets its listener go: dropping its sender ends its stream.
            self.listeners.retain(|listener| {
                !listener.interest.wants(&change) || listener.queue.try_send(frame.clone()).is_ok()
            });
        }
    }
}

impl Actor for FeedActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.run_interval(LOOK_INTERVAL, |act, ctx| act.tick(ctx));
    }
}

/// A new listener: its queue once the feed has its baseline, or `None` when this process
/// already serves [`MAX_LISTENERS`].
#[derive(Message)]
#[rtype(result = "Option<mpsc::Receiver<Frame>>")]
pub struct Listen(pub Interest);

impl Handler<Listen> for FeedActor {
    type Result = ResponseFuture<Option<mpsc::Receiver<Frame>>>;

    fn handle(&mut self, msg: Listen, ctx: &mut Context<Self>) -> Self::Result {
        self.listeners.retain(|l| !l.queue.is_closed());
        if self.listeners.len() >= MAX_LISTENERS {
            return Box::pin(async { None });
        }
        let (queue, receiver) = mpsc::channel(QUEUE);
        self.listeners.push(Listener {
            interest: msg.0,
            queue,
        });
        if self.feed.is_primed() {
            return Box::pin(async { Some(receiver) });
        }
        let (ready, baseline) = oneshot::channel();
        self.waiting.push(ready);
        // The first listener need not wait for the next tick.
        self.tick(ctx);
        Box::pin(async move {
            // Dropped unsent (the actor stopping) counts as ready: the stream then just ends.
            let _ = baseline.await;
            Some(receiver)
        })
    }
}
