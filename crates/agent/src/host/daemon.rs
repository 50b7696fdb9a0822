//! The host agent's loop (spec 002 on a Linux/KVM host). Every interval (T_m, 10 ms) it reads
//! each VM's two tap counters and turns them into one ring sample (`decide::tap`). Every window
//! (T_s, 100 ms) it classifies each VM from its samples (`window_stats`), keeps it NSVM for the
//! hold's windows (`NsvmHold`), measures its CPU load from its vCPU threads' schedstat, and sizes
//! the two pools (`plan_pools`, `pools_built`): the simulator's Diff-Scheduler calls the very
//! same functions. Then it makes the host match the plan: the NSVMs' vCPU threads in one cpuset
//! pool with a short EEVDF slice, the other VMs' in a second pool with a long one.
//!
//! Everything it changes is recorded in the state file before it is changed (`act::state`) and
//! put back when no NSVM is left (the host as it was: no pools), on exit, on SIGTERM, or by
//! `restore` after a SIGKILL. Only vCPU threads of the VMs it was given are touched: QEMU's
//! other threads (main loop, I/O) stay where they are.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use colosched_core::Rng;
use colosched_host::act::cpuset::CpusetPool;
use colosched_host::act::slice;
use colosched_host::act::state::{starttime, HostState, Restored};
use colosched_host::decide::diff::{
    plan_pools, pools_built, window_stats, NsvmHold, NsvmThresholds, PoolPlan, RingSample,
    RingStats, VmKind, VmNeed,
};
use colosched_host::decide::tap::ring_sample;
use colosched_host::real::{
    cpu_delta, discover, net_delta, Accel, CpuReading, NetReading, Qmp, Vcpu, Vm, VmFilter,
    VmSensor,
};
use serde_json::{json, Value};

use super::config::{HostConfig, VmConfig};
use super::metrics::HostMetrics;
use crate::cpuset::CpuSet;
use crate::error::{Error, Result};

/// The two pools' cpuset groups, made under the cpuset root.
pub const NS_POOL: &str = "colosched-host-nsvm";
pub const NN_POOL: &str = "colosched-host-nnvm";
const QMP_TIMEOUT: Duration = Duration::from_secs(2);

