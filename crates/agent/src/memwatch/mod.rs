//! `MemoryThresholdWatcher`: tells an application, before its memory cgroup's hard limit, that
//! usage crossed one of its thresholds (spec 004, the paper's memcg thresholds + eventfd).
//!
//! What it may touch: it reads the watched cgroup's memory files; it writes registrations into a
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

mod order;
mod psi;
mod sys;
mod v2;

pub mod cli;

use std::fmt;
use std::fs;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

pub use order::{order_crossings, poll_crossings};
pub use psi::PsiTrigger;
pub use v2::{parse_memory_events, MemoryEvents};

/// A v1 limit at or above this is "no limit" (the kernel reports PAGE_COUNTER_MAX pages).
const UNLIMITED: u64 = 1 << 62;

/// A threshold as the user gave it: bytes, or a percentage of the group's limit.
#[derive(Clone, Debug, PartialEq)]
pub enum Threshold {
    Bytes(u64),
    Percent(f64),
}

impl Threshold {
    /// Parses `268435456`, `512K`, `256M`, `1.5G`, `1T` (powers of 1024) or `80%`.
    pub fn parse(s: &str) -> Result<Threshold, String> {
        let t = s.trim();
        if let Some(p) = t.strip_suffix('%') {
            let v: f64 = p
                .trim()
                .parse()
                .map_err(|_| format!("{s:?} is not a percentage like 80%"))?;
            if !(v > 0.0 && v <= 100.0) {
                return Err(format!(
                    "{s:?}: a percentage must be above 0 and at most 100"
                ));
            }
            return Ok(Threshold::Percent(v));
        }
        Ok(Threshold::Bytes(
            parse_size(t).map_err(|e| format!("{s:?}: {e}"))?,
        ))
    }

