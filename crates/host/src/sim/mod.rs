//! A discrete-event simulator of one hypervisor host: physical cores (each with a speed factor
//! SF, some reserved for the host's own dom0) run the vCPUs of VMs under a pluggable
//! `Scheduler`. Time jumps from event to event (nanoseconds); there is no fixed step.
//!
//! - `model`: what a run is made of (`Host`, `Vm`, `Workload`) and what it reports.
//! - `engine`: the event loop; it owns the vCPUs' progress and asks the scheduler what to run.
//! - `sched`: the `Scheduler` trait and one file per scheduler (`credit`, `eevdf`, `ia`).
//! - `scenario`: scenario files (TOML), checked key by key.

pub mod engine;
#[cfg(test)]
mod malformed;
pub mod model;
pub mod net;
pub mod scenario;
pub mod sched;
#[cfg(test)]
mod tests;
pub mod time;

pub use engine::simulate;
pub use model::{
    ms, Completion, Core, CoreId, Host, Nanos, RunConfig, RunInterval, SimResult, Topology, Vcpu,
    VcpuId, VcpuStats, Vm, Workload, MS,
};
pub use scenario::{Scenario, ScenarioError};
pub use sched::{Dispatch, Scheduler, Stop};
