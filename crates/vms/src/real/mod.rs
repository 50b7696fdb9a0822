//! Readers of SSD-cache statistics on real hypervisors.
