//! Folding `task_events` into `Runs`, and the ingest entry points (`load_events`, `load_runs`).
//!
//! Parts are processed in part order and rows in file order: the trace is sorted by time and its
//! parts are consecutive in time, so this is time order (ties keep file order). The map of open
//! runs lives across parts, so a task submitted in one part and ended in a later one is one run.
//!
//! Semantics, event by event (times converted by [`to_seconds`]):
//!
//! - **after the window**: an event with timestamp >= 2^63-1 did not happen inside the trace; it
//!   is ignored entirely (a run it would have ended just stays open), counted in
//!   `IngestStats::after_window`.
//! - **SUBMIT (0)** opens a run for (job, index) with the row's priority and requests
//!   (`submitted_in_trace` when its timestamp is > 0, i.e. not before the trace). If the task
//!   already has an open run (a re-SUBMIT without an end, which the trace does contain), the old
//!   run ends at the new SUBMIT's time with `end_kind = END_SUPERSEDED` (0, the SUBMIT code),
//!   counted in `superseded`.
//! - **missing requests at SUBMIT** (the row's CPU or memory request is empty; in parts 0-9 of
//!   the real trace, 291 SUBMITs at t = 0 with "missing info" set): the first SCHEDULE of the run
//!   that carries the value fills it in; a value still missing when the run is built becomes 0.0
//!   and the run is counted in `missing_requests`.
//! - **SCHEDULE (1)** sets `schedule` and `machine` from the first SCHEDULE of the run only.
//!   Machines get dense indices into `Runs::machine_ids` in order of first appearance; a SCHEDULE
//!   without a machine ID leaves `machine = NO_MACHINE`.
//! - **EVICT, FAIL, FINISH, KILL, LOST (2..=6)** end the open run: `end` = time, `end_kind` = the
//!   event type. A task that is resubmitted afterwards gets a new run at its next SUBMIT.
//! - **UPDATE_PENDING / UPDATE_RUNNING (7, 8)** push an `Update` carrying the run's new priority
//!   and requests; a missing request keeps the run's current value. An update that changes nothing
//!   is dropped. The `Run` itself keeps its values at SUBMIT.
//! - **orphans**: an event for a task with no open run (its SUBMIT is in an unloaded earlier part,
//!   or before the trace) is counted in `orphan_events`. An orphan SCHEDULE is treated as an
//!   implicit SUBMIT at the same time (priority and requests from the SCHEDULE row), immediately
//!   scheduled, so tasks already running when the loaded parts start are not lost; these are also
//!   counted in `implicit_submits`. Other orphans (ends, updates) are dropped.
//! - **end of the trace**: runs still open after the last part end at `trace_end` (the latest
//!   in-window event time) with `end_kind = END_NONE`, counted in `open_at_end`.
//! - **never scheduled**: runs that ended (or reached the trace's end) with no SCHEDULE keep
//!   `schedule = NEVER`, counted in `never_scheduled`.
//! - **order**: runs are sorted by `submit` (stable: ties keep file order); `Update::run` indexes
//!   the sorted runs, and updates are sorted by time (stable).
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::path::{Path, PathBuf};
use std::time::Instant;

use rayon::prelude::*;

use crate::cache;
use crate::error::Result;
use crate::events::{self, Events, SCHEDULE, SUBMIT, UPDATE_PENDING, UPDATE_RUNNING};
use crate::parts::{Part, TraceRoot};
use crate::{IngestStats, Run, Runs, Update, END_NONE, NEVER, NO_MACHINE};

/// `end_kind` of a run cut short by a new SUBMIT of the same task (0 = the SUBMIT event code).
pub const END_SUPERSEDED: u8 = 0;

/// Trace timestamps at or above this (2^63-1) mean "after the trace window".
pub const AFTER_WINDOW_US: u64 = i64::MAX as u64;

/// Trace timestamps count from 600 s before the window.
pub const WINDOW_START_US: u64 = 600_000_000;

/// Seconds since the window start of a trace timestamp: `max(0, ts - 600 s) / 1e6`, floored.
/// 0 ("before the window") and anything up to 600 s map to 0. `None` for timestamps >= 2^63-1
/// ("after the window"; the thesis says 2^64-1, which is also accepted). Absurdly large in-window
/// times saturate at `NEVER - 1` so they never read as `NEVER`.
pub fn to_seconds(ts_us: u64) -> Option<u32> {
    if ts_us >= AFTER_WINDOW_US {
        return None;
    }
    let seconds = ts_us.saturating_sub(WINDOW_START_US) / 1_000_000;
    Some(seconds.min((NEVER - 1) as u64) as u32)
}

