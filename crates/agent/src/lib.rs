//! colosched-agent: the Linux node agent. It senses per-node pressure from latency-critical (LC)
//! work and moves best-effort (BE) tasks between NUMA nodes (or pseudo-nodes) with the very
//! `colosched-core` policies the cluster simulator replays.
//!
//! Rooms: `sense` only reads; `decide` is pure; `act` only writes (and restores); `daemon` wires
//! them; `report` and `metrics` say what a cycle saw and did; `cli` is the command line;
//! `config` parses and checks the configuration. Imports go one
//! way: cpuset, error → sense → decide → act → daemon → cli, and config → sense.
//! `memwatch` is the memory-threshold watcher (spec 004), its own crate (`colosched-memwatch`)
//! re-exported here; `signals` is the SIGTERM/SIGINT handling both loops share
//! (`colosched-sys`'s).

pub mod act;
pub mod cli;
pub mod config;
pub mod daemon;
pub mod decide;
pub mod error;
#[cfg(test)]
mod fake;
pub mod host;
pub mod metrics;
pub mod report;
pub mod sense;

pub use colosched_core::cpuset;
pub use colosched_memwatch as memwatch;
pub use colosched_sys::signals;

pub use colosched_sys::now_unix;

#[cfg(test)]
mod rooms {
    /// Each room imports only the rooms below it (tests may use the shared fake tree): no
    /// circles, and readers cannot write, nor deciders read.
    #[test]
    fn imports_go_one_way() {
        let allowed: &[(&str, &[&str])] = &[
            ("error.rs", &[]),
            ("sense", &["cpuset", "error", "sense"]),
            ("decide", &["cpuset", "error", "sense", "decide"]),
            ("act", &["cpuset", "error", "sense", "decide", "act"]),
            ("config.rs", &["cpuset", "error", "sense", "config"]),
        ];
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut checked = 0;
        for (room, may) in allowed {
            let path = src.join(room);
            let files: Vec<_> = match std::fs::read_dir(&path) {
                Ok(d) => d.flatten().map(|e| e.path()).collect(),
                Err(_) => vec![path],
            };
            for f in files {
                let text = std::fs::read_to_string(&f).unwrap();
                for (i, line) in text.lines().enumerate() {
                    for used in line.split("crate::").skip(1) {
                        let name: String = used
                            .chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .collect();
                        assert!(
                            may.contains(&name.as_str()) || name == "fake",
                            "{}:{}: {room} may not use crate::{name}",
                            f.display(),
                            i + 1
                        );
                    }
                }
                checked += 1;
            }
        }
        assert!(checked >= 12, "only {checked} files checked");
    }

    /// No crate's files import each other in a circle (`a` uses `b`, which uses `a`, directly
    /// or through others): a reader can start at the bottom of any crate. A file's module is
    /// its path (`act/state.rs` is `act/state`, `sim/mod.rs` is `sim`); `crate::` and `super::`
    /// paths outside comments and before the file's `#[cfg(test)]` count; a module using its
    /// parent or child (re-exports, shared items) does not.
    #[test]
    fn no_crate_has_an_import_circle() {
        use std::collections::{BTreeMap, BTreeSet};
        let crates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut checked = 0;
        for krate in std::fs::read_dir(&crates).unwrap().flatten() {
            let src = krate.path().join("src");
            let mut files = Vec::new();
            let mut dirs = vec![src.clone()];
            while let Some(d) = dirs.pop() {
                for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                    let p = e.path();
                    if p.is_dir() {
                        dirs.push(p);
                    } else if p.extension().is_some_and(|x| x == "rs") {
                        files.push(p);
                    }
                }
            }
            // module path -> file
            let mut mods: BTreeMap<String, std::path::PathBuf> = BTreeMap::new();
            for f in files {
                let rel = f.strip_prefix(&src).unwrap().with_extension("");
                let mut parts: Vec<String> =
                    rel.iter().map(|p| p.to_string_lossy().into()).collect();
                if matches!(parts.last().unwrap().as_str(), "mod" | "lib" | "main") {
                    parts.pop();
                }
                mods.insert(parts.join("/"), f);
            }
            let parent = |m: &str| m.rsplit_once('/').map_or(String::new(), |(p, _)| p.into());
            let related = |a: &str, b: &str| {
                a.is_empty()
                    || b.is_empty()
                    || a.starts_with(&format!("{b}/"))
                    || b.starts_with(&format!("{a}/"))
            };
            let mut uses: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
            for (m, f) in &mods {
                let text = std::fs::read_to_string(f).unwrap();
                let code = text.split("#[cfg(test)]").next().unwrap();
                let super_base = parent(m);
                let mut out = BTreeSet::new();
                for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
                    for (kw, base) in [("crate::", String::new()), ("super::", super_base.clone())]
                    {
                        for rest in line.split(kw).skip(1) {
                            let (mut cur, mut target) = (base.clone(), base.clone());
                            for seg in rest.split("::") {
                                let seg: String = seg
                                    .chars()
                                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                                    .collect();
                                let cand = if cur.is_empty() {
                                    seg
                                } else {
                                    format!("{cur}/{seg}")
                                };
                                if !mods.contains_key(&cand) {
                                    break;
                                }
                                (cur, target) = (cand.clone(), cand);
                            }
                            if target != *m && !related(m, &target) {
                                out.insert(target);
                            }
                        }
                    }
                }
                uses.insert(m.clone(), out);
                checked += 1;
            }
            // Depth-first: a module met again while still on the path closes a circle.
            fn walk(
                m: &str,
                uses: &BTreeMap<String, BTreeSet<String>>,
                path: &mut Vec<String>,
                done: &mut BTreeSet<String>,
            ) -> Option<Vec<String>> {
                if let Some(i) = path.iter().position(|p| p == m) {
                    let mut circle = path[i..].to_vec();
                    circle.push(m.into());
                    return Some(circle);
                }
                if !done.insert(m.into()) {
                    return None;
                }
                path.push(m.into());
                for next in &uses[m] {
                    if let Some(c) = walk(next, uses, path, done) {
                        return Some(c);
                    }
                }
                path.pop();
                None
            }
            let mut done = BTreeSet::new();
            for m in uses.keys() {
                let circle = walk(m, &uses, &mut Vec::new(), &mut done);
                assert!(
                    circle.is_none(),
                    "{}: {}",
                    krate.path().display(),
                    circle.unwrap().join(" -> ")
                );
            }
        }
        assert!(checked > 100, "only {checked} files read");
    }

    /// The plumbing crates the agents share depend on no colosched crate but core (sys) or
    /// core and sys (qemu), in any section of their manifests: whichever crate uses them, no
    /// circle can form.
    #[test]
    fn plumbing_crates_use_only_core() {
        let crates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        for (name, may) in [
            ("qemu", &["colosched-core", "colosched-sys"][..]),
            ("sys", &["colosched-core"]),
        ] {
            let path = crates.join(name).join("Cargo.toml");
            let manifest = std::fs::read_to_string(&path).unwrap();
            for (i, line) in manifest.lines().enumerate() {
                let dep = line.split(['=', '.', ' ']).next().unwrap_or("");
                assert!(
                    !dep.starts_with("colosched-") || may.contains(&dep),
                    "{}:{}: {name} may not depend on {dep}",
                    path.display(),
                    i + 1
                );
            }
        }
    }
}
