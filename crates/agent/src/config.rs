//! agent.toml: parsed by hand from a TOML table so every error names its key, and unknown keys
//! are refused (a typo must not silently fall back to a default).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use colosched_core::{Order, Policy};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SensorKind {
    Auto,
    Steal,
    Busy,
    Psi,
}

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
    pub mode: ActuatorMode,
    pub migrate_memory: bool,
    pub all_os_activities: bool,
    pub max_moves_per_cycle: usize,
    pub cooldown_s: f64,
    pub min_task_age_s: f64,
    pub min_improvement: f64,
    pub warning_threshold: f64,
    pub metrics_listen: Option<SocketAddr>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            interval_s: 2.0,
            policy: Policy::Coarse,
            state_file: PathBuf::from("/run/colosched-agent/state.json"),
            decision_log: None,
            dry_run: false,
            pseudo_nodes: None,
            procfs_root: PathBuf::from("/proc"),
            sysfs_root: PathBuf::from("/sys"),
            sensor: SensorKind::Auto,
            threshold: None,
            hysteresis: 2,
            samples_per_interval: None,
            psi_cgroups: Vec::new(),
            be_cgroups: Vec::new(),
            be_comm: None,
            be_pid_files: Vec::new(),
            mode: ActuatorMode::Affinity,
            migrate_memory: false,
            all_os_activities: false,
            max_moves_per_cycle: 256,
            cooldown_s: 10.0,
            min_task_age_s: 0.0,
            min_improvement: 0.1,
            warning_threshold: 1.0,
            metrics_listen: None,
        }
    }
}

/// The metrics address: `HOST:PORT`, or a bare `PORT` / `:PORT`, which binds 127.0.0.1 (the
/// endpoint is local unless the operator names another address).
pub fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    let port = text.strip_prefix(':').unwrap_or(text);
    if let Ok(p) = port.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], p)));
    }
    text.parse()
        .map_err(|_| format!("{text:?} is not an address like 127.0.0.1:9464 or a port"))
}

/// The agent's policy names: the core's, plus `fine:mem|cpu|mai|none` as the issue spells them.
pub fn parse_policy(name: &str) -> Result<Policy, String> {
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

const KNOWN: &[(&str, &[&str])] = &[
    (
        "",
        &[
            "interval_s",
            "policy",
            "state_file",
            "decision_log",
            "dry_run",
            "topology",
            "sensor",
            "be",
            "actuator",
            "limits",
            "metrics",
        ],
    ),
    ("topology", &["pseudo_nodes", "procfs_root", "sysfs_root"]),
    (
        "sensor",
        &[
            "kind",
            "threshold",
            "hysteresis",
            "samples_per_interval",
            "psi_cgroups",
        ],
    ),
    ("be", &["cgroups", "comm", "pid_files"]),
    ("actuator", &["mode", "migrate_memory", "all_os_activities"]),
    (
        "limits",
        &[
            "max_moves_per_cycle",
            "cooldown_s",
            "min_task_age_s",
            "min_improvement",
            "warning_threshold",
        ],
    ),
    ("metrics", &["listen"]),
];

/// A typed view of one TOML table that names `section.key` in every error.
struct Section<'a> {
    name: &'static str,
    table: Option<&'a toml::Table>,
}

