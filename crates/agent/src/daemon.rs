//! The daemon loop: wires topology, selector, sensor, policy and actuator together. It reads
//! nothing and writes nothing itself; it decides when, and keeps the books (cool-downs, the
//! decision log, metrics).

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use colosched_core::Rng;
use serde_json::json;

use crate::act::actuator::Actuator;
use crate::act::state::State;
use crate::config::{ActuatorMode, Config, SensorKind};
use crate::cpuset::CpuSet;
use crate::decide::look::{steady, Look};
use crate::decide::os::{os_writes, FileWrite};
use crate::decide::plan::{decide, Decision, Guards};
use crate::decide::select::Selection;
use crate::decide::views::{key, Key, Views};
use crate::error::{Error, Result};
use crate::metrics::Metrics;
use crate::report::{self, Cycle};
use crate::sense::kernel::clock_ticks;
use crate::sense::select::{BeTask, Pods, Selector};
use crate::sense::sensor::Sensor;
use crate::sense::topology::Topology;
use colosched_sys::{Cgroupfs, Procfs};

pub struct Agent {
    pub cfg: Config,
    pub topo: Topology,
    pub procfs: Procfs,
    pub sensor_reason: String,
    pub threshold: f64,
    pub selector: Selector,
    sensor: Sensor,
    pub actuator: Actuator,
    guards: Guards,
    rng: Rng,
    cycle: u64,
    started: Instant,
    /// Consecutive samples each node was over threshold.
    streak: colosched_core::guards::Hysteresis,
    /// The last full look at the BE tasks, if it moved nothing (see `decide::look`).
    last_look: Option<Look>,
    /// The BE processes as the decision sees them, with their cool-down.
    views: Views,
    /// Processes the agent pinned: node and thread count, so new threads are made to follow.
    placed: HashMap<(i32, u64), (usize, u64)>,
    cpusets: Vec<PathBuf>,
    /// The CPUs online at the last cycle (`None`: sysfs does not say), and the nodes none of
    /// whose CPUs are: the policy never sends tasks there.
    online: Option<CpuSet>,
    possible: Option<CpuSet>,
    offline_nodes: Vec<bool>,
    /// The BE cgroups' thread lists, when every BE selector is a cgroup: after moving all BE
    /// processes, one read of these finds threads born during the move.
    thread_lists: Vec<PathBuf>,
    /// BE processes found the last time the selectors were read.
    be_tasks: usize,
    /// The BE pids of the last look (sorted): one gone since (a pod deleted, a task ended) has
    /// its record dropped from the state file then, not only once the state is large.
    last_pids: Vec<i32>,
    pub metrics: Arc<Mutex<Metrics>>,
    log: Option<Box<dyn Write + Send>>,
}

/// The load the policy sees for a node with no CPU online: never the least loaded, so never a
/// receiver; it holds no task, so it sends none.
const OFFLINE_LOAD: f64 = 1e9;

/// CPU time of the calling thread (scheduler-exact, unlike getrusage's tick sampling).
fn thread_cpu_ms() -> f64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    ts.tv_sec as f64 * 1e3 + ts.tv_nsec as f64 / 1e6
}

