//! A thread's EEVDF slice, read and set with `sched_getattr(2)` / `sched_setattr(2)`: since Linux
//! 6.12 a fair-class task's `sched_runtime` is its slice request (the kernel clamps it to
//! 0.1–100 ms; 0 asks for the default, `sysctl_sched_base_slice`). Neither rustix nor nix wraps
//! these two calls, so they go through `libc::syscall`.
//!
//! Only the slice changes: the thread's policy (`SCHED_OTHER` or `SCHED_BATCH`), nice value and
//! reset-on-fork flag are read first and written back as they were. A thread of another class
//! (real-time, deadline, `SCHED_IDLE`) is refused: its slice means something else, or nothing.

use std::io;

const SCHED_OTHER: u32 = 0;
const SCHED_BATCH: u32 = 3;
const SCHED_FLAG_RESET_ON_FORK: u64 = 0x01;
/// The kernel's clamp on a fair task's slice request (`sched_runtime`), in ns.
pub const MIN_SLICE_NS: u64 = 100_000;
pub const MAX_SLICE_NS: u64 = 100_000_000;

/// `struct sched_attr` as of Linux 5.3 (size 56, `SCHED_ATTR_SIZE_VER1`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct SchedAttr {
    size: u32,
    sched_policy: u32,
    sched_flags: u64,
    sched_nice: i32,
    sched_priority: u32,
    sched_runtime: u64,
    sched_deadline: u64,
    sched_period: u64,
    sched_util_min: u32,
    sched_util_max: u32,
}

fn get_attr(tid: i32) -> io::Result<SchedAttr> {
    let mut attr = SchedAttr::default();
    let size = std::mem::size_of::<SchedAttr>() as libc::c_uint;
    // SAFETY: `attr` is a valid, writable `sched_attr` of `size` bytes for the call's duration.
    let rc = unsafe { libc::syscall(libc::SYS_sched_getattr, tid, &mut attr, size, 0) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(attr)
}

/// The slice thread `tid` asked for, in ns (`sched_runtime`; the kernel reports the default
/// slice for a thread that asked for none).
pub fn slice_ns(tid: i32) -> io::Result<u64> {
    Ok(get_attr(tid)?.sched_runtime)
}

/// Asks for a slice of `ns` for thread `tid` (0: the default), keeping its policy, nice value
/// and reset-on-fork flag. Errors: the thread is gone (ESRCH), not ours to change (EPERM), or
/// not in the fair class (`InvalidInput`, nothing changed).
pub fn set_slice_ns(tid: i32, ns: u64) -> io::Result<()> {
    let now = get_attr(tid)?;
    if now.sched_policy != SCHED_OTHER && now.sched_policy != SCHED_BATCH {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "thread {tid} has scheduling policy {}, not SCHED_OTHER or SCHED_BATCH",
                now.sched_policy
            ),
        ));
    }
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        sched_policy: now.sched_policy,
        sched_flags: now.sched_flags & SCHED_FLAG_RESET_ON_FORK,
        sched_nice: now.sched_nice,
        sched_runtime: ns,
        ..SchedAttr::default()
    };
    // SAFETY: `attr` is a valid `sched_attr` whose `size` field says how many bytes to read.
    let rc = unsafe { libc::syscall(libc::SYS_sched_setattr, tid, &attr, 0) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::act::Parked;

    /// Runs `f` with the tid of a fresh thread that sleeps until `f` returns.
    fn with_thread<T>(f: impl FnOnce(i32) -> T) -> T {
        let parked = Parked::new(None);
        f(parked.tid)
    }

    #[test]
    fn the_kernel_takes_a_slice_and_clamps_it() {
        // Real sched_setattr on this machine's kernel (6.18, EEVDF): a thread's slice request
        // reads back as set, clamped to 0.1–100 ms, and 0 gives the default back.
        with_thread(|tid| {
            let default = slice_ns(tid).unwrap();
            assert!(
                (MIN_SLICE_NS..=MAX_SLICE_NS).contains(&default),
                "default slice {default} ns"
            );
            for (asked, got) in [
                (500_000, 500_000),
                (10_000, MIN_SLICE_NS),
                (250_000_000, MAX_SLICE_NS),
            ] {
                set_slice_ns(tid, asked).unwrap();
                assert_eq!(slice_ns(tid).unwrap(), got, "asked {asked} ns");
            }
            set_slice_ns(tid, 0).unwrap();
            assert_eq!(slice_ns(tid).unwrap(), default);
        });
    }

    #[test]
    fn nice_and_policy_are_kept() {
        with_thread(|tid| {
            // SAFETY: plain setpriority on a thread id of this process.
            let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 5) };
            assert_eq!(rc, 0, "{}", io::Error::last_os_error());
            set_slice_ns(tid, 2_000_000).unwrap();
            let attr = get_attr(tid).unwrap();
            assert_eq!(
                (attr.sched_policy, attr.sched_nice, attr.sched_runtime),
                (SCHED_OTHER, 5, 2_000_000)
            );
        });
    }

    #[test]
    fn a_thread_of_another_class_or_a_gone_one_is_refused() {
        with_thread(|tid| {
            let idle = SchedAttr {
                size: std::mem::size_of::<SchedAttr>() as u32,
                sched_policy: libc::SCHED_IDLE as u32,
                ..SchedAttr::default()
            };
            // SAFETY: as in set_slice_ns.
            let rc = unsafe { libc::syscall(libc::SYS_sched_setattr, tid, &idle, 0) };
            assert_eq!(rc, 0, "{}", io::Error::last_os_error());
            let err = set_slice_ns(tid, 1_000_000).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{err}");
            assert_eq!(get_attr(tid).unwrap().sched_policy, libc::SCHED_IDLE as u32);
        });
        // A pid past pid_max names no thread.
        let err = set_slice_ns(i32::MAX, 1_000_000).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ESRCH));
    }
}
