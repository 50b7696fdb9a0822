//! A cluster state file (JSON or TOML) for `colosched plan vms`: hosts, applications and VMs
//! named by id, checked before anything is planned. Errors name the file's field
//! (`vms[3].host: "h9" is not a host`); serde's own errors carry the line and column.
//!
//! ```toml
//! [[hosts]]
//! id = "h0"
//! ssd_capacity_mb = 8192
//! ssd_iops = 40000
//! ssd_bw_mbps = 500
//!
//! [[apps]]
//! id = "zk"
//! preference = "spread"      # or "locality", "none"
//!
//! [[vms]]
//! id = "zk1"
//! host = "h0"
//! app = "zk"                 # optional
//! cache_mb = 256             # default 256 (the paper's slice)
//! mem_mb = 1024              # default 1024
//! iops = 500                 # this window's SSD demand; default 0
//! bw_mbps = 15               # default 0
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use colosched_sys::config::{from_toml, ConfigError, ReadError};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::decide::model::{logical_distance, App, Backend, Cluster, Host, Preference, Vm};
use crate::decide::plan::{Plan, Violation};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StateFile {
    hosts: Vec<Host>,
    backend: Option<Backend>,
    #[serde(default)]
    apps: Vec<App>,
    vms: Vec<VmEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct VmEntry {
    id: String,
    host: String,
    app: Option<String>,
    #[serde(default = "slice")]
    cache_mb: f64,
    #[serde(default = "mem")]
    mem_mb: f64,
    #[serde(default)]
    iops: f64,
    #[serde(default)]
    bw_mbps: f64,
    #[serde(default)]
    backend_iops: f64,
    #[serde(default)]
    backend_mbps: f64,
    #[serde(default)]
    link_mbps: f64,
}

fn slice() -> f64 {
    256.0
}

fn mem() -> f64 {
    1024.0
}

/// The largest number a state may give (MB, IOPS, MB/s, Gbit/s): sums of a cluster's worth stay
/// finite.
pub const MAX: f64 = 1e12;

/// A number as a message shows it: 2e300, not 301 digits.
fn num(x: f64) -> String {
    if x.abs() >= 1e15 {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
}

/// A state file that could not be read, or was refused: the file named.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error("{}: not UTF-8 text (byte {at})", path.display())]
    NotUtf8 { path: PathBuf, at: usize },
    #[error("{}: {source}", path.display())]
    In { path: PathBuf, source: TextError },
}

/// What is wrong with a state's text.
#[derive(Debug, thiserror::Error)]
pub enum TextError {
    /// TOML that does not parse or has an unknown key (toml's line and column), or a field's
    /// value (`vms[3].host`).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// JSON that does not parse or has an unknown key (serde's line and column).
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

/// Reads, parses and checks a state file (`.toml`, else JSON). Errors name the file, and the
/// field or line: a directory, a file that is not UTF-8, a bad value.
pub fn load(path: &Path) -> Result<Cluster, StateError> {
    let bytes = std::fs::read(path).map_err(|source| ReadError {
        path: path.to_path_buf(),
        source,
    })?;
    let text = String::from_utf8(bytes).map_err(|e| StateError::NotUtf8 {
        path: path.to_path_buf(),
        at: e.utf8_error().valid_up_to(),
    })?;
    let toml = path.extension().is_some_and(|x| x == "toml");
    parse(&text, toml).map_err(|source| StateError::In {
        path: path.to_path_buf(),
        source,
    })
}

fn bad(key: impl Into<String>, problem: impl Into<String>) -> TextError {
    TextError::Config(ConfigError::key(key, problem))
}

/// Parses and checks a state; `toml` picks the format. Errors name the field.
pub fn parse(text: &str, toml: bool) -> Result<Cluster, TextError> {
    let f: StateFile = if toml {
        from_toml(text).map_err(ConfigError::from)?
    } else {
        serde_json::from_str(text)?
    };
    if f.hosts.is_empty() {
        return Err(bad("hosts", "a cluster needs at least one host"));
    }
    let index = |what: &str, ids: Vec<&String>| -> Result<HashMap<String, usize>, TextError> {
        let mut m = HashMap::new();
        for (i, id) in ids.into_iter().enumerate() {
            if m.insert(id.clone(), i).is_some() {
                return Err(bad(
                    format!("{what}[{i}].id"),
                    format!("{id:?} is listed twice"),
                ));
            }
        }
        Ok(m)
    };
    let hosts = index("hosts", f.hosts.iter().map(|h| &h.id).collect())?;
    let apps = index("apps", f.apps.iter().map(|a| &a.id).collect())?;
    index("vms", f.vms.iter().map(|v| &v.id).collect())?;
    for (i, h) in f.hosts.iter().enumerate() {
        for (k, x) in [
            ("ssd_capacity_mb", h.ssd_capacity_mb),
            ("ssd_iops", h.ssd_iops),
            ("ssd_bw_mbps", h.ssd_bw_mbps),
            ("link_gbit", h.link_gbit.unwrap_or(1.0)),
        ] {
            if !(x > 0.0 && x <= MAX) {
                return Err(bad(
                    format!("hosts[{i}].{k}"),
                    format!("{} is not a positive number up to {MAX:e}", num(x)),
                ));
            }
        }
    }
    if let Some(b) = f.backend {
        for (k, x) in [("iops", b.iops), ("bw_mbps", b.bw_mbps)] {
            if !(x > 0.0 && x <= MAX) {
                return Err(bad(
                    format!("backend.{k}"),
                    format!("{} is not a positive number up to {MAX:e}", num(x)),
                ));
            }
        }
    }
    let mut vms = Vec::with_capacity(f.vms.len());
    for (i, v) in f.vms.into_iter().enumerate() {
        for (k, x) in [
            ("cache_mb", v.cache_mb),
            ("mem_mb", v.mem_mb),
            ("iops", v.iops),
            ("bw_mbps", v.bw_mbps),
            ("backend_iops", v.backend_iops),
            ("backend_mbps", v.backend_mbps),
            ("link_mbps", v.link_mbps),
        ] {
            if !(0.0..=MAX).contains(&x) {
                return Err(bad(
                    format!("vms[{i}].{k}"),
                    format!("{} is not a number from 0 to {MAX:e}", num(x)),
                ));
            }
        }
        let host = *hosts.get(&v.host).ok_or_else(|| {
            bad(
                format!("vms[{i}].host"),
                format!("{:?} is not a host", v.host),
            )
        })?;
        let app = match &v.app {
            None => None,
            Some(a) => Some(*apps.get(a).ok_or_else(|| {
                bad(
                    format!("vms[{i}].app"),
                    format!("{a:?} is not an application"),
                )
            })?),
        };
        vms.push(Vm {
            id: v.id,
            host,
            app,
            cache_mb: v.cache_mb,
            mem_mb: v.mem_mb,
            iops: v.iops,
            bw_mbps: v.bw_mbps,
            backend_iops: v.backend_iops,
            backend_mbps: v.backend_mbps,
            link_mbps: v.link_mbps,
        });
    }
    Ok(Cluster {
        hosts: f.hosts,
        vms,
        apps: f.apps,
        backend: f.backend,
    })
}

/// A plan in the state file's names: the moves by wave, each VM's host after them, what the
/// target still breaks (in words), the waves during which a cache holds more than its room
/// (`transient_violations`, wave counted from 0), what the VMs get (SSD IOPS and MB/s), each
/// SSD's utilisation and each `spread` application's logical distance before and after.
pub fn plan_json(c: &Cluster, p: &Plan) -> Value {
    let host = |h: usize| c.hosts[h].id.clone();
    let before = c.placement();
    let (ub, ua) = (c.utilisation(&before), c.utilisation(&p.target));
    let (d_before, d_after) = (c.delivered(&before), c.delivered(&p.target));
    let said = |v: &Violation| match v {
        Violation::Capacity {
            host: h,
            mb,
            capacity,
        } => format!(
            "{}: cache slices of {mb:.0} MB on an SSD cache of {capacity:.0} MB",
            host(*h)
        ),
        Violation::Throughput {
            host: h,
            utilisation,
        } => format!(
            "{}: SSD demand at {:.0} % of its IOPS or bandwidth",
            host(*h),
            utilisation * 100.0
        ),
        Violation::Spread {
            app,
            distance,
            best,
        } => format!(
            "{}: logical distance {distance}, {best} possible",
            c.apps[*app].id
        ),
    };
    json!({
        "moves": p.waves.iter().map(|w| w.iter().map(|m| json!({
            "vm": c.vms[m.vm].id, "from": host(m.from), "to": host(m.to),
            "mb": c.vms[m.vm].cache_mb + c.vms[m.vm].mem_mb,
        })).collect::<Vec<_>>()).collect::<Vec<_>>(),
        "moves_total": p.moves(),
        "target": c.vms.iter().zip(&p.target).map(|(v, &h)| (v.id.clone(), Value::from(host(h)))).collect::<serde_json::Map<_, _>>(),
        "violations": p.violations.iter().map(said).collect::<Vec<_>>(),
        "transient_violations": p.transient.iter().map(|t| json!({
            "wave": t.wave, "host": host(t.host), "mb": t.mb, "capacity": t.capacity,
        })).collect::<Vec<_>>(),
        "delivered": {
            "iops": [d_before.iops, d_after.iops],
            "mbps": [d_before.mbps, d_after.mbps],
        },
        "reason": p.reason,
        "ssd_utilisation": c.hosts.iter().enumerate().map(|(h, x)| (x.id.clone(), json!([ub[h], ua[h]]))).collect::<serde_json::Map<_, _>>(),
        "logical_distance": c.apps.iter().enumerate()
            .filter(|(_, a)| a.preference == Preference::Spread)
            .map(|(i, a)| (a.id.clone(), json!([logical_distance(c, &before, i), logical_distance(c, &p.target, i)])))
            .collect::<serde_json::Map<_, _>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::plan::{plan, PlanParams};

    const ZK: &str = r#"
        [[hosts]]
        id = "h0"
        ssd_capacity_mb = 8192
        ssd_iops = 40000
        ssd_bw_mbps = 500
        [[hosts]]
        id = "h1"
        ssd_capacity_mb = 8192
        ssd_iops = 40000
        ssd_bw_mbps = 500
        [[apps]]
        id = "zk"
        preference = "spread"
    "#;

    fn zk(vms: usize) -> String {
        let mut s = ZK.to_string();
        for i in 0..vms {
            s += &format!("[[vms]]\nid = \"zk{i}\"\nhost = \"h0\"\napp = \"zk\"\niops = 500\n");
        }
        s
    }

    #[test]
    fn a_toml_state_plans_in_its_own_names() {
        let c = parse(&zk(6), true).unwrap();
        assert_eq!(
            (c.hosts.len(), c.vms.len(), c.vms[0].cache_mb),
            (2, 6, 256.0)
        );
        let j = plan_json(&c, &plan(&c, &PlanParams::default()));
        assert_eq!(j["moves_total"], 3);
        assert_eq!(j["logical_distance"]["zk"], json!([0, 9]));
        assert_eq!(j["moves"][0][0]["from"], "h0");
        assert_eq!(j["violations"], json!([]));
        let json_text = serde_json::to_string(&serde_json::json!({
            "hosts": [{"id": "a", "ssd_capacity_mb": 1, "ssd_iops": 1, "ssd_bw_mbps": 1}],
            "vms": [{"id": "v", "host": "a", "cache_mb": 5}],
        }))
        .unwrap();
        let c = parse(&json_text, false).unwrap();
        let j = plan_json(&c, &plan(&c, &PlanParams::default()));
        assert_eq!(
            j["violations"],
            json!(["a: cache slices of 5 MB on an SSD cache of 1 MB"]),
            "a VM larger than every SSD is a plan that says so"
        );
    }

    #[test]
    fn bad_states_name_the_field() {
        let cases = [
            (
                zk(1).replace("host = \"h0\"", "host = \"h9\""),
                "vms[0].host: \"h9\" is not a host",
            ),
            (
                zk(1).replace("app = \"zk\"", "app = \"kafka\""),
                "vms[0].app: \"kafka\" is not an application",
            ),
            (
                zk(1).replace("iops = 500", "iops = -5"),
                "vms[0].iops: -5 is not a number from 0 to 1e12",
            ),
            (
                zk(2).replace("zk1", "zk0"),
                "vms[1].id: \"zk0\" is listed twice",
            ),
            (
                "vms = []\n".to_string() + &ZK.replacen("ssd_iops = 40000", "ssd_iops = 0", 1),
                "hosts[0].ssd_iops: 0",
            ),
            (
                zk(1).replace("iops = 500", "iops = 500\ncolour = 1"),
                "unknown field `colour`",
            ),
            (
                zk(1).replace("\"spread\"", "\"scatter\""),
                "unknown variant `scatter`",
            ),
            (
                zk(1).replacen("ssd_bw_mbps = 500", "ssd_bw_mbps = 500\nlink_gbps = 10", 1),
                "unknown field `link_gbps`",
            ),
            (
                zk(1).replace(
                    "preference = \"spread\"",
                    "preference = \"spread\"\nweight = 2",
                ),
                "unknown field `weight`",
            ),
            (
                zk(1).replacen("ssd_bw_mbps = 500", "ssd_bw_mbps = 500\nlink_gbit = 0", 1),
                "hosts[0].link_gbit: 0 is not a positive number",
            ),
            (
                zk(1).replace("iops = 500", "iops = inf"),
                "vms[0].iops: inf is not a number",
            ),
            (
                zk(1).replace("iops = 500", "iops = 2e300"),
                "vms[0].iops: 2e300 is not a number",
            ),
            (
                zk(1) + "[backend]\niops = -1\nbw_mbps = 5\n",
                "backend.iops: -1",
            ),
        ];
        for (text, want) in cases {
            let e = parse(&text, true).unwrap_err().to_string();
            assert!(e.contains(want), "{want} not in {e}");
        }
        let c = parse(
            &zk(1).replacen("ssd_bw_mbps = 500", "ssd_bw_mbps = 500\nlink_gbit = 25", 1),
            true,
        );
        assert_eq!(
            c.unwrap().hosts[0].link_gbit,
            Some(25.0),
            "a known key, used"
        );
        let e = parse("{\"hosts\": [}", false).unwrap_err().to_string();
        assert!(e.contains("line 1 column"), "{e}");
    }

    /// The issue's cluster: caches of 600 MB, h0 holds A, B (300 MB), h1 C, D, E (200 MB),
    /// the only split that fits; h0's SSD is saturated.
    #[test]
    fn the_only_split_that_fits_is_not_broken() {
        let mut t = String::new();
        for h in ["h0", "h1"] {
            t += &format!(
                "[[hosts]]\nid = \"{h}\"\nssd_capacity_mb = 600\nssd_iops = 20000\nssd_bw_mbps = 400\n"
            );
        }
        for (id, host, mb, iops) in [
            ("A", "h0", 300, 12000),
            ("B", "h0", 300, 12000),
            ("C", "h1", 200, 500),
            ("D", "h1", 200, 500),
            ("E", "h1", 200, 500),
        ] {
            t += &format!(
                "[[vms]]\nid = \"{id}\"\nhost = \"{host}\"\ncache_mb = {mb}\niops = {iops}\nbw_mbps = {}\n",
                iops / 32
            );
        }
        let c = parse(&t, true).unwrap();
        let j = plan_json(&c, &plan(&c, &PlanParams::default()));
        assert_eq!(j["moves_total"], 0, "{j}");
        assert_eq!(
            j["violations"].as_array().unwrap().len(),
            1,
            "h0's SSD, as before: {j}"
        );
        assert!(j["violations"][0]
            .as_str()
            .unwrap()
            .starts_with("h0: SSD demand"));
        assert!(j["reason"].is_string());
        assert_eq!(j["transient_violations"], json!([]));
    }

    #[test]
    fn bad_files_are_named() {
        let d = tempfile::tempdir().unwrap();
        let e = load(d.path()).unwrap_err().to_string();
        assert!(e.starts_with(&d.path().display().to_string()), "{e}");
        let f = d.path().join("s.toml");
        std::fs::write(&f, b"[[hosts]]\nid = \"h\xff\"\n").unwrap();
        let e = load(&f).unwrap_err().to_string();
        assert!(e.contains("s.toml: not UTF-8 text (byte 17)"), "{e}");
        std::fs::write(&f, zk(1).replace("iops = 500", "iops = inf")).unwrap();
        let e = load(&f).unwrap_err().to_string();
        assert!(e.contains("s.toml: vms[0].iops: inf"), "{e}");
        std::fs::write(&f, zk(2)).unwrap();
        assert_eq!(load(&f).unwrap().vms.len(), 2);
    }
}