    /// Bytes for a group whose limit is `limit` (None: unlimited).
    pub fn resolve(&self, limit: Option<u64>) -> Result<u64, String> {
        match *self {
            Threshold::Bytes(b) => Ok(b),
            Threshold::Percent(p) => limit
                .map(|l| (l as f64 * p / 100.0) as u64)
                .ok_or_else(|| "a percentage needs a memory limit, and the cgroup has none".into()),
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
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m: u64 = match c.to_ascii_uppercase() {
                'K' => 1 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                'T' => 1 << 40,
                _ => return Err(format!("unknown size suffix {c:?} (use K, M, G, T or %)")),
            };
            (&s[..i], m)
        }
        _ => (s, 1),
    };
    let v: f64 = num
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite())
        .ok_or_else(|| "not a size like 256M, 1G or 80%".to_string())?;
    let bytes = v * mult as f64;
    if bytes < 1.0 {
        return Err("a threshold must be above 0".into());
    }
    if bytes >= u64::MAX as f64 {
        return Err("too large".into());
    }
    Ok(bytes as u64)
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
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::V1 => "v1",
            Backend::V2 => "v2",
            Backend::Poll => "poll",
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
    pub fn parse(s: &str) -> Result<BackendChoice, String> {
        match s {
            "auto" => Ok(BackendChoice::Auto),
            "v1" => Ok(BackendChoice::V1),
            "v2" => Ok(BackendChoice::V2),
            "poll" => Ok(BackendChoice::Poll),
            _ => Err(format!("{s:?} is not one of auto, v1, v2, poll")),
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
    /// When the watcher saw it (for latency measurements).
    pub seen: Instant,
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

/// A setup error: `bad_input` ones (missing cgroup, no memory controller, bad threshold,
/// registration refused) are the caller's to fix, exit 2 on the command line.
#[derive(Debug, Clone, PartialEq)]
pub struct WatchError {
    pub msg: String,
    pub bad_input: bool,
}

impl fmt::Display for WatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

fn bad(msg: String) -> WatchError {
    WatchError {
        msg,
        bad_input: true,
    }
}

/// A threshold resolved to bytes, with the label the user gave.
#[derive(Clone, Debug)]
struct Line {
    label: String,
    bytes: u64,
}

/// Wakes a blocked `wait` from another thread (an eventfd).
#[derive(Clone, Debug)]
pub struct StopHandle(std::sync::Arc<OwnedFd>);

impl StopHandle {
    pub fn stop(&self) {
        sys::eventfd_signal(&self.0);
    }
}

/// Watches one memory cgroup. Dropping it closes every fd (which unregisters v1 thresholds and
/// PSI triggers) and puts `memory.high` back if it was set.
pub struct MemoryThresholdWatcher {
    cgroup: PathBuf,
    backend: Backend,
    describe: String,
    /// Sorted ascending by bytes, deduplicated.
    lines: Vec<Line>,
    /// Per line: is usage at or above it (the kernel's side of it)?
    above: Vec<bool>,
    limit: Option<u64>,
    usage_path: PathBuf,
    usage_fd: Option<fs::File>,
    /// v1: one eventfd per line, same order.
    v1_fds: Vec<OwnedFd>,
    events: Option<v2::EventsWatch>,
    psi: Option<PsiTrigger>,
    high: Option<v2::HighGuard>,
    poll_period: Option<Duration>,
    next_poll: Instant,
    stop: StopHandle,
    finished: bool,
}

impl MemoryThresholdWatcher {
    /// Detects the backend, resolves and registers the thresholds. Nothing stays registered or
    /// changed if it fails.
    pub fn open(cgroup: &Path, opts: &WatchOptions) -> Result<Self, WatchError> {
        let has = |f: &str| cgroup.join(f).exists();
        if !cgroup.is_dir() {
            return Err(bad(format!(
                "--cgroup {}: no such cgroup directory",
                cgroup.display()
            )));
        }
        let v1 = has("cgroup.event_control") && has("memory.usage_in_bytes");
        let v2 = has("memory.current");
        let backend = match (opts.backend, v1, v2) {
            (BackendChoice::Auto | BackendChoice::V1, true, _) => Backend::V1,
            (BackendChoice::Auto | BackendChoice::V2, _, true) => Backend::V2,
            (BackendChoice::Poll, true, _) | (BackendChoice::Poll, _, true) => Backend::Poll,
            (_, false, false) => {
                let why = if has("memory.pressure") {
                    " (a cgroup v2 group without the memory controller: only memory.pressure)"
                } else {
                    ""
                };
                return Err(bad(format!(
                    "--cgroup {}: no memory controller here: neither cgroup v1 \
                     (cgroup.event_control + memory.usage_in_bytes) nor cgroup v2 (memory.current){why}",
                    cgroup.display()
                )));
            }
            (choice, _, _) => {
                return Err(bad(format!(
                    "--backend {choice:?}: {} is a cgroup {} memory group",
                    cgroup.display(),
                    if v1 { "v1" } else { "v2" }
                )))
            }
        };
        let is_v1 = v1 && backend != Backend::V2;
        let (usage_file, limit_file) = match (is_v1, opts.memsw) {
            (true, false) => ("memory.usage_in_bytes", "memory.limit_in_bytes"),
            (true, true) => ("memory.memsw.usage_in_bytes", "memory.memsw.limit_in_bytes"),
            (false, false) => ("memory.current", "memory.max"),
            (false, true) => {
                return Err(bad(
                    "--memsw: only for cgroup v1 (v2 keeps swap apart in memory.swap.current)"
                        .into(),
                ))
            }
        };
        let usage_path = cgroup.join(usage_file);
        if !usage_path.exists() {
            return Err(bad(format!(
                "{}: missing (--memsw needs swap accounting)",
                usage_path.display()
            )));
        }
        let limit = read_limit(&cgroup.join(limit_file)).map_err(bad)?;
        if backend != Backend::V2 && (opts.high.is_some() || opts.psi.is_some()) {
            return Err(bad(
                "--high and --psi are cgroup v2 options (use the v2 backend)".into(),
            ));
        }
        if opts.thresholds.is_empty() && backend != Backend::V2 {
            return Err(bad("give at least one --threshold".into()));
        }
        let mut lines = Vec::new();
        for t in &opts.thresholds {
            let bytes = t
                .resolve(limit)
                .map_err(|e| bad(format!("--threshold {t}: {e}")))?;
            if bytes == 0 {
                return Err(bad(format!("--threshold {t}: resolves to 0 bytes")));
            }
            if let Some(l) = limit.filter(|&l| bytes > l) {
                return Err(bad(format!(
                    "--threshold {t}: {bytes} bytes is above the group's limit of {l} bytes ({})",
                    cgroup.join(limit_file).display()
                )));
            }
            lines.push(Line {
                label: t.to_string(),
                bytes,
            });
        }
        lines.sort_by_key(|l| l.bytes);
        lines.dedup_by_key(|l| l.bytes);

        let usage_fd = fs::File::open(&usage_path)
            .map_err(|e| bad(format!("{}: {e}", usage_path.display())))?;
        let stop = StopHandle(std::sync::Arc::new(sys::eventfd().map_err(bad)?));
        let mut w = MemoryThresholdWatcher {
            cgroup: cgroup.to_path_buf(),
            backend,
            describe: String::new(),
            above: vec![false; lines.len()],
            lines,
            limit,
            usage_path,
            usage_fd: Some(usage_fd),
            v1_fds: Vec::new(),
            events: None,
            psi: None,
            high: None,
            poll_period: None,
            next_poll: Instant::now(),
            stop,
            finished: false,
        };
        // On error `w` drops here, closing whatever was registered so far.
        let mut parts = Vec::new();
        match backend {
            Backend::V1 => {
                let control = cgroup.join("cgroup.event_control");
                for (i, line) in w.lines.iter().enumerate() {
                    let efd = sys::eventfd().map_err(|e| {
                        bad(format!(
                            "threshold {} of {} ({}): {e}",
                            i + 1,
                            w.lines.len(),
                            line.label
                        ))
                    })?;
                    let usage_fd = w.usage_fd.as_ref().expect("open").as_raw_fd();
                    let msg = format!("{} {} {}", efd.as_raw_fd(), usage_fd, line.bytes);
                    fs::write(&control, &msg).map_err(|e| {
                        bad(format!(
                            "{} refused threshold {} of {} ({} = {} bytes): {}",
                            control.display(),
                            i + 1,
                            w.lines.len(),
                            line.label,
                            line.bytes,
                            sys::explain(&e)
                        ))
                    })?;
                    w.v1_fds.push(efd);
                }
                parts.push(format!(
                    "v1: {} eventfd threshold(s) on {} via cgroup.event_control",
                    w.lines.len(),
                    usage_file
                ));
            }
            Backend::V2 => {
                w.events = Some(v2::EventsWatch::open(cgroup).map_err(bad)?);
                parts.push("v2: memory.events via poll(POLLPRI)".into());
                if let Some(h) = &opts.high {
                    let bytes = h
                        .resolve(limit)
                        .map_err(|e| bad(format!("--high {h}: {e}")))?;
                    w.high = Some(v2::HighGuard::set(cgroup, bytes).map_err(bad)?);
                    parts.push(format!("memory.high set to {bytes} (put back on exit)"));
                }
                if let Some(spec) = &opts.psi {
                    let p = cgroup.join("memory.pressure");
                    w.psi = Some(PsiTrigger::open(&p, spec).map_err(bad)?);
                    parts.push(format!("PSI trigger {spec:?} on memory.pressure"));
                }
                if !w.lines.is_empty() {
                    w.poll_period = Some(opts.poll_period);
                    parts.push(format!(
                        "{} threshold(s) by polling memory.current every {} ms (v2 has no thresholds)",
                        w.lines.len(),
                        opts.poll_period.as_millis()
                    ));
                }
            }
            Backend::Poll => {
                w.poll_period = Some(opts.poll_period);
                parts.push(format!(
                    "poll: {} threshold(s) by reading {} every {} ms",
                    w.lines.len(),
                    usage_file,
                    opts.poll_period.as_millis()
                ));
            }
        }
        w.describe = parts.join("; ");
        // The kernel's side of each threshold is fixed at registration: read usage once now.
        let usage = w
            .read_usage()
            .ok_or_else(|| bad(format!("{}: cannot be read", w.usage_path.display())))?;
        for (i, line) in w.lines.iter().enumerate() {
            w.above[i] = usage >= line.bytes;
        }
        Ok(w)
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// One line saying which mechanism is used, for logs.
    pub fn describe(&self) -> &str {
        &self.describe
    }

    pub fn cgroup(&self) -> &Path {
        &self.cgroup
    }

    pub fn limit(&self) -> Option<u64> {
        self.limit
    }

    /// The thresholds in bytes, ascending, with their labels.
    pub fn thresholds(&self) -> Vec<(String, u64)> {
        self.lines
            .iter()
            .map(|l| (l.label.clone(), l.bytes))
            .collect()
    }

    /// A handle another thread can use to end a blocked `wait`.
    pub fn stop_handle(&self) -> StopHandle {
        self.stop.clone()
    }

    /// True after a `gone` event or a stop: later waits return nothing at once.
    pub fn finished(&self) -> bool {
        self.finished
    }

    /// Usage now, or None if the group is gone.
    pub fn read_usage(&self) -> Option<u64> {
        let f = self.usage_fd.as_ref()?;
        sys::pread_u64(f)
    }

    /// Waits up to `timeout` (None: until something happens) and returns the events, in the
    /// order they happened. An empty list means a timeout, an interrupted wait or a stop.
    pub fn wait(&mut self, timeout: Option<Duration>) -> Result<Vec<Event>, String> {
        if self.finished {
            return Ok(Vec::new());
        }
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut fds: Vec<(i32, i16)> = vec![(self.stop.0.as_raw_fd(), libc::POLLIN)];
        fds.extend(self.v1_fds.iter().map(|f| (f.as_raw_fd(), libc::POLLIN)));
        let events_at = fds.len();
        if let Some(e) = &self.events {
            fds.push((e.raw_fd(), libc::POLLPRI));
        }
        let psi_at = fds.len();
        if let Some(p) = &self.psi {
            fds.push((p.raw_fd(), libc::POLLPRI));
        }
        let mut wake = deadline;
        if self.poll_period.is_some() {
            wake = Some(wake.map_or(self.next_poll, |d| d.min(self.next_poll)));
        } else if self.backend == Backend::V2 {
            // Nothing else would notice the group's removal: look once a second.
            let check = Instant::now() + Duration::from_secs(1);
            wake = Some(wake.map_or(check, |d| d.min(check)));
        }
        let ready = sys::poll(
            &fds,
            wake.map(|w| w.saturating_duration_since(Instant::now())),
        )?;
        if ready[0] {
            sys::eventfd_drain(&self.stop.0);
            self.finish();
            return Ok(Vec::new());
        }
        let mut counts = vec![0u64; self.lines.len()];
        let mut any_v1 = false;
        for (i, f) in self.v1_fds.iter().enumerate() {
            if ready[1 + i] {
                counts[i] = sys::eventfd_drain(f);
                any_v1 |= counts[i] > 0;
            }
        }
        let events_ready = self.events.is_some() && ready[events_at];
        let psi_ready = self.psi.is_some() && ready[psi_at];
        let poll_due = self.poll_period.is_some() && Instant::now() >= self.next_poll;
        if !(any_v1 || events_ready || psi_ready || poll_due) {
            // A timeout: a group removed without a wake-up (v2) is noticed here.
            if !self.cgroup.is_dir() {
                return Ok(self.gone());
            }
            return Ok(Vec::new());
        }
        let seen = Instant::now();
        let Some(usage) = self.read_usage().filter(|_| self.cgroup.is_dir()) else {
            return Ok(self.gone());
        };
        let mut out = Vec::new();
        if any_v1 {
            for (i, up) in order_crossings(&self.above, &counts) {
                self.above[i] = up;
                out.push(self.crossing(i, up, usage, seen));
            }
        }
        if let Some(period) = self.poll_period.filter(|_| poll_due) {
            self.next_poll = seen + period;
            for (i, up) in poll_crossings(&self.lines_bytes(), &self.above, usage) {
                self.above[i] = up;
                out.push(self.crossing(i, up, usage, seen));
            }
        }
        // memory.events is also re-read on each polling tick: a change POLLPRI missed (or a fake
        // tree in tests, where regular files never signal POLLPRI) is still reported.
        if events_ready || poll_due {
            if let Some(ev) = self.events.as_mut() {
                let diffs = ev.changes()?;
                for (name, n) in diffs {
                    let bytes = match name {
                        "high" => read_limit(&self.cgroup.join("memory.high")).ok().flatten(),
                        "max" => self.limit,
                        _ => None,
                    };
                    out.push(self.event(
                        name.to_string(),
                        bytes,
                        Direction::Event,
                        Some(usage),
                        n,
                        seen,
                    ));
                }
            }
        }
        if psi_ready {
            let label = format!("psi {}", self.psi.as_ref().expect("psi").spec());
            out.push(self.event(label, None, Direction::Event, Some(usage), 1, seen));
        }
        Ok(out)
    }

    fn lines_bytes(&self) -> Vec<u64> {
        self.lines.iter().map(|l| l.bytes).collect()
    }

    fn crossing(&self, i: usize, up: bool, usage: u64, seen: Instant) -> Event {
        let dir = if up { Direction::Up } else { Direction::Down };
        let l = &self.lines[i];
        self.event(l.label.clone(), Some(l.bytes), dir, Some(usage), 1, seen)
    }

    fn event(
        &self,
        threshold: String,
        threshold_bytes: Option<u64>,
        direction: Direction,
        usage: Option<u64>,
        count: u64,
        seen: Instant,
    ) -> Event {
        Event {
            time: unix_now(),
            seen,
            cgroup: self.cgroup.clone(),
            threshold,
            threshold_bytes,
            direction,
            usage,
            limit: self.limit,
            count,
            backend: self.backend,
        }
    }

    /// The final event: the group was removed (the kernel already dropped its registrations).
    fn gone(&mut self) -> Vec<Event> {
        let e = self.event(
            "cgroup".into(),
            None,
            Direction::Gone,
            None,
            1,
            Instant::now(),
        );
        self.finish();
        vec![e]
    }

    /// Closes every fd and puts memory.high back; idempotent.
    fn finish(&mut self) {
        self.finished = true;
        self.v1_fds.clear();
        self.events = None;
        self.psi = None;
        self.usage_fd = None;
        self.high = None; // HighGuard::drop writes the old value back
    }
}

impl Drop for MemoryThresholdWatcher {
    fn drop(&mut self) {
        self.finish();
    }
}

/// A limit file: a number of bytes, `max` (v2) or a huge v1 value → None (no limit).
pub fn read_limit(path: &Path) -> Result<Option<u64>, String> {
    let text = fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse_limit(text.trim()).map_err(|e| format!("{}: {e}", path.display()))
}

pub fn parse_limit(text: &str) -> Result<Option<u64>, String> {
    if text == "max" {
        return Ok(None);
    }
    let v: u64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number of bytes or \"max\""))?;
    Ok((v < UNLIMITED).then_some(v))
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests;
