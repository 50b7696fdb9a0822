//! Sensors: per-node pressure from LC work, read-only. Each reading compares the cumulative
//! counters now with those of one interval ago: the sensor samples `samples` times per interval
//! and keeps the last interval's snapshots, so a load step is seen a fraction of an interval
//! after it happens instead of at the end of the interval it fell in.
//!
//! - `steal`: steal ticks summed over the node's CPUs (thesis Algorithm 3-1).
//! - `busy`: LC demand. The LC *usage* is the node's busy ticks minus the BE threads' ticks
//!   (each BE thread attributed to the node of the CPU it last ran on): the CPU time of
//!   everything that is not BE. The LC *wait* is the time LC threads spent runnable on the
//!   node's run queues without a CPU: every non-BE thread's `run_delay` from its
//!   /proc/<pid>/task/<tid>/schedstat, attributed like BE time. The pressure is their sum, raw
//!   (it may exceed 1 when several LC threads wait at once). Usage alone is what LC *got*, which
//!   BE caps at LC's fair share: the more BE crowds LC, the less usage shows; the wait shows it.
//! - `psi`: `some avg10` of each node's LC cgroup2 `cpu.pressure`.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::sense::topology::Topology;
use colosched_sys::procfs::{CpuTicks, Procfs, TaskStat};
use colosched_sys::Cgroupfs;

/// `now - before` for a cumulative counter. A counter that went backwards wrapped at 32 bits
/// (32-bit kernels export `unsigned long`) if `before` fits in 32 bits; otherwise it was reset
/// (CPU hot-plug), and the interval counts as 0.
pub fn delta(now: u64, before: u64) -> u64 {
    if now >= before {
        now - before
    } else if before <= u32::MAX as u64 {
        (u32::MAX as u64 - before) + now + 1
    } else {
        0
    }
}

/// One node's pressure in one interval.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeReading {
    /// In the sensor's own unit: steal ticks, fraction of the node's CPUs, or PSI avg10 %.
    pub raw: f64,
    /// Normalised to the node's capacity (1.0 = all its CPUs); what the policy sees.
    pub load: f64,
    /// Steal ticks over the interval (reported whatever the sensor).
    pub steal: f64,
    /// Busy sensor: CPU time LC (everything not BE) ran on the node, a fraction of its CPUs.
    pub usage: Option<f64>,
    /// Busy sensor: time LC threads waited on the node's run queues, a fraction of its CPUs;
    /// `None` while not measured (no BE task ran in the last interval, see `LcWait`).
    pub wait: Option<f64>,
}

/// A BE task that used less than this share of a node's CPUs since the previous sample did not
/// run there.
pub const BE_IDLE: f64 = 0.01;

/// A wait shorter than this (ns, between two samples) is charged to the node the thread was last
/// seen on, without reading its stat file again for its last CPU.
const SHORT_WAIT_NS: u64 = 1_000_000;

/// An LC thread followed for its run-queue wait.
struct LcThread {
    pid: i32,
    /// `run_delay` at the last read, ns; `None` before the first read (its baseline).
    wait_ns: Option<u64>,
    /// The CPU it was last seen on when it had waited.
    cpu: Option<usize>,
    /// Whether its wait counts: a process not BE at one listing may be BE born after the BE
    /// pids were read (a fork storm's children); its wait counts from the next listing that still
    /// finds it not BE.
    counted: bool,
}

/// LC run-queue wait per node. The kernel here has no per-CPU wait (`/proc/schedstat` needs
/// `CONFIG_SCHEDSTATS`), so it is summed over the LC threads themselves: every thread of every
/// process that is not BE, listed from /proc once an interval, each read from its `schedstat`
/// at every sample. A thread whose wait grew is charged to the node its affinity lies in, else to
/// the node of the CPU it last ran on (half to each when that changed, as for BE threads; a wait
/// under 1 ms to the node it was last seen on).
///
/// It is measured only while some BE task ran in the last interval (BE used 1 % of a node between
/// two samples): otherwise BE crowds no LC thread, and moving BE could relieve no wait. That
/// keeps the agent's quiet cycles (BE asleep, or nothing over threshold) at their old cost.
#[derive(Default)]
struct LcWait {
    threads: HashMap<i32, LcThread>,
    /// Seconds of LC wait per node since measuring (re)started.
    total: Vec<f64>,
    /// Samples since the thread list was read; `None`: not measuring.
    since_refresh: Option<usize>,
    /// Listings since measuring (re)started. The first counts no thread yet, so the next
    /// sample lists again at once.
    listings: u32,
}

impl LcWait {
    fn stop(&mut self, procfs: &Procfs) {
        if self.since_refresh.is_some() {
            procfs.keep_schedstat_files(|_| false);
        }
        self.threads.clear();
        self.total.clear();
        self.since_refresh = None;
        self.listings = 0;
    }

