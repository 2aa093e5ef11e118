//! This process's promises of what it may send: each tick writes the second it may send up
//! to, one write at a time; a fenced process takes a new epoch (see
//! `ax_core::cluster::fencing`).

use actix::prelude::*;

use super::WheelActor;
use crate::actors::store::boxed;
use ax_store::queries::processes;
use ax_store::StoreError;

impl WheelActor {
    /// Promises in the store that this process may send the runs of `second`; they go out once
    /// it is written. A fenced process takes a new epoch first, and its claims from before are
    /// checked again before they are sent (see `ax_core::cluster::fencing`).
    pub(super) fn promise(&mut self, second: i64, ctx: &mut Context<Self>) {
        if second <= self.promises.asked {
            return;
        }
        self.promises.asked = second;
        if self.promises.writing {
            self.promises.next = Some(second);
            return;
        }
        self.promises.writing = true;
        let (store, me) = (self.fire.store.clone(), self.fire.instance_id.clone());
        let (epoch, now) = (self.promises.epoch, self.clock.now());
        let write = async move {
            let me2 = me.clone();
            let made = store
                .query(move |conn| {
                    boxed(async move { processes::promise(conn, &me2, epoch, second, now).await })
                })
                .await?;
            if made {
                return Ok((epoch, false));
            }
            let epoch = store
                .query(move |conn| {
                    boxed(async move { processes::begin_epoch(conn, &me, second, now).await })
                })
                .await?;
            Ok::<_, StoreError>((epoch, true))
        };
        ctx.spawn(write.into_actor(self).map(move |written, act, ctx| {
            act.promises.writing = false;
            match written {
                Ok((epoch, fenced)) => {
                    if fenced {
                        log::warn!(
                            "this process was fenced by another (its promises were late: paused, \
                             or its store slow); the claims it holds are checked again before \
                             they are sent"
                        );
                    }
                    act.promises.epoch = epoch;
                    act.fire.gate.promised(second, fenced);
                }
                // The store's outage is told elsewhere; nothing goes out until it is back.
                Err(err) => log::debug!("the promise for {second} was not written: {err}"),
            }
            if let Some(next) = act.promises.next.take() {
                act.promises.asked = next - 1;
                act.promise(next, ctx);
            }
        }));
    }
}
