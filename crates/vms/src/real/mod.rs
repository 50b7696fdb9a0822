//! Readers of SSD-cache statistics on real hypervisors.

pub mod dmcache;