    /// Reads every followed thread's wait (after listing them again if `refresh`) and returns
    /// the cumulative per-node totals.
    fn sample(
        &mut self,
        procfs: &Procfs,
        topo: &Topology,
        be_pids: &[i32],
        refresh: bool,
    ) -> Vec<f64> {
        if refresh || self.since_refresh.is_none() {
            let be: HashSet<i32> = be_pids.iter().copied().collect();
            // Not the agent: its own wait is its reading of the BE it moved, queued behind them.
            let me = std::process::id() as i32;
            let known: HashSet<i32> = self.threads.values().map(|t| t.pid).collect();
            let mut now = HashMap::with_capacity(self.threads.len());
            let lc = procfs
                .pids()
                .into_iter()
                .filter(|p| !be.contains(p) && *p != me);
            for pid in lc {
                for tid in procfs.tids(pid) {
                    let t = match self.threads.remove(&tid) {
                        Some(t) if t.pid == pid => LcThread { counted: true, ..t },
                        _ => LcThread {
                            pid,
                            wait_ns: None,
                            cpu: None,
                            counted: known.contains(&pid),
                        },
                    };
                    now.insert(tid, t);
                }
            }
            self.threads = now;
            // The kept schedstat files of threads gone or no longer LC are closed.
            procfs.keep_schedstat_files(|tid| self.threads.contains_key(&tid));
            self.since_refresh = Some(0);
            self.listings += 1;
        } else {
            self.since_refresh = self.since_refresh.map(|n| n + 1);
        }
        self.total.resize(topo.nodes.len(), 0.0);
        let (mut buf, mut stat_buf) = (String::new(), String::new());
        let total = &mut self.total;
        self.threads.retain(|&tid, t| {
            let Some(s) = procfs.task_schedstat(t.pid, tid, &mut buf) else {
                return false; // gone
            };
            let before = t.wait_ns.replace(s.wait_ns);
            // A first read is the baseline; a counter that went back is a reused tid.
            let waited = before.map_or(0, |b| s.wait_ns.saturating_sub(b));
            if waited == 0 || !t.counted {
                return true;
            }
            let secs = waited as f64 / 1e9;
            if topo.nodes.len() == 1 {
                total[0] += secs;
                return true;
            }
            if let Some(n) = procfs.affinity(tid).and_then(|m| topo.node_containing(&m)) {
                total[n] += secs;
                return true;
            }
            // Its last CPU costs a stat read (7 µs); a short wait goes where it was last seen.
            let cpu = match t.cpu {
                Some(c) if waited < SHORT_WAIT_NS => Some(c),
                _ => procfs
                    .task_stat(t.pid, tid, &mut stat_buf)
                    .map(|st| st.processor),
            };
            let last = cpu.and_then(|c| topo.node_of_cpu(c));
            let first = t.cpu.and_then(|c| topo.node_of_cpu(c)).or(last);
            for (node, share) in [(first, 0.5), (last, 0.5)] {
                if let Some(n) = node {
                    total[n] += secs * share;
                }
            }
            t.cpu = cpu.or(t.cpu);
            true
        });
        self.total.clone()
    }
}

/// Which pressure signal a node's load is read from (`auto` picks one at start-up).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SensorKind {
    Auto,
    Steal,
    Busy,
    Psi,
}

impl SensorKind {
    pub fn name(self) -> &'static str {
        match self {
            SensorKind::Auto => "auto",
            SensorKind::Steal => "steal",
            SensorKind::Busy => "busy",
            SensorKind::Psi => "psi",
        }
    }

    /// The threshold in the sensor's unit when the config gives none.
    pub fn default_threshold(self) -> f64 {
        match self {
            SensorKind::Steal => 50.0,
            SensorKind::Psi => 10.0,
            _ => 0.5,
        }
    }

    /// `auto` resolved: steal inside a VM (the host's load shows as steal), busy otherwise.
    pub fn resolve(self, procfs: &Procfs) -> (SensorKind, String) {
        match self {
            SensorKind::Auto if procfs.in_vm() => (
                SensorKind::Steal,
                "auto: the CPU flags say hypervisor, so steal time measures the host's load".into(),
            ),
            SensorKind::Auto => (
                SensorKind::Busy,
                "auto: not a VM (no hypervisor CPU flag), so LC demand (CPU time + run-queue wait) is the signal".into(),
            ),
            k => (k, "set in the config".into()),
        }
    }
}

/// The cumulative counters at one sample.
struct Snapshot {
    at_s: f64,
    stat: Vec<(usize, CpuTicks)>,
    /// BE CPU seconds per node since the sensor started (when it has a BE time source).
    be: Vec<f64>,
    /// LC wait seconds per node since measuring started, if measured at this sample.
    wait: Option<Vec<f64>>,
}

/// A BE process's cumulative ticks at a sample, and its threads' (ticks, last CPU) when it is
/// charged thread by thread (`None`: from its aggregate, being pinned inside one node).
struct ProcTicks {
    ticks: u64,
    threads: Option<HashMap<i32, (u64, usize)>>,
}

/// Keeps the last interval's counters and turns each new sample into per-node readings over
/// the interval that ends now.
pub struct Sensor {
    pub kind: SensorKind,
    /// Samples per interval: the window holds `samples + 1` snapshots.
    pub samples: usize,
    hz: f64,
    window: VecDeque<Snapshot>,
    be_total: Vec<f64>,
    /// BE load per node (fraction of its CPUs) between the last two samples, if BE time is known.
    pub recent_be: Option<Vec<f64>>,
    /// Per BE process, at the previous sample.
    prev_procs: HashMap<i32, ProcTicks>,
    /// Busy sensor without cpuacct: each BE process's /proc/<pid>/stat as read at the last
    /// sample, for a look in the same cycle (which would read them all again).
    pub stats: Vec<(i32, TaskStat)>,
    psi_cgroups: Vec<PathBuf>,
    /// Busy sensor: the BE cgroups' cpuacct directories, if every BE selector is such a cgroup.
    cpuacct: Vec<PathBuf>,
    prev_cpuacct: Vec<u64>,
    /// Busy sensor: LC wait is measured (off without `CONFIG_SCHED_INFO`).
    pub lc_wait_on: bool,
    lc_wait: LcWait,
    /// Samples taken, and the sample at which BE last ran (used `BE_IDLE` of some node).
    count: u64,
    be_ran_at: Option<u64>,
    /// The next sample lists the LC threads again, so it needs the BE pids.
    refresh_next: bool,
    /// LC wait is measured at every sample, BE running or not (`plan --once`: two samples).
    wait_always: bool,
    /// No reading before the window spans this long (seconds): a window of a tenth of a second
    /// holds 10 ticks per CPU at 100 Hz, so a CPU used 30 % can read 0.5 in it.
    pub min_span_s: f64,
}

impl Sensor {
    pub fn new(
        kind: SensorKind,
        hz: f64,
        psi_cgroups: Vec<PathBuf>,
        cpuacct: Vec<PathBuf>,
    ) -> Sensor {
        Sensor {
            kind,
            samples: 1,
            hz,
            window: VecDeque::new(),
            be_total: Vec::new(),
            recent_be: None,
            prev_procs: HashMap::new(),
            stats: Vec::new(),
            psi_cgroups,
            cpuacct,
            prev_cpuacct: Vec::new(),
            lc_wait_on: kind == SensorKind::Busy,
            lc_wait: LcWait::default(),
            count: 0,
            be_ran_at: None,
            refresh_next: false,
            wait_always: false,
            min_span_s: 0.0,
        }
    }

