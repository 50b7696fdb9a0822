//! The few system calls the watcher makes (eventfd, pread, the clock), each wrapped once,
//! through rustix; poll and statfs are colosched-sys's.

use std::fs::File;
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileExt;
use std::path::Path;

use rustix::event::EventfdFlags;
use rustix::io::Errno;

pub use colosched_sys::fs::{fs_type, CGROUP2_SUPER_MAGIC, CGROUP_SUPER_MAGIC};
pub use colosched_sys::poll;

/// A non-blocking, close-on-exec eventfd.
pub fn eventfd() -> Result<OwnedFd, String> {
    rustix::event::eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)
        .map_err(|e| format!("eventfd: {}", explain(&e.into())))
}

/// An error, with what to do about the ones a big watch runs into.
pub fn explain(e: &std::io::Error) -> String {
    match e.raw_os_error().map(Errno::from_raw_os_error) {
        Some(Errno::MFILE) => format!(
            "{e} (the open-file limit, `ulimit -n` = {}, is too low: each threshold needs one fd)",
            nofile_limit()
        ),
        Some(Errno::NOMEM) => format!("{e} (the kernel could not allocate the registration)"),
        _ => e.to_string(),
    }
}

fn nofile_limit() -> u64 {
    rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(u64::MAX)
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

/// The number at the start of a one-number file (memory.current, memory.usage_in_bytes), read
/// with pread so one open fd serves every read. None once the group is gone (ENODEV).
pub fn pread_u64(f: &File) -> Option<u64> {
    let mut buf = [0u8; 32];
    let n = f.read_at(&mut buf, 0).ok()?;
    std::str::from_utf8(&buf[..n]).ok()?.trim().parse().ok()
}

/// CLOCK_MONOTONIC in nanoseconds (the clock of Python's `time.monotonic_ns`).
pub fn monotonic_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Refuses a directory that is not on a cgroup filesystem (v1 or v2): a copy of a cgroup's files
/// elsewhere would take the registrations and never signal, so the watch would wait forever.
pub fn check_cgroup_fs(dir: &Path) -> Result<(), String> {
    let t = fs_type(dir).map_err(|e| format!("--cgroup {}: statfs: {e}", dir.display()))?;
    if t == CGROUP_SUPER_MAGIC || t == CGROUP2_SUPER_MAGIC {
        return Ok(());
    }
    Err(format!(
        "--cgroup {}: not on a cgroup filesystem (statfs type {t:#x}, neither cgroup v1 {:#x} \
         nor cgroup2 {:#x}): give a directory under a cgroup mount such as /sys/fs/cgroup",
        dir.display(),
        CGROUP_SUPER_MAGIC,
        CGROUP2_SUPER_MAGIC
    ))
}
