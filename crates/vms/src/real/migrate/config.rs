//! The executor's inputs, checked before anything starts: the config (TOML, read with serde:
//! an unknown key or a value of the wrong type is refused with its line and column) and the plan
//! (`colosched plan vms --json`). Every error names the key or field (`host[1].port_base`,
//! `moves[0][2].to`), a config value's with its line; the caller puts the file in front.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use colosched_sys::config::line::refused;
use colosched_sys::config::{from_toml, ConfigError};
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::Value as Json;
use toml::Spanned;

/// The share of the link a migration may use: spec 003 §4.4 measured 40 % on average.
pub const DEFAULT_BW_CAP: f64 = 0.4;
pub const DEFAULT_TIMEOUT_S: f64 = 120.0;
pub const DEFAULT_RUN_DIR: &str = "/run/colosched-vms";
/// The first of the dynamic ports (RFC 6335).
pub const DEFAULT_PORT_BASE: u16 = 49152;

#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The hosts' link, Mbit/s.
    pub link_mbps: f64,
    /// The share of the link one migration may use.
    pub bw_cap: f64,
    /// A migration not completed by then is cancelled.
    pub timeout: Duration,
    /// Where destination QMP sockets, pidfiles and logs go.
    pub run_dir: PathBuf,
    pub hosts: Vec<Host>,
    pub vms: Vec<Vm>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Host {
    pub id: String,
    /// Where a destination QEMU on this host listens for the incoming migration.
    pub address: IpAddr,
    /// Ports are tried from here.
    pub port_base: u16,
    /// Its libvirt (`qemu+ssh://h1/system`): the moves go through libvirt's live migration.
    pub libvirt: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Vm {
    pub id: String,
    /// The host it runs on now.
    pub host: String,
    /// Its QMP socket on that host (empty for a libvirt domain).
    pub qmp: PathBuf,
    /// Its libvirt domain name: the VM is moved by libvirt, not over QMP.
    pub domain: Option<String>,
}

impl Config {
    /// QEMU's `max-bandwidth`, bytes/s: bw_cap × link.
    pub fn max_bandwidth(&self) -> u64 {
        (self.bw_cap * self.link_mbps * 1e6 / 8.0).round() as u64
    }

    pub fn host(&self, id: &str) -> Option<&Host> {
        self.hosts.iter().find(|h| h.id == id)
    }

    pub fn vm(&self, id: &str) -> Option<(usize, &Vm)> {
        self.vms.iter().enumerate().find(|(_, v)| v.id == id)
    }

    /// Whether the VMs are libvirt domains (every one, then: checked by `parse_config`).
    pub fn libvirt(&self) -> bool {
        self.vms.iter().any(|v| v.domain.is_some())
    }
}

/// One migration of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Move {
    pub vm: String,
    pub from: String,
    pub to: String,
}

