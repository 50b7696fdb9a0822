//! Scenario files: a host and its VMs in TOML, read with serde (`colosched_sys::config`) and
//! then checked key by key. An unknown key or a value of the wrong type is refused with its line
//! and column; every other error names the key (`vms[2].phase_ms: must be from 0.001 to 1000000,
//! got -1`), so a typo never passes silently.
//!
//! ```toml
//! name = "two-classes"
//! horizon_ms = 20000
//! migration_warmup_ms = 0.5      # optional, default 0
//! net_quantum_ms = 1             # optional, default 1: network time step (whole µs dividing 10 ms)
//! shuffle_start = true           # optional, default false: admit the vCPUs at time 0 in an
//!                                # order drawn from the run's seed (default: by index)
//!
//! [[cores]]                      # a group of identical cores
//! count = 2
//! speed = 1.8
//! [[cores]]
//! count = 6                      # speed defaults to 1
//! [[cores]]
//! count = 2
//! reserved = true                # dom0's cores
//!
//! [[vms]]
//! name = "par"
//! vcpus = 8
//! weight = 256                   # optional, default 256
//! repeat = true                  # optional, default false
//! slice_ms = 1.0                 # optional (EEVDF per-thread slice)
//! fast_priority = true           # optional, default false: aash gives it fast cores first
//! work_cv = 0.2                  # optional, default 0: each program's (or thread's phase)
//!                                # work is drawn lognormal around its mean with this CV,
//!                                # from the run's seed (0: exactly the mean)
//! workload = "parallel"          # phases, phase_ms, spin_us
//! phases = 100
//! phase_ms = 2
//! spin_us = 50
//!
//! [[vms]]
//! name = "ser"
//! vcpus = 2
//! workload = "serial"            # work_ms, mem_intensity (optional, default 0)
//! work_ms = 500
//!
//! [[vms]]
//! name = "iperf"
//! vcpus = 3
//! repeat = true                  # restart cpu_work_ms when done (else the vCPUs only serve packets)
//! workload = "network"           # a flow into the VM (sim::net)
//! protocol = "tcp"               # tcp, udp or icmp (pings only)
//! rate_mbit_s = 200              # udp only: offered rate
//! delay_ms = 30                  # one-way link delay
//! cap_mbit_s = 160               # link bandwidth cap
//! cpu_us_per_packet = 5          # guest CPU work per packet drained
//! cpu_work_ms = 1000             # optional: CPU work per vCPU besides the network
//! ping = true                    # optional, default true: ICMP echo 10/s
//! ping_interval_ms = 100         # optional, default 100: time between pings
//! ping_jitter = 0.5              # optional, 0–1, default 0: gaps uniform in interval × [1 ∓ jitter]
//! ring_slots = 256               # optional, default 256
//! drain_on = "vcpu0"             # optional: "vcpu0" (default) or "any" vCPU drains the rings
//!
//! [diff]                         # optional: spec 002's parameters (`decide::diff::DiffParams`)
//! window_ms = 100                # for diff and diff-eevdf; every key is optional and
//! hold_windows = 10              # defaults to the real host agent's value
//! nnvm_slice_ms = 0              # diff-eevdf: the NNVMs' slice, 0 = their own
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::model::{Core, Host, Vm, Workload};
use super::net::{Network, Protocol};
use super::sched::DiffParams;
use colosched_sys::config::{from_toml, read, ConfigError, ReadError};

#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    pub name: String,
    pub horizon_ms: f64,
    /// The network quantum (`RunConfig::net_quantum`), in ms: 1 unless the file says less.
    pub net_quantum_ms: f64,
    /// `RunConfig::shuffle_start`.
    pub shuffle_start: bool,
    pub host: Host,
    pub vms: Vec<Vm>,
    /// `[diff]`: what the file sets of Diff's parameters (`diff_params` fills in the rest).
    pub diff: DiffKeys,
}

/// Why a scenario file was refused.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error(transparent)]
    Read(#[from] ReadError),
    /// Its text, with the file's path (and the key's line, when a check refused a value).
    #[error("{}{}: {source}", path.display(), source.line_suffix())]
    File { path: PathBuf, source: ConfigError },
}

type Result<T, E = ConfigError> = std::result::Result<T, E>;

/// The file's keys as written (numbers as f64, checked against `RANGES` afterwards).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    name: Option<String>,
    horizon_ms: Option<f64>,
    migration_warmup_ms: Option<f64>,
    net_quantum_ms: Option<f64>,
    #[serde(default)]
    shuffle_start: bool,
    cores: Option<Vec<CoreKeys>>,
    vms: Option<Vec<VmKeys>>,
    #[serde(default)]
    diff: DiffFile,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CoreKeys {
    count: Option<f64>,
    speed: Option<f64>,
    #[serde(default)]
    reserved: bool,
}

/// A VM's keys: the common ones, and those of every workload (`WORKLOAD_KEYS` says which
/// workload takes which).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct VmKeys {
    name: Option<String>,
    vcpus: Option<f64>,
    weight: Option<f64>,
    #[serde(default)]
    repeat: bool,
    slice_ms: Option<f64>,
    #[serde(default)]
    fast_priority: bool,
    work_cv: Option<f64>,
    workload: Option<String>,
    work_ms: Option<f64>,
    mem_intensity: Option<f64>,
    phases: Option<f64>,
    phase_ms: Option<f64>,
    spin_us: Option<f64>,
    protocol: Option<String>,
    rate_mbit_s: Option<f64>,
    delay_ms: Option<f64>,
    cap_mbit_s: Option<f64>,
    cpu_us_per_packet: Option<f64>,
    cpu_work_ms: Option<f64>,
    ping: Option<bool>,
    ring_slots: Option<f64>,
    drain_on: Option<String>,
    ping_interval_ms: Option<f64>,
    ping_jitter: Option<f64>,
}

