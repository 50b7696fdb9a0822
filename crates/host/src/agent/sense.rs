//! What the host agent reads: the VMs it is given (QEMU processes found under /proc, or libvirt's
//! domains), each made ready to watch (`track`: taps, vCPU threads, QMP, rings, sensor), their
//! readings every interval and every window, and the host's own files it decides from (which
//! cgroup hierarchy has cpuset, the CPUs the kernel gave a group). The files are read through
//! `colosched_sys`'s `Procfs`, `Sysfs` and `Cgroupfs`; nothing here writes to the system.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use colosched_core::cpuset::CpuSet;
use colosched_qemu::libvirt::find_program;
use colosched_qemu::{
    discover, Accel, DomainMonitor, Monitor, Qmp, SharedVirsh, Vcpu, Virsh, Vm, VmFilter,
};

use colosched_sys::{Cgroupfs, Procfs, Sysfs};

use super::config::{HostConfig, VmConfig};
use super::error::{Error, Result};
use crate::act::Cgroup;
use crate::decide::diff::{NsvmHold, RingSample};
use crate::decide::tap::ring_sample;
use crate::real::{net_delta, CpuReading, NetReading, RxRings, VmSensor};

const QMP_TIMEOUT: Duration = Duration::from_secs(2);
/// One virsh command (libvirt answers in milliseconds; a stuck libvirtd must not stop the agent).
const VIRSH_TIMEOUT: Duration = Duration::from_secs(5);

/// A VM the agent watches.
pub struct Tracked {
    pub vm: Vm,
    /// Its QEMU's start time: with the pid, which process it is.
    pub starttime: u64,
    pub weight: f64,
    /// The sysfs its taps are read from (its own network namespace's when they are not in ours).
    pub sys_root: PathBuf,
    pub(super) sensor: VmSensor,
    pub(super) hold: NsvmHold,
    pub(super) last_net: NetReading,
    pub(super) last_cpu: CpuReading,
    pub(super) samples: Vec<RingSample>,
    /// Its RX rings through QMP (`vm[i].rx_ring`).
    rings: Option<RxRings>,
    /// This window's tap totals: packets dropped toward the guest, packets it sent.
    pub(super) dropped: u64,
    pub(super) sent: u64,
}

impl Tracked {
    /// One T_m: its taps' counters since the last call as one ring sample (with the RX ring's
    /// fill when it is read). Returns whether reading the ring failed.
    pub(super) fn sample(&mut self, period_ns: u64, ql_max: u32) -> bool {
        let now = self.sensor.read_net();
        let d = net_delta(&self.last_net, &now);
        self.last_net = now;
        let mut failed = false;
        let fill = self.rings.as_mut().and_then(|r| {
            r.fill(ql_max)
                .inspect_err(|e| {
                    failed = true;
                    tracing::debug!("{e}");
                })
                .ok()
                .flatten()
        });
        self.samples
            .push(ring_sample(&d.interval(fill), period_ns, ql_max));
        self.dropped += d.tap.to_guest_dropped;
        self.sent += d.tap.from_guest;
        failed
    }

    /// Its vCPU threads' schedstat now; `None` when its QEMU is gone (a vCPU's schedstat
    /// cannot be read and the process at its pid is not the one found: its start time is only
    /// read then, not every window for every VM).
    pub(super) fn read_cpu(&mut self, proc_root: &Path) -> Option<CpuReading> {
        let r = self.sensor.read_cpu();
        let pid = self.vm.pid;
        if r.vcpus.iter().any(Option::is_none)
            && Procfs::new(proc_root).starttime(pid, pid).ok() != Some(self.starttime)
        {
            return None;
        }
        Some(r)
    }

    /// The rotation's name for a VM: its QEMU's pid and start time (a pid alone can be reused).
    pub fn key(&self) -> u64 {
        (self.starttime << 22) | self.vm.pid as u64
    }
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
    let shows = |root: &Path| taps.iter().all(|t| Sysfs::new(root).has_net_device(t));
    let own = Procfs::new(&cfg.proc_root).process_root(pid).join("sys");
    [cfg.sys_root.clone(), own].into_iter().find(|r| shows(r))
}

