//! A synthetic `task_events` trace in the official ClusterData2011-2 layout, shaped like the real
//! parts (see docs/trace-synth.md and scripts/calibrate_synth.py, which fits `synth_params.json`).
//!
//! What a task's life looks like in the trace, and so here:
//!
//! - Tasks belong to jobs; a job's tasks (indices 0..size) are SUBMITted together, a few
//!   microseconds apart, and share the job's user, scheduling class, priority and requests.
//! - A **run** starts with a SUBMIT (no machine), waits in the queue, is SCHEDULEd on a machine
//!   and ends with EVICT, FAIL, FINISH, KILL or LOST on that machine. A run can also end (KILL,
//!   FAIL) while still pending, with no machine. After an end the task is often SUBMITted again
//!   a few microseconds later: a new run of the same (job, index).
//! - An EVICT (the cell taking the machine back, mostly from free-tier tasks) is followed by a
//!   new SUBMIT that carries on the same work elsewhere. So the generator draws a task's **life**
//!   (how long it runs in all, and whether it ends with FAIL, FINISH, KILL or LOST) and splits
//!   it into runs at evictions, which arrive at the band's measured rate per running hour.
//!   After a life ends the task may start a new one (crash loops: FAIL, SUBMIT, FAIL, ...).
//! - Tasks already there when the window opens appear as events at **timestamp 0** (before the
//!   window): a SUBMIT then, for those running, a SCHEDULE. At t = 0 all SUBMITs come first,
//!   then all SCHEDULEs, as in the real part 00000.
//! - Other timestamps are microseconds counted from 600 s before the window. Events after the
//!   window end are simply absent: the run stays open, as in the real trace.
//! - UPDATE_PENDING / UPDATE_RUNNING (rare) restate the task's priority and requests; later
//!   events of the task carry the updated values.
//!
//! How it is generated: every task's whole history (all its lives and runs) is a pure function of
//! (seed, job ID, task index), drawn from a counter-based hash RNG. Jobs arrive in one-hour
//! arrival blocks, each block's arrivals a pure function of (seed, block). A generator thread
//! walks the blocks in time order and puts each event into the bucket of the hour it happens in;
//! once block h is generated no later block can add an event before its end, so hour h's bucket is
//! final: it is sorted and streamed to the writer of the part(s) it falls in. Parts partition the
//! window into equal time slices and are gzipped in parallel on the rayon pool. Memory is bounded
//! by an hour of events plus the future events of tasks alive now, not by the trace size, and the
//! content does not depend on the number of parts.
use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;

use flate2::write::GzEncoder;
use flate2::Compression;
use rayon::prelude::*;
use serde::Deserialize;

use crate::error::{Result, TraceError};

/// The fitted parameters (written by scripts/calibrate_synth.py from the ten real parts).
pub const PARAMS_JSON: &str = include_str!("synth_params.json");

/// Attribution of the real data the parameters were fitted on.
pub const ATTRIBUTION: &str =
    "Google cluster-usage traces, clusterdata-2011-2, J. Wilkes and C. Reiss, Google, CC-BY 4.0";

/// What to write.
#[derive(Clone, Debug)]
pub struct SynthOptions {
    pub machines: u32,
    /// Window length in days (the real trace: 29).
    pub days: f64,
    /// Number of `task_events` parts; default 500 × days / 29 (as the real trace), at least 1.
    pub parts: Option<u32>,
    pub seed: u64,
}

/// What was written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SynthStats {
    pub parts: u32,
    /// `task_events` rows.
    pub rows: u64,
    /// Distinct (job, index) tasks with at least one row.
    pub tasks: u64,
    /// Compressed bytes of all parts.
    pub bytes: u64,
}

const SUBMIT: u8 = 0;
const SCHEDULE: u8 = 1;
const EVICT: u8 = 2;
const UPDATE_PENDING: u8 = 7;
const UPDATE_RUNNING: u8 = 8;

/// Trace timestamps count from 600 s before the window.
const WINDOW_START_US: u64 = 600_000_000;
/// Arrival blocks: one hour of job arrivals.
const BLOCK_US: u64 = 3_600_000_000;
/// The real cell, which the per-machine rates were normalised by.
const CELL_MACHINES: f64 = 12_500.0;
/// A task has at most this many lives (a guard; real chains are short).
const MAX_LIVES: u32 = 1000;
const NO_MACHINE: u32 = u32::MAX;
/// Job IDs: tasks present at t = 0 belong to older jobs with smaller IDs, new jobs count up from
/// about where the real trace's new jobs start.
const OLD_JOB_ID_MIN: u64 = 3_418_309;
const NEW_JOB_ID_START: u64 = 6_251_700_000;
/// A fast gzip level keeps the full 29-day trace at well under a minute on two cores; level 6
/// would make the files about a quarter smaller for several times the CPU.
const GZIP_LEVEL: u32 = 1;
/// Longest window accepted (ten years; the real trace is 29 days).
const MAX_DAYS: f64 = 3650.0;

// RNG streams: every random choice is keyed by (seed, stream, ids...).
const STREAM_TASK: u64 = 1;
const STREAM_JOB: u64 = 2;
const STREAM_ARRIVALS: u64 = 3;
const STREAM_INITIAL: u64 = 4;
const STREAM_MACHINE: u64 = 5;
const STREAM_USER: u64 = 6;

