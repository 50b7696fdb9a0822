//! Scenario files of the VM-level simulator: hypervisors with an SSD cache in front of shared
//! storage, and applications of VMs with a workload. TOML, every key checked: unknown keys are
//! errors (with the line), and bad values name their key (`apps[1].vms: must be at least 1`).
//!
//! ```toml
//! name = "fio-randread"
//! duration_s = 1800          # default 1800
//! window_s = 60              # the controller's window (the paper's 1 minute)
//! measure_from_s = 600       # results come from the time after this (migrations settled)
//!
//! [[hosts]]                  # a group of identical hypervisors, named h0, h1, … in order
//! count = 4
//! ssd_capacity_mb = 240000   # Intel SSD 535 240 GB (the paper's Table 1)
//! ssd_iops = 20000           # what the SSD sustains under a mixed load
//! ssd_bw_mbps = 400
//! ssd_latency_ms = 0.2       # one cache hit, unloaded
//! link_gbit = 10             # the host's network link (backend traffic and migrations)
//!
//! [backend]                  # shared storage (iSCSI to a distributed store), cluster-wide
//! iops = 60000
//! bw_mbps = 4000
//! latency_ms = 2.0           # one miss, unloaded
//! write_cost = 3             # backend operations per write (replicas)
//!
//! [migration]
//! bw_cap = 0.4               # a migration's share of the link (the paper measured 40 %)
//! cpu_overhead = 0.05        # the moved VM's loss to dirty-page tracking while it moves
//! max_downtime_ms = 300      # pre-copy stops when the rest goes in this long
//!
//! [network]                  # round trips between VMs (ZooKeeper's quorum)
//! rtt_local_ms = 0.1
//! rtt_remote_ms = 0.3
//!
//! [planner]                  # optional: the planner's and detector's parameters
//! per_host = 1
//!
//! [[apps]]
//! id = "fio"
//! vms = 12
//! preference = "none"        # default by kind: zookeeper spread, hadoop locality, else none
//! cache_mb = 256             # each VM's SSD cache slice
//! mem_mb = 6144              # what a live migration copies, with the cache slice
//! dirty_mbps = 40            # memory the VM dirties per second while it moves
//! initial = "random"         # "random" (seeded), "round-robin", or host indices [0, 1, …]
//! workload = { kind = "io_benchmark", rw = "randread", block_kb = 32, file_mb = 1024, iodepth = 8 }
//! # kind = "hadoop":    jobs = ["pi-10", "write", "read", …], data_mb, iodepth, block_kb,
//! #                     overhead_s, pi_map_s, gap_s
//! # kind = "zookeeper": outstanding, cpu_ms, write_share
//! # kind = "other":     iops, read, block_kb, ws_mb, change_every_s, change_cv
//! ```

use colosched_sys::config::{from_toml, ConfigError};
use serde::Deserialize;