/// The config file as written: serde refuses an unknown key or a value of the wrong type, with
/// its line; `parse_config` checks the values, naming the key and the line.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    migrate: MigrateKeys,
    host: Vec<HostKeys>,
    vm: Vec<VmKeys>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MigrateKeys {
    link_mbps: Spanned<f64>,
    bw_cap: Option<Spanned<f64>>,
    timeout_s: Option<Spanned<f64>>,
    run_dir: Option<Spanned<String>>,
    /// The planner's keys: read only to be refused with a word on where they belong.
    per_cluster: Option<Spanned<IgnoredAny>>,
    per_host: Option<Spanned<IgnoredAny>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HostKeys {
    id: Spanned<String>,
    address: Spanned<String>,
    port_base: Option<Spanned<i64>>,
    libvirt: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct VmKeys {
    id: Spanned<String>,
    host: Spanned<String>,
    qmp: Option<Spanned<String>>,
    domain: Option<Spanned<String>>,
}

/// A config file's text; relative paths are taken from `base` (the file's directory). An error
/// names the key (`host[1].port_base`) and its line.
pub fn parse_config(text: &str, base: &Path) -> Result<Config, ConfigError> {
    let f: File = from_toml(text)?;
    // A value's problem, named with its key and line (`span`: the value's place in the text).
    let bad = |span: Range<usize>, key: &str, problem: String| refused(text, span, key, problem);
    let m = &f.migrate;
    if let Some((k, v)) = [("per_cluster", &m.per_cluster), ("per_host", &m.per_host)]
        .into_iter()
        .find_map(|(k, v)| Some((k, v.as_ref()?)))
    {
        return Err(bad(
            v.span(),
            &format!("migrate.{k}"),
            format!(
                "not an executor key: the executor runs one migration at a time (spec 003: \
                 \"run one migration at a time\"), wave after wave; {k} is the planner's \
                 (`colosched plan vms --{}`), which groups the moves into waves",
                k.replace('_', "-")
            ),
        ));
    }
    let link_mbps = *m.link_mbps.get_ref();
    if !(link_mbps.is_finite() && link_mbps > 0.0) {
        return Err(bad(
            m.link_mbps.span(),
            "migrate.link_mbps",
            format!("must be positive, got {link_mbps}"),
        ));
    }
    let bw_cap = m.bw_cap.as_ref().map_or(DEFAULT_BW_CAP, |v| *v.get_ref());
    if !(bw_cap > 0.0 && bw_cap <= 1.0) {
        let v = m.bw_cap.as_ref().expect("the default is in range");
        return Err(bad(
            v.span(),
            "migrate.bw_cap",
            format!("must be in (0, 1], got {bw_cap}"),
        ));
    }
    let timeout_s = m
        .timeout_s
        .as_ref()
        .map_or(DEFAULT_TIMEOUT_S, |v| *v.get_ref());
    if !(timeout_s > 0.0 && timeout_s <= 1e6) {
        let v = m.timeout_s.as_ref().expect("the default is in range");
        return Err(bad(
            v.span(),
            "migrate.timeout_s",
            format!("must be positive (and sane), got {timeout_s}"),
        ));
    }
    let run_dir = m.run_dir.as_ref().map_or(DEFAULT_RUN_DIR, |v| v.get_ref());
    if let Some(v) = &m.run_dir {
        if run_dir.is_empty() || run_dir.contains(',') {
            return Err(bad(
                v.span(),
                "migrate.run_dir",
                format!("{run_dir:?}: must be a path without commas (QEMU options split on them)"),
            ));
        }
    }
    if f.host.is_empty() {
        return Err(ConfigError::key(
            "host",
            "expected [[host]] tables, at least one",
        ));
    }
    let mut hosts: Vec<Host> = Vec::new();
    for (i, t) in f.host.iter().enumerate() {
        let at = |k: &str| format!("host[{i}].{k}");
        let id = id(text, &t.id, &at("id"))?;
        if hosts.iter().any(|h| h.id == id) {
            return Err(bad(
                t.id.span(),
                &at("id"),
                format!("{id:?} is already a host"),
            ));
        }
        let address = t.address.get_ref();
        let address: IpAddr = address.parse().map_err(|_| {
            bad(
                t.address.span(),
                &at("address"),
                format!("{address:?} is not an IP address"),
            )
        })?;
        let port_base = match &t.port_base {
            None => DEFAULT_PORT_BASE,
            Some(p) => u16::try_from(*p.get_ref())
                .ok()
                .filter(|&p| p > 0)
                .ok_or_else(|| {
                    bad(
                        p.span(),
                        &at("port_base"),
                        format!("expected a port 1-65535, got {}", p.get_ref()),
                    )
                })?,
        };
        if let Some(u) = t.libvirt.as_ref().filter(|u| u.get_ref().trim().is_empty()) {
            return Err(bad(u.span(), &at("libvirt"), "an empty URI".into()));
        }
        hosts.push(Host {
            id,
            address,
            port_base,
            libvirt: t.libvirt.as_ref().map(|u| u.get_ref().clone()),
        });
    }
    if f.vm.is_empty() {
        return Err(ConfigError::key(
            "vm",
            "expected [[vm]] tables, at least one",
        ));
    }
    let mut vms: Vec<Vm> = Vec::new();
    for (i, t) in f.vm.iter().enumerate() {
        let at = |k: &str| format!("vm[{i}].{k}");
        let id = id(text, &t.id, &at("id"))?;
        if vms.iter().any(|v| v.id == id) {
            return Err(bad(
                t.id.span(),
                &at("id"),
                format!("{id:?} is already a VM"),
            ));
        }
        let host = t.host.get_ref().clone();
        let Some(hi) = hosts.iter().position(|h| h.id == host) else {
            return Err(bad(
                t.host.span(),
                &at("host"),
                format!("{host:?} is not a [[host]] id"),
            ));
        };
        let (qmp, domain) = match (&t.qmp, &t.domain) {
            (Some(_), Some(d)) => {
                return Err(bad(
                    d.span(),
                    &at("domain"),
                    "a VM is reached through its QMP socket or its libvirt domain, not both".into(),
                ))
            }
            (None, None) => {
                return Err(bad(
                    t.id.span(),
                    &at("qmp"),
                    "missing (or domain, under libvirt)".into(),
                ))
            }
            (_, Some(d)) if d.get_ref().trim().is_empty() => {
                return Err(bad(d.span(), &at("domain"), "empty".into()))
            }
            (Some(q), _) if q.get_ref().is_empty() => {
                return Err(bad(q.span(), &at("qmp"), "empty".into()))
            }
            (Some(q), None) => (base.join(q.get_ref()), None),
            (None, Some(d)) => (PathBuf::new(), Some(d.get_ref().clone())),
        };
        // The value the errors below are about: the qmp or domain key.
        let (key, value) = match (&t.qmp, &t.domain) {
            (Some(q), _) => ("qmp", q.span()),
            (_, Some(d)) => ("domain", d.span()),
            (None, None) => unreachable!("refused above"),
        };
        if let Some(other) = vms.iter().find(|v| domain.is_none() && v.qmp == qmp) {
            return Err(bad(
                value.clone(),
                &at(key),
                format!("{} is {}'s socket too", qmp.display(), other.id),
            ));
        }
        if let Some(other) = vms.iter().find(|v| domain.is_some() && v.domain == domain) {
            let d = other.domain.as_deref().unwrap_or_default();
            return Err(bad(
                value.clone(),
                &at(key),
                format!("{d:?} is {}'s too", other.id),
            ));
        }
        // One way for the whole run: libvirt's migration, or ours over QMP.
        if let Some(first) = vms.first() {
            if first.domain.is_some() != domain.is_some() {
                let o = if domain.is_some() { "qmp" } else { "domain" };
                return Err(bad(
                    value.clone(),
                    &at(key),
                    format!(
                        "vm[0] gives {o}: every VM of a config is a libvirt domain, or none is"
                    ),
                ));
            }
        }
        if domain.is_some() && hosts[hi].libvirt.is_none() {
            return Err(bad(
                f.host[hi].id.span(),
                &format!("host[{hi}].libvirt"),
                format!(
                    "missing: {id} is a libvirt domain ({}) on this host",
                    at("domain")
                ),
            ));
        }
        vms.push(Vm {
            id,
            host,
            qmp,
            domain,
        });
    }
    if vms[0].domain.is_some() {
        if let Some(hi) = hosts.iter().position(|h| h.libvirt.is_none()) {
            return Err(bad(
                f.host[hi].id.span(),
                &format!("host[{hi}].libvirt"),
                "missing: the VMs are libvirt domains, so every host needs its libvirt URI".into(),
            ));
        }
    }
    Ok(Config {
        link_mbps,
        bw_cap,
        timeout: Duration::from_secs_f64(timeout_s),
        run_dir: base.join(run_dir),
        hosts,
        vms,
    })
}

/// An id goes into file names (`<vm>.<host>.qmp`) and QEMU options.
fn id(text: &str, v: &Spanned<String>, key: &str) -> Result<String, ConfigError> {
    let id = v.get_ref();
    let ok = !id.is_empty()
        && !id.starts_with('.')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_".contains(c));
    if !ok {
        return Err(refused(
            text,
            v.span(),
            key,
            format!("{id:?}: use letters, digits, '-' and '_' only (it names files)"),
        ));
    }
    Ok(id.clone())
}

/// Bad input found before anything started (exit 2): in the config, or in the plan. The
/// command line puts the file in front.
#[derive(Debug, thiserror::Error)]
pub enum Bad {
    /// The config: toml's refusal (with its line and column), or a key's value (with its line),
    /// or a key the system cannot honour (a VM's QMP socket that does not answer).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The plan is not JSON (serde's message has the line and column).
    #[error("not JSON: {0}")]
    PlanJson(#[from] serde_json::Error),
    /// A field of the plan (`moves[0][2].to`), or the plan at odds with the config.
    #[error(transparent)]
    Plan(ConfigError),
}

impl Bad {
    /// The line of the config value a check refused (toml's own errors say theirs).
    pub fn line(&self) -> Option<usize> {
        match self {
            Bad::Config(ConfigError::Key { line, .. }) => *line,
            _ => None,
        }
    }
}

/// A plan field's problem.
fn field(key: impl Into<String>, problem: impl Into<String>) -> Bad {
    Bad::Plan(ConfigError::key(key, problem))
}

/// A plan's text (`colosched plan vms --json`: only `moves` is read), by wave.
/// The plan's `transient_violations` (waves during which a cache holds more slices than its
/// room, because no order of the moves avoids it), in words: a plan that has some is run only
/// when the operator allows it (`--allow-transient`).
pub fn plan_transient(text: &str) -> Result<Vec<String>, Bad> {
    let v: Json = serde_json::from_str(text)?;
    let Some(list) = v.get("transient_violations") else {
        return Ok(Vec::new());
    };
    let list = list
        .as_array()
        .ok_or_else(|| field("transient_violations", "expected a list"))?;
    (list.iter().enumerate())
        .map(|(i, t)| {
            let (w, h) = (
                t.get("wave").and_then(Json::as_u64),
                t.get("host").and_then(Json::as_str),
            );
            let (mb, cap) = (
                t.get("mb").and_then(Json::as_f64),
                t.get("capacity").and_then(Json::as_f64),
            );
            match (w, h, mb, cap) {
                (Some(w), Some(h), Some(mb), Some(cap)) => Ok(format!(
                    "wave {}: {h} holds {mb:.0} MB of cache slices on {cap:.0} MB",
                    w + 1
                )),
                _ => Err(field(
                    format!("transient_violations[{i}]"),
                    "expected wave, host, mb and capacity",
                )),
            }
        })
        .collect()
}

pub fn parse_plan(text: &str) -> Result<Vec<Vec<Move>>, Bad> {
    let v: Json = serde_json::from_str(text)?;
    let waves = v
        .get("moves")
        .ok_or_else(|| field("moves", "missing (a plan of `colosched plan vms --json`)"))?
        .as_array()
        .ok_or_else(|| field("moves", "expected a list of waves"))?;
    let mut out = Vec::new();
    for (w, wave) in waves.iter().enumerate() {
        let wave = wave
            .as_array()
            .ok_or_else(|| field(format!("moves[{w}]"), "expected a list of migrations"))?;
        let mut moves: Vec<Move> = Vec::new();
        for (i, m) in wave.iter().enumerate() {
            let at = format!("moves[{w}][{i}]");
            let name = |k: &str| -> Result<String, Bad> {
                match m.get(k) {
                    Some(Json::String(s)) if !s.is_empty() => Ok(s.clone()),
                    Some(other) => Err(field(
                        format!("{at}.{k}"),
                        format!("expected a name, got {other}"),
                    )),
                    None => Err(field(format!("{at}.{k}"), "missing")),
                }
            };
            let mv = Move {
                vm: name("vm")?,
                from: name("from")?,
                to: name("to")?,
            };
            if mv.from == mv.to {
                return Err(field(
                    format!("{at}.to"),
                    format!("{:?} is where it is already", mv.to),
                ));
            }
            // One migration per host at a time: a wave runs its migrations without waiting.
            let busy = |h: &str| moves.iter().any(|o| o.from == h || o.to == h);
            if let Some(h) = [&mv.from, &mv.to].into_iter().find(|h| busy(h)) {
                return Err(field(
                    at,
                    format!(
                        "host {h:?} is in another migration of this wave (one per host at a time)"
                    ),
                ));
            }
            moves.push(mv);
        }
        out.push(moves);
    }
    Ok(out)
}

/// The plan against the config: every VM has a `[[vm]]`, every host a `[[host]]`, and each
/// move starts where the VM is (the config's host, then where earlier waves put it). The
/// error names the plan's field.
pub fn check_plan(c: &Config, waves: &[Vec<Move>]) -> Result<(), Bad> {
    let mut at_host: BTreeMap<&str, &str> = BTreeMap::new();
    let known: BTreeSet<&str> = c.hosts.iter().map(|h| h.id.as_str()).collect();
    for (w, wave) in waves.iter().enumerate() {
        for (i, m) in wave.iter().enumerate() {
            let at = |k: &str| format!("moves[{w}][{i}].{k}");
            let Some((_, vm)) = c.vm(&m.vm) else {
                return Err(field(
                    at("vm"),
                    format!("{:?} has no [[vm]] in the config", m.vm),
                ));
            };
            for (k, h) in [("from", &m.from), ("to", &m.to)] {
                if !known.contains(h.as_str()) {
                    return Err(field(at(k), format!("{h:?} has no [[host]] in the config")));
                }
            }
            let now = *at_host.get(vm.id.as_str()).unwrap_or(&vm.host.as_str());
            if m.from != now {
                return Err(field(
                    at("from"),
                    format!(
                        "{:?}, but {} is on {now:?} (config vm.host{})",
                        m.from,
                        m.vm,
                        if now == vm.host {
                            ""
                        } else {
                            " and earlier waves"
                        }
                    ),
                ));
            }
            at_host.insert(&vm.id, &m.to);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
        [migrate]
        link_mbps = 1000
        timeout_s = 30
        run_dir = "run"
        [[host]]
        id = "h0"
        address = "127.0.0.1"
        [[host]]
        id = "h1"
        address = "::1"
        port_base = 50000
        [[vm]]
        id = "zk1"
        host = "h0"
        qmp = "/run/qemu/zk1.qmp"
        [[vm]]
        id = "zk2"
        host = "h1"
        qmp = "zk2.qmp"
    "#;

    fn cfg(text: &str) -> Result<Config, String> {
        parse_config(text, Path::new("/etc/cs")).map_err(|e| e.to_string())
    }

    /// The line of the value a check of `text` refused.
    fn refused_line(text: &str) -> Option<usize> {
        match parse_config(text, Path::new("/etc/cs")) {
            Err(ConfigError::Key { line, .. }) => line,
            _ => None,
        }
    }

    #[test]
    fn a_good_config_with_defaults_and_relative_paths() {
        let c = cfg(GOOD).unwrap();
        assert_eq!(c.bw_cap, 0.4);
        assert_eq!(
            c.max_bandwidth(),
            50_000_000,
            "0.4 × 1000 Mbit/s in bytes/s"
        );
        assert_eq!(c.timeout, Duration::from_secs(30));
        assert_eq!(c.run_dir, Path::new("/etc/cs/run"));
        assert_eq!(c.hosts[0].port_base, DEFAULT_PORT_BASE);
        assert_eq!(c.hosts[1].port_base, 50000);
        assert_eq!(c.vms[0].qmp, Path::new("/run/qemu/zk1.qmp"));
        assert_eq!(c.vms[1].qmp, Path::new("/etc/cs/zk2.qmp"));
        let c = cfg(&GOOD.replace("run_dir = \"run\"\n", "")).unwrap();
        assert_eq!(c.run_dir, Path::new(DEFAULT_RUN_DIR));
    }

    #[test]
    fn the_libvirt_example_config_checks() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
        let text = std::fs::read_to_string(root.join("migrate-libvirt.toml")).unwrap();
        let c = parse_config(&text, &root).unwrap();
        assert!(c.libvirt() && c.hosts.iter().all(|h| h.libvirt.is_some()));
    }

    #[test]
    fn the_example_config_checks() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
        let text = std::fs::read_to_string(root.join("migrate.toml")).unwrap();
        let c = parse_config(&text, &root).unwrap();
        // Every VM of the example cluster state, so its plan passes the config check.
        let state = std::fs::read_to_string(root.join("cluster-state.toml")).unwrap();
        let cluster = crate::state::parse(&state, true).unwrap();
        assert_eq!(c.hosts.len(), cluster.hosts.len());
        let ids = |v: &Vec<String>| v.iter().cloned().collect::<std::collections::BTreeSet<_>>();
        assert_eq!(
            ids(&c.vms.iter().map(|v| v.id.clone()).collect()),
            ids(&cluster.vms.iter().map(|v| v.id.clone()).collect())
        );
        assert_eq!(c.max_bandwidth(), 50_000_000);
        assert_eq!(c.run_dir, Path::new(DEFAULT_RUN_DIR));
    }

    #[test]
    fn every_bad_config_names_its_key() {
        for (from, to, needle) in [
            (
                "timeout_s = 30",
                "timeout_s = 30\nper_cluster = 4",
                "migrate.per_cluster: not an executor key: the executor runs one migration at a time",
            ),
            (
                "timeout_s = 30",
                "per_host = 2",
                "migrate.per_host: not an executor key",
            ),
            (
                "link_mbps = 1000",
                "link_mbps = 0",
                "migrate.link_mbps: must be positive",
            ),
            (
                "timeout_s = 30",
                "bw_cap = 1.5",
                "migrate.bw_cap: must be in (0, 1]",
            ),
            (
                "timeout_s = 30",
                "timeout_s = -1",
                "migrate.timeout_s: must be positive",
            ),
            (
                "\"run\"",
                "\"a,b\"",
                "migrate.run_dir: \"a,b\": must be a path without commas",
            ),
            (
                "port_base = 50000",
                "port_base = 70000",
                "host[1].port_base: expected a port",
            ),
            (
                "address = \"::1\"",
                "address = \"localhost\"",
                "host[1].address: \"localhost\" is not an IP",
            ),
            (
                "id = \"h1\"",
                "id = \"h0\"",
                "host[1].id: \"h0\" is already a host",
            ),
            (
                "id = \"h1\"",
                "id = \"h 1\"",
                "host[1].id: \"h 1\": use letters",
            ),
            (
                "host = \"h1\"",
                "host = \"h7\"",
                "vm[1].host: \"h7\" is not a [[host]] id",
            ),
            ("qmp = \"zk2.qmp\"", "", "vm[1].qmp: missing"),
            (
                "qmp = \"zk2.qmp\"",
                "qmp = \"/run/qemu/zk1.qmp\"",
                "vm[1].qmp: /run/qemu/zk1.qmp is zk1's socket too",
            ),
            (
                "id = \"zk2\"",
                "id = \"zk1\"",
                "vm[1].id: \"zk1\" is already a VM",
            ),
            (
                "timeout_s = 30",
                "timeout_s = nan",
                "migrate.timeout_s: must be positive (and sane), got NaN",
            ),
            (
                "link_mbps = 1000",
                "link_mbps = inf",
                "migrate.link_mbps: must be positive, got inf",
            ),
            (
                "port_base = 50000",
                "port_base = 0",
                "host[1].port_base: expected a port 1-65535, got 0",
            ),
        ] {
            assert!(GOOD.contains(from), "{from}");
            let e = cfg(&GOOD.replacen(from, to, 1)).unwrap_err();
            assert!(e.starts_with(needle), "{to}: {e}");
        }
        // A value's check names the line it is on.
        let text = GOOD.replacen("timeout_s = 30", "bw_cap = 1.5", 1);
        assert!(cfg(&text).unwrap_err().ends_with("got 1.5"));
        assert_eq!(refused_line(&text), Some(4));
        assert_eq!(
            refused_line(&GOOD.replacen("id = \"zk2\"", "id = \"zk1\"", 1)),
            Some(18)
        );
        // Unknown keys, missing keys and values of the wrong type: serde's message, with the
        // line and column and the key's name.
        for (from, to, line, needle) in [
            (
                "timeout_s = 30",
                "timeout = 30",
                4,
                "unknown field `timeout`",
            ),
            (
                "port_base = 50000",
                "port = 50000",
                12,
                "unknown field `port`",
            ),
            ("[migrate]", "[migrat]", 2, "unknown field `migrat`"),
            ("link_mbps = 1000", "", 2, "missing field `link_mbps`"),
            (
                "link_mbps = 1000",
                "link_mbps = \"fast\"",
                3,
                "invalid type: string \"fast\", expected f64",
            ),
            (
                "qmp = \"zk2.qmp\"",
                "qmp = 2",
                20,
                "invalid type: integer `2`",
            ),
        ] {
            assert!(GOOD.contains(from), "{from}");
            let e = parse_config(&GOOD.replacen(from, to, 1), Path::new("/")).unwrap_err();
            let ConfigError::Toml(t) = &e else {
                panic!("{to}: {e}")
            };
            assert_eq!(t.line, line, "{to}: {e}");
            assert!(
                e.to_string()
                    .starts_with(&format!("TOML parse error at line {line}")),
                "{e}"
            );
            assert!(e.to_string().contains(needle), "{to}: {e}");
        }
        let e = cfg("[migrate]\nlink_mbps = 10\n").unwrap_err();
        assert!(e.contains("missing field `host`"), "{e}");
        let e = cfg("host = []\nvm = []\n[migrate]\nlink_mbps = 10\n").unwrap_err();
        assert!(e.starts_with("host: expected [[host]] tables"), "{e}");
        let e = cfg("[migrate\n").unwrap_err();
        assert!(e.contains("line 1"), "{e}");
    }

    #[test]
    fn libvirt_configs_give_every_host_a_uri_and_every_vm_a_domain() {
        let lv = GOOD
            .replace(
                "address = \"127.0.0.1\"",
                "address = \"127.0.0.1\"\nlibvirt = \"qemu+ssh://h0/system\"",
            )
            .replace(
                "address = \"::1\"",
                "address = \"::1\"\nlibvirt = \"qemu+ssh://h1/system\"",
            )
            .replace("qmp = \"/run/qemu/zk1.qmp\"", "domain = \"zk1\"")
            .replace("qmp = \"zk2.qmp\"", "domain = \"zk2\"");
        let c = cfg(&lv).unwrap();
        assert!(c.libvirt() && !cfg(GOOD).unwrap().libvirt());
        assert_eq!(c.vms[1].domain.as_deref(), Some("zk2"));
        assert_eq!(c.hosts[1].libvirt.as_deref(), Some("qemu+ssh://h1/system"));
        for (from, to, needle) in [
            (
                "domain = \"zk2\"",
                "qmp = \"zk2.qmp\"",
                "vm[1].qmp: vm[0] gives domain",
            ),
            (
                "domain = \"zk2\"",
                "domain = \"zk1\"",
                "vm[1].domain: \"zk1\" is zk1's too",
            ),
            ("domain = \"zk2\"", "domain = \"\"", "vm[1].domain: empty"),
            (
                "domain = \"zk2\"",
                "domain = \"zk2\"\nqmp = \"q\"",
                "vm[1].domain: a VM is reached",
            ),
            (
                "libvirt = \"qemu+ssh://h1/system\"",
                "",
                "host[1].libvirt: missing: zk2 is a libvirt domain",
            ),
            (
                "libvirt = \"qemu+ssh://h1/system\"",
                "libvirt = \" \"",
                "host[1].libvirt: an empty URI",
            ),
        ] {
            assert!(lv.contains(from), "{from}");
            let e = cfg(&lv.replacen(from, to, 1)).unwrap_err();
            assert!(e.starts_with(needle), "{to}: {e}");
        }
        // A host no libvirt VM runs on still needs its URI: it may be a destination.
        let three = lv.replacen(
            "[[vm]]",
            "[[host]]\nid = \"h2\"\naddress = \"10.0.0.3\"\n[[vm]]",
            1,
        );
        let e = cfg(&three).unwrap_err();
        assert!(
            e.starts_with("host[2].libvirt: missing: the VMs are libvirt domains"),
            "{e}"
        );
    }

    const PLAN: &str = r#"{"moves": [[{"vm": "zk1", "from": "h0", "to": "h1", "mb": 1280}],
        [{"vm": "zk2", "from": "h1", "to": "h0", "mb": 1280}, {"vm": "zk3", "from": "h2", "to": "h3"}]],
        "target": {}, "moves_total": 3}"#;

    #[test]
    fn the_plan_reader_keeps_the_waves_and_names_bad_fields() {
        let p = parse_plan(PLAN).unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(
            p[1][1],
            Move {
                vm: "zk3".into(),
                from: "h2".into(),
                to: "h3".into()
            }
        );
        for (from, to, needle) in [
            (
                "\"to\": \"h3\"",
                "\"to\": 3",
                "moves[1][1].to: expected a name, got 3",
            ),
            ("\"vm\": \"zk3\", ", "", "moves[1][1].vm: missing"),
            (
                "\"to\": \"h3\"",
                "\"to\": \"h2\"",
                "moves[1][1].to: \"h2\" is where it is already",
            ),
            (
                "\"to\": \"h3\"",
                "\"to\": \"h0\"",
                "moves[1][1]: host \"h0\" is in another migration",
            ),
            ("\"moves\"", "\"waves\"", "moves: missing"),
            ("}]]", "}]", "not JSON"),
        ] {
            let e = parse_plan(&PLAN.replacen(from, to, 1))
                .unwrap_err()
                .to_string();
            assert!(e.starts_with(needle), "{to}: {e}");
        }
        let e = parse_plan(r#"{"moves": [{"vm": "zk1"}]}"#)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("moves[0]: expected a list"), "{e}");
        assert_eq!(
            parse_plan(r#"{"moves": []}"#).unwrap(),
            Vec::<Vec<Move>>::new()
        );
    }

    #[test]
    fn the_plan_must_fit_the_config() {
        let c = cfg(GOOD).unwrap();
        let plan = |t: &str| parse_plan(t).unwrap();
        let ok = plan(
            r#"{"moves": [[{"vm": "zk1", "from": "h0", "to": "h1"}], [{"vm": "zk1", "from": "h1", "to": "h0"}]]}"#,
        );
        assert!(check_plan(&c, &ok).is_ok());
        for (text, needle) in [
            (
                r#"{"moves": [[{"vm": "zk9", "from": "h0", "to": "h1"}]]}"#,
                "moves[0][0].vm: \"zk9\" has no [[vm]]",
            ),
            (
                r#"{"moves": [[{"vm": "zk1", "from": "h0", "to": "h5"}]]}"#,
                "moves[0][0].to: \"h5\" has no [[host]]",
            ),
            (
                r#"{"moves": [[{"vm": "zk1", "from": "h1", "to": "h0"}]]}"#,
                "moves[0][0].from: \"h1\", but zk1 is on \"h0\"",
            ),
            (
                r#"{"moves": [[{"vm": "zk1", "from": "h0", "to": "h1"}], [{"vm": "zk1", "from": "h0", "to": "h1"}]]}"#,
                "moves[1][0].from: \"h0\", but zk1 is on \"h1\" (config vm.host and earlier waves)",
            ),
        ] {
            let e = check_plan(&c, &plan(text)).unwrap_err().to_string();
            assert!(e.starts_with(needle), "{e}");
        }
    }
}