impl<'a> Section<'a> {
    fn key(&self, k: &str) -> String {
        if self.name.is_empty() {
            k.to_string()
        } else {
            format!("{}.{k}", self.name)
        }
    }
    fn get(&self, k: &str) -> Option<&'a toml::Value> {
        self.table?.get(k)
    }
    fn num(&self, k: &str) -> Result<Option<f64>, String> {
        match self.get(k) {
            None => Ok(None),
            Some(toml::Value::Float(f)) => Ok(Some(*f)),
            Some(toml::Value::Integer(i)) => Ok(Some(*i as f64)),
            Some(v) => Err(format!(
                "{}: expected a number, got {}",
                self.key(k),
                v.type_str()
            )),
        }
    }
    fn str(&self, k: &str) -> Result<Option<&'a str>, String> {
        match self.get(k) {
            None => Ok(None),
            Some(toml::Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(format!(
                "{}: expected a string, got {}",
                self.key(k),
                v.type_str()
            )),
        }
    }
    fn bool(&self, k: &str) -> Result<Option<bool>, String> {
        match self.get(k) {
            None => Ok(None),
            Some(toml::Value::Boolean(b)) => Ok(Some(*b)),
            Some(v) => Err(format!(
                "{}: expected true or false, got {}",
                self.key(k),
                v.type_str()
            )),
        }
    }
    fn strings(&self, k: &str) -> Result<Option<Vec<String>>, String> {
        let Some(v) = self.get(k) else {
            return Ok(None);
        };
        let bad = || format!("{}: expected a list of strings", self.key(k));
        let arr = v.as_array().ok_or_else(bad)?;
        arr.iter()
            .map(|x| x.as_str().map(str::to_string).ok_or_else(bad))
            .collect::<Result<_, _>>()
            .map(Some)
    }
    fn paths(&self, k: &str) -> Result<Vec<PathBuf>, String> {
        Ok(self
            .strings(k)?
            .unwrap_or_default()
            .into_iter()
            .map(PathBuf::from)
            .collect())
    }
    /// A number that must satisfy `ok`, described by `what` in the error.
    fn checked(
        &self,
        k: &str,
        what: &str,
        ok: impl Fn(f64) -> bool,
    ) -> Result<Option<f64>, String> {
        match self.num(k)? {
            Some(x) if !(x.is_finite() && ok(x)) => {
                Err(format!("{}: must be {what}, got {x}", self.key(k)))
            }
            x => Ok(x),
        }
    }
}

