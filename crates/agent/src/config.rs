//! agent.toml: read with serde (`colosched_sys::config::from_toml`), an unknown key refused (a
//! typo must not silently fall back to a default), then every value checked; every error names
//! its key, and its line once the file is named (`Error::in_file`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use colosched_core::{GuardSettings, Order, Policy};

use crate::error::{Error, Result};
use crate::sense::kubernetes::Kubepods;
pub use crate::sense::sensor::SensorKind;
use colosched_sys::cgroupfs::is_cgroup_dir;
use colosched_sys::config::{from_toml, int_in, number, paths, Integer};
use serde::Deserialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActuatorMode {
    Affinity,
    Cpuset,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub interval_s: f64,
    pub policy: Policy,
    pub state_file: PathBuf,
    pub decision_log: Option<PathBuf>,
    pub dry_run: bool,
    pub pseudo_nodes: Option<Vec<String>>,
    pub procfs_root: PathBuf,
    pub sysfs_root: PathBuf,
    /// Where the cgroup hierarchies are mounted (v1 controllers as <root>/<controller>).
    pub cgroup_root: PathBuf,
    pub sensor: SensorKind,
    /// `None` = the sensor's default (steal 50 ticks, busy 0.5, psi 10 %).
    pub threshold: Option<f64>,
    pub hysteresis: u32,
    /// Samples per interval (`None` = the sensor's default: 5, or 2 for BE time from stat files).
    pub samples_per_interval: Option<usize>,
    pub psi_cgroups: Vec<PathBuf>,
    pub be_cgroups: Vec<PathBuf>,
    pub be_comm: Option<String>,
    pub be_pid_files: Vec<PathBuf>,
    /// BE = the processes of the BestEffort Kubernetes pods (and Burstable if `burstable_be`).
    pub be_kubernetes: bool,
    /// The kubelet's pods directory; `None`: found under `cgroup_root`.
    pub kubepods: Option<PathBuf>,
    pub burstable_be: bool,
    pub mode: ActuatorMode,
    pub migrate_memory: bool,
    pub all_os_activities: bool,
    pub max_moves_per_cycle: usize,
    pub cooldown_s: f64,
    pub min_task_age_s: f64,
    pub min_improvement: f64,
    pub warning_threshold: f64,
    pub metrics_listen: Option<SocketAddr>,
    /// The policy's random numbers (fine's random order): the same seed, the same choices.
    pub seed: u64,
}

impl Default for Config {
    fn default() -> Self {
        let guards = GuardSettings::default();
        Config {
            interval_s: 2.0,
            policy: Policy::Coarse,
            state_file: PathBuf::from("/run/colosched-agent/state.json"),
            decision_log: None,
            dry_run: false,
            pseudo_nodes: None,
            procfs_root: PathBuf::from("/proc"),
            sysfs_root: PathBuf::from("/sys"),
            cgroup_root: PathBuf::from("/sys/fs/cgroup"),
            sensor: SensorKind::Auto,
            threshold: None,
            hysteresis: guards.hysteresis,
            samples_per_interval: None,
            psi_cgroups: Vec::new(),
            be_cgroups: Vec::new(),
            be_comm: None,
            be_pid_files: Vec::new(),
            be_kubernetes: false,
            kubepods: None,
            burstable_be: false,
            mode: ActuatorMode::Affinity,
            migrate_memory: false,
            all_os_activities: false,
            max_moves_per_cycle: 256,
            cooldown_s: f64::from(guards.cooldown_s),
            min_task_age_s: 0.0,
            min_improvement: guards.min_improvement,
            warning_threshold: 1.0,
            metrics_listen: None,
            seed: 0x5eed,
        }
    }
}

pub use colosched_sys::metrics::parse_listen;

/// `limits.max_moves_per_cycle` at most: the kernel's PID_MAX_LIMIT, more processes than a
/// machine can have.
pub const MAX_MOVES: i64 = 4_194_304;

/// Processes no BE comm pattern may match: a pattern that does would select the system itself.
const SYSTEM_COMMS: &[&str] = &["systemd", "init", "sshd", "kthreadd", "bash", "containerd"];

/// `be.comm`: a valid regex that matches neither everything (the empty name) nor the system.
fn check_comm(re: &str) -> Result<()> {
    let r = regex_lite::Regex::new(re)
        .map_err(|e| Error::config("be.comm", format!("bad regex: {e}")))?;
    if r.is_match("") {
        return Err(Error::config(
            "be.comm",
            format!(
                "{re:?} matches every process name (it matches the empty one); name the BE \
             programs, e.g. \"^(stress-ng|batch)$\""
            ),
        ));
    }
    if let Some(sys) = SYSTEM_COMMS.iter().find(|c| r.is_match(c)) {
        return Err(Error::config(
            "be.comm",
            format!(
                "{re:?} matches {sys:?}: too broad, it would move the system's own \
             processes; anchor it, e.g. \"^(stress-ng|batch)$\""
            ),
        ));
    }
    Ok(())
}

