//! Where and when an attempt is sent, as pure decisions: the executor group member it goes to
//! and each member's health (routing), the slots of each executor host with their two lanes,
//! and which handlers are slow. The dispatch actors (`ax_server::actors::dispatch`) hold the state
//! and do the sending.

pub mod host_slots;
pub mod routing;
pub mod slow_handlers;
