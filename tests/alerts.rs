//! Alerts end to end, against receivers the tests start: mail through an in-test SMTP sink
//! (`common::smtp`).

mod common;
// A crate root's modules are found beside it, so the file under tests/alerts/ is named here.
#[path = "alerts/email.rs"]
mod email;