/// A threshold the sensor `kind` can reach. The busy sensor's LC demand is a fraction of a
/// node's CPUs: it can exceed 1 (LC threads waiting side by side), but a threshold above 1 would
/// leave LC starved on a full node before acting. PSI's `some avg10` is a percentage: above 100
/// it never triggers.
pub fn check_threshold(kind: SensorKind, t: Option<f64>) -> Result<()> {
    let why = match (kind, t) {
        (SensorKind::Busy, Some(t)) if t > 1.0 => {
            "the busy sensor's LC demand is a fraction of a \
             node's CPUs (1 = LC alone wants the whole node); a threshold must be at most 1"
        }
        (SensorKind::Psi, Some(t)) if t > 100.0 => {
            "the psi sensor's some avg10 is a percentage; a threshold must be at most 100"
        }
        _ => return Ok(()),
    };
    Err(Error::config(
        "sensor.threshold",
        format!("{why}, got {}", t.unwrap_or_default()),
    ))
}

/// The agent's policy names: the core's, plus `fine:mem|cpu|mai|none` as the issue spells them.
pub fn parse_policy(name: &str) -> std::result::Result<Policy, String> {
    let alias = match name {
        "fine:mem" => Some(Order::MemUsage),
        "fine:cpu" => Some(Order::CpuUsage),
        "fine:mai" => Some(Order::CacheMisses),
        "fine:none" => Some(Order::Random),
        _ => None,
    };
    let policy = match alias {
        Some(o) => Policy::Fine(o),
        None => Policy::parse(name)?,
    };
    match policy {
        Policy::Coarse | Policy::Fine(_) => Ok(policy),
        _ => Err(format!(
            "policy {name:?}: the agent runs coarse or fine[:mem|cpu|mai|none]"
        )),
    }
}

/// agent.toml as written: every key may be left out, and one the agent does not know is refused
/// (a typo must not fall back to a default silently). `Config::parse` checks the values.
#[derive(Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct File {
    interval_s: Option<f64>,
    policy: Option<String>,
    seed: Option<Integer>,
    state_file: Option<String>,
    decision_log: Option<String>,
    dry_run: bool,
    topology: TopologyKeys,
    sensor: SensorKeys,
    be: BeKeys,
    kubernetes: KubernetesKeys,
    actuator: ActuatorKeys,
    limits: LimitsKeys,
    metrics: MetricsKeys,
}

#[derive(Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct TopologyKeys {
    pseudo_nodes: Option<Vec<String>>,
    procfs_root: Option<PathBuf>,
    sysfs_root: Option<PathBuf>,
    cgroup_root: Option<PathBuf>,
}

#[derive(Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct SensorKeys {
    kind: Option<String>,
    threshold: Option<f64>,
    hysteresis: Option<Integer>,
    samples_per_interval: Option<Integer>,
    psi_cgroups: Vec<String>,
}

#[derive(Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct BeKeys {
    cgroups: Vec<String>,
    comm: Option<String>,
    pid_files: Vec<String>,
    kubernetes: bool,
}

#[derive(Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct KubernetesKeys {
    kubepods: Option<String>,
    burstable: Option<String>,
}

#[derive(Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct ActuatorKeys {
    mode: Option<String>,
    migrate_memory: bool,
    all_os_activities: bool,
}

#[derive(Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct LimitsKeys {
    max_moves_per_cycle: Option<Integer>,
    cooldown_s: Option<f64>,
    min_task_age_s: Option<f64>,
    min_improvement: Option<f64>,
    warning_threshold: Option<f64>,
}

#[derive(Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct MetricsKeys {
    listen: Option<String>,
}

/// A config file read and parsed by `parse`, its errors named with the file (and a key's error
/// with the key's line).
pub(crate) fn load_with<C>(path: &Path, parse: impl Fn(&str) -> Result<C>) -> Result<C> {
    let in_file = |e| Error::in_file(path, e);
    let text = std::fs::read_to_string(path).map_err(|e| in_file(Error::Syntax(e.to_string())))?;
    parse(&text).map_err(in_file)
}

impl Config {
    pub fn load(path: &Path) -> Result<Config> {
        load_with(path, Config::parse)
    }

