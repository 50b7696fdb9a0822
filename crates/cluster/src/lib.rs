//! colosched-cluster: a time-stepped replay of Google ClusterData2011-2 runs on a cluster whose
//! machines are grouped into cells (the thesis's 4-machine G_cells), rebalanced by a
//! `colosched_core::Planner` (spec 000 ch. 4–5).
//!
//! Two named sets of defaults (`Profile`), each item a field of `Config` that any caller may
//! override:
//! - `thesis` (the default): the thesis's own model. The replayed tasks are those whose last
//!   run is SUBMIT (after the trace start) … SCHEDULE → FINISH and that have usage (real rows,
//!   or a SCHEDULE inside the span one `task_usage` part covers); 1 s steps; placement
//!   round-robin over cells, a random machine inside the cell; a task starts when its request
//!   × ratio fits in what its machine has left, and every time a task leaves a machine (ends or
//!   migrates away) every waiting task that now fits starts (backfill); each step a machine is
//!   over capacity its tasks of priority ≤ 2 lose min(1, excess / capacity) of the step; the
//!   replay ends at the last submission. Where the thesis's text and its `simulator.py`
//!   disagree, the code (issue 27): a task is placed at its first event (none from before the
//!   window), `duration` averages completed tasks, a task uses nothing in a window without a
//!   usage row, coarse picks each sender's receiver live, migratable means priority ≤ 2, even
//!   task index and request < 0.025, and a kbit is 1,024 bits.
//! - `full`: every run that ends inside the loaded parts, 60 s steps, uniformly random
//!   placement, a FIFO queue per machine, a whole step lost per overloaded step, replayed to the
//!   end of the loaded trace.
//!
//! In both, a machine's load is the sum of its running tasks' mean CPU usage in the current
//! 300 s window (real `task_usage` rows, else the calibrated usage model); every migration cycle
//! (every step with submissions, else every 10th) each cell is handed to the planner with each
//! node's load and its migratable tasks; a move costs the task's assigned memory in network
//! traffic, optionally over one link of `bandwidth_mbit_s` per source machine.

mod engine;
pub mod params;
mod select;

pub use engine::{simulate, SimError};
pub use params::{Param, Profile};
pub use select::{select, Selection};

use colosched_core::Limits;
use serde::Serialize;

/// What a run's admission load is (spec 000, open question 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// `cpu_request × overcommit_ratio`, fixed for the run's life (the thesis).
    Request,
    /// `current mean CPU usage × overcommit_ratio`, refreshed every usage window: a machine
    /// admits while its tasks' actual load leaves room, so moving load away lets waiting runs in.
    Usage,
}

/// Which runs are replayed (spec 000, open question 6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replay {
    /// The thesis's task set: a task whose last run in the loaded parts is SUBMIT (with a
    /// timestamp after 0) … SCHEDULE → FINISH, with usage rows in the loaded `task_usage` parts
    /// or, without any, a SCHEDULE within `usage_span_s` of the trace start. One run per task.
    Thesis,
    /// Every run that was scheduled and ends inside the loaded parts (FINISH or not).
    Ended,
    /// Also the runs still open when the loaded parts end (long-running services): they never
    /// finish and keep their machines busy for the whole replay.
    All,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Round-robin over cells, a uniformly random machine inside the cell (the thesis's code).
    Cells,
    /// A uniformly random machine of the whole cluster (the thesis's text).
    Random,
    /// The machine the trace scheduled the run on (machines = the trace's machine count).
    Trace,
}

/// How a machine's waiting runs start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Queue {
    /// A run starts when its admission load fits strictly in what is left (`reserve > request`);
    /// each time a task leaves the machine every waiting run that now fits starts, in order.
    Backfill,
    /// First in, first out: a run starts when it fits (≤) and nobody waits before it. A run
    /// larger than the whole capacity starts on an empty machine, so it cannot block forever.
    Fifo,
}

/// When a replayed task of the thesis's task set (`Replay::Thesis`) is placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskStart {
    /// At its run's SUBMIT (trace times up to the window start count as 0).
    LastSubmit,
    /// At the task's first event in the loaded parts; a task whose first event is before the
    /// window start (trace timestamp 0) is not replayed (the thesis's code: its loop starts at
    /// 0, so a task dated earlier is never placed). Service and usage are still its last run's.
    FirstEvent,
}

/// Which tasks the `duration` metric averages over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DurationOver {
    /// Tasks that completed during the replay (the thesis's code).
    Completed,
    /// Also tasks still running at the end, with their whole trace service.
    Started,
}

/// A task with real `task_usage` rows, in a window it has no row for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UsageGaps {
    /// It uses nothing (the thesis's code: a task's usage at `t` is that of its window holding
    /// `t`, else 0).
    Zero,
    /// The row of its nearest earlier window, else (before its first row) the usage model.
    Fill,
}

/// When the replay stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Until {
    /// At the step of the last replayed submission (the thesis: no drain).
    LastSubmit,
    /// At the last event of the loaded parts.
    TraceEnd,
    /// After the last submission, until no task with a finite service is running (at most
    /// `DRAIN_LIMIT_S` more seconds).
    Drain,
}