/// Writes `OUT/task_events/part-NNNNN-of-MMMMM.csv.gz` and `OUT/README.md` (last).
/// `progress(done, total)` is called after each part (from writer threads).
pub fn write_trace(
    out: &Path,
    opts: &SynthOptions,
    progress: &(dyn Fn(u32, u32) + Sync),
) -> Result<SynthStats> {
    if opts.machines == 0 {
        return Err(TraceError::Usage(
            "synth: --machines must be at least 1".into(),
        ));
    }
    if !(opts.days > 0.0 && opts.days <= MAX_DAYS) {
        return Err(TraceError::Usage(format!(
            "synth: --days must be > 0 and at most {MAX_DAYS} (got {})",
            opts.days
        )));
    }
    let end_us = (opts.days * 86_400e6).round() as u64;
    if end_us < 1_000_000 {
        return Err(TraceError::Usage(
            "synth: --days gives a window under one second".into(),
        ));
    }
    let parts = match opts.parts {
        Some(0) => {
            return Err(TraceError::Usage(
                "synth: --parts must be at least 1".into(),
            ))
        }
        Some(p) if p > 99_999 => {
            return Err(TraceError::Usage("synth: --parts must be < 100000".into()))
        }
        Some(p) => p,
        None => ((500.0 * opts.days / 29.0).round() as u32).clamp(1, 99_999),
    };
    let dir = out.join("task_events");
    if dir.is_dir()
        && fs::read_dir(&dir)
            .map_err(|e| file_err(&dir, e))?
            .next()
            .is_some()
    {
        return Err(TraceError::Usage(format!(
            "synth: {} already holds files; write into an empty or new directory",
            dir.display()
        )));
    }
    fs::create_dir_all(&dir).map_err(|e| file_err(&dir, e))?;

    let params: Params = serde_json::from_str(PARAMS_JSON).map_err(|e| TraceError::File {
        file: PathBuf::from("crates/trace/src/synth_params.json"),
        msg: format!("bad synth parameters: {e}"),
    })?;
    let model = Model::new(&params, opts.machines, end_us, opts.seed);

    progress(0, parts);
    let done = AtomicU32::new(0);
    let (part_tx, part_rx) = sync_channel::<(u32, Receiver<Chunk>)>(1);
    let (generated, bytes) = std::thread::scope(|scope| -> Result<(Generated, u64)> {
        // One thread generates events in time order; the rayon pool formats and gzips the parts.
        let generator = std::thread::Builder::new()
            .name("synth-generator".into())
            .spawn_scoped(scope, || model.generate(parts, part_tx))
            .map_err(|e| TraceError::Usage(format!("synth: cannot start a thread: {e}")))?;
        let written: Result<Vec<u64>> = part_rx
            .into_iter()
            .par_bridge()
            .map(|(p, chunks)| {
                let bytes = write_part(&dir, p, parts, chunks, &model.machine_ids)?;
                progress(done.fetch_add(1, Ordering::Relaxed) + 1, parts);
                Ok(bytes)
            })
            .collect();
        let generated = generator
            .join()
            .unwrap_or_else(|e| std::panic::resume_unwind(e));
        Ok((generated, written?.iter().sum()))
    })?;
    let stats = SynthStats {
        parts,
        rows: generated.rows,
        tasks: generated.tasks,
        bytes,
    };
    write_readme(out, opts, &stats)?;
    Ok(stats)
}

fn file_err(path: &Path, e: std::io::Error) -> TraceError {
    TraceError::File {
        file: path.to_path_buf(),
        msg: e.to_string(),
    }
}

fn write_readme(out: &Path, opts: &SynthOptions, stats: &SynthStats) -> Result<()> {
    let text = format!(
        "# Synthetic ClusterData2011-2 trace\n\n\
         This is **synthetic** data, not a Google trace. It was written by\n\n\
         \x20   colosched trace synth --machines {m} --days {d} --parts {p} --seed {s} --out <this directory>\n\n\
         in the official layout (`task_events/part-NNNNN-of-MMMMM.csv.gz`, 13 columns, no header).\n\
         Its shape (population at the window start, arrival rates, job sizes, run outcomes and\n\
         durations, queueing delays, resubmissions, priorities, requests) is calibrated on the ten\n\
         real task_events parts 00000-00009 of the Google trace (see docs/trace-synth.md of colosched):\n\n\
         {ATTRIBUTION}\n\n\
         Only task_events is written (no machine_events, job_events or task_usage).\n\n\
         | parts | rows | tasks | compressed bytes |\n|---|---|---|---|\n| {p} | {r} | {t} | {b} |\n",
        m = opts.machines,
        d = opts.days,
        p = stats.parts,
        s = opts.seed,
        r = stats.rows,
        t = stats.tasks,
        b = stats.bytes,
    );
    let path = out.join("README.md");
    let tmp = out.join(".README.md.tmp");
    fs::write(&tmp, text).map_err(|e| file_err(&tmp, e))?;
    fs::rename(&tmp, &path).map_err(|e| file_err(&path, e))
}

// ---------------------------------------------------------------------------------------------
// Parameters (the JSON the calibration script writes; unknown fields are ignored).

#[derive(Deserialize)]
struct Params {
    window_s: f64,
    horizon_s: f64,
    initial: InitialParams,
    arrivals: ArrivalParams,
    runs: Vec<RunParams>,
    pending_end: PendingEndParams,
    resubmit: ResubmitParams,
    updates: UpdateParams,
    /// For the jobs present at t = 0 and the new jobs, per band: (cpu, memory, disk, tasks) of
    /// every distinct request triple.
    requests: RequestParams,
    different_machines_frac: Vec<f64>,
    /// Jobs per user, most active first.
    users: Vec<f64>,
    machine_id: Quantiles,
}

#[derive(Deserialize)]
struct RequestParams {
    initial: Vec<Vec<[f64; 4]>>,
    new: Vec<Vec<[f64; 4]>>,
}

#[derive(Deserialize)]
struct InitialParams {
    running_per_machine: f64,
    pending_per_machine: f64,
    jobs: TemplateParams,
    submit_names_machine: f64,
    missing_info_job_frac: f64,
    pending_end_s: Quantiles,
    pending_end_kinds: BTreeMap<String, f64>,
    bands: Vec<InitialBandParams>,
}

#[derive(Deserialize)]
struct InitialBandParams {
    pending_frac: f64,
    p_end_in_window: f64,
    end_s: Quantiles,
    end_kinds: BTreeMap<String, f64>,
    p_pending_scheduled: f64,
    pending_sched_s: Quantiles,
    p_pending_ended: f64,
}

#[derive(Deserialize)]
struct ArrivalParams {
    new_tasks_per_machine_hour: f64,
    jobs: TemplateParams,
    task_gap_us: Quantiles,
}

#[derive(Deserialize)]
struct TemplateParams {
    priority: Vec<u8>,
    sched_class: Vec<u8>,
    size: Vec<u32>,
    count: Vec<f64>,
}

#[derive(Deserialize)]
struct RunParams {
    p_ended_pending: f64,
    p_never_scheduled: f64,
    queue_s: Quantiles,
    evictions_per_hour: f64,
    p_long: f64,
    kinds: BTreeMap<String, f64>,
    /// The same two given how the task's previous life ended ("first", "3", "4", "5").
    /// Missing keys (too few lives measured) fall back to the two above.
    after: BTreeMap<String, OutcomeParams>,
    duration_s: BTreeMap<String, Quantiles>,
    long_mean_s: f64,
    long_kinds: BTreeMap<String, f64>,
}

#[derive(Deserialize)]
struct OutcomeParams {
    p_long: f64,
    kinds: BTreeMap<String, f64>,
}

#[derive(Deserialize)]
struct PendingEndParams {
    kinds: BTreeMap<String, f64>,
    after_s: Quantiles,
}