    pub fn parse(text: &str) -> Result<Config> {
        let f: File = from_toml(text)?;
        let mut c = Config::default();
        if let Some(x) = number("interval_s", f.interval_s, "between 0.05 and 3600", |x| {
            (0.05..=3600.0).contains(&x)
        })? {
            c.interval_s = x;
        }
        if let Some(p) = &f.policy {
            c.policy = parse_policy(p).map_err(|e| Error::config("policy", e))?;
        }
        if let Some(p) = f.state_file {
            if p.trim().is_empty() {
                return Err(Error::config(
                    "state_file",
                    "an empty path (the agent records what it changes there)",
                ));
            }
            c.state_file = PathBuf::from(p);
        }
        if let Some(x) = int_in("seed", f.seed, 0, i64::MAX)? {
            c.seed = x as u64;
        }
        c.decision_log = f.decision_log.filter(|s| !s.is_empty()).map(PathBuf::from);
        c.dry_run = f.dry_run;
        let topo = f.topology;
        c.pseudo_nodes = topo.pseudo_nodes;
        c.procfs_root = topo.procfs_root.unwrap_or(c.procfs_root);
        c.sysfs_root = topo.sysfs_root.unwrap_or(c.sysfs_root);
        c.cgroup_root = topo.cgroup_root.unwrap_or(c.cgroup_root);
        let sensor = f.sensor;
        c.sensor = match sensor.kind.as_deref() {
            None | Some("auto") => SensorKind::Auto,
            Some("steal") => SensorKind::Steal,
            Some("busy") => SensorKind::Busy,
            Some("psi") => SensorKind::Psi,
            Some(k) => {
                return Err(Error::config(
                    "sensor.kind",
                    format!("unknown sensor {k:?} (known: auto, steal, busy, psi)"),
                ))
            }
        };
        c.threshold = number("sensor.threshold", sensor.threshold, "positive", |x| {
            x > 0.0
        })?;
        check_threshold(c.sensor, c.threshold)?;
        if let Some(h) = int_in("sensor.hysteresis", sensor.hysteresis, 1, 100)? {
            c.hysteresis = h as u32;
        }
        c.samples_per_interval = int_in(
            "sensor.samples_per_interval",
            sensor.samples_per_interval,
            1,
            50,
        )?
        .map(|x| x as usize);
        c.psi_cgroups = paths("sensor.psi_cgroups", sensor.psi_cgroups)?;
        let be = f.be;
        c.be_cgroups = paths("be.cgroups", be.cgroups)?;
        if let Some(re) = &be.comm {
            check_comm(re)?;
        }
        c.be_comm = be.comm;
        c.be_pid_files = paths("be.pid_files", be.pid_files)?;
        c.be_kubernetes = be.kubernetes;
        let kube = f.kubernetes;
        c.kubepods = kube.kubepods.filter(|s| !s.is_empty()).map(PathBuf::from);
        c.burstable_be = match kube.burstable.as_deref() {
            None | Some("lc") => false,
            Some("be") => true,
            Some(x) => {
                return Err(Error::config(
                    "kubernetes.burstable",
                    format!("{x:?}: Burstable pods are \"lc\" (default) or \"be\""),
                ))
            }
        };
        let act = f.actuator;
        c.mode = match act.mode.as_deref() {
            None | Some("affinity") => ActuatorMode::Affinity,
            Some("cpuset") => ActuatorMode::Cpuset,
            Some(m) => {
                return Err(Error::config(
                    "actuator.mode",
                    format!("unknown mode {m:?} (known: affinity, cpuset)"),
                ))
            }
        };
        c.migrate_memory = act.migrate_memory;
        c.all_os_activities = act.all_os_activities;
        let lim = f.limits;
        if let Some(m) = int_in(
            "limits.max_moves_per_cycle",
            lim.max_moves_per_cycle,
            1,
            MAX_MOVES,
        )? {
            c.max_moves_per_cycle = m as usize;
        }
        let seconds = |k, x| {
            number(k, x, "between 0 and 604800 (a week)", |x| {
                (0.0..=604_800.0).contains(&x)
            })
        };
        c.cooldown_s = seconds("limits.cooldown_s", lim.cooldown_s)?.unwrap_or(c.cooldown_s);
        c.min_task_age_s =
            seconds("limits.min_task_age_s", lim.min_task_age_s)?.unwrap_or(c.min_task_age_s);
        c.min_improvement = number(
            "limits.min_improvement",
            lim.min_improvement,
            "≥ 0",
            |x| x >= 0.0,
        )?
        .unwrap_or(c.min_improvement);
        c.warning_threshold = number(
            "limits.warning_threshold",
            lim.warning_threshold,
            "positive",
            |x| x > 0.0,
        )?
        .unwrap_or(c.warning_threshold);
        if let Some(addr) = f.metrics.listen.filter(|s| !s.is_empty()) {
            c.metrics_listen =
                Some(parse_listen(&addr).map_err(|e| Error::config("metrics.listen", e))?);
        }
        Ok(c)
    }
    /// Checks that need the whole config (after command-line overrides).
    pub fn validate(&self) -> Result<()> {
        if !self.be_kubernetes && (self.kubepods.is_some() || self.burstable_be) {
            return Err(Error::config(
                "kubernetes",
                "set, but be.kubernetes is off: pods are not selected (set be.kubernetes = true \
                 or --be-from kubernetes)",
            ));
        }
        let has_selector = !self.be_cgroups.is_empty()
            || self.be_comm.is_some()
            || !self.be_pid_files.is_empty()
            || self.be_kubernetes;
        if !has_selector && !self.all_os_activities {
            return Err(Error::config(
                "be",
                "no best-effort selector (set be.cgroups, be.comm, be.pid_files or be.kubernetes, \
                 or --be-cgroup, --be-from kubernetes): the agent refuses to guess which tasks it \
                 may move",
            ));
        }
        if self.all_os_activities && self.policy != Policy::Coarse {
            return Err(Error::config(
                "actuator.all_os_activities",
                "the thesis's all-OS mode is coarse only (policy = \"coarse\")",
            ));
        }
        if self.mode == ActuatorMode::Cpuset && self.be_cgroups.is_empty() {
            return Err(Error::config(
                "actuator.mode",
                "cpuset mode needs be.cgroups (it writes their cpuset.cpus)",
            ));
        }
        if self.sensor == SensorKind::Psi && self.psi_cgroups.is_empty() {
            return Err(Error::config(
                "sensor.psi_cgroups",
                "the psi sensor needs one LC cgroup2 directory per node",
            ));
        }
        if let Some(p) = &self.pseudo_nodes {
            crate::sense::topology::Topology::pseudo(p)
                .map_err(|e| Error::config("topology.pseudo_nodes", e))?;
        }
        Ok(())
    }
}