/// `[diff]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct DiffFile {
    window_ms: Option<f64>,
    hold_windows: Option<f64>,
    hold_max_windows: Option<f64>,
    ql_max: Option<f64>,
    ql_th: Option<f64>,
    overflow_freq: Option<f64>,
    overload_freq: Option<f64>,
    tx_mean_nonzero: Option<f64>,
    tx_stall_freq: Option<f64>,
    nsvm_slice_ms: Option<f64>,
    nnvm_slice_ms: Option<f64>,
    credit_nsvm_slice_ms: Option<f64>,
    credit_nnvm_slice_ms: Option<f64>,
    nonempty_pool_floor: Option<bool>,
}

/// `[diff]`, checked: the parameters of `decide::diff::DiffParams` the file sets; the others
/// keep the decision's default (`DiffParams::default`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DiffKeys {
    pub window_ms: Option<u32>,
    pub hold_windows: Option<u32>,
    pub hold_max_windows: Option<u32>,
    pub ql_max: Option<u32>,
    pub ql_th: Option<u32>,
    pub overflow_freq: Option<f64>,
    pub overload_freq: Option<f64>,
    pub tx_mean_nonzero: Option<f64>,
    pub tx_stall_freq: Option<f64>,
    pub nsvm_slice_ms: Option<f64>,
    pub nnvm_slice_ms: Option<f64>,
    pub credit_nsvm_slice_ms: Option<f64>,
    pub credit_nnvm_slice_ms: Option<f64>,
    pub nonempty_pool_floor: Option<bool>,
}

/// The keys only some workloads take.
const WORKLOAD_KEYS: &[(&str, &[&str])] = &[
    ("serial", &["work_ms", "mem_intensity"]),
    ("parallel", &["phases", "phase_ms", "spin_us"]),
    (
        "network",
        &[
            "protocol",
            "rate_mbit_s",
            "delay_ms",
            "cap_mbit_s",
            "cpu_us_per_packet",
            "cpu_work_ms",
            "ping",
            "ring_slots",
            "drain_on",
            "ping_interval_ms",
            "ping_jitter",
        ],
    ),
];

/// The range (inclusive) of every number key, wherever it appears: what `Scenario::parse`
/// accepts, as docs/host-sim.md lists it. Floors keep every event at least a nanosecond of work
/// apart and ceilings keep event times far from `Nanos::MAX`; `MAX_EVENTS` bounds the whole.
/// `[diff]`'s ranges are the host agent's (host.toml) where it has the key.
pub const RANGES: &[(&str, f64, f64)] = &[
    ("horizon_ms", 0.001, 1e6),
    ("migration_warmup_ms", 0.0, 1000.0),
    ("count", 1.0, 1024.0),
    ("speed", 0.1, 10.0),
    ("vcpus", 1.0, 1024.0),
    ("weight", 1.0, 65535.0),
    ("slice_ms", 0.01, 1000.0),
    ("work_cv", 0.0, 4.0),
    ("work_ms", 0.001, 1e7),
    ("mem_intensity", 0.0, 1.0),
    ("phases", 1.0, 1e6),
    ("phase_ms", 0.001, 1e6),
    ("spin_us", 0.0, 1e6),
    ("rate_mbit_s", 0.001, 1e5),
    ("delay_ms", 0.0, 1000.0),
    ("cap_mbit_s", 0.001, 1e5),
    ("cpu_us_per_packet", 0.01, 1e6),
    ("cpu_work_ms", 0.001, 1e7),
    ("ring_slots", 1.0, 65536.0),
    ("ping_interval_ms", 1.0, 1e6),
    ("ping_jitter", 0.0, 1.0),
    ("window_ms", 10.0, 60_000.0),
    ("hold_windows", 0.0, 10_000.0),
    ("hold_max_windows", 0.0, 100_000.0),
    ("ql_max", 1.0, 65536.0),
    ("ql_th", 1.0, 65536.0),
    ("overflow_freq", 0.0, 1.0),
    ("overload_freq", 0.0, 1.0),
    ("tx_mean_nonzero", 0.0, 65536.0),
    ("tx_stall_freq", 0.0, 1.0),
    ("nsvm_slice_ms", 0.0, 100.0),
    ("nnvm_slice_ms", 0.0, 100.0),
    ("credit_nsvm_slice_ms", 1.0, 1000.0),
    ("credit_nnvm_slice_ms", 1.0, 1000.0),
];

/// Whole-number keys (their ranges are in `RANGES`).
const WHOLE: &[&str] = &[
    "count",
    "vcpus",
    "phases",
    "ring_slots",
    "window_ms",
    "hold_windows",
    "hold_max_windows",
    "ql_max",
    "ql_th",
];

/// At most this many cores in all, vCPUs in all, and VMs.
pub const MAX_CORES: usize = 1024;
pub const MAX_VCPUS: usize = 4096;
pub const MAX_VMS: usize = 1024;

/// The most events a scenario may call for (`Scenario::events_estimate`): about a minute of
/// simulation on one core.
pub const MAX_EVENTS: f64 = 2e8;