/// What to ingest and how.
#[derive(Clone, Debug)]
pub struct IngestOptions {
    /// `task_events` part numbers to load; `None` = all parts of the root.
    pub parts: Option<Vec<u32>>,
    /// Read and write the columnar cache (`--no-cache` turns it off).
    pub use_cache: bool,
    /// Cache directory; `None` = `$XDG_CACHE_HOME/colosched` or `~/.cache/colosched`.
    pub cache_dir: Option<PathBuf>,
}

impl Default for IngestOptions {
    fn default() -> Self {
        IngestOptions {
            parts: None,
            use_cache: true,
            cache_dir: None,
        }
    }
}

/// One loaded `task_events` part.
#[derive(Clone, Debug)]
pub struct PartEvents {
    pub part: Part,
    pub events: Events,
    /// True if it came from the cache instead of being parsed.
    pub from_cache: bool,
}

/// Loads the selected `task_events` parts (in parallel), from the cache where possible, writing
/// cache entries for the parts it had to parse. Returned in part order. A cache entry that cannot
/// be written (e.g. read-only cache directory) does not fail the load (`load_runs` counts these in
/// `IngestStats::cache_write_failures`).
pub fn load_events(root: &TraceRoot, opts: &IngestOptions) -> Result<Vec<PartEvents>> {
    let parts = root.select_parts(opts.parts.as_deref())?;
    let cache_dir = cache_dir(opts);
    parts
        .par_iter()
        .map(|part| Ok(load_part(part, cache_dir.as_deref())?.0))
        .collect()
}

/// The cache directory to use, if any: without a usable one (no HOME, no XDG_CACHE_HOME) we
/// just don't cache.
fn cache_dir(opts: &IngestOptions) -> Option<PathBuf> {
    opts.use_cache
        .then(|| cache::resolve_cache_dir(opts.cache_dir.as_deref()))
        .flatten()
}

/// One part: from the cache if there is a valid entry, else parsed (and then cached).
/// The flag is true if writing the cache entry failed.
fn load_part(part: &Part, cache_dir: Option<&Path>) -> Result<(PartEvents, bool)> {
    let (events, from_cache, write_failed) = match cache_dir {
        None => (events::read_part(&part.path, part.gzip)?, false, false),
        Some(cache_dir) => {
            let identity = cache::SourceIdentity::of(&part.path)?;
            let entry = cache::entry_path(cache_dir, part, &identity);
            match cache::read_entry(&entry, &identity) {
                Some(events) => (events, true, false),
                None => {
                    // Only a part that parsed without error reaches the cache.
                    let events = events::read_part(&part.path, part.gzip)?;
                    let failed = cache::write_entry(&entry, &identity, &events).is_err();
                    (events, false, failed)
                }
            }
        }
    };
    let loaded = PartEvents {
        part: part.clone(),
        events,
        from_cache,
    };
    Ok((loaded, write_failed))
}

/// Parts loaded at once by `load_runs`: enough to keep every core busy, few enough that the
/// parsed rows of the whole trace are never held together (a full-scale trace's 500 parts would
/// be 3 GB of columns; its runs are a third of that).
const PARTS_IN_FLIGHT: usize = 8;

/// Loads the selected parts and folds them into `Runs` (see the module doc for the semantics).
/// Parts are loaded a few at a time in parallel, and each batch is folded (in part order) while
/// the next one loads, so memory holds the runs plus two batches of parsed rows.
/// `stats.parse_seconds` is the wall-clock time of the whole call (reading or parsing the parts,
/// cache reads included, plus folding).
pub fn load_runs(root: &TraceRoot, opts: &IngestOptions) -> Result<Runs> {
    let started = Instant::now();
    let parts = root.select_parts(opts.parts.as_deref())?;
    let cache_dir = cache_dir(opts);
    let load = |batch: &[&Part]| -> Result<Vec<(PartEvents, bool)>> {
        batch
            .par_iter()
            .map(|part| load_part(part, cache_dir.as_deref()))
            .collect()
    };
    let mut folder = Folder::default();
    let (mut from_cache, mut write_failures) = (0, 0);
    // Each turn folds the batch loaded by the turn before while it loads the next one.
    let mut loaded: Vec<(PartEvents, bool)> = Vec::new();
    for batch in parts.chunks(PARTS_IN_FLIGHT).map(Some).chain([None]) {
        let fold = || loaded.iter().for_each(|(p, _)| folder.part(&p.events));
        let next = rayon::join(fold, || batch.map(load).transpose()).1?;
        from_cache += loaded.iter().filter(|(p, _)| p.from_cache).count();
        write_failures += loaded.iter().filter(|(_, failed)| *failed).count() as u64;
        loaded = next.unwrap_or_default();
    }
    let mut runs = folder.finish();
    runs.stats.parts_from_cache = from_cache;
    runs.stats.cache_write_failures = write_failures;
    runs.stats.parse_seconds = started.elapsed().as_secs_f64();
    Ok(runs)
}