/// Filesystems of the kernel's own trees, where no regular file can be made (proc, sysfs,
/// cgroup, cgroup2).
const NO_FILES_FS: &[i64] = &[
    colosched_sys::fs::PROC_SUPER_MAGIC,
    colosched_sys::fs::SYSFS_MAGIC,
    colosched_sys::fs::CGROUP_SUPER_MAGIC,
    colosched_sys::fs::CGROUP2_SUPER_MAGIC,
];

/// `state_file` can be written by `run` (which creates its missing directories, as `mkdir -p`):
/// the file, if it exists, is a regular file, and the nearest existing directory above it is
/// a directory this process may create entries in (`access(W_OK|X_OK)`, which also refuses a
/// read-only mount) on a filesystem that holds files. The check creates nothing.
pub fn check_state_file(path: &Path) -> std::result::Result<(), String> {
    let show = path.display();
    if let Ok(m) = std::fs::metadata(path) {
        if !m.is_file() {
            return Err(format!("{show} exists and is not a regular file"));
        }
    }
    let mut dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    // The nearest ancestor that exists (`/` and `.` always do).
    while std::fs::symlink_metadata(dir).is_err() {
        dir = dir
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
    }
    let at = dir.display();
    if !dir.is_dir() {
        return Err(format!("{show} cannot be made: {at} is not a directory"));
    }
    use rustix::fs::{access, Access};
    access(dir, Access::WRITE_OK | Access::EXEC_OK)
        .map_err(|e| format!("{show} cannot be made: {at}: {}", std::io::Error::from(e)))?;
    match colosched_sys::fs::fs_type(dir) {
        Ok(t) if NO_FILES_FS.contains(&t) => Err(format!(
            "{show} cannot be made: {at} is in a kernel filesystem (type {t:#x}) that holds no \
             files of ours"
        )),
        _ => Ok(()),
    }
}

/// `decision_log` can be appended to by `run`, which creates the file but not its directory:
/// an existing one is no directory and is writable, a new one's directory exists (and passes
/// `check_state_file`'s checks). `-` is standard output. The check creates nothing.
pub fn check_log_file(path: &Path) -> std::result::Result<(), String> {
    use rustix::fs::{access, Access};
    let show = path.display();
    if path.as_os_str() == "-" {
        return Ok(());
    }
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => Err(format!("{show} is a directory")),
        Ok(_) => access(path, Access::WRITE_OK)
            .map_err(|e| format!("{show}: {}", std::io::Error::from(e))),
        Err(_) => match path.parent().filter(|d| !d.as_os_str().is_empty()) {
            Some(d) if !d.is_dir() => Err(format!(
                "{show} cannot be made: {} is not a directory (run does not create it)",
                d.display()
            )),
            _ => check_state_file(path),
        },
    }
}

impl Config {
    /// The kubelet's pods directory when pods are selected: `kubernetes.kubepods`, else the one
    /// found under `cgroup_root` (cgroup2 or a v1 hierarchy).
    pub fn kubepods(&self) -> Result<Option<Kubepods>> {
        if !self.be_kubernetes {
            return Ok(None);
        }
        let found = match &self.kubepods {
            Some(dir) => {
                Kubepods::at(dir).ok_or_else(|| format!("{}: no such directory", dir.display()))
            }
            None => crate::sense::kubernetes::find(&self.cgroup_root).ok_or_else(|| {
                format!(
                    "no kubelet pods directory (kubepods.slice or kubepods) under {} in cgroup2 \
                     or a v1 hierarchy: not a Kubernetes node? Give it as kubernetes.kubepods",
                    self.cgroup_root.display()
                )
            }),
        };
        let k = found.map_err(|e| Error::config("kubernetes.kubepods", e))?;
        is_cgroup_dir(&k.dir).map_err(|e| Error::config("kubernetes.kubepods", e))?;
        Ok(Some(k))
    }