/// The simulated host monitor's sample period (`sched::SAMPLE_PERIOD`, T_m) in ms: `[diff]
/// window_ms` is a whole number of them.
const SAMPLE_MS: f64 = 10.0;

/// The key path of the table keys are read from (`vms[2]`, or "" at the top), for errors.
struct At(String);

impl At {
    fn key(&self, k: &str) -> String {
        if self.0.is_empty() {
            k.to_string()
        } else {
            format!("{}.{k}", self.0)
        }
    }

    /// `value` (of key `k`) if it satisfies `ok` (described by `what`); `default` when absent,
    /// or an error naming the key when there is no default.
    fn checked(
        &self,
        k: &str,
        value: Option<f64>,
        what: &str,
        ok: impl Fn(f64) -> bool,
        default: Option<f64>,
    ) -> Result<f64> {
        match (value, default) {
            (Some(x), _) if !x.is_finite() => Err(ConfigError::key(
                self.key(k),
                format!("expected a number, got {x}"),
            )),
            (Some(x), _) if !ok(x) => Err(ConfigError::key(
                self.key(k),
                format!("must be {what}, got {x}"),
            )),
            (Some(x), _) => Ok(x),
            (None, Some(d)) => Ok(d),
            (None, None) => Err(ConfigError::key(self.key(k), "missing")),
        }
    }

    /// A number key within its range in `RANGES` (a whole number for the keys in `WHOLE`).
    fn bounded(&self, k: &str, value: Option<f64>, default: Option<f64>) -> Result<f64> {
        let &(_, lo, hi) = RANGES
            .iter()
            .find(|(name, _, _)| *name == k)
            .expect("every number key has a range");
        if WHOLE.contains(&k) {
            let what = format!("a whole number from {lo} to {hi}");
            let ok = |x: f64| x.fract() == 0.0 && (lo..=hi).contains(&x);
            return self.checked(k, value, &what, ok, default);
        }
        let what = format!("from {lo} to {hi}");
        self.checked(k, value, &what, |x| (lo..=hi).contains(&x), default)
    }

    /// An optional number key within its range.
    fn optional(&self, k: &str, value: Option<f64>) -> Result<Option<f64>> {
        value.map(|x| self.bounded(k, Some(x), None)).transpose()
    }
}

