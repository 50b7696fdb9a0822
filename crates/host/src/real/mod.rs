//! The real host agent's readers: what runs on a Linux/QEMU host and what it does. Only
//! readers live here — nothing writes to the system — and every one is rooted at a path (or a
//! socket), so tests run them against fake trees and recorded replies as well as for real.
//!
//! - `discover`: the QEMU processes under a procfs root, their vCPU threads, taps, QMP socket
//!   and name;
//! - `sense`: each VM's tap counters (every 10 ms) and vCPU schedstat (every window), read
//!   cheaply, and the deltas between two readings (mapped to spec 002's ring samples by
//!   `decide::tap`);
//! - `qmp`: a minimal blocking QMP client with timeouts, and the virtio-net RX rings read
//!   through it (`RxRings`);
//! - `libvirt`: libvirt's domains, their taps and their monitors, asked through one `virsh`
//!   session (`Virsh`, `DomainMonitor`).

pub mod classes;
pub mod discover;
pub mod libvirt;
pub mod qmp;
pub mod sense;
#[cfg(test)]
mod testqemu;

pub use discover::{discover, Accel, Vcpu, Vm, VmFilter};
pub use libvirt::{DomainMonitor, SharedVirsh, Virsh};
pub use qmp::{Monitor, Qmp, QmpError, RxRings};
pub use sense::{cpu_delta, net_delta, CpuDelta, CpuReading, NetDelta, NetReading, VmSensor};