    /// Measures LC wait from the first sample on, whether BE runs or not: for `plan --once`,
    /// whose two samples leave no time to wait for BE to show up first.
    pub fn measure_wait_from_start(&mut self) {
        self.wait_always = true;
        self.refresh_next = self.lc_wait_on;
    }

    /// Whether the next sample needs the BE pids although `needs_be_pids` is false: it lists the
    /// LC threads (every thread of a process that is not BE) for their run-queue wait.
    pub fn wants_be_pids(&self) -> bool {
        self.refresh_next
    }

    /// Whether LC wait is measured at the sample with number `count`: BE ran within the last
    /// interval before it.
    fn lc_wait_due(&self, count: u64) -> bool {
        self.lc_wait_on
            && (self.wait_always
                || (self.be_ran_at).is_some_and(|at| count - at <= self.samples.max(1) as u64))
    }

    /// The per-thread busy sensor needs the BE pids every cycle; the others need none.
    pub fn needs_be_pids(&self) -> bool {
        self.kind == SensorKind::Busy && self.cpuacct.is_empty()
    }

    /// Samples per interval when the config gives none: 5 when a sample is cheap; 2 for the
    /// per-thread busy sensor, which reads every BE process's stat file at each sample. Two is the
    /// fewest that see a full-CPU load step over a 0.5 threshold within one interval.
    pub fn default_samples(&self) -> usize {
        if self.needs_be_pids() {
            2
        } else {
            5
        }
    }

    /// How the busy sensor learns the BE time (and the LC wait), for the start-up log.
    pub fn be_time_source(&self) -> String {
        let be = if self.cpuacct.is_empty() {
            "/proc/<pid>/stat, and the threads of processes that ran"
        } else {
            "cpuacct.usage_percpu of the BE cgroups"
        };
        let wait = if self.lc_wait_on {
            "LC wait from every non-BE thread's schedstat while BE runs"
        } else {
            "no LC wait (the kernel keeps no per-thread run_delay)"
        };
        format!("{be}; {wait}")
    }

    /// Per-node CPU seconds of the BE threads since the previous call, each thread attributed by the
    /// CPU it last ran on. A thread first seen now counts from 0 if its process was seen before
    /// (it was born in this interval); a newly selected process counts nothing in its first
    /// interval (its past is not this interval's).
    ///
    /// Each process's aggregate /proc/<pid>/stat (a kept file) is read first. A process whose time
    /// did not move ran no thread: nothing is charged and its threads are not read, so idle BE
    /// processes cost one read each. A process pinned inside one node runs all its threads there
    /// (new ones inherit the mask): its aggregate is charged to that node. The sample at which it
    /// became pinned (the agent just moved it) still reads its threads, as the previous sample
    /// did, so that interval is charged too.
    fn be_seconds_from_threads(
        &mut self,
        procfs: &Procfs,
        topo: &Topology,
        pids: &[i32],
    ) -> Vec<f64> {
        let mut per_node = vec![0.0; topo.nodes.len()];
        let mut now = HashMap::with_capacity(self.prev_procs.len());
        let mut buf = String::new();
        self.stats.clear();
        for &pid in pids {
            let Some(st) = procfs.proc_stat(pid, &mut buf) else {
                continue;
            };
            let prev = match self.prev_procs.remove(&pid) {
                Some(p) if p.ticks == st.cpu_ticks => {
                    now.insert(pid, p);
                    self.stats.push((pid, st));
                    continue;
                }
                prev => prev,
            };
            let pinned = procfs.affinity(pid).and_then(|m| topo.node_containing(&m));
            let by_threads = prev.as_ref().and_then(|p| p.threads.as_ref());
            let threads = match pinned {
                Some(n) if by_threads.is_none() => {
                    if let Some(p) = &prev {
                        per_node[n] += delta(st.cpu_ticks, p.ticks) as f64 / self.hz;
                    }
                    None
                }
                _ => {
                    let mut seen = HashMap::new();
                    for tid in procfs.tids(pid) {
                        let Some(t) = procfs.task_stat(pid, tid, &mut buf) else {
                            continue;
                        };
                        let (before, was_on) = match by_threads.map(|m| m.get(&tid)) {
                            Some(Some(&(ticks, cpu))) => (ticks, Some(cpu)),
                            Some(None) => (0, None),
                            None => (t.cpu_ticks, None),
                        };
                        let secs = delta(t.cpu_ticks, before) as f64 / self.hz;
                        // A thread seen on another node at the previous sample hopped during the
                        // interval: half its time goes to each node (last-CPU attribution alone
                        // can make the LC node look idle and a BE-only node look pressured).
                        let last = topo.node_of_cpu(t.processor);
                        let first = was_on.and_then(|c| topo.node_of_cpu(c)).or(last);
                        for (node, share) in [(first, 0.5), (last, 0.5)] {
                            if let Some(n) = node {
                                per_node[n] += secs * share;
                            }
                        }
                        seen.insert(tid, (t.cpu_ticks, t.processor));
                    }
                    pinned.is_none().then_some(seen)
                }
            };
            let ticks = st.cpu_ticks;
            now.insert(pid, ProcTicks { ticks, threads });
            self.stats.push((pid, st));
        }
        self.prev_procs = now;
        per_node
    }

    /// Per-node CPU seconds of the BE cgroups from cpuacct.usage_percpu (one read per cgroup instead of
    /// one per thread), since the previous call.
    fn be_seconds_from_cpuacct(&mut self, topo: &Topology) -> Result<Vec<f64>> {
        let mut per_cpu: Vec<u64> = Vec::new();
        for dir in &self.cpuacct {
            let path = dir.join("cpuacct.usage_percpu");
            let text = Cgroupfs::new(dir).read("cpuacct.usage_percpu")?;
            for (cpu, v) in text.split_whitespace().enumerate() {
                let ns: u64 = v
                    .parse()
                    .map_err(|_| Error::read(&path, format!("bad number {v:?}")))?;
                if per_cpu.len() <= cpu {
                    per_cpu.resize(cpu + 1, 0);
                }
                per_cpu[cpu] += ns;
            }
        }
        let mut per_node = vec![0.0; topo.nodes.len()];
        for (cpu, &ns) in per_cpu.iter().enumerate() {
            let before = self.prev_cpuacct.get(cpu).copied().unwrap_or(ns);
            if let Some(n) = topo.node_of_cpu(cpu) {
                per_node[n] += delta(ns, before) as f64 / 1e9;
            }
        }
        self.prev_cpuacct = per_cpu;
        Ok(per_node)
    }

