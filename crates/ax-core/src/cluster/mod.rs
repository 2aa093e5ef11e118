//! What a process may do in a cluster: the fencing promise that guards its sends.

pub mod fencing;
