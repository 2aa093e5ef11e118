//! The tests that run one at a time, in a process of their own: each holds [`serial`] for its
//! whole run. The cluster's tests run two or three ax processes under load and check their
//! timing, which another test beside them would disturb; so do the Sentinel test, which fails
//! Redis over under load, and the Galera test, which runs three MariaDB nodes besides. The
//! alert mail's test sets a variable of the process's environment, which no other thread may
//! read meanwhile.

// The harness of `tests/all`, of which these tests use a part.
#[path = "../all/common/mod.rs"]
#[allow(unused_imports, unused_macros)]
mod common;

mod alert_mail;
mod cluster;
mod galera;
mod sentinel;
mod shares;

/// One test of this binary at a time.
pub async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    SERIAL.lock().await
}
