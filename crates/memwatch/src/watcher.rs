//! The watcher itself: opens (detects the backend, registers), waits (poll on every fd, turns
//! wake-ups into ordered events) and undoes everything on drop. What it may touch is listed in
//! `lib.rs`.

use std::fs;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use colosched_sys::kept::KeptFile;
use colosched_sys::Cgroupfs;
use rustix::event::PollFlags;

use crate::{order_crossings, poll_crossings, psi::PsiTrigger, sys, v2};
use crate::{Backend, BackendChoice, Direction, Event, WatchError, WatchOptions};

/// A threshold resolved to bytes, with the label the user gave.
#[derive(Clone, Debug)]
struct Line {
    label: String,
    bytes: u64,
}

/// How often a v1 threshold is registered again while usage crosses it during registration.
const REGISTER_ATTEMPTS: u32 = 100;

/// The side (true: usage at or above) the kernel gave a threshold at registration, from usage read
/// just before and just after it; None if they differ, and so might the kernel's reading.
fn side_at_registration(before: u64, after: u64, threshold: u64) -> Option<bool> {
    let (a, b) = (before >= threshold, after >= threshold);
    (a == b).then_some(a)
}

/// A new stop handle (its eventfd).
fn stop_handle() -> Result<StopHandle, WatchError> {
    let fd = sys::eventfd().map_err(|source| WatchError::Call {
        what: "the stop handle".into(),
        call: "eventfd",
        source,
    })?;
    Ok(StopHandle(std::sync::Arc::new(fd)))
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
    /// The usage file, read with one pread (None in a PSI-only watch, and once finished).
    usage: Option<KeptFile>,
    /// v1: one eventfd per line, same order.
    v1_fds: Vec<OwnedFd>,
    events: Option<v2::EventsWatch>,
    psi: Option<PsiTrigger>,
    high: Option<v2::HighGuard>,
    poll_period: Option<Duration>,
    next_poll: Instant,
    stop: StopHandle,
    finished: bool,
    /// `--debounce`: a crossing is reported once its side held this long.
    debounce: Option<Duration>,
    /// With a debounce, per line: the side last reported (`above` is the side seen last).
    reported: Vec<bool>,
    /// With a debounce, per line: since when `above` differs from `reported` (None: it does not).
    pending: Vec<Option<Instant>>,
}

/// The nearest limit for percentages: the group's own `limit_file`, else the nearest ancestor's
/// (a group without a limit is bounded by it). Returns the limit and the file it came from.
fn effective_limit(cgroup: &Path, limit_file: &str) -> Result<(Option<u64>, PathBuf), WatchError> {
    let own = cgroup.join(limit_file);
    let limit = Cgroupfs::new(cgroup).limit(limit_file)?;
    if limit.is_some() {
        return Ok((limit, own));
    }
    // The cgroup root has no memory.max (v2) or an unlimited memory.limit_in_bytes (v1); above
    // it, outside the cgroup filesystem, there is no limit file at all.
    for dir in cgroup.ancestors().skip(1) {
        let f = dir.join(limit_file);
        if !f.is_file() {
            break;
        }
        if let Some(l) = Cgroupfs::new(dir).limit(limit_file)? {
            return Ok((Some(l), f));
        }
    }
    Ok((None, own))
}

impl MemoryThresholdWatcher {
    /// Detects the backend, resolves and registers the thresholds. Nothing stays registered or
    /// changed if it fails. The directory must be on a cgroup filesystem (v1 or v2): a directory
    /// of regular files would take the registrations and never signal.
    pub fn open(cgroup: &Path, opts: &WatchOptions) -> Result<Self, WatchError> {
        Self::open_on(cgroup, opts, true)
    }

    /// `open` without the filesystem check: the unit tests' fake trees are tempdirs.
    #[cfg(test)]
    pub(crate) fn open_fake(cgroup: &Path, opts: &WatchOptions) -> Result<Self, WatchError> {
        Self::open_on(cgroup, opts, false)
    }

