//! Which runs of the loaded trace a replay places (`Replay`). Computed once per trace and
//! configuration, shared by every policy and seed of a run.

use std::collections::HashMap;

use colosched_trace::events::FINISH;
use colosched_trace::usage::UsageSource;
use colosched_trace::{Run, Runs, END_NONE, NEVER};

use crate::{Config, Replay};

/// The runs to replay, and what the trace had besides.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    /// Sorted by submit time (ties in file order).
    pub runs: Vec<Run>,
    /// Runs of the loaded parts that are not replayed.
    pub skipped: u64,
    /// Machines the trace scheduled runs on (`Placement::Trace` uses this many).
    pub trace_machines: usize,
    /// The loaded parts' last event time, in seconds since the window start.
    pub trace_end: u32,
}

impl Selection {
    /// Submit time of the last replayed run (0 if none).
    pub fn last_submit(&self) -> u32 {
        self.runs.last().map_or(0, |r| r.submit)
    }
}

/// Picks the runs `cfg.replay` asks for:
/// - `Thesis`: per task (job, index), its last run, if that run was submitted after the trace
///   start, scheduled and FINISHed (so the task's last two events are SCHEDULE then FINISH) and
///   the task has usage: real `task_usage` rows when `usage` has any, else a SCHEDULE within
///   `cfg.usage_span_s` of the first submission of the loaded parts;
/// - `Ended`: every scheduled run that ends inside the loaded parts;
/// - `All`: every scheduled run.
pub fn select(runs: &Runs, usage: &UsageSource, cfg: &Config) -> Selection {
    let keep: Vec<Run> = match cfg.replay {
        Replay::Thesis => {
            let mut last: HashMap<(u64, u32), usize> = HashMap::with_capacity(runs.runs.len());
            for (i, r) in runs.runs.iter().enumerate() {
                last.insert((r.job, r.index), i);
            }
            let start = runs.runs.first().map_or(0, |r| r.submit);
            let span_end = start.saturating_add(cfg.usage_span_s);
            let has_usage = |r: &Run| match &usage.real {
                Some(real) => real.has_task(r.job, r.index),
                None => r.schedule < span_end,
            };
            runs.runs
                .iter()
                .enumerate()
                .filter(|&(i, r)| {
                    last[&(r.job, r.index)] == i
                        && r.submitted_in_trace
                        && r.schedule != NEVER
                        && r.end_kind == FINISH
                        && has_usage(r)
                })
                .map(|(_, r)| *r)
                .collect()
        }
        Replay::Ended => runs
            .runs
            .iter()
            .filter(|r| r.schedule != NEVER && r.end_kind != END_NONE)
            .copied()
            .collect(),
        Replay::All => runs
            .runs
            .iter()
            .filter(|r| r.schedule != NEVER)
            .copied()
            .collect(),
    };
    Selection {
        skipped: (runs.runs.len() - keep.len()) as u64,
        runs: keep,
        trace_machines: runs.machine_ids.len(),
        trace_end: runs.trace_end,
    }
}
