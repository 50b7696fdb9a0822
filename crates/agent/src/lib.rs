//! colosched-agent: the Linux node agent. It senses per-node pressure from latency-critical (LC)
//! work and moves best-effort (BE) tasks between NUMA nodes (or pseudo-nodes) with the very
//! `colosched-core` policies the cluster simulator replays.
//!
//! Rooms: `topology`, `procfs`, `select` and `sensor` only read; `actuator` (and `state`'s
//! restore) only write; `decide` is pure; `daemon` wires them; `cli` is the command line.
//! `memwatch` is the memory-threshold watcher (spec 004), its own crate (`colosched-memwatch`)
//! re-exported here; `signals` is the SIGTERM/SIGINT handling both loops share, which lives there.

pub mod actuator;
pub mod cli;
pub mod config;
pub mod cpuset;
pub mod daemon;
pub mod decide;
pub mod metrics;
pub mod procfs;
pub mod select;
pub mod sensor;
pub mod state;
pub mod topology;

pub use colosched_memwatch as memwatch;
pub use colosched_memwatch::signals;

/// Wall-clock time as Unix seconds, for log lines and events (0 if the clock is before 1970).
pub fn now_unix() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
