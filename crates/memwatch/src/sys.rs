//! The few system calls the watcher makes (eventfd, poll, pread, statfs), each wrapped once.

use std::ffi::CString;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Duration;

/// A non-blocking, close-on-exec eventfd.
pub fn eventfd() -> Result<OwnedFd, String> {
    // SAFETY: eventfd has no pointer arguments; a valid return is a new fd we own.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(format!(
            "eventfd: {}",
            explain(&std::io::Error::last_os_error())
        ));
    }
    // SAFETY: fd is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// An error, with what to do about the ones a big watch runs into.
pub fn explain(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EMFILE) => format!(
            "{e} (the open-file limit, `ulimit -n` = {}, is too low: each threshold needs one fd)",
            nofile_limit()
        ),
        Some(libc::ENOMEM) => format!("{e} (the kernel could not allocate the registration)"),
        _ => e.to_string(),
    }
}

fn nofile_limit() -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: r is a valid out-pointer.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) };
    r.rlim_cur
}

/// Adds 1 to an eventfd's counter (wakes its pollers).
pub fn eventfd_signal(fd: &OwnedFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live u64.
    unsafe { libc::write(fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
}

/// Reads and resets an eventfd's counter; 0 if it was not signalled.
pub fn eventfd_drain(fd: &OwnedFd) -> u64 {
    let mut v: u64 = 0;
    // SAFETY: reads 8 bytes into a live u64; the fd is non-blocking.
    let n = unsafe { libc::read(fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
    if n == 8 {
        v
    } else {
        0
    }
}

/// poll(2) on `(fd, events)`; returns each fd's `revents` (0: not ready). EINTR counts as "none
/// ready".
pub fn poll(fds: &[(i32, i16)], timeout: Option<Duration>) -> Result<Vec<i16>, String> {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|&(fd, events)| libc::pollfd {
            fd,
            events,
            revents: 0,
        })
        .collect();
    // Round up so a 0.4 ms wait does not become a busy 0 ms loop.
    let ms = timeout.map_or(-1, |t| {
        t.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32
    });
    // SAFETY: p is a live array of p.len() pollfds.
    let n = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, ms) };
    if n < 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EINTR) {
            return Ok(vec![0; fds.len()]);
        }
        return Err(format!("poll: {e}"));
    }
    Ok(p.iter().map(|x| x.revents).collect())
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
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// `statfs(2)` f_type of cgroup v1 and cgroup v2 (include/uapi/linux/magic.h).
pub const CGROUP_SUPER_MAGIC: i64 = 0x0027_e0eb;
pub const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;

/// The filesystem type (`statfs(2)` f_type) of `path`.
pub fn fs_type(path: &Path) -> std::io::Result<i64> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: zeroed statfs is a valid out-buffer; c is a NUL-terminated path.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut s) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(s.f_type as i64)
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
