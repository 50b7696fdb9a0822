//! host.toml, the host agent's configuration: read with serde like agent.toml
//! (`colosched_sys::config::from_toml`), an unknown key refused, then every value checked; every
//! error names its key, and its line once the file is named (`Error::in_file`).

use std::net::SocketAddr;
use std::path::PathBuf;

use colosched_core::cpuset::CpuSet;
use colosched_sys::config::{from_toml, int_in, number, Integer};
use colosched_sys::metrics::parse_listen;
use serde::Deserialize;

use super::error::{Error, Result};
use crate::act::Cgroup;
use crate::decide::diff::{DiffParams, NsvmThresholds, PoolParams};
use crate::real::classes::ClassMap;

/// One VM the agent is given, matched by its QEMU `-name`.
#[derive(Clone, Debug, PartialEq)]
pub struct VmConfig {
    pub name: String,
    /// W_i; `None` = its vCPU count (the paper's W ∝ vCPUs).
    pub weight: Option<f64>,
    /// Its taps; `None` = those its QEMU has (command line and open tap fds).
    pub taps: Option<Vec<String>>,
    /// A QMP socket of its own to ask for its vCPU threads (`query-cpus-fast`); `None` = find
    /// them by thread name (`CPU n/KVM`). Never a socket the agent was not given: libvirt's
    /// monitor is libvirt's.
    pub qmp: Option<PathBuf>,
    /// Read its virtio-net RX ring's fill through `qmp` (or libvirt) every T_m (spec 002's
    /// RX overload).
    pub rx_ring: bool,
}

/// `[libvirt]`: the VMs are domains of this libvirt connection, asked of libvirt through one
/// `virsh` session (`colosched_qemu::libvirt`): which domains run, their taps (`domiflist`), their vCPU
/// threads and RX rings through libvirt's own monitor (`qemu-monitor-command`).
#[derive(Clone, Debug, PartialEq)]
pub struct LibvirtConfig {
    pub uri: String,
    /// The virsh to run: a path, or a name looked up on PATH.
    pub virsh: String,
}

/// Which paper's decisions the agent applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheduler {
    /// Spec 002: NSVM and NNVM pools with their slices.
    Diff,
    /// Spec 001 on Linux: each VM's vCPUs pinned to cores of one class, the fast cores rotated
    /// by scaled work owed (`decide::rotate`; the simulator's `ia-rotate`).
    IaRotate,
}

