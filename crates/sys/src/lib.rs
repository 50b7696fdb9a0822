//! colosched-sys: Linux plumbing the colosched agents share (the node agent, the host agent, the
//! memory-threshold watcher, the migration executor), none of it about one agent's job:
//!
//! - `procfs`: the one reader of /proc (`Procfs`, rooted at a path), for both agents and QEMU
//!   discovery (processes, threads, IRQ affinities); the text is parsed by
//!   `colosched_core::proctext`;
//! - `cgroupfs`: the one reader of cgroup files (`Cgroupfs`, rooted at a path): a group's
//!   threads, CPUs, controllers and child groups, and where a controller's file is;
//! - `sysfs`: the one reader of /sys (`Sysfs`, rooted at a path): the online CPUs, the NUMA
//!   nodes' CPUs, a CPU's cpufreq and capacity files, a hybrid CPU's core lists, the unbound
//!   workqueues, a network device's counters;
//! - `kept`: one small /proc or /sys file read again and again with one `pread` (`KeptFile`);
//! - `sched`: a thread's affinity, from `sched_getaffinity`;
//! - `error`: the readers' error, naming the file;
//! - `signals`: SIGTERM, SIGINT and SIGHUP caught for a loop that sleeps, which wakes at once;
//! - `poll`: poll(2) with a `Duration` timeout, EINTR read as "none ready";
//! - `fs`: a path's filesystem type (`statfs(2)`) and the kernel filesystems' magic numbers;
//! - `agent_error`: the agents' one error type, by what the caller does about it (usage: exit 2);
//! - `lock`: one agent per state file (`StateLock`) and `restore`'s frame (`under_lock`);
//! - `metrics`: the `/metrics` endpoint (`serve`) and its address (`parse_listen`);
//! - `config`: a TOML file into a `serde` type, errors with their line and column (both agents'
//!   configs and the simulators' scenarios are read so); the value checks the agents share; and
//!   `config::line`, the line of a key in the text, for an error about its value.
//!
//! It depends on no colosched crate but core.

pub mod agent_error;
pub mod block;
pub mod cgroupfs;
pub mod config;
pub mod error;
pub mod fs;
pub mod kept;
pub mod lock;
pub mod memory;
pub mod metrics;
pub mod poll;
pub mod polled;
pub mod procfs;
pub mod psi;
pub mod sched;
pub mod signals;
pub mod sysfs;

pub use cgroupfs::Cgroupfs;
pub use error::Error;
pub use poll::poll;
pub use procfs::Procfs;
pub use sysfs::Sysfs;

/// Wall-clock time as Unix seconds, for log lines and events (0 if the clock is before 1970).
pub fn now_unix() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
