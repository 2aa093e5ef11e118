//! One system across processes: this process's identity in the cluster, locked for its
//! lifetime. (The fencing of a paused process, which the store's queries use, is the pure
//! `ax_core::cluster::fencing`.)

pub mod identity;