/// The vCPU threads QEMU reports on its monitor (`query-cpus-fast`).
fn qmp_vcpus(q: &mut dyn Monitor, named: &[Vcpu]) -> std::result::Result<Vec<Vcpu>, String> {
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

/// A found VM made ready to watch, with what its config entry (`vm[i]`) says and, under
/// `[libvirt]`, what libvirt says of the domain. Errors name the key: a tap that no sysfs shows,
/// a QMP socket that does not answer as one, a domain libvirt cannot tell about.
pub(super) fn track(
    cfg: &HostConfig,
    mut vm: Vm,
    entry: Option<(usize, &VmConfig)>,
    virsh: Option<&SharedVirsh>,
) -> Result<Tracked> {
    let key = |k: &str| {
        entry.map_or(format!("vms.all (VM {:?})", vm.name), |(i, _)| {
            format!("vm[{i}].{k}")
        })
    };
    let (taps, qmp, rx_ring) = entry.map_or((None, None, false), |(_, c)| {
        (c.taps.clone(), c.qmp.clone(), c.rx_ring)
    });
    // One QMP client at a time: the monitor that gave the vCPUs reads the rings.
    let mut monitor: Option<Box<dyn Monitor>> = None;
    if let Some(path) = &qmp {
        let q = Qmp::connect(path, QMP_TIMEOUT).map_err(|e| Error::config(key("qmp"), e))?;
        monitor = Some(Box::new(q));
    }
    if let Some(v) = virsh {
        let lv = |e: String| Error::config("libvirt", format!("domain {:?}: {e}", vm.name));
        if taps.is_none() {
            vm.taps = v
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .taps(&vm.name)
                .map_err(|e| lv(e.to_string()))?;
        }
        if monitor.is_none() {
            let m = DomainMonitor::new(v.clone(), &vm.name).map_err(|e| lv(e.to_string()))?;
            monitor = Some(Box::new(m));
        }
    }
    if let Some(taps) = taps {
        vm.taps = taps;
    }
    let mut rings = None;
    if let Some(mut m) = monitor {
        let k = if qmp.is_some() {
            key("qmp")
        } else {
            "libvirt".to_string()
        };
        vm.vcpus = qmp_vcpus(m.as_mut(), &vm.vcpus).map_err(|e| Error::config(&k, e))?;
        // A QEMU of the same -name that is not the domain (or not the socket's) is not taken.
        let tids = Procfs::new(&cfg.proc_root).tids(vm.pid);
        if let Some(v) = vm.vcpus.iter().find(|v| !tids.contains(&v.tid)) {
            return Err(Error::config(
                &k,
                format!(
                    "{} gives vCPU thread {} for VM {:?}, which is no thread of pid {}: another \
                     QEMU with this name?",
                    m.peer(),
                    v.tid,
                    vm.name,
                    vm.pid
                ),
            ));
        }
        if rx_ring {
            rings = Some(RxRings::new(m).map_err(|e| Error::config(key("rx_ring"), e))?);
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
    let starttime = (Procfs::new(&cfg.proc_root).starttime(vm.pid, vm.pid))
        .map_err(|e| Error::read(cfg.proc_root.join(vm.pid.to_string()), e.msg()))?;
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
        hold: NsvmHold::new(1, cfg.hold_windows, cfg.hold_max_windows),
        last_net,
        last_cpu,
        samples: Vec::new(),
        rings,
        dropped: 0,
        sent: 0,
    })
}

/// Which hierarchy the pools go in (`pools.cgroup`), checked on this host: v1 needs
/// `cpuset.cpus` at `paths.cpuset_root`, v2 cpuset in `paths.cgroup2_root`'s
/// `cgroup.controllers`; auto takes v1, else v2. `None`: auto found neither.
pub fn hierarchy(cfg: &HostConfig) -> Result<Option<(Cgroup, PathBuf)>> {
    let v1 = cfg.cpuset_root.join("cpuset.cpus").exists();
    let controllers = cfg.cgroup2_root.join("cgroup.controllers");
    let listed = Cgroupfs::new(&cfg.cgroup2_root).read("cgroup.controllers");
    let v2 = listed
        .as_ref()
        .is_ok_and(|t| t.split_whitespace().any(|c| c == "cpuset"));
    match (cfg.cgroup, v1, v2) {
        (Some(Cgroup::V1) | None, true, _) => Ok(Some((Cgroup::V1, cfg.cpuset_root.clone()))),
        (Some(Cgroup::V2) | None, _, true) => Ok(Some((Cgroup::V2, cfg.cgroup2_root.clone()))),
        (None, ..) => Ok(None),
        (Some(Cgroup::V1), ..) => Err(Error::config(
            "paths.cpuset_root",
            format!(
                "{} is not a cgroup v1 cpuset hierarchy (no cpuset.cpus)",
                cfg.cpuset_root.display()
            ),
        )),
        (Some(Cgroup::V2), ..) => Err(match listed {
            Err(e) => Error::config(
                "paths.cgroup2_root",
                format!(
                    "{}: {} (not a cgroup2 mount)",
                    controllers.display(),
                    e.msg()
                ),
            ),
            Ok(text) => Error::config(
                "pools.cgroup",
                format!(
                    "\"v2\" needs the cpuset controller on cgroup2, but {} lists only [{}] (is \
                     cpuset bound to cgroup v1 here? then use \"v1\" or \"auto\")",
                    controllers.display(),
                    text.trim()
                ),
            ),
        }),
    }
}

/// The CPUs a group asked for and those the kernel gives it, when they differ (v2 takes CPUs
/// its parent has not without a word, and gives the parent's instead).
pub fn narrowed(dir: &Path) -> Option<(CpuSet, CpuSet)> {
    let group = Cgroupfs::new(dir);
    match (group.cpus("cpuset.cpus"), group.effective_cpus()) {
        (Ok(asked), Ok(got)) if asked != got => Some((asked, got)),
        _ => None,
    }
}

/// The `virsh` session asking `[libvirt]` (none without it).
pub fn libvirt_session(cfg: &HostConfig) -> Result<Option<SharedVirsh>> {
    let Some(lv) = &cfg.libvirt else {
        return Ok(None);
    };
    let program = find_program(&lv.virsh).ok_or_else(|| {
        Error::config(
            "libvirt.virsh",
            format!("{:?} not found (Debian: libvirt-clients)", lv.virsh),
        )
    })?;
    let v = Virsh::start(&program, &lv.uri, VIRSH_TIMEOUT)
        .map_err(|e| Error::config("libvirt.uri", e))?;
    Ok(Some(Arc::new(Mutex::new(v))))
}

/// The config's `[[vm]]` entry named `name`, with its index.
pub(super) fn entry<'a>(cfg: &'a HostConfig, name: &str) -> Option<(usize, &'a VmConfig)> {
    cfg.vms.iter().enumerate().find(|(_, c)| c.name == name)
}

