//! Scenario files: a host and its VMs in TOML, checked key by key. Every error names the key
//! (`vms[2].phase_ms: must be from 0.001 to 1000000, got -1`); unknown keys are errors, so a typo never passes
//! silently.
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
//! ```

use std::path::Path;

use super::model::{Core, Host, Vm, Workload};
use super::net::{Network, Protocol};

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
}

const TOP_KEYS: &[&str] = &[
    "name",
    "horizon_ms",
    "migration_warmup_ms",
    "net_quantum_ms",
    "shuffle_start",
    "cores",
    "vms",
];
const CORE_KEYS: &[&str] = &["count", "speed", "reserved"];
const VM_KEYS: &[&str] = &[
    "name",
    "vcpus",
    "weight",
    "repeat",
    "slice_ms",
    "fast_priority",
    "work_cv",
    "workload",
];
const SERIAL_KEYS: &[&str] = &["work_ms", "mem_intensity"];
const PARALLEL_KEYS: &[&str] = &["phases", "phase_ms", "spin_us"];
const NETWORK_KEYS: &[&str] = &[
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
];

/// The range (inclusive) of every number key, wherever it appears: what `Scenario::parse`
/// accepts, as docs/host-sim.md lists it. Floors keep every event at least a nanosecond of work
/// apart and ceilings keep event times far from `Nanos::MAX`; `MAX_EVENTS` bounds the whole.
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
];

/// Whole-number keys (their ranges are in `RANGES`).
const WHOLE: &[&str] = &["count", "vcpus", "phases", "ring_slots"];

/// At most this many cores in all, vCPUs in all, and VMs.
pub const MAX_CORES: usize = 1024;
pub const MAX_VCPUS: usize = 4096;
pub const MAX_VMS: usize = 1024;

/// The most events a scenario may call for (`Scenario::events_estimate`): about a minute of
/// simulation on one core.
pub const MAX_EVENTS: f64 = 2e8;

/// A value as it would be written, for error messages (tables and arrays by their type).
fn shown(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => format!("{s:?}"),
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(x) => x.to_string(),
        toml::Value::Boolean(b) => b.to_string(),
        other => format!("a {}", other.type_str()),
    }
}

/// One table and the key path that leads to it, for error messages.
struct At<'a> {
    path: String,
    table: &'a toml::Table,
}