impl Scheduler {
    pub fn name(self) -> &'static str {
        match self {
            Scheduler::Diff => "diff",
            Scheduler::IaRotate => "ia-rotate",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct HostConfig {
    pub scheduler: Scheduler,
    /// ia-rotate's core classes; `None` = read from sysfs (`real::classes`).
    pub classes: Option<ClassMap>,
    /// T_m: one ring sample of every VM per interval (ms).
    pub interval_ms: u32,
    /// T_s: one classification and plan per window (ms, a multiple of `interval_ms`).
    pub window_ms: u32,
    /// A VM stays NSVM this many windows after its rings last said so (`NsvmHold`)...
    pub hold_windows: u32,
    /// ...doubled each time it comes back soon after, up to this many.
    pub hold_max_windows: u32,
    /// VMs are looked for again every this many windows (new ones join, gone ones leave).
    pub rediscover_windows: u32,
    /// The CPUs the two pools share; `None` = every online CPU.
    pub cpus: Option<CpuSet>,
    pub state_file: PathBuf,
    pub decision_log: Option<PathBuf>,
    pub dry_run: bool,
    /// The random numbers of the pool sizing (eqs 19–20).
    pub seed: u64,
    pub proc_root: PathBuf,
    pub sys_root: PathBuf,
    /// Where the v1 `cpuset` hierarchy is mounted; v1 pools are made in it.
    pub cpuset_root: PathBuf,
    /// Where cgroup2 is mounted; v2 pools are made under the vCPU threads' own groups in it.
    pub cgroup2_root: PathBuf,
    /// The hierarchy of the pools; `None` = auto (v1 when `cpuset_root` has cpuset, else v2).
    pub cgroup: Option<Cgroup>,
    pub thresholds: NsvmThresholds,
    pub pools: PoolParams,
    /// The EEVDF slice the NSVMs' vCPU threads ask for (ms).
    pub nsvm_slice_ms: f64,
    /// The NNVMs' slice (ms); 0 = leave theirs as it is.
    pub nnvm_slice_ms: f64,
    /// Make the pools as cpusets; false = the slices alone (for experiments).
    pub cpusets: bool,
    /// Every QEMU process on the host (every running domain with `[libvirt]`), not only the
    /// VMs listed.
    pub all_vms: bool,
    pub libvirt: Option<LibvirtConfig>,
    pub vms: Vec<VmConfig>,
    pub metrics_listen: Option<SocketAddr>,
}

impl Default for HostConfig {
    /// Diff's settings are the decision's own defaults (`DiffParams`), which the simulator's
    /// scenarios start from too.
    fn default() -> Self {
        let diff = DiffParams::default();
        HostConfig {
            scheduler: Scheduler::Diff,
            classes: None,
            interval_ms: 10,
            window_ms: diff.window_ms,
            hold_windows: diff.hold_windows,
            hold_max_windows: diff.hold_max_windows,
            rediscover_windows: 10,
            cpus: None,
            state_file: PathBuf::from("/run/colosched-host/state.json"),
            decision_log: None,
            dry_run: false,
            seed: 0x5eed,
            proc_root: PathBuf::from("/proc"),
            sys_root: PathBuf::from("/sys"),
            cpuset_root: PathBuf::from("/sys/fs/cgroup/cpuset"),
            cgroup2_root: PathBuf::from("/sys/fs/cgroup"),
            cgroup: None,
            thresholds: diff.thresholds,
            // The plan carries the slices the agent gives (a file sets both, below).
            pools: PoolParams {
                ns_slice_ms: diff.nsvm_slice_ms,
                nn_slice_ms: diff.nnvm_slice_ms,
                ..diff.pools
            },
            nsvm_slice_ms: diff.nsvm_slice_ms,
            nnvm_slice_ms: diff.nnvm_slice_ms,
            cpusets: true,
            all_vms: false,
            libvirt: None,
            vms: Vec::new(),
            metrics_listen: None,
        }
    }
}

/// host.toml as written: every key may be left out, and one the agent does not know is refused.
/// `HostConfig::parse` checks the values.
#[derive(Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct File {
    scheduler: Option<String>,
    classes: Option<ClassesKeys>,
    interval_ms: Option<Integer>,
    window_ms: Option<Integer>,
    hold_windows: Option<Integer>,
    hold_max_windows: Option<Integer>,
    rediscover_windows: Option<Integer>,
    cpus: Option<String>,
    seed: Option<Integer>,
    state_file: Option<String>,
    decision_log: Option<String>,
    dry_run: bool,
    paths: PathsKeys,
    classify: ClassifyKeys,
    pools: PoolsKeys,
    vms: VmsKeys,
    vm: Vec<VmKeys>,
    metrics: MetricsKeys,
    libvirt: LibvirtKeys,
}

#[derive(Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct PathsKeys {
    proc_root: Option<String>,
    sys_root: Option<String>,
    cpuset_root: Option<String>,
    cgroup2_root: Option<String>,
}

#[derive(Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct ClassesKeys {
    fast: Option<String>,
    slow: Option<String>,
    sf_fast: Option<f64>,
}

#[derive(Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct ClassifyKeys {
    ql_max: Option<Integer>,
    ql_th: Option<Integer>,
    overflow_freq: Option<f64>,
    overload_freq: Option<f64>,
    tx_mean_nonzero: Option<f64>,
    tx_stall_freq: Option<f64>,
}

