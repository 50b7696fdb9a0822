//! colosched-core: the vocabulary shared by the cluster simulator and the node agent.
//!
//! A *cell* is a group of nodes — the 4 machines of a thesis G_cell, or the NUMA nodes of one
//! (giant) VM. Each node has a load and holds tasks. A *policy* looks at one cell and returns
//! moves. Nothing here reads a file or a clock: the simulator builds cells from trace state, the
//! agent builds one from /proc and /sys, and both call the same `plan`.
//!
//! `proctext` parses the text of per-task /proc files (stat, schedstat) for both agents, the
//! node agent and the host agent; they read the files themselves. `cpuset` is the kernel's CPU
//! list (`0-3,8`) as a set, for the agents' configs, masks and state files.

pub mod cpuset;
pub mod guards;
pub mod metrics;
pub mod policy;
pub mod proctext;
pub mod rng;

pub use guards::{Cooldown, GuardSettings, Guarded, Guards};
pub use metrics::gini;
pub use policy::{Limits, MigratableCpu, Order, Planner, Policy, Receiver};
pub use rng::Rng;

/// Opaque handle chosen by the caller (a run index in the simulator, a pid in the agent).
pub type TaskId = u64;

/// What a policy may know about a task. Loads and usages share one unit (the simulator: CPU
/// normalised to the largest machine; the agent: CPUs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Task {
    pub id: TaskId,
    /// The task's index within its job (the trace's task index; the agent has none: 0). The
    /// thesis's code takes only even indices as migratable (`Limits::migratable_even_index`).
    pub index: u32,
    /// 0..=11 in the Google trace; lower is less important.
    pub priority: u8,
    pub cpu_request: f64,
    /// Current mean CPU usage: what the task adds to its node's load.
    pub cpu_usage: f64,
    /// Peak CPU usage of the current window (the migratable test looks at this).
    pub max_cpu: f64,
    /// Memory that moves with the task (network cost of a migration).
    pub mem_usage: f64,
    /// Memory accesses per instruction (the thesis's "cache_misses" key).
    pub mai: f64,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Node {
    pub load: f64,
    pub tasks: Vec<Task>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Cell {
    pub nodes: Vec<Node>,
}

/// Move `task` from node `from` to node `to` (indices into `Cell::nodes`). `rank` is the
/// target's place among the cell's receivers: 0 = least loaded ("first"), 1 = second.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Move {
    pub task: TaskId,
    pub from: usize,
    pub to: usize,
    pub rank: u8,
}
