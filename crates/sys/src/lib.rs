//! colosched-sys: Linux plumbing the colosched agents share (the node agent, the host agent, the
//! memory-threshold watcher, the migration executor), none of it about one agent's job:
//!
//! - `signals`: SIGTERM, SIGINT and SIGHUP caught for a loop that sleeps, which wakes at once;
//! - `poll`: poll(2) with a `Duration` timeout, EINTR read as "none ready";
//! - `fs`: a path's filesystem type (`statfs(2)`) and the kernel filesystems' magic numbers;
//! - `config`: a TOML file into a `serde` type, errors with their line and column.

pub mod config;
pub mod fs;
pub mod poll;
pub mod signals;

pub use poll::poll;
