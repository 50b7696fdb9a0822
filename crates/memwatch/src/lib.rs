//! colosched-memwatch: `MemoryThresholdWatcher` tells an application, before its memory cgroup's hard limit, that
//! usage crossed one of its thresholds (spec 004, the paper's memcg thresholds + eventfd).
//!
//! What it may touch: it reads the watched cgroup's memory files (through colosched-sys:
//! `Cgroupfs`, `KeptFile`, `PolledFile`, `psi::Trigger`); it writes registrations into a
//! v1 `cgroup.event_control` (undone by closing the eventfd), a PSI trigger into v2
//! `memory.pressure` (undone by closing the file), and `memory.high` only when asked (the old value
//! is put back on drop). It creates and removes nothing. Every path comes from the cgroup
//! directory it is given, so the v2 logic runs on a fake tree in unit tests.
//!
//! Backends, chosen per cgroup (`Backend`):
//! - `v1`: one eventfd per threshold registered on `memory.usage_in_bytes` (or memsw); the kernel
//!   signals an eventfd each time usage crosses its threshold, in either direction.
//! - `v2`: `memory.events` counters (low, high, max, oom, oom_kill) diffed when poll(POLLPRI)
//!   says the file changed; thresholds are checked by polling `memory.current` (cgroup v2 has no
//!   thresholds); optional PSI trigger on `memory.pressure`.
//! - `poll`: `memory.current` / `memory.usage_in_bytes` read every period (also forced with
//!   `BackendChoice::Poll`, which is how the bench compares it with v1).
//! - `psi`: a cgroup v2 group without the memory controller (a hybrid host whose memory controller
//!   is on v1): only a PSI trigger on its `memory.pressure`, which still sees the stalls of its
//!   processes, whatever v1 memory group limits them.

mod error;
mod order;
mod psi;
mod sys;
mod v2;
mod watcher;

pub mod cli;

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

pub use error::{explain, ParseError, WatchError};
pub use order::{order_crossings, poll_crossings};
pub use psi::PsiTrigger;
pub use v2::{parse_memory_events, MemoryEvents};
pub use watcher::{MemoryThresholdWatcher, StopHandle};

/// A threshold as the user gave it: bytes, or a percentage of the group's limit.
#[derive(Clone, Debug, PartialEq)]
pub enum Threshold {
    Bytes(u64),
    Percent(f64),
}

impl Threshold {
    /// Parses `268435456`, `512K`, `256M`, `1.5G`, `1T` (powers of 1024) or `80%`.
    pub fn parse(s: &str) -> Result<Threshold, ParseError> {
        let t = s.trim();
        if let Some(p) = t.strip_suffix('%') {
            let v: f64 = p
                .trim()
                .parse()
                .map_err(|_| ParseError::new(s, format!("{s:?} is not a percentage like 80%")))?;
            if !(v > 0.0 && v <= 100.0) {
                return Err(ParseError::new(
                    s,
                    format!("{s:?}: a percentage must be above 0 and at most 100"),
                ));
            }
            return Ok(Threshold::Percent(v));
        }
        Ok(Threshold::Bytes(
            parse_size(t).map_err(|e| ParseError::new(s, format!("{s:?}: {e}")))?,
        ))
    }

    /// Bytes for a group whose limit is `limit` (None: unlimited); None for a percentage of no
    /// limit.
    pub fn resolve(&self, limit: Option<u64>) -> Option<u64> {
        match *self {
            Threshold::Bytes(b) => Some(b),
            Threshold::Percent(p) => limit.map(|l| (l as f64 * p / 100.0) as u64),
        }
    }
}

impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Threshold::Bytes(b) => write!(f, "{}", format_size(*b)),
            Threshold::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// `4096`, `512K`, `256M`, `1.5G`, `1T` → bytes (must be above 0).
pub fn parse_size(s: &str) -> Result<u64, ParseError> {
    let given = s;
    let bad = |msg: &str| ParseError::new(given, msg);
    let s = s.trim();
    let (num, mult) = match s.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m: u64 = match c.to_ascii_uppercase() {
                'K' => 1 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                'T' => 1 << 40,
                _ => {
                    return Err(bad(&format!(
                        "unknown size suffix {c:?} (use K, M, G, T or %)"
                    )))
                }
            };
            (&s[..i], m)
        }
        _ => (s, 1),
    };
    let v: f64 = num
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite())
        .ok_or_else(|| bad("not a size like 256M, 1G or 80%"))?;
    let bytes = v * mult as f64;
    if bytes < 1.0 {
        return Err(bad("a threshold must be above 0"));
    }
    if bytes >= u64::MAX as f64 {
        return Err(bad("too large"));
    }
    Ok(bytes as u64)
}