#[derive(Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct PoolsKeys {
    nsvm_slice_ms: Option<f64>,
    nnvm_slice_ms: Option<f64>,
    nonempty_pool_floor: Option<bool>,
    cpusets: Option<bool>,
    cgroup: Option<String>,
}

#[derive(Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct VmsKeys {
    all: bool,
}

#[derive(Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct VmKeys {
    name: Option<String>,
    weight: Option<f64>,
    taps: Option<Vec<String>>,
    qmp: Option<String>,
    rx_ring: bool,
}

#[derive(Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct MetricsKeys {
    listen: Option<String>,
}

#[derive(Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct LibvirtKeys {
    uri: Option<String>,
    virsh: Option<String>,
}

/// A path that is not empty, if given.
fn path(key: &str, p: Option<String>) -> Result<Option<PathBuf>> {
    match p {
        Some(p) if p.trim().is_empty() => Err(Error::config(key, "an empty path")),
        p => Ok(p.map(PathBuf::from)),
    }
}

/// An integer from `lo` to `hi` that fits a `u32`, if given.
fn count(key: &str, x: Option<Integer>, lo: u32, hi: u32) -> Result<Option<u32>> {
    Ok(int_in(key, x, lo.into(), hi.into())?.map(|x| x as u32))
}

impl HostConfig {
    /// host.toml read and parsed, its errors named with the file (and a key's error with the
    /// key's line).
    pub fn load(path: &std::path::Path) -> Result<HostConfig> {
        let in_file = |e| Error::in_file(path, e);
        let text =
            std::fs::read_to_string(path).map_err(|e| in_file(Error::Syntax(e.to_string())))?;
        HostConfig::parse(&text).map_err(in_file)
    }

