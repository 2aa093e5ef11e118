//! One system across processes: this process's identity in the cluster, locked for its
//! lifetime. (The fencing of a paused process, which the store's queries use, is the pure
//! `crate::fencing`.)

pub mod identity;
