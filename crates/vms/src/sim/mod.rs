//! The VM-level simulator of spec 003 (`colosched sim vms`): hypervisors with an SSD cache in
//! front of shared storage, applications of VMs with changing I/O, and a placement policy —
//! the planner of `decide` (the same code `colosched plan vms` runs) or a baseline — acting
//! every window through live migrations that cost time, bandwidth and speed.

pub mod engine;
pub mod io;
mod policy;
pub mod scenario;

pub use engine::{run, RunResult, POLICIES};
pub use scenario::{Scenario, PRESETS};

#[cfg(test)]
mod tests;
