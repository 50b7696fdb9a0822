//! Per-task resource usage per 300 s measurement window: real `task_usage` rows when the user
//! has them, else a seeded model calibrated on real data (see docs/usage-model.md).
//!
//! CONTRACT:
//! - `WINDOW_S` = 300; window `w` covers seconds `[300w, 300w+300)` since the window start (the
//!   same clock as `Run::submit`; see [`window_of`]).
//! - `Usage { cpu, max_cpu, mem, mai }`: mean CPU rate, max CPU rate, assigned memory, MAI, all
//!   normalised like the trace (CPU and memory as fractions of the largest machine).
//! - `TaskUsage::load(root, parts)` reads `task_usage/part-*` (same error style as task_events).
//! - `UsageModel::calibrated(seed).usage(job, index, cpu_request, mem_request, w)` is a pure,
//!   cheap, deterministic function: no per-sample history is kept.
//! - `UsageSource::usage(&run, w)`: the real row for (job, index, w) if present, else the task's
//!   nearest earlier real window, else the model.
//!
//! The model (details and fitted numbers in docs/usage-model.md, parameters in
//! `usage_params.json`, produced by `scripts/calibrate_usage.py`):
//! - per task, four static variables (CPU usage/request, max/mean CPU, assigned memory/request,
//!   MAI) drawn through a Gaussian copula from empirical quantile tables, with a job-level share
//!   so that tasks of one job look alike;
//! - per window, CPU and memory are multiplied by `exp(sigma * z(w) - sigma^2 / 2)`, where `z(w)`
//!   is white noise plus value-noise "octaves" (hashed anchors every K windows, interpolated):
//!   stationary, unit variance, with the autocorrelation fitted on real 5-minute series, and
//!   computable for any window without history.
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::sync::{Arc, OnceLock};

use rayon::prelude::*;
use serde::Deserialize;

use crate::error::{Result, TraceError};
use crate::events::{mandatory_uint, optional_request};
use crate::Run;

pub const WINDOW_S: u32 = 300;

/// Trace timestamps count from 600 s before the window.
const WINDOW_START_US: u64 = 600_000_000;

/// The window holding second `t` (seconds since the window start).
pub fn window_of(t: u32) -> u32 {
    t / WINDOW_S
}