#[derive(Deserialize)]
struct ResubmitParams {
    /// Per band: probability of a new SUBMIT after each end kind.
    p: Vec<BTreeMap<String, f64>>,
    delay_us: Quantiles,
}

#[derive(Deserialize)]
struct UpdateParams {
    update_running_per_run: f64,
    update_pending_per_run: f64,
    cpu_ratio: Quantiles,
    mem_ratio: Quantiles,
}

/// An empirical distribution: values `v` at cumulative probabilities `p` (inverse CDF, linear
/// between grid points).
#[derive(Clone, Deserialize)]
struct Quantiles {
    p: Vec<f64>,
    v: Vec<f64>,
}

impl Quantiles {
    fn sample(&self, u: f64) -> f64 {
        let i = self
            .p
            .partition_point(|&p| p <= u)
            .clamp(1, self.p.len() - 1);
        let (p0, p1, v0, v1) = (self.p[i - 1], self.p[i], self.v[i - 1], self.v[i]);
        if p1 > p0 {
            v0 + (v1 - v0) * ((u - p0) / (p1 - p0)).clamp(0.0, 1.0)
        } else {
            v1
        }
    }
}

/// Picks an index with probability proportional to its weight.
struct Discrete {
    cum: Vec<f64>,
}

impl Discrete {
    fn new(weights: impl IntoIterator<Item = f64>) -> Discrete {
        let mut total = 0.0;
        let cum = weights
            .into_iter()
            .map(|w| {
                total += w.max(0.0);
                total
            })
            .collect();
        Discrete { cum }
    }

    fn pick(&self, u: f64) -> usize {
        let x = u * self.cum.last().copied().unwrap_or(0.0);
        self.cum
            .partition_point(|&c| c <= x)
            .min(self.cum.len().saturating_sub(1))
    }
}

/// A mix of terminal event kinds ({"2": p, "4": p, ...} in the JSON).
struct KindMix {
    kinds: Vec<u8>,
    pick: Discrete,
}

impl KindMix {
    fn new(m: &BTreeMap<String, f64>) -> KindMix {
        let kinds: Vec<u8> = m.keys().map(|k| k.parse().expect("event kind")).collect();
        KindMix {
            kinds,
            pick: Discrete::new(m.values().copied()),
        }
    }

    fn pick(&self, u: f64) -> u8 {
        self.kinds[self.pick.pick(u)]
    }
}

/// Job templates (priority, scheduling class, tasks per job) with their weights.
struct Templates {
    priority: Vec<u8>,
    class: Vec<u8>,
    size: Vec<u32>,
    pick: Discrete,
    mean_size: f64,
}

impl Templates {
    /// Only templates of at most `cap` tasks: a small synthetic cell cannot take the real cell's
    /// 10,000-task jobs; the caller keeps the task rate by scaling the job rate. Within each
    /// priority band the kept templates are reweighted so the band's share of *tasks* stays as
    /// measured (the big jobs left out would otherwise take their band's tasks with them).
    fn new(t: &TemplateParams, cap: u32) -> Templates {
        let mut all = [0.0; 3];
        let mut kept = [0.0; 3];
        for ((&c, &s), &p) in t.count.iter().zip(&t.size).zip(&t.priority) {
            all[band_of(p)] += c * f64::from(s);
            if s <= cap {
                kept[band_of(p)] += c * f64::from(s);
            }
        }
        let weights: Vec<f64> = (0..t.size.len())
            .map(|i| {
                let b = band_of(t.priority[i]);
                if t.size[i] <= cap && kept[b] > 0.0 {
                    t.count[i] * all[b] / kept[b]
                } else {
                    0.0
                }
            })
            .collect();
        let jobs: f64 = weights.iter().sum();
        let tasks: f64 = weights
            .iter()
            .zip(&t.size)
            .map(|(w, &s)| w * f64::from(s))
            .sum();
        Templates {
            priority: t.priority.clone(),
            class: t.sched_class.clone(),
            size: t.size.clone(),
            pick: Discrete::new(weights),
            mean_size: tasks / jobs,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Random numbers: splitmix64 over a key hashed from (seed, stream, ids...). Counter-based: the
// n-th draw of a key depends on nothing else, so any task can be generated on its own.

struct Rng {
    state: u64,
}

fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Rng {
    fn new(keys: &[u64]) -> Rng {
        let state = keys.iter().fold(0x243F_6A88_85A3_08D3, |s, &k| {
            mix64(s ^ mix64(k.wrapping_add(0x9E37)))
        });
        Rng { state }
    }

    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix64(self.state)
    }

    /// Uniform in [0, 1).
    fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    fn below(&mut self, n: u32) -> u32 {
        (((self.next_u64() >> 32) * u64::from(n)) >> 32) as u32
    }

    /// Exponential with the given mean.
    fn exp(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.f64()).ln()
    }
}

fn us(seconds: f64) -> u64 {
    (seconds * 1e6).round().max(0.0) as u64
}

// ---------------------------------------------------------------------------------------------
// Text format

/// C's `printf("%.4g")`, which is how the trace prints requests (e-notation below 1e-4).
pub fn format_g4(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return "0".into();
    }
    let sci = format!("{x:.3e}"); // correctly rounded to 4 significant digits, e.g. "7.057e-5"
    let (mantissa, exp) = sci.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("{:e} exponent");
    if !(-4..4).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim_fraction(mantissa), exp.abs())
    } else {
        trim_fraction(&format!("{:.*}", (3 - exp) as usize, x)).to_string()
    }
}

