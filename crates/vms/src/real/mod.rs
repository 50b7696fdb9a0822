//! Readers of SSD-cache statistics on real hypervisors.

pub mod bcache;
pub mod dmcache;