    fn open_on(cgroup: &Path, opts: &WatchOptions, check_fs: bool) -> Result<Self, WatchError> {
        let has = |f: &str| cgroup.join(f).exists();
        if !cgroup.is_dir() {
            return Err(WatchError::flag(
                "--cgroup",
                cgroup.display(),
                "no such cgroup directory",
            ));
        }
        if check_fs {
            sys::check_cgroup_fs(cgroup)?;
        }
        if let Some(d) = opts.debounce {
            if d.is_zero() || d > Duration::from_secs(3600) {
                return Err(WatchError::bare_flag(
                    "--debounce",
                    "must be above 0 and at most 1 hour",
                ));
            }
            if opts.thresholds.is_empty() {
                return Err(WatchError::bare_flag(
                    "--debounce",
                    "only with --threshold (it delays threshold crossings; \
                     memory.events counters and PSI triggers are reported as they come)",
                ));
            }
        }
        let v1 = has("cgroup.event_control") && has("memory.usage_in_bytes");
        let v2 = has("memory.current");
        let backend = match (opts.backend, v1, v2) {
            (BackendChoice::Auto | BackendChoice::V1, true, _) => Backend::V1,
            (BackendChoice::Auto | BackendChoice::V2, _, true) => Backend::V2,
            (BackendChoice::Poll, true, _) | (BackendChoice::Poll, _, true) => Backend::Poll,
            (BackendChoice::Auto | BackendChoice::V2, false, false)
                if has("memory.pressure")
                    && opts.psi.is_some()
                    && opts.thresholds.is_empty()
                    && opts.high.is_none()
                    && !opts.memsw =>
            {
                return Self::open_psi_only(cgroup, opts.psi.as_deref().expect("checked"));
            }
            (_, false, false) => {
                let why = if has("memory.pressure") {
                    " (a cgroup v2 group without the memory controller: only memory.pressure, \
                     which a PSI-only watch can use: --psi SPEC without --threshold)"
                } else {
                    ""
                };
                return Err(WatchError::flag(
                    "--cgroup",
                    cgroup.display(),
                    format!(
                        "no memory controller here: neither cgroup v1 (cgroup.event_control + \
                         memory.usage_in_bytes) nor cgroup v2 (memory.current){why}"
                    ),
                ));
            }
            (choice, _, _) => {
                return Err(WatchError::flag(
                    "--backend",
                    format!("{choice:?}"),
                    format!(
                        "{} is a cgroup {} memory group",
                        cgroup.display(),
                        if v1 { "v1" } else { "v2" }
                    ),
                ))
            }
        };
        let is_v1 = v1 && backend != Backend::V2;
        let (usage_file, limit_file) = match (is_v1, opts.memsw) {
            (true, false) => ("memory.usage_in_bytes", "memory.limit_in_bytes"),
            (true, true) => ("memory.memsw.usage_in_bytes", "memory.memsw.limit_in_bytes"),
            (false, false) => ("memory.current", "memory.max"),
            (false, true) => {
                return Err(WatchError::bare_flag(
                    "--memsw",
                    "only for cgroup v1 (v2 keeps swap apart in memory.swap.current)",
                ))
            }
        };
        let usage_path = cgroup.join(usage_file);
        if !usage_path.exists() {
            return Err(WatchError::bare_flag(
                "--memsw",
                format!(
                    "{} is missing (it needs swap accounting)",
                    usage_path.display()
                ),
            ));
        }
        let (limit, limit_path) = effective_limit(cgroup, limit_file)?;
        let own_limit = limit_path == cgroup.join(limit_file);
        if backend != Backend::V2 {
            let v2_only = "a cgroup v2 option (use the v2 backend)";
            if opts.high.is_some() {
                return Err(WatchError::bare_flag("--high", v2_only));
            }
            if opts.psi.is_some() {
                return Err(WatchError::bare_flag("--psi", v2_only));
            }
            if opts.thresholds.is_empty() {
                return Err(WatchError::bare_flag("--threshold", "give at least one"));
            }
        }
        let mut lines = Vec::new();
        for t in &opts.thresholds {
            let bad = |msg: String| WatchError::flag("--threshold", t, msg);
            let bytes = t.resolve(limit).ok_or_else(|| {
                bad(format!(
                    "a percentage needs a memory limit, and neither {} nor any ancestor's \
                     {limit_file} has one",
                    cgroup.join(limit_file).display()
                ))
            })?;
            if bytes == 0 {
                return Err(bad("resolves to 0 bytes".into()));
            }
            if let Some(l) = limit.filter(|&l| bytes > l) {
                return Err(bad(format!(
                    "{bytes} bytes is above the group's limit of {l} bytes ({})",
                    limit_path.display()
                )));
            }
            lines.push(Line {
                label: t.to_string(),
                bytes,
            });
        }
        lines.sort_by_key(|l| l.bytes);
        lines.dedup_by_key(|l| l.bytes);

        let stop = stop_handle()?;
        let mut w = MemoryThresholdWatcher {
            cgroup: cgroup.to_path_buf(),
            backend,
            describe: String::new(),
            above: vec![false; lines.len()],
            reported: vec![false; lines.len()],
            pending: vec![None; lines.len()],
            debounce: opts.debounce,
            lines,
            limit,
            // Kept open on a cgroup filesystem; a test's fake tree is read afresh each time.
            usage: Some(KeptFile::new(usage_path, check_fs)),
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
                // The kernel takes a threshold on the fd of the usage file, and keeps no hold on
                // that fd once the registration is written.
                let usage_path = cgroup.join(usage_file);
                let usage_fd = fs::File::open(&usage_path)
                    .map_err(|e| colosched_sys::Error::io(&usage_path, e))?;
                let n = w.lines.len();
                for i in 0..n {
                    let line = w.lines[i].clone();
                    // The kernel fixes the threshold's side from usage at registration. Usage read
                    // just before and just after on one side tells it; on both sides (usage was
                    // crossing it meanwhile) it does not: register again, with a fresh eventfd.
                    for attempt in 1.. {
                        let efd = sys::eventfd().map_err(|source| WatchError::Call {
                            what: format!("threshold {} of {n} ({})", i + 1, line.label),
                            call: "eventfd",
                            source,
                        })?;
                        let msg = format!(
                            "{} {} {}",
                            efd.as_raw_fd(),
                            usage_fd.as_raw_fd(),
                            line.bytes
                        );
                        let before = w.usage_now()?;
                        fs::write(&control, &msg).map_err(|source| WatchError::Refused {
                            flag: "--threshold",
                            path: control.clone(),
                            what: format!(
                                "threshold {} of {n} ({} = {} bytes)",
                                i + 1,
                                line.label,
                                line.bytes
                            ),
                            source,
                        })?;
                        let after = w.usage_now()?;
                        match side_at_registration(before, after, line.bytes) {
                            Some(above) => {
                                w.above[i] = above;
                                w.v1_fds.push(efd);
                                break;
                            }
                            // Closing the eventfd unregisters it.
                            None if attempt < REGISTER_ATTEMPTS => drop(efd),
                            None => {
                                return Err(WatchError::flag(
                                    "--threshold",
                                    &line.label,
                                    format!(
                                        "usage kept crossing it ({} bytes) during \
                                         {REGISTER_ATTEMPTS} registrations, its side is unknown",
                                        line.bytes
                                    ),
                                ))
                            }
                        }
                    }
                }
                parts.push(format!(
                    "v1: {} eventfd threshold(s) on {} via cgroup.event_control",
                    w.lines.len(),
                    usage_file
                ));
            }
            Backend::V2 => {
                w.events = Some(v2::EventsWatch::open(cgroup)?);
                parts.push("v2: memory.events via poll(POLLPRI)".into());
                if let Some(h) = &opts.high {
                    let bytes = h.resolve(limit).ok_or_else(|| {
                        WatchError::flag(
                            "--high",
                            h,
                            "a percentage needs a memory limit, and the cgroup has none",
                        )
                    })?;
                    w.high = Some(v2::HighGuard::set(cgroup, bytes)?);
                    parts.push(format!("memory.high set to {bytes} (put back on exit)"));
                }
                if let Some(spec) = &opts.psi {
                    let p = cgroup.join("memory.pressure");
                    w.psi = Some(PsiTrigger::open(&p, spec)?);
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
            Backend::Psi => unreachable!("a PSI-only watch is made by open_psi_only"),
        }
        if let (false, Some(l)) = (own_limit, limit) {
            parts.push(format!(
                "the group has no limit of its own: the limit, and the base of percentages, is \
                 the nearest ancestor's, {l} bytes ({})",
                limit_path.display()
            ));
        }
        if let Some(d) = w.debounce {
            parts.push(format!(
                "debounce {} ms: a crossing is reported once usage stayed on its new side that long",
                d.as_secs_f64() * 1000.0
            ));
        }
        w.describe = parts.join("; ");
        if backend != Backend::V1 {
            // Polling compares each reading with the side it saw last: start from usage now.
            let usage = w.usage_now()?;
            for (i, line) in w.lines.iter().enumerate() {
                w.above[i] = usage >= line.bytes;
            }
        }
        w.reported.clone_from(&w.above);
        Ok(w)
    }

    /// A cgroup v2 group without the memory controller: a PSI trigger on `memory.pressure` and
    /// nothing else (no usage, no limit).
    fn open_psi_only(cgroup: &Path, spec: &str) -> Result<Self, WatchError> {
        let psi = PsiTrigger::open(&cgroup.join("memory.pressure"), spec)?;
        Ok(MemoryThresholdWatcher {
            cgroup: cgroup.to_path_buf(),
            backend: Backend::Psi,
            describe: format!(
                "psi: PSI trigger {spec:?} on memory.pressure only (a cgroup v2 group without \
                 the memory controller: no usage, no thresholds)"
            ),
            lines: Vec::new(),
            above: Vec::new(),
            limit: None,
            usage: None,
            v1_fds: Vec::new(),
            events: None,
            psi: Some(psi),
            high: None,
            poll_period: None,
            next_poll: Instant::now(),
            stop: stop_handle()?,
            finished: false,
            debounce: None,
            reported: Vec::new(),
            pending: Vec::new(),
        })
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
    pub fn read_usage(&mut self) -> Option<u64> {
        let mut buf = [0u8; 32];
        self.usage.as_mut()?.read(&mut buf)?.trim().parse().ok()
    }

    /// Usage now, while opening: an unreadable usage file is an error naming it.
    fn usage_now(&mut self) -> Result<u64, WatchError> {
        self.read_usage().ok_or_else(|| {
            let path = self.usage.as_ref().map(|u| u.path().to_path_buf());
            colosched_sys::Error::parse(path.unwrap_or_default(), "cannot be read").into()
        })
    }

    /// Waits up to `timeout` (None: until something happens) and returns the events, in the
    /// order they happened. An empty list means a timeout, an interrupted wait or a stop.
    /// A failure here (poll, a `memory.events` that makes no sense) is one of the system.
    pub fn wait(&mut self, timeout: Option<Duration>) -> Result<Vec<Event>, WatchError> {
        if self.finished {
            return Ok(Vec::new());
        }
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut fds = vec![(self.stop.0.as_fd(), PollFlags::IN)];
        fds.extend(self.v1_fds.iter().map(|f| (f.as_fd(), PollFlags::IN)));
        let events_at = fds.len();
        if let Some(e) = &self.events {
            fds.push((e.fd(), PollFlags::PRI));
        }
        let psi_at = fds.len();
        if let Some(p) = &self.psi {
            fds.push((p.fd(), PollFlags::PRI));
        }
        let mut wake = deadline;
        if self.poll_period.is_some() {
            wake = Some(wake.map_or(self.next_poll, |d| d.min(self.next_poll)));
        } else if matches!(self.backend, Backend::V2 | Backend::Psi) {
            // Nothing else would notice the group's removal: look once a second.
            let check = Instant::now() + Duration::from_secs(1);
            wake = Some(wake.map_or(check, |d| d.min(check)));
        }
        let confirm_at = self.next_confirmation();
        if let Some(c) = confirm_at {
            wake = Some(wake.map_or(c, |d| d.min(c)));
        }
        let ready = sys::poll(
            &fds,
            wake.map(|w| w.saturating_duration_since(Instant::now())),
        )
        .map_err(|source| WatchError::Call {
            what: "waiting for memory events".into(),
            call: "poll",
            source,
        })?;
        drop(fds);
        if !ready[0].is_empty() {
            sys::eventfd_drain(&self.stop.0);
            self.finish();
            return Ok(Vec::new());
        }
        let mut counts = vec![0u64; self.lines.len()];
        let mut any_v1 = false;
        for (i, f) in self.v1_fds.iter().enumerate() {
            if !ready[1 + i].is_empty() {
                counts[i] = sys::eventfd_drain(f);
                any_v1 |= counts[i] > 0;
            }
        }
        let events_ready = self.events.is_some() && !ready[events_at].is_empty();
        let psi_ready = self.psi.is_some() && !ready[psi_at].is_empty();
        // kernfs files poll POLLERR once their group is being removed, and then on every call:
        // that is the group going, not events. A PSI trigger polls POLLERR only then. But kernfs
        // also signals a change of memory.events as POLLERR | POLLPRI (kernfs_generic_poll), so
        // there only a failed read (ENODEV) means the group is gone.
        let err = |at: usize, open: bool| {
            open && ready[at].intersects(PollFlags::ERR | PollFlags::HUP | PollFlags::NVAL)
        };
        let events_gone = err(events_at, self.events.is_some())
            && !self.events.as_ref().is_some_and(|e| e.readable());
        if events_gone || err(psi_at, self.psi.is_some()) {
            return Ok(self.gone());
        }
        let poll_due = self.poll_period.is_some() && Instant::now() >= self.next_poll;
        let confirm_due = confirm_at.is_some_and(|c| Instant::now() >= c);
        if !(any_v1 || events_ready || psi_ready || poll_due || confirm_due) {
            // A timeout: a group removed without a wake-up (v2) is noticed here.
            if !self.cgroup.is_dir() {
                return Ok(self.gone());
            }
            return Ok(Vec::new());
        }
        let seen = Instant::now();
        let mono = sys::monotonic_ns();
        // No usage file only in a PSI-only watch; otherwise a failed read means the group is gone.
        let usage = self.read_usage();
        if !self.cgroup.is_dir() || (self.usage.is_some() && usage.is_none()) {
            return Ok(self.gone());
        }
        let mut out = Vec::new();
        // With a debounce, the lines crossed in this wake-up (their side is then held, or not).
        let mut touched = Vec::new();
        let debounced = self.debounce.is_some();
        if let (true, Some(usage)) = (any_v1, usage) {
            for (i, up) in order_crossings(&self.above, &counts) {
                self.above[i] = up;
                if debounced {
                    touched.push(i);
                } else {
                    out.push(self.crossing(i, up, usage, mono));
                }
            }
        }
        if let (Some(period), Some(usage)) = (self.poll_period.filter(|_| poll_due), usage) {
            self.next_poll = seen + period;
            for (i, up) in poll_crossings(&self.lines_bytes(), &self.above, usage) {
                self.above[i] = up;
                if debounced {
                    touched.push(i);
                } else {
                    out.push(self.crossing(i, up, usage, mono));
                }
            }
        }
        if let (true, Some(usage)) = (debounced, usage) {
            // A crossing (back) restarts the clock of its line; one back to the side last
            // reported cancels it: that state did not hold.
            for i in touched {
                self.pending[i] = (self.above[i] != self.reported[i]).then_some(seen);
            }
            out.extend(self.confirm_held(Instant::now(), usage, mono));
        }
        // memory.events is also re-read on each polling tick: a change POLLPRI missed (or a fake
        // tree in tests, where regular files never signal POLLPRI) is still reported.
        if events_ready || poll_due {
            if let Some(ev) = self.events.as_mut() {
                let diffs = ev.changes()?;
                let cg = Cgroupfs::new(&self.cgroup);
                for (name, n) in diffs {
                    let bytes = match name {
                        "high" => cg.limit("memory.high").ok().flatten(),
                        "max" => cg.limit("memory.max").ok().flatten(),
                        _ => None,
                    };
                    out.push(self.event(name.to_string(), bytes, Direction::Event, usage, n, mono));
                }
            }
        }
        if psi_ready {
            let label = format!("psi {}", self.psi.as_ref().expect("psi").spec());
            out.push(self.event(label, None, Direction::Event, usage, 1, mono));
        }
        Ok(out)
    }

    /// When the earliest pending crossing will have held for the debounce.
    fn next_confirmation(&self) -> Option<Instant> {
        let d = self.debounce?;
        self.pending.iter().flatten().min().map(|&since| since + d)
    }

    /// Debounce: the crossings whose new side has held since `debounce` ago, reported now (upward
    /// ones by ascending threshold, then downward ones by descending threshold).
    fn confirm_held(&mut self, now: Instant, usage: u64, mono: u64) -> Vec<Event> {
        let Some(d) = self.debounce else {
            return Vec::new();
        };
        let (mut ups, mut downs) = (Vec::new(), Vec::new());
        for i in 0..self.lines.len() {
            if self.pending[i].is_some_and(|since| now >= since + d) {
                self.pending[i] = None;
                self.reported[i] = self.above[i];
                if self.above[i] {
                    ups.push(i);
                } else {
                    downs.push(i);
                }
            }
        }
        downs.reverse();
        ups.iter()
            .map(|&i| self.crossing(i, true, usage, mono))
            .chain(downs.iter().map(|&i| self.crossing(i, false, usage, mono)))
            .collect()
    }

    fn lines_bytes(&self) -> Vec<u64> {
        self.lines.iter().map(|l| l.bytes).collect()
    }

    fn crossing(&self, i: usize, up: bool, usage: u64, mono: u64) -> Event {
        let dir = if up { Direction::Up } else { Direction::Down };
        let l = &self.lines[i];
        self.event(l.label.clone(), Some(l.bytes), dir, Some(usage), 1, mono)
    }

    fn event(
        &self,
        threshold: String,
        threshold_bytes: Option<u64>,
        direction: Direction,
        usage: Option<u64>,
        count: u64,
        monotonic_ns: u64,
    ) -> Event {
        Event {
            time: colosched_sys::now_unix(),
            monotonic_ns,
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
            sys::monotonic_ns(),
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
        self.usage = None;
        self.high = None; // HighGuard::drop writes the old value back
    }
}

impl Drop for MemoryThresholdWatcher {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::side_at_registration;

    #[test]
    fn the_side_is_known_only_when_usage_stayed_on_one_side_during_registration() {
        assert_eq!(side_at_registration(10, 20, 30), Some(false));
        assert_eq!(
            side_at_registration(30, 40, 30),
            Some(true),
            "at the threshold is above"
        );
        assert_eq!(
            side_at_registration(20, 40, 30),
            None,
            "crossed up meanwhile"
        );
        assert_eq!(
            side_at_registration(40, 20, 30),
            None,
            "crossed down meanwhile"
        );
    }
}