/// A VM the agent watches.
pub struct Tracked {
    pub vm: Vm,
    /// Its QEMU's start time: with the pid, which process it is.
    pub starttime: u64,
    pub weight: f64,
    /// The sysfs its taps are read from (its own network namespace's when they are not in ours).
    pub sys_root: PathBuf,
    sensor: VmSensor,
    hold: NsvmHold,
    last_net: NetReading,
    last_cpu: CpuReading,
    samples: Vec<RingSample>,
    /// This window's tap totals: packets dropped toward the guest, packets it sent.
    dropped: u64,
    sent: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pool {
    Ns,
    Nn,
}

/// One window: what each VM showed, the plan, and what was changed.
#[derive(Debug)]
pub struct Window {
    pub json: Value,
    pub plan: PoolPlan,
    /// The NSVMs by name and the NSVM pool's CPU count (0: no pools).
    pub built: (Vec<String>, usize),
    pub changes: usize,
}

pub struct HostAgent {
    pub cfg: HostConfig,
    /// The CPUs the pools share, ascending.
    pub cpus: Vec<usize>,
    pub vms: Vec<Tracked>,
    /// What a thread that asked for no slice reads (this thread's request).
    pub default_slice_ns: u64,
    rng: Rng,
    state: HostState,
    pools: Option<(CpusetPool, CpusetPool)>,
    pool_cpus: (String, String),
    placed: BTreeMap<i32, Pool>,
    ticks: u32,
    pub windows: u64,
    /// Errors by kind (gone, attach, slice, qmp, vm_gone, restore), counted, never fatal.
    pub errors: BTreeMap<&'static str, u64>,
    pub metrics: Arc<Mutex<HostMetrics>>,
    log: Option<Box<dyn Write + Send>>,
}

/// The VMs the config gives: every QEMU process, or those named.
fn filter(cfg: &HostConfig) -> VmFilter {
    if cfg.all_vms {
        VmFilter::default()
    } else {
        VmFilter {
            pids: Vec::new(),
            names: cfg.vms.iter().map(|v| v.name.clone()).collect(),
        }
    }
}

/// The sysfs that shows all of `taps`: ours, or that of the VM's own mount namespace (a QEMU
/// started by `ip netns exec` sees its namespace's devices there). `None`: neither shows them.
pub fn sys_root_for(cfg: &HostConfig, pid: i32, taps: &[String]) -> Option<PathBuf> {
    let shows = |root: &Path| taps.iter().all(|t| root.join("class/net").join(t).exists());
    let own = cfg.proc_root.join(format!("{pid}/root/sys"));
    [cfg.sys_root.clone(), own].into_iter().find(|r| shows(r))
}

/// The vCPU threads QEMU reports on its QMP socket (`query-cpus-fast`).
fn qmp_vcpus(path: &Path, named: &[Vcpu]) -> std::result::Result<Vec<Vcpu>, String> {
    let mut q = Qmp::connect(path, QMP_TIMEOUT).map_err(|e| e.to_string())?;
    let cpus = q.query_cpus_fast().map_err(|e| e.to_string())?;
    Ok(cpus
        .into_iter()
        .map(|c| Vcpu {
            index: c.cpu_index,
            tid: c.thread_id,
            accel: named
                .iter()
                .find(|v| v.tid == c.thread_id)
                .map_or(Accel::Kvm, |v| v.accel),
        })
        .collect())
}

/// A found VM made ready to watch, with what its config entry (`vm[i]`) says. Errors name the
/// key: a tap that no sysfs shows, a QMP socket that does not answer as one.
fn track(cfg: &HostConfig, mut vm: Vm, entry: Option<(usize, &VmConfig)>) -> Result<Tracked> {
    let key = |k: &str| {
        entry.map_or(format!("vms.all (VM {:?})", vm.name), |(i, _)| {
            format!("vm[{i}].{k}")
        })
    };
    if let Some((_, c)) = entry {
        if let Some(taps) = &c.taps {
            vm.taps = taps.clone();
        }
        if let Some(path) = &c.qmp {
            vm.vcpus = qmp_vcpus(path, &vm.vcpus).map_err(|e| Error::config(key("qmp"), e))?;
        }
    }
    if vm.vcpus.is_empty() {
        return Err(Error::config(
            key("qmp"),
            format!(
                "VM {:?} (pid {}): no vCPU thread found: QEMU names them `CPU n/KVM` only with \
                 -name ...,debug-threads=on; else give its QMP socket as qmp",
                vm.name, vm.pid
            ),
        ));
    }
    let sys_root = sys_root_for(cfg, vm.pid, &vm.taps).ok_or_else(|| {
        Error::config(
            key("taps"),
            format!(
                "VM {:?} (pid {}): tap(s) {:?} not found under {}/class/net nor in its own \
                 namespace's sysfs",
                vm.name,
                vm.pid,
                vm.taps,
                cfg.sys_root.display()
            ),
        )
    })?;
    let starttime = starttime(&cfg.proc_root, vm.pid, vm.pid)
        .map_err(|e| Error::read(cfg.proc_root.join(vm.pid.to_string()), e))?;
    let weight = entry
        .and_then(|(_, c)| c.weight)
        .unwrap_or(vm.vcpus.len() as f64);
    let mut sensor = VmSensor::new(&cfg.proc_root, &sys_root, &vm);
    let (last_net, last_cpu) = (sensor.read_net(), sensor.read_cpu());
    Ok(Tracked {
        vm,
        starttime,
        weight,
        sys_root,
        sensor,
        hold: NsvmHold::new(1, cfg.hold_windows),
        last_net,
        last_cpu,
        samples: Vec::new(),
        dropped: 0,
        sent: 0,
    })
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

fn cpu_list(cpus: &[usize]) -> String {
    cpus.iter().copied().collect::<CpuSet>().to_string()
}

impl HostAgent {
    /// The agent for a checked config: its CPUs, the VMs running now. Errors name the key.
    pub fn new(cfg: HostConfig) -> Result<HostAgent> {
        let stat = cfg.proc_root.join("stat");
        std::fs::metadata(&stat)
            .map_err(|e| Error::config("paths.proc_root", format!("{}: {e}", stat.display())))?;
        let online = crate::sense::topology::cpus(&cfg.sys_root, "online")
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
                format!("two pools need at least 2 CPUs, got {}", cpu_list(&cpus)),
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
        if !cfg.dry_run && !cfg.cpuset_root.join("cpuset.cpus").exists() {
            return Err(Error::config(
                "paths.cpuset_root",
                format!(
                    "{} is not a cgroup v1 cpuset hierarchy (no cpuset.cpus)",
                    cfg.cpuset_root.display()
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
        let mut agent = HostAgent {
            rng: Rng::new(cfg.seed),
            state: HostState::new(&cfg.cpuset_root),
            cfg,
            cpus,
            vms: Vec::new(),
            default_slice_ns,
            pools: None,
            pool_cpus: (String::new(), String::new()),
            placed: BTreeMap::new(),
            ticks: 0,
            windows: 0,
            errors: BTreeMap::new(),
            metrics: Arc::new(Mutex::new(HostMetrics::default())),
            log,
        };
        agent.rediscover(true)?;
        Ok(agent)
    }

    fn count(&mut self, kind: &'static str) {
        *self.errors.entry(kind).or_default() += 1;
    }

    /// Looks for the VMs again: new ones are watched from the next window, gone ones dropped.
    /// At start (`strict`) a VM the agent cannot watch is a config error; later it is counted.
    pub fn rediscover(&mut self, strict: bool) -> Result<()> {
        let found = discover(&self.cfg.proc_root, &filter(&self.cfg));
        let mut kept = Vec::with_capacity(found.len());
        for vm in found {
            let old = self.vms.iter().position(|t| t.vm.pid == vm.pid);
            let same = old.filter(|&i| {
                let t = &self.vms[i];
                starttime(&self.cfg.proc_root, vm.pid, vm.pid).ok() == Some(t.starttime)
                    && (t.vm.vcpus == vm.vcpus
                        || self.entry(&vm.name).is_some_and(|(_, c)| c.qmp.is_some()))
            });
            if let Some(i) = same {
                kept.push(self.vms.swap_remove(i));
                continue;
            }
            let entry = self.entry(&vm.name);
            match track(&self.cfg, vm, entry) {
                Ok(t) => kept.push(t),
                Err(e) if strict => return Err(e),
                Err(e) => {
                    tracing::warn!("{e}");
                    self.count("discovery");
                }
            }
        }
        for gone in std::mem::take(&mut self.vms) {
            for v in &gone.vm.vcpus {
                self.placed.remove(&v.tid);
            }
        }
        kept.sort_by_key(|t| t.vm.pid);
        self.vms = kept;
        Ok(())
    }

    fn entry(&self, name: &str) -> Option<(usize, &VmConfig)> {
        self.cfg
            .vms
            .iter()
            .enumerate()
            .find(|(_, c)| c.name == name)
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
        for t in &mut self.vms {
            let now = t.sensor.read_net();
            let d = net_delta(&t.last_net, &now);
            t.last_net = now;
            t.samples
                .push(ring_sample(&d.interval(None), period_ns, ql_max));
            t.dropped += d.tap.to_guest_dropped;
            t.sent += d.tap.from_guest;
        }
        self.ticks += 1;
        if self.ticks < self.samples_per_window() {
            return Ok(None);
        }
        self.ticks = 0;
        self.window().map(Some)
    }

    /// The end of a window: classify, measure, plan, apply, log.
    fn window(&mut self) -> Result<Window> {
        self.windows += 1;
        let proc = self.cfg.proc_root.clone();
        let before = self.vms.len();
        self.vms
            .retain(|t| starttime(&proc, t.vm.pid, t.vm.pid).ok() == Some(t.starttime));
        for _ in self.vms.len()..before {
            self.count("vm_gone");
        }
        let mut needs = Vec::with_capacity(self.vms.len());
        let mut rows = Vec::with_capacity(self.vms.len());
        for t in &mut self.vms {
            // Every VM has this window's samples: VMs join only at a window's end.
            let stats = window_stats(&self.cfg.thresholds, &t.samples);
            let cpu = t.sensor.read_cpu();
            let load = cpu_delta(&t.last_cpu, &cpu).load();
            t.last_cpu = cpu;
            let rings = stats.kind();
            let kind = t.hold.kind(0, rings);
            needs.push(VmNeed {
                kind,
                weight: t.weight,
                load,
            });
            rows.push(json!({
                "name": t.vm.name,
                "pid": t.vm.pid,
                "vcpus": t.vm.vcpus.len(),
                "weight": t.weight,
                "kind": kind_name(kind),
                "rings": kind_name(rings),
                "reasons": reasons(&self.cfg.thresholds, &stats),
                "f_ro": stats.rx_overflow_freq,
                "f_rq": stats.rx_overload_freq,
                "q_se": stats.tx_mean_nonzero,
                "f_se": stats.tx_stall_freq,
                "load": load,
                "to_guest_dropped": t.dropped,
                "from_guest": t.sent,
                "samples": t.samples.len(),
            }));
            t.samples.clear();
            (t.dropped, t.sent) = (0, 0);
        }
        let m = self.cpus.len();
        let plan = plan_pools(m, &needs, &mut self.rng, &self.cfg.pools);
        let (ns_vms, ns_cpus) = pools_built(&plan, m);
        let changes = if self.cfg.dry_run {
            0
        } else {
            self.apply(&ns_vms, ns_cpus)?
        };
        let names: Vec<String> = ns_vms
            .iter()
            .map(|&i| self.vms[i].vm.name.clone())
            .collect();
        let pools = (ns_cpus > 0).then(|| {
            let nn: Vec<&String> = (0..self.vms.len())
                .filter(|i| !ns_vms.contains(i))
                .map(|i| &self.vms[i].vm.name)
                .collect();
            json!({
                "nsvm": {"cpus": cpu_list(&self.cpus[..ns_cpus]), "vms": names,
                         "slice_ms": self.cfg.nsvm_slice_ms},
                "nnvm": {"cpus": cpu_list(&self.cpus[ns_cpus..]), "vms": nn,
                         "slice_ms": self.cfg.nnvm_slice_ms},
            })
        });
        let json = json!({
            "t": crate::now_unix(),
            "window": self.windows,
            "dry_run": self.cfg.dry_run,
            "cpusets": self.cfg.cpusets,
            "cpus": cpu_list(&self.cpus),
            "vms": rows,
            "plan": {"ns_cpus": plan.ns_cpus, "nn_cpus": plan.nn_cpus,
                     "ns_exact": plan.ns_exact, "nn_exact": plan.nn_exact},
            "pools": pools,
            "changes": changes,
            "errors": self.errors,
        });
        if let Some(log) = &mut self.log {
            writeln!(log, "{json}")
                .and_then(|()| log.flush())
                .map_err(|e| Error::Runtime(format!("decision log: {e}")))?;
        }
        if let Ok(mut m) = self.metrics.lock() {
            m.observe(&json, self.placed.len());
        }
        if self
            .windows
            .is_multiple_of(self.cfg.rediscover_windows as u64)
        {
            self.rediscover(false)?;
        }
        Ok(Window {
            json,
            plan,
            built: (names, ns_cpus),
            changes,
        })
    }

    /// Makes the host match the plan: no pools (`ns_cpus` 0) puts everything back; else the
    /// pools get their CPUs and each vCPU thread not yet where it belongs is recorded, moved
    /// and given its pool's slice. Returns the threads changed.
    fn apply(&mut self, ns_vms: &[usize], ns_cpus: usize) -> Result<usize> {
        if ns_cpus == 0 {
            if self.pools.is_none() && self.state.threads.is_empty() {
                return Ok(0);
            }
            return Ok(self.release()?.threads);
        }
        let mut want = Vec::new();
        for (i, t) in self.vms.iter().enumerate() {
            let pool = if ns_vms.contains(&i) {
                Pool::Ns
            } else {
                Pool::Nn
            };
            for v in &t.vm.vcpus {
                if self.placed.get(&v.tid) != Some(&pool) {
                    want.push((t.vm.pid, v.tid, pool));
                }
            }
        }
        let lists = (
            cpu_list(&self.cpus[..ns_cpus]),
            cpu_list(&self.cpus[ns_cpus..]),
        );
        let path = self.cfg.state_file.clone();
        let save = |s: &HostState| s.save(&path).map_err(|e| Error::state(&path, e));
        let cpusets = self.cfg.cpusets;
        match &self.pools {
            _ if !cpusets => {}
            None => {
                let root = &self.cfg.cpuset_root;
                self.state.pools = vec![root.join(NS_POOL), root.join(NN_POOL)];
                save(&self.state)?;
                let made = |name, cpus: &str| {
                    CpusetPool::create(root, name, cpus).map_err(|e| {
                        let hint = if e.kind() == std::io::ErrorKind::AlreadyExists {
                            " (not this agent's: remove it, or run `colosched host restore`)"
                        } else {
                            ""
                        };
                        Error::Runtime(format!("making pool {name}: {e}{hint}"))
                    })
                };
                let ns = made(NS_POOL, &lists.0)?;
                match made(NN_POOL, &lists.1) {
                    Ok(nn) => self.pools = Some((ns, nn)),
                    Err(e) => {
                        let _ = ns.remove();
                        return Err(e);
                    }
                }
            }
            Some((ns, nn)) if lists != self.pool_cpus => {
                for (pool, cpus) in [(ns, &lists.0), (nn, &lists.1)] {
                    pool.set_cpus(cpus)
                        .map_err(|e| Error::Runtime(format!("pool CPUs: {e}")))?;
                }
            }
            Some(_) => {}
        }
        self.pool_cpus = lists;
        // Record every thread about to change, once, before changing any.
        let (ns_ms, nn_ms) = (self.cfg.nsvm_slice_ms, self.cfg.nnvm_slice_ms);
        let slice_of = move |pool| if pool == Pool::Ns { ns_ms } else { nn_ms };
        let mut ready = Vec::with_capacity(want.len());
        for &(pid, tid, pool) in &want {
            let slice = (slice_of(pool) > 0.0).then_some(self.default_slice_ns);
            match self
                .state
                .record(&self.cfg.proc_root, pid, tid, true, slice)
            {
                Ok(()) => ready.push((tid, pool)),
                Err(_) => self.count("gone"),
            }
        }
        save(&self.state)?;
        let mut changed = 0;
        for (tid, pool) in ready {
            let attached = match &self.pools {
                Some((ns, _)) if pool == Pool::Ns => ns.attach(tid),
                Some((_, nn)) => nn.attach(tid),
                None => Ok(()), // slices alone (pools.cpusets = false)
            };
            if let Err(e) = attached {
                self.count(if e.raw_os_error() == Some(libc::ESRCH) {
                    "gone"
                } else {
                    "attach"
                });
                continue;
            }
            // A thread the plan gives no slice gets back the one it had.
            let ns = match slice_of(pool) {
                ms if ms > 0.0 => Some((ms * 1e6) as u64),
                _ => self.state.threads.get(&tid).and_then(|s| s.slice_ns),
            };
            if let Some(ns) = ns {
                if let Err(e) = slice::set_slice_ns(tid, ns) {
                    self.count(if e.raw_os_error() == Some(libc::ESRCH) {
                        "gone"
                    } else {
                        "slice"
                    });
                }
            }
            self.placed.insert(tid, pool);
            changed += 1;
        }
        Ok(changed)
    }

    /// Puts back everything recorded and removes the pools and the state file.
    pub fn release(&mut self) -> Result<Restored> {
        let r = self.state.restore(&self.cfg.proc_root);
        for e in &r.errors {
            tracing::warn!("restore: {e}");
            self.count("restore");
        }
        self.pools = None;
        self.pool_cpus = (String::new(), String::new());
        self.placed.clear();
        self.state = HostState::new(&self.cfg.cpuset_root);
        match std::fs::remove_file(&self.cfg.state_file) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(Error::state(&self.cfg.state_file, e))
            }
            _ => Ok(r),
        }
    }

    /// A state file left by an agent that was killed: put back what it changed first.
    pub fn take_over_state(&mut self) -> Result<Option<String>> {
        let path = &self.cfg.state_file;
        if !path.exists() {
            return Ok(None);
        }
        let old = HostState::load(path).map_err(|e| Error::state(path, e))?;
        let r = old.restore(&self.cfg.proc_root);
        std::fs::remove_file(path).map_err(|e| Error::state(path, e))?;
        Ok(Some(format!(
            "state file of agent {} found: {}",
            old.agent_pid,
            summary(&r)
        )))
    }
}

/// `restore`'s one line.
pub fn summary(r: &Restored) -> String {
    format!(
        "put back {} thread(s), {} gone, {} pool(s) removed, {} error(s)",
        r.threads,
        r.gone,
        r.pools_removed,
        r.errors.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

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
            let f = self
                .proc()
                .join(format!("{pid}/task/{}/schedstat", pid + 1));
            fs::write(f, format!("{ns} {ns} 1\n")).unwrap();
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
