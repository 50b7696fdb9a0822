//! The few system calls the watcher makes (eventfd, the clock), each wrapped once, through
//! rustix; poll, statfs and the reading of cgroup files are colosched-sys's.

use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::event::EventfdFlags;

pub use colosched_sys::fs::{fs_type, CGROUP2_SUPER_MAGIC, CGROUP_SUPER_MAGIC};
pub use colosched_sys::poll;

use crate::WatchError;

/// A non-blocking, close-on-exec eventfd.
pub fn eventfd() -> io::Result<OwnedFd> {
    Ok(rustix::event::eventfd(
        0,
        EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK,
    )?)
}

/// Adds 1 to an eventfd's counter (wakes its pollers).
pub fn eventfd_signal(fd: &OwnedFd) {
    let _ = rustix::io::write(fd, &1u64.to_ne_bytes());
}

/// Reads and resets an eventfd's counter; 0 if it was not signalled.
pub fn eventfd_drain(fd: &OwnedFd) -> u64 {
    let mut v = [0u8; 8];
    match rustix::io::read(fd, &mut v) {
        Ok(8) => u64::from_ne_bytes(v),
        _ => 0,
    }
}

/// CLOCK_MONOTONIC in nanoseconds (the clock of Python's `time.monotonic_ns`).
pub fn monotonic_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Refuses a directory that is not on a cgroup filesystem (v1 or v2): a copy of a cgroup's files
/// elsewhere would take the registrations and never signal, so the watch would wait forever.
pub fn check_cgroup_fs(dir: &Path) -> Result<(), WatchError> {
    let bad = |msg: String| WatchError::flag("--cgroup", dir.display(), msg);
    let t = fs_type(dir).map_err(|e| bad(format!("statfs: {e}")))?;
    if t == CGROUP_SUPER_MAGIC || t == CGROUP2_SUPER_MAGIC {
        return Ok(());
    }
    Err(bad(format!(
        "not on a cgroup filesystem (statfs type {t:#x}, neither cgroup v1 {:#x} \
         nor cgroup2 {:#x}): give a directory under a cgroup mount such as /sys/fs/cgroup",
        CGROUP_SUPER_MAGIC, CGROUP2_SUPER_MAGIC
    )))
}