    /// Reads the counters at `now_s` (seconds on a monotonic clock) and returns per-node readings
    /// over the window since the oldest snapshot kept (one interval once the window is full), or
    /// `None` on the first call (nothing to compare with yet). BE time comes from cpuacct
    /// whatever the sensor, when the BE cgroups have it; from the threads for the busy sensor.
    pub fn sample(
        &mut self,
        procfs: &Procfs,
        topo: &Topology,
        be_pids: &[i32],
        now_s: f64,
    ) -> Result<Option<Vec<NodeReading>>> {
        let stat = procfs.stat()?;
        let be_step = if !self.cpuacct.is_empty() {
            Some(self.be_seconds_from_cpuacct(topo)?)
        } else if self.kind == SensorKind::Busy {
            Some(self.be_seconds_from_threads(procfs, topo, be_pids))
        } else {
            None
        };
        self.be_total.resize(topo.nodes.len(), 0.0);
        if let Some(step) = &be_step {
            for (t, s) in self.be_total.iter_mut().zip(step) {
                *t += s;
            }
        }
        let last_s = self.window.back().map(|s| s.at_s);
        self.recent_be = be_step.zip(last_s).map(|(step, at)| {
            let dt = (now_s - at).max(1e-3);
            (step.iter().zip(&topo.nodes))
                .map(|(s, node)| s / (dt * node.cpus.len() as f64))
                .collect()
        });
        if (self.recent_be.iter().flatten()).any(|&b| b >= BE_IDLE) {
            self.be_ran_at = Some(self.count);
        }
        // Listing the LC threads needs the BE pids: passed when asked for (`wants_be_pids`), or
        // at every sample by the per-thread sensor, which can thus start measuring at once.
        let refresh = std::mem::take(&mut self.refresh_next);
        let can_list = refresh || self.needs_be_pids() || self.lc_wait.since_refresh.is_some();
        let wait = if self.lc_wait_due(self.count) && can_list {
            Some(self.lc_wait.sample(procfs, topo, be_pids, refresh))
        } else {
            self.lc_wait.stop(procfs);
            None
        };
        self.count += 1;
        // The LC threads are listed again once an interval (new threads are followed from then),
        // and right after the first listing, which counted none.
        let lc = &self.lc_wait;
        let due = lc.listings == 1 || lc.since_refresh.is_none_or(|n| n + 1 >= self.samples);
        self.refresh_next = self.lc_wait_due(self.count) && due;
        self.window.push_back(Snapshot {
            at_s: now_s,
            stat,
            be: self.be_total.clone(),
            wait,
        });
        while self.window.len() > self.samples.max(1) + 1 {
            self.window.pop_front();
        }
        let (first, last) = (&self.window[0], &self.window[self.window.len() - 1]);
        if self.window.len() < 2 || last.at_s - first.at_s < self.min_span_s {
            return Ok(None);
        }
        let (stat, dt_s) = (&last.stat, last.at_s - first.at_s);
        // LC wait over the samples that measured it, back from now (the whole window once it has
        // been measured for an interval); none if only this sample did.
        let measured = self.window.iter().rev().take_while(|s| s.wait.is_some());
        let wait_from = measured.last().filter(|s| s.at_s < last.at_s);
        let before: HashMap<usize, CpuTicks> = first.stat.iter().copied().collect();
        let mut out = Vec::with_capacity(topo.nodes.len());
        for (n, node) in topo.nodes.iter().enumerate() {
            let (mut steal, mut busy, mut total) = (0u64, 0u64, 0u64);
            let (mut usage, mut wait) = (None, None);
            for (cpu, now) in stat.iter().filter(|(c, _)| node.cpus.contains(*c)) {
                let b = before.get(cpu).copied().unwrap_or(*now);
                steal += delta(now.steal, b.steal);
                busy += delta(now.busy(), b.busy());
                total += delta(now.total(), b.total());
            }
            // Fractions of the ticks the node accounted, not of wall time: a guest can lose timer
            // ticks (under qemu TCG about half), while task CPU times stay exact. BE time is exact,
            // so it is a fraction of wall time.
            let wall = dt_s.max(1e-3) * node.cpus.len() as f64;
            let ticks = if total > 0 {
                total as f64
            } else {
                self.hz * wall
            };
            let (raw, load) = match self.kind {
                SensorKind::Steal => (steal as f64, steal as f64 / ticks),
                SensorKind::Busy => {
                    let be_s = last.be[n] - first.be[n];
                    let lc = (busy as f64 / ticks - be_s / wall).max(0.0);
                    usage = Some(lc);
                    wait = wait_from.and_then(|from| {
                        let (a, b) = (from.wait.as_ref()?, last.wait.as_ref()?);
                        let span = (last.at_s - from.at_s) * node.cpus.len() as f64;
                        Some((b[n] - a[n]) / span)
                    });
                    // Raw: LC threads waiting side by side can take it over 1 per CPU.
                    let pressure = lc + wait.unwrap_or(0.0);
                    (pressure, pressure)
                }
                SensorKind::Psi => {
                    let p = self
                        .psi_cgroups
                        .get(n)
                        .map(|cg| read_psi_avg10(cg))
                        .transpose()?
                        .unwrap_or(0.0);
                    (p, p / 100.0)
                }
                SensorKind::Auto => unreachable!("auto is resolved before sampling"),
            };
            out.push(NodeReading {
                raw,
                load,
                steal: steal as f64,
                usage,
                wait,
            });
        }
        Ok(Some(out))
    }
}

