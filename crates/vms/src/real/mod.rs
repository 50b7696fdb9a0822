//! Real hypervisors: readers of SSD-cache statistics, and the live-migration executor (`migrate`).

pub mod bcache;
pub mod dmcache;
pub mod migrate;
