//! The host agent (issue 15): spec 002's Diff-Scheduler and spec 001's class-rotating placement
//! on a real Linux/KVM host, with the simulator's decision code (`crate::decide`) and this
//! crate's readers and writers (`crate::real`, `crate::act`). The `colosched-agent` binary runs
//! it (`colosched-agent host …`).
//!
//! The loop (`HostAgent`): every interval (T_m, 10 ms) it reads each VM's two tap counters and
//! turns them into one ring sample (`decide::tap`). Every window (T_s, 100 ms) it classifies each
//! VM from its samples (`window_stats`), keeps it NSVM for the hold's windows (`NsvmHold`),
//! measures its CPU load from its vCPU threads' schedstat, decides (diff: the two pools'
//! sizes, `plan_pools`; ia-rotate: each vCPU's CPU, `rotate::place`) and makes the host match.
//!
//! Rooms: `config` parses host.toml; `sense` reads (discovery, per-VM readings, the host's
//! cgroup and CPU files); `strategy` decides (diff, ia-rotate: one trait); `apply` changes
//! (groups, pools, slices, restore); this file senses, decides and acts once per window; `run`
//! is the process around it (lock, signals, metrics, restore); `metrics` its `/metrics`; `error`
//! its errors.
//!
//! Everything it changes is recorded in the state file before it is changed (`act::state`) and
//! put back when no NSVM is left (the host as it was: no pools), on exit, on SIGTERM, or by
//! `restore` after a SIGKILL.

pub mod apply;
pub mod config;
pub mod error;
pub mod metrics;
pub mod run;
pub mod sense;
pub mod strategy;

use std::io::Write;
use std::sync::{Arc, Mutex};

use colosched_core::cpuset::CpuSet;
use colosched_qemu::SharedVirsh;
use colosched_sys::{Procfs, Sysfs};
use serde_json::{json, Value};

use crate::act::slice;
use crate::act::state::Restored;
use crate::decide::diff::{window_stats, NsvmThresholds, RingStats, VmKind};
use crate::real::cpu_delta;
use apply::{count, Counts, Groups};
pub use apply::{summary, take_over_state, CPU_POOL, NN_POOL, NS_POOL};
use config::HostConfig;
pub use error::{Error, Result};
use metrics::HostMetrics;
use sense::Tracked;
use strategy::{Seen, Strategy, Want};

/// One window: what each VM showed, the decision, and what was changed.
#[derive(Debug)]
pub struct Window {
    pub json: Value,
    /// diff: the NSVMs by name and the NSVM pool's CPU count (0: no pools); ia-rotate: none
    /// (its seats change every cycle: the decision log has them).
    pub built: (Vec<String>, usize),
    pub changes: usize,
}

pub struct HostAgent {
    pub cfg: HostConfig,
    /// The CPUs the pools share, ascending.
    pub cpus: Vec<usize>,
    pub vms: Vec<Tracked>,
    /// The groups made and the threads in them.
    pub groups: Groups,
    /// The scheduler: what the loop applies each window.
    strategy: Box<dyn Strategy>,
    ticks: u32,
    pub windows: u64,
    /// Errors by kind (gone, attach, slice, qmp, vm_gone, restore), counted, never fatal.
    pub errors: Counts,
    pub metrics: Arc<Mutex<HostMetrics>>,
    log: Option<Box<dyn Write + Send>>,
    /// The `virsh` session asking `[libvirt]` (none without it).
    virsh: Option<SharedVirsh>,
}

/// Which thresholds made a window sensitive, in words (empty when none did).
pub fn reasons(t: &NsvmThresholds, s: &RingStats) -> Vec<String> {
    let mut out = Vec::new();
    if s.rx_overflow_freq > t.overflow_freq {
        out.push(format!(
            "rx overflow in {:.0} % of samples (> {:.0} %)",
            s.rx_overflow_freq * 100.0,
            t.overflow_freq * 100.0
        ));
    }
    if s.rx_overload_freq > t.overload_freq {
        out.push(format!(
            "rx overload in {:.0} % of samples (> {:.0} %)",
            s.rx_overload_freq * 100.0,
            t.overload_freq * 100.0
        ));
    }
    if s.tx_sensitive {
        out.push(format!(
            "tx stalls in {:.0} % of samples (> {:.0} %) between bursts of {:.0} (> {})",
            s.tx_stall_freq * 100.0,
            t.tx_stall_freq * 100.0,
            s.tx_mean_nonzero,
            t.tx_mean_nonzero
        ));
    }
    out
}