impl Agent {
    /// Builds the agent from a validated config. Nothing is changed on the system yet.
    pub fn new(cfg: Config) -> Result<Agent> {
        let procfs = Procfs::new(&cfg.procfs_root);
        let topo = match &cfg.pseudo_nodes {
            Some(lists) => {
                Topology::pseudo(lists).map_err(|e| Error::config("topology.pseudo_nodes", e))?
            }
            None => Topology::from_sysfs(&cfg.sysfs_root).map_err(|e| {
                let hint = "a single-node host needs topology.pseudo_nodes, e.g. [\"0\", \"1\"]";
                Error::config("topology", format!("{e} ({hint})"))
            })?,
        };
        let (kind, sensor_reason) = cfg.sensor.resolve(&procfs);
        if kind == SensorKind::Psi && cfg.psi_cgroups.len() != topo.nodes.len() {
            return Err(Error::config(
                "sensor.psi_cgroups",
                format!(
                    "{} given for {} node(s); the psi sensor needs one LC cgroup2 directory per node",
                    cfg.psi_cgroups.len(),
                    topo.nodes.len()
                ),
            ));
        }
        crate::config::check_threshold(kind, cfg.threshold)?;
        let threshold = cfg.threshold.unwrap_or(kind.default_threshold());
        let comm = cfg
            .be_comm
            .as_deref()
            .map(|re| regex_lite::Regex::new(re).expect("validated"));
        let selector = Selector {
            cgroups: cfg.be_cgroups.clone(),
            comm,
            pid_files: cfg.be_pid_files.clone(),
            all: cfg.all_os_activities,
            kubernetes: cfg.kubepods()?.map(|kubepods| Pods {
                kubepods,
                burstable_be: cfg.burstable_be,
            }),
            pods: HashMap::new(),
        };
        let cgroups = Cgroupfs::new(&cfg.cgroup_root);
        let cpusets = if cfg.mode == ActuatorMode::Cpuset {
            cfg.be_cgroups
                .iter()
                .map(|cg| {
                    cgroups
                        .controller_dir(cg, "cpuset", "cpuset.cpus")
                        .ok_or_else(|| {
                            let msg = "has no cpuset.cpus (and no v1 cpuset twin)";
                            Error::config("actuator.mode", format!("{} {msg}", cg.display()))
                        })
                })
                .collect::<Result<_>>()?
        } else {
            Vec::new()
        };
        let hz = clock_ticks();
        // The busy sensor reads BE time from cpuacct when every BE selector is a cgroup that has
        // one (one file per cycle instead of one per thread).
        // (Whatever the sensor, that file also tells a pressured node with no BE work on it.)
        let only_cgroups =
            cfg.be_comm.is_none() && cfg.be_pid_files.is_empty() && !cfg.all_os_activities;
        let acct: Vec<Option<PathBuf>> = cfg
            .be_cgroups
            .iter()
            .map(|cg| cgroups.controller_dir(cg, "cpuacct", "cpuacct.usage_percpu"))
            .collect();
        let thread_lists = if only_cgroups {
            (cfg.be_cgroups.iter())
                .map(|cg| match cg.join("tasks") {
                    v1 if v1.exists() => v1,
                    _ => cg.join("cgroup.threads"),
                })
                .collect()
        } else {
            Vec::new()
        };
        let cpuacct = if only_cgroups && acct.iter().all(Option::is_some) {
            acct.into_iter().flatten().collect()
        } else {
            Vec::new()
        };
        let mut metrics = Metrics::default();
        metrics.sensor = kind.name().into();
        let log: Option<Box<dyn Write + Send>> = match &cfg.decision_log {
            None => None,
            Some(p) if p.as_os_str() == "-" => Some(Box::new(std::io::stdout())),
            Some(p) => Some(Box::new(
                fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .map_err(|e| Error::config("decision_log", format!("{}: {e}", p.display())))?,
            )),
        };
        let mut sensor = Sensor::new(kind, hz, cfg.psi_cgroups.clone(), cpuacct);
        sensor.samples = cfg.samples_per_interval.unwrap_or(sensor.default_samples());
        // A move that did not take is retried an interval later at first (decide::backoff).
        let views = Views::new(
            hz,
            cfg.cooldown_s,
            cfg.min_task_age_s,
            sensor.samples as u64,
        );
        sensor.lc_wait_on = kind == SensorKind::Busy && procfs.has_sched_info();
        // The first reading waits for half an interval (less a tenth of a sample period, for
        // timer slack): a shorter window is too few ticks to tell 30 % from 50 %.
        sensor.min_span_s = cfg.interval_s * (0.5 - 0.1 / sensor.samples as f64);
        Ok(Agent {
            selector,
            sensor,
            actuator: Actuator::new(procfs.clone(), cfg.state_file.clone(), cfg.dry_run),
            guards: Guards::new(
                cfg.warning_threshold,
                cfg.max_moves_per_cycle,
                cfg.min_improvement,
            ),
            rng: Rng::new(cfg.seed),
            cycle: 0,
            started: Instant::now(),
            streak: Default::default(),
            last_look: None,
            views,
            placed: HashMap::new(),
            cpusets,
            online: None,
            possible: crate::sense::topology::cpus(&cfg.sysfs_root, "possible").ok(),
            offline_nodes: vec![false; topo.nodes.len()],
            thread_lists,
            be_tasks: 0,
            last_pids: Vec::new(),
            metrics: Arc::new(Mutex::new(metrics)),
            log,
            threshold,
            sensor_reason,
            procfs,
            topo,
            cfg,
        })
    }

    pub fn sensor_kind(&self) -> SensorKind {
        self.sensor.kind
    }

    pub fn be_time_source(&self) -> String {
        self.sensor.be_time_source()
    }

    /// How many samples the sensor takes per interval (the loop's period is interval / this).
    pub fn samples_per_interval(&self) -> usize {
        self.sensor.samples
    }

