//! Time as ax reads it: the clock, a real one or one a test controls.

pub mod clock;