/// `500ms`, `2s`, `1.5s`, `250us` → a duration (above 0).
pub fn parse_duration(s: &str) -> Result<Duration, ParseError> {
    let bad = |msg: String| ParseError::new(s, msg);
    let t = s.trim();
    let (num, unit_s) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix("us") {
        (n, 1e-6)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else {
        return Err(bad(format!(
            "{s:?} is not a duration like 500ms or 2s (give the unit)"
        )));
    };
    let v: f64 = num
        .trim()
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v > 0.0)
        .ok_or_else(|| bad(format!("{s:?} is not a duration above 0 like 500ms or 2s")))?;
    let secs = v * unit_s;
    if secs > 3600.0 {
        return Err(bad(format!("{s:?}: at most 1 hour")));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Bytes in the shortest exact form (`256M`), else plain bytes.
pub fn format_size(b: u64) -> String {
    for (suffix, m) in [
        ("T", 1u64 << 40),
        ("G", 1 << 30),
        ("M", 1 << 20),
        ("K", 1 << 10),
    ] {
        if b >= m && b.is_multiple_of(m) {
            return format!("{}{suffix}", b / m);
        }
    }
    b.to_string()
}

/// Which mechanism a watcher uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    V1,
    V2,
    Poll,
    /// A cgroup v2 group without the memory controller: only its `memory.pressure` (PSI).
    Psi,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::V1 => "v1",
            Backend::V2 => "v2",
            Backend::Poll => "poll",
            Backend::Psi => "psi",
        }
    }
}

/// What the user asked for: `Auto` picks v1 when the group has `cgroup.event_control`, v2 when
/// it has `memory.current`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum BackendChoice {
    #[default]
    Auto,
    V1,
    V2,
    Poll,
}

impl BackendChoice {
    pub fn parse(s: &str) -> Result<BackendChoice, ParseError> {
        match s {
            "auto" => Ok(BackendChoice::Auto),
            "v1" => Ok(BackendChoice::V1),
            "v2" => Ok(BackendChoice::V2),
            "poll" => Ok(BackendChoice::Poll),
            _ => Err(ParseError::new(
                s,
                format!("{s:?} is not one of auto, v1, v2, poll"),
            )),
        }
    }
}

/// Everything a watch needs besides the cgroup.
#[derive(Clone, Debug)]
pub struct WatchOptions {
    pub thresholds: Vec<Threshold>,
    /// v1: watch `memory.memsw.usage_in_bytes` (memory + swap) instead of `memory.usage_in_bytes`.
    pub memsw: bool,
    pub backend: BackendChoice,
    /// Period of the polling path (`poll`, and v2's thresholds).
    pub poll_period: Duration,
    /// v2: set `memory.high` to this while watching (the kernel's soft line), put back on drop.
    pub high: Option<Threshold>,
    /// v2: a PSI trigger for `memory.pressure`, e.g. `some 150000 1000000`.
    pub psi: Option<String>,
    /// Report a threshold crossing only once usage stayed on its new side this long (a crossing
    /// back within it cancels the report). None: report every crossing at once.
    pub debounce: Option<Duration>,
}

impl Default for WatchOptions {
    fn default() -> Self {
        WatchOptions {
            thresholds: Vec::new(),
            memsw: false,
            backend: BackendChoice::Auto,
            poll_period: Duration::from_millis(100),
            high: None,
            psi: None,
            debounce: None,
        }
    }
}

/// Which way an event went. `Event` is a v2 `memory.events` counter or a PSI trigger firing;
/// `Gone` is the final event when the cgroup was removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Up,
    Down,
    Gone,
    Event,
}

impl Direction {
    pub fn name(self) -> &'static str {
        match self {
            Direction::Up => "up",
            Direction::Down => "down",
            Direction::Gone => "gone",
            Direction::Event => "event",
        }
    }
}

/// One notification.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// Seconds since the Unix epoch.
    pub time: f64,
    /// CLOCK_MONOTONIC in ns when the watcher woke and read usage (for latency measurements).
    pub monotonic_ns: u64,
    pub cgroup: PathBuf,
    /// The threshold as given (`256M`, `80%`), or `high`, `oom_kill`, `psi`, `cgroup`.
    pub threshold: String,
    pub threshold_bytes: Option<u64>,
    pub direction: Direction,
    /// Usage read right after the wake-up (None when the group is gone).
    pub usage: Option<u64>,
    pub limit: Option<u64>,
    /// How many times it happened since the last event (counter increase; 1 for crossings).
    pub count: u64,
    pub backend: Backend,
}

impl Event {
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "time": self.time,
            "cgroup": self.cgroup.display().to_string(),
            "threshold": self.threshold,
            "threshold_bytes": self.threshold_bytes,
            "direction": self.direction.name(),
            "usage": self.usage,
            "limit": self.limit,
            "count": self.count,
            "backend": self.backend.name(),
        })
    }
}

#[cfg(test)]
mod tests;