    /// A state file left by an agent that died is restored before this one starts. The caller
    /// holds the state file's lock (`StateLock`), so no live agent owns it.
    pub fn take_over_state(&mut self) -> Result<Option<String>> {
        let path = &self.cfg.state_file;
        if !path.exists() {
            return Ok(None);
        }
        let old = State::load(path)?;
        let r = old.restore(&self.procfs, &self.offline_cpus());
        // What waits for offline CPUs stays recorded: this agent owns it now.
        self.actuator.state.tasks.extend(r.pending.tasks.clone());
        r.settle(path)?;
        Ok(Some(format!(
            "what a previous agent (pid {}) left: {}",
            old.agent_pid,
            r.summary()
        )))
    }

    /// The CPUs that exist but are offline now.
    pub fn offline_cpus(&self) -> CpuSet {
        crate::sense::topology::offline_cpus(&self.cfg.sysfs_root)
    }

    /// The thesis's all-OS mode starts with everything on node 0, so boot traffic stays local.
    pub fn pin_all_to_first_node(&mut self) -> Result<usize> {
        let (pids, _) = self.selector.candidates(&self.procfs);
        let sel = Selection::of(self.selector.details(&self.procfs, &pids));
        let cpus = self.topo.nodes[0].cpus.clone();
        let moves: Vec<(&BeTask, &CpuSet)> = sel.tasks.iter().map(|t| (t, &cpus)).collect();
        let n = self.actuator.pin(&moves, &[])?.threads;
        let writes = self.os_writes(&cpus);
        Ok(n + self.actuator.write_files(&writes)?)
    }

    /// One cycle (one sample): sample, decide, act, log.
    pub fn step(&mut self, act: bool) -> Result<Cycle> {
        let (cpu0, wall0) = (thread_cpu_ms(), Instant::now());
        self.cycle += 1;
        // Once an interval: a sysfs read at every sample was a fifth of an idle cycle.
        if self.cycle % self.sensor.samples as u64 == 1 || self.sensor.samples == 1 {
            self.check_online();
        }
        // Which pids are BE is read only when needed: by the per-thread busy sensor every cycle,
        // else only when some node is pressured (reading cgroup.procs of 1,000 tasks costs about
        // 1.5 ms in cgroup v1, most of a quiet cycle).
        let mut errors = 0;
        let mut pids = None;
        if self.sensor.needs_be_pids() || self.sensor.wants_be_pids() {
            pids = Some(self.candidates(&mut errors));
        }
        let now_s = wall0.duration_since(self.started).as_secs_f64();
        let sampled = self.sensor.sample(
            &self.procfs,
            &self.topo,
            pids.as_deref().unwrap_or(&[]),
            now_s,
        )?;
        let Some(readings) = sampled else {
            let cpu_ms = thread_cpu_ms() - cpu0;
            return Ok(Cycle {
                tasks: pids.map_or(0, |p| p.len()),
                cpu_ms,
                ..Cycle::default()
            });
        };
        // `hysteresis` intervals over threshold: the window of this sample and of the samples of
        // the `hysteresis - 1` intervals before it (the core's hysteresis, as the simulator's).
        let needed = (self.cfg.hysteresis - 1) * self.sensor.samples as u32 + 1;
        let raw: Vec<f64> = readings.iter().map(|r| r.raw).collect();
        let mut over = self.streak.look(&raw, self.threshold, needed);
        let mut loads: Vec<f64> = readings.iter().map(|r| r.load).collect();
        for (n, _) in self
            .offline_nodes
            .iter()
            .enumerate()
            .filter(|(_, &off)| off)
        {
            (over[n], loads[n]) = (false, OFFLINE_LOAD);
        }
        let recent_be = self.sensor.recent_be.as_deref();
        let last = self.last_look.as_ref();
        if let Some(note) = steady(&over, last, recent_be, now_s, self.cfg.interval_s) {
            let cycle = Cycle {
                tasks: self.be_tasks,
                readings,
                decision: Decision {
                    note: note.into(),
                    ..Decision::default()
                },
                cpu_ms: thread_cpu_ms() - cpu0,
                wall_ms: wall0.elapsed().as_secs_f64() * 1e3,
                ..Cycle::default()
            };
            self.record(&cycle, errors);
            return Ok(cycle);
        }
        if over.contains(&true) && pids.is_none() {
            pids = Some(self.candidates(&mut errors));
        }
        let pids = pids.unwrap_or_default();
        let mut cycle = Cycle {
            tasks: self.be_tasks,
            ..Cycle::default()
        };
        // Per-process files are read only when a pressured node is one BE tasks may run on:
        // the steady state (LC node busy, BE pinned elsewhere) costs one affinity syscall a pid.
        let masks: HashMap<i32, CpuSet> = if over.contains(&true) {
            pids.iter()
                .filter_map(|&p| Some((p, self.procfs.affinity(p)?)))
                .collect()
        } else {
            HashMap::new()
        };
        let reachable = masks
            .values()
            .flat_map(|m| m.iter())
            .filter_map(|c| self.topo.node_of_cpu(c))
            .any(|n| over[n]);
        if reachable {
            let mut sel = if self.sensor.needs_be_pids() {
                // This cycle's sample has just read every BE process's stat.
                Selection::of(self.sensor.stats.drain(..))
            } else {
                Selection::of(self.selector.details(&self.procfs, &pids))
            };
            self.selector.mark_partial(&self.procfs, &mut sel.tasks);
            let uptime = self.procfs.uptime().unwrap_or(f64::INFINITY);
            let clocks = (uptime, now_s, self.cycle);
            let views = self.views.of(&sel.tasks, &masks, &self.topo, clocks);
            cycle.decision = decide(
                self.cfg.policy,
                &loads,
                &over,
                &views,
                &self.guards,
                &mut self.rng,
                self.cycle,
            );
            self.views.remember(&sel.tasks, now_s);
            self.last_look = cycle.decision.moves.is_empty().then(|| Look {
                over: over.clone(),
                at_s: now_s,
                reachable: true,
            });
            if act {
                let before = self.actuator.errors.total();
                cycle.changed = self.apply(&mut cycle.decision, &sel.tasks)?
                    + self.follow_new_threads(&sel.tasks)?;
                errors += self.actuator.errors.total() - before;
            }
        } else {
            let hot = over.contains(&true);
            self.last_look = hot.then(|| Look {
                over: over.clone(),
                at_s: now_s,
                reachable: false,
            });
            cycle.decision.note = if hot {
                "no BE task can run on a pressured node"
            } else {
                "no node over threshold"
            }
            .into();
        }
        cycle.readings = readings;
        cycle.cpu_ms = thread_cpu_ms() - cpu0;
        cycle.wall_ms = wall0.elapsed().as_secs_f64() * 1e3;
        self.record(&cycle, errors);
        Ok(cycle)
    }