use crate::decide::detect::DetectParams;
use crate::decide::model::Preference;
use crate::decide::plan::PlanParams;
use crate::state::MAX;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    #[serde(default = "d1800")]
    pub duration_s: u32,
    #[serde(default = "d60")]
    pub window_s: u32,
    #[serde(default = "d600")]
    pub measure_from_s: u32,
    pub hosts: Vec<HostGroup>,
    pub backend: Backend,
    #[serde(default)]
    pub migration: Migration,
    #[serde(default)]
    pub network: Network,
    #[serde(default)]
    pub planner: PlannerKeys,
    pub apps: Vec<AppSpec>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostGroup {
    #[serde(default = "one")]
    pub count: usize,
    pub ssd_capacity_mb: f64,
    pub ssd_iops: f64,
    pub ssd_bw_mbps: f64,
    #[serde(default = "d02")]
    pub ssd_latency_ms: f64,
    #[serde(default = "d10")]
    pub link_gbit: f64,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Backend {
    pub iops: f64,
    pub bw_mbps: f64,
    #[serde(default = "d2")]
    pub latency_ms: f64,
    #[serde(default = "d3")]
    pub write_cost: f64,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Migration {
    #[serde(default = "bw_cap")]
    pub bw_cap: f64,
    #[serde(default = "d005")]
    pub cpu_overhead: f64,
    #[serde(default = "d300")]
    pub max_downtime_ms: f64,
}

impl Default for Migration {
    fn default() -> Self {
        Migration {
            bw_cap: bw_cap(),
            cpu_overhead: d005(),
            max_downtime_ms: d300(),
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Network {
    #[serde(default = "d01")]
    pub rtt_local_ms: f64,
    #[serde(default = "d03")]
    pub rtt_remote_ms: f64,
}

impl Default for Network {
    fn default() -> Self {
        Network {
            rtt_local_ms: d01(),
            rtt_remote_ms: d03(),
        }
    }
}

/// Overrides of the planner's (`PlanParams`) and the detector's (`DetectParams`) defaults.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlannerKeys {
    pub per_host: Option<usize>,
    pub per_cluster: Option<usize>,
    pub min_gain: Option<f64>,
    pub stickiness: Option<f64>,
    pub hold_s: Option<f64>,
    pub cooldown_s: Option<f64>,
    pub slowdown: Option<f64>,
    pub tau: Option<f64>,
    pub k: Option<u32>,
    pub ssd_limit: Option<f64>,
    pub follow: Option<f64>,
    pub history: Option<usize>,
}

impl Scenario {
    pub fn plan_params(&self) -> PlanParams {
        let (d, p) = (PlanParams::default(), &self.planner);
        PlanParams {
            per_host: p.per_host.unwrap_or(d.per_host),
            per_cluster: p.per_cluster.unwrap_or(d.per_cluster),
            bw_cap: self.migration.bw_cap,
            min_gain: p.min_gain.unwrap_or(d.min_gain),
            stickiness: p.stickiness.unwrap_or(d.stickiness),
            hold_s: p.hold_s.unwrap_or(d.hold_s),
            cooldown_s: p.cooldown_s.unwrap_or(d.cooldown_s),
            slowdown: p.slowdown.unwrap_or(d.slowdown),
        }
    }

    pub fn detect_params(&self) -> DetectParams {
        let (d, p) = (DetectParams::default(), &self.planner);
        DetectParams {
            tau: p.tau.unwrap_or(d.tau),
            k: p.k.unwrap_or(d.k),
            ssd_limit: p.ssd_limit.unwrap_or(d.ssd_limit),
            follow: p.follow.unwrap_or(d.follow),
            history: p.history.unwrap_or(d.history),
        }
    }

    /// Every host, in order (`HostGroup::count` each).
    pub fn host_list(&self) -> Vec<&HostGroup> {
        (self.hosts.iter())
            .flat_map(|g| std::iter::repeat_n(g, g.count))
            .collect()
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppSpec {
    pub id: String,
    pub vms: usize,
    pub preference: Option<Preference>,
    #[serde(default = "d256")]
    pub cache_mb: f64,
    #[serde(default = "d6144")]
    pub mem_mb: f64,
    #[serde(default = "d40")]
    pub dirty_mbps: f64,
    #[serde(default)]
    pub initial: Initial,
    pub workload: Workload,
}

impl AppSpec {
    pub fn preference(&self) -> Preference {
        self.preference.unwrap_or(match self.workload {
            Workload::Zookeeper { .. } => Preference::Spread,
            Workload::Hadoop { .. } => Preference::Locality,
            _ => Preference::None,
        })
    }
}

/// Where an application's VMs start.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum Initial {
    Rule(InitialRule),
    Hosts(Vec<usize>),
}

impl Default for Initial {
    fn default() -> Self {
        Initial::Rule(InitialRule::Random)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InitialRule {
    /// Each VM on a host drawn from the run's seed: a scheduler blind to SSD load.
    Random,
    /// Dealt over the hosts in turn, continuing across applications.
    RoundRobin,
}

#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Rw {
    Randread,
    Randwrite,
}

/// What an application's VMs do.
#[derive(Clone, Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Workload {
    /// fio on every VM at once: random reads or writes of a file, closed loop (`iodepth`).
    IoBenchmark {
        rw: Rw,
        #[serde(default = "d32")]
        block_kb: f64,
        #[serde(default = "d1024")]
        file_mb: f64,
        #[serde(default = "d8")]
        iodepth: f64,
    },
    /// Hadoop jobs one after the other on all the application's VMs (one task per VM): `pi-N`
    /// (N maps of `pi_map_s` CPU seconds), TestDFSIO `write`, `read`, `randr`, `backr` (each VM
    /// moves `data_mb`).
    Hadoop {
        jobs: Vec<String>,
        #[serde(default = "d1024")]
        data_mb: f64,
        #[serde(default = "d8")]
        iodepth: f64,
        #[serde(default = "d64")]
        block_kb: f64,
        #[serde(default = "d20")]
        overhead_s: f64,
        #[serde(default = "d20")]
        pi_map_s: f64,
        #[serde(default = "d10")]
        gap_s: f64,
    },
    /// A ZooKeeper ensemble under zk-smoketest's asynchronous operations against every server;
    /// the first VM leads. Writes need a quorum (a majority) and a log write.
    Zookeeper {
        #[serde(default = "d10")]
        outstanding: f64,
        #[serde(default = "d1")]
        cpu_ms: f64,
        #[serde(default = "d06")]
        write_share: f64,
    },
    /// A steady open-loop I/O load that takes a new level every `change_every_s` (lognormal
    /// around `iops` with `change_cv`, from the run's seed).
    Other {
        iops: f64,
        #[serde(default = "d07")]
        read: f64,
        #[serde(default = "d16")]
        block_kb: f64,
        #[serde(default = "d2048")]
        ws_mb: f64,
        #[serde(default)]
        change_every_s: f64,
        #[serde(default)]
        change_cv: f64,
    },
}

/// Hadoop's jobs: CPU work, or one I/O stream per VM (read share, random).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum JobKind {
    Pi(u32),
    Io { read: bool, random: bool },
}

pub fn job_kind(name: &str) -> Option<JobKind> {
    Some(match name {
        "write" => JobKind::Io {
            read: false,
            random: false,
        },
        "read" | "backr" => JobKind::Io {
            read: true,
            random: false,
        },
        "randr" => JobKind::Io {
            read: true,
            random: true,
        },
        _ => JobKind::Pi(name.strip_prefix("pi-")?.parse().ok().filter(|&n| n > 0)?),
    })
}

/// Bundled scenarios: the paper's three experiments (four with fio's two runs).
pub const PRESETS: &[(&str, &str)] = &[
    (
        "spec003-fio-read",
        include_str!("../../scenarios/spec003-fio-read.toml"),
    ),
    (
        "spec003-fio-write",
        include_str!("../../scenarios/spec003-fio-write.toml"),
    ),
    (
        "spec003-hadoop",
        include_str!("../../scenarios/spec003-hadoop.toml"),
    ),
    (
        "spec003-zookeeper",
        include_str!("../../scenarios/spec003-zookeeper.toml"),
    ),
];

/// Why a scenario was not loaded.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// Neither a preset nor a file that could be read.
    #[error("{what}: {source} (not a file, nor a preset: {})", preset_names().join(", "))]
    NotFound {
        what: String,
        source: std::io::Error,
    },
    /// A preset's (`preset NAME`) or a file's (its path) text was refused (with the key's line,
    /// when a check refused a value).
    #[error("{what}{}: {source}", source.line_suffix())]
    In { what: String, source: ConfigError },
}

fn bad(key: impl Into<String>, problem: impl Into<String>) -> ConfigError {
    ConfigError::key(key, problem)
}

fn preset_names() -> Vec<&'static str> {
    PRESETS.iter().map(|(n, _)| *n).collect()
}

impl Scenario {
    /// A preset's name or a file's path.
    pub fn load(what: &str) -> Result<Scenario, ScenarioError> {
        let (name, text) = match PRESETS.iter().find(|(n, _)| *n == what) {
            Some((_, text)) => (format!("preset {what}"), text.to_string()),
            None => {
                let text =
                    std::fs::read_to_string(what).map_err(|source| ScenarioError::NotFound {
                        what: what.to_string(),
                        source,
                    })?;
                (what.to_string(), text)
            }
        };
        Scenario::parse(&text).map_err(|e| ScenarioError::In {
            what: name,
            source: e.at_line_in(&text),
        })
    }

    /// Parses and checks a scenario; errors name the key (serde's carry the line).
    pub fn parse(text: &str) -> Result<Scenario, ConfigError> {
        let s: Scenario = from_toml(text)?;
        s.check()?;
        Ok(s)
    }

    fn check(&self) -> Result<(), ConfigError> {
        let positive = |k: &str, x: f64| {
            if x > 0.0 && x <= MAX {
                Ok(())
            } else {
                Err(bad(
                    k,
                    format!("must be a positive number up to {MAX:e}, got {x}"),
                ))
            }
        };
        let non_negative = |k: &str, x: f64| {
            if (0.0..=MAX).contains(&x) {
                Ok(())
            } else {
                Err(bad(k, format!("must be from 0 to {MAX:e}, got {x}")))
            }
        };
        let share = |k: &str, x: f64| {
            if (0.0..=1.0).contains(&x) {
                Ok(())
            } else {
                Err(bad(k, format!("must be from 0 to 1, got {x}")))
            }
        };
        if self.window_s == 0 || self.duration_s < self.window_s {
            return Err(bad(
                "window_s",
                format!(
                    "must be from 1 to duration_s ({}), got {}",
                    self.duration_s, self.window_s
                ),
            ));
        }
        if self.measure_from_s >= self.duration_s {
            return Err(bad(
                "measure_from_s",
                format!(
                    "must be below duration_s ({}), got {}",
                    self.duration_s, self.measure_from_s
                ),
            ));
        }
        if self.hosts.is_empty() || self.hosts.iter().any(|g| g.count == 0) {
            return Err(bad("hosts", "at least one group, each with count ≥ 1"));
        }
        for (i, g) in self.hosts.iter().enumerate() {
            positive(&format!("hosts[{i}].ssd_capacity_mb"), g.ssd_capacity_mb)?;
            positive(&format!("hosts[{i}].ssd_iops"), g.ssd_iops)?;
            positive(&format!("hosts[{i}].ssd_bw_mbps"), g.ssd_bw_mbps)?;
            positive(&format!("hosts[{i}].ssd_latency_ms"), g.ssd_latency_ms)?;
            positive(&format!("hosts[{i}].link_gbit"), g.link_gbit)?;
        }
        let b = &self.backend;
        positive("backend.iops", b.iops)?;
        positive("backend.bw_mbps", b.bw_mbps)?;
        positive("backend.latency_ms", b.latency_ms)?;
        positive("backend.write_cost", b.write_cost)?;
        let m = &self.migration;
        if !(m.bw_cap > 0.0 && m.bw_cap <= 1.0) {
            return Err(bad(
                "migration.bw_cap",
                format!("must be above 0 and at most 1, got {}", m.bw_cap),
            ));
        }
        share("migration.cpu_overhead", m.cpu_overhead)?;
        positive("migration.max_downtime_ms", m.max_downtime_ms)?;
        positive("network.rtt_local_ms", self.network.rtt_local_ms)?;
        positive("network.rtt_remote_ms", self.network.rtt_remote_ms)?;
        let p = self.plan_params();
        if p.per_host == 0 || p.per_cluster == 0 {
            return Err(bad(
                "planner.per_host, planner.per_cluster",
                "must be at least 1",
            ));
        }
        non_negative("planner.min_gain", p.min_gain)?;
        non_negative("planner.stickiness", p.stickiness)?;
        non_negative("planner.hold_s", p.hold_s)?;
        non_negative("planner.cooldown_s", p.cooldown_s)?;
        share("planner.slowdown", p.slowdown)?;
        let d = self.detect_params();
        positive("planner.tau", d.tau)?;
        positive("planner.ssd_limit", d.ssd_limit)?;
        share("planner.follow", d.follow)?;
        if d.k == 0 || d.history == 0 {
            return Err(bad("planner.k, planner.history", "must be at least 1"));
        }
        if self.apps.is_empty() {
            return Err(bad("apps", "a scenario needs at least one application"));
        }
        let hosts = self.host_list().len();
        let mut vm_ids = std::collections::HashMap::new();
        for (i, a) in self.apps.iter().enumerate() {
            let k = |key: &str| format!("apps[{i}].{key}");
            if self.apps[..i].iter().any(|b| b.id == a.id) {
                return Err(bad(k("id"), format!("{:?} is listed twice", a.id)));
            }
            if a.vms == 0 {
                return Err(bad(k("vms"), "must be at least 1"));
            }
            positive(&k("cache_mb"), a.cache_mb)?;
            positive(&k("mem_mb"), a.mem_mb)?;
            non_negative(&k("dirty_mbps"), a.dirty_mbps)?;
            // VM ids are the application's id and a number: "zk" with 11 VMs and "zk1" both
            // would make "zk10".
            for n in 0..a.vms {
                if let Some(b) = vm_ids.insert(vm_id(&a.id, n), &a.id) {
                    let id = vm_id(&a.id, n);
                    return Err(bad(
                        k("id"),
                        format!("VM {id:?} would also be one of {b:?}'s"),
                    ));
                }
            }
            if let Initial::Hosts(h) = &a.initial {
                if h.len() != a.vms {
                    return Err(bad(
                        k("initial"),
                        format!("{} hosts for {} VMs", h.len(), a.vms),
                    ));
                }
                if let Some(wrong) = h.iter().find(|&&x| x >= hosts) {
                    return Err(bad(
                        k("initial"),
                        format!("host {wrong} does not exist ({hosts} hosts)"),
                    ));
                }
            }
            match &a.workload {
                Workload::IoBenchmark {
                    block_kb,
                    file_mb,
                    iodepth,
                    ..
                } => {
                    positive(&k("workload.block_kb"), *block_kb)?;
                    positive(&k("workload.file_mb"), *file_mb)?;
                    positive(&k("workload.iodepth"), *iodepth)?;
                }
                Workload::Hadoop {
                    jobs,
                    data_mb,
                    iodepth,
                    block_kb,
                    overhead_s,
                    pi_map_s,
                    gap_s,
                } => {
                    if jobs.is_empty() {
                        return Err(bad(k("workload.jobs"), "at least one job"));
                    }
                    if let Some((j, wrong)) =
                        jobs.iter().enumerate().find(|(_, n)| job_kind(n).is_none())
                    {
                        return Err(bad(
                            k(&format!("workload.jobs[{j}]")),
                            format!("{wrong:?} is not a job (pi-N, write, read, randr, backr)"),
                        ));
                    }
                    positive(&k("workload.data_mb"), *data_mb)?;
                    positive(&k("workload.iodepth"), *iodepth)?;
                    positive(&k("workload.block_kb"), *block_kb)?;
                    positive(&k("workload.pi_map_s"), *pi_map_s)?;
                    non_negative(&k("workload.overhead_s"), *overhead_s)?;
                    non_negative(&k("workload.gap_s"), *gap_s)?;
                }
                Workload::Zookeeper {
                    outstanding,
                    cpu_ms,
                    write_share,
                } => {
                    positive(&k("workload.outstanding"), *outstanding)?;
                    positive(&k("workload.cpu_ms"), *cpu_ms)?;
                    share(&k("workload.write_share"), *write_share)?;
                }
                Workload::Other {
                    iops,
                    read,
                    block_kb,
                    ws_mb,
                    change_every_s,
                    change_cv,
                } => {
                    positive(&k("workload.iops"), *iops)?;
                    share(&k("workload.read"), *read)?;
                    positive(&k("workload.block_kb"), *block_kb)?;
                    positive(&k("workload.ws_mb"), *ws_mb)?;
                    // Levels change on whole seconds (the simulator's steps).
                    non_negative(&k("workload.change_every_s"), *change_every_s)?;
                    if change_every_s.fract() != 0.0 {
                        return Err(bad(
                            k("workload.change_every_s"),
                            format!("must be a whole number of seconds, got {change_every_s}"),
                        ));
                    }
                    if !(0.0..=100.0).contains(change_cv) {
                        return Err(bad(
                            k("workload.change_cv"),
                            format!("must be from 0 to 100, got {change_cv}"),
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

/// The id of an application's VM `i`: "zk" → "zk0", "zk1", …
pub fn vm_id(app: &str, i: usize) -> String {
    format!("{app}{i}")
}

/// serde's defaults are functions: one per value.
macro_rules! defaults {
    ($($name:ident: $t:ty = $v:expr),* $(,)?) => { $(fn $name() -> $t { $v })* };
}

defaults!(
    d1800: u32 = 1800,
    d60: u32 = 60,
    d600: u32 = 600,
    one: usize = 1,
    d01: f64 = 0.1,
    d02: f64 = 0.2,
    d03: f64 = 0.3,
    d005: f64 = 0.05,
    d06: f64 = 0.6,
    d07: f64 = 0.7,
    d1: f64 = 1.0,
    d2: f64 = 2.0,
    d3: f64 = 3.0,
    d8: f64 = 8.0,
    d10: f64 = 10.0,
    d16: f64 = 16.0,
    d20: f64 = 20.0,
    d32: f64 = 32.0,
    d40: f64 = 40.0,
    d64: f64 = 64.0,
    d256: f64 = 256.0,
    d300: f64 = 300.0,
    d1024: f64 = 1024.0,
    d2048: f64 = 2048.0,
    d6144: f64 = 6144.0,
    bw_cap: f64 = PlanParams::default().bw_cap,
);
