//! colosched-vms: SSD-cache-aware VM placement over a cluster of hypervisors (spec 003).
//!
//! - `decide`: the planner — cluster state in, ordered migration plan out; pure functions with
//!   no clock and no I/O, shared by the simulator and the real executor.
//! - `real`: readers of what real hosts run (dm-cache / lvmcache and bcache statistics), rooted
//!   at paths so tests use recorded fixtures.
//!   `real::migrate` is the live-migration executor: a plan carried out with QEMU over QMP.
//! - `state`: a cluster state file (JSON or TOML) checked and planned, in its own names.
//! - `cli`: `colosched migrate vms` (the executor's command line).
//!
//! Only spec 003's evaluation survives; its method is lost. Every choice the spec marks
//! "(reconstructed)" is a parameter here, and docs/vm-placement.md says which.

pub mod cli;
pub mod decide;
pub mod real;
pub mod sim;
pub mod state;