    /// Reads which CPUs are online (one small sysfs file, once an interval); when that changed,
    /// which nodes have none, and whether the actuator must read originals with offline CPUs.
    fn check_online(&mut self) {
        let online = crate::sense::topology::cpus(&self.cfg.sysfs_root, "online").ok();
        if online == self.online {
            return;
        }
        if let Some(on) = &online {
            for (off, node) in self.offline_nodes.iter_mut().zip(&self.topo.nodes) {
                *off = !node.cpus.intersects(on);
            }
            self.actuator.cpus_offline = self.possible.as_ref().is_some_and(|p| p != on);
        }
        self.online = online;
    }

    /// The BE pids now; selector problems are counted as errors.
    fn candidates(&mut self, errors: &mut u64) -> Vec<i32> {
        let (pids, selector_errors) = self.selector.candidates(&self.procfs);
        *errors += selector_errors.len() as u64;
        for e in selector_errors {
            self.actuator.errors.add("selector", e);
        }
        // The stat files kept open for processes no longer BE are closed (`pids` is sorted).
        self.procfs
            .keep_stat_files(|p| pids.binary_search(&p).is_ok());
        // A process no longer BE (gone, or out of the selectors) is no longer held back.
        (self.views.backoff).retain(|(p, _)| pids.binary_search(p).is_ok());
        self.be_tasks = pids.len();
        if self
            .last_pids
            .iter()
            .any(|p| pids.binary_search(p).is_err())
        {
            if let Err(e) = self.actuator.forget_dead() {
                self.actuator.errors.add("other", e.to_string());
            }
        }
        self.last_pids.clone_from(&pids);
        pids
    }

