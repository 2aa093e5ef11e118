//! The actors of ax, one per concern. Each is a thin shell owning state and doing I/O; the
//! decisions live in the pure modules (`cron`, `wheel`, `schedule`).

pub mod dispatch;
pub mod lock;
pub mod store;
pub mod supervisor;
pub mod wheel;
