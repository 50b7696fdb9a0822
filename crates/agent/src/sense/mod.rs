//! Sense: every reader of the system, rooted at the configured /proc, /sys and cgroup paths so a
//! test can fake any of them. Readers change nothing. The files of /proc and of the cgroups are
//! read by `colosched_sys::{Procfs, Cgroupfs}`, shared with the host agent.

pub mod kernel;
pub mod kubernetes;
pub mod select;
pub mod sensor;
pub mod system;
pub mod topology;
