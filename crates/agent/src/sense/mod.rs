//! Sense: every reader of the system, rooted at the configured /proc, /sys and cgroup paths so a
//! test can fake any of them. Readers change nothing.

pub mod cgroup;
pub mod kernel;
pub mod kubernetes;
pub mod procfs;
pub mod select;
pub mod sensor;
pub mod system;
pub mod topology;