/// Folds parts, given in part order, into `Runs`. Fills every `IngestStats` field except
/// `parts_from_cache`, `cache_write_failures` and `parse_seconds`.
pub fn fold_runs<'a>(parts: impl IntoIterator<Item = &'a Events>) -> Runs {
    let mut folder = Folder::default();
    parts.into_iter().for_each(|events| folder.part(events));
    folder.finish()
}

/// The values of a run that UPDATE events change (the `Run` keeps its values at SUBMIT).
#[derive(Clone, Copy)]
struct Current {
    priority: u8,
    cpu: f32,
    mem: f32,
}

#[derive(Default)]
struct Folder {
    /// Runs in creation order; requests NaN while missing.
    runs: Vec<Run>,
    /// Parallel to `runs`.
    current: Vec<Current>,
    /// Updates in file order, `run` indexing `runs` (creation order).
    updates: Vec<Update>,
    open: OpenRuns,
    machine_index: HashMap<u64, u32, BuildHasherDefault<IdHasher>>,
    machine_ids: Vec<u64>,
    trace_end: u32,
    stats: IngestStats,
}

impl Folder {
    fn part(&mut self, events: &Events) {
        self.stats.parts += 1;
        self.stats.rows += events.len() as u64;
        for row in 0..events.len() {
            self.row(events, row);
        }
    }

    fn row(&mut self, e: &Events, i: usize) {
        let Some(time) = to_seconds(e.time_us[i]) else {
            self.stats.after_window += 1;
            return;
        };
        self.trace_end = self.trace_end.max(time);
        let (job, index) = (e.job[i], e.index[i]);
        let kind = e.event[i];
        match kind {
            SUBMIT => {
                let new = self.new_run(job, index, time, e, i);
                self.runs[new].submitted_in_trace = e.time_us[i] > 0;
                if let Some(old) = self.open.insert(job, index, new) {
                    end_run(&mut self.runs[old], time, END_SUPERSEDED);
                    self.stats.superseded += 1;
                }
            }
            SCHEDULE => {
                let machine = self.machine(e.machine[i]);
                let open = match self.open.get(job, index) {
                    Some(open) => open,
                    None => {
                        self.stats.orphan_events += 1;
                        self.stats.implicit_submits += 1;
                        let new = self.new_run(job, index, time, e, i);
                        self.open.insert(job, index, new);
                        new
                    }
                };
                let run = &mut self.runs[open];
                if run.schedule == NEVER {
                    run.schedule = time;
                    run.machine = machine;
                }
                // Requests the SUBMIT lacked, supplied by the SCHEDULE row.
                let (cpu, mem) = (e.cpu_request[i], e.mem_request[i]);
                if run.cpu_request.is_nan() {
                    run.cpu_request = cpu;
                }
                if run.mem_request.is_nan() {
                    run.mem_request = mem;
                }
                let current = &mut self.current[open];
                if current.cpu.is_nan() {
                    current.cpu = cpu;
                }
                if current.mem.is_nan() {
                    current.mem = mem;
                }
            }
            UPDATE_PENDING | UPDATE_RUNNING => {
                let Some(open) = self.open.get(job, index) else {
                    self.stats.orphan_events += 1;
                    return;
                };
                let old = self.current[open];
                let (cpu, mem) = (e.cpu_request[i], e.mem_request[i]);
                let new = Current {
                    priority: e.priority[i],
                    cpu: if cpu.is_nan() { old.cpu } else { cpu },
                    mem: if mem.is_nan() { old.mem } else { mem },
                };
                let same = |a: f32, b: f32| a == b || (a.is_nan() && b.is_nan());
                if new.priority == old.priority && same(new.cpu, old.cpu) && same(new.mem, old.mem)
                {
                    return;
                }
                self.current[open] = new;
                self.updates.push(Update {
                    run: open as u32,
                    time,
                    priority: new.priority,
                    cpu_request: new.cpu,
                    mem_request: new.mem,
                });
            }
            // EVICT, FAIL, FINISH, KILL, LOST (the parser admits no other event type).
            _ => match self.open.remove(job, index) {
                Some(open) => end_run(&mut self.runs[open], time, kind),
                None => self.stats.orphan_events += 1,
            },
        }
    }

    /// Pushes a new, still open run from row `i` (a SUBMIT, or an orphan SCHEDULE).
    fn new_run(&mut self, job: u64, index: u32, time: u32, e: &Events, i: usize) -> usize {
        let (priority, cpu, mem) = (e.priority[i], e.cpu_request[i], e.mem_request[i]);
        self.runs.push(Run {
            job,
            index,
            submit: time,
            schedule: NEVER,
            end: NEVER,
            end_kind: END_NONE,
            priority,
            cpu_request: cpu,
            mem_request: mem,
            machine: NO_MACHINE,
            submitted_in_trace: false,
        });
        self.current.push(Current { priority, cpu, mem });
        self.runs.len() - 1
    }

