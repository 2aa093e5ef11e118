//! The actors of ax, one per concern. Each is a thin shell owning state and doing I/O; the
//! decisions live in the pure modules (`cron`, `wheel`, `plan`, `run`).

pub mod alerts;
pub mod cluster;
pub mod dispatch;
pub mod feed;
pub mod fire;
pub mod groups;
pub mod health;
mod in_flight;
pub mod lock;
pub mod redis_keys;
pub mod redis_link;
pub mod resolver;
pub mod store;
pub mod supervisor;
pub mod wheel;

use actix::prelude::*;

pub use in_flight::InFlight;

/// Answered at once: the proof a health check asks for that an actor still reads its mailbox.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Ping;

/// Stops an actor now, whatever it is doing: after a start-up that failed once the actors
/// were started (an actor that never ran panics inside actix when the runtime drops it), and in
/// tests of what notices a dead actor.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Halt;

/// Every actor answers `Ping` and `Halt` the same way, so they are implemented here once.
macro_rules! control_messages {
    ($($actor:ty),*) => {$(
        impl Handler<Ping> for $actor {
            type Result = ();

            fn handle(&mut self, _: Ping, _: &mut Context<Self>) {}
        }

        impl Handler<Halt> for $actor {
            type Result = ();

            fn handle(&mut self, _: Halt, ctx: &mut Context<Self>) {
                ctx.stop();
            }
        }
    )*};
}

control_messages!(
    wheel::WheelActor,
    store::StoreActor,
    supervisor::SupervisorActor,
    dispatch::DispatchActor,
    lock::LockActor,
    cluster::ClusterActor,
    alerts::AlertActor,
    feed::FeedActor
);