    /// Checks against the machine (after `validate`): `run` can write the state file and the
    /// decision log, the /proc
    /// root is one, every BE cgroup is a cgroup directory, every pseudo-node CPU exists. Errors
    /// name the key. `run`, `plan --once` and `check-config` all call it (`cli::agent_for`).
    pub fn check_system(&self) -> Result<()> {
        check_state_file(&self.state_file).map_err(|e| Error::config("state_file", e))?;
        self.kubepods()?;
        if let Some(log) = &self.decision_log {
            check_log_file(log).map_err(|e| Error::config("decision_log", e))?;
        }
        let stat = self.procfs_root.join("stat");
        std::fs::metadata(&stat).map_err(|e| {
            Error::config("topology.procfs_root", format!("{}: {e}", stat.display()))
        })?;
        for cg in &self.be_cgroups {
            is_cgroup_dir(cg).map_err(|e| Error::config("be.cgroups", e))?;
            // The root of a hierarchy holds every process: the system itself is not BE.
            if cg.parent().is_none_or(|p| is_cgroup_dir(p).is_err()) {
                return Err(Error::config(
                    "be.cgroups",
                    format!(
                        "{} is the root of its cgroup hierarchy (it holds every process); \
                     give the BE group below it",
                        cg.display()
                    ),
                ));
            }
        }
        if let Some(lists) = &self.pseudo_nodes {
            let possible =
                crate::sense::topology::cpus(&self.sysfs_root, "possible").map_err(|e| {
                    Error::config(
                        "topology.pseudo_nodes",
                        format!("cannot check the CPUs: {e}"),
                    )
                })?;
            let topo = crate::sense::topology::Topology::pseudo(lists)
                .map_err(|e| Error::config("topology.pseudo_nodes", e))?;
            if let Some(c) = topo.all_cpus.difference(&possible).first() {
                return Err(Error::config(
                    "topology.pseudo_nodes",
                    format!(
                        "CPU {c} does not exist (this machine has CPUs {})",
                        possible
                    ),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The error of a config that must be refused: a usage error, as text.
    fn err(text: &str) -> String {
        let e = Config::parse(text).and_then(|c| c.validate()).unwrap_err();
        assert!(e.is_usage(), "{e:?}");
        e.to_string()
    }

    #[test]
    fn defaults_and_full_example() {
        let c = Config::parse("[be]\ncgroups = [\"/sys/fs/cgroup/cpu/be\"]\n").unwrap();
        c.validate().unwrap();
        assert_eq!(
            (c.interval_s, c.hysteresis, c.policy),
            (2.0, 2, Policy::Coarse)
        );
        let example = include_str!("../../../examples/agent-pseudo-nodes.toml");
        let c = Config::parse(example).unwrap();
        c.validate().unwrap();
        assert_eq!(
            c.pseudo_nodes.as_deref(),
            Some(&["0".to_string(), "1".to_string()][..])
        );
    }

    #[test]
    fn errors_name_the_key() {
        assert!(err("interval_s = 0\n[be]\ncomm = \"x\"").starts_with("interval_s: must be"));
        assert!(err("policy = \"random\"\n[be]\ncomm = \"x\"").starts_with("policy:"));
        assert!(err("[sensor]\nkind = \"heat\"").starts_with("sensor.kind:"));
        assert!(err("[sensor]\nhysteresis = 1.5").starts_with("sensor.hysteresis:"));
        assert!(err("[sensor]\nsamples_per_interval = 0")
            .starts_with("sensor.samples_per_interval: must be an integer"));
        assert!(err("[be]\ncomm = \"(\"").starts_with("be.comm: bad regex"));
        assert!(err("[be]\ncgroups = \"/x\"").starts_with(
            "be.cgroups: TOML parse error at line 2, column 11: invalid type: string \"/x\", \
             expected a sequence"
        ));
        assert!(
            err("[be]\ncomm = \"x\"\n[limits]\ncooldown = 3").starts_with(
                "limits.cooldown: TOML parse error at line 4, column 1: unknown field `cooldown`"
            )
        );
        assert!(err("[be]\ncomm = \"x\"\n[metrics]\nlisten = \"localhost\"")
            .starts_with("metrics.listen:"));
        assert!(
            err("[be]\ncomm = \"x\"\n[topology]\npseudo_nodes = [\"0-1\", \"1\"]")
                .starts_with("topology.pseudo_nodes:")
        );
        assert!(err("interval_s = 2").starts_with("be: no best-effort selector"));
        assert!(
            err("policy = \"fine\"\n[actuator]\nall_os_activities = true")
                .starts_with("actuator.all_os_activities")
        );
        assert!(err("[be]\ncomm = \"x\"\n[actuator]\nmode = \"cpuset\"")
            .starts_with("actuator.mode: cpuset"));
        assert!(err("x = [").contains("line 1"));
        assert!(
            err("[be]\nkubernetes = true\n[kubernetes]\nburstable = \"maybe\"")
                .starts_with("kubernetes.burstable: \"maybe\"")
        );
        assert!(err("[be]\ncomm = \"x\"\n[kubernetes]\nburstable = \"be\"")
            .starts_with("kubernetes: set, but be.kubernetes is off"));
        assert!(err("[be]\nkubernetes = 1").starts_with("be.kubernetes:"));
        assert!(err("[be]\nkubernetes = true\n[kubernetes]\nroot = \"/x\"")
            .starts_with("kubernetes.root: TOML parse error at line 4, column 1: unknown field"));
    }

    #[test]
    fn pods_as_the_only_selector() {
        let c = Config::parse("[be]\nkubernetes = true\n[kubernetes]\nburstable = \"be\"").unwrap();
        c.validate().unwrap();
        assert!(c.be_kubernetes && c.burstable_be && c.kubepods.is_none());
        // No kubelet tree under a root without one: the key to set is named.
        let dir = tempfile::tempdir().unwrap();
        let c = Config {
            cgroup_root: dir.path().into(),
            ..c
        };
        let e = c.kubepods().unwrap_err().to_string();
        assert!(
            e.starts_with("kubernetes.kubepods: no kubelet pods directory"),
            "{e}"
        );
        // One there, but not a cgroup (a test directory): refused as such.
        std::fs::create_dir_all(dir.path().join("cpuacct/kubepods")).unwrap();
        let e = c.kubepods().unwrap_err().to_string();
        assert!(e.contains("kubepods: not a cgroup"), "{e}");
    }

    #[test]
    fn values_that_would_misbehave_are_refused() {
        let sel = "[be]\ncomm = \"^stress$\"\n";
        assert!(err(&format!("{sel}[limits]\ncooldown_s = 1e300"))
            .starts_with("limits.cooldown_s: must be between 0 and 604800"));
        assert!(err(&format!("{sel}[limits]\nmin_task_age_s = -1"))
            .starts_with("limits.min_task_age_s:"));
        assert!(
            err(&format!("{sel}[sensor]\nkind = \"busy\"\nthreshold = 1.5"))
                .starts_with("sensor.threshold: the busy sensor")
        );
        Config::parse(&format!("{sel}[sensor]\nkind = \"steal\"\nthreshold = 80")).unwrap();
        Config::parse(&format!("{sel}[sensor]\nkind = \"psi\"\nthreshold = 100")).unwrap();
        assert!(
            err(&format!("{sel}[sensor]\nkind = \"psi\"\nthreshold = 100.5"))
                .starts_with("sensor.threshold: the psi sensor's some avg10 is a percentage")
        );
        for broad in ["", ".*", "a*", "^", ".", "s", "(?i)SSHD"] {
            let e = err(&format!("[be]\ncomm = {broad:?}"));
            assert!(e.starts_with("be.comm: "), "{broad:?}: {e}");
        }
        assert!(err(&format!("state_file = \"\"\n{sel}")).starts_with("state_file: an empty path"));
        assert!(err("[be]\ncgroups = [\"\"]").starts_with("be.cgroups: an empty path"));
        assert_eq!(
            err(&format!("seed = 1.5\n{sel}")),
            "seed: TOML parse error at line 1, column 8: expected an integer, got the float 1.5"
        );
        assert_eq!(Config::parse(&format!("seed = 7\n{sel}")).unwrap().seed, 7);
    }

    #[test]
    fn integer_keys_refuse_floats_and_values_out_of_range() {
        let sel = "[be]\ncomm = \"^stress$\"\n";
        // (section, key, lowest, highest): every key the agent counts with.
        let keys = [
            ("", "seed", 0i64, i64::MAX),
            ("sensor", "hysteresis", 1, 100),
            ("sensor", "samples_per_interval", 1, 50),
            ("limits", "max_moves_per_cycle", 1, MAX_MOVES),
        ];
        for (section, k, lo, hi) in keys {
            let text = |v: &str| {
                let line = format!("{k} = {v}\n");
                match section {
                    "" => format!("{line}{sel}"),
                    s => format!("{sel}[{s}]\n{line}"),
                }
            };
            let name = if section.is_empty() {
                k.to_string()
            } else {
                format!("{section}.{k}")
            };
            let range = format!("{name}: must be an integer from {lo} to {hi}, got");
            let refused = format!("{name}: TOML parse error at line ");
            for (bad, shown) in [
                ("1e300", "1e300"),
                ("2.0", "2.0"),
                ("-0.0", "-0.0"),
                ("nan", "NaN"),
                ("inf", "inf"),
            ] {
                let e = err(&text(bad));
                assert!(e.starts_with(&refused), "{bad}: {e}");
                assert!(
                    e.ends_with(&format!("expected an integer, got the float {shown}")),
                    "{bad}: {e}"
                );
            }
            for bad in [lo.checked_sub(1), hi.checked_add(1), Some(i64::MIN)] {
                let Some(bad) = bad else { continue };
                let e = err(&text(&bad.to_string()));
                assert_eq!(e, format!("{range} {bad}"));
            }
            let e = err(&text("\"3\""));
            assert!(e.starts_with(&refused), "{e}");
            assert!(
                e.ends_with("invalid type: string \"3\", expected an integer"),
                "{e}"
            );
            for good in [lo, hi] {
                Config::parse(&text(&good.to_string()))
                    .unwrap()
                    .validate()
                    .unwrap();
            }
        }
        let c = Config::parse(&format!("{sel}[limits]\nmax_moves_per_cycle = 3")).unwrap();
        assert_eq!(c.max_moves_per_cycle, 3);
        let c = Config::parse(&format!("seed = {}\n{sel}", i64::MAX)).unwrap();
        assert_eq!(c.seed, i64::MAX as u64);
    }

    #[test]
    fn the_decision_log_must_be_one_run_can_append_to() {
        let dir = tempfile::tempdir().unwrap();
        let ok = |p: &Path| check_log_file(p).unwrap();
        let bad = |p: &Path| check_log_file(p).unwrap_err();
        ok(Path::new("-"));
        ok(&dir.path().join("decisions.jsonl"));
        assert!(
            !dir.path().join("decisions.jsonl").exists(),
            "checked, not made"
        );
        let e = bad(&dir.path().join("a/decisions.jsonl"));
        assert!(
            e.contains("is not a directory (run does not create it)"),
            "{e}"
        );
        assert!(bad(dir.path()).ends_with("is a directory"));
        assert!(bad(Path::new("/proc/decisions.jsonl")).contains("kernel filesystem"));
        std::fs::write(dir.path().join("old.jsonl"), "{}\n").unwrap();
        ok(&dir.path().join("old.jsonl"));
    }

    #[test]
    fn the_state_file_must_be_one_run_can_write() {
        let dir = tempfile::tempdir().unwrap();
        let ok = |p: &Path| check_state_file(p).unwrap();
        let bad = |p: &Path| check_state_file(p).unwrap_err();
        ok(&dir.path().join("state.json"));
        ok(&dir.path().join("a/b/c/state.json")); // run makes the directories
        ok(Path::new("state.json")); // the working directory
        let file = dir.path().join("file");
        std::fs::write(&file, "").unwrap();
        let e = bad(&file.join("state.json"));
        assert!(
            e.ends_with(&format!("{} is not a directory", file.display())),
            "{e}"
        );
        assert!(bad(&file.join("x/y/state.json")).contains("is not a directory"));
        assert!(bad(dir.path()).contains("exists and is not a regular file"));
        // The kernel's trees hold no files of ours.
        for p in [
            "/proc/colosched/state.json",
            "/sys/state.json",
            "/sys/fs/cgroup/unified/s",
        ] {
            let e = bad(Path::new(p));
            assert!(e.contains("kernel filesystem"), "{p}: {e}");
        }
        // A read-only directory, for an unprivileged user (root passes access(2) there): a
        // read-only bind mount refuses root too.
        let ro = dir.path().join("ro");
        std::fs::create_dir(&ro).unwrap();
        let mounted = std::process::Command::new("mount")
            .args(["--bind", "-o", "ro"])
            .args([&ro, &ro])
            .status()
            .is_ok_and(|s| s.success());
        if mounted {
            let e = check_state_file(&ro.join("sub/state.json"));
            let _ = std::process::Command::new("umount").arg(&ro).status();
            let e = e.unwrap_err();
            assert!(e.contains("Read-only file system"), "{e}");
        } else {
            eprintln!("skipped the read-only case: cannot bind-mount (not root?)");
        }
    }

    #[test]
    fn the_machine_is_checked_for_real() {
        let dir = tempfile::tempdir().unwrap();
        let with = |f: &dyn Fn(&mut Config)| {
            let mut c = Config {
                be_comm: Some("^stress$".into()),
                ..Config::default()
            };
            f(&mut c);
            c.check_system()
        };
        with(&|_| {}).unwrap();
        let e = with(&|c| c.state_file = "/proc/colosched/state.json".into())
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("state_file: /proc/colosched/state.json cannot be made"),
            "{e}"
        );
        let e = with(&|c| c.procfs_root = dir.path().join("nope"))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("topology.procfs_root: ") && e.contains("nope/stat"),
            "{e}"
        );
        // A directory of regular files is not a cgroup, however its files are named.
        let fake = dir.path().join("cg");
        std::fs::create_dir_all(&fake).unwrap();
        std::fs::write(fake.join("cgroup.procs"), "").unwrap();
        let e = with(&|c| c.be_cgroups = vec![fake.clone()])
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("be.cgroups: ") && e.contains("not a cgroup"),
            "{e}"
        );
        let e = with(&|c| c.be_cgroups = vec![dir.path().join("missing")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing: No such file"), "{e}");
        // cgroup2 is mounted there on these machines (DESIGN.md): its root holds every process.
        let root = Path::new("/sys/fs/cgroup/unified");
        let e = with(&|c| c.be_cgroups = vec![root.to_path_buf()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("is the root of its cgroup hierarchy"), "{e}");
        let be = root.join(format!("colosched-test-config-{}", std::process::id()));
        std::fs::create_dir(&be).unwrap();
        let ok = with(&|c| c.be_cgroups = vec![be.clone()]);
        std::fs::remove_dir(&be).unwrap();
        ok.expect("a cgroup2 group below the root");
        let e = with(&|c| c.pseudo_nodes = Some(vec!["0".into(), "4000".into()]))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("topology.pseudo_nodes: CPU 4000 does not exist"),
            "{e}"
        );
        with(&|c| c.pseudo_nodes = Some(vec!["0".into(), "1".into()])).unwrap();
    }

    #[test]
    fn an_unknown_key_in_any_section_is_refused_with_its_line_and_column() {
        let sections = [
            "",
            "topology",
            "sensor",
            "be",
            "kubernetes",
            "actuator",
            "limits",
            "metrics",
        ];
        for section in sections {
            let sel = "[be]\ncomm = \"x\"\n";
            let (text, key, line) = match section {
                "" => (format!("typo = 1\n{sel}"), "typo".to_string(), 1),
                "be" => (format!("{sel}typo = 1\n"), "be.typo".to_string(), 3),
                s => (format!("{sel}[{s}]\ntypo = 1\n"), format!("{s}.typo"), 4),
            };
            let e = err(&text);
            let want = format!(
                "{key}: TOML parse error at line {line}, column 1: unknown field `typo`, expected"
            );
            assert!(e.starts_with(&want), "{section:?}: {e}");
        }
    }

    #[test]
    fn a_value_of_the_wrong_type_is_refused_with_its_line_and_column() {
        assert_eq!(
            err("[be]\ncomm = \"x\"\nkubernetes = \"yes\"\n"),
            "be.kubernetes: TOML parse error at line 3, column 14: invalid type: string \"yes\", \
             expected a boolean"
        );
        let e = err("[be]\ncomm = \"x\"\n[limits]\ncooldown_s = \"1h\"\n");
        assert!(
            e.starts_with("limits.cooldown_s: TOML parse error at line 4, column 14: invalid type"),
            "{e}"
        );
        assert!(err("sensor = 3\n[be]\ncomm = \"x\"\n").starts_with(
            "sensor: TOML parse error at line 1, column 10: invalid type: integer `3`"
        ));
    }

    #[test]
    fn a_refused_value_names_the_file_and_the_line_of_its_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.toml");
        let file = path.display();
        let load = |text: &str| {
            std::fs::write(&path, text).unwrap();
            let e = Config::load(&path).unwrap_err();
            assert!(e.is_usage(), "{e:?}");
            e.to_string()
        };
        assert_eq!(
            load("[be]\ncomm = \"x\"\n\n[limits]\ncooldown_s = 1e6\n"),
            format!(
                "{file}:5: limits.cooldown_s: must be between 0 and 604800 (a week), got 1000000"
            )
        );
        assert_eq!(
            load("[be]\ncgroups = [\n  \"/a\",\n  \"\",\n]\n"),
            format!("{file}:2: be.cgroups: an empty path")
        );
        // toml's own refusal has its line and column already.
        assert!(load("[sensor]\nhysteresis = 2.0\n").starts_with(&format!(
            "{file}: sensor.hysteresis: TOML parse error at line 2, column 14: expected an integer"
        )));
        // A check after the file is read (`validate`, `check_system`) finds the key's line too;
        // a key the file does not write has none.
        std::fs::write(
            &path,
            "state_file = \"/proc/x/state.json\"\n[be]\ncomm = \"x\"\n",
        )
        .unwrap();
        let c = Config::load(&path).unwrap();
        let e = Error::in_file(&path, c.check_system().unwrap_err()).to_string();
        assert!(
            e.starts_with(&format!(
                "{file}:1: state_file: /proc/x/state.json cannot be made"
            )),
            "{e}"
        );
        let e = Error::in_file(&path, Error::config("--policy", "no")).to_string();
        assert_eq!(e, format!("{file}: --policy: no"));
    }

    #[test]
    fn policy_aliases() {
        assert_eq!(
            parse_policy("fine:mem").unwrap(),
            Policy::Fine(Order::MemUsage)
        );
        assert_eq!(
            parse_policy("fine:mai").unwrap(),
            Policy::Fine(Order::CacheMisses)
        );
        assert_eq!(
            parse_policy("fine:mem_usage").unwrap(),
            Policy::Fine(Order::MemUsage)
        );
        assert!(parse_policy("no_migration").is_err());
    }
}