fn kind_name(k: VmKind) -> &'static str {
    match k {
        VmKind::Sensitive => "nsvm",
        VmKind::NotSensitive => "nnvm",
    }
}

impl HostAgent {
    /// The agent for a checked config: its CPUs, the VMs running now. Errors name the key.
    pub fn new(cfg: HostConfig) -> Result<HostAgent> {
        (Procfs::new(&cfg.proc_root).check_root())
            .map_err(|e| Error::config("paths.proc_root", e))?;
        let online = (Sysfs::new(&cfg.sys_root).cpus("online"))
            .map_err(|e| Error::config("paths.sys_root", e))?;
        let cpus = match &cfg.cpus {
            Some(c) => {
                if let Some(x) = c.difference(&online).first() {
                    return Err(Error::config(
                        "cpus",
                        format!("CPU {x} is not online (online: {online})"),
                    ));
                }
                c.clone()
            }
            None => online,
        };
        let cpus: Vec<usize> = cpus.iter().collect();
        if cpus.len() < 2 {
            return Err(Error::config(
                "cpus",
                format!(
                    "two pools need at least 2 CPUs, got {}",
                    CpuSet::from_slice(&cpus)
                ),
            ));
        }
        let me = rustix::thread::gettid().as_raw_nonzero().get();
        let default_slice_ns = slice::slice_ns(me).unwrap_or(0);
        if default_slice_ns == 0 && (cfg.nsvm_slice_ms > 0.0 || cfg.nnvm_slice_ms > 0.0) {
            return Err(Error::config(
                "pools.nsvm_slice_ms",
                "this kernel reports no EEVDF slice (Linux 6.12 or later has them); set \
                 pools.nsvm_slice_ms and pools.nnvm_slice_ms to 0 to use the pools alone",
            ));
        }
        // A dry run makes no pool: auto finding no cpuset is only an error when pools are made.
        let hierarchy = sense::hierarchy(&cfg)?;
        if hierarchy.is_none() && !cfg.dry_run {
            return Err(Error::config(
                "pools.cgroup",
                format!(
                    "\"auto\" found no cpuset controller: {} has no cpuset.cpus (v1) and {} lists \
                     no cpuset (v2); set paths.cpuset_root or paths.cgroup2_root",
                    cfg.cpuset_root.display(),
                    cfg.cgroup2_root.join("cgroup.controllers").display()
                ),
            ));
        }
        let log: Option<Box<dyn Write + Send>> = match &cfg.decision_log {
            None => None,
            Some(p) if p.as_os_str() == "-" => Some(Box::new(std::io::stdout())),
            Some(p) => Some(Box::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .map_err(|e| Error::config("decision_log", format!("{}: {e}", p.display())))?,
            )),
        };
        let strategy = strategy::for_config(&cfg, &cpus)?;
        let virsh = sense::libvirt_session(&cfg)?;
        let mut agent = HostAgent {
            groups: Groups::new(hierarchy, &cfg.cpuset_root, default_slice_ns),
            cfg,
            cpus,
            vms: Vec::new(),
            strategy,
            ticks: 0,
            windows: 0,
            errors: Counts::new(),
            metrics: Arc::new(Mutex::new(HostMetrics::default())),
            log,
            virsh,
        };
        agent.rediscover(true)?;
        Ok(agent)
    }

    /// Looks for the VMs again: new ones are watched from the next window, gone ones dropped
    /// (and the groups only they needed removed). At start (`strict`) a VM the agent cannot
    /// watch is a config error; later it is counted.
    pub fn rediscover(&mut self, strict: bool) -> Result<()> {
        let mut failed = 0;
        let watched = std::mem::take(&mut self.vms);
        let found = sense::rediscover(&self.cfg, self.virsh.as_ref(), watched, strict, &mut failed);
        if failed > 0 {
            *self.errors.entry("discovery").or_default() += failed;
        }
        let (kept, gone) = found?;
        self.vms = kept;
        if !gone.is_empty() {
            self.groups.forget(&gone, &self.vms, &mut self.errors);
        }
        Ok(())
    }

    /// How the pools are made, for the start line and check-config.
    pub fn pools_text(&self) -> String {
        self.groups.text()
    }

    /// Where ia-rotate's core classes came from (`None` under diff).
    pub fn classes_source(&self) -> Option<&str> {
        self.strategy.classes_source()
    }

    /// The configured VMs no QEMU process runs now.
    pub fn absent(&self) -> Vec<String> {
        let running: Vec<&str> = self.vms.iter().map(|t| t.vm.name.as_str()).collect();
        (self.cfg.vms.iter())
            .filter(|c| !running.contains(&c.name.as_str()))
            .map(|c| c.name.clone())
            .collect()
    }

    pub fn samples_per_window(&self) -> u32 {
        self.cfg.window_ms / self.cfg.interval_ms
    }

    /// One T_m: a ring sample of every VM; at the end of a window, the window's plan (made
    /// real unless dry-running).
    pub fn tick(&mut self) -> Result<Option<Window>> {
        let period_ns = self.cfg.interval_ms as u64 * 1_000_000;
        let ql_max = self.cfg.thresholds.ql_max;
        let mut ring_errors = 0;
        for t in &mut self.vms {
            ring_errors += t.sample(period_ns, ql_max) as u64;
        }
        if ring_errors > 0 {
            *self.errors.entry("rx_ring").or_default() += ring_errors;
        }
        self.ticks += 1;
        if self.ticks < self.samples_per_window() {
            return Ok(None);
        }
        self.ticks = 0;
        self.window().map(Some)
    }

    /// The end of a window: measure, decide (diff or ia-rotate), apply, log.
    fn window(&mut self) -> Result<Window> {
        self.windows += 1;
        // A VM is gone when a vCPU's schedstat cannot be read and its QEMU is not the one we
        // found (its start time is only read then: not every window for every VM).
        let mut readings = Vec::with_capacity(self.vms.len());
        let mut gone = Vec::new();
        for mut t in std::mem::take(&mut self.vms) {
            match t.read_cpu(&self.cfg.proc_root) {
                Some(r) => {
                    self.vms.push(t);
                    readings.push(r);
                }
                None => {
                    count(&mut self.errors, "vm_gone");
                    gone.push(t);
                }
            }
        }
        if !gone.is_empty() {
            self.groups.forget(&gone, &self.vms, &mut self.errors);
        }
        let mut cpu = Vec::with_capacity(self.vms.len());
        let mut rows = Vec::with_capacity(self.vms.len());
        for (t, now) in self.vms.iter_mut().zip(readings) {
            // Every VM has this window's samples: VMs join only at a window's end.
            let stats = window_stats(&self.cfg.thresholds, &t.samples);
            let d = cpu_delta(&t.last_cpu, &now);
            t.last_cpu = now;
            let rings = stats.kind();
            let kind = t.hold.kind(0, rings);
            rows.push(json!({
                "name": t.vm.name,
                "pid": t.vm.pid,
                "vcpus": t.vm.vcpus.len(),
                "weight": t.weight,
                "kind": kind_name(kind),
                "rings": kind_name(rings),
                "hold": t.hold.hold_of(0),
                "reasons": reasons(&self.cfg.thresholds, &stats),
                "f_ro": stats.rx_overflow_freq,
                "f_rq": stats.rx_overload_freq,
                "rx_rq_mean": t.samples.iter().map(|s| s.rx_rq as f64).sum::<f64>()
                    / t.samples.len().max(1) as f64,
                "q_se": stats.tx_mean_nonzero,
                "f_se": stats.tx_stall_freq,
                "load": d.load(),
                "run_ms": d.run_ns() as f64 / 1e6,
                "to_guest_dropped": t.dropped,
                "from_guest": t.sent,
                "samples": t.samples.len(),
            }));
            cpu.push((d, kind));
            t.samples.clear();
            (t.dropped, t.sent) = (0, 0);
        }
        let seen = Seen {
            vms: &self.vms,
            cpu: &cpu,
        };
        let d = self.strategy.decide(&seen, &mut rows)?;
        let changes = match (self.cfg.dry_run, d.want) {
            (true, _) => 0,
            (false, Want::AsItWas) if self.groups.untouched() => 0,
            (false, Want::AsItWas) => self.release()?.threads,
            (false, Want::Seats { groups, seats }) => self.groups.apply(
                &self.cfg,
                &self.vms,
                &groups,
                &|vm, i| seats[vm][i],
                &mut self.errors,
            )?,
        };
        let mut json = json!({
            "t": colosched_sys::now_unix(),
            "window": self.windows,
            "scheduler": self.cfg.scheduler.name(),
            "dry_run": self.cfg.dry_run,
            "cpusets": self.cfg.cpusets,
            "cgroup": self.groups.hierarchy.as_ref().map(|(c, _)| c.name()),
            "cpus": CpuSet::from_slice(&self.cpus),
            "vms": rows,
            "changes": changes,
            "errors": self.errors,
        });
        for (k, v) in d.log {
            json[k] = v;
        }
        if let Some(log) = &mut self.log {
            writeln!(log, "{json}")
                .and_then(|()| log.flush())
                .map_err(|e| Error::Runtime(format!("decision log: {e}")))?;
        }
        if let Ok(mut m) = self.metrics.lock() {
            m.observe(&json, self.groups.placed());
        }
        if self
            .windows
            .is_multiple_of(self.cfg.rediscover_windows as u64)
        {
            self.rediscover(false)?;
        }
        Ok(Window {
            json,
            built: d.built,
            changes,
        })
    }

    /// Puts back everything recorded and removes the groups and the state file.
    pub fn release(&mut self) -> Result<Restored> {
        self.strategy.reset();
        self.groups.release(&self.cfg, &mut self.errors)
    }

    /// A state file left by an agent that was killed: put back what it changed first.
    pub fn take_over_state(&self) -> Result<Option<String>> {
        take_over_state(&self.cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::act::state::HostState;
    use crate::act::Cgroup;
    use config::{Scheduler, VmConfig};
    use std::fs;
    use std::path::{Path, PathBuf};
    use std::time::Duration;

    /// A fake host: /proc with one QEMU (pid 4242, vCPU thread 4243, tap `tap0`) per name, and
    /// /sys with the taps' counters and 2 online CPUs.
    struct FakeHost {
        dir: tempfile::TempDir,
    }

    impl FakeHost {
        fn new(vms: &[(i32, &str)]) -> FakeHost {
            let h = FakeHost {
                dir: tempfile::tempdir().unwrap(),
            };
            let (proc, sys) = (h.proc(), h.sys());
            fs::create_dir_all(sys.join("devices/system/cpu")).unwrap();
            fs::write(sys.join("devices/system/cpu/online"), "0-1\n").unwrap();
            fs::create_dir_all(&proc).unwrap();
            fs::write(proc.join("stat"), "cpu 0 0 0 0\n").unwrap();
            let stat = |tid: i32| {
                let rest: Vec<String> = (3..=52).map(|i| i.to_string()).collect();
                format!("{tid} (x) {}\n", rest.join(" "))
            };
            for &(pid, name) in vms {
                let d = proc.join(pid.to_string());
                let tap = format!("tap{pid}");
                fs::create_dir_all(d.join(format!("task/{}", pid + 1))).unwrap();
                fs::create_dir_all(d.join(format!("task/{pid}"))).unwrap();
                fs::write(d.join("comm"), "qemu-system-x86\n").unwrap();
                let args = format!(
                    "qemu-system-x86_64\0-name\0{name},debug-threads=on\0-netdev\0tap,id=n0,ifname={tap},script=no\0"
                );
                fs::write(d.join("cmdline"), args).unwrap();
                fs::write(d.join(format!("task/{pid}/stat")), stat(pid)).unwrap();
                let t = d.join(format!("task/{}", pid + 1));
                fs::write(t.join("comm"), "CPU 0/KVM\n").unwrap();
                fs::write(t.join("stat"), stat(pid + 1)).unwrap();
                fs::write(t.join("schedstat"), "0 0 0\n").unwrap();
                let stats = sys.join(format!("class/net/{tap}/statistics"));
                fs::create_dir_all(&stats).unwrap();
                for c in ["tx_dropped", "rx_packets", "tx_packets", "rx_dropped"] {
                    fs::write(stats.join(c), "0\n").unwrap();
                }
            }
            h
        }
        fn proc(&self) -> PathBuf {
            self.dir.path().join("proc")
        }
        fn sys(&self) -> PathBuf {
            self.dir.path().join("sys")
        }
        fn set(&self, pid: i32, counter: &str, v: u64) {
            let f = self
                .sys()
                .join(format!("class/net/tap{pid}/statistics/{counter}"));
            fs::write(f, format!("{v}\n")).unwrap();
        }
        /// The vCPU thread ran and waited `ns` each so far.
        fn cpu(&self, pid: i32, ns: u64) {
            self.schedstat(pid, ns, ns);
        }
        fn schedstat(&self, pid: i32, run: u64, wait: u64) {
            let f = self
                .proc()
                .join(format!("{pid}/task/{}/schedstat", pid + 1));
            fs::write(f, format!("{run} {wait} 1\n")).unwrap();
        }
        fn config(&self, names: &[&str]) -> HostConfig {
            HostConfig {
                proc_root: self.proc(),
                sys_root: self.sys(),
                dry_run: true,
                hold_windows: 1,
                vms: names
                    .iter()
                    .map(|n| VmConfig {
                        name: n.to_string(),
                        weight: None,
                        taps: None,
                        qmp: None,
                        rx_ring: false,
                    })
                    .collect(),
                ..HostConfig::default()
            }
        }
    }

    /// Runs ticks until a window ends.
    fn window(a: &mut HostAgent, each_tick: impl Fn(u32)) -> Window {
        for i in 0.. {
            each_tick(i);
            if let Some(w) = a.tick().unwrap() {
                return w;
            }
        }
        unreachable!()
    }

    #[test]
    fn a_vm_whose_tap_drops_toward_it_is_nsvm_for_its_window_and_the_hold() {
        let h = FakeHost::new(&[(100, "web"), (200, "batch"), (300, "other")]);
        let mut a = HostAgent::new(h.config(&["web", "batch"])).unwrap();
        let names: Vec<&str> = a.vms.iter().map(|t| t.vm.name.as_str()).collect();
        assert_eq!(names, ["web", "batch"], "only the VMs given");
        // Window 1: web's tap drops in 4 of 10 samples (f_ro 0.4 > 0.2); both vCPUs busy.
        let w = window(&mut a, |i| {
            if i % 3 == 0 {
                h.set(100, "tx_dropped", (i as u64 + 1) * 10);
            }
        });
        let kinds: Vec<&str> = (0..2)
            .map(|i| w.json["vms"][i]["rings"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["nsvm", "nnvm"], "{}", w.json);
        assert_eq!(w.json["vms"][0]["f_ro"], 0.4);
        assert_eq!(w.json["vms"][0]["to_guest_dropped"], 100);
        assert_eq!(w.built, (vec!["web".to_string()], 1));
        assert_eq!(w.json["pools"]["nsvm"]["cpus"], "0");
        assert_eq!(w.json["pools"]["nnvm"]["vms"][0], "batch");
        assert_eq!(w.changes, 0, "a dry run changes nothing");
        // Window 2: calm rings, but the hold (1 window) keeps web NSVM; window 3 lets it go.
        let w = window(&mut a, |_| {});
        assert_eq!(w.json["vms"][0]["rings"], "nnvm");
        assert_eq!(w.json["vms"][0]["kind"], "nsvm");
        let w = window(&mut a, |_| {});
        assert_eq!(w.built, (vec![], 0));
        assert!(w.json["pools"].is_null());
    }

    #[test]
    fn load_comes_from_the_vcpu_threads_schedstat() {
        let h = FakeHost::new(&[(100, "web"), (200, "batch")]);
        let mut a = HostAgent::new(h.config(&["web", "batch"])).unwrap();
        // web's vCPU ran and waited twice what batch's did in the window: twice the load (both
        // are divided by the same ~50 ms window, read microseconds apart).
        let w = window(&mut a, |i| {
            std::thread::sleep(Duration::from_millis(5));
            if i == 9 {
                h.cpu(100, 50_000_000);
                h.cpu(200, 25_000_000);
            }
        });
        let load = |i: usize| w.json["vms"][i]["load"].as_f64().unwrap();
        assert!(load(1) > 0.0);
        assert!(
            (load(0) / load(1) - 2.0).abs() < 0.05,
            "{} {}",
            load(0),
            load(1)
        );
        // Nothing more in the next window: no load.
        let w = window(&mut a, |_| {});
        assert_eq!(w.json["vms"][0]["load"], 0.0);
    }

    #[test]
    fn ia_rotate_takes_turns_on_the_fast_core_by_scaled_work_owed() {
        // Three busy equal VMs of one vCPU; CPU 0 is "fast" (SF 1.5) by the class map. IA's
        // mapping seats two on the fast core (load / SF) and one alone on the slow core. The
        // fake threads do what those seats give: alone, the whole 100 ms window; sharing, 50 ms
        // run and 50 ms wait. Each VM is charged run × SF (100 alone, 75 sharing), so the seat
        // alone on the slow core, worth the most, goes round: over 9 cycles each VM has it 3
        // times and scaled work 3 × 100 + 6 × 75.
        let h = FakeHost::new(&[(100, "a"), (200, "b"), (300, "c")]);
        let mut c = h.config(&["a", "b", "c"]);
        c.scheduler = Scheduler::IaRotate;
        c.classes = Some(crate::real::classes::ClassMap {
            fast: vec![0],
            slow: vec![1],
            sf_fast: 1.5,
        });
        let mut a = HostAgent::new(c).unwrap();
        let pids = [100, 200, 300];
        let (mut run, mut wait, mut scaled) = ([0u64; 3], [0u64; 3], [0.0f64; 3]);
        let mut seat = [None::<u64>; 3]; // each VM's CPU this cycle (none before the first)
        let mut alone = [0; 3];
        for _ in 0..10 {
            let win = window(&mut a, |i| {
                if i == 9 {
                    for n in 0..3 {
                        h.schedstat(pids[n], run[n], wait[n]);
                    }
                }
            });
            assert_eq!(win.json["scheduler"], "ia-rotate");
            for (n, s) in seat.iter_mut().enumerate() {
                let row = &win.json["vms"][n];
                let cpu = row["cpus_next"][0].as_u64().unwrap();
                assert_eq!(row["class_next"], if cpu == 0 { "fast" } else { "slow" });
                *s = Some(cpu);
            }
            // The next cycle as the kernel would run it on these seats.
            for n in 0..3 {
                let sharing = seat.iter().filter(|s| **s == seat[n]).count() as u64;
                let ran = 100_000_000 / sharing;
                run[n] += ran;
                wait[n] += 100_000_000 - ran;
                scaled[n] += ran as f64 / 1e6 * if seat[n] == Some(0) { 1.5 } else { 1.0 };
                alone[n] += (sharing == 1) as u32;
            }
        }
        // The last window's seats were never run (the loop places one cycle ahead).
        assert_eq!(alone.iter().sum::<u32>(), 10);
        assert!(
            alone.iter().all(|&k| (3..=4).contains(&k)),
            "turns alone: {alone:?}"
        );
        let (lo, hi) = scaled
            .iter()
            .fold((f64::MAX, 0.0f64), |(l, h), &x| (l.min(x), h.max(x)));
        assert!(
            hi - lo <= 25.0 + 1e-9,
            "scaled work per VM {scaled:?}: at most one turn apart"
        );
    }

    #[test]
    fn v2_pools_are_threaded_children_of_each_threads_own_cgroup_recorded_first() {
        // A fake cgroup2 tree (plain files; the kernel's own rules are checked in the NUMA guest):
        // VM a's threads are in /vms/a (a systemd-style scope), VM b's in the root. ia-rotate
        // pins each vCPU to one CPU's group: under v2 that group is made beside the thread, in
        // its own cgroup, and cpuset is enabled from the root down where it was missing; all of
        // it is in the state file, and the QEMU main threads are not touched.
        let h = FakeHost::new(&[(100, "a"), (200, "b")]);
        let root = h.dir.path().join("cg");
        for (d, sc) in [("", "memory"), ("vms", ""), ("vms/a", "")] {
            fs::create_dir_all(root.join(d)).unwrap();
            fs::write(root.join(d).join("cgroup.subtree_control"), sc).unwrap();
        }
        fs::write(root.join("cgroup.controllers"), "cpuset cpu memory\n").unwrap();
        for (pid, group) in [(100, "/vms/a"), (200, "/")] {
            for tid in [pid, pid + 1] {
                let f = h.proc().join(format!("{pid}/task/{tid}/cgroup"));
                fs::write(f, format!("0::{group}\n")).unwrap();
            }
        }
        let mut c = h.config(&["a", "b"]);
        (c.dry_run, c.cgroup, c.cgroup2_root) = (false, Some(Cgroup::V2), root.clone());
        c.state_file = h.dir.path().join("state.json");
        c.scheduler = Scheduler::IaRotate;
        c.classes = Some(crate::real::classes::ClassMap {
            fast: vec![0],
            slow: vec![1],
            sf_fast: 1.5,
        });
        c.nsvm_slice_ms = 0.0;
        c.nnvm_slice_ms = 0.0;
        let mut a = HostAgent::new(c).unwrap();
        assert!(
            a.pools_text().starts_with("cgroup v2"),
            "{}",
            a.pools_text()
        );
        let w = window(&mut a, |_| {});
        assert_eq!(w.json["cgroup"], "v2");
        assert_eq!(w.changes, 2, "{}", w.json);
        let mut made = Vec::new();
        for (pid, parent) in [(100, root.join("vms/a")), (200, root.clone())] {
            let cpu = w.json["vms"][(pid / 100 - 1) as usize]["cpus_next"][0]
                .as_u64()
                .unwrap();
            let dir = parent.join(format!("{CPU_POOL}{cpu}"));
            let read = |f: &str| fs::read_to_string(dir.join(f)).unwrap();
            assert_eq!(read("cgroup.type"), "threaded");
            assert_eq!(read("cpuset.cpus"), cpu.to_string());
            assert_eq!(
                read("cgroup.threads"),
                (pid + 1).to_string(),
                "the vCPU thread"
            );
            assert!(
                !parent.join("cgroup.threads").exists(),
                "the main thread stays"
            );
            made.push(dir);
        }
        let sc = |d: &str| fs::read_to_string(root.join(d).join("cgroup.subtree_control")).unwrap();
        assert_eq!([sc(""), sc("vms"), sc("vms/a")], ["+cpuset"; 3]);
        let state = HostState::load(&h.dir.path().join("state.json")).unwrap();
        assert_eq!(state.cgroup, Cgroup::V2);
        assert_eq!(
            state.subtree_control,
            [root.clone(), root.join("vms"), root.join("vms/a")]
        );
        made.sort();
        let mut pools = state.pools.clone();
        pools.sort();
        assert_eq!(pools, made);
        assert_eq!(state.threads[&101].group.as_deref(), Some("/vms/a"));
        assert_eq!(state.threads[&201].group.as_deref(), Some("/"));
        assert!(!state.threads.contains_key(&100) && !state.threads.contains_key(&200));

        // VM b exits: its group goes at once (the kernel's empty group is an empty directory
        // here), VM a's stays.
        for f in ["cgroup.type", "cpuset.cpus", "cgroup.threads"] {
            fs::remove_file(made[0].join(f)).unwrap();
        }
        fs::remove_dir_all(h.proc().join("200")).unwrap();
        let w = window(&mut a, |_| {});
        assert_eq!(w.json["vms"].as_array().unwrap().len(), 1);
        assert!(!made[0].exists(), "{:?} left", made[0]);
        assert!(made[1].exists());
        assert_eq!(a.errors.get("restore"), None);

        // A group the kernel gave its parent's CPUs (the VM's cgroup pinned elsewhere) is told.
        fs::write(made[1].join("cpuset.cpus.effective"), "2-3\n").unwrap();
        apply::check_effective(&made[1], &mut a.errors);
        assert_eq!(a.errors.get("narrowed"), Some(&1));
        fs::write(made[1].join("cpuset.cpus.effective"), read_cpus(&made[1])).unwrap();
        apply::check_effective(&made[1], &mut a.errors);
        assert_eq!(
            a.errors.get("narrowed"),
            Some(&1),
            "the CPUs asked: nothing to tell"
        );
    }

    fn read_cpus(dir: &Path) -> String {
        fs::read_to_string(dir.join("cpuset.cpus")).unwrap()
    }

    #[test]
    fn pools_cgroup_v2_without_cpuset_on_cgroup2_names_the_key() {
        let h = FakeHost::new(&[(100, "a")]);
        let root = h.dir.path().join("cg");
        fs::create_dir_all(&root).unwrap();
        fs::write(root.join("cgroup.controllers"), "cpu io memory pids\n").unwrap();
        let mut c = h.config(&["a"]);
        (c.cgroup, c.cgroup2_root) = (Some(Cgroup::V2), root.clone());
        let e = HostAgent::new(c.clone()).err().unwrap();
        assert!(e.is_usage());
        assert!(
            e.to_string()
                .starts_with("pools.cgroup: \"v2\" needs the cpuset"),
            "{e}"
        );
        c.cgroup2_root = h.dir.path().join("nope");
        let e = HostAgent::new(c.clone()).err().unwrap();
        assert!(e.to_string().starts_with("paths.cgroup2_root: "), "{e}");
        // Auto on a host with neither is an error only when pools are to be made.
        (c.cgroup, c.cpuset_root) = (None, h.dir.path().join("nope"));
        assert!(HostAgent::new(c.clone())
            .unwrap()
            .groups
            .hierarchy
            .is_none());
        c.dry_run = false;
        let e = HostAgent::new(c).err().unwrap();
        assert!(
            e.to_string().starts_with("pools.cgroup: \"auto\" found no"),
            "{e}"
        );
    }

    #[test]
    fn ia_rotate_on_a_host_of_one_class_is_a_config_error() {
        let h = FakeHost::new(&[(100, "a")]);
        let mut c = h.config(&["a"]);
        c.scheduler = Scheduler::IaRotate;
        let e = HostAgent::new(c).err().unwrap();
        assert!(e.is_usage());
        assert!(
            e.to_string()
                .starts_with("scheduler: ia-rotate needs two core classes"),
            "{e}"
        );
    }

    #[test]
    fn a_vm_that_exits_is_dropped_and_counted_never_fatal() {
        let h = FakeHost::new(&[(100, "web"), (200, "batch")]);
        let mut a = HostAgent::new(h.config(&["web", "batch"])).unwrap();
        fs::remove_dir_all(h.proc().join("200")).unwrap();
        let w = window(&mut a, |_| {});
        assert_eq!(w.json["vms"].as_array().unwrap().len(), 1);
        assert_eq!(a.errors.get("vm_gone"), Some(&1));
    }

    #[test]
    fn a_configured_tap_that_does_not_exist_is_a_config_error() {
        let h = FakeHost::new(&[(100, "web")]);
        let mut c = h.config(&["web"]);
        c.vms[0].taps = Some(vec!["nope".into()]);
        let e = HostAgent::new(c).err().unwrap();
        assert!(e.is_usage());
        assert!(e.to_string().starts_with("vm[0].taps: VM \"web\""), "{e}");
    }
}
