//! A user's handler behind one object type: params parsed into its `P`, its result, whatever
//! it is, made an [`Outcome`].

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use tokio::sync::watch;

use crate::dispatch::Dispatch;
use crate::logs::RunLog;
use crate::outcome::{Failed, Outcome};
use crate::run::Run;

/// The code of a run whose params do not fit the handler's type (final: no retry).
pub const BAD_PARAMS_CODE: &str = "BAD_PARAMS";

pub(crate) type LocalBoxFuture<T> = Pin<Box<dyn Future<Output = T>>>;

/// A handler, type-erased. Its futures are not `Send`: each run lives on one thread.
pub(crate) trait Handler: Send + Sync + 'static {
    fn start(
        &self,
        dispatch: Dispatch,
        log: Arc<RunLog>,
        stopping: watch::Receiver<bool>,
    ) -> LocalBoxFuture<Outcome>;
}

pub(crate) struct Typed<F, P> {
    f: F,
    // `fn() -> P`: the handler takes `P`s; it holds none, so is `Send + Sync` whatever `P`.
    params: PhantomData<fn() -> P>,
}

impl<F, P> Typed<F, P> {
    pub fn new(f: F) -> Typed<F, P> {
        Typed {
            f,
            params: PhantomData,
        }
    }
}

impl<F, P, Fut, O> Handler for Typed<F, P>
where
    F: Fn(Run<P>) -> Fut + Send + Sync + 'static,
    P: DeserializeOwned + 'static,
    Fut: Future<Output = Result<O, Failed>> + 'static,
    O: Into<Outcome>,
{
    fn start(
        &self,
        dispatch: Dispatch,
        log: Arc<RunLog>,
        stopping: watch::Receiver<bool>,
    ) -> LocalBoxFuture<Outcome> {
        let params = match serde_json::from_value::<P>(dispatch.params) {
            Ok(params) => params,
            Err(err) => {
                let failed = Failed::new(BAD_PARAMS_CODE, format!("params do not fit: {err}"));
                return Box::pin(std::future::ready(failed.stop_retry().into()));
            }
        };
        let work = (self.f)(Run {
            request_id: dispatch.request_id,
            task_id: dispatch.task_id,
            attempt: dispatch.attempt,
            scheduled_at: dispatch.scheduled_at,
            params,
            shard_index: dispatch.shard_index.unwrap_or(0),
            shard_total: dispatch.shard_total.unwrap_or(1),
            log,
            stopping,
        });
        Box::pin(async move {
            match work.await {
                Ok(done) => done.into(),
                Err(failed) => failed.into(),
            }
        })
    }
}