/// The longest a drain may run past the last submission (30 days of trace time).
pub const DRAIN_LIMIT_S: u32 = 30 * 86_400;

/// What a step on an overloaded machine (load > capacity) costs its tasks.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Penalty {
    /// Each eligible task loses min(1, (load − capacity) / capacity) of the step (the thesis:
    /// `duration += min(1, (load − cap) / cap)` per 1 s step).
    Excess,
    /// Each eligible task loses this fraction (0..=1) of the step.
    Fixed(f64),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The named set of defaults this configuration started from (recorded, not used).
    pub profile: Profile,
    /// Number of machines (`Placement::Trace` uses the trace's machine count instead).
    pub machines: usize,
    pub cell_size: usize,
    /// Machine capacity `cap` in trace CPU units (normalised to the largest machine).
    pub capacity: f64,
    pub admission: Admission,
    pub queue: Queue,
    pub overcommit_ratio: f64,
    /// Seconds of trace time per simulation step.
    pub step_s: u32,
    /// Migration every `busy_interval` steps when runs were submitted in the step, else every
    /// `idle_interval` steps.
    pub busy_interval: u32,
    pub idle_interval: u32,
    pub penalty: Penalty,
    /// Only tasks of at most this priority pay the overload penalty (thesis: 2; 11 = all).
    pub penalty_max_priority: u8,
    pub placement: Placement,
    pub replay: Replay,
    /// `Replay::Thesis` without real usage rows: a task needs a SCHEDULE within this many
    /// seconds of the trace start, the span one `task_usage` part covers (29 days / 500 parts).
    pub usage_span_s: u32,
    pub until: Until,
    pub task_start: TaskStart,
    pub duration_over: DurationOver,
    pub usage_gaps: UsageGaps,
    /// Bits per kilobit of `net_kbit_s_per_machine` (the thesis's code: 1,024; SI: 1,000).
    pub kbit_bits: u32,
    /// Warning threshold, sender trigger, migratable rule, `is_useful_migrate`, move limit.
    pub limits: Limits,
    /// GiB of memory per unit of normalised memory, to turn moved memory into bytes (the
    /// thesis's code: 512 GiB × 0.07 ≈ 35.84 GiB).
    pub machine_mem_gib: f64,
    /// If set, a migration takes `bytes / bandwidth` seconds on its source machine's link.
    pub bandwidth_mbit_s: Option<f64>,
    pub seed: u64,
    /// Keep per-step aggregates (one row per step) for the time series and figures.
    pub keep_series: bool,
    /// Wrap the policy in the node agent's guards (`colosched_core::guards`): a node is pressured
    /// at `warning_threshold` after `guard_hysteresis` looks in a row, a move off it must gain
    /// `guard_min_improvement`, none goes onto it, a moved task stays `guard_cooldown_s`.
    pub guards: bool,
    pub guard_hysteresis: u32,
    pub guard_min_improvement: f64,
    pub guard_cooldown_s: u32,
}

impl Config {
    /// The agent's guards in the simulator's units (cool-down in steps), if they are on.
    pub fn agent_guards(&self) -> Option<colosched_core::Guards> {
        self.guards.then(|| colosched_core::Guards {
            threshold: self.limits.warning_threshold,
            hysteresis: self.guard_hysteresis,
            min_improvement: self.guard_min_improvement,
            cooldown: u64::from(self.guard_cooldown_s.div_ceil(self.step_s.max(1))),
        })
    }
}

impl Default for Config {
    fn default() -> Self {
        Profile::Thesis.config()
    }
}

/// One run's results, averaged over steps (and machines where it says so). The metrics follow
/// the thesis's definitions (docs/cluster-sim.md, "Metrics").
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    pub policy: String,
    pub seed: u64,
    pub machines: usize,
    /// Mean over steps of the mean machine load clipped at capacity, as a fraction of capacity.
    pub mean_cpu: f64,
    /// Mean over steps of the Gini coefficient of the machine loads clipped at capacity.
    pub gini: f64,
    /// Mean over steps of Σ over machines of max(0, load − capacity) / capacity.
    pub overcommit: f64,
    /// Mean of waiting + service + overload penalties, s, over the tasks `DurationOver` says.
    pub duration: f64,
    /// Migrated kilobits (of `kbit_bits` bits) per simulated second per machine (the thesis's
    /// unit).
    pub net_kbit_s_per_machine: f64,
    /// Migrated megabits per simulated second over the whole cluster, and the busiest step's.
    pub net_mbit_s: f64,
    pub net_peak_mbit_s: f64,
    pub moves: u64,
    pub migrated_gib: f64,
    pub completed: u64,
    pub started: u64,
    /// Runs in the loaded parts that are not replayed (see `Replay`).
    pub skipped: u64,
    /// Runs still waiting when the replay ended.
    pub pending_at_end: u64,
    pub steps: u64,
    pub cycles: u64,
    /// Running tasks summed over steps (the replay's work: task-steps).
    pub task_steps: u64,
    pub wall_s: f64,
}

/// Per-step aggregates (no per-task history): one entry per step in each vector.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
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

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Outcome {
    pub summary: Summary,
    pub series: Series,
}