fn trim_fraction(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// The user column: a 44-character base64 string, like the trace's hashed user names.
fn user_name(rank: usize) -> String {
    const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut rng = Rng::new(&[STREAM_USER, rank as u64]);
    let bytes: Vec<u8> = (0..4).flat_map(|_| rng.next_u64().to_le_bytes()).collect();
    let mut s = String::with_capacity(44);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                s.push(B64[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

fn push_u64(buf: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    buf.extend_from_slice(&digits[i..]);
}

// ---------------------------------------------------------------------------------------------
// The model: the parameters prepared for one cell size and window.

/// How a life ends: long (beyond the measured horizon) or short, and with which kind.
struct Outcome {
    p_long: f64,
    kinds: KindMix,
}

struct RunModel {
    p_ended_pending: f64,
    p_never_scheduled: f64,
    queue_s: Quantiles,
    /// Mean running time between evictions (infinite if the band is never evicted).
    evict_mean_s: f64,
    /// Indexed by the end kind of the task's previous life, 0 for a new task.
    outcome: Vec<Outcome>,
    long_mean_s: f64,
    long_kinds: KindMix,
    /// Indexed by end kind (2..=6); `None` for kinds never seen.
    duration_s: Vec<Option<Quantiles>>,
    /// Probability of a new SUBMIT after each end kind, indexed by kind.
    resubmit: [f64; 7],
}

struct InitialBand {
    pending_frac: f64,
    p_end_in_window: f64,
    end_s: Quantiles,
    end_kinds: KindMix,
    p_pending_scheduled: f64,
    pending_sched_s: Quantiles,
    p_pending_ended: f64,
}

struct Requests {
    /// Pre-rendered "cpu,mem,disk" and the values, per distinct triple.
    text: Vec<String>,
    values: Vec<[f64; 3]>,
    pick: Discrete,
}

impl Requests {
    fn new(band: &[[f64; 4]]) -> Requests {
        let text = band
            .iter()
            .map(|r| {
                format!(
                    "{},{},{}",
                    format_g4(r[0]),
                    format_g4(r[1]),
                    format_g4(r[2])
                )
            })
            .collect();
        Requests {
            text,
            values: band.iter().map(|r| [r[0], r[1], r[2]]).collect(),
            pick: Discrete::new(band.iter().map(|r| r[3])),
        }
    }
}

struct Model {
    seed: u64,
    machines: u32,
    machine_ids: Vec<u64>,
    end_us: u64,
    window_s: f64,
    horizon_s: f64,
    initial_tasks: u64,
    initial_jobs: Templates,
    initial_bands: Vec<InitialBand>,
    submit_names_machine: f64,
    missing_info_job_frac: f64,
    initial_pending_end_s: Quantiles,
    initial_pending_end_kinds: KindMix,
    new_jobs: Templates,
    /// Mean time between new jobs, in microseconds.
    job_gap_us: f64,
    task_gap_us: Quantiles,
    runs: Vec<RunModel>,
    pending_end_kinds: KindMix,
    pending_end_after_s: Quantiles,
    resubmit_delay_us: Quantiles,
    update_running: f64,
    update_pending: f64,
    cpu_ratio: Quantiles,
    mem_ratio: Quantiles,
    initial_requests: Vec<Requests>,
    new_requests: Vec<Requests>,
    different_machines: Vec<f64>,
    users: Vec<String>,
    user_pick: Discrete,
}

/// Priority band: 0 "free" (0-1), 1 middle (2-8), 2 "production" (9-11).
fn band_of(priority: u8) -> usize {
    match priority {
        0..=1 => 0,
        2..=8 => 1,
        _ => 2,
    }
}

impl Model {
    fn new(p: &Params, machines: u32, end_us: u64, seed: u64) -> Model {
        let scale = f64::from(machines) / CELL_MACHINES;
        let cap = |t: &TemplateParams| {
            let largest = t.size.iter().copied().max().unwrap_or(1);
            ((f64::from(largest) * scale).ceil() as u32).clamp(1, largest)
        };
        let new_jobs = Templates::new(&p.arrivals.jobs, cap(&p.arrivals.jobs));
        let tasks_per_hour = p.arrivals.new_tasks_per_machine_hour * f64::from(machines);
        let job_gap_us = 3600e6 * new_jobs.mean_size / tasks_per_hour;
        let initial_per_machine = p.initial.running_per_machine + p.initial.pending_per_machine;
        let runs = p
            .runs
            .iter()
            .zip(&p.resubmit.p)
            .map(|(r, resub)| {
                let mut duration_s = vec![None; 7];
                for (k, q) in &r.duration_s {
                    duration_s[k.parse::<usize>().expect("event kind")] = Some(q.clone());
                }
                let mut resubmit = [0.0; 7];
                for (k, &v) in resub {
                    resubmit[k.parse::<usize>().expect("event kind")] = v;
                }
                RunModel {
                    p_ended_pending: r.p_ended_pending,
                    p_never_scheduled: r.p_never_scheduled,
                    queue_s: r.queue_s.clone(),
                    evict_mean_s: if r.evictions_per_hour > 0.0 {
                        3600.0 / r.evictions_per_hour
                    } else {
                        f64::INFINITY
                    },
                    outcome: (0..7)
                        .map(|prev| {
                            let key = if prev == 0 {
                                "first".to_string()
                            } else {
                                prev.to_string()
                            };
                            // Too few lives after this kind: the band's outcome over all lives.
                            let (p_long, kinds) = r
                                .after
                                .get(&key)
                                .map_or((r.p_long, &r.kinds), |o| (o.p_long, &o.kinds));
                            Outcome {
                                p_long,
                                kinds: KindMix::new(kinds),
                            }
                        })
                        .collect(),
                    long_mean_s: r.long_mean_s,
                    long_kinds: KindMix::new(&r.long_kinds),
                    duration_s,
                    resubmit,
                }
            })
            .collect();
        let initial_bands = p
            .initial
            .bands
            .iter()
            .map(|b| InitialBand {
                pending_frac: b.pending_frac,
                p_end_in_window: b.p_end_in_window,
                end_s: b.end_s.clone(),
                end_kinds: KindMix::new(&b.end_kinds),
                p_pending_scheduled: b.p_pending_scheduled,
                pending_sched_s: b.pending_sched_s.clone(),
                p_pending_ended: b.p_pending_ended,
            })
            .collect();
        let requests = |bands: &[Vec<[f64; 4]>]| -> Vec<Requests> {
            bands.iter().map(|band| Requests::new(band)).collect()
        };
        Model {
            seed,
            machines,
            machine_ids: machine_ids(&p.machine_id, machines),
            end_us,
            window_s: p.window_s,
            horizon_s: p.horizon_s,
            initial_tasks: (initial_per_machine * f64::from(machines)).round().max(1.0) as u64,
            initial_jobs: Templates::new(&p.initial.jobs, cap(&p.initial.jobs)),
            initial_bands,
            submit_names_machine: p.initial.submit_names_machine,
            missing_info_job_frac: p.initial.missing_info_job_frac,
            initial_pending_end_s: p.initial.pending_end_s.clone(),
            initial_pending_end_kinds: KindMix::new(&p.initial.pending_end_kinds),
            new_jobs,
            job_gap_us,
            task_gap_us: p.arrivals.task_gap_us.clone(),
            runs,
            pending_end_kinds: KindMix::new(&p.pending_end.kinds),
            pending_end_after_s: p.pending_end.after_s.clone(),
            resubmit_delay_us: p.resubmit.delay_us.clone(),
            update_running: p.updates.update_running_per_run,
            update_pending: p.updates.update_pending_per_run,
            cpu_ratio: p.updates.cpu_ratio.clone(),
            mem_ratio: p.updates.mem_ratio.clone(),
            initial_requests: requests(&p.requests.initial),
            new_requests: requests(&p.requests.new),
            different_machines: p.different_machines_frac.clone(),
            users: (0..p.users.len()).map(user_name).collect(),
            user_pick: Discrete::new(p.users.iter().copied()),
        }
    }

    /// A job's attributes, drawn from (seed, job ID). `template` = None draws it too.
    fn job(&self, id: u64, templates: &Templates, template: Option<usize>, initial: bool) -> Job {
        let mut rng = Rng::new(&[self.seed, STREAM_JOB, id]);
        let t = template.unwrap_or_else(|| templates.pick.pick(rng.f64()));
        let priority = templates.priority[t];
        let band = band_of(priority);
        let req = if initial {
            &self.initial_requests[band]
        } else {
            &self.new_requests[band]
        };
        let r = req.pick.pick(rng.f64());
        let user = &self.users[self.user_pick.pick(rng.f64())];
        let class = templates.class[t];
        let different = u8::from(rng.f64() < self.different_machines[band]);
        let tail = format!(",{user},{class},{priority},{},{different}", req.text[r]);
        // Some jobs present at t = 0 have SUBMIT rows with "missing info" 2 and empty requests.
        let missing_tail = (initial && rng.f64() < self.missing_info_job_frac)
            .then(|| Arc::from(format!(",{user},{class},{priority},,,,")));
        Job {
            id,
            size: templates.size[t],
            band,
            priority,
            class,
            user: user.clone(),
            requests: req.values[r],
            different,
            tail: Arc::from(tail),
            missing_tail,
        }
    }

    /// The whole trace: generates arrival blocks in time order and streams each settled hour to
    /// the part writers. Stops early if the writers hang up (an error on their side).
    fn generate(&self, parts: u32, part_tx: SyncSender<(u32, Receiver<Chunk>)>) -> Generated {
        let blocks = self.end_us.div_ceil(BLOCK_US) as usize;
        let mut sink = Sink {
            end_us: self.end_us,
            buckets: (0..blocks).map(|_| Vec::new()).collect(),
        };
        let mut counts = Generated::default();
        let mut out = Dispatcher {
            parts,
            end_us: self.end_us,
            part_tx,
            open: None,
            next: 0,
            rows: 0,
        };
        self.initial_population(&mut sink, &mut counts);
        let mut job_counter = 0u64;
        for block in 0..blocks {
            self.arrivals(block as u64, &mut job_counter, &mut sink, &mut counts);
            let mut events = std::mem::take(&mut sink.buckets[block]);
            // Sorted by time; ties (t = 0, or a re-SUBMIT in the same microsecond) by the
            // event's place in its task's life, then job and task.
            events.sort_unstable_by_key(|e| (e.ts, e.seq, e.job, e.index));
            if out.send(events).is_err() {
                return counts;
            }
        }
        let rows = out.rows;
        if out.finish().is_ok() {
            counts.rows = rows;
        }
        counts
    }

    /// Tasks already there when the window opens: jobs drawn from the t = 0 templates until the
    /// population (running + pending, per machine as in the real cell) is reached.
    fn initial_population(&self, sink: &mut Sink, counts: &mut Generated) {
        let mut rng = Rng::new(&[self.seed, STREAM_INITIAL]);
        let mut jobs = Vec::new();
        let mut tasks = 0u64;
        while tasks < self.initial_tasks {
            let t = self.initial_jobs.pick.pick(rng.f64());
            let size = u64::from(self.initial_jobs.size[t]).min(self.initial_tasks - tasks);
            jobs.push((t, size as u32));
            tasks += size;
        }
        let step = ((NEW_JOB_ID_START - OLD_JOB_ID_MIN) / jobs.len() as u64).max(1);
        for (k, &(t, size)) in jobs.iter().enumerate() {
            let id = OLD_JOB_ID_MIN + k as u64 * step + rng.next_u64() % step.div_ceil(2);
            let job = self.job(id, &self.initial_jobs, Some(t), true);
            for index in 0..size {
                if self.task(&job, index, None, sink) {
                    counts.tasks += 1;
                }
            }
        }
    }

    /// New jobs arriving in one block: a Poisson process, each job's tasks SUBMITted together.
    fn arrivals(&self, block: u64, job_counter: &mut u64, sink: &mut Sink, counts: &mut Generated) {
        let mut rng = Rng::new(&[self.seed, STREAM_ARRIVALS, block]);
        let stop = ((block + 1) * BLOCK_US).min(self.end_us);
        let mut t = (block * BLOCK_US) as f64;
        loop {
            t += rng.exp(self.job_gap_us);
            if t >= stop as f64 {
                break;
            }
            // New job IDs increase with arrival time, with irregular gaps like the real ones.
            let id = NEW_JOB_ID_START + *job_counter * 64 + mix64(*job_counter) % 64;
            *job_counter += 1;
            let job = self.job(id, &self.new_jobs, None, false);
            let mut submit = (t as u64).max(1);
            let mut gaps = Rng::new(&[self.seed, STREAM_JOB, id, 1]);
            for index in 0..job.size {
                if index > 0 {
                    submit += us(self.task_gap_us.sample(gaps.f64()) / 1e6).max(1);
                }
                if self.task(&job, index, Some(submit), sink) {
                    counts.tasks += 1;
                }
            }
        }
    }

    fn pick_machine(&self, rng: &mut Rng) -> u32 {
        rng.below(self.machines)
    }

    /// One task: a chain of lives. `submit` = None: present at t = 0. Returns true if it has a row.
    fn task(&self, job: &Job, index: u32, submit: Option<u64>, sink: &mut Sink) -> bool {
        let mut rng = Rng::new(&[self.seed, STREAM_TASK, job.id, u64::from(index)]);
        let mut life = Life {
            job,
            index,
            seq: 0,
            last_ts: 0,
            tail: job.tail.clone(),
            sink,
            rows: 0,
        };
        let mut start = submit.map_or(Start::Initial, Start::Submit);
        let mut prev = 0;
        for _ in 0..MAX_LIVES {
            let Some((w, kind)) = self.life(job, &mut rng, &mut life, start, prev) else {
                break; // it outlives the window
            };
            // After FAIL or KILL (rarely FINISH) the task is often SUBMITted again at once: a new
            // life, whose outcome depends on how this one ended (crash loops, kill loops).
            if kind == EVICT || rng.f64() >= self.runs[job.band].resubmit[usize::from(kind)] {
                break;
            }
            start = Start::Submit(w + self.resubmit_delay(&mut rng));
            prev = kind;
        }
        life.rows > 0
    }

    fn resubmit_delay(&self, rng: &mut Rng) -> u64 {
        us(self.resubmit_delay_us.sample(rng.f64()) / 1e6)
    }

    /// One life: runs joined by EVICT -> SUBMIT until FAIL, FINISH, KILL or LOST. `prev` is how
    /// the task's previous life ended (0: none). Returns the final end (window µs, kind), or
    /// None if the life outlives the window.
    fn life(
        &self,
        job: &Job,
        rng: &mut Rng,
        life: &mut Life,
        start: Start,
        prev: u8,
    ) -> Option<(u64, u8)> {
        let rm = &self.runs[job.band];
        // The running time still to do (µs) and how the life will end, drawn when it first runs.
        let (mut entry, mut plan) = match start {
            Start::Initial => self.enter_initial(job, rng, life),
            Start::Submit(w) => (self.enter_submit(job, rng, life, w), None),
        };
        loop {
            let (sched, machine) = match entry {
                Entry::Gone => return None,
                Entry::Ended { at, kind } => {
                    // Ended while pending; an EVICT of a pending run is SUBMITted again like any.
                    if kind == EVICT && rng.f64() < rm.resubmit[usize::from(EVICT)] {
                        let next = at + self.resubmit_delay(rng);
                        entry = self.enter_submit(job, rng, life, next);
                        continue;
                    }
                    return Some((at, kind));
                }
                Entry::Scheduled { at, machine } => (at, machine),
            };
            let (remaining, kind) = *plan.get_or_insert_with(|| self.draw_life(rng, rm, prev));
            // The cell may take the machine back before the work is done (evictions arrive at
            // the band's measured rate per running hour): EVICT, SUBMIT again at once, and carry
            // on elsewhere with what is left.
            let evict_in = if rm.evict_mean_s.is_finite() {
                us(rng.exp(rm.evict_mean_s))
            } else {
                u64::MAX
            };
            if evict_in < remaining {
                let at = sched + evict_in;
                self.maybe_update(rng, life, sched, at, machine);
                if !life.emit(at, EVICT, machine) {
                    return None;
                }
                let at = life.last_w();
                plan = Some((remaining - evict_in, kind));
                if rng.f64() >= rm.resubmit[usize::from(EVICT)] {
                    return Some((at, EVICT));
                }
                let next = at + self.resubmit_delay(rng);
                entry = self.enter_submit(job, rng, life, next);
                continue;
            }
            let end = sched + remaining;
            self.maybe_update(rng, life, sched, end, machine);
            return life
                .emit(end, kind, machine)
                .then_some((life.last_w(), kind));
        }
    }

    /// How long a life runs in all and how it ends: long (past the measured horizon, plus an
    /// exponential tail whose mean keeps the band's running population stationary) or short
    /// (a measured kind and duration); the mix depends on how the previous life ended.
    fn draw_life(&self, rng: &mut Rng, rm: &RunModel, prev: u8) -> (u64, u8) {
        let outcome = &rm.outcome[usize::from(prev)];
        if rng.f64() < outcome.p_long {
            (
                us(self.horizon_s + rng.exp(rm.long_mean_s)),
                rm.long_kinds.pick(rng.f64()),
            )
        } else {
            let kind = outcome.kinds.pick(rng.f64());
            let q = rm.duration_s[usize::from(kind)]
                .as_ref()
                .expect("durations of a drawn kind");
            (us(q.sample(rng.f64())), kind)
        }
    }

    /// A task present at t = 0: SUBMIT (and SCHEDULE if running) at timestamp 0. A running one
    /// also gets its plan: the end of its life as measured for the real t = 0 tasks, or later.
    fn enter_initial(
        &self,
        job: &Job,
        rng: &mut Rng,
        life: &mut Life,
    ) -> (Entry, Option<(u64, u8)>) {
        let b = &self.initial_bands[job.band];
        let rm = &self.runs[job.band];
        let pending = rng.f64() < b.pending_frac;
        let machine = self.pick_machine(rng);
        let named = !pending && rng.f64() < self.submit_names_machine;
        life.at_zero(
            SUBMIT,
            if named { machine } else { NO_MACHINE },
            job.missing_tail.as_ref(),
        );
        if !pending {
            life.at_zero(SCHEDULE, machine, None);
            let plan = if rng.f64() < b.p_end_in_window {
                (us(b.end_s.sample(rng.f64())), b.end_kinds.pick(rng.f64()))
            } else {
                (
                    us(self.window_s + rng.exp(rm.long_mean_s)),
                    rm.long_kinds.pick(rng.f64()),
                )
            };
            return (Entry::Scheduled { at: 0, machine }, Some(plan));
        }
        let u = rng.f64();
        let sched = if u < b.p_pending_scheduled {
            us(b.pending_sched_s.sample(rng.f64()))
        } else if u < b.p_pending_scheduled + b.p_pending_ended {
            // Mostly KILLs, at the times measured for the real t = 0 pending tasks.
            let end = us(self.initial_pending_end_s.sample(rng.f64()));
            let kind = self.initial_pending_end_kinds.pick(rng.f64());
            return (self.end_pending(life, end, kind, machine), None);
        } else {
            // Still pending at the real window's end: scheduled some hours later.
            us(self.window_s + rng.exp(self.horizon_s))
        };
        (self.schedule(life, sched, machine), None)
    }

    /// A run SUBMITted at window time `w` (µs): it waits in the queue and is SCHEDULEd on a
    /// random machine, or ends while pending.
    fn enter_submit(&self, job: &Job, rng: &mut Rng, life: &mut Life, w: u64) -> Entry {
        let rm = &self.runs[job.band];
        if !life.emit(w, SUBMIT, NO_MACHINE) {
            return Entry::Gone;
        }
        let w = life.last_w();
        let machine = self.pick_machine(rng);
        let u = rng.f64();
        if u < rm.p_ended_pending {
            let end = w + us(self.pending_end_after_s.sample(rng.f64()));
            let kind = self.pending_end_kinds.pick(rng.f64());
            self.maybe_update_pending(rng, life, w, end);
            return self.end_pending(life, end, kind, machine);
        }
        let queue_s = if u < rm.p_ended_pending + rm.p_never_scheduled {
            // Not scheduled within the measured horizon: waits that long and then some.
            self.horizon_s + rng.exp(self.horizon_s)
        } else {
            rm.queue_s.sample(rng.f64())
        };
        let sched = w + us(queue_s);
        self.maybe_update_pending(rng, life, w, sched);
        self.schedule(life, sched, machine)
    }

    fn schedule(&self, life: &mut Life, at: u64, machine: u32) -> Entry {
        if !life.emit(at, SCHEDULE, machine) {
            return Entry::Gone;
        }
        Entry::Scheduled {
            at: life.last_w(),
            machine,
        }
    }

    fn end_pending(&self, life: &mut Life, at: u64, kind: u8, machine: u32) -> Entry {
        if !life.emit(at, kind, pending_end_machine(kind, machine)) {
            return Entry::Gone;
        }
        Entry::Ended {
            at: life.last_w(),
            kind,
        }
    }

    fn maybe_update_pending(&self, rng: &mut Rng, life: &mut Life, from: u64, to: u64) {
        if rng.f64() < self.update_pending {
            life.update(
                UPDATE_PENDING,
                from + to.saturating_sub(from) / 2,
                NO_MACHINE,
                rng,
                self,
            );
        }
    }

    fn maybe_update(&self, rng: &mut Rng, life: &mut Life, from: u64, to: u64, machine: u32) {
        if rng.f64() < self.update_running {
            let at = from + ((to.saturating_sub(from)) as f64 * rng.f64()) as u64;
            life.update(UPDATE_RUNNING, at, machine, rng, self);
        }
    }
}

/// The machine column of a run that ends while pending: empty for KILL/FAIL, but the real trace
/// names a machine on every EVICT, even of a run it never SCHEDULEd.
fn pending_end_machine(kind: u8, machine: u32) -> u32 {
    if kind == EVICT {
        machine
    } else {
        NO_MACHINE
    }
}

/// Fixed machine IDs for dense indices 0..machines: drawn from the real IDs' distribution (they
/// range from 5 to about 6.3e9), keyed by the index only, so a smaller cell's IDs are a prefix of
/// a larger one's. Distinct.
fn machine_ids(q: &Quantiles, machines: u32) -> Vec<u64> {
    let mut seen = HashSet::with_capacity(machines as usize);
    (0..machines)
        .map(|i| {
            let mut rng = Rng::new(&[STREAM_MACHINE, u64::from(i)]);
            loop {
                let id = q.sample(rng.f64()).round().max(1.0) as u64;
                if seen.insert(id) {
                    return id;
                }
            }
        })
        .collect()
}

/// Where a task's life starts.
#[derive(Clone, Copy)]
enum Start {
    /// Present at t = 0.
    Initial,
    /// SUBMITted at this window time (µs).
    Submit(u64),
}

/// A run after its SUBMIT: SCHEDULEd (the row is written), ended while pending, or past the window.
#[derive(Clone, Copy)]
enum Entry {
    Scheduled { at: u64, machine: u32 },
    Ended { at: u64, kind: u8 },
    Gone,
}

struct Job {
    id: u64,
    size: u32,
    band: usize,
    priority: u8,
    class: u8,
    user: String,
    requests: [f64; 3],
    different: u8,
    /// ",user,class,priority,cpu,mem,disk,different-machines": the columns after event type.
    tail: Arc<str>,
    /// The same for t = 0 SUBMIT rows with "missing info" (empty requests), for some old jobs.
    missing_tail: Option<Arc<str>>,
}

/// One row of `task_events`, before formatting.
struct Event {
    /// The trace timestamp: 0 = before the window, else 600 s + window time, in µs.
    ts: u64,
    job: u64,
    index: u32,
    /// Place of the event in its task's life (orders same-timestamp events of a task).
    seq: u32,
    /// Dense machine index, `NO_MACHINE` for an empty machine column.
    machine: u32,
    kind: u8,
    missing_info: bool,
    tail: Arc<str>,
}

/// A task's events as they are drawn: times strictly increase; events past the window are dropped.
struct Life<'a> {
    job: &'a Job,
    index: u32,
    seq: u32,
    /// Trace timestamp of the last event (0 before any event after t = 0).
    last_ts: u64,
    tail: Arc<str>,
    sink: &'a mut Sink,
    rows: u32,
}

impl Life<'_> {
    /// Window time (µs) of the last event.
    fn last_w(&self) -> u64 {
        self.last_ts.saturating_sub(WINDOW_START_US)
    }

    fn push(&mut self, ts: u64, kind: u8, machine: u32, missing: Option<&Arc<str>>) {
        let tail = missing.unwrap_or(&self.tail).clone();
        let (job, index, seq) = (self.job.id, self.index, self.seq);
        self.sink.push(Event {
            ts,
            job,
            index,
            seq,
            machine,
            kind,
            missing_info: missing.is_some(),
            tail,
        });
        self.seq += 1;
        self.rows += 1;
    }

    /// An event at timestamp 0 (the task was there before the window opened).
    fn at_zero(&mut self, kind: u8, machine: u32, missing: Option<&Arc<str>>) {
        self.push(0, kind, machine, missing);
    }

    /// An event at window time `w` (µs), at least 1 µs after the task's previous event. False if
    /// it falls after the window end (then it and everything after it are left out).
    fn emit(&mut self, w: u64, kind: u8, machine: u32) -> bool {
        let ts = (WINDOW_START_US + w)
            .max(self.last_ts + 1)
            .max(WINDOW_START_US + 1);
        if ts - WINDOW_START_US >= self.sink.end_us {
            return false;
        }
        self.last_ts = ts;
        self.push(ts, kind, machine, None);
        true
    }

    /// An UPDATE: the task's requests scaled by the measured update ratios; later rows carry them.
    fn update(&mut self, kind: u8, w: u64, machine: u32, rng: &mut Rng, model: &Model) {
        let j = self.job;
        let cpu = j.requests[0] * model.cpu_ratio.sample(rng.f64());
        let mem = j.requests[1] * model.mem_ratio.sample(rng.f64());
        let tail = format!(
            ",{},{},{},{},{},{},{}",
            j.user,
            j.class,
            j.priority,
            format_g4(cpu.min(1.0)),
            format_g4(mem.min(1.0)),
            format_g4(j.requests[2]),
            j.different
        );
        self.tail = Arc::from(tail);
        self.emit(w, kind, machine);
    }
}

/// Events waiting for their hour to be settled.
struct Sink {
    end_us: u64,
    /// Per arrival block (hour of window time): its events.
    buckets: Vec<Vec<Event>>,
}

impl Sink {
    fn push(&mut self, e: Event) {
        let block = (e.ts.saturating_sub(WINDOW_START_US) / BLOCK_US) as usize;
        self.buckets[block].push(e);
    }
}

#[derive(Default)]
struct Generated {
    rows: u64,
    tasks: u64,
}

/// `Some(rows)` is a sorted slice of a part; `None` says the part is complete.
type Chunk = Option<Vec<Event>>;

/// Routes sorted events to the part they fall in. Parts are opened in order (each gets its own
/// channel, handed to the writers); a part is closed once time has moved past it.
struct Dispatcher {
    parts: u32,
    end_us: u64,
    part_tx: SyncSender<(u32, Receiver<Chunk>)>,
    open: Option<(u32, SyncSender<Chunk>)>,
    next: u32,
    rows: u64,
}

/// The writers hung up (one failed).
struct Disconnected;

impl Dispatcher {
    fn part_of(&self, ts: u64) -> u32 {
        let w = ts.saturating_sub(WINDOW_START_US);
        ((u128::from(w) * u128::from(self.parts) / u128::from(self.end_us)) as u32)
            .min(self.parts - 1)
    }

    /// Closes open parts before `part` and opens parts up to it (empty ones included).
    fn advance_to(&mut self, part: u32) -> std::result::Result<(), Disconnected> {
        while self.open.as_ref().is_none_or(|(p, _)| *p < part) {
            if let Some((_, tx)) = self.open.take() {
                tx.send(None).map_err(|_| Disconnected)?;
            }
            let (tx, rx) = sync_channel(4);
            self.part_tx
                .send((self.next, rx))
                .map_err(|_| Disconnected)?;
            self.open = Some((self.next, tx));
            self.next += 1;
        }
        Ok(())
    }

    fn send(&mut self, events: Vec<Event>) -> std::result::Result<(), Disconnected> {
        self.rows += events.len() as u64;
        let mut rest = events.into_iter().peekable();
        while let Some(first) = rest.peek() {
            let part = self.part_of(first.ts);
            self.advance_to(part)?;
            let mut chunk = Vec::new();
            while let Some(e) = rest.next_if(|e| self.part_of(e.ts) == part) {
                chunk.push(e);
            }
            let (_, tx) = self.open.as_ref().expect("a part is open");
            tx.send(Some(chunk)).map_err(|_| Disconnected)?;
        }
        Ok(())
    }

    fn finish(mut self) -> std::result::Result<(), Disconnected> {
        self.advance_to(self.parts - 1)?;
        let (_, tx) = self.open.take().expect("a part is open");
        tx.send(None).map_err(|_| Disconnected)
    }
}

/// Writes one part from its chunks (in time order) to a temp file, renamed when complete.
/// Returns the compressed size.
fn write_part(
    dir: &Path,
    part: u32,
    parts: u32,
    chunks: Receiver<Chunk>,
    machine_ids: &[u64],
) -> Result<u64> {
    let name = format!("part-{part:05}-of-{parts:05}.csv.gz");
    let path = dir.join(&name);
    let tmp = dir.join(format!(".{name}.tmp"));
    let result = (|| -> Result<u64> {
        let file = fs::File::create(&tmp).map_err(|e| file_err(&tmp, e))?;
        let mut gz = GzEncoder::new(
            BufWriter::with_capacity(1 << 20, file),
            Compression::new(GZIP_LEVEL),
        );
        let mut buf = Vec::with_capacity(1 << 20);
        let mut complete = false;
        for chunk in chunks {
            let Some(events) = chunk else {
                complete = true;
                break;
            };
            for e in &events {
                format_row(&mut buf, e, machine_ids);
                if buf.len() >= 1 << 20 {
                    gz.write_all(&buf).map_err(|e| file_err(&tmp, e))?;
                    buf.clear();
                }
            }
        }
        if !complete {
            return Err(TraceError::File {
                file: path.clone(),
                msg: "synth: generation stopped early".into(),
            });
        }
        gz.write_all(&buf).map_err(|e| file_err(&tmp, e))?;
        let mut inner = gz.finish().map_err(|e| file_err(&tmp, e))?;
        inner.flush().map_err(|e| file_err(&tmp, e))?;
        drop(inner);
        fs::rename(&tmp, &path).map_err(|e| file_err(&path, e))?;
        Ok(fs::metadata(&path).map_err(|e| file_err(&path, e))?.len())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// `timestamp,missing info,job ID,task index,machine ID,event type,user,scheduling class,
/// priority,CPU request,memory request,disk request,different-machines restriction`
fn format_row(buf: &mut Vec<u8>, e: &Event, machine_ids: &[u64]) {
    push_u64(buf, e.ts);
    buf.extend_from_slice(if e.missing_info { b",2," } else { b",," });
    push_u64(buf, e.job);
    buf.push(b',');
    push_u64(buf, u64::from(e.index));
    buf.push(b',');
    if e.machine != NO_MACHINE {
        push_u64(buf, machine_ids[e.machine as usize]);
    }
    buf.push(b',');
    push_u64(buf, u64::from(e.kind));
    buf.extend_from_slice(e.tail.as_bytes());
    buf.push(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g4_matches_the_trace_text() {
        for (x, s) in [
            (7.057e-05, "7.057e-05"),
            (0.0004244, "0.0004244"),
            (0.125, "0.125"),
            (0.0625, "0.0625"),
            (0.07446, "0.07446"),
            (1.0, "1"),
            (0.0, "0"),
            (0.5, "0.5"),
            (3.815e-05, "3.815e-05"),
            (0.00099995, "0.001"),
            (12346.0, "1.235e+04"),
        ] {
            assert_eq!(format_g4(x), s, "{x}");
        }
    }

    #[test]
    fn user_names_look_like_the_trace() {
        let u = user_name(3);
        assert_eq!(u.len(), 44);
        assert!(u.ends_with('=') && !u.ends_with("=="));
        assert_ne!(u, user_name(4));
    }

    #[test]
    fn quantiles_interpolate() {
        let q = Quantiles {
            p: vec![0.0, 0.5, 1.0],
            v: vec![0.0, 10.0, 110.0],
        };
        assert_eq!(q.sample(0.25), 5.0);
        assert_eq!(q.sample(0.75), 60.0);
        assert_eq!(q.sample(0.0), 0.0);
    }

    #[test]
    fn machine_ids_are_distinct_and_a_prefix() {
        let p: Params = serde_json::from_str(PARAMS_JSON).unwrap();
        let a = machine_ids(&p.machine_id, 2000);
        let b = machine_ids(&p.machine_id, 500);
        assert_eq!(&a[..500], &b[..]);
        assert_eq!(a.iter().collect::<HashSet<_>>().len(), 2000);
    }
}
