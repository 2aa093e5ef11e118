//! What the JSON API and the console share: the state every handler is given, who a request
//! is from, where the console lives and what its session cookie is.

mod actor;
pub mod auth_throttle;
pub mod console_home;
pub mod session;
mod state;

pub use actor::Actor;
pub use state::ApiState;