/// Looks for the VMs again: those in `watched` that are still the same process (and, found by
/// thread name, have the same vCPU threads) are kept, new ones are tracked. Returns the VMs to
/// watch, by pid, and what is left of `watched` (the gone). At start (`strict`) a VM the agent
/// cannot watch is a config error; later it is logged and counted in `failed`.
pub(super) fn rediscover(
    cfg: &HostConfig,
    virsh: Option<&SharedVirsh>,
    mut watched: Vec<Tracked>,
    strict: bool,
    failed: &mut u64,
) -> Result<(Vec<Tracked>, Vec<Tracked>)> {
    let mut filter = filter(cfg);
    if let Some(v) = virsh {
        // libvirt's running domains: every one (vms.all), or those listed that run.
        let running = v.lock().unwrap_or_else(|p| p.into_inner()).domains();
        let running = match running {
            Ok(r) => r,
            Err(e) if strict => return Err(Error::config("libvirt.uri", e)),
            Err(e) => {
                tracing::warn!("{e}"); // it names the libvirt URI
                *failed += 1;
                return Ok((watched, Vec::new())); // the VMs watched so far stay
            }
        };
        filter.names = if cfg.all_vms {
            running
        } else {
            running
                .into_iter()
                .filter(|n| filter.names.contains(n))
                .collect()
        };
    }
    let found = if virsh.is_some() && filter.names.is_empty() {
        Vec::new() // (an empty filter would take every QEMU process)
    } else {
        discover(&cfg.proc_root, &filter)
    };
    let mut kept = Vec::with_capacity(found.len());
    for vm in found {
        let old = watched.iter().position(|t| t.vm.pid == vm.pid);
        let same = old.filter(|&i| {
            let t = &watched[i];
            Procfs::new(&cfg.proc_root).starttime(vm.pid, vm.pid).ok() == Some(t.starttime)
                && (t.vm.vcpus == vm.vcpus
                    || virsh.is_some()
                    || entry(cfg, &vm.name).is_some_and(|(_, c)| c.qmp.is_some()))
        });
        if let Some(i) = same {
            kept.push(watched.swap_remove(i));
            continue;
        }
        let entry = entry(cfg, &vm.name);
        match track(cfg, vm, entry, virsh) {
            Ok(t) => kept.push(t),
            Err(e) if strict => return Err(e),
            Err(e) => {
                tracing::warn!("{e}");
                *failed += 1;
            }
        }
    }
    kept.sort_by_key(|t| t.vm.pid);
    Ok((kept, watched))
}
