//! colosched-sys: Linux plumbing the colosched agents share (the node agent, the host agent, the
//! memory-threshold watcher, the migration executor), none of it about one agent's job:
//!
//! - `signals`: SIGTERM, SIGINT and SIGHUP caught for a loop that sleeps, which wakes at once;
//! - `poll`: poll(2) with a `Duration` timeout, EINTR read as "none ready";
//! - `fs`: a path's filesystem type (`statfs(2)`) and the kernel filesystems' magic numbers;
//! - `lock`: one agent per state file (`StateLock`) and `restore`'s frame (`under_lock`);
//! - `metrics`: the `/metrics` endpoint (`serve`) and its address (`parse_listen`);
//! - `config`: a TOML config walked key by key, every error naming its key (`Section`).

pub mod config;
pub mod fs;
pub mod lock;
pub mod metrics;
pub mod poll;
pub mod signals;

pub use poll::poll;

/// Wall-clock time as Unix seconds, for log lines and events (0 if the clock is before 1970).
pub fn now_unix() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