    /// Carries out the decision's moves; those that did not take (the kernel refused every
    /// thread: counted as errors) are dropped from it, so the log, the metrics and the
    /// cool-down count only moves that happened.
    fn apply(&mut self, d: &mut Decision, tasks: &[BeTask]) -> Result<usize> {
        if d.moves.is_empty() {
            return Ok(0);
        }
        let by_pid: HashMap<i32, &BeTask> = tasks.iter().map(|t| (t.pid, t)).collect();
        let now_s = self.started.elapsed().as_secs_f64();
        let mut changed = 0;
        let planned: Vec<i32> = d.moves.iter().map(|m| m.pid).collect();
        if self.cpusets.is_empty() {
            let moves: Vec<(&BeTask, &CpuSet)> = d
                .moves
                .iter()
                .filter_map(|m| Some((*by_pid.get(&m.pid)?, &self.topo.nodes[m.to].cpus)))
                .collect();
            let lists = if moves.len() == tasks.len() {
                &self.thread_lists[..]
            } else {
                &[]
            };
            let pinned = self.actuator.pin(&moves, lists)?;
            changed += pinned.threads;
            d.moves.retain(|m| pinned.pids.contains(&m.pid));
        } else {
            // cpuset mode: the BE cgroups get the CPUs of every node that holds BE after the plan.
            let mut nodes: Vec<usize> = d.moves.iter().map(|m| m.to).collect();
            nodes.sort_unstable();
            nodes.dedup();
            let cpus: CpuSet = nodes
                .iter()
                .flat_map(|&n| self.topo.nodes[n].cpus.iter())
                .collect();
            let mut writes: Vec<FileWrite> = self
                .cpusets
                .iter()
                .map(|d| FileWrite {
                    path: d.join("cpuset.cpus"),
                    content: cpus.to_string(),
                })
                .collect();
            if self.topo.source == "numa" {
                let mems: CpuSet = nodes.iter().map(|&n| self.topo.nodes[n].id).collect();
                writes.extend(self.cpusets.iter().map(|d| FileWrite {
                    path: d.join("cpuset.mems"),
                    content: mems.to_string(),
                }));
            }
            let took = self.actuator.write_files(&writes)?;
            changed += took;
            // (A dry run writes nothing: its moves are the plan.)
            if took < writes.len() && !self.actuator.dry_run {
                d.moves.clear();
            }
        }
        // A process whose move did not take waits out its back-off before the next try.
        let took: HashSet<i32> = d.moves.iter().map(|m| m.pid).collect();
        for t in planned.iter().filter(|p| !took.contains(p)) {
            if let Some(t) = by_pid.get(t) {
                self.views.backoff.failed(key(t), self.cycle);
            }
        }
        if d.moves.len() < planned.len() {
            d.note = format!(
                "{} of {} planned move(s) did not take (see the errors)",
                planned.len() - d.moves.len(),
                planned.len()
            );
        }
        if self.cfg.all_os_activities {
            if let Some(&target) = d.targets.first() {
                let writes = self.os_writes(&self.topo.nodes[target].cpus);
                changed += self.actuator.write_files(&writes)?;
            }
        }
        for m in &d.moves {
            let Some(t) = by_pid.get(&m.pid) else {
                continue;
            };
            self.views.moved(t, now_s);
            self.views.backoff.succeeded(&key(t));
            self.placed.insert(key(t), (m.to, t.num_threads));
            if self.cfg.migrate_memory && m.from != m.to && self.topo.source == "numa" {
                let to = self.topo.nodes[m.to].id;
                let others = self.topo.nodes.iter().map(|n| n.id).filter(|&n| n != to);
                (self.actuator).migrate_memory(m.pid, &others.collect(), &CpuSet::from_iter([to]));
            }
        }
        Ok(changed)
    }

    /// A process the agent pinned that has more threads now: pin the new ones too (threads
    /// created after the move inherit the mask; this catches those created during it).
    fn follow_new_threads(&mut self, tasks: &[BeTask]) -> Result<usize> {
        let alive: HashMap<Key, &BeTask> = tasks.iter().map(|t| (key(t), t)).collect();
        self.placed.retain(|k, _| alive.contains_key(k));
        let now_ms = self.started.elapsed().as_millis() as u64;
        (self.views.cooldown).expire(now_ms, |k| alive.contains_key(k));
        (self.views.backoff).retain(|k| alive.contains_key(k));
        self.actuator.forget_threads(|k| alive.contains_key(k));
        if !self.cpusets.is_empty() {
            return Ok(0);
        }
        let mut grown = Vec::new();
        for (k, (node, threads)) in self.placed.iter_mut() {
            let t = alive[k];
            if t.num_threads != *threads {
                *threads = t.num_threads;
                grown.push((t, *node));
            }
        }
        let moves: Vec<(&BeTask, &CpuSet)> = grown
            .iter()
            .map(|&(t, n)| (t, &self.topo.nodes[n].cpus))
            .collect();
        Ok(self.actuator.pin(&moves, &[])?.threads)
    }

