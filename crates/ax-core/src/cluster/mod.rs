//! What a process may do in a cluster: the fencing promise that guards its sends, and its share of the tasks.

pub mod fencing;
pub mod shares;