/// `some avg10=` of `<cgroup>/cpu.pressure` (percent of time some task was stalled on CPU).
pub fn read_psi_avg10(cgroup: &Path) -> Result<f64> {
    let path = cgroup.join("cpu.pressure");
    let text = Cgroupfs::new(cgroup).read("cpu.pressure")?;
    text.lines()
        .find(|l| l.starts_with("some "))
        .and_then(|l| l.split_whitespace().find_map(|f| f.strip_prefix("avg10=")))
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| Error::read(&path, "no 'some avg10=' field"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake;
    use crate::sense::select::Selector;
    use std::fs;

    /// Per CPU (user ticks, steal ticks); idle fills up to `total` ticks per CPU.

    #[test]
    fn delta_handles_wrap_and_reset() {
        assert_eq!(delta(10, 4), 6);
        assert_eq!(delta(5, u32::MAX as u64 - 4), 10, "32-bit wrap");
        assert_eq!(delta(5, 1 << 40), 0, "reset counts as nothing");
    }

    #[test]
    fn steal_per_node_over_interval() {
        let dir = tempfile::tempdir().unwrap();
        let p = Procfs::new(dir.path());
        let topo = Topology::pseudo(&["0-1".into(), "2-3".into()]).unwrap();
        fake::stat(dir.path(), 1000, &[(0, 0), (0, 10), (0, 0), (0, 0)]);
        let mut s = Sensor::new(SensorKind::Steal, 100.0, vec![], vec![]);
        assert!(
            s.sample(&p, &topo, &[], 0.0).unwrap().is_none(),
            "first sample has no interval"
        );
        fake::stat(dir.path(), 1200, &[(0, 30), (0, 40), (0, 5), (0, 0)]);
        let r = s.sample(&p, &topo, &[], 2.0).unwrap().unwrap();
        assert_eq!(r[0].raw, 60.0);
        assert_eq!(r[1].raw, 5.0);
        assert!((r[0].load - 60.0 / 400.0).abs() < 1e-12);
    }

    #[test]
    fn busy_subtracts_be_threads_by_last_cpu() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let topo = Topology::pseudo(&["0".into(), "1".into()]).unwrap();
        let p = Procfs::new(root);
        fake::process(root, 50, "be", 0, 0, 1000);
        let cg = root.join("cg");
        fs::create_dir_all(&cg).unwrap();
        fs::write(cg.join("cgroup.procs"), "50\n").unwrap();
        let mut sel = Selector {
            cgroups: vec![cg],
            comm: None,
            pid_files: vec![],
            all: false,
            ..Default::default()
        };
        let mut s = Sensor::new(SensorKind::Busy, 100.0, vec![], vec![]);
        fake::stat(root, 1000, &[(0, 0), (0, 0)]);
        s.sample(&p, &topo, &sel.candidates(&p).0, 0.0).unwrap();
        // One second later: CPU 0 ran 100 ticks, 60 of them the BE thread; CPU 1 ran 20 ticks.
        fake::process(root, 50, "be", 0, 0, 1060);
        fake::stat(root, 1100, &[(100, 0), (20, 0)]);
        let r = s
            .sample(&p, &topo, &sel.candidates(&p).0, 1.0)
            .unwrap()
            .unwrap();
        assert!((r[0].load - 0.4).abs() < 1e-12, "{r:?}");
        assert!((r[1].load - 0.2).abs() < 1e-12, "{r:?}");
        // Next second the thread is found on CPU 1: it hopped, so its 40 ticks split 20/20.
        fake::process(root, 50, "be", 0, 1, 1100);
        fake::stat(root, 1200, &[(150, 0), (70, 0)]);
        let r = s
            .sample(&p, &topo, &sel.candidates(&p).0, 2.0)
            .unwrap()
            .unwrap();
        assert!((r[0].load - 0.3).abs() < 1e-12, "{r:?}");
        assert!((r[1].load - 0.3).abs() < 1e-12, "{r:?}");
    }

    /// Two one-CPU nodes; BE process `pid` last on `cpu` with `ticks` and affinity `mask`; the
    /// busy sensor's first sample, at time 0 over idle CPUs.
    fn first_busy_sample(
        root: &Path,
        pid: i32,
        cpu: usize,
        ticks: u64,
        mask: &str,
    ) -> (Topology, Procfs, Sensor) {
        let topo = Topology::pseudo(&["0".into(), "1".into()]).unwrap();
        let p = Procfs::new(root);
        fake::process(root, pid, "be", 0, cpu, ticks);
        fake::allowed(root, pid, mask);
        let mut s = Sensor::new(SensorKind::Busy, 100.0, vec![], vec![]);
        fake::stat(root, 1000, &[(0, 0), (0, 0)]);
        s.sample(&p, &topo, &[pid], 0.0).unwrap();
        (topo, p, s)
    }

    #[test]
    fn a_process_pinned_to_a_node_is_charged_there_from_its_aggregate_stat() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        // Its main thread last ran on CPU 0 (a stale value), but its mask is CPU 1 only.
        let (topo, p, mut s) = first_busy_sample(root, 60, 0, 500, "1");
        fake::process(root, 60, "be", 0, 0, 540);
        fake::stat(root, 1100, &[(50, 0), (90, 0)]);
        let r = s.sample(&p, &topo, &[60], 1.0).unwrap().unwrap();
        assert!((r[0].load - 0.5).abs() < 1e-12, "{r:?}");
        assert!((r[1].load - 0.5).abs() < 1e-12, "{r:?}");
    }

    #[test]
    fn the_interval_a_process_gets_pinned_in_is_still_charged() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let (topo, p, mut s) = first_busy_sample(root, 70, 1, 500, "0-1");
        // Unpinned, it ran 80 ticks on CPU 1; then the agent pinned it there.
        fake::process(root, 70, "be", 0, 1, 580);
        fake::allowed(root, 70, "1");
        fake::stat(root, 1100, &[(0, 0), (80, 0)]);
        let r = s.sample(&p, &topo, &[70], 1.0).unwrap().unwrap();
        assert!(
            r[1].load.abs() < 1e-12,
            "its 80 ticks are BE, not LC: {r:?}"
        );
        // From then on its aggregate stat: 30 more ticks.
        fake::process(root, 70, "be", 0, 1, 610);
        fake::stat(root, 1200, &[(0, 0), (110, 0)]);
        let r = s.sample(&p, &topo, &[70], 2.0).unwrap().unwrap();
        assert!(r[1].load.abs() < 1e-12, "{r:?}");
        let p70 = &s.prev_procs[&70];
        assert!(p70.threads.is_none() && p70.ticks == 610);
    }

    #[test]
    fn an_idle_process_keeps_its_threads_unread() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let (topo, p, mut s) = first_busy_sample(root, 80, 0, 500, "0-1");
        // Its time did not move: its thread list is not read (gone here, it would be forgotten).
        fs::remove_dir_all(root.join("80/task")).unwrap();
        fake::stat(root, 1100, &[(50, 0), (0, 0)]);
        let r = s.sample(&p, &topo, &[80], 1.0).unwrap().unwrap();
        assert!((r[0].load - 0.5).abs() < 1e-12, "{r:?}");
        // Then its thread runs 60 ticks on CPU 0, charged from the baseline kept at 500.
        fake::process(root, 80, "be", 0, 0, 560);
        fake::stat(root, 1200, &[(150, 0), (0, 0)]);
        let r = s.sample(&p, &topo, &[80], 2.0).unwrap().unwrap();
        assert!((r[0].load - 0.4).abs() < 1e-12, "{r:?}");
    }

    #[test]
    fn busy_with_cpuacct_reads_one_file_per_cgroup() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let topo = Topology::pseudo(&["0".into(), "1".into()]).unwrap();
        let p = Procfs::new(root);
        let acct = root.join("cpuacct-be");
        fs::create_dir_all(&acct).unwrap();
        let mut s = Sensor::new(SensorKind::Busy, 100.0, vec![], vec![acct.clone()]);
        fs::write(
            acct.join("cpuacct.usage_percpu"),
            "1000000000 5000000000 \n",
        )
        .unwrap();
        fake::stat(root, 1000, &[(0, 0), (0, 0)]);
        s.sample(&p, &topo, &[], 0.0).unwrap();
        // 0.6 s of BE time on CPU 0, 0.1 s on CPU 1.
        fs::write(
            acct.join("cpuacct.usage_percpu"),
            "1600000000 5100000000 \n",
        )
        .unwrap();
        fake::stat(root, 1100, &[(100, 0), (20, 0)]);
        let r = s.sample(&p, &topo, &[], 1.0).unwrap().unwrap();
        assert!((r[0].load - 0.4).abs() < 1e-12, "{r:?}");
        assert!((r[1].load - 0.1).abs() < 1e-12, "{r:?}");
        fs::write(acct.join("cpuacct.usage_percpu"), "x\n").unwrap();
        assert!(s
            .sample(&p, &topo, &[], 2.0)
            .unwrap_err()
            .to_string()
            .contains("cpuacct.usage_percpu"));
    }

    /// Two one-CPU nodes; BE process 50 in a cgroup with cpuacct (BE time `ns0` on CPU 0); LC
    /// process 30 with thread 30 pinned to CPU 0 and thread 31 unpinned, last on CPU 1.
    struct WaitScene {
        dir: tempfile::TempDir,
        topo: Topology,
        p: Procfs,
        s: Sensor,
        t: f64,
        busy: [u64; 2],
        /// The BE pids the selector finds.
        be: Vec<i32>,
    }

    impl WaitScene {
        fn new() -> WaitScene {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path();
            fake::process(root, 50, "be", 0, 0, 100);
            fake::process(root, 30, "lc", 0, 0, 100);
            fake::allowed(root, 30, "0");
            fake::thread(root, 30, 30, 0, 0);
            fake::thread(root, 30, 31, 1, 0);
            fake::thread(root, 50, 50, 0, 0);
            let acct = root.join("acct");
            fs::create_dir_all(&acct).unwrap();
            fs::write(acct.join("cpuacct.usage_percpu"), "0 0\n").unwrap();
            let topo = Topology::pseudo(&["0".into(), "1".into()]).unwrap();
            let mut s = Sensor::new(SensorKind::Busy, 100.0, vec![], vec![acct]);
            s.samples = 2;
            WaitScene {
                p: Procfs::new(root),
                dir,
                topo,
                s,
                t: 0.0,
                busy: [0, 0],
                be: vec![50],
            }
        }

        /// One sample 0.5 s after the last: CPU busy ticks, BE ns on CPU 0 (cumulative), and
        /// the waits (cumulative ns) of threads 30, 31 and of the BE thread 50.
        fn step(&mut self, busy: [u64; 2], be_ns: u64, waits: [u64; 3]) -> Vec<NodeReading> {
            let root = self.dir.path();
            for (tid, pid, w) in [(30, 30, waits[0]), (31, 30, waits[1]), (50, 50, waits[2])] {
                let path = root.join(format!("{pid}/task/{tid}/schedstat"));
                fs::write(path, format!("1000 {w} 4\n")).unwrap();
            }
            let acct = root.join("acct/cpuacct.usage_percpu");
            fs::write(acct, format!("{be_ns} 0\n")).unwrap();
            self.busy[0] += busy[0];
            self.busy[1] += busy[1];
            let total = 1000 + (self.t * 100.0) as u64;
            fake::stat(root, total, &[(self.busy[0], 0), (self.busy[1], 0)]);
            let pids = if self.s.wants_be_pids() {
                self.be.clone()
            } else {
                vec![]
            };
            let r = self.s.sample(&self.p, &self.topo, &pids, self.t).unwrap();
            self.t += 0.5;
            r.unwrap_or_default()
        }
    }

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-9)
    }

    #[test]
    fn lc_wait_is_added_to_lc_usage_per_node_and_be_wait_is_not() {
        let mut w = WaitScene::new();
        // The agent itself, pinned to CPU 0: its wait is never LC wait.
        let me = std::process::id() as i32;
        fake::thread(w.dir.path(), me, me, 0, 0);
        fake::allowed(w.dir.path(), me, "0");
        w.step([0, 0], 0, [0, 0, 0]);
        assert!(!w.s.wants_be_pids(), "no BE ran yet: no LC thread is read");
        // LC and BE share CPU 0 half and half (0.25 s of BE in 0.5 s): the gate opens.
        let r = w.step([50, 0], 250_000_000, [0, 0, 0]);
        assert!(close(r[0].usage, 0.5) && r[0].wait.is_none(), "{r:?}");
        assert!(w.s.wants_be_pids(), "the next sample lists the LC threads");
        // That sample takes the threads' baselines (what they waited before is not counted).
        let r = w.step([50, 0], 500_000_000, [7_000_000_000, 5, 9]);
        assert!(r[0].wait.is_none(), "{r:?}");
        // Then thread 30 (pinned to CPU 0) waits 0.25 s, thread 31 (last on CPU 1) 0.1 s,
        // and the BE thread 0.3 s, which is not LC wait; nor are the agent's 0.2 s.
        let own = w.dir.path().join(format!("{me}/task/{me}/schedstat"));
        fs::write(own, "1000 200000000 4\n").unwrap();
        let r = w.step(
            [50, 20],
            750_000_000,
            [7_250_000_000, 100_000_005, 300_000_009],
        );
        assert!(close(r[0].usage, 0.5), "{r:?}");
        assert!(close(r[0].wait, 0.5), "0.25 s in 0.5 s: {r:?}");
        assert!(close(r[1].wait, 0.2), "{r:?}");
        assert!((r[0].load - 1.0).abs() < 1e-9 && r[0].raw == r[0].load);
        assert!(
            (r[1].load - 0.4).abs() < 1e-9,
            "usage 0.2 + wait 0.2: {r:?}"
        );
    }

    #[test]
    fn a_process_counts_once_a_second_listing_finds_it_not_be() {
        // BE runs from the second sample. Processes 60 (BE) and 61 (LC) appear before the first
        // listing, 62 (BE) before the second, all pinned to CPU 0; 60 and 62 were forked after
        // the selector read the BE pids, which name them from the next cycle on. Every one of
        // them and LC thread 30 waits 0.1 s at every sample.
        let mut w = WaitScene::new();
        let root = w.dir.path().to_path_buf();
        w.step([0, 0], 0, [0, 0, 0]);
        w.step([50, 0], 250_000_000, [0, 0, 0]);
        let mut seen = Vec::new();
        for (i, born) in [vec![60, 61], vec![62], vec![], vec![]]
            .into_iter()
            .enumerate()
        {
            for pid in born {
                fake::thread(&root, pid, pid, 0, 0);
                fake::allowed(&root, pid, "0");
            }
            let waited = i as u64 * 100_000_000;
            for pid in [60, 61, 62] {
                let path = root.join(format!("{pid}/task/{pid}/schedstat"));
                if path.exists() {
                    fs::write(path, format!("1 {waited} 2\n")).unwrap();
                }
            }
            let listing = w.s.wants_be_pids();
            let r = w.step([50, 0], 500_000_000 + waited * 5 / 2, [waited, 0, 0]);
            seen.push((listing, r[0].wait.map(|x| (x * 1e6).round() / 1e6)));
            w.be = [vec![50, 60], vec![50, 60, 62]][i.min(1)].clone();
        }
        // The first listing takes baselines and counts nobody; the next sample lists again, where
        // 60 is BE and dropped, and 30 and 61, still not BE, count their 0.1 s each: 0.2 s in
        // 0.5 s. 62, first listed there, does not count at the next sample (0.4 s in the
        // interval, 1 s, from 30 and 61) and is dropped at the listing after. Counting every
        // process not BE at its listing would read 0.6 and 0.5.
        assert_eq!(
            seen,
            [
                (true, None),
                (true, Some(0.4)),
                (false, Some(0.4)),
                (true, Some(0.4))
            ]
        );
    }

    #[test]
    fn lc_wait_is_reported_raw_above_one_per_cpu() {
        // Thread 30 and a new thread 32, both pinned to CPU 0 (process 30's mask), wait behind
        // BE for 0.4 s each of a 0.5 s interval: LC demand is 0.2 + 1.6 = 1.8 CPUs of a 1-CPU node.
        let mut w = WaitScene::new();
        let root = w.dir.path().to_path_buf();
        fake::thread(&root, 30, 32, 0, 0);
        // /proc/32 exists for a thread too (hidden from listings): it names its process.
        fake::write(
            &root.join("32/status"),
            "Tgid:\t30\nCpus_allowed_list:\t0\n",
        );
        w.step([0, 0], 0, [0, 0, 0]);
        w.step([50, 0], 250_000_000, [0, 0, 0]);
        w.step([50, 0], 650_000_000, [0, 0, 0]);
        fs::write(root.join("30/task/32/schedstat"), "1 400000000 2\n").unwrap();
        let r = w.step([50, 0], 1_050_000_000, [400_000_000, 0, 0]);
        assert!(close(r[0].usage, 0.2), "{r:?}");
        assert!(close(r[0].wait, 1.6), "{r:?}");
        assert!((r[0].load - 1.8).abs() < 1e-9, "not clipped to 1: {r:?}");
    }

    #[test]
    fn lc_wait_stops_an_interval_after_be_stops_and_restarts_from_a_new_baseline() {
        let mut w = WaitScene::new();
        w.step([0, 0], 0, [0, 0, 0]);
        w.step([50, 0], 250_000_000, [0, 0, 0]);
        w.step([50, 0], 500_000_000, [0, 0, 0]);
        let r = w.step([50, 0], 750_000_000, [100_000_000, 0, 0]);
        assert!(close(r[0].wait, 0.2), "{r:?}");
        // BE stops (its time stays at 0.75 s) while thread 30 waits 50 ms a sample: two more
        // samples (one interval) measure the wait over the last interval (0.15 s, then 0.1 s in
        // 1 s), then it is not measured.
        let mut waits = Vec::new();
        for i in 1..=4u64 {
            let r = w.step([100, 0], 750_000_000, [100_000_000 + i * 50_000_000, 0, 0]);
            waits.push(r[0].wait.map(|x| (x * 1e6).round() / 1e6));
        }
        assert_eq!(waits, [Some(0.15), Some(0.1), None, None]);
        assert!(!w.s.wants_be_pids());
        // BE runs again: after one sample to list the threads, the wait is back, counted from
        // the new baseline (250 ms then), not from before.
        w.step([50, 0], 1_000_000_000, [250_000_000, 0, 0]);
        assert!(w.s.wants_be_pids());
        let r = w.step([50, 0], 1_250_000_000, [260_000_000, 0, 0]);
        assert!(r[0].wait.is_none(), "baseline sample: {r:?}");
        let r = w.step([50, 0], 1_500_000_000, [310_000_000, 0, 0]);
        assert!(close(r[0].wait, 0.1), "{r:?}");
    }

    #[test]
    fn plan_once_measures_lc_wait_from_its_first_sample() {
        // Two samples, BE never seen before: the first lists the LC threads, the second reads
        // their wait. BE's own wait stays out (its pid is passed at the first sample).
        let mut w = WaitScene::new();
        w.s.measure_wait_from_start();
        assert!(w.s.wants_be_pids());
        w.step([0, 0], 0, [10, 10, 10]);
        let r = w.step([50, 0], 250_000_000, [200_000_010, 10, 400_000_000]);
        assert!(close(r[0].wait, 0.4), "{r:?}");
        assert!(close(r[1].wait, 0.0), "{r:?}");
    }

    #[test]
    fn lc_wait_is_off_without_sched_info_and_for_other_sensors() {
        let mut w = WaitScene::new();
        w.s.lc_wait_on = false;
        for i in 0..5u64 {
            let r = w.step([50, 0], i * 250_000_000, [i * 100_000_000, 0, 0]);
            assert!(!w.s.wants_be_pids());
            assert!(r.iter().all(|n| n.wait.is_none()), "{r:?}");
        }
        assert!(!Sensor::new(SensorKind::Steal, 100.0, vec![], vec![]).lc_wait_on);
        assert!(Sensor::new(SensorKind::Busy, 100.0, vec![], vec![]).lc_wait_on);
    }

    #[test]
    fn lost_timer_ticks_do_not_halve_the_load() {
        // Under qemu TCG a guest accounts about half its ticks: a fully busy CPU shows 50 busy
        // ticks in a second, and no idle ones. It is fully busy all the same.
        let dir = tempfile::tempdir().unwrap();
        let p = Procfs::new(dir.path());
        let topo = Topology::pseudo(&["0".into(), "1".into()]).unwrap();
        let mut s = Sensor::new(SensorKind::Busy, 100.0, vec![], vec![]);
        fake::stat(dir.path(), 1000, &[(0, 0), (0, 0)]);
        s.sample(&p, &topo, &[], 0.0).unwrap();
        fake::stat(dir.path(), 1050, &[(50, 0), (10, 0)]);
        let r = s.sample(&p, &topo, &[], 1.0).unwrap().unwrap();
        assert_eq!((r[0].load, r[1].load), (1.0, 0.2));
    }

    #[test]
    fn readings_cover_the_last_interval_at_every_sample() {
        // 4 samples per 1 s interval, 100 ticks/s: CPU 0 goes fully busy at t = 0.5 s.
        let dir = tempfile::tempdir().unwrap();
        let p = Procfs::new(dir.path());
        let topo = Topology::pseudo(&["0".into(), "1".into()]).unwrap();
        let mut s = Sensor::new(SensorKind::Busy, 100.0, vec![], vec![]);
        s.samples = 4;
        let mut loads = Vec::new();
        for i in 0..8u64 {
            let busy = (i * 25).saturating_sub(50);
            fake::stat(dir.path(), 1000 + i * 25, &[(busy, 0), (0, 0)]);
            let r = s.sample(&p, &topo, &[], i as f64 * 0.25).unwrap();
            loads.push(r.map(|r| r[0].load));
        }
        // Until the window is full it spans what it has; then exactly the last second.
        let want = [None, Some(0.0), Some(0.0), Some(25.0 / 75.0), Some(0.5)];
        for (got, want) in loads.iter().zip(want) {
            assert_eq!(
                got.map(|x| (x * 1e9).round()),
                want.map(|x: f64| (x * 1e9).round())
            );
        }
        assert_eq!(&loads[5..], &[Some(0.75), Some(1.0), Some(1.0)]);
        assert_eq!(s.window.len(), 5, "samples + 1 snapshots kept");
    }

    #[test]
    fn no_reading_before_the_window_spans_the_minimum() {
        let dir = tempfile::tempdir().unwrap();
        let p = Procfs::new(dir.path());
        let topo = Topology::pseudo(&["0".into(), "1".into()]).unwrap();
        let mut s = Sensor::new(SensorKind::Busy, 100.0, vec![], vec![]);
        (s.samples, s.min_span_s) = (5, 0.24);
        let got: Vec<bool> = (0..5u64)
            .map(|i| {
                fake::stat(dir.path(), 1000 + i * 10, &[(i * 5, 0), (0, 0)]);
                s.sample(&p, &topo, &[], i as f64 * 0.1).unwrap().is_some()
            })
            .collect();
        assert_eq!(got, [false, false, false, true, true], "from 0.3 s on");
    }

    #[test]
    fn recent_be_is_the_last_step_only() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let topo = Topology::pseudo(&["0".into(), "1".into()]).unwrap();
        let p = Procfs::new(root);
        let acct = root.join("acct");
        fs::create_dir_all(&acct).unwrap();
        let mut s = Sensor::new(SensorKind::Steal, 100.0, vec![], vec![acct.clone()]);
        s.samples = 2;
        let mut step = |t: f64, ns: &str| {
            fs::write(acct.join("cpuacct.usage_percpu"), ns).unwrap();
            fake::stat(root, 1000 + (t * 100.0) as u64, &[(0, 0), (0, 0)]);
            s.sample(&p, &topo, &[], t).unwrap();
            s.recent_be.clone()
        };
        assert_eq!(step(0.0, "0 0"), None, "no step before the first sample");
        // 0.25 s of BE time on CPU 0 in a 0.5 s step: half of node 0.
        assert_eq!(step(0.5, "250000000 0"), Some(vec![0.5, 0.0]));
        assert_eq!(step(1.0, "250000000 0"), Some(vec![0.0, 0.0]));
    }

    #[test]
    fn psi_avg10_parses_and_names_bad_files() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("cpu.pressure"), "some avg10=12.50 avg60=3.00 avg300=1.00 total=5\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n").unwrap();
        assert_eq!(read_psi_avg10(dir.path()).unwrap(), 12.5);
        fs::write(dir.path().join("cpu.pressure"), "garbage\n").unwrap();
        assert!(read_psi_avg10(dir.path())
            .unwrap_err()
            .to_string()
            .contains("cpu.pressure"));
    }
}
