//! The real host agent's readers: what runs on a Linux/QEMU host and what it does. Only
//! readers live here — nothing writes to the system — and every one is rooted at a path (or a
//! socket), so tests run them against fake trees and recorded replies as well as for real.
//! Finding QEMU and talking to it (discovery, QMP, libvirt) is `colosched-qemu`'s.
//!
//! - `classes`: the host's core classes (spec 001), from a file or the CPUs' frequencies;
//! - `sense`: each VM's tap counters (every 10 ms) and vCPU schedstat (every window), read
//!   cheaply, and the deltas between two readings (mapped to spec 002's ring samples by
//!   `decide::tap`);
//! - `rings`: the virtio-net RX rings read through a VM's monitor (`RxRings`).

pub mod classes;
pub mod rings;
pub mod sense;

pub use rings::RxRings;
pub use sense::{cpu_delta, net_delta, CpuDelta, CpuReading, NetDelta, NetReading, VmSensor};
