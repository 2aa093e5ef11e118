//! End-to-end tests of the SDK against a real `ax serve` (the binary from `AX_BIN`, default
//! `target/debug/ax`): one test binary, a module per concern.

mod harness;

mod check;
mod dispatch;
mod groups;
mod logs;
mod shutdown;