    fn record(&mut self, c: &Cycle, errors: u64) {
        if let Ok(mut m) = self.metrics.lock() {
            let pods = &self.selector.pods;
            m.observe(
                &self.topo,
                c,
                self.actuator.dry_run,
                &self.actuator.errors,
                pods,
            );
            m.backoff_tasks = self.views.backoff.len();
        }
        if let Some(log) = self.log.as_mut() {
            let policy = self.cfg.policy.to_string();
            let line = report::log_line(
                &self.topo,
                self.cycle,
                c,
                errors,
                self.actuator.dry_run,
                &policy,
                &self.selector.pods,
            );
            // One write per line.
            let _ = log.write_all(&line);
            let _ = log.flush();
        }
    }

    /// Samples once, waits one interval, and returns the decision it would take (changing nothing).
    pub fn plan_once(&mut self) -> Result<Cycle> {
        self.sensor.measure_wait_from_start();
        self.step(false)?;
        std::thread::sleep(Duration::from_secs_f64(self.cfg.interval_s));
        self.cfg.hysteresis = 1; // one look is all `plan --once` has
        self.step(false)
    }

    /// `plan --once --json`: the decision as one JSON object.
    pub fn plan_json(&self, c: &Cycle) -> serde_json::Value {
        json!({
            "sensor": self.sensor.kind.name(),
            "sensor_reason": self.sensor_reason,
            "threshold": self.threshold,
            "policy": self.cfg.policy.to_string(),
            "triggered": c.decision.triggered,
            "note": c.decision.note,
            "targets": report::node_ids(&self.topo, &c.decision.targets),
            "be_tasks": c.tasks,
            "nodes": self.topo.nodes.iter().zip(&c.readings).map(|(n, r)| json!({
                "id": n.id, "cpus": n.cpus.to_string(), "load": r.load, "raw": r.raw, "steal": r.steal,
                "usage": r.usage, "wait": r.wait,
            })).collect::<Vec<_>>(),
            "moves": report::moves(&self.topo, &c.decision, &self.selector.pods),
        })
    }

    /// The all-OS mode's writes: every IRQ's smp_affinity_list and every unbound workqueue's
    /// cpumask, pointed at `cpus` (none unless that mode is on).
    fn os_writes(&self, cpus: &CpuSet) -> Vec<FileWrite> {
        if !self.cfg.all_os_activities {
            return Vec::new();
        }
        let files =
            crate::sense::system::os_affinity_files(&self.cfg.procfs_root, &self.cfg.sysfs_root);
        os_writes(&files, cpus)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake;
    use crate::sense::sensor::NodeReading;
    use std::path::Path;

    fn fake_agent(dir: &Path, mask: &str, interval_s: f64) -> Agent {
        let (proc_root, cg) = (dir.join("proc"), dir.join("cg"));
        fake::process(&proc_root, 50, "be", 0, 1, 100);
        fake::cpus(&dir.join("sys"), "0-1", "0-1");
        fake::allowed(&proc_root, 50, mask);
        fs::create_dir_all(&cg).unwrap();
        fs::write(cg.join("cgroup.procs"), "50\n").unwrap();
        fs::write(cg.join("cpuacct.usage_percpu"), "0 0\n").unwrap();
        Agent::new(Config {
            interval_s,
            procfs_root: proc_root,
            sysfs_root: dir.join("sys"),
            pseudo_nodes: Some(vec!["0".into(), "1".into()]),
            sensor: SensorKind::Busy,
            hysteresis: 1,
            samples_per_interval: Some(1),
            be_cgroups: vec![cg],
            state_file: dir.join("state.json"),
            cooldown_s: 0.0,
            ..Config::default()
        })
        .map(|mut a| {
            // These samples come milliseconds apart while their fake ticks stand for intervals.
            a.sensor.min_span_s = 0.0;
            a
        })
        .unwrap()
    }

    #[test]
    fn the_log_and_plan_name_nodes_by_id() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = fake_agent(dir.path(), "0-1", 1.0);
        let log = dir.path().join("decisions.jsonl");
        a.log = Some(Box::new(fs::File::create(&log).unwrap()));
        a.topo.nodes[1].id = 2; // node ids with a gap, as on a host with node 1 offline
        let c = Cycle {
            decision: Decision {
                targets: vec![1],
                moves: vec![crate::decide::plan::Planned {
                    pid: 50,
                    comm: "be".into(),
                    from: 0,
                    to: 1,
                    reason: "coarse".into(),
                }],
                ..Decision::default()
            },
            readings: vec![NodeReading::default(); 2],
            ..Cycle::default()
        };
        a.record(&c, 0);
        let metrics = a.metrics.lock().unwrap().render();
        assert!(metrics.contains("colosched_agent_node_steal_ticks{node=\"2\"} 0"));
        let line: serde_json::Value =
            serde_json::from_str(fs::read_to_string(&log).unwrap().trim()).unwrap();
        assert_eq!(line["targets"], json!([2]));
        assert_eq!(line["moved"][0]["from_node"], 0);
        assert_eq!(line["moved"][0]["to_node"], 2);
        assert_eq!(line["moved"][0]["comm"], "be");
        assert_eq!(line["reason"], "coarse");
        let plan = a.plan_json(&c);
        assert_eq!(
            (&plan["targets"], &plan["moves"]),
            (&line["targets"], &line["moved"])
        );
    }