    pub fn parse(text: &str) -> Result<HostConfig> {
        let f: File = from_toml(text)?;
        let scheduler = match f.scheduler.as_deref() {
            None | Some("diff") => Scheduler::Diff,
            Some("ia-rotate") => Scheduler::IaRotate,
            Some(x) => {
                return Err(Error::config(
                    "scheduler",
                    format!("unknown scheduler {x:?} (known: diff, ia-rotate)"),
                ))
            }
        };
        let mut c = HostConfig {
            scheduler,
            classes: f.classes.map(parse_classes).transpose()?,
            ..HostConfig::default()
        };
        c.interval_ms = count("interval_ms", f.interval_ms, 1, 1000)?.unwrap_or(c.interval_ms);
        c.window_ms = count("window_ms", f.window_ms, 1, 60_000)?.unwrap_or(c.window_ms);
        c.hold_windows =
            count("hold_windows", f.hold_windows, 0, 10_000)?.unwrap_or(c.hold_windows);
        c.hold_max_windows = c.hold_max_windows.max(c.hold_windows);
        if let Some(x) = count("hold_max_windows", f.hold_max_windows, 0, 100_000)? {
            if x < c.hold_windows {
                return Err(Error::config(
                    "hold_max_windows",
                    format!("{x} is less than hold_windows ({})", c.hold_windows),
                ));
            }
            c.hold_max_windows = x;
        }
        c.rediscover_windows = count("rediscover_windows", f.rediscover_windows, 1, 10_000)?
            .unwrap_or(c.rediscover_windows);
        if let Some(list) = f.cpus {
            c.cpus = Some(
                list.parse::<CpuSet>()
                    .map_err(|e| Error::config("cpus", e))?,
            );
        }
        if let Some(x) = int_in("seed", f.seed, 0, i64::MAX)? {
            c.seed = x as u64;
        }
        if let Some(p) = path("state_file", f.state_file)? {
            c.state_file = p;
        }
        c.decision_log = f.decision_log.filter(|s| !s.is_empty()).map(PathBuf::from);
        c.dry_run = f.dry_run;
        let paths = f.paths;
        for (k, p, slot) in [
            ("paths.proc_root", paths.proc_root, &mut c.proc_root),
            ("paths.sys_root", paths.sys_root, &mut c.sys_root),
            ("paths.cpuset_root", paths.cpuset_root, &mut c.cpuset_root),
            (
                "paths.cgroup2_root",
                paths.cgroup2_root,
                &mut c.cgroup2_root,
            ),
        ] {
            if let Some(p) = path(k, p)? {
                *slot = p;
            }
        }
        let (cls, t) = (f.classify, &mut c.thresholds);
        t.ql_max = count("classify.ql_max", cls.ql_max, 1, 65_536)?.unwrap_or(t.ql_max);
        t.ql_th = count("classify.ql_th", cls.ql_th, 1, 65_536)?.unwrap_or(t.ql_th);
        let fraction = |k, x| number(k, x, "a fraction from 0 to 1", |x| (0.0..=1.0).contains(&x));
        t.overflow_freq =
            fraction("classify.overflow_freq", cls.overflow_freq)?.unwrap_or(t.overflow_freq);
        t.overload_freq =
            fraction("classify.overload_freq", cls.overload_freq)?.unwrap_or(t.overload_freq);
        t.tx_stall_freq =
            fraction("classify.tx_stall_freq", cls.tx_stall_freq)?.unwrap_or(t.tx_stall_freq);
        t.tx_mean_nonzero = number(
            "classify.tx_mean_nonzero",
            cls.tx_mean_nonzero,
            "≥ 0",
            |x| x >= 0.0,
        )?
        .unwrap_or(t.tx_mean_nonzero);
        if t.ql_th > t.ql_max {
            return Err(Error::config(
                "classify.ql_th",
                format!("{} is above classify.ql_max ({})", t.ql_th, t.ql_max),
            ));
        }
        // The kernel takes 0.1 to 100 ms (it clamps anything else without a word).
        let slice = |k, x| {
            number(k, x, "0 or from 0.1 to 100 (ms, the kernel's range)", |x| {
                x == 0.0 || (0.1..=100.0).contains(&x)
            })
        };
        let pools = f.pools;
        c.nsvm_slice_ms =
            slice("pools.nsvm_slice_ms", pools.nsvm_slice_ms)?.unwrap_or(c.nsvm_slice_ms);
        c.nnvm_slice_ms =
            slice("pools.nnvm_slice_ms", pools.nnvm_slice_ms)?.unwrap_or(c.nnvm_slice_ms);
        c.pools.ns_slice_ms = c.nsvm_slice_ms;
        c.pools.nn_slice_ms = c.nnvm_slice_ms;
        c.pools.nonempty_pool_floor = pools.nonempty_pool_floor.unwrap_or(true);
        c.cpusets = pools.cpusets.unwrap_or(true);
        c.cgroup = match pools.cgroup.as_deref() {
            None | Some("auto") => None,
            Some("v1") => Some(Cgroup::V1),
            Some("v2") => Some(Cgroup::V2),
            Some(x) => {
                return Err(Error::config(
                    "pools.cgroup",
                    format!("unknown {x:?} (known: auto, v1, v2)"),
                ))
            }
        };
        c.all_vms = f.vms.all;
        c.libvirt = match (f.libvirt.uri, f.libvirt.virsh) {
            (Some(uri), _) if uri.trim().is_empty() => {
                return Err(Error::config("libvirt.uri", "an empty URI"))
            }
            (Some(uri), virsh) => Some(LibvirtConfig {
                uri,
                virsh: virsh.unwrap_or_else(|| "virsh".to_string()),
            }),
            (None, Some(_)) => {
                return Err(Error::config(
                    "libvirt.virsh",
                    "given without libvirt.uri: which libvirt should it ask?",
                ))
            }
            (None, None) => None,
        };
        c.vms = parse_vms(f.vm)?;
        if let Some(addr) = f.metrics.listen.filter(|s| !s.is_empty()) {
            c.metrics_listen =
                Some(parse_listen(&addr).map_err(|e| Error::config("metrics.listen", e))?);
        }
        c.validate()?;
        Ok(c)
    }
    /// Checks that need the whole config (after command-line overrides).
    pub fn validate(&self) -> Result<()> {
        if !self.window_ms.is_multiple_of(self.interval_ms) {
            return Err(Error::config(
                "window_ms",
                format!(
                    "{} is not a multiple of interval_ms ({}): a window is a whole number of samples",
                    self.window_ms, self.interval_ms
                ),
            ));
        }
        if !self.cpusets && self.nsvm_slice_ms == 0.0 && self.nnvm_slice_ms == 0.0 {
            return Err(Error::config(
                "pools.cpusets",
                "false with both slices 0 would change nothing: set a slice, or cpusets = true",
            ));
        }
        if let Some((i, _)) = (self.vms.iter().enumerate())
            .find(|(_, v)| v.rx_ring && v.qmp.is_none() && self.libvirt.is_none())
        {
            return Err(Error::config(
                format!("vm[{i}].rx_ring"),
                "the ring is read through the VM's QMP socket: give it as qmp (or set [libvirt] \
                 to read it through libvirt)",
            ));
        }
        if self.vms.is_empty() && !self.all_vms {
            return Err(Error::config(
                "vm",
                "no VM given: list them as [[vm]] tables with a name (their QEMU -name), or set \
                 vms.all = true to take every QEMU process on the host",
            ));
        }
        Ok(())
    }
}

