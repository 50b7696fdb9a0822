//! The few system calls the watcher makes (eventfd, poll, pread, statfs), each wrapped once,
//! through rustix.

use std::fs::File;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Duration;

use rustix::event::{EventfdFlags, PollFd, PollFlags, Timespec};
use rustix::io::Errno;

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

/// poll(2) on `(fd, events)`; returns each fd's `revents` (empty: not ready). EINTR counts as
/// "none ready".
pub fn poll(
    fds: &[(BorrowedFd, PollFlags)],
    timeout: Option<Duration>,
) -> Result<Vec<PollFlags>, String> {
    let mut p: Vec<PollFd> = fds.iter().map(|(fd, ev)| PollFd::new(fd, *ev)).collect();
    // Round up to whole milliseconds, as poll(2) would, so a 0.4 ms wait is not a busy loop.
    let ts = timeout.map(|t| {
        let ms = t.as_micros().div_ceil(1000).min(i32::MAX as u128) as i64;
        Timespec {
            tv_sec: ms / 1000,
            tv_nsec: (ms % 1000) * 1_000_000,
        }
    });
    match rustix::event::poll(&mut p, ts.as_ref()) {
        Ok(_) => Ok(p.iter().map(PollFd::revents).collect()),
        Err(Errno::INTR) => Ok(vec![PollFlags::empty(); fds.len()]),
        Err(e) => Err(format!("poll: {e}")),
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

/// `statfs(2)` f_type of cgroup v1 and cgroup v2 (include/uapi/linux/magic.h).
pub const CGROUP_SUPER_MAGIC: i64 = 0x0027_e0eb;
pub const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;

/// The filesystem type (`statfs(2)` f_type) of `path`.
pub fn fs_type(path: &Path) -> std::io::Result<i64> {
    Ok(rustix::fs::statfs(path)?.f_type as i64)
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
