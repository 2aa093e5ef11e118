//! The state every HTTP handler is given, the API's and the console's alike.

use crate::actors::health::Health;
use crate::service::Service;
use crate::web::auth_throttle::AuthThrottle;
use ax_core::ids::ProcessId;
use ax_core::security::Security;

/// What every handler shares.
#[derive(Clone)]
pub struct ApiState {
    pub service: Service,
    pub health: Health,
    pub instance_id: ProcessId,
    pub backend: &'static str,
    pub security: Security,
    /// Failed authentications by client address: they slow down past a few a minute.
    pub auth_failures: AuthThrottle,
}