    /// Dense index of a trace machine ID (0 = missing -> `NO_MACHINE`).
    fn machine(&mut self, id: u64) -> u32 {
        if id == 0 {
            return NO_MACHINE;
        }
        let next = self.machine_ids.len() as u32;
        let index = *self.machine_index.entry(id).or_insert(next);
        if index == next {
            self.machine_ids.push(id);
        }
        index
    }

    fn finish(mut self) -> Runs {
        let trace_end = self.trace_end;
        for run in &mut self.runs {
            if run.end == NEVER {
                run.end = trace_end;
                run.end_kind = END_NONE;
                self.stats.open_at_end += 1;
            }
            // The trace is time-sorted, so this only guards against out-of-order input.
            run.end = run.end.max(run.submit);
            if run.schedule == NEVER {
                self.stats.never_scheduled += 1;
            }
            if run.cpu_request.is_nan() || run.mem_request.is_nan() {
                self.stats.missing_requests += 1;
                run.cpu_request = zero_if_nan(run.cpu_request);
                run.mem_request = zero_if_nan(run.mem_request);
            }
        }
        self.stats.runs = self.runs.len() as u64;

        // Stable sort by submit time. Runs open in file order, which is time order, so this is
        // nearly always nothing to do; otherwise the runs move in place (a full-scale trace's
        // runs are a GB: no second copy) and `new_index[old]` renumbers the updates.
        drop(std::mem::take(&mut self.current));
        let mut runs = self.runs;
        if !runs.is_sorted_by_key(|run| run.submit) {
            let mut order: Vec<u32> = (0..runs.len() as u32).collect();
            order.sort_by_key(|&old| runs[old as usize].submit);
            permute(&mut runs, &order);
            let mut new_index = vec![0u32; order.len()];
            for (new, &old) in order.iter().enumerate() {
                new_index[old as usize] = new as u32;
            }
            for update in &mut self.updates {
                update.run = new_index[update.run as usize];
            }
        }
        runs.shrink_to_fit();
        for update in &mut self.updates {
            update.cpu_request = zero_if_nan(update.cpu_request);
            update.mem_request = zero_if_nan(update.mem_request);
        }
        self.updates.sort_by_key(|u| u.time);

        Runs {
            runs,
            updates: self.updates,
            machine_ids: self.machine_ids,
            trace_end,
            stats: self.stats,
        }
    }
}

/// Puts `items[order[i]]` at `i` for every `i`, in place (`order` is a permutation), following
/// each cycle once.
fn permute<T: Copy>(items: &mut [T], order: &[u32]) {
    let mut placed = vec![false; items.len()];
    for start in 0..items.len() {
        let first = items[start];
        let mut at = start;
        while !placed[at] {
            placed[at] = true;
            let from = order[at] as usize;
            items[at] = if from == start { first } else { items[from] };
            at = from;
        }
    }
}

fn end_run(run: &mut Run, time: u32, kind: u8) {
    run.end = time;
    run.end_kind = kind;
}

fn zero_if_nan(x: f32) -> f32 {
    if x.is_nan() {
        0.0
    } else {
        x
    }
}

/// The open run of each task. Task indices are small and dense within a job, and the trace lists
/// a job's tasks together, so a table per job indexed by task index is much faster (fewer cache
/// misses) than one hash map keyed by (job, index). Implausibly large indices use `sparse`.
#[derive(Default)]
struct OpenRuns {
    /// Job ID -> per task index: open run index + 1, or 0 for none.
    jobs: HashMap<u64, Vec<u32>, BuildHasherDefault<IdHasher>>,
    sparse: HashMap<(u64, u32), usize>,
}

/// Task indices at or above this go to `OpenRuns::sparse` (the real trace's are far smaller).
const DENSE_INDEX_LIMIT: u32 = 1 << 20;

impl OpenRuns {
    fn get(&self, job: u64, index: u32) -> Option<usize> {
        if index >= DENSE_INDEX_LIMIT {
            return self.sparse.get(&(job, index)).copied();
        }
        let slot = *self.jobs.get(&job)?.get(index as usize)?;
        slot.checked_sub(1).map(|run| run as usize)
    }

    /// Records `run` as the task's open run; returns the run it replaces, if any.
    fn insert(&mut self, job: u64, index: u32, run: usize) -> Option<usize> {
        if index >= DENSE_INDEX_LIMIT {
            return self.sparse.insert((job, index), run);
        }
        let tasks = self.jobs.entry(job).or_default();
        if tasks.len() <= index as usize {
            tasks.resize(index as usize + 1, 0);
        }
        let old = std::mem::replace(&mut tasks[index as usize], run as u32 + 1);
        old.checked_sub(1).map(|run| run as usize)
    }

