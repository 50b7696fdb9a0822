//! Act: the only code that changes the system. Writers are given what to write; every original
//! goes to the state file before a change, and `state` puts everything back.

pub mod actuator;
pub mod kernel;
pub mod state;