    #[test]
    fn a_look_that_moved_nothing_is_retaken_once_an_interval() {
        // Node 0 pressured (0.55), node 1 calm (0.48), the BE task may run on both: moving it
        // would gain 0.07 < min_improvement, so nothing moves. Samples 50 ms apart; the
        // interval is 0.4 s.
        let dir = tempfile::tempdir().unwrap();
        let mut agent = fake_agent(dir.path(), "0-1", 0.4);
        let notes: Vec<String> = (1..=10u64)
            .map(|i| {
                std::thread::sleep(Duration::from_millis(50));
                fake::stat(
                    &dir.path().join("proc"),
                    1000 + i * 100,
                    &[(i * 55, 0), (i * 48, 0)],
                );
                agent.step(false).unwrap().decision.note
            })
            .collect();
        let skips = notes
            .iter()
            .filter(|n| n.starts_with("the last look"))
            .count();
        let looks = notes[1..].len() - skips; // the first step only takes the first sample
        assert!(
            (2..=4).contains(&looks) && skips >= 5,
            "one look per 0.4 s over 0.45 s: {notes:?}"
        );
    }

    #[test]
    fn hysteresis_needs_that_many_intervals_over_threshold_in_a_row() {
        let dir = tempfile::tempdir().unwrap();
        let mut agent = fake_agent(dir.path(), "0-1", 1.0);
        agent.cfg.hysteresis = 2;
        // Node 0's busy ticks per interval of 100: calm, over, over, calm, over. The BE task may
        // run there, so a trigger plans its move.
        let mut busy = 0;
        let planned: Vec<bool> = [0, 90, 90, 10, 90]
            .iter()
            .zip(1u64..)
            .map(|(&b, i)| {
                busy += b;
                fake::stat(
                    &dir.path().join("proc"),
                    1000 + i * 100,
                    &[(busy, 0), (0, 0)],
                );
                !agent.step(false).unwrap().decision.moves.is_empty()
            })
            .collect();
        assert_eq!(planned, [false, false, true, false, false]);
    }

    #[test]
    fn a_process_in_back_off_is_not_planned_and_is_forgotten_once_gone() {
        let dir = tempfile::tempdir().unwrap();
        let proc_root = dir.path().join("proc");
        let mut agent = fake_agent(dir.path(), "0-1", 1.0);
        // Node 0 pressured from the second sample on: the BE task would go to node 1. Every
        // sample takes a full look (as a look that moved nothing would once an interval).
        let step = |agent: &mut Agent, i: u64| {
            fake::stat(&proc_root, 1000 + i * 100, &[(i * 90, 0), (0, 0)]);
            agent.last_look = None;
            agent.step(false).unwrap().decision
        };
        step(&mut agent, 0);
        assert_eq!(step(&mut agent, 1).moves.len(), 1);
        // Its move failed three times in a row, the third at this cycle (2): held back for four
        // intervals (of one sample here), until cycle 6.
        let be = (50, fake::Task::default().start); // pid and start time
        for _ in 0..3 {
            agent.views.backoff.failed(be, agent.cycle);
        }
        let d = step(&mut agent, 2); // cycle 3
        assert!(d.moves.is_empty(), "{d:?}");
        assert_eq!(
            d.note,
            "nothing movable now (cool-down, min_task_age_s or back-off)"
        );
        assert_eq!(agent.metrics.lock().unwrap().backoff_tasks, 1);
        assert!(
            step(&mut agent, 3).moves.is_empty(),
            "cycle 4: still held back"
        );
        assert!(
            step(&mut agent, 4).moves.is_empty(),
            "cycle 5: still held back"
        );
        assert_eq!(
            step(&mut agent, 5).moves.len(),
            1,
            "cycle 6: its back-off has passed"
        );
        // It leaves the BE cgroup: its entry goes at the next read of the selectors.
        fs::write(dir.path().join("cg/cgroup.procs"), "").unwrap();
        step(&mut agent, 6);
        assert!(agent.views.backoff.is_empty());
    }

