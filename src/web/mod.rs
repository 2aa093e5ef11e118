//! What the JSON API and the console share: the state every handler is given, who a request
//! is from, and the token check in front of both.

mod actor;
mod state;
mod token;

pub use actor::Actor;
pub use state::ApiState;
pub use token::require_token;