    fn remove(&mut self, job: u64, index: u32) -> Option<usize> {
        if index >= DENSE_INDEX_LIMIT {
            return self.sparse.remove(&(job, index));
        }
        let slot = self.jobs.get_mut(&job)?.get_mut(index as usize)?;
        let old = std::mem::replace(slot, 0);
        old.checked_sub(1).map(|run| run as usize)
    }
}

/// A small multiplicative hasher for u64 keys (job and machine IDs): the std SipHash is several
/// times slower and we need no DoS resistance here.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{parse_events, EVICT, FAIL, FINISH, KILL, LOST};
    use std::path::Path;

    /// One task_events row: time in µs, job, task index, machine ID ("" = missing), event type,
    /// priority, CPU and memory request ("" = missing).
    #[allow(clippy::too_many_arguments)]
    fn ev(
        t_us: u64,
        job: u64,
        index: u32,
        machine: &str,
        kind: u8,
        prio: u8,
        cpu: &str,
        mem: &str,
    ) -> String {
        format!("{t_us},,{job},{index},{machine},{kind},user,2,{prio},{cpu},{mem},0.001,0\n")
    }

    /// Seconds since the window start -> trace µs.
    fn at(seconds: u64) -> u64 {
        WINDOW_START_US + seconds * 1_000_000
    }

    fn fold(parts: &[String]) -> Runs {
        let events: Vec<Events> = parts
            .iter()
            .map(|text| parse_events(text.as_bytes(), Path::new("test.csv")).unwrap())
            .collect();
        fold_runs(&events)
    }

    #[test]
    fn time_conversion() {
        assert_eq!(to_seconds(0), Some(0), "0 = before the window");
        assert_eq!(to_seconds(WINDOW_START_US - 1), Some(0));
        assert_eq!(to_seconds(WINDOW_START_US), Some(0));
        assert_eq!(to_seconds(WINDOW_START_US + 1_999_999), Some(1), "floored");
        assert_eq!(to_seconds(at(5611)), Some(5611));
        assert_eq!(
            to_seconds(9_223_372_036_854_775_807),
            None,
            "2^63-1 = after the window"
        );
        assert_eq!(to_seconds(u64::MAX), None, "2^64-1 = after the window too");
        assert_eq!(
            to_seconds(9_223_372_036_854_775_806),
            Some(NEVER - 1),
            "saturates below NEVER"
        );
    }

    #[test]
    fn submit_schedule_finish() {
        let runs = fold(&[[
            ev(0, 7, 3, "", SUBMIT, 9, "0.125", "0.07446"),
            ev(0, 7, 3, "4155527081", SCHEDULE, 9, "0.125", "0.07446"),
            ev(at(100), 7, 3, "4155527081", FINISH, 9, "0.125", "0.07446"),
        ]
        .concat()]);
        assert_eq!(
            runs.runs,
            vec![Run {
                job: 7,
                index: 3,
                submit: 0,
                schedule: 0,
                end: 100,
                end_kind: FINISH,
                priority: 9,
                cpu_request: 0.125,
                mem_request: 0.07446,
                machine: 0,
                submitted_in_trace: false, // SUBMIT at 0: before the trace
            }]
        );
        assert_eq!(runs.machine_ids, vec![4155527081]);
        assert_eq!(runs.trace_end, 100);
        assert_eq!(runs.stats.parts, 1);
        assert_eq!(runs.stats.rows, 3);
        assert_eq!(runs.stats.runs, 1);
        assert_eq!(
            (
                runs.stats.open_at_end,
                runs.stats.never_scheduled,
                runs.stats.orphan_events
            ),
            (0, 0, 0)
        );
    }

    #[test]
    fn every_end_kind_ends_the_run_and_resubmit_opens_a_new_one() {
        let mut text = String::new();
        for (i, kind) in [EVICT, FAIL, FINISH, KILL, LOST].into_iter().enumerate() {
            let t = 10 * i as u64;
            text += &ev(at(t), 1, 0, "", SUBMIT, 0, "0.1", "0.1");
            text += &ev(at(t + 1), 1, 0, "55", SCHEDULE, 0, "0.1", "0.1");
            text += &ev(at(t + 5), 1, 0, "55", kind, 0, "0.1", "0.1");
        }
        let runs = fold(&[text]);
        assert_eq!(runs.runs.len(), 5);
        for (i, (run, kind)) in runs
            .runs
            .iter()
            .zip([EVICT, FAIL, FINISH, KILL, LOST])
            .enumerate()
        {
            let t = 10 * i as u32;
            assert_eq!(
                (run.submit, run.schedule, run.end, run.end_kind),
                (t, t + 1, t + 5, kind)
            );
            assert!(run.submitted_in_trace, "SUBMIT at {} µs > 0", at(t as u64));
        }
        assert_eq!(runs.machine_ids, vec![55]);
        assert_eq!(runs.stats.orphan_events, 0);
    }

    #[test]
    fn after_window_event_is_ignored_and_the_run_stays_open() {
        let runs = fold(&[[
            ev(at(10), 1, 0, "", SUBMIT, 0, "0.1", "0.1"),
            ev(at(20), 1, 0, "9", SCHEDULE, 0, "0.1", "0.1"),
            ev(at(30), 2, 0, "", SUBMIT, 0, "0.1", "0.1"),
            ev(
                9_223_372_036_854_775_807,
                1,
                0,
                "9",
                FINISH,
                0,
                "0.1",
                "0.1",
            ),
            ev(u64::MAX, 3, 0, "", SUBMIT, 0, "0.1", "0.1"),
        ]
        .concat()]);
        assert_eq!(runs.runs.len(), 2, "the after-window SUBMIT makes no run");
        assert_eq!(runs.trace_end, 30, "trace_end ignores after-window times");
        assert_eq!((runs.runs[0].end, runs.runs[0].end_kind), (30, END_NONE));
        assert_eq!((runs.runs[1].end, runs.runs[1].end_kind), (30, END_NONE));
        assert_eq!(runs.stats.after_window, 2);
        assert_eq!(runs.stats.open_at_end, 2);
        assert_eq!(runs.stats.never_scheduled, 1);
    }

    #[test]
    fn resubmit_without_end_supersedes_the_open_run() {
        let runs = fold(&[[
            ev(at(1), 1, 0, "", SUBMIT, 2, "0.1", "0.2"),
            ev(at(4), 1, 0, "", SUBMIT, 3, "0.3", "0.4"),
            ev(at(6), 1, 0, "8", SCHEDULE, 3, "0.3", "0.4"),
            ev(at(9), 1, 0, "8", FINISH, 3, "0.3", "0.4"),
        ]
        .concat()]);
        let [old, new] = [runs.runs[0], runs.runs[1]];
        assert_eq!(
            (old.submit, old.schedule, old.end, old.end_kind),
            (1, NEVER, 4, END_SUPERSEDED)
        );
        assert_eq!((old.priority, old.cpu_request), (2, 0.1));
        assert_eq!(
            (new.submit, new.schedule, new.end, new.end_kind),
            (4, 6, 9, FINISH)
        );
        assert_eq!(
            (new.priority, new.cpu_request, new.mem_request),
            (3, 0.3, 0.4)
        );
        assert_eq!(runs.stats.superseded, 1);
        assert_eq!(runs.stats.never_scheduled, 1);
    }

    #[test]
    fn first_schedule_sets_schedule_and_machine_in_order_of_appearance() {
        let runs = fold(&[[
            ev(at(0), 1, 0, "", SUBMIT, 0, "0.1", "0.1"),
            ev(at(0), 2, 0, "", SUBMIT, 0, "0.1", "0.1"),
            ev(at(0), 3, 0, "", SUBMIT, 0, "0.1", "0.1"),
            ev(at(1), 2, 0, "900", SCHEDULE, 0, "0.1", "0.1"),
            ev(at(2), 1, 0, "500", SCHEDULE, 0, "0.1", "0.1"),
            ev(at(3), 1, 0, "900", SCHEDULE, 0, "0.1", "0.1"), // second SCHEDULE: ignored
            ev(at(4), 3, 0, "", SCHEDULE, 0, "0.1", "0.1"),    // no machine ID
        ]
        .concat()]);
        assert_eq!(runs.machine_ids, vec![900, 500]);
        let sched: Vec<(u32, u32)> = runs.runs.iter().map(|r| (r.schedule, r.machine)).collect();
        assert_eq!(sched, vec![(2, 1), (1, 0), (4, NO_MACHINE)]);
    }

    #[test]
    fn updates_keep_missing_fields_and_work_across_parts() {
        let part0 = [
            ev(at(0), 1, 0, "", SUBMIT, 4, "0.1", "0.2"),
            ev(at(1), 1, 0, "7", SCHEDULE, 4, "0.1", "0.2"),
            ev(at(2), 1, 0, "", UPDATE_RUNNING, 5, "", "0.3"), // CPU missing: keeps 0.1
        ]
        .concat();
        let part1 = [
            ev(at(3), 1, 0, "7", UPDATE_RUNNING, 5, "0.1", "0.3"), // changes nothing: dropped
            ev(at(4), 1, 0, "7", UPDATE_PENDING, 5, "0.15", ""),
            ev(at(5), 1, 0, "7", FINISH, 5, "0.15", "0.3"),
            ev(at(6), 1, 0, "7", UPDATE_RUNNING, 6, "0.5", "0.5"), // orphan: dropped
        ]
        .concat();
        let runs = fold(&[part0, part1]);
        assert_eq!(
            runs.runs.len(),
            1,
            "SUBMIT in part 0 and FINISH in part 1 are one run"
        );
        let run = runs.runs[0];
        assert_eq!(
            (run.end, run.end_kind, run.priority, run.cpu_request),
            (5, FINISH, 4, 0.1)
        );
        assert_eq!(
            runs.updates,
            vec![
                Update {
                    run: 0,
                    time: 2,
                    priority: 5,
                    cpu_request: 0.1,
                    mem_request: 0.3
                },
                Update {
                    run: 0,
                    time: 4,
                    priority: 5,
                    cpu_request: 0.15,
                    mem_request: 0.3
                },
            ]
        );
        assert_eq!(runs.stats.orphan_events, 1);
        assert_eq!(runs.stats.parts, 2);
        assert_eq!(runs.stats.rows, 7);
    }

    #[test]
    fn runs_sorted_by_submit_and_updates_follow() {
        // Out-of-order input (the real trace is sorted) to show the renumbering.
        let runs = fold(&[[
            ev(at(100), 1, 0, "", SUBMIT, 0, "0.1", "0.1"),
            ev(at(50), 2, 0, "", SUBMIT, 0, "0.1", "0.1"),
            ev(at(50), 3, 0, "", SUBMIT, 0, "0.1", "0.1"),
            ev(at(120), 1, 0, "", UPDATE_PENDING, 1, "", ""),
            ev(at(110), 3, 0, "", UPDATE_PENDING, 1, "", ""),
        ]
        .concat()]);
        let order: Vec<u64> = runs.runs.iter().map(|r| r.job).collect();
        assert_eq!(order, vec![2, 3, 1], "sorted by submit, ties in file order");
        let updates: Vec<(u32, u32)> = runs.updates.iter().map(|u| (u.time, u.run)).collect();
        assert_eq!(updates, vec![(110, 1), (120, 2)]);
    }

    #[test]
    fn permute_moves_every_item_to_its_place() {
        // A shuffled permutation (Fisher-Yates with a fixed LCG): cycles of many lengths.
        let n = 1009u32;
        let mut order: Vec<u32> = (0..n).collect();
        let mut state = 12345u64;
        for i in (1..n as usize).rev() {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            order.swap(i, (state >> 33) as usize % (i + 1));
        }
        let items: Vec<u64> = (0..n as u64).map(|i| i * i + 3).collect();
        let mut moved = items.clone();
        permute(&mut moved, &order);
        let gathered: Vec<u64> = order.iter().map(|&i| items[i as usize]).collect();
        assert_eq!(moved, gathered);
    }

    #[test]
    fn batched_load_equals_one_fold_of_all_parts() {
        // More parts than are loaded at once, and runs that span the batches.
        let parts = PARTS_IN_FLIGHT + 3;
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("task_events")).unwrap();
        for part in 0..parts as u64 {
            let t = part * 100;
            let mut rows = vec![
                ev(at(t), part, 0, "", SUBMIT, 0, "0.1", "0.1"),
                ev(at(t + 1), part, 0, "7", SCHEDULE, 0, "0.1", "0.1"),
            ];
            if let Some(earlier) = part.checked_sub(PARTS_IN_FLIGHT as u64) {
                rows.push(ev(at(t + 2), earlier, 0, "", FINISH, 0, "", ""));
            }
            if let Some(previous) = part.checked_sub(1) {
                rows.push(ev(at(t + 3), previous, 0, "", UPDATE_RUNNING, 3, "0.2", ""));
            }
            let name = format!("part-{part:05}-of-{parts:05}.csv");
            std::fs::write(dir.path().join("task_events").join(name), rows.concat()).unwrap();
        }
        let root = TraceRoot::open(dir.path()).unwrap();
        let opts = IngestOptions {
            use_cache: false,
            ..IngestOptions::default()
        };
        let batched = load_runs(&root, &opts).unwrap();
        let events = load_events(&root, &opts).unwrap();
        let whole = fold_runs(events.iter().map(|p| &p.events));
        assert_eq!(batched.stats.parts, parts);
        assert_eq!(format!("{:?}", batched.runs), format!("{:?}", whole.runs));
        assert_eq!(
            format!("{:?}", batched.updates),
            format!("{:?}", whole.updates)
        );
        // Job 0 opened in part 0 and finished in part PARTS_IN_FLIGHT, the next batch.
        let first = batched.runs.iter().find(|r| r.job == 0).unwrap();
        assert_eq!(
            (first.end, first.end_kind),
            ((PARTS_IN_FLIGHT * 100 + 2) as u32, FINISH)
        );
        assert_eq!(batched.updates.len(), parts - 1);
    }

    #[test]
    fn orphan_schedule_is_an_implicit_submit_and_other_orphans_are_dropped() {
        let runs = fold(&[[
            ev(0, 1, 0, "31", SCHEDULE, 9, "0.25", "0.5"), // running before the window
            ev(0, 2, 0, "32", FINISH, 9, "0.25", "0.5"),   // orphan end: dropped
            ev(0, 3, 0, "32", UPDATE_RUNNING, 9, "0.25", ""), // orphan update: dropped
            ev(at(40), 1, 0, "31", KILL, 9, "0.25", "0.5"),
        ]
        .concat()]);
        assert_eq!(
            runs.runs,
            vec![Run {
                job: 1,
                index: 0,
                submit: 0,
                schedule: 0,
                end: 40,
                end_kind: KILL,
                priority: 9,
                cpu_request: 0.25,
                mem_request: 0.5,
                machine: 0,
                submitted_in_trace: false, // implicit SUBMIT
            }]
        );
        assert_eq!(
            runs.machine_ids,
            vec![31],
            "dropped orphans register no machine"
        );
        assert_eq!(runs.stats.orphan_events, 3);
        assert_eq!(runs.stats.implicit_submits, 1);
        assert!(runs.updates.is_empty());
    }

    #[test]
    fn open_runs_end_at_trace_end() {
        let runs = fold(&[[
            ev(at(5), 1, 0, "", SUBMIT, 0, "0.1", "0.1"),
            ev(at(6), 1, 0, "3", SCHEDULE, 0, "0.1", "0.1"),
            ev(at(7), 2, 0, "", SUBMIT, 0, "0.1", "0.1"),
            ev(at(8), 2, 0, "", KILL, 0, "0.1", "0.1"),
            ev(at(9), 3, 0, "", SUBMIT, 0, "0.1", "0.1"),
        ]
        .concat()]);
        assert_eq!(runs.trace_end, 9);
        let ends: Vec<(u32, u8)> = runs.runs.iter().map(|r| (r.end, r.end_kind)).collect();
        assert_eq!(ends, vec![(9, END_NONE), (8, KILL), (9, END_NONE)]);
        assert_eq!(runs.stats.open_at_end, 2);
        assert_eq!(
            runs.stats.never_scheduled, 2,
            "job 2 (killed while pending) and job 3"
        );
    }

    #[test]
    fn missing_requests_are_filled_by_schedule_else_zero() {
        let runs = fold(&[[
            // As in the real part 00000: SUBMIT at t=0 with missing info, requests on the SCHEDULE.
            ev(0, 1, 0, "4155527081", SUBMIT, 9, "", ""),
            ev(0, 2, 0, "", SUBMIT, 9, "", "0.5"),
            ev(0, 1, 0, "4155527081", SCHEDULE, 9, "0.125", "0.07446"),
            ev(at(3), 2, 0, "", UPDATE_PENDING, 9, "0.2", ""),
        ]
        .concat()]);
        assert_eq!(
            (runs.runs[0].cpu_request, runs.runs[0].mem_request),
            (0.125, 0.07446)
        );
        assert_eq!(
            (runs.runs[1].cpu_request, runs.runs[1].mem_request),
            (0.0, 0.5)
        );
        assert_eq!(runs.stats.missing_requests, 1);
        assert_eq!(
            runs.updates,
            vec![Update {
                run: 1,
                time: 3,
                priority: 9,
                cpu_request: 0.2,
                mem_request: 0.5
            }]
        );
    }

    #[test]
    fn huge_task_indices_work() {
        // Indices beyond the dense per-job table (not seen in the real trace) take the sparse path.
        let runs = fold(&[[
            ev(at(1), 5, u32::MAX, "", SUBMIT, 1, "0.1", "0.1"),
            ev(at(1), 5, 0, "", SUBMIT, 1, "0.1", "0.1"),
            ev(at(2), 5, u32::MAX, "6", SCHEDULE, 1, "0.1", "0.1"),
            ev(at(3), 5, u32::MAX, "6", UPDATE_RUNNING, 2, "0.1", "0.1"),
            ev(at(4), 5, u32::MAX, "", SUBMIT, 1, "0.1", "0.1"),
            ev(at(5), 5, u32::MAX, "6", FAIL, 1, "0.1", "0.1"),
        ]
        .concat()]);
        let summary: Vec<(u32, u32, u32, u8)> = runs
            .runs
            .iter()
            .map(|r| (r.index, r.submit, r.end, r.end_kind))
            .collect();
        assert_eq!(
            summary,
            vec![
                (u32::MAX, 1, 4, END_SUPERSEDED),
                (0, 1, 5, END_NONE),
                (u32::MAX, 4, 5, FAIL)
            ]
        );
        assert_eq!(runs.runs[0].schedule, 2);
        assert_eq!(runs.updates.len(), 1);
        assert_eq!(runs.stats.orphan_events, 0);
    }
}
