//! colosched-cluster: a time-stepped replay of Google ClusterData2011-2 runs on a cluster whose
//! machines are grouped into cells (the thesis's 4-machine G_cells), rebalanced by a
//! `colosched_core::Planner` (spec 000 ch. 4–5).
//!
//! The model, with the thesis's values as defaults (every item is a field of `Config`):
//! - each SUBMITted run goes to a uniformly random machine (`Placement::Random`), or to the machine
//!   the trace scheduled it on (`Placement::Trace`); runs the trace never scheduled are skipped,
//!   and so are runs that do not end inside the loaded parts unless `Replay::All` is asked for;
//! - admission: a run starts when its admission load (`cpu_request × overcommit_ratio`, or with
//!   `Admission::Usage` its current CPU usage × overcommit_ratio) fits in
//!   the machine's capacity (`capacity`, 0.5) next to the runs already admitted and no earlier run
//!   waits there; otherwise it joins that machine's FIFO pending queue. A run larger than the
//!   whole capacity starts when its machine is empty, so it cannot block a queue forever;
//! - a machine's load is the sum of its running tasks' mean CPU usage in the current 300 s usage
//!   window (real `task_usage` rows, else the calibrated usage model);
//! - a run needs `end − schedule` seconds of service (its trace run time); every step its machine
//!   is overloaded (load > capacity) the step gives `1 − overload_penalty` of a step of service
//!   (the thesis: "a certain amount is added to the duration"; default: one step per step);
//!   runs with no end in the trace never finish;
//! - every migration cycle each cell is handed to the planner with each node's load and its
//!   migratable tasks; the cycle is every step in which runs were submitted, else every 10th
//!   step (Algorithm 4-1);
//! - a migration costs the task's assigned memory in network traffic; optionally it takes time,
//!   over one link of `bandwidth_mbit_s` per source machine, the task running on its source
//!   until the copy is done.

mod engine;

pub use engine::{simulate, SimError};

use colosched_core::Limits;
use serde::Serialize;

/// What a run's admission load is (spec 000, open question 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// `cpu_request × overcommit_ratio`, fixed for the run's life (the spec's reconstruction).
    Request,
    /// `current mean CPU usage × overcommit_ratio`, refreshed every usage window: a machine
    /// admits while its tasks' actual load leaves room, so moving load away lets waiting runs in.
    Usage,
}

/// Which runs are replayed (spec 000, open question 6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replay {
    /// Runs that start and end inside the loaded parts: the thesis builds each task's duration
    /// from its SCHEDULE and end events, so it can only replay those. The cluster fills up and
    /// drains again, as in the thesis's Fig. 5-6.
    Ended,
    /// Also the runs still open when the loaded parts end (long-running services): they never
    /// finish and keep their machines busy for the whole replay.
    All,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    Random,
    Trace,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Number of machines (`Placement::Trace` uses the trace's machine count instead).
    pub machines: usize,
    pub cell_size: usize,
    /// Machine capacity `cap` in trace CPU units (normalised to the largest machine).
    pub capacity: f64,
    pub admission: Admission,
    pub overcommit_ratio: f64,
    /// Seconds of trace time per simulation step (the thesis leaves the unit open; 60 s gives
    /// about 840 cycles over parts 0–9, the range of the thesis's Fig. 5-6).
    pub step_s: u32,
    /// Migration every `busy_interval` steps when runs were submitted in the step, else every
    /// `idle_interval` steps.
    pub busy_interval: u32,
    pub idle_interval: u32,
    /// Fraction of a step of service lost in each step a machine is overloaded.
    pub overload_penalty: f64,
    pub placement: Placement,
    pub replay: Replay,
    /// Warning threshold, migratable rule, minimum profit, per-cell move limit.
    pub limits: Limits,
    /// Memory of the largest machine, to turn normalised memory into bytes.
    pub machine_mem_gib: f64,
    /// If set, a migration takes `bytes / bandwidth` seconds on its source machine's link.
    pub bandwidth_mbit_s: Option<f64>,
    pub seed: u64,
    /// Keep per-step aggregates (one row per step) for the time series and figures.
    pub keep_series: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            machines: 800,
            cell_size: 4,
            capacity: 0.5,
            admission: Admission::Request,
            overcommit_ratio: 1.0,
            step_s: 60,
            busy_interval: 1,
            idle_interval: 10,
            overload_penalty: 1.0,
            placement: Placement::Random,
            replay: Replay::Ended,
            limits: Limits::default(),
            machine_mem_gib: 32.0,
            bandwidth_mbit_s: None,
            seed: 1,
            keep_series: true,
        }
    }
}

/// One run's results, averaged over steps (and machines where it says so).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    pub policy: String,
    pub seed: u64,
    pub machines: usize,
    /// Mean over steps of the mean machine load, as a fraction of capacity.
    pub mean_cpu: f64,
    /// Mean over steps of the Gini coefficient of machine loads.
    pub gini: f64,
    /// Mean over machine-steps of max(0, load − capacity), in trace CPU units.
    pub overcommit: f64,
    /// Mean over completed runs of (finish − submit) seconds: waiting plus (penalised) service.
    pub duration: f64,
    /// Migrated megabits over simulated seconds, and the busiest step's rate.
    pub net_mbit_s: f64,
    pub net_peak_mbit_s: f64,
    pub moves: u64,
    pub migrated_gib: f64,
    pub completed: u64,
    pub started: u64,
    /// Runs not replayed: never scheduled in the trace, or (with `Replay::Ended`) never ended.
    pub skipped: u64,
    /// Runs still pending when the replay ended.
    pub pending_at_end: u64,
    pub steps: u64,
    pub cycles: u64,
    /// Running tasks summed over steps (the replay's work: task-cycles).
    pub task_steps: u64,
    pub wall_s: f64,
}

/// Per-step aggregates (no per-task history): one entry per step in each vector.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Series {
    pub cycle: Vec<u32>,
    pub time_s: Vec<u32>,
    pub mean_cpu: Vec<f64>,
    pub gini: Vec<f64>,
    pub overcommit: Vec<f64>,
    pub net_mbit: Vec<f64>,
    pub moves: Vec<u32>,
    pub move_to_first: Vec<u32>,
    pub move_to_second: Vec<u32>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    pub summary: Summary,
    pub series: Series,
}
