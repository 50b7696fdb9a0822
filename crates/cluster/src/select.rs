//! Which runs of the loaded trace a replay places (`Replay`). Computed once per trace and
//! configuration, shared by every policy and seed of a run.

use std::borrow::Cow;
use std::collections::HashMap;

use colosched_trace::events::FINISH;
use colosched_trace::usage::UsageSource;
use colosched_trace::{Run, Runs, END_NONE, NEVER};

use crate::{Config, Replay, TaskStart, Until};

/// Which runs of a list a replay places.
pub type Keep = fn(&Run) -> bool;

/// The runs to replay, and what the trace had besides.
#[derive(Clone, Debug)]
pub struct Selection<'a> {
    /// The runs `keep` keeps are replayed, sorted by submit time (ties in file order): the
    /// trace's own runs, borrowed (a full trace's runs take gigabytes), or a list made for the
    /// replay (`Replay::Thesis` moves runs' submit times).
    pub runs: Cow<'a, [Run]>,
    pub keep: Keep,
    /// Runs of the loaded parts that are not replayed.
    pub skipped: u64,
    /// Machines the trace scheduled runs on (`Placement::Trace` uses this many).
    pub trace_machines: usize,
    /// The loaded parts' last event time, in seconds since the window start.
    pub trace_end: u32,
}

impl Default for Selection<'_> {
    fn default() -> Self {
        Selection::of(Vec::new())
    }
}

impl<'a> Selection<'a> {
    /// Every run of `runs` (sorted by submit time), for tests and made-up traces.
    pub fn of(runs: Vec<Run>) -> Selection<'a> {
        Selection {
            runs: Cow::Owned(runs),
            keep: |_| true,
            skipped: 0,
            trace_machines: 0,
            trace_end: 0,
        }
    }

    /// The runs replayed, by submit time.
    pub fn replayed(&self) -> impl DoubleEndedIterator<Item = &Run> {
        self.runs.iter().filter(|r| (self.keep)(r))
    }

    /// Submit time of the last replayed run (0 if none).
    pub fn last_submit(&self) -> u32 {
        self.replayed().next_back().map_or(0, |r| r.submit)
    }

    /// The most CPU the replayed runs request at once, in machines (requests are normalised to
    /// the largest machine): each run counts from its submission to its end. `--machines auto`
    /// sizes the cluster by it.
    pub fn peak_cpu_request(&self) -> f64 {
        let mut events: Vec<(u32, f64)> = (self.replayed())
            .flat_map(|r| {
                let c = f64::from(r.cpu_request.max(0.0));
                [(r.submit, c), (r.end.max(r.submit), -c)]
            })
            .collect();
        // At one instant, runs that end leave before runs that start come.
        events.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
        let (mut now, mut peak) = (0.0f64, 0.0f64);
        for (_, c) in events {
            now += c;
            peak = peak.max(now);
        }
        peak
    }

    /// Steps a replay of this selection under `cfg` runs (a drain may add more).
    pub fn steps(&self, cfg: &Config) -> u64 {
        let end = match cfg.until {
            Until::LastSubmit | Until::Drain => self.last_submit(),
            Until::TraceEnd => self.trace_end.max(self.last_submit()),
        };
        u64::from(end / cfg.step_s) + 1
    }
}

/// Picks the runs `cfg.replay` asks for:
/// - `Thesis`: per task (job, index), its last run, if that run was submitted after the trace
///   start, scheduled and FINISHed (so the task's last two events are SCHEDULE then FINISH) and
///   the task has usage: real `task_usage` rows when `usage` has any, else a SCHEDULE within
///   `cfg.usage_span_s` of the first submission of the loaded parts. With
///   `TaskStart::FirstEvent` the run is placed at its task's first run's start instead, and
///   tasks whose first run began before the trace window (timestamp 0) are skipped;
/// - `Ended`: every scheduled run that ends inside the loaded parts;
/// - `All`: every scheduled run.
pub fn select<'a>(runs: &'a Runs, usage: &UsageSource, cfg: &Config) -> Selection<'a> {
    let (kept, keep): (Cow<[Run]>, Keep) = match cfg.replay {
        Replay::Thesis => {
            let start = runs.runs.first().map_or(0, |r| r.submit);
            let span_end = start.saturating_add(cfg.usage_span_s);
            let has_usage = |r: &Run| match &usage.real {
                Some(real) => real.has_task(r.job, r.index),
                None => r.schedule < span_end,
            };
            // Candidates: submitted, scheduled, finished, with usage; a task keeps its candidate
            // only if no later run of it follows (runs are in submit order). A map of the few
            // candidates, not of every run, keeps this cheap.
            let mut last: HashMap<(u64, u32), Option<usize>> = HashMap::new();
            for (i, r) in runs.runs.iter().enumerate() {
                let candidate = r.submitted_in_trace
                    && r.schedule != NEVER
                    && r.end_kind == FINISH
                    && has_usage(r);
                if candidate {
                    last.insert((r.job, r.index), Some(i));
                } else if let Some(slot) = last.get_mut(&(r.job, r.index)) {
                    *slot = None;
                }
            }
            let mut keep: Vec<usize> = last.into_values().flatten().collect();
            keep.sort_unstable();
            let keep = keep.into_iter().map(|i| runs.runs[i]);
            let kept = match cfg.task_start {
                TaskStart::LastSubmit => keep.collect(),
                TaskStart::FirstEvent => from_first_event(runs, keep),
            };
            (Cow::Owned(kept), |_| true)
        }
        Replay::Ended => (Cow::Borrowed(&runs.runs), |r| {
            r.schedule != NEVER && r.end_kind != END_NONE
        }),
        Replay::All => (Cow::Borrowed(&runs.runs), |r| r.schedule != NEVER),
    };
    let replayed = kept.iter().filter(|r| keep(r)).count();
    Selection {
        skipped: (runs.runs.len() - replayed) as u64,
        runs: kept,
        keep,
        trace_machines: runs.machine_ids.len(),
        trace_end: runs.trace_end,
    }
}

/// `TaskStart::FirstEvent`: each kept run placed at its task's first event in the loaded parts,
/// the start of the task's first run (runs are in time order, and a task's events between two of
/// its runs are orphans the trace crate drops). A task whose first run began before the window
/// (a SUBMIT or SCHEDULE dated 0) is dropped. Returned in the new submit order (stable).
fn from_first_event(runs: &Runs, keep: impl Iterator<Item = Run>) -> Vec<Run> {
    let keep: Vec<Run> = keep.collect();
    let mut first: HashMap<(u64, u32), Option<u32>> =
        keep.iter().map(|r| ((r.job, r.index), None)).collect();
    for r in &runs.runs {
        if let Some(slot @ None) = first.get_mut(&(r.job, r.index)) {
            let before_window = r.submit == 0 && !r.submitted_in_trace;
            *slot = Some(if before_window { NEVER } else { r.submit });
        }
    }
    let mut placed: Vec<Run> = keep
        .into_iter()
        .filter_map(|r| match first[&(r.job, r.index)] {
            Some(start) if start != NEVER => Some(Run { submit: start, ..r }),
            _ => None,
        })
        .collect();
    placed.sort_by_key(|r| r.submit);
    placed
}