impl Config {
    pub fn load(path: &Path) -> Result<Config, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Config::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn parse(text: &str) -> Result<Config, String> {
        let root: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| e.to_string().trim().replace('\n', " "))?;
        for (section, keys) in KNOWN {
            let table = if section.is_empty() {
                Some(&root)
            } else {
                match root.get(*section) {
                    None => None,
                    Some(toml::Value::Table(t)) => Some(t),
                    Some(_) => return Err(format!("{section}: expected a table [{section}]")),
                }
            };
            for k in table.into_iter().flat_map(|t| t.keys()) {
                if !keys.contains(&k.as_str()) {
                    let name = if section.is_empty() {
                        k.clone()
                    } else {
                        format!("{section}.{k}")
                    };
                    return Err(format!("{name}: unknown key (known: {})", keys.join(", ")));
                }
            }
        }
        let sec = |name: &'static str| Section {
            name,
            table: if name.is_empty() {
                Some(&root)
            } else {
                root.get(name).and_then(|v| v.as_table())
            },
        };
        let (top, topo, sensor, be, act, lim, met) = (
            sec(""),
            sec("topology"),
            sec("sensor"),
            sec("be"),
            sec("actuator"),
            sec("limits"),
            sec("metrics"),
        );
        let mut c = Config::default();
        if let Some(x) = top.checked("interval_s", "between 0.05 and 3600", |x| {
            (0.05..=3600.0).contains(&x)
        })? {
            c.interval_s = x;
        }
        if let Some(p) = top.str("policy")? {
            c.policy = parse_policy(p).map_err(|e| format!("policy: {e}"))?;
        }
        if let Some(p) = top.str("state_file")? {
            c.state_file = PathBuf::from(p);
        }
        c.decision_log = top
            .str("decision_log")?
            .filter(|s| !s.is_empty())
            .map(PathBuf::from);
        c.dry_run = top.bool("dry_run")?.unwrap_or(false);
        c.pseudo_nodes = topo.strings("pseudo_nodes")?;
        if let Some(r) = topo.str("procfs_root")? {
            c.procfs_root = PathBuf::from(r);
        }
        if let Some(r) = topo.str("sysfs_root")? {
            c.sysfs_root = PathBuf::from(r);
        }
        c.sensor = match sensor.str("kind")? {
            None | Some("auto") => SensorKind::Auto,
            Some("steal") => SensorKind::Steal,
            Some("busy") => SensorKind::Busy,
            Some("psi") => SensorKind::Psi,
            Some(k) => {
                return Err(format!(
                    "sensor.kind: unknown sensor {k:?} (known: auto, steal, busy, psi)"
                ))
            }
        };
        c.threshold = sensor.checked("threshold", "positive", |x| x > 0.0)?;
        if let Some(h) = sensor.checked("hysteresis", "an integer from 1 to 100", |x| {
            x.fract() == 0.0 && (1.0..=100.0).contains(&x)
        })? {
            c.hysteresis = h as u32;
        }
        c.samples_per_interval = sensor
            .checked("samples_per_interval", "an integer from 1 to 50", |x| {
                x.fract() == 0.0 && (1.0..=50.0).contains(&x)
            })?
            .map(|x| x as usize);
        c.psi_cgroups = sensor.paths("psi_cgroups")?;
        c.be_cgroups = be.paths("cgroups")?;
        c.be_comm = be.str("comm")?.map(str::to_string);
        if let Some(re) = &c.be_comm {
            regex_lite::Regex::new(re).map_err(|e| format!("be.comm: bad regex: {e}"))?;
        }
        c.be_pid_files = be.paths("pid_files")?;
        c.mode = match act.str("mode")? {
            None | Some("affinity") => ActuatorMode::Affinity,
            Some("cpuset") => ActuatorMode::Cpuset,
            Some(m) => {
                return Err(format!(
                    "actuator.mode: unknown mode {m:?} (known: affinity, cpuset)"
                ))
            }
        };
        c.migrate_memory = act.bool("migrate_memory")?.unwrap_or(false);
        c.all_os_activities = act.bool("all_os_activities")?.unwrap_or(false);
        if let Some(m) = lim.checked("max_moves_per_cycle", "a positive integer", |x| {
            x.fract() == 0.0 && x >= 1.0
        })? {
            c.max_moves_per_cycle = m as usize;
        }
        let nonneg = |k| lim.checked(k, "≥ 0", |x| x >= 0.0);
        c.cooldown_s = nonneg("cooldown_s")?.unwrap_or(c.cooldown_s);
        c.min_task_age_s = nonneg("min_task_age_s")?.unwrap_or(c.min_task_age_s);
        c.min_improvement = nonneg("min_improvement")?.unwrap_or(c.min_improvement);
        c.warning_threshold = lim
            .checked("warning_threshold", "positive", |x| x > 0.0)?
            .unwrap_or(c.warning_threshold);
        if let Some(addr) = met.str("listen")?.filter(|s| !s.is_empty()) {
            c.metrics_listen =
                Some(parse_listen(addr).map_err(|e| format!("metrics.listen: {e}"))?);
        }
        Ok(c)
    }

    /// Checks that need the whole config (after command-line overrides).
    pub fn validate(&self) -> Result<(), String> {
        let has_selector =
            !self.be_cgroups.is_empty() || self.be_comm.is_some() || !self.be_pid_files.is_empty();
        if !has_selector && !self.all_os_activities {
            return Err("be: no best-effort selector (set be.cgroups, be.comm or be.pid_files, or --be-cgroup): \
                        the agent refuses to guess which tasks it may move"
                .into());
        }
        if self.all_os_activities && self.policy != Policy::Coarse {
            return Err("actuator.all_os_activities: the thesis's all-OS mode is coarse only (policy = \"coarse\")".into());
        }
        if self.mode == ActuatorMode::Cpuset && self.be_cgroups.is_empty() {
            return Err(
                "actuator.mode: cpuset mode needs be.cgroups (it writes their cpuset.cpus)".into(),
            );
        }
        if self.sensor == SensorKind::Psi && self.psi_cgroups.is_empty() {
            return Err(
                "sensor.psi_cgroups: the psi sensor needs one LC cgroup2 directory per node".into(),
            );
        }
        if let Some(p) = &self.pseudo_nodes {
            crate::topology::Topology::pseudo(p)
                .map_err(|e| format!("topology.pseudo_nodes: {e}"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        Config::parse(text).and_then(|c| c.validate()).unwrap_err()
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
        assert!(err("[be]\ncgroups = \"/x\"").starts_with("be.cgroups: expected a list"));
        assert!(err("[be]\ncomm = \"x\"\n[limits]\ncooldown = 3")
            .starts_with("limits.cooldown: unknown key"));
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
    }

    #[test]
    fn metrics_listen_defaults_to_loopback() {
        assert_eq!(parse_listen("9464").unwrap().to_string(), "127.0.0.1:9464");
        assert_eq!(parse_listen(":9464").unwrap().to_string(), "127.0.0.1:9464");
        assert_eq!(
            parse_listen("0.0.0.0:9464").unwrap().to_string(),
            "0.0.0.0:9464"
        );
        assert!(parse_listen("localhost").is_err());
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