/// `[classes]`: `fast` and `slow` CPU lists and the fast class's `sf_fast` (> 1), all three or
/// none.
fn parse_classes(k: ClassesKeys) -> Result<ClassMap> {
    let list = |key: &str, text: Option<String>| -> Result<Vec<usize>> {
        let text = text.ok_or_else(|| Error::config(key, "a CPU list, e.g. \"0-3\", is needed"))?;
        let set = text.parse::<CpuSet>().map_err(|e| Error::config(key, e))?;
        Ok(set.iter().collect())
    };
    let sf_fast = number(
        "classes.sf_fast",
        k.sf_fast,
        "above 1 (the slow class's SF is 1)",
        |x| x > 1.0,
    )?
    .ok_or_else(|| {
        Error::config(
            "classes.sf_fast",
            "the fast cores' speed over the slow ones' is needed",
        )
    })?;
    Ok(ClassMap {
        fast: list("classes.fast", k.fast)?,
        slow: list("classes.slow", k.slow)?,
        sf_fast,
    })
}

/// The `[[vm]]` tables, each named `vm[i].key` in errors.
fn parse_vms(list: Vec<VmKeys>) -> Result<Vec<VmConfig>> {
    let mut out: Vec<VmConfig> = Vec::new();
    for (i, vm) in list.into_iter().enumerate() {
        let key = |k: &str| format!("vm[{i}].{k}");
        let name = vm
            .name
            .filter(|n| !n.trim().is_empty())
            .ok_or_else(|| Error::config(key("name"), "each VM needs its QEMU -name"))?;
        if out.iter().any(|v| v.name == name) {
            return Err(Error::config(
                key("name"),
                format!("{name:?} is listed twice"),
            ));
        }
        if vm
            .taps
            .as_ref()
            .is_some_and(|t| t.iter().any(|x| x.trim().is_empty()))
        {
            return Err(Error::config(key("taps"), "an empty tap name"));
        }
        out.push(VmConfig {
            name,
            weight: number(&key("weight"), vm.weight, "positive", |x| x > 0.0)?,
            taps: vm.taps,
            qmp: path(&key("qmp"), vm.qmp)?,
            rx_ring: vm.rx_ring,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        let e = HostConfig::parse(text).unwrap_err();
        assert!(e.is_usage(), "{e:?}");
        e.to_string()
    }

    #[test]
    fn defaults_and_a_full_example() {
        let c = HostConfig::parse("vms.all = true").unwrap();
        assert_eq!(c.cgroup, None, "auto");
        assert_eq!((c.interval_ms, c.window_ms, c.hold_windows), (10, 100, 10));
        assert_eq!(c.hold_max_windows, 80);
        assert_eq!((c.nsvm_slice_ms, c.nnvm_slice_ms), (1.0, 0.0));
        assert_eq!(c.thresholds, NsvmThresholds::default());
        let c = HostConfig::parse(
            r#"
            interval_ms = 20
            window_ms = 200
            hold_windows = 0
            hold_max_windows = 5
            cpus = "0-1"
            dry_run = true
            [paths]
            cpuset_root = "/x/cpuset"
            cgroup2_root = "/x/unified"
            [classify]
            ql_th = 100
            tx_stall_freq = 0.4
            [pools]
            nsvm_slice_ms = 0.5
            nnvm_slice_ms = 0
            cgroup = "v2"
            [[vm]]
            name = "web"
            weight = 2
            taps = ["tap0"]
            qmp = "/run/web.qmp"
            rx_ring = true
            [[vm]]
            name = "batch"
            [metrics]
            listen = "9465"
            "#,
        )
        .unwrap();
        assert_eq!((c.interval_ms, c.window_ms, c.hold_windows), (20, 200, 0));
        assert_eq!(c.hold_max_windows, 5);
        assert_eq!(c.cpus.unwrap().to_string(), "0-1");
        assert!(c.dry_run);
        assert_eq!(c.cpuset_root, PathBuf::from("/x/cpuset"));
        assert_eq!(c.cgroup2_root, PathBuf::from("/x/unified"));
        assert_eq!(c.cgroup, Some(Cgroup::V2));
        assert_eq!((c.thresholds.ql_th, c.thresholds.tx_stall_freq), (100, 0.4));
        assert_eq!((c.nsvm_slice_ms, c.nnvm_slice_ms), (0.5, 0.0));
        assert_eq!(c.vms.len(), 2);
        assert_eq!(c.vms[0].weight, Some(2.0));
        assert_eq!(c.vms[0].taps.as_deref(), Some(&["tap0".to_string()][..]));
        assert_eq!(c.vms[1].qmp, None);
        assert_eq!((c.vms[0].rx_ring, c.vms[1].rx_ring), (true, false));
        assert_eq!(c.metrics_listen.unwrap().to_string(), "127.0.0.1:9465");
    }

    #[test]
    fn the_shipped_example_parses_and_changes_nothing() {
        let c = HostConfig::parse(include_str!("../../../../examples/host.toml")).unwrap();
        assert!(c.dry_run && c.all_vms);
    }

    #[test]
    fn errors_name_the_key() {
        for (text, key) in [
            (
                "vms.all = true\ninterval = 10",
                "interval: TOML parse error at line 2, column 1: unknown field `interval`",
            ),
            (
                "vms.all = true\nwindow_ms = 105",
                "window_ms: 105 is not a multiple",
            ),
            (
                "vms.all = true\ninterval_ms = 0",
                "interval_ms: must be an integer",
            ),
            (
                "vms.all = true\nhold_windows = 2.0",
                "hold_windows: TOML parse error at line 2, column 16: expected an integer, got the \
                 float 2.0",
            ),
            (
                "vms.all = true\nseed = 1e300",
                "seed: TOML parse error at line 2, column 8: expected an integer, got the float \
                 1e300",
            ),
            ("vms.all = true\ncpus = \"0-x\"", "cpus:"),
            (
                "[[vm]]\nname = \"a\"\nrx_ring = true",
                "vm[0].rx_ring: the ring is read through the VM's QMP socket",
            ),
            (
                "vms.all = true\nhold_windows = 20\nhold_max_windows = 10",
                "hold_max_windows: 10 is less than hold_windows (20)",
            ),
            (
                "vms.all = true\n[pools]\nnsvm_slice_ms = 0.05",
                "pools.nsvm_slice_ms: must be",
            ),
            (
                "vms.all = true\n[pools]\nnnvm_slice_ms = 101",
                "pools.nnvm_slice_ms: must be",
            ),
            // The NNVMs' slice is 0 by default: no cpusets and no NSVM slice leave nothing.
            (
                "vms.all = true\n[pools]\ncpusets = false\nnsvm_slice_ms = 0",
                "pools.cpusets: false with both slices 0 would change nothing",
            ),
            (
                "vms.all = true\n[classify]\nql_th = 300",
                "classify.ql_th: 300 is above",
            ),
            (
                "vms.all = true\n[classify]\noverflow_freq = 2",
                "classify.overflow_freq",
            ),
            ("[[vm]]\nweight = 1", "vm[0].name: each VM needs"),
            (
                "[[vm]]\nname = \"a\"\n[[vm]]\nname = \"a\"",
                "vm[1].name: \"a\" is listed twice",
            ),
            (
                "[[vm]]\nname = \"a\"\ntap = [\"t\"]",
                "vm[0].tap: TOML parse error at line 3, column 1: unknown field `tap`",
            ),
            (
                "[[vm]]\nname = \"a\"\nweight = -1",
                "vm[0].weight: must be positive",
            ),
            (
                "[[vm]]\nname = \"a\"\ntaps = \"t\"",
                "vm[0].taps: TOML parse error at line 3, column 8: invalid type: string \"t\", \
                 expected a sequence",
            ),
            ("dry_run = true", "vm: no VM given"),
            (
                "vms.all = true\n[pools]\ncgroup = \"v3\"",
                "pools.cgroup: unknown \"v3\"",
            ),
            ("vm = 3", "vm: TOML parse error at line 1, column 6: invalid type: integer `3`"),
            (
                "vms.all = true\n[metrics]\nlisten = \"x\"",
                "metrics.listen",
            ),
        ] {
            let e = err(text);
            assert!(e.starts_with(key), "{text:?}: {e}");
        }
    }

    #[test]
    fn an_unknown_key_in_any_section_is_refused_with_its_line_and_column() {
        let sections = [
            "", "paths", "classes", "classify", "pools", "vms", "metrics", "libvirt", "vm",
        ];
        for section in sections {
            let (text, key) = match section {
                "" => ("vms.all = true\ntypo = 1\n".to_string(), "typo".to_string()),
                "vm" => (
                    "[[vm]]\nname = \"a\"\ntypo = 1\n".into(),
                    "vm[0].typo".into(),
                ),
                "vms" => ("[vms]\nall = true\ntypo = 1\n".into(), "vms.typo".into()),
                s => (
                    format!("vms.all = true\n[{s}]\ntypo = 1\n"),
                    format!("{s}.typo"),
                ),
            };
            let line = text.lines().position(|l| l.starts_with("typo")).unwrap() + 1;
            let e = err(&text);
            let want = format!(
                "{key}: TOML parse error at line {line}, column 1: unknown field `typo`, expected"
            );
            assert!(e.starts_with(&want), "{section:?}: {e}");
        }
    }

    #[test]
    fn a_refused_value_names_the_file_and_the_line_of_its_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("host.toml");
        let file = path.display();
        let load = |text: &str| {
            std::fs::write(&path, text).unwrap();
            HostConfig::load(&path).unwrap_err().to_string()
        };
        assert_eq!(
            load("vms.all = true\n\n[classify]\nql_max = 10\nql_th = 0\n"),
            format!("{file}:5: classify.ql_th: must be an integer from 1 to 65536, got 0")
        );
        assert_eq!(
            load("vms.all = true\nhold_windows = 20\nhold_max_windows = 10\n"),
            format!("{file}:3: hold_max_windows: 10 is less than hold_windows (20)")
        );
        assert_eq!(
            load("[[vm]]\nname = \"a\"\n[[vm]]\nweight = 2\n"),
            format!("{file}:3: vm[1].name: each VM needs its QEMU -name"),
            "a key not written: the line of its table"
        );
        assert!(
            load("vms.all = true\n[pools]\ncpusets = \"no\"\n").starts_with(&format!(
            "{file}: pools.cpusets: TOML parse error at line 3, column 11: invalid type: string"
        ))
        );
    }
}