/// The window of a raw trace timestamp (µs): `(max(0, ts - 600 s) / 1e6) / 300`, saturating.
pub fn window_of_us(ts_us: u64) -> u32 {
    let seconds = ts_us.saturating_sub(WINDOW_START_US) / 1_000_000;
    u32::try_from(seconds / WINDOW_S as u64).unwrap_or(u32::MAX)
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Usage {
    pub cpu: f32,
    pub max_cpu: f32,
    pub mem: f32,
    pub mai: f32,
}

// ------------------------------------------------------------------------------------------------
// Parameters
// ------------------------------------------------------------------------------------------------

/// The calibrated parameters (`usage_params.json`). Tables are quantiles of the real data on a
/// uniform grid of standard-normal scores (`z_grid`): entry `i` is the quantile at probability
/// `Phi(min + i * step)`. Fields of the JSON not listed here (fit diagnostics) are ignored.
#[derive(Clone, Debug, Deserialize)]
pub struct UsageParams {
    pub format: u32,
    /// Input files, their SHA-256, the CC-BY attribution and the source note of the series.
    pub provenance: serde_json::Value,
    pub z_grid: ZGrid,
    /// Mean CPU rate / CPU request.
    pub cpu_ratio: Vec<f64>,
    /// Max CPU rate / mean CPU rate (>= 1).
    pub max_mean: Vec<f64>,
    /// Assigned memory / memory request.
    pub mem_ratio: Vec<f64>,
    /// Memory accesses per instruction.
    pub mai: Vec<f64>,
    /// Mean CPU rate, for tasks whose CPU request is zero or missing.
    pub cpu_abs: Vec<f64>,
    /// Assigned memory, for tasks whose memory request is zero or missing.
    pub mem_abs: Vec<f64>,
    pub copula: Copula,
    pub temporal: TemporalParams,
}

#[derive(Clone, Debug, Deserialize)]
pub struct ZGrid {
    pub min: f64,
    pub step: f64,
    pub n: usize,
}

/// Gaussian copula of the static variables.
#[derive(Clone, Debug, Deserialize)]
pub struct Copula {
    /// Must be `["cpu_ratio", "max_mean", "mem_ratio", "mai"]`.
    pub vars: Vec<String>,
    /// Correlation of the normal scores (4 x 4, positive definite).
    pub corr: Vec<Vec<f64>>,
    /// Share of each normal score's variance that is common to all tasks of a job.
    pub job_icc: Vec<f64>,
}

/// Window-to-window variation: `z(w) = sum_o sqrt(f_o) S_o(w) + sqrt(1 - sum_o f_o) F(w)`, where
/// `S_o` is value noise with anchors every `spacings[o]` windows and `F` white noise.
#[derive(Clone, Debug, Deserialize)]
pub struct TemporalParams {
    /// Anchor spacing of each octave, in windows (shared by CPU and memory).
    pub spacings: Vec<f64>,
    pub cpu: SeriesParams,
    pub mem: SeriesParams,
}

#[derive(Clone, Debug, Deserialize)]
pub struct SeriesParams {
    /// Per-task sd of log usage around the task's level (process sd), on the z grid.
    pub sigma: Vec<f64>,
    /// Share of the variance of `z(w)` of each octave; the rest is white noise.
    pub fractions: Vec<f64>,
    pub fit: TemporalFit,
}

/// What the temporal fit aimed at: statistics of 288-window series with their own mean removed.
#[derive(Clone, Debug, Deserialize)]
pub struct TemporalFit {
    /// Pooled sd of log deviations.
    pub target_sd: f64,
    /// Pooled autocorrelation at lags 0..=24.
    pub target_acf: Vec<f64>,
    /// The model's expected autocorrelation at the same lags.
    pub model_acf: Vec<f64>,
}

const STATIC_VARS: [&str; 4] = ["cpu_ratio", "max_mean", "mem_ratio", "mai"];
/// Most octaves a temporal model may have.
pub const MAX_OCTAVES: usize = 4;

impl UsageParams {
    /// The parameters shipped with the crate (`usage_params.json`).
    pub fn bundled() -> UsageParams {
        static BUNDLED: OnceLock<UsageParams> = OnceLock::new();
        BUNDLED
            .get_or_init(|| {
                UsageParams::from_json(include_str!("usage_params.json"))
                    .expect("bundled usage_params.json is valid (checked by the tests)")
            })
            .clone()
    }

    /// Parses and validates parameters in the format of `usage_params.json`.
    pub fn from_json(text: &str) -> Result<UsageParams> {
        let params: UsageParams = serde_json::from_str(text)
            .map_err(|e| TraceError::Usage(format!("bad usage parameters: {e}")))?;
        params.validate()?;
        Ok(params)
    }

    /// The CC-BY attribution line of the data the parameters were fitted on.
    pub fn attribution(&self) -> &str {
        self.provenance
            .get("attribution")
            .and_then(|v| v.as_str())
            .unwrap_or("")
    }

    /// Checks shapes and ranges; `UsageModel::with_params` calls it.
    pub fn validate(&self) -> Result<()> {
        let bad = |msg: String| Err(TraceError::Usage(format!("bad usage parameters: {msg}")));
        if self.format != 1 {
            return bad(format!("format {} (expected 1)", self.format));
        }
        let g = &self.z_grid;
        if g.n < 2 || g.n > MAX_GRID || !(g.step.is_finite() && g.step > 0.0 && g.min.is_finite()) {
            return bad(format!(
                "z_grid needs 2 <= n <= {MAX_GRID} and a finite step > 0"
            ));
        }
        let tables: [(&str, &[f64], f64); 8] = [
            ("cpu_ratio", &self.cpu_ratio, 0.0),
            ("max_mean", &self.max_mean, 1.0),
            ("mem_ratio", &self.mem_ratio, 0.0),
            ("mai", &self.mai, 0.0),
            ("cpu_abs", &self.cpu_abs, 0.0),
            ("mem_abs", &self.mem_abs, 0.0),
            ("temporal.cpu.sigma", &self.temporal.cpu.sigma, 0.0),
            ("temporal.mem.sigma", &self.temporal.mem.sigma, 0.0),
        ];
        for (name, table, low) in tables {
            if table.len() != g.n {
                return bad(format!(
                    "{name} has {} entries, z_grid.n is {}",
                    table.len(),
                    g.n
                ));
            }
            if !table.iter().all(|x| x.is_finite() && *x >= low) {
                return bad(format!("{name} must hold finite numbers >= {low}"));
            }
            if table.windows(2).any(|w| w[1] < w[0]) {
                return bad(format!("{name} must be non-decreasing"));
            }
        }
        let c = &self.copula;
        if c.vars.iter().map(String::as_str).ne(STATIC_VARS) {
            return bad(format!("copula.vars must be {STATIC_VARS:?}"));
        }
        if c.corr.len() != 4 || c.corr.iter().any(|row| row.len() != 4) {
            return bad("copula.corr must be 4 x 4".into());
        }
        for i in 0..4 {
            for j in 0..4 {
                let (a, b) = (c.corr[i][j], c.corr[j][i]);
                if !a.is_finite() || (a - b).abs() > 1e-9 || (i == j && (a - 1.0).abs() > 1e-9) {
                    return bad("copula.corr must be symmetric with a unit diagonal".into());
                }
            }
        }
        if cholesky4(&c.corr).is_none() {
            return bad("copula.corr is not positive definite".into());
        }
        if c.job_icc.len() != 4 || !c.job_icc.iter().all(|x| (0.0..=1.0).contains(x)) {
            return bad("copula.job_icc must hold 4 numbers in [0, 1]".into());
        }
        let t = &self.temporal;
        if t.spacings.len() > MAX_OCTAVES {
            return bad(format!("temporal has more than {MAX_OCTAVES} octaves"));
        }
        if !t.spacings.iter().all(|k| k.is_finite() && *k >= 1.0) {
            return bad("temporal.spacings must be >= 1".into());
        }
        for (name, r) in [("cpu", &t.cpu), ("mem", &t.mem)] {
            if r.fractions.len() != t.spacings.len() {
                return bad(format!(
                    "temporal.{name}.fractions needs one entry per spacing"
                ));
            }
            if !r.fractions.iter().all(|a| (0.0..=1.0).contains(a)) {
                return bad(format!("temporal.{name}.fractions must be in [0, 1]"));
            }
            if r.fractions.iter().sum::<f64>() > 1.0 + 1e-9 {
                return bad(format!("temporal.{name}.fractions sum above 1"));
            }
        }
        Ok(())
    }
}

/// Lower-triangular Cholesky factor of a 4 x 4 symmetric matrix; `None` if not positive definite.
fn cholesky4(a: &[Vec<f64>]) -> Option<[[f64; 4]; 4]> {
    let mut l = [[0.0; 4]; 4];
    for i in 0..4 {
        for j in 0..=i {
            let s: f64 = (0..j).map(|k| l[i][k] * l[j][k]).sum();
            if i == j {
                let d = a[i][i] - s;
                if d.is_nan() || d <= 1e-12 {
                    return None;
                }
                l[i][j] = d.sqrt();
            } else {
                l[i][j] = (a[i][j] - s) / l[j][j];
            }
        }
    }
    Some(l)
}

// ------------------------------------------------------------------------------------------------
// Counter-based random numbers
// ------------------------------------------------------------------------------------------------

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;
const STREAM_MUL: u64 = 0x632B_E59B_D9B4_E019;

#[inline(always)]
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(GOLDEN);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The `counter`-th 64-bit draw of stream `stream` of `key`: a wyrand-style mix (one 64 x 64 ->
/// 128-bit multiply) of a Weyl sequence, which is fast and passes the usual statistical tests.
#[inline(always)]
fn draw(key: u64, stream: u64, counter: u64) -> u64 {
    let x = key
        .wrapping_add(stream.wrapping_mul(STREAM_MUL))
        .wrapping_add(counter.wrapping_mul(GOLDEN))
        .wrapping_add(0xA076_1D64_78BD_642F);
    let t = (x as u128).wrapping_mul((x ^ 0xE703_7ED1_A0B4_28DB) as u128);
    (t >> 64) as u64 ^ t as u64
}

/// Levels of the tabulated standard normal.
const NORMAL_LEVELS: usize = 1024;

/// A standard normal by table lookup: slot `s` of a draw (bits `10s..10s+10`, so six per draw)
/// picks one of 1,024 equiprobable levels, the normal quantiles at `(k + 0.5) / 1024` rescaled to
/// unit variance (range +-3.3). Exact quantiles, one load per normal.
#[derive(Clone, Copy)]
struct Normals(&'static [f64; NORMAL_LEVELS]);

impl std::fmt::Debug for Normals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Normals({NORMAL_LEVELS} levels)")
    }
}

impl Normals {
    fn get_table() -> Normals {
        static TABLE: OnceLock<[f64; NORMAL_LEVELS]> = OnceLock::new();
        Normals(TABLE.get_or_init(|| {
            let mut t = [0.0; NORMAL_LEVELS];
            for (k, z) in t.iter_mut().enumerate() {
                *z = inv_normal_cdf((k as f64 + 0.5) / NORMAL_LEVELS as f64);
            }
            let sd = (t.iter().map(|z| z * z).sum::<f64>() / NORMAL_LEVELS as f64).sqrt();
            t.map(|z| z / sd)
        }))
    }

    #[inline(always)]
    fn at(self, h: u64, slot: u32) -> f64 {
        self.0[((h >> (10 * slot)) & (NORMAL_LEVELS as u64 - 1)) as usize]
    }
}

/// Inverse of the standard normal CDF, 0 < p < 1 (Acklam's rational approximation, relative
/// error below 1.2e-9).
fn inv_normal_cdf(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    const LOW: f64 = 0.024_25;
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < LOW {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - LOW {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

// Streams. Static draws use counter 0; the per-window streams use the window or anchor index.
const S_JOB_KEY: u64 = 8; // counter = job ID
const S_TASK_KEY: u64 = 9; // counter = task index
const S_JOB: u64 = 0; // slots 0..4: job-level copula normals
const S_TASK: u64 = 1; // slots 0..4: task-level copula normals; 4, 5: sigma (cpu, mem)
const S_WHITE: u64 = 16; // counter = window; slots 0, 1: (cpu, mem)
const S_ANCHOR: u64 = 24; // + octave; counter = anchor index; slots 0, 1: (cpu, mem)

// ------------------------------------------------------------------------------------------------
// The model
// ------------------------------------------------------------------------------------------------

/// Most points a quantile table may have.
pub const MAX_GRID: usize = 32;

/// A quantile table on the z grid, padded to a fixed size so lookups need no bounds checks.
#[derive(Clone, Debug)]
struct Table {
    values: [f64; MAX_GRID + 1],
    /// `n - 1` as f64: the last grid position.
    last: f64,
}

impl Table {
    fn new(values: &[f64]) -> Table {
        let mut padded = [values[values.len() - 1]; MAX_GRID + 1];
        padded[..values.len()].copy_from_slice(values);
        Table {
            values: padded,
            last: (values.len() - 1) as f64,
        }
    }

    /// Linear interpolation at grid position `pos` (clamped to the table).
    #[inline(always)]
    fn at(&self, pos: f64) -> f64 {
        // max/min (not clamp): a NaN position reads as 0 instead of propagating.
        let p = pos.max(0.0).min(self.last);
        // p <= last < MAX_GRID, so the mask changes nothing but lets the compiler drop checks.
        let i = (p as i64 as usize) & (MAX_GRID - 1);
        let f = p - i as i64 as f64;
        let (a, b) = (self.values[i], self.values[i + 1]);
        a + f * (b - a)
    }
}

/// The temporal noise of CPU and memory: shared anchors and phases, per-resource amplitudes.
#[derive(Clone, Debug)]
struct TemporalModel {
    /// sqrt of the white-noise share, (cpu, mem).
    white: (f64, f64),
    /// Per octave: spacing, 1 / spacing, sqrt of the shares (cpu, mem).
    octaves: Vec<(f64, f64, f64, f64)>,
}

impl TemporalModel {
    fn new(p: &TemporalParams) -> TemporalModel {
        let white = |f: &[f64]| (1.0 - f.iter().sum::<f64>()).max(0.0).sqrt();
        TemporalModel {
            white: (white(&p.cpu.fractions), white(&p.mem.fractions)),
            octaves: (0..p.spacings.len())
                .map(|o| {
                    let k = p.spacings[o];
                    (
                        k,
                        1.0 / k,
                        p.cpu.fractions[o].sqrt(),
                        p.mem.fractions[o].sqrt(),
                    )
                })
                .collect(),
        }
    }

    /// The unit-variance stationary noises `(z_cpu(w), z_mem(w))` of one task (`key`). The two
    /// use different bits of the same draws, so they are independent.
    #[inline(always)]
    fn z(&self, normals: Normals, key: u64, window: u32) -> (f64, f64) {
        let h = draw(key, S_WHITE, window as u64);
        let (mut zc, mut zm) = (
            self.white.0 * normals.at(h, 0),
            self.white.1 * normals.at(h, 1),
        );
        for (o, &(spacing, inv, amp_c, amp_m)) in self.octaves.iter().enumerate() {
            // The phase: 16 bits of the task key per octave.
            let phase = ((key >> (16 * o)) & 0xFFFF) as i64 as f64 * (1.0 / 65536.0) * spacing;
            // x >= 0, so truncation is floor (and avoids a libm call on baseline x86-64).
            let x = (window as f64 + phase) * inv;
            let i = x as i64;
            let t = x - i as f64;
            let ha = draw(key, S_ANCHOR + o as u64, i as u64);
            let hb = draw(key, S_ANCHOR + o as u64, i as u64 + 1);
            let (ac, am, bc, bm) = (
                normals.at(ha, 0),
                normals.at(ha, 1),
                normals.at(hb, 0),
                normals.at(hb, 1),
            );
            // Linear interpolation rescaled to unit variance.
            let norm = 1.0 / ((1.0 - t) * (1.0 - t) + t * t).sqrt();
            zc += amp_c * norm * (ac + t * (bc - ac));
            zm += amp_m * norm * (am + t * (bm - am));
        }
        (zc, zm)
    }
}

/// `e^x` for |x| < 700 to ~1e-7 relative error, without a libm call: `2^n * 2^f`, `n` rounded
/// with the 1.5 * 2^52 trick, `2^f` (|f| <= 1/2) by a degree-7 Taylor polynomial.
#[inline(always)]
fn fast_exp(x: f64) -> f64 {
    const ROUND: f64 = 6_755_399_441_055_744.0; // 1.5 * 2^52
    let y = x.clamp(-700.0, 700.0) * std::f64::consts::LOG2_E;
    let n = (y + ROUND) - ROUND;
    let f = (y - n) * std::f64::consts::LN_2;
    let p = 1.0
        + f * (1.0
            + f * (1.0 / 2.0
                + f * (1.0 / 6.0
                    + f * (1.0 / 24.0
                        + f * (1.0 / 120.0 + f * (1.0 / 720.0 + f * (1.0 / 5040.0)))))));
    p * f64::from_bits(((n as i64 + 1023) as u64) << 52)
}

/// Per-task draws that do not depend on the window.
#[derive(Clone, Copy, Debug)]
struct TaskDraw {
    key: u64,
    /// Copula normal scores of (cpu_ratio, max_mean, mem_ratio, mai).
    y: [f64; 4],
    sigma_cpu: f64,
    sigma_mem: f64,
}

/// The seeded usage model. Cheap to clone; `usage` takes `&self` and keeps no state.
#[derive(Clone, Debug)]
pub struct UsageModel {
    params: UsageParams,
    seed_key: u64,
    seed: u64,
    z_min: f64,
    inv_step: f64,
    cpu_ratio: Table,
    max_mean: Table,
    mem_ratio: Table,
    mai: Table,
    cpu_abs: Table,
    mem_abs: Table,
    chol: [[f64; 4]; 4],
    job_amp: [f64; 4],
    task_amp: [f64; 4],
    sigma_cpu: Table,
    sigma_mem: Table,
    temporal: TemporalModel,
    normals: Normals,
}

impl UsageModel {
    /// The model with the bundled, calibrated parameters.
    pub fn calibrated(seed: u64) -> UsageModel {
        UsageModel::with_params(UsageParams::bundled(), seed).expect("bundled parameters are valid")
    }

    /// The model with custom parameters (validated).
    pub fn with_params(params: UsageParams, seed: u64) -> Result<UsageModel> {
        params.validate()?;
        let chol = cholesky4(&params.copula.corr).expect("validated");
        let icc = &params.copula.job_icc;
        let table = |t: &Vec<f64>| Table::new(t);
        Ok(UsageModel {
            seed_key: splitmix64(seed ^ 0x0005_EEDC_0105_C4ED),
            seed,
            z_min: params.z_grid.min,
            inv_step: 1.0 / params.z_grid.step,
            cpu_ratio: table(&params.cpu_ratio),
            max_mean: table(&params.max_mean),
            mem_ratio: table(&params.mem_ratio),
            mai: table(&params.mai),
            cpu_abs: table(&params.cpu_abs),
            mem_abs: table(&params.mem_abs),
            chol,
            job_amp: [0, 1, 2, 3].map(|i| icc[i].sqrt()),
            task_amp: [0, 1, 2, 3].map(|i| (1.0 - icc[i]).sqrt()),
            sigma_cpu: Table::new(&params.temporal.cpu.sigma),
            sigma_mem: Table::new(&params.temporal.mem.sigma),
            temporal: TemporalModel::new(&params.temporal),
            normals: Normals::get_table(),
            params,
        })
    }

    pub fn params(&self) -> &UsageParams {
        &self.params
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    #[inline(always)]
    fn pos(&self, z: f64) -> f64 {
        (z - self.z_min) * self.inv_step
    }

    #[inline(always)]
    fn task_draw(&self, job: u64, index: u32) -> TaskDraw {
        let job_key = draw(self.seed_key, S_JOB_KEY, job);
        let key = draw(job_key, S_TASK_KEY, index as u64);
        let (hj, ht) = (draw(job_key, S_JOB, 0), draw(key, S_TASK, 0));
        let n = self.normals;
        let ej = [n.at(hj, 0), n.at(hj, 1), n.at(hj, 2), n.at(hj, 3)];
        let et = [n.at(ht, 0), n.at(ht, 1), n.at(ht, 2), n.at(ht, 3)];
        let l = &self.chol;
        let mut y = [0.0; 4];
        for i in 0..4 {
            let (mut nj, mut nt) = (0.0, 0.0);
            for k in 0..=i {
                nj += l[i][k] * ej[k];
                nt += l[i][k] * et[k];
            }
            y[i] = self.job_amp[i] * nj + self.task_amp[i] * nt;
        }
        TaskDraw {
            key,
            y,
            sigma_cpu: self.sigma_cpu.at(self.pos(n.at(ht, 4))),
            sigma_mem: self.sigma_mem.at(self.pos(n.at(ht, 5))),
        }
    }

    /// Usage of task (job, index) in window `window` (absolute, since the trace window start).
    ///
    /// Pure in (seed, job, index, requests, window); no allocation. A CPU (memory) request that is
    /// zero, negative or NaN makes the task draw its absolute level from `cpu_abs` (`mem_abs`)
    /// instead of `request x ratio`. Results are clamped: `0 <= cpu <= max_cpu <= 1`, `mem <= 1`.
    pub fn usage(
        &self,
        job: u64,
        index: u32,
        cpu_request: f32,
        mem_request: f32,
        window: u32,
    ) -> Usage {
        let d = self.task_draw(job, index);
        let cpu_level = if cpu_request > 0.0 && cpu_request.is_finite() {
            self.cpu_ratio.at(self.pos(d.y[0])) * cpu_request as f64
        } else {
            self.cpu_abs.at(self.pos(d.y[0]))
        };
        let mem_level = if mem_request > 0.0 && mem_request.is_finite() {
            self.mem_ratio.at(self.pos(d.y[2])) * mem_request as f64
        } else {
            self.mem_abs.at(self.pos(d.y[2]))
        };
        let max_mean = self.max_mean.at(self.pos(d.y[1]));
        let mai = self.mai.at(self.pos(d.y[3]));

        let sc = d.sigma_cpu;
        let (zc, zm) = self.temporal.z(self.normals, d.key, window);
        let fc = fast_exp(sc * zc - 0.5 * sc * sc);
        let sm = d.sigma_mem;
        let fm = fast_exp(sm * zm - 0.5 * sm * sm);

        let cpu = (cpu_level * fc).clamp(0.0, 1.0);
        let max_cpu = (cpu * max_mean).clamp(cpu, 1.0);
        Usage {
            cpu: cpu as f32,
            max_cpu: max_cpu as f32,
            mem: (mem_level * fm).clamp(0.0, 1.0) as f32,
            mai: mai as f32,
        }
    }
}

// ------------------------------------------------------------------------------------------------
// Real task_usage rows
// ------------------------------------------------------------------------------------------------

/// Number of columns of a `task_usage` row.
pub const COLUMNS: usize = 20;

/// Schema names of the 20 columns, as used in error messages.
pub const FIELD_NAMES: [&str; COLUMNS] = [
    "start time",
    "end time",
    "job ID",
    "task index",
    "machine ID",
    "mean CPU rate",
    "canonical memory usage",
    "assigned memory usage",
    "unmapped page cache",
    "total page cache",
    "maximum memory usage",
    "mean disk I/O time",
    "mean local disk space",
    "maximum CPU rate",
    "maximum disk I/O time",
    "cycles per instruction",
    "memory accesses per instruction",
    "sample portion",
    "aggregation type",
    "sampled CPU usage",
];

/// Real per-window usage from `task_usage` parts, indexed by task.
///
/// Columns read (1-based): 1 start time, 2 end time, 3 job ID, 4 task index, 6 mean CPU rate,
/// 8 assigned memory, 14 max CPU rate, 17 MAI. The other 12 columns are not parsed. Each row goes
/// to the window of its start time ([`window_of_us`]). Rows of one task that fall in the same
/// window (a task that moved or restarted mid-window) are merged: duration-weighted means of CPU,
/// memory and MAI, the max of max CPU.
#[derive(Clone, Debug, Default)]
pub struct TaskUsage {
    /// (job, index) -> (offset, len) into `windows`.
    tasks: HashMap<(u64, u32), (u32, u32)>,
    /// Per task, sorted by window, one entry per window.
    windows: Vec<(u32, Usage)>,
    rows_read: u64,
    parts: Vec<u32>,
}

/// One parsed row before merging.
struct RawRow {
    job: u64,
    index: u32,
    window: u32,
    duration_us: u64,
    usage: Usage,
}

impl TaskUsage {
    /// Reads `root/task_usage/part-NNNNN-of-MMMMM[.tag].csv[.gz]` (file naming as for task_events,
    /// see `crate::parts::list_parts`), the parts numbered in `parts` (all for `None`).
    ///
    /// `Ok(None)` if `root/task_usage/` does not exist or none of the requested parts is there
    /// (requested numbers without a file are skipped: a user may hold fewer usage parts than event
    /// parts). Errors: an unreadable directory, two files for one part, an unreadable or corrupt
    /// file, an empty part (`TraceError::File`); a malformed row (`TraceError::Parse` naming the
    /// file, 1-based line and column, and the field). Mandatory fields: start, end, job ID, task
    /// index (unsigned integers). Resource fields: a number >= 0 (e-notation allowed); an empty
    /// field means missing and reads as 0 (e.g. the MAI of idle tasks).
    pub fn load(root: &Path, parts: Option<&[u32]>) -> Result<Option<TaskUsage>> {
        let dir = root.join("task_usage");
        if !dir.is_dir() {
            return Ok(None);
        }
        let mut files = crate::parts::list_parts(&dir)?;
        if let Some(numbers) = parts {
            files.retain(|p| numbers.contains(&p.number));
        }
        if files.is_empty() {
            return Ok(None);
        }
        let parsed: Vec<Vec<RawRow>> = files
            .par_iter()
            .map(|p| read_usage_part(&p.path, p.gzip))
            .collect::<Result<_>>()?;
        let part_numbers = files.iter().map(|p| p.number).collect();
        Ok(Some(TaskUsage::from_raw(
            parsed.into_iter().flatten().collect(),
            part_numbers,
        )))
    }

    /// Builds a table from `(job, index, window, usage)` rows (tests, synthetic inputs). Rows of
    /// one (job, index, window) are merged as in [`TaskUsage::load`], with equal weights.
    pub fn from_rows(rows: impl IntoIterator<Item = (u64, u32, u32, Usage)>) -> TaskUsage {
        let rows = rows
            .into_iter()
            .map(|(job, index, window, usage)| RawRow {
                job,
                index,
                window,
                duration_us: WINDOW_S as u64 * 1_000_000,
                usage,
            })
            .collect();
        TaskUsage::from_raw(rows, Vec::new())
    }

    fn from_raw(mut rows: Vec<RawRow>, parts: Vec<u32>) -> TaskUsage {
        let rows_read = rows.len() as u64;
        rows.sort_by_key(|r| (r.job, r.index, r.window));
        let mut out = TaskUsage {
            rows_read,
            parts,
            ..TaskUsage::default()
        };
        let mut i = 0;
        while i < rows.len() {
            let (job, index) = (rows[i].job, rows[i].index);
            let offset = out.windows.len() as u32;
            while i < rows.len() && (rows[i].job, rows[i].index) == (job, index) {
                let window = rows[i].window;
                let mut j = i;
                while j < rows.len()
                    && (rows[j].job, rows[j].index, rows[j].window) == (job, index, window)
                {
                    j += 1;
                }
                out.windows.push((window, merge(&rows[i..j])));
                i = j;
            }
            out.tasks
                .insert((job, index), (offset, out.windows.len() as u32 - offset));
        }
        out
    }

    /// All real windows of a task, sorted by window (empty if none).
    pub fn series(&self, job: u64, index: u32) -> &[(u32, Usage)] {
        match self.tasks.get(&(job, index)) {
            Some(&(offset, len)) => &self.windows[offset as usize..(offset + len) as usize],
            None => &[],
        }
    }

    /// The real usage of (job, index) in `window`, if a row started in that window.
    pub fn get(&self, job: u64, index: u32, window: u32) -> Option<Usage> {
        let s = self.series(job, index);
        s.binary_search_by_key(&window, |e| e.0)
            .ok()
            .map(|i| s[i].1)
    }

    /// The latest real window of (job, index) at or before `window`, with its usage.
    pub fn at_or_before(&self, job: u64, index: u32, window: u32) -> Option<(u32, Usage)> {
        let s = self.series(job, index);
        let after = s.partition_point(|e| e.0 <= window);
        after.checked_sub(1).map(|i| s[i])
    }

    pub fn has_task(&self, job: u64, index: u32) -> bool {
        self.tasks.contains_key(&(job, index))
    }

    /// Number of distinct (job, index, window) entries.
    pub fn len(&self) -> usize {
        self.windows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.windows.is_empty()
    }

    /// Number of distinct tasks.
    pub fn tasks(&self) -> usize {
        self.tasks.len()
    }

    /// CSV rows read (before merging rows of one window).
    pub fn rows_read(&self) -> u64 {
        self.rows_read
    }

    /// Part numbers loaded, ascending.
    pub fn parts(&self) -> &[u32] {
        &self.parts
    }
}

fn merge(rows: &[RawRow]) -> Usage {
    if let [only] = rows {
        return only.usage;
    }
    let total: f64 = rows.iter().map(|r| r.duration_us.max(1) as f64).sum();
    let mean = |f: fn(&Usage) -> f32| {
        (rows
            .iter()
            .map(|r| f(&r.usage) as f64 * r.duration_us.max(1) as f64)
            .sum::<f64>()
            / total) as f32
    };
    Usage {
        cpu: mean(|u| u.cpu),
        max_cpu: rows.iter().map(|r| r.usage.max_cpu).fold(0.0, f32::max),
        mem: mean(|u| u.mem),
        mai: mean(|u| u.mai),
    }
}

fn read_usage_part(path: &Path, gzip: bool) -> Result<Vec<RawRow>> {
    let file_error = |msg: String| TraceError::File {
        file: path.to_path_buf(),
        msg,
    };
    let file = std::fs::File::open(path).map_err(|e| file_error(format!("cannot open: {e}")))?;
    let reader: Box<dyn Read> = if gzip {
        Box::new(flate2::read::MultiGzDecoder::new(BufReader::with_capacity(
            1 << 16,
            file,
        )))
    } else {
        Box::new(file)
    };
    let mut reader = BufReader::with_capacity(1 << 16, reader);
    let mut rows = Vec::new();
    let mut line = Vec::with_capacity(256);
    let mut line_no: u64 = 0;
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line).map_err(|e| {
            file_error(if !gzip {
                format!("cannot read: {e}")
            } else if e.kind() == std::io::ErrorKind::UnexpectedEof {
                "truncated gzip stream".to_string()
            } else {
                format!("corrupt gzip stream: {e}")
            })
        })?;
        if n == 0 {
            break;
        }
        line_no += 1;
        let mut text = line.as_slice();
        if let [rest @ .., b'\n'] = text {
            text = rest;
        }
        if let [rest @ .., b'\r'] = text {
            text = rest;
        }
        let row = parse_usage_line(text).map_err(|(column, msg)| TraceError::Parse {
            file: path.to_path_buf(),
            line: line_no,
            column: column + 1,
            field: FIELD_NAMES.get(column).copied().unwrap_or("end of row"),
            msg,
        })?;
        rows.push(row);
    }
    if rows.is_empty() {
        return Err(file_error("empty part (no rows)".into()));
    }
    Ok(rows)
}

/// Parses one row; errors are (0-based column, message).
fn parse_usage_line(line: &[u8]) -> std::result::Result<RawRow, (usize, String)> {
    let mut starts = [0usize; COLUMNS + 1];
    let mut commas = 0;
    for at in memchr::memchr_iter(b',', line) {
        commas += 1;
        if commas >= COLUMNS {
            let found = memchr::memchr_iter(b',', line).count() + 1;
            return Err((
                COLUMNS,
                format!("expected {COLUMNS} columns, found {found}"),
            ));
        }
        starts[commas] = at + 1;
    }
    if commas != COLUMNS - 1 {
        return Err((
            commas + 1,
            format!("expected {COLUMNS} columns, found {}", commas + 1),
        ));
    }
    starts[COLUMNS] = line.len() + 1;
    let field = |i: usize| &line[starts[i]..starts[i + 1] - 1];

    let start = mandatory_uint(field(0), 0, u64::MAX)?;
    let end = mandatory_uint(field(1), 1, u64::MAX)?;
    let job = mandatory_uint(field(2), 2, u64::MAX)?;
    let index = mandatory_uint(field(3), 3, u32::MAX as u64)? as u32;
    let usage = Usage {
        cpu: resource(field(5), 5)?,
        mem: resource(field(7), 7)?,
        max_cpu: resource(field(13), 13)?,
        mai: resource(field(16), 16)?,
    };
    Ok(RawRow {
        job,
        index,
        window: window_of_us(start),
        duration_us: end.saturating_sub(start),
        usage,
    })
}

/// A usage value: a finite number >= 0 (decimal or e-notation); 0 for an empty field.
fn resource(text: &[u8], column: usize) -> std::result::Result<f32, (usize, String)> {
    let value = optional_request(text, column)?;
    Ok(if value.is_nan() { 0.0 } else { value })
}

// ------------------------------------------------------------------------------------------------
// Real rows first, the model otherwise
// ------------------------------------------------------------------------------------------------

/// Where a usage value came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UsageOrigin {
    /// A real row of this window.
    Real,
    /// The task's real row of the nearest earlier window (carried forward).
    RealEarlier,
    /// The model.
    Model,
}

/// Real `task_usage` rows when present, else the model.
#[derive(Clone, Debug)]
pub struct UsageSource {
    /// Shared, so several replays (threads, seeds) use one copy of a large table.
    pub real: Option<Arc<TaskUsage>>,
    pub model: UsageModel,
}

impl UsageSource {
    pub fn new(real: Option<TaskUsage>, model: UsageModel) -> UsageSource {
        UsageSource {
            real: real.map(Arc::new),
            model,
        }
    }

    /// Usage of `run` in window `window` (absolute): see [`UsageSource::lookup`].
    pub fn usage(&self, run: &Run, window: u32) -> Usage {
        self.lookup(run, window).0
    }

    /// Usage of `run` in `window` and where it came from: the real row of (job, index, window);
    /// else the task's real row of the nearest earlier window (a task keeps its last measured
    /// usage when the loaded task_usage parts end before the run does; this also carries a real
    /// row into a later run of the same task); else the model with the run's requests (also
    /// before the task's first real window).
    pub fn lookup(&self, run: &Run, window: u32) -> (Usage, UsageOrigin) {
        if let Some((w, u)) = self
            .real
            .as_ref()
            .and_then(|real| real.at_or_before(run.job, run.index, window))
        {
            let origin = if w == window {
                UsageOrigin::Real
            } else {
                UsageOrigin::RealEarlier
            };
            return (u, origin);
        }
        let u = self
            .model
            .usage(run.job, run.index, run.cpu_request, run.mem_request, window);
        (u, UsageOrigin::Model)
    }

    /// True if real rows exist for the task (any window, any run).
    pub fn has_real(&self, job: u64, index: u32) -> bool {
        self.real.as_ref().is_some_and(|r| r.has_task(job, index))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::path::PathBuf;

    const HEAD676: &str =
        "google-clusterdata-2011-2-head/task_usage/part-00000-of-00500.head676.csv";

    /// The shared real data (`COLOSCHED_SHARED_DATA`, else ../../../shared/data from the crate,
    /// where a clone beside ../shared finds it). Missing data fails the test, saying where it
    /// looked: a test of the real rows never passes without them.
    fn shared_data() -> PathBuf {
        let root = std::env::var_os("COLOSCHED_SHARED_DATA")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"));
        assert!(
            root.join(HEAD676).is_file(),
            "no {HEAD676} under {} (clone beside ../shared, or set COLOSCHED_SHARED_DATA)",
            root.display()
        );
        root
    }

    /// A temporary trace root whose task_usage/ holds `name` with `content`.
    fn root_with(name: &str, content: &[u8]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("task_usage")).unwrap();
        std::fs::write(dir.path().join("task_usage").join(name), content).unwrap();
        dir
    }

    /// A trace root holding the 676 real task_usage rows as part 0.
    fn head_root() -> tempfile::TempDir {
        let data = std::fs::read(shared_data().join(HEAD676)).unwrap();
        root_with("part-00000-of-00500.csv", &data)
    }

    fn run(job: u64, index: u32, submit: u32, end: u32) -> Run {
        Run {
            job,
            index,
            submit,
            schedule: submit,
            end,
            end_kind: crate::END_NONE,
            priority: 9,
            cpu_request: 0.125,
            mem_request: 0.07446,
            machine: 0,
            submitted_in_trace: true,
        }
    }

    fn parse_error(content: &str) -> (PathBuf, u64, usize, &'static str, String) {
        let root = root_with("part-00003-of-00500.csv", content.as_bytes());
        match TaskUsage::load(root.path(), None) {
            Err(TraceError::Parse {
                file,
                line,
                column,
                field,
                msg,
            }) => {
                assert_eq!(file, root.path().join("task_usage/part-00003-of-00500.csv"));
                (file, line, column, field, msg)
            }
            other => panic!("expected a parse error, got {other:?}"),
        }
    }

    const ROW1: &str = "600000000,900000000,3418309,0,4155527081,0.001562,0.06787,0.07568,0.001156,\
                        0.001503,0.06787,2.861e-06,0.0001869,0.03967,0.0003567,2.445,0.007243,0,1,0";

    // ---- parameters ----

    #[test]
    fn usage_bundled_params_are_valid_and_attributed() {
        let p = UsageParams::bundled();
        p.validate().unwrap();
        assert!(p.attribution().contains("J. Wilkes and C. Reiss"));
        assert!(p.attribution().contains("CC-BY 4.0"));
        assert_eq!(p.z_grid.n, p.cpu_ratio.len());
        assert_eq!(p.temporal.cpu.fit.target_acf.len(), 25);
    }

    #[test]
    fn usage_params_validation_rejects_bad_tables() {
        let text = include_str!("usage_params.json");
        let mut v: serde_json::Value = serde_json::from_str(text).unwrap();
        v["cpu_ratio"][3] = serde_json::json!(-1.0);
        assert!(matches!(
            UsageParams::from_json(&v.to_string()),
            Err(TraceError::Usage(_))
        ));
        let mut v: serde_json::Value = serde_json::from_str(text).unwrap();
        v["copula"]["corr"][0][1] = serde_json::json!(0.99);
        v["copula"]["corr"][1][0] = serde_json::json!(0.99);
        v["copula"]["corr"][0][2] = serde_json::json!(0.99);
        v["copula"]["corr"][2][0] = serde_json::json!(0.99);
        v["copula"]["corr"][1][2] = serde_json::json!(-0.99);
        v["copula"]["corr"][2][1] = serde_json::json!(-0.99);
        assert!(UsageParams::from_json(&v.to_string()).is_err());
        assert!(UsageParams::from_json("{}").is_err());
    }

    // ---- model ----

    #[test]
    fn usage_fast_exp_is_accurate() {
        for i in -4000..=4000 {
            let x = i as f64 * 0.01;
            let rel = fast_exp(x) / x.exp() - 1.0;
            assert!(rel.abs() < 2e-7, "exp({x}): relative error {rel}");
        }
        assert!(fast_exp(1e6).is_finite() && fast_exp(-1e6) >= 0.0);
    }

    #[test]
    fn usage_model_is_deterministic_and_seeded() {
        let a = UsageModel::calibrated(7);
        let b = UsageModel::calibrated(7);
        let c = UsageModel::calibrated(8);
        let mut differ = 0;
        for job in 0..200u64 {
            for w in [0, 1, 17, 5000] {
                let x = a.usage(job, 3, 0.0625, 0.03, w);
                assert_eq!(x, b.usage(job, 3, 0.0625, 0.03, w));
                assert_eq!(x, a.usage(job, 3, 0.0625, 0.03, w));
                if x != c.usage(job, 3, 0.0625, 0.03, w) {
                    differ += 1;
                }
            }
        }
        assert!(
            differ > 780,
            "a different seed changes almost every value ({differ}/800)"
        );
        // Different tasks and windows differ too.
        assert_ne!(a.usage(1, 0, 0.1, 0.1, 0), a.usage(1, 1, 0.1, 0.1, 0));
        assert_ne!(
            a.usage(1, 0, 0.1, 0.1, 0).cpu,
            a.usage(1, 0, 0.1, 0.1, 1).cpu
        );
    }

    #[test]
    fn usage_model_respects_bounds_and_zero_requests() {
        let m = UsageModel::calibrated(1);
        let mut zero_cpu = Vec::new();
        for job in 0..5000u64 {
            for (req, w) in [(1.0, 0), (0.5, 3), (0.0, 9), (f32::NAN, 2), (-1.0, 1)] {
                let u = m.usage(job, 0, req, req, w);
                assert!(u.cpu >= 0.0 && u.cpu <= 1.0, "{u:?}");
                assert!(u.max_cpu >= u.cpu && u.max_cpu <= 1.0, "{u:?}");
                assert!(u.mem >= 0.0 && u.mem <= 1.0 && u.mai >= 0.0, "{u:?}");
                if req == 0.0 {
                    zero_cpu.push(u.cpu as f64);
                }
            }
        }
        // A zero request draws an absolute level: median near the real median mean CPU.
        let med = median(&mut zero_cpu);
        let table_med = m.params().cpu_abs[m.params().z_grid.n / 2];
        assert!(
            med > 0.0 && (med / table_med - 1.0).abs() < 0.2,
            "{med} vs {table_med}"
        );
    }

    fn median(v: &mut [f64]) -> f64 {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    }

    /// Fraction of `values` at or below `x`.
    fn cdf(values: &[f64], x: f64) -> f64 {
        values.iter().filter(|v| **v <= x).count() as f64 / values.len() as f64
    }

    #[test]
    fn usage_model_static_draws_match_the_tables() {
        let m = UsageModel::calibrated(42);
        let p = m.params();
        let n = p.z_grid.n;
        let (mut cpu, mut mm, mut mem, mut mai) = (vec![], vec![], vec![], vec![]);
        for job in 0..40_000u64 {
            let d = m.task_draw(job, 0);
            cpu.push(m.cpu_ratio.at(m.pos(d.y[0])));
            mm.push(m.max_mean.at(m.pos(d.y[1])));
            mem.push(m.mem_ratio.at(m.pos(d.y[2])));
            mai.push(m.mai.at(m.pos(d.y[3])));
        }
        // Quantiles at z = -1, 0, +1 (grid entries n/2 -+ 4 with step 0.25).
        for (name, values, table) in [
            ("cpu", &cpu, &p.cpu_ratio),
            ("max_mean", &mm, &p.max_mean),
            ("mem", &mem, &p.mem_ratio),
            ("mai", &mai, &p.mai),
        ] {
            for (k, prob) in [(n / 2 - 4, 0.158_655), (n / 2, 0.5), (n / 2 + 4, 0.841_345)] {
                let got = cdf(values, table[k]);
                eprintln!("{name}: P(X <= q{prob:.3}) = {got:.4}");
                assert!(
                    (got - prob).abs() < 0.025,
                    "{name}: P(X <= q{prob}) = {got}"
                );
            }
        }
        // The public function: median of cpu / request within 10 % of the fitted median.
        let mut ratios: Vec<f64> = (0..20_000u64)
            .map(|job| m.usage(job, 0, 0.01, 0.01, 0).cpu as f64 / 0.01)
            .collect();
        let med = median(&mut ratios);
        let fitted = p.cpu_ratio[n / 2];
        assert!(
            (med / fitted - 1.0).abs() < 0.1,
            "median cpu/request {med} vs fitted {fitted}"
        );
        // Copula: cpu ratio and max/mean are negatively rank-correlated as in the data.
        let rho = spearman(&cpu, &mm);
        eprintln!(
            "median cpu/request {med:.4} (fitted {fitted:.4}), spearman cpu~max_mean {rho:.3}"
        );
        let target = p.copula.corr[0][1];
        assert!(
            (rho - target).abs() < 0.06,
            "spearman {rho} vs normal-score corr {target}"
        );
    }

    fn ranks(v: &[f64]) -> Vec<f64> {
        let mut idx: Vec<usize> = (0..v.len()).collect();
        idx.sort_by(|a, b| v[*a].total_cmp(&v[*b]));
        let mut r = vec![0.0; v.len()];
        let mut i = 0;
        while i < idx.len() {
            let mut j = i;
            while j + 1 < idx.len() && v[idx[j + 1]] == v[idx[i]] {
                j += 1;
            }
            for k in i..=j {
                r[idx[k]] = (i + j) as f64 / 2.0;
            }
            i = j + 1;
        }
        r
    }

    fn pearson(a: &[f64], b: &[f64]) -> f64 {
        let n = a.len() as f64;
        let (ma, mb) = (a.iter().sum::<f64>() / n, b.iter().sum::<f64>() / n);
        let cov: f64 = a.iter().zip(b).map(|(x, y)| (x - ma) * (y - mb)).sum();
        let va: f64 = a.iter().map(|x| (x - ma).powi(2)).sum();
        let vb: f64 = b.iter().map(|y| (y - mb).powi(2)).sum();
        cov / (va * vb).sqrt()
    }

    fn spearman(a: &[f64], b: &[f64]) -> f64 {
        pearson(&ranks(a), &ranks(b))
    }

    #[test]
    fn usage_model_tasks_of_a_job_look_alike() {
        let m = UsageModel::calibrated(3);
        let (mut a, mut b, mut other) = (vec![], vec![], vec![]);
        for job in 0..5000u64 {
            a.push(m.task_draw(job, 0).y[0]);
            b.push(m.task_draw(job, 1).y[0]);
            other.push(m.task_draw(job + 1_000_000, 0).y[0]);
        }
        let icc = m.params().copula.job_icc[0];
        let same_job = pearson(&a, &b);
        assert!(
            (same_job - icc).abs() < 0.03,
            "same-job correlation {same_job} vs icc {icc}"
        );
        assert!(pearson(&a, &other).abs() < 0.05);
    }

    /// Pooled sd and autocorrelation of log series with each series' mean removed (the estimator
    /// of scripts/calibrate_usage.py).
    fn pooled_stats(series: &[Vec<f64>], lags: &[usize]) -> (f64, Vec<f64>) {
        let devs: Vec<Vec<f64>> = series
            .iter()
            .map(|s| {
                let mean = s.iter().sum::<f64>() / s.len() as f64;
                s.iter().map(|x| x - mean).collect()
            })
            .collect();
        let autocov = |lag: usize| {
            let (mut sum, mut n) = (0.0, 0usize);
            for d in &devs {
                for t in 0..d.len() - lag {
                    sum += d[t] * d[t + lag];
                    n += 1;
                }
            }
            sum / n as f64
        };
        let g0 = autocov(0);
        (g0.sqrt(), lags.iter().map(|&l| autocov(l) / g0).collect())
    }

    #[test]
    fn usage_model_temporal_variation_matches_the_fit() {
        let m = UsageModel::calibrated(11);
        let (mut cpu, mut mem) = (vec![], vec![]);
        for job in 0..5000u64 {
            // Small requests: no clamping at 1.
            let s: Vec<Usage> = (0..288)
                .map(|w| m.usage(job, 5, 0.001, 0.001, 1000 + w))
                .collect();
            if s.iter().all(|u| u.cpu > 0.0) {
                cpu.push(s.iter().map(|u| (u.cpu as f64).ln()).collect());
            }
            if s.iter().all(|u| u.mem > 0.0) {
                mem.push(s.iter().map(|u| (u.mem as f64).ln()).collect());
            }
            // MAI and max/mean do not vary in time.
            assert!(s.iter().all(|u| u.mai == s[0].mai));
        }
        assert!(
            cpu.len() > 4900 && mem.len() > 4900,
            "{} {}",
            cpu.len(),
            mem.len()
        );
        for (name, series, t) in [
            ("cpu", &cpu, &m.params().temporal.cpu),
            ("mem", &mem, &m.params().temporal.mem),
        ] {
            let (sd, acf) = pooled_stats(series, &[1, 12, 24]);
            let fit = &t.fit;
            eprintln!(
                "{name}: sd {sd:.4} (fit {:.4}), acf 1/12/24 {:.3}/{:.3}/{:.3} (fit {:.3}/{:.3}/{:.3})",
                fit.target_sd, acf[0], acf[1], acf[2], fit.target_acf[1], fit.model_acf[12], fit.model_acf[24]
            );
            assert!(
                (sd / fit.target_sd - 1.0).abs() < 0.1,
                "{name}: sd {sd} vs fitted {}",
                fit.target_sd
            );
            assert!(
                (acf[0] - fit.target_acf[1]).abs() < 0.03,
                "{name}: lag-1 {} vs {}",
                acf[0],
                fit.target_acf[1]
            );
            assert!(
                (acf[1] - fit.model_acf[12]).abs() < 0.05,
                "{name}: lag-12 {} vs {}",
                acf[1],
                fit.model_acf[12]
            );
            assert!(
                (acf[2] - fit.model_acf[24]).abs() < 0.06,
                "{name}: lag-24 {} vs {}",
                acf[2],
                fit.model_acf[24]
            );
        }
    }

    #[test]
    fn usage_model_temporal_factor_keeps_the_mean() {
        let m = UsageModel::calibrated(5);
        let (mut sum, mut n) = (0.0, 0);
        for job in 0..400u64 {
            let level = m.usage(job, 0, 0.001, 0.001, 0).cpu as f64;
            let d = m.task_draw(job, 0);
            let base = m.cpu_ratio.at(m.pos(d.y[0])) * 0.001f32 as f64;
            if base <= 0.0 || level <= 0.0 {
                continue;
            }
            for w in 0..2000 {
                sum += m.usage(job, 0, 0.001, 0.001, w).cpu as f64 / base;
                n += 1;
            }
        }
        let mean = sum / n as f64;
        assert!((mean - 1.0).abs() < 0.05, "mean temporal factor {mean}");
    }

    // ---- real rows ----

    #[test]
    fn usage_real_head676_loads() {
        let root = head_root();
        let real = TaskUsage::load(root.path(), None).unwrap().unwrap();
        assert_eq!(real.rows_read(), 676);
        assert_eq!(real.len(), 676, "676 distinct (job, index, window) keys");
        assert_eq!(real.tasks(), 676);
        assert_eq!(real.parts(), &[0]);
        assert!(
            real.series(3418309, 0).iter().all(|(w, _)| *w == 0),
            "all rows are window 0"
        );
        // Line 1: 600000000,900000000,3418309,0,...,0.001562,0.06787,0.07568,...,0.03967,...,0.007243
        let u = real.get(3418309, 0, 0).unwrap();
        assert_eq!(
            u,
            Usage {
                cpu: 0.001562,
                max_cpu: 0.03967,
                mem: 0.07568,
                mai: 0.007243
            }
        );
        assert_eq!(real.get(3418309, 0, 1), None);
        // Line 24: empty CPI and MAI -> MAI 0.
        let u = real.get(3418339, 10, 0).unwrap();
        assert_eq!(
            u,
            Usage {
                cpu: 0.039,
                max_cpu: 0.176,
                mem: 0.09924,
                mai: 0.0
            }
        );
        // Line 651: idle task, empty max disk I/O, CPI and MAI.
        assert_eq!(real.get(259659137, 2, 0).unwrap(), Usage::default());
        // The parts filter.
        assert!(TaskUsage::load(root.path(), Some(&[0, 1]))
            .unwrap()
            .is_some());
        assert!(TaskUsage::load(root.path(), Some(&[1])).unwrap().is_none());
    }

    #[test]
    fn usage_real_gzip_and_absent_directory() {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        writeln!(gz, "{ROW1}").unwrap();
        let bytes = gz.finish().unwrap();
        let root = root_with("part-00007-of-00500.csv.gz", &bytes);
        let real = TaskUsage::load(root.path(), None).unwrap().unwrap();
        assert_eq!((real.len(), real.parts()), (1, &[7][..]));
        assert_eq!(real.get(3418309, 0, 0).unwrap().cpu, 0.001562);
        // Truncated gzip: a file error, not a panic.
        let root = root_with("part-00007-of-00500.csv.gz", &bytes[..bytes.len() / 2]);
        assert!(matches!(
            TaskUsage::load(root.path(), None),
            Err(TraceError::File { .. })
        ));
        // No task_usage/ directory.
        let empty = tempfile::tempdir().unwrap();
        assert!(TaskUsage::load(empty.path(), None).unwrap().is_none());
        // An empty part.
        let root = root_with("part-00000-of-00500.csv", b"");
        assert!(matches!(
            TaskUsage::load(root.path(), None),
            Err(TraceError::File { .. })
        ));
    }

    #[test]
    fn usage_real_windows_and_merging() {
        // Start 1200 s (window (1200-600)/300 = 2), two rows of one window merged by duration,
        // e-notation accepted, CRLF accepted.
        let row = |start: u64, end: u64, cpu: &str, max: &str| {
            format!("{start},{end},5,1,9,{cpu},0.1,0.2,0,0,0.1,0,0,{max},0,1.5,1e-2,0,1,0\r\n")
        };
        let text = row(1_200_000_000, 1_400_000_000, "3e-1", "0.5")
            + &row(1_400_000_000, 1_500_000_000, "0.6", "0.9")
            + &row(0, 900_000_000, "0.1", "0.2");
        let root = root_with("part-00001-of-00500.csv", text.as_bytes());
        let real = TaskUsage::load(root.path(), None).unwrap().unwrap();
        assert_eq!((real.rows_read(), real.len(), real.tasks()), (3, 2, 1));
        let u = real.get(5, 1, 2).unwrap();
        assert!(
            (u.cpu - 0.4).abs() < 1e-6 && u.max_cpu == 0.9 && (u.mai - 0.01).abs() < 1e-7,
            "{u:?}"
        );
        assert_eq!(real.get(5, 1, 0).unwrap().cpu, 0.1);
        let merged =
            TaskUsage::from_rows([(1, 2, 3, u), (1, 2, 3, Usage::default()), (1, 2, 4, u)]);
        assert_eq!(
            (merged.len(), merged.tasks(), merged.rows_read()),
            (2, 1, 3)
        );
        assert_eq!(merged.get(1, 2, 3).unwrap().cpu, u.cpu / 2.0);
        assert_eq!(merged.get(1, 2, 3).unwrap().max_cpu, u.max_cpu);
        assert_eq!(merged.at_or_before(1, 2, 100), Some((4, u)));
        assert_eq!(merged.at_or_before(1, 2, 2), None);
        assert_eq!(window_of_us(0), 0);
        assert_eq!(window_of_us(899_999_999), 0);
        assert_eq!(window_of_us(900_000_000), 1);
        assert_eq!(window_of(299), 0);
        assert_eq!(window_of(300), 1);
    }

    #[test]
    fn usage_real_bad_input_names_file_line_column() {
        let bad_cpu = ROW1.replacen("0.001562", "abc", 1);
        let (_, line, column, field, msg) = parse_error(&format!("{ROW1}\n{bad_cpu}\n"));
        assert_eq!((line, column, field), (2, 6, "mean CPU rate"));
        assert!(msg.contains("abc"), "{msg}");

        let short = ROW1.rsplit_once(',').unwrap().0;
        let (_, line, column, _, msg) = parse_error(&format!("{ROW1}\n{ROW1}\n{short}\n"));
        assert_eq!((line, column), (3, 20));
        assert!(msg.contains("expected 20 columns, found 19"), "{msg}");

        let (_, line, column, field, _) = parse_error(&format!("{ROW1},7\n"));
        assert_eq!((line, column, field), (1, 21, "end of row"));

        let no_job = ROW1.replacen("3418309", "", 1);
        let (_, _, column, field, msg) = parse_error(&no_job);
        assert_eq!((column, field), (3, "job ID"));
        assert!(msg.contains("missing"), "{msg}");

        for (text, col) in [("-0.5", 8), ("inf", 8), ("NaN", 8)] {
            let row = ROW1.replacen("0.07568", text, 1);
            let (_, _, column, field, _) = parse_error(&row);
            assert_eq!((column, field), (col, "assigned memory usage"), "{text}");
        }
        let (_, _, column, _, _) =
            parse_error(&ROW1.replacen("3418309,0,", "3418309,4294967296,", 1));
        assert_eq!(column, 4);
    }

    #[test]
    fn usage_source_prefers_real_rows_then_the_model() {
        let root = head_root();
        let real = TaskUsage::load(root.path(), None).unwrap();
        let model = UsageModel::calibrated(9);
        let src = UsageSource::new(real, model.clone());
        let known = run(3418309, 0, 0, 3600);
        let row = Usage {
            cpu: 0.001562,
            max_cpu: 0.03967,
            mem: 0.07568,
            mai: 0.007243,
        };
        assert!(src.has_real(3418309, 0));
        assert!(!src.has_real(3418309, 99));
        assert_eq!(src.lookup(&known, 0), (row, UsageOrigin::Real));
        // Later windows carry the last real window forward, also into a later run of the task.
        assert_eq!(src.lookup(&known, 5), (row, UsageOrigin::RealEarlier));
        let later = run(3418309, 0, 7200, 9000);
        assert_eq!(src.lookup(&later, 30), (row, UsageOrigin::RealEarlier));
        // A task without real rows uses the model.
        let unknown = run(1, 2, 0, 600);
        assert_eq!(src.usage(&unknown, 1), model.usage(1, 2, 0.125, 0.07446, 1));
        // Before a task's first real window: the model.
        let u = Usage {
            cpu: 0.5,
            max_cpu: 0.75,
            mem: 0.25,
            mai: 0.01,
        };
        let late = UsageSource::new(Some(TaskUsage::from_rows([(77, 0, 10, u)])), model.clone());
        let r = run(77, 0, 0, 6000);
        let expect = model.usage(77, 0, r.cpu_request, r.mem_request, 9);
        assert_eq!(late.lookup(&r, 9), (expect, UsageOrigin::Model));
        assert_eq!(late.lookup(&r, 10), (u, UsageOrigin::Real));
        assert_eq!(late.lookup(&r, 11), (u, UsageOrigin::RealEarlier));
        // No real data at all.
        let only_model = UsageSource::new(None, model.clone());
        assert_eq!(only_model.lookup(&known, 0).1, UsageOrigin::Model);
        assert!(!only_model.has_real(3418309, 0));
    }

    /// `cargo test --release -p colosched-trace usage_model_timing -- --ignored --nocapture`
    #[test]
    #[ignore = "timing, not a test: cargo test --release -p colosched-trace usage_model_timing -- --ignored --nocapture"]
    fn usage_model_timing() {
        let m = UsageModel::calibrated(1);
        // Minimum over batches: other processes on the machine only ever add time.
        let time = |name: &str, f: &dyn Fn(u32) -> f64| {
            let (batch, mut best, mut acc) = (20_000u32, f64::MAX, 0.0);
            for rep in 0..250u32 {
                let t = std::time::Instant::now();
                for i in 0..batch {
                    acc += f(rep * batch + i);
                }
                best = best.min(t.elapsed().as_nanos() as f64 / batch as f64);
            }
            eprintln!("{name}: {best:.1} ns/call (checksum {acc})");
        };
        time("usage()", &|i| {
            let u = m.usage((i % 50_000) as u64, i % 7, 0.05, 0.04, i / 50_000);
            (u.cpu + u.mem) as f64
        });
    }
}
