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

/// Wall-clock time as Unix seconds, for log lines and events (0 if the clock is before 1970).
pub fn now_unix() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

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

    /// The plumbing crates the agents share depend on no colosched crate but core (in any
    /// section of their manifests): whichever crate uses them, no circle can form.
    #[test]
    fn plumbing_crates_use_only_core() {
        let crates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        for name in ["qemu", "sys"] {
            let path = crates.join(name).join("Cargo.toml");
            let manifest = std::fs::read_to_string(&path).unwrap();
            for (i, line) in manifest.lines().enumerate() {
                let dep = line.split(['=', '.', ' ']).next().unwrap_or("");
                assert!(
                    !dep.starts_with("colosched-") || dep == "colosched-core",
                    "{}:{}: {name} may not depend on {dep}",
                    path.display(),
                    i + 1
                );
            }
        }
    }
}
