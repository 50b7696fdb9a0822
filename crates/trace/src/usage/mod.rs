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
//!
//! One file per part: `params` (the calibrated parameters), `rng` (counter-based random numbers),
//! `model` (the seeded model), `real_rows` (the `task_usage` reader), `source` (real rows first,
//! the model otherwise). Everything public is re-exported here.
mod model;
mod params;
mod real_rows;
mod rng;
mod source;
#[cfg(test)]
mod test_data;

pub use model::{CpuLevels, TaskLevels, UsageModel, MAX_GRID};
pub use params::{
    Copula, SeriesParams, TemporalFit, TemporalParams, UsageParams, ZGrid, MAX_OCTAVES,
};
pub use real_rows::{TaskUsage, COLUMNS, FIELD_NAMES};
pub use source::{UsageOrigin, UsageSource};

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
