//! Sending to people: the channels that carry an alert out of ax (mail so far). Off every run
//! path — a slow or broken receiver delays an alert, never a fire or a run.

pub mod email;