    #[test]
    fn with_every_node_pressured_there_is_no_look() {
        let dir = tempfile::tempdir().unwrap();
        let mut agent = fake_agent(dir.path(), "0-1", 0.4);
        // A look would read the selector's cgroup.procs: made unreadable, it would count an error.
        let procs = dir.path().join("cg/cgroup.procs");
        fs::remove_file(&procs).unwrap();
        fs::create_dir(&procs).unwrap();
        for i in 1..=4u64 {
            fake::stat(
                &dir.path().join("proc"),
                1000 + i * 100,
                &[(i * 90, 0), (i * 80, 0)],
            );
            let c = agent.step(false).unwrap();
            if i > 1 {
                assert_eq!(
                    c.decision.note,
                    "every node is pressured: nowhere to move BE tasks"
                );
            }
        }
        assert_eq!(
            agent.actuator.errors.total(),
            0,
            "the selectors were not read"
        );
    }

    /// A fake tree: an LC load on node 0, one BE process (pid 50) in a cgroup with cpuacct,
    /// pinned to node 1. Only the gate is under test: nothing real is read or changed.
    #[test]
    fn steady_state_skips_the_scan_until_be_runs_on_the_pressured_node() {
        let dir = tempfile::tempdir().unwrap();
        let (proc_root, cg) = (dir.path().join("proc"), dir.path().join("cg"));
        let mut agent = fake_agent(dir.path(), "1", 1.0);
        let acct =
            |ns0: u64| fs::write(cg.join("cpuacct.usage_percpu"), format!("{ns0} 0\n")).unwrap();
        let mut t = 1000;
        // The agent's clock is real: 50 ms between samples, so BE seconds mean what they say.
        let mut step = |agent: &mut Agent| {
            std::thread::sleep(Duration::from_millis(50));
            t += 100;
            fake::stat(&proc_root, t, &[(t - 1000, 0), (0, 0)]);
            agent.step(false).unwrap().decision
        };
        step(&mut agent); // the first sample has nothing to compare with
        assert_eq!(
            step(&mut agent).note,
            "no BE task can run on a pressured node"
        );
        assert!(agent.last_look.is_some(), "that look is remembered");
        let steady = "no BE CPU time on the pressured node(s) since the last look";
        assert_eq!(step(&mut agent).note, steady);
        // Someone widens the BE task's mask: with no BE CPU time on node 0 the gate holds ...
        fake::allowed(&proc_root, 50, "0-1");
        assert_eq!(step(&mut agent).note, steady);
        // ... until BE runs there (10 ms of BE time on CPU 0): then the agent looks and moves it.
        acct(10_000_000);
        let d = step(&mut agent);
        assert_eq!(
            d.moves.iter().map(|m| (m.pid, m.to)).collect::<Vec<_>>(),
            [(50, 1)],
            "{d:?}"
        );
        assert!(
            agent.last_look.is_none(),
            "a look that moved is not a reason to skip"
        );
    }

    #[test]
    fn a_node_whose_cpus_went_offline_is_never_a_target() {
        // Node 0 pressured, the BE task may run on both: it would go to node 1, but CPU 1 is
        // taken offline. Originals are then read with offline CPUs kept.
        let dir = tempfile::tempdir().unwrap();
        let mut agent = fake_agent(dir.path(), "0-1", 1.0);
        let proc_root = dir.path().join("proc");
        fake::stat(&proc_root, 1000, &[(0, 0), (0, 0)]);
        agent.step(false).unwrap();
        fake::stat(&proc_root, 1100, &[(90, 0), (0, 0)]);
        let d = agent.step(false).unwrap().decision;
        assert_eq!(d.moves.iter().map(|m| m.to).collect::<Vec<_>>(), [1]);
        assert!(!agent.actuator.cpus_offline);
        fake::cpus(&dir.path().join("sys"), "0-1", "0");
        fake::stat(&proc_root, 1200, &[(180, 0), (0, 0)]);
        let c = agent.step(false).unwrap();
        assert!(c.decision.moves.is_empty(), "{:?}", c.decision);
        assert!(agent.actuator.cpus_offline);
    }
}