impl At<'_> {
    fn key(&self, k: &str) -> String {
        if self.path.is_empty() {
            k.to_string()
        } else {
            format!("{}.{k}", self.path)
        }
    }

    fn only(&self, known: &[&str]) -> Result<(), String> {
        match self.table.keys().find(|k| !known.contains(&k.as_str())) {
            Some(k) => Err(format!(
                "{}: unknown key (known: {})",
                self.key(k),
                known.join(", ")
            )),
            None => Ok(()),
        }
    }

    fn num(&self, k: &str) -> Result<Option<f64>, String> {
        match self.table.get(k) {
            None => Ok(None),
            Some(toml::Value::Integer(i)) => Ok(Some(*i as f64)),
            Some(toml::Value::Float(x)) if x.is_finite() => Ok(Some(*x)),
            Some(v) => Err(format!(
                "{}: expected a number, got {}",
                self.key(k),
                shown(v)
            )),
        }
    }

    /// A number that must satisfy `ok` (described by `what`); `default` when absent, or an
    /// error naming the key when there is no default.
    fn checked(
        &self,
        k: &str,
        what: &str,
        ok: impl Fn(f64) -> bool,
        default: Option<f64>,
    ) -> Result<f64, String> {
        match (self.num(k)?, default) {
            (Some(x), _) if !ok(x) => Err(format!("{}: must be {what}, got {x}", self.key(k))),
            (Some(x), _) => Ok(x),
            (None, Some(d)) => Ok(d),
            (None, None) => Err(format!("{}: missing", self.key(k))),
        }
    }

    /// A number key within its range in `RANGES` (a whole number for the keys in `WHOLE`).
    fn bounded(&self, k: &str, default: Option<f64>) -> Result<f64, String> {
        let &(_, lo, hi) = RANGES
            .iter()
            .find(|(name, _, _)| *name == k)
            .expect("every number key has a range");
        if WHOLE.contains(&k) {
            let what = format!("a whole number from {lo} to {hi}");
            let ok = |x: f64| x.fract() == 0.0 && (lo..=hi).contains(&x);
            return self.checked(k, &what, ok, default);
        }
        let what = format!("from {lo} to {hi}");
        self.checked(k, &what, |x| (lo..=hi).contains(&x), default)
    }

    fn bool(&self, k: &str) -> Result<bool, String> {
        match self.table.get(k) {
            None => Ok(false),
            Some(toml::Value::Boolean(b)) => Ok(*b),
            Some(v) => Err(format!(
                "{}: expected true or false, got {}",
                self.key(k),
                shown(v)
            )),
        }
    }

    fn str(&self, k: &str) -> Result<Option<&str>, String> {
        match self.table.get(k) {
            None => Ok(None),
            Some(toml::Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(format!(
                "{}: expected a string, got {}",
                self.key(k),
                shown(v)
            )),
        }
    }

    /// The tables of an array of tables `[[k]]`.
    fn tables(&self, k: &str) -> Result<Vec<At<'_>>, String> {
        let Some(value) = self.table.get(k) else {
            return Err(format!("{}: missing (at least one [[{k}]])", self.key(k)));
        };
        let toml::Value::Array(items) = value else {
            return Err(format!("{}: expected [[{k}]] tables", self.key(k)));
        };
        if items.is_empty() {
            return Err(format!("{}: at least one [[{k}]] is needed", self.key(k)));
        }
        items
            .iter()
            .enumerate()
            .map(|(i, item)| match item {
                toml::Value::Table(table) => Ok(At {
                    path: format!("{}[{i}]", self.key(k)),
                    table,
                }),
                v => Err(format!(
                    "{}[{i}]: expected a table, got {}",
                    self.key(k),
                    shown(v)
                )),
            })
            .collect()
    }
}

