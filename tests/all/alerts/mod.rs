//! Alerts end to end, against receivers the tests start: a run's end recorded by the store,
//! folded by the rules and delivered once to each channel.

mod crash;
mod email;
mod events;
mod groups;
mod links;
mod webhook;
