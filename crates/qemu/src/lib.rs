//! colosched-qemu: what it takes to find and talk to QEMU, for the host agent (`colosched-host`,
//! `colosched-agent`) and the live-migration executor (`colosched-vms`). It decides nothing and
//! writes nothing to the system; every reader is rooted at a path or a socket, so tests run it
//! against fake trees and recorded replies as well as against a real QEMU.
//!
//! - `discover`: the QEMU processes under a procfs root, their vCPU threads, taps, QMP socket
//!   and name;
//! - `opts`: QEMU's comma-separated option strings (`a,key=value,…`, `,,` for a comma);
//! - `qmp`: a minimal blocking QMP client with timeouts (`Qmp`) and the `Monitor` trait the
//!   questions are written on;
//! - `libvirt`: libvirt's domains, their taps and their monitors, asked through one `virsh`
//!   session (`Virsh`, `DomainMonitor`, a `Monitor`).
//!
//! With the `testing` feature, `testing` starts a real stopped QEMU and a fake QMP server for
//! the tests of the crates that use this one.

pub mod discover;
pub mod libvirt;
pub mod opts;
pub mod qmp;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use discover::{discover, Accel, Vcpu, Vm, VmFilter};
pub use libvirt::{DomainMonitor, SharedVirsh, Virsh, VirshError};
pub use qmp::{Monitor, Qmp, QmpError, QmpErrorKind};