impl Scenario {
    /// Read and check a scenario file; errors start with the file's path.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let text = read(path)?;
        Scenario::parse(&text).map_err(|source| ScenarioError::File {
            path: path.to_path_buf(),
            source: source.at_line_in(&text),
        })
    }

    pub fn parse(text: &str) -> Result<Scenario> {
        let file: File = from_toml(text)?;
        let top = At(String::new());
        let name = file.name.unwrap_or_else(|| "scenario".to_string());
        let horizon_ms = top.bounded("horizon_ms", file.horizon_ms, None)?;
        let migration_warmup_ms =
            top.bounded("migration_warmup_ms", file.migration_warmup_ms, Some(0.0))?;
        // Whole microseconds that divide the monitor's 10 ms period, at most 1 ms.
        let divides = |x: f64| {
            let us = (x * 1e3).round();
            (x * 1e3 - us).abs() < 1e-9 && (1.0..=1000.0).contains(&us) && 10_000 % us as u64 == 0
        };
        let net_quantum_ms = top.checked(
            "net_quantum_ms",
            file.net_quantum_ms,
            "whole microseconds from 0.001 to 1 that divide 10 ms",
            divides,
            Some(1.0),
        )?;
        let mut cores = Vec::new();
        for (i, group) in tables("cores", file.cores)?.iter().enumerate() {
            let at = At(format!("cores[{i}]"));
            let count = at.bounded("count", group.count, None)? as usize;
            let speed = at.bounded("speed", group.speed, Some(1.0))?;
            if cores.len() + count > MAX_CORES {
                return Err(ConfigError::key(
                    "cores",
                    format!("more than {MAX_CORES} cores in all"),
                ));
            }
            let core = Core {
                speed,
                reserved: group.reserved,
            };
            cores.extend(std::iter::repeat_n(core, count));
        }
        if cores.iter().all(|c| c.reserved) {
            return Err(ConfigError::key(
                "cores",
                "every core is reserved; guests need at least one",
            ));
        }
        let mut vms = Vec::new();
        let mut vcpus = 0;
        for (i, keys) in tables("vms", file.vms)?.into_iter().enumerate() {
            if i == MAX_VMS {
                return Err(ConfigError::key("vms", format!("more than {MAX_VMS} VMs")));
            }
            let vm = parse_vm(keys, i)?;
            vcpus += vm.vcpus;
            if vcpus > MAX_VCPUS {
                return Err(ConfigError::key(
                    "vms",
                    format!("more than {MAX_VCPUS} vCPUs in all"),
                ));
            }
            vms.push(vm);
        }
        let s = Scenario {
            name,
            horizon_ms,
            net_quantum_ms,
            shuffle_start: file.shuffle_start,
            host: Host {
                cores,
                migration_warmup_ms,
            },
            vms,
            diff: parse_diff(&file.diff)?,
        };
        let events = s.events_estimate();
        if events > MAX_EVENTS {
            return Err(ConfigError::key(
                "horizon_ms",
                format!(
                    "{horizon_ms} ms of this scenario calls for about {events:.1e} events, more \
                     than {MAX_EVENTS:.0e} (shorten the horizon, or use a coarser \
                     net_quantum_ms, longer work units or fewer vCPUs)"
                ),
            ));
        }
        Ok(s)
    }

    /// About how many events a run of this scenario can take, at most: per simulated ms, a
    /// scheduler timer every 0.1 ms on every usable core (EEVDF's shortest slice), the end of
    /// every vCPU's program unit on the fastest core (twice per phase for a parallel one: its
    /// arrival at the barrier and the end of its spin), and every network quantum's pass over
    /// every VM.
    pub fn events_estimate(&self) -> f64 {
        let usable = self.host.cores.iter().filter(|c| !c.reserved).count() as f64;
        let fastest = (self.host.cores.iter()).fold(0.0, |m: f64, c| m.max(c.speed));
        let units: f64 = (self.vms.iter())
            .map(|vm| {
                let per_unit = match &vm.workload {
                    Workload::Serial { work_ms, .. } => 1.0 / work_ms,
                    Workload::Parallel { phase_ms, .. } => 2.0 / phase_ms,
                    Workload::Network(n) => n.cpu_work_ms.map_or(0.0, |w| 1.0 / w),
                };
                vm.vcpus as f64 * per_unit * fastest
            })
            .sum();
        let net = (self.vms.len() + 1) as f64 / self.net_quantum_ms;
        self.horizon_ms * (usable * 10.0 + units + net)
    }

    /// Refuse what `scheduler` cannot run: `ia` needs one usable core per vCPU of a VM.
    pub fn check_for(&self, scheduler: &str) -> Result<()> {
        let usable = self.host.cores.iter().filter(|c| !c.reserved).count();
        if scheduler == "ia" {
            for (i, vm) in self.vms.iter().enumerate() {
                if vm.vcpus > usable {
                    return Err(ConfigError::key(
                        format!("vms[{i}].vcpus"),
                        format!(
                            "{} vCPUs but {usable} usable cores; the ia scheduler puts each \
                             vCPU of a VM on its own core",
                            vm.vcpus
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Diff's parameters: the decision's defaults (`DiffParams::default`, the real agent's too)
    /// with what `[diff]` sets.
    pub fn diff_params(&self) -> DiffParams {
        let (d, k) = (DiffParams::default(), &self.diff);
        let hold_windows = k.hold_windows.unwrap_or(d.hold_windows);
        let t = d.thresholds;
        let mut p = DiffParams {
            window_ms: k.window_ms.unwrap_or(d.window_ms),
            hold_windows,
            // As host.toml: the most defaults to at least the first hold.
            hold_max_windows: (k.hold_max_windows).unwrap_or(d.hold_max_windows.max(hold_windows)),
            nsvm_slice_ms: k.nsvm_slice_ms.unwrap_or(d.nsvm_slice_ms),
            nnvm_slice_ms: k.nnvm_slice_ms.unwrap_or(d.nnvm_slice_ms),
            ..d
        };
        p.thresholds.ql_max = k.ql_max.unwrap_or(t.ql_max);
        p.thresholds.ql_th = k.ql_th.unwrap_or(t.ql_th);
        p.thresholds.overflow_freq = k.overflow_freq.unwrap_or(t.overflow_freq);
        p.thresholds.overload_freq = k.overload_freq.unwrap_or(t.overload_freq);
        p.thresholds.tx_mean_nonzero = k.tx_mean_nonzero.unwrap_or(t.tx_mean_nonzero);
        p.thresholds.tx_stall_freq = k.tx_stall_freq.unwrap_or(t.tx_stall_freq);
        p.pools.ns_slice_ms = k.credit_nsvm_slice_ms.unwrap_or(d.pools.ns_slice_ms);
        p.pools.nn_slice_ms = k.credit_nnvm_slice_ms.unwrap_or(d.pools.nn_slice_ms);
        p.pools.nonempty_pool_floor =
            (k.nonempty_pool_floor).unwrap_or(d.pools.nonempty_pool_floor);
        p
    }
}

/// The tables of an array of tables `[[k]]`: at least one.
fn tables<T>(k: &str, items: Option<Vec<T>>) -> Result<Vec<T>> {
    match items {
        None => Err(ConfigError::key(
            k,
            format!("missing (at least one [[{k}]])"),
        )),
        Some(items) if items.is_empty() => Err(ConfigError::key(
            k,
            format!("at least one [[{k}]] is needed"),
        )),
        Some(items) => Ok(items),
    }
}

fn parse_vm(vm: VmKeys, index: usize) -> Result<Vm> {
    let at = At(format!("vms[{index}]"));
    let Some(kind) = vm.workload.as_deref() else {
        return Err(ConfigError::key(
            at.key("workload"),
            "missing (serial, parallel or network)",
        ));
    };
    let Some(&(_, own)) = WORKLOAD_KEYS.iter().find(|(w, _)| *w == kind) else {
        return Err(ConfigError::key(
            at.key("workload"),
            format!("unknown workload {kind:?} (known: serial, parallel, network)"),
        ));
    };
    let given = [
        ("work_ms", vm.work_ms.is_some()),
        ("mem_intensity", vm.mem_intensity.is_some()),
        ("phases", vm.phases.is_some()),
        ("phase_ms", vm.phase_ms.is_some()),
        ("spin_us", vm.spin_us.is_some()),
        ("protocol", vm.protocol.is_some()),
        ("rate_mbit_s", vm.rate_mbit_s.is_some()),
        ("delay_ms", vm.delay_ms.is_some()),
        ("cap_mbit_s", vm.cap_mbit_s.is_some()),
        ("cpu_us_per_packet", vm.cpu_us_per_packet.is_some()),
        ("cpu_work_ms", vm.cpu_work_ms.is_some()),
        ("ping", vm.ping.is_some()),
        ("ring_slots", vm.ring_slots.is_some()),
        ("drain_on", vm.drain_on.is_some()),
        ("ping_interval_ms", vm.ping_interval_ms.is_some()),
        ("ping_jitter", vm.ping_jitter.is_some()),
    ];
    if let Some((k, _)) = given.iter().find(|(k, set)| *set && !own.contains(k)) {
        return Err(ConfigError::key(
            at.key(k),
            format!(
                "not a key of workload {kind:?} (its keys: {})",
                own.join(", ")
            ),
        ));
    }
    let workload = match kind {
        "serial" => Workload::Serial {
            work_ms: at.bounded("work_ms", vm.work_ms, None)?,
            mem_intensity: at.bounded("mem_intensity", vm.mem_intensity, Some(0.0))?,
        },
        "parallel" => Workload::Parallel {
            phases: at.bounded("phases", vm.phases, None)? as u32,
            phase_ms: at.bounded("phase_ms", vm.phase_ms, None)?,
            spin_us: at.bounded("spin_us", vm.spin_us, Some(0.0))?,
        },
        _ => Workload::Network(parse_network(&at, &vm)?),
    };
    Ok(Vm {
        name: vm.name.unwrap_or_else(|| format!("vm{index}")),
        weight: at.bounded("weight", vm.weight, Some(256.0))?,
        vcpus: at.bounded("vcpus", vm.vcpus, None)? as usize,
        workload,
        repeat: vm.repeat,
        slice_ms: at.optional("slice_ms", vm.slice_ms)?,
        fast_priority: vm.fast_priority,
        work_cv: at.bounded("work_cv", vm.work_cv, Some(0.0))?,
    })
}

fn parse_network(at: &At, vm: &VmKeys) -> Result<Network> {
    let protocol = match vm.protocol.as_deref() {
        Some("tcp") => Protocol::Tcp,
        Some("udp") => Protocol::Udp,
        Some("icmp") => Protocol::Icmp,
        Some(other) => {
            return Err(ConfigError::key(
                at.key("protocol"),
                format!("unknown protocol {other:?} (known: tcp, udp, icmp)"),
            ))
        }
        None => {
            return Err(ConfigError::key(
                at.key("protocol"),
                "missing (tcp, udp or icmp)",
            ))
        }
    };
    let rate_mbit_s = match protocol {
        Protocol::Udp => at.bounded("rate_mbit_s", vm.rate_mbit_s, None)?,
        _ if vm.rate_mbit_s.is_some() => {
            return Err(ConfigError::key(
                at.key("rate_mbit_s"),
                "only for protocol = \"udp\" (TCP's rate comes from its window)",
            ))
        }
        _ => 0.0,
    };
    Ok(Network {
        protocol,
        rate_mbit_s,
        delay_ms: at.bounded("delay_ms", vm.delay_ms, None)?,
        cap_mbit_s: at.bounded("cap_mbit_s", vm.cap_mbit_s, None)?,
        cpu_us_per_packet: at.bounded("cpu_us_per_packet", vm.cpu_us_per_packet, None)?,
        cpu_work_ms: at.optional("cpu_work_ms", vm.cpu_work_ms)?,
        ping: vm.ping.unwrap_or(true),
        ring_slots: at.bounded("ring_slots", vm.ring_slots, Some(256.0))? as u64,
        ping_interval_ms: at.bounded("ping_interval_ms", vm.ping_interval_ms, Some(100.0))?,
        ping_jitter: at.bounded("ping_jitter", vm.ping_jitter, Some(0.0))?,
        any_vcpu: match vm.drain_on.as_deref() {
            None | Some("vcpu0") => false,
            Some("any") => true,
            Some(other) => {
                return Err(ConfigError::key(
                    at.key("drain_on"),
                    format!("unknown value {other:?} (known: vcpu0, any)"),
                ))
            }
        },
    })
}

/// `[diff]`, each key within its range (the host agent's where it has the key), and the
/// pairs that must agree.
fn parse_diff(f: &DiffFile) -> Result<DiffKeys> {
    let at = At("diff".to_string());
    let whole = |k: &str, v: Option<f64>| -> Result<Option<u32>> {
        Ok(at.optional(k, v)?.map(|x| x as u32))
    };
    // Linux takes 0.1 to 100 ms (and clamps anything else without a word); 0 = leave theirs.
    let eevdf_slice = |k: &str, v: Option<f64>| {
        let what = "0 or from 0.1 to 100 (ms, the kernel's range)";
        let ok = |x: f64| x == 0.0 || (0.1..=100.0).contains(&x);
        v.map(|x| at.checked(k, Some(x), what, ok, None))
            .transpose()
    };
    let k = DiffKeys {
        window_ms: whole("window_ms", f.window_ms)?,
        hold_windows: whole("hold_windows", f.hold_windows)?,
        hold_max_windows: whole("hold_max_windows", f.hold_max_windows)?,
        ql_max: whole("ql_max", f.ql_max)?,
        ql_th: whole("ql_th", f.ql_th)?,
        overflow_freq: at.optional("overflow_freq", f.overflow_freq)?,
        overload_freq: at.optional("overload_freq", f.overload_freq)?,
        tx_mean_nonzero: at.optional("tx_mean_nonzero", f.tx_mean_nonzero)?,
        tx_stall_freq: at.optional("tx_stall_freq", f.tx_stall_freq)?,
        nsvm_slice_ms: eevdf_slice("nsvm_slice_ms", f.nsvm_slice_ms)?,
        nnvm_slice_ms: eevdf_slice("nnvm_slice_ms", f.nnvm_slice_ms)?,
        credit_nsvm_slice_ms: at.optional("credit_nsvm_slice_ms", f.credit_nsvm_slice_ms)?,
        credit_nnvm_slice_ms: at.optional("credit_nnvm_slice_ms", f.credit_nnvm_slice_ms)?,
        nonempty_pool_floor: f.nonempty_pool_floor,
    };
    if let Some(w) = k.window_ms.filter(|&w| w as f64 % SAMPLE_MS != 0.0) {
        return Err(ConfigError::key(
            "diff.window_ms",
            format!("{w} is not a multiple of the monitor's {SAMPLE_MS} ms samples"),
        ));
    }
    let d = DiffParams::default();
    let hold = k.hold_windows.unwrap_or(d.hold_windows);
    if let Some(most) = k.hold_max_windows.filter(|&m| m < hold) {
        return Err(ConfigError::key(
            "diff.hold_max_windows",
            format!("{most} is less than hold_windows ({hold})"),
        ));
    }
    let (ql_max, ql_th) = (
        k.ql_max.unwrap_or(d.thresholds.ql_max),
        k.ql_th.unwrap_or(d.thresholds.ql_th),
    );
    if ql_th > ql_max {
        return Err(ConfigError::key(
            "diff.ql_th",
            format!("{ql_th} is above diff.ql_max ({ql_max})"),
        ));
    }
    Ok(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
        name = "two-classes"
        horizon_ms = 20000
        migration_warmup_ms = 0.5

        [[cores]]
        count = 2
        speed = 1.8
        [[cores]]
        count = 6
        [[cores]]
        count = 2
        reserved = true

        [[vms]]
        name = "par"
        vcpus = 8
        repeat = true
        workload = "parallel"
        phases = 100
        phase_ms = 2
        spin_us = 50

        [[vms]]
        vcpus = 2
        weight = 512
        slice_ms = 1.5
        workload = "serial"
        work_ms = 500
    "#;

    #[test]
    fn a_good_scenario_gives_the_host_and_vms() {
        let s = Scenario::parse(GOOD).unwrap();
        assert_eq!(s.name, "two-classes");
        assert_eq!(s.horizon_ms, 20000.0);
        assert_eq!(s.host.cores.len(), 10);
        assert_eq!(
            s.host.cores[1],
            Core {
                speed: 1.8,
                reserved: false
            }
        );
        assert_eq!(
            s.host.cores[2],
            Core {
                speed: 1.0,
                reserved: false
            }
        );
        assert!(s.host.cores[9].reserved);
        assert_eq!(s.host.migration_warmup_ms, 0.5);
        assert_eq!(
            s.vms[0].workload,
            Workload::Parallel {
                phases: 100,
                phase_ms: 2.0,
                spin_us: 50.0
            }
        );
        assert!(s.vms[0].repeat);
        assert_eq!(s.vms[0].weight, 256.0);
        assert_eq!(s.vms[1].name, "vm1");
        assert_eq!(s.vms[1].weight, 512.0);
        assert_eq!(s.vms[1].slice_ms, Some(1.5));
        assert_eq!((s.vms[0].fast_priority, s.vms[0].work_cv), (false, 0.0));
        let s = Scenario::parse(&edited(
            "repeat = true",
            "repeat = true\nfast_priority = true\nwork_cv = 0.25",
        ))
        .unwrap();
        assert_eq!((s.vms[0].fast_priority, s.vms[0].work_cv), (true, 0.25));
        assert_eq!(
            s.vms[1].workload,
            Workload::Serial {
                work_ms: 500.0,
                mem_intensity: 0.0
            }
        );
        // 8 vCPUs on 8 usable cores is fine for ia; 9 is not.
        assert!(s.check_for("ia").is_ok());
    }

    fn error(text: &str) -> String {
        Scenario::parse(text).unwrap_err().to_string()
    }

    fn edited(from: &str, to: &str) -> String {
        assert!(GOOD.contains(from), "{from}");
        GOOD.replacen(from, to, 1)
    }

    #[test]
    fn errors_name_the_key() {
        assert_eq!(
            error(&edited("phase_ms = 2", "phase_ms = -1")),
            "vms[0].phase_ms: must be from 0.001 to 1000000, got -1"
        );
        // Unknown keys and values of the wrong type: serde's message, with line and column.
        let e = error(&edited("spin_us = 50", "spin_usec = 50"));
        assert!(
            e.starts_with("TOML parse error at line 22, column 9: unknown field `spin_usec`"),
            "{e}"
        );
        let Err(ConfigError::Toml(t)) = Scenario::parse(&edited("spin_us = 50", "spin_usec = 5"))
        else {
            panic!("not a TOML error")
        };
        assert_eq!((t.line, t.column), (22, 9));
        // A serial VM does not take a parallel key.
        assert_eq!(
            error(&edited("work_ms = 500", "work_ms = 500\nphases = 3")),
            "vms[1].phases: not a key of workload \"serial\" (its keys: work_ms, mem_intensity)"
        );
        assert_eq!(
            error(&edited("count = 6", "count = 2.5")),
            "cores[1].count: must be a whole number from 1 to 1024, got 2.5"
        );
        assert!(error(&edited("speed = 1.8", "speed = \"fast\""))
            .ends_with("invalid type: string \"fast\", expected f64"));
        assert!(error(&edited("horizon_ms = 20000", "horizon = 20000"))
            .contains("unknown field `horizon`, expected one of `name`, `horizon_ms`"));
        assert_eq!(
            error(&edited("workload = \"serial\"", "workload = \"io\"")),
            "vms[1].workload: unknown workload \"io\" (known: serial, parallel, network)"
        );
        assert_eq!(error(&edited("vcpus = 2", "")), "vms[1].vcpus: missing");
        assert!(error(&edited("repeat = true", "repeat = 1"))
            .ends_with("invalid type: integer `1`, expected a boolean"));
        assert_eq!(
            error(&edited("slice_ms = 1.5", "slice_ms = 0")),
            "vms[1].slice_ms: must be from 0.01 to 1000, got 0"
        );
        assert_eq!(
            error(&edited("repeat = true", "work_cv = -0.1")),
            "vms[0].work_cv: must be from 0 to 4, got -0.1"
        );
        assert!(error(&edited("repeat = true", "fast_priority = \"yes\""))
            .ends_with("invalid type: string \"yes\", expected a boolean"));
        assert!(
            error("horizon_ms = 1\n[[vms]]\nvcpus = 1\nworkload = \"serial\"\nwork_ms = 1")
                .starts_with("cores: missing")
        );
        assert!(error("horizon_ms = [").contains("line 1"));
    }

    const NET: &str = r#"
        horizon_ms = 1000
        [[cores]]
        count = 2
        [[vms]]
        name = "iperf"
        vcpus = 2
        repeat = true
        workload = "network"
        protocol = "udp"
        rate_mbit_s = 200
        delay_ms = 30
        cap_mbit_s = 160
        cpu_us_per_packet = 5
        cpu_work_ms = 1000
    "#;

    #[test]
    fn network_vms_and_their_errors() {
        let s = Scenario::parse(NET).unwrap();
        let Workload::Network(n) = &s.vms[0].workload else {
            panic!("{:?}", s.vms[0].workload)
        };
        assert_eq!(
            (n.protocol, n.rate_mbit_s, n.delay_ms, n.cap_mbit_s),
            (Protocol::Udp, 200.0, 30.0, 160.0)
        );
        assert_eq!(
            (n.cpu_us_per_packet, n.cpu_work_ms, n.ping, n.ring_slots),
            (5.0, Some(1000.0), true, 256)
        );
        let net = |from: &str, to: &str| {
            assert!(NET.contains(from), "{from}");
            error(&NET.replacen(from, to, 1))
        };
        assert_eq!(
            net("rate_mbit_s = 200", "rate_mbit_s = -3"),
            "vms[0].rate_mbit_s: must be from 0.001 to 100000, got -3"
        );
        assert_eq!(net("rate_mbit_s = 200", ""), "vms[0].rate_mbit_s: missing");
        assert_eq!(
            net("\"udp\"", "\"tcp\""),
            "vms[0].rate_mbit_s: only for protocol = \"udp\" (TCP's rate comes from its window)"
        );
        assert_eq!(
            net("\"udp\"", "\"sctp\""),
            "vms[0].protocol: unknown protocol \"sctp\" (known: tcp, udp, icmp)"
        );
        assert_eq!(net("cap_mbit_s = 160", ""), "vms[0].cap_mbit_s: missing");
        assert_eq!(
            net("cpu_us_per_packet = 5", "cpu_us_per_packet = 0"),
            "vms[0].cpu_us_per_packet: must be from 0.01 to 1000000, got 0"
        );
        assert_eq!(
            net("delay_ms = 30", "delay_ms = -1"),
            "vms[0].delay_ms: must be from 0 to 1000, got -1"
        );
        assert!(net("delay_ms = 30", "delay_ms = 30\nwork_ms = 5")
            .starts_with("vms[0].work_ms: not a key of workload \"network\" (its keys: protocol,"));
        assert!(net("cpu_work_ms = 1000", "ping = \"yes\"")
            .ends_with("invalid type: string \"yes\", expected a boolean"));
        assert_eq!(
            net("cpu_work_ms = 1000", "ping_interval_ms = 0"),
            "vms[0].ping_interval_ms: must be from 1 to 1000000, got 0"
        );
    }

    #[test]
    fn shuffle_start_is_off_unless_asked_for() {
        assert!(!Scenario::parse(NET).unwrap().shuffle_start);
        let on = NET.replacen(
            "horizon_ms = 1000",
            "horizon_ms = 1000\nshuffle_start = true",
            1,
        );
        assert!(Scenario::parse(&on).unwrap().shuffle_start);
        let bad = NET.replacen(
            "horizon_ms = 1000",
            "horizon_ms = 1000\nshuffle_start = 1",
            1,
        );
        assert!(error(&bad).ends_with("invalid type: integer `1`, expected a boolean"));
    }

    #[test]
    fn the_network_quantum_and_ping_interval() {
        let s = Scenario::parse(NET).unwrap();
        let Workload::Network(n) = &s.vms[0].workload else {
            panic!()
        };
        assert_eq!((s.net_quantum_ms, n.ping_interval_ms), (1.0, 100.0));
        let finer = NET.replacen(
            "horizon_ms = 1000",
            "horizon_ms = 1000\nnet_quantum_ms = 0.01",
            1,
        );
        let finer = finer.replacen("cpu_work_ms = 1000", "ping_interval_ms = 100.04", 1);
        let s = Scenario::parse(&finer).unwrap();
        let Workload::Network(n) = &s.vms[0].workload else {
            panic!()
        };
        assert_eq!((s.net_quantum_ms, n.ping_interval_ms), (0.01, 100.04));
        for bad in ["0.003", "0.0005", "2", "0"] {
            let text = NET.replacen(
                "horizon_ms = 1000",
                &format!("horizon_ms = 1\nnet_quantum_ms = {bad}"),
                1,
            );
            assert_eq!(
                error(&text),
                format!(
                    "net_quantum_ms: must be whole microseconds from 0.001 to 1 that divide \
                     10 ms, got {bad}"
                )
            );
        }
    }

    #[test]
    fn a_host_needs_a_usable_core_and_ia_one_core_per_vcpu() {
        let all_reserved = "horizon_ms = 1\n[[cores]]\ncount = 2\nreserved = true\n\
                            [[vms]]\nvcpus = 1\nworkload = \"serial\"\nwork_ms = 1";
        assert_eq!(
            error(all_reserved),
            "cores: every core is reserved; guests need at least one"
        );
        let wide = Scenario::parse(&edited("vcpus = 8", "vcpus = 9")).unwrap();
        assert!(wide.check_for("credit").is_ok());
        assert_eq!(
            wide.check_for("ia").unwrap_err().to_string(),
            "vms[0].vcpus: 9 vCPUs but 8 usable cores; the ia scheduler puts each vCPU of a VM \
             on its own core"
        );
    }

    #[test]
    fn the_committed_scenarios_load() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        let s = Scenario::load(&dir.join("spec001-sketch.toml")).unwrap();
        let widths: Vec<usize> = s.vms.iter().map(|v| v.vcpus).collect();
        assert_eq!(widths, vec![2, 2, 6, 8]);
        assert_eq!(s.host.cores.iter().filter(|c| c.speed == 1.8).count(), 2);
        assert!(s.check_for("ia").is_ok());
    }

    #[test]
    fn diff_takes_the_decisions_defaults_and_what_the_file_sets() {
        let s = Scenario::parse(NET).unwrap();
        assert_eq!(s.diff_params(), DiffParams::default());
        assert_eq!(s.diff_params().nnvm_slice_ms, 0.0);
        let text = NET.replacen(
            "horizon_ms = 1000",
            "horizon_ms = 1000\n[diff]\nwindow_ms = 200\nhold_windows = 100\nql_th = 100\n\
             tx_stall_freq = 0.4\nnsvm_slice_ms = 0.5\nnnvm_slice_ms = 30\n\
             credit_nsvm_slice_ms = 2\nnonempty_pool_floor = false",
            1,
        );
        let p = Scenario::parse(&text).unwrap().diff_params();
        assert_eq!((p.window_ms, p.hold_windows), (200, 100));
        assert_eq!(
            p.hold_max_windows, 100,
            "the most is at least the first hold"
        );
        assert_eq!((p.thresholds.ql_th, p.thresholds.tx_stall_freq), (100, 0.4));
        assert_eq!(p.thresholds.ql_max, 256);
        assert_eq!((p.nsvm_slice_ms, p.nnvm_slice_ms), (0.5, 30.0));
        assert_eq!((p.pools.ns_slice_ms, p.pools.nn_slice_ms), (2.0, 30.0));
        assert!(!p.pools.nonempty_pool_floor);
        let bad = |keys: &str| {
            error(&NET.replacen(
                "horizon_ms = 1000",
                &format!("horizon_ms = 1000\n[diff]\n{keys}"),
                1,
            ))
        };
        assert_eq!(
            bad("hold_windows = 20\nhold_max_windows = 10"),
            "diff.hold_max_windows: 10 is less than hold_windows (20)"
        );
        assert_eq!(
            bad("window_ms = 105"),
            "diff.window_ms: 105 is not a multiple of the monitor's 10 ms samples"
        );
        assert_eq!(
            bad("ql_max = 100"),
            "diff.ql_th: 150 is above diff.ql_max (100)"
        );
        assert_eq!(
            bad("hold_windows = 2.5"),
            "diff.hold_windows: must be a whole number from 0 to 10000, got 2.5"
        );
        assert!(bad("hold = 2").contains("unknown field `hold`"));
    }

    #[test]
    fn load_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.toml");
        let text = edited("phase_ms = 2", "phase_ms = -1");
        let line = 1 + text[..text.find("phase_ms = -1").unwrap()]
            .matches('\n')
            .count();
        std::fs::write(&path, text).unwrap();
        let e = Scenario::load(&path).unwrap_err();
        assert!(matches!(&e, ScenarioError::File { path: p, .. } if *p == path));
        assert_eq!(
            e.to_string(),
            format!(
                "{}:{line}: vms[0].phase_ms: must be from 0.001 to 1000000, got -1",
                path.display()
            )
        );
        let missing = dir.path().join("missing.toml");
        assert!(Scenario::load(&missing)
            .unwrap_err()
            .to_string()
            .starts_with(&missing.display().to_string()));
    }
}
