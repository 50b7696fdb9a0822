//! Decide: pure functions of what was sensed, no clock and no I/O. Which tasks are BE, which
//! move where (the core policies behind the agent's guards), and whether a cycle can skip the
//! full look.

pub mod backoff;
pub mod look;
pub mod os;
pub mod plan;
pub mod select;
pub mod views;
