//! colosched-trace: reads Google ClusterData2011-2 (`task_events`, and when present `task_usage`)
//! from a trace root in the official layout, caches parsed parts in Arrow IPC files, and folds the
//! events into *runs*: one run per SUBMIT, the unit the cluster simulator replays.
//!
//! Time: trace timestamps are microseconds counted from 600 s before the trace window. Everything
//! this crate returns is in whole **seconds since the window start** (`u32`): a raw timestamp `ts`
//! becomes `max(0, ts - 600 s) / 1e6`; 0 ("before the window") becomes 0; 2^63-1 ("after the
//! window") means the event did not happen inside the trace.
pub mod cache;
pub mod error;
pub mod events;
pub mod parts;
pub mod runs;
pub mod synth;
pub mod usage;

pub use cache::{clear_cache, default_cache_dir, CACHE_FORMAT_VERSION};
pub use error::{Result, TraceError};
pub use events::{read_part, Events};
pub use parts::{parse_parts, Part, TraceRoot};
pub use runs::{
    fold_runs, load_events, load_runs, to_seconds, IngestOptions, PartEvents, END_SUPERSEDED,
};
pub use usage::{TaskUsage, Usage, UsageModel, UsageSource, WINDOW_S};

/// One run of a task: from a SUBMIT to the event that ended it (or to the trace's end).
/// A task evicted/failed/killed/lost and resubmitted has one run per SUBMIT.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Run {
    pub job: u64,
    pub index: u32,
    /// SUBMIT time.
    pub submit: u32,
    /// First SCHEDULE after the SUBMIT; `NEVER` if the task was never scheduled in the trace.
    pub schedule: u32,
    /// Terminal event time (EVICT, FAIL, FINISH, KILL, LOST), or `Runs::trace_end` if none.
    pub end: u32,
    /// Terminal event type (2..=6), or `END_NONE` when the run lasts to the trace's end.
    pub end_kind: u8,
    /// Priority 0..=11 (latest value at SUBMIT).
    pub priority: u8,
    /// CPU and memory requests, normalised to the largest machine (latest value at SUBMIT).
    pub cpu_request: f32,
    pub mem_request: f32,
    /// Dense machine index (into `Runs::machine_ids`) of the SCHEDULE event, `NO_MACHINE` if none.
    pub machine: u32,
    /// Opened by a SUBMIT row of the loaded parts with a timestamp after the trace start (> 0):
    /// false for tasks already there when the trace starts (timestamp 0) and for the implicit
    /// SUBMIT of an orphan SCHEDULE.
    pub submitted_in_trace: bool,
}

pub const NEVER: u32 = u32::MAX;
pub const END_NONE: u8 = 255;
pub const NO_MACHINE: u32 = u32::MAX;

/// An UPDATE_PENDING / UPDATE_RUNNING event that changed a run's requests or priority.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Update {
    /// Index into `Runs::runs`.
    pub run: u32,
    pub time: u32,
    pub priority: u8,
    pub cpu_request: f32,
    pub mem_request: f32,
}

/// Everything the simulator needs from `task_events`, sorted by `submit` (ties: file order).
#[derive(Clone, Debug, Default)]
pub struct Runs {
    pub runs: Vec<Run>,
    /// Sorted by `time`.
    pub updates: Vec<Update>,
    /// Trace machine IDs; `Run::machine` indexes this.
    pub machine_ids: Vec<u64>,
    /// Latest event time seen below 2^63-1 (seconds since window start): when open runs end.
    pub trace_end: u32,
    pub stats: IngestStats,
}

/// What ingest did, for the log and the docs.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct IngestStats {
    pub parts: usize,
    pub rows: u64,
    pub runs: u64,
    pub parts_from_cache: usize,
    /// SUBMITs whose run ended (or the trace ended) before any SCHEDULE: kept, with `schedule = NEVER`.
    pub never_scheduled: u64,
    /// Runs with no terminal event: they last to `trace_end`.
    pub open_at_end: u64,
    /// Events for a task that had no open run (e.g. its SUBMIT was in an unloaded part).
    pub orphan_events: u64,
    /// Wall-clock seconds of `load_runs`: parsing the parts (or reading the cache) plus folding.
    pub parse_seconds: f64,
    /// Orphan SCHEDULEs turned into a run (implicit SUBMIT at the SCHEDULE time); also counted in
    /// `orphan_events`.
    pub implicit_submits: u64,
    /// Runs cut short by a re-SUBMIT of the same task (`end_kind = END_SUPERSEDED`).
    pub superseded: u64,
    /// Runs whose CPU or memory request was missing at SUBMIT and not supplied by their SCHEDULE:
    /// the missing value is 0.0.
    pub missing_requests: u64,
    /// Events with timestamp 2^63-1 or more ("after the window"): ignored.
    pub after_window: u64,
    /// Parts parsed but not cached because writing the cache entry failed (e.g. read-only dir).
    pub cache_write_failures: u64,
}