impl Scenario {
    /// Read and check a scenario file; errors start with the file's path.
    pub fn load(path: &Path) -> Result<Scenario, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Scenario::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn parse(text: &str) -> Result<Scenario, String> {
        let root: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| e.to_string().trim().replace('\n', " "))?;
        let top = At {
            path: String::new(),
            table: &root,
        };
        top.only(TOP_KEYS)?;
        let name = top.str("name")?.unwrap_or("scenario").to_string();
        let horizon_ms = top.bounded("horizon_ms", None)?;
        let migration_warmup_ms = top.bounded("migration_warmup_ms", Some(0.0))?;
        // Whole microseconds that divide the monitor's 10 ms period, at most 1 ms.
        let divides = |x: f64| {
            let us = (x * 1e3).round();
            (x * 1e3 - us).abs() < 1e-9 && (1.0..=1000.0).contains(&us) && 10_000 % us as u64 == 0
        };
        let net_quantum_ms = top.checked(
            "net_quantum_ms",
            "whole microseconds from 0.001 to 1 that divide 10 ms",
            divides,
            Some(1.0),
        )?;
        let shuffle_start = top.bool("shuffle_start")?;
        let mut cores = Vec::new();
        for group in top.tables("cores")? {
            group.only(CORE_KEYS)?;
            let count = group.bounded("count", None)? as usize;
            let speed = group.bounded("speed", Some(1.0))?;
            let reserved = group.bool("reserved")?;
            if cores.len() + count > MAX_CORES {
                return Err(format!("cores: more than {MAX_CORES} cores in all"));
            }
            cores.extend(std::iter::repeat_n(Core { speed, reserved }, count));
        }
        if cores.iter().all(|c| c.reserved) {
            return Err("cores: every core is reserved; guests need at least one".into());
        }
        let mut vms = Vec::new();
        let mut vcpus = 0;
        for vm in top.tables("vms")? {
            if vms.len() == MAX_VMS {
                return Err(format!("vms: more than {MAX_VMS} VMs"));
            }
            let vm = parse_vm(&vm, vms.len())?;
            vcpus += vm.vcpus;
            if vcpus > MAX_VCPUS {
                return Err(format!("vms: more than {MAX_VCPUS} vCPUs in all"));
            }
            vms.push(vm);
        }
        let s = Scenario {
            name,
            horizon_ms,
            net_quantum_ms,
            shuffle_start,
            host: Host {
                cores,
                migration_warmup_ms,
            },
            vms,
        };
        let events = s.events_estimate();
        if events > MAX_EVENTS {
            return Err(format!(
                "horizon_ms: {horizon_ms} ms of this scenario calls for about {events:.1e} \
                 events, more than {MAX_EVENTS:.0e} (shorten the horizon, or use a coarser \
                 net_quantum_ms, longer work units or fewer vCPUs)"
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
    pub fn check_for(&self, scheduler: &str) -> Result<(), String> {
        let usable = self.host.cores.iter().filter(|c| !c.reserved).count();
        if scheduler == "ia" {
            for (i, vm) in self.vms.iter().enumerate() {
                if vm.vcpus > usable {
                    return Err(format!(
                        "vms[{i}].vcpus: {} vCPUs but {usable} usable cores; the ia scheduler \
                         puts each vCPU of a VM on its own core",
                        vm.vcpus
                    ));
                }
            }
        }
        Ok(())
    }
}

fn parse_vm(vm: &At, index: usize) -> Result<Vm, String> {
    let workload_kind = vm.str("workload")?.ok_or_else(|| {
        format!(
            "{}: missing (serial, parallel or network)",
            vm.key("workload")
        )
    })?;
    let (extra, workload) = match workload_kind {
        "serial" => (
            SERIAL_KEYS,
            Workload::Serial {
                work_ms: vm.bounded("work_ms", None)?,
                mem_intensity: vm.bounded("mem_intensity", Some(0.0))?,
            },
        ),
        "parallel" => (
            PARALLEL_KEYS,
            Workload::Parallel {
                phases: vm.bounded("phases", None)? as u32,
                phase_ms: vm.bounded("phase_ms", None)?,
                spin_us: vm.bounded("spin_us", Some(0.0))?,
            },
        ),
        "network" => (NETWORK_KEYS, Workload::Network(parse_network(vm)?)),
        other => {
            return Err(format!(
                "{}: unknown workload {other:?} (known: serial, parallel, network)",
                vm.key("workload")
            ))
        }
    };
    let known: Vec<&str> = VM_KEYS.iter().chain(extra).copied().collect();
    vm.only(&known)?;
    let slice_ms = match vm.num("slice_ms")? {
        None => None,
        Some(_) => Some(vm.bounded("slice_ms", None)?),
    };
    Ok(Vm {
        name: vm
            .str("name")?
            .map(str::to_string)
            .unwrap_or_else(|| format!("vm{index}")),
        weight: vm.bounded("weight", Some(256.0))?,
        vcpus: vm.bounded("vcpus", None)? as usize,
        workload,
        repeat: vm.bool("repeat")?,
        slice_ms,
        fast_priority: vm.bool("fast_priority")?,
        work_cv: vm.bounded("work_cv", Some(0.0))?,
    })
}

fn parse_network(vm: &At) -> Result<Network, String> {
    let protocol = match vm.str("protocol")? {
        Some("tcp") => Protocol::Tcp,
        Some("udp") => Protocol::Udp,
        Some("icmp") => Protocol::Icmp,
        Some(other) => {
            return Err(format!(
                "{}: unknown protocol {other:?} (known: tcp, udp, icmp)",
                vm.key("protocol")
            ))
        }
        None => {
            return Err(format!(
                "{}: missing (tcp, udp or icmp)",
                vm.key("protocol")
            ))
        }
    };
    let rate_mbit_s = match protocol {
        Protocol::Udp => vm.bounded("rate_mbit_s", None)?,
        _ if vm.table.contains_key("rate_mbit_s") => {
            return Err(format!(
                "{}: only for protocol = \"udp\" (TCP's rate comes from its window)",
                vm.key("rate_mbit_s")
            ))
        }
        _ => 0.0,
    };
    let cpu_work_ms = match vm.num("cpu_work_ms")? {
        None => None,
        Some(_) => Some(vm.bounded("cpu_work_ms", None)?),
    };
    let ping = match vm.table.get("ping") {
        None => true,
        Some(_) => vm.bool("ping")?,
    };
    Ok(Network {
        protocol,
        rate_mbit_s,
        delay_ms: vm.bounded("delay_ms", None)?,
        cap_mbit_s: vm.bounded("cap_mbit_s", None)?,
        cpu_us_per_packet: vm.bounded("cpu_us_per_packet", None)?,
        cpu_work_ms,
        ping,
        ring_slots: vm.bounded("ring_slots", Some(256.0))? as u64,
        ping_interval_ms: vm.bounded("ping_interval_ms", Some(100.0))?,
        ping_jitter: vm.bounded("ping_jitter", Some(0.0))?,
        any_vcpu: match vm.str("drain_on")? {
            None | Some("vcpu0") => false,
            Some("any") => true,
            Some(other) => {
                return Err(format!(
                    "{}: unknown value {other:?} (known: vcpu0, any)",
                    vm.key("drain_on")
                ))
            }
        },
    })
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
        Scenario::parse(text).unwrap_err()
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
        assert_eq!(
            error(&edited("spin_us = 50", "spin_usec = 50")),
            "vms[0].spin_usec: unknown key (known: name, vcpus, weight, repeat, slice_ms, \
             fast_priority, work_cv, workload, phases, phase_ms, spin_us)"
        );
        // A serial VM does not take a parallel key.
        assert!(error(&edited("work_ms = 500", "work_ms = 500\nphases = 3"))
            .starts_with("vms[1].phases: unknown key"));
        assert_eq!(
            error(&edited("count = 6", "count = 2.5")),
            "cores[1].count: must be a whole number from 1 to 1024, got 2.5"
        );
        assert_eq!(
            error(&edited("speed = 1.8", "speed = \"fast\"")),
            "cores[0].speed: expected a number, got \"fast\""
        );
        assert_eq!(
            error(&edited("horizon_ms = 20000", "horizon = 20000")),
            "horizon: unknown key (known: name, horizon_ms, migration_warmup_ms, net_quantum_ms, shuffle_start, cores, vms)"
        );
        assert_eq!(
            error(&edited("workload = \"serial\"", "workload = \"io\"")),
            "vms[1].workload: unknown workload \"io\" (known: serial, parallel, network)"
        );
        assert_eq!(error(&edited("vcpus = 2", "")), "vms[1].vcpus: missing");
        assert_eq!(
            error(&edited("repeat = true", "repeat = 1")),
            "vms[0].repeat: expected true or false, got 1"
        );
        assert_eq!(
            error(&edited("slice_ms = 1.5", "slice_ms = 0")),
            "vms[1].slice_ms: must be from 0.01 to 1000, got 0"
        );
        assert_eq!(
            error(&edited("repeat = true", "work_cv = -0.1")),
            "vms[0].work_cv: must be from 0 to 4, got -0.1"
        );
        assert_eq!(
            error(&edited("repeat = true", "fast_priority = \"yes\"")),
            "vms[0].fast_priority: expected true or false, got \"yes\""
        );
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
            .starts_with("vms[0].work_ms: unknown key"));
        assert_eq!(
            net("cpu_work_ms = 1000", "ping = \"yes\""),
            "vms[0].ping: expected true or false, got \"yes\""
        );
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
        assert_eq!(error(&bad), "shuffle_start: expected true or false, got 1");
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
            wide.check_for("ia").unwrap_err(),
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
    fn load_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.toml");
        std::fs::write(&path, edited("phase_ms = 2", "phase_ms = -1")).unwrap();
        let e = Scenario::load(&path).unwrap_err();
        assert_eq!(
            e,
            format!(
                "{}: vms[0].phase_ms: must be from 0.001 to 1000000, got -1",
                path.display()
            )
        );
        let missing = dir.path().join("missing.toml");
        assert!(Scenario::load(&missing)
            .unwrap_err()
            .starts_with(&missing.display().to_string()));
    }
}
