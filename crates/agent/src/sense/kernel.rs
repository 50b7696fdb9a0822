//! What the kernel says through system calls rather than files: a thread's affinity, the clock
//! ticks of /proc, the boot clock.

use std::io;

use rustix::thread::CpuSet as KernelCpuSet;

use crate::cpuset::CpuSet;

/// The affinity of thread `tid` (`sched_getaffinity`: online CPUs only).
pub fn get_affinity(tid: i32) -> io::Result<CpuSet> {
    let set = rustix::thread::sched_getaffinity(pid_of(tid)?)?;
    // Up to the last CPU set, not all 1,024 (testing every bit was 5 % of a move's CPU).
    let n = set.count() as usize;
    Ok((0..KernelCpuSet::MAX_CPU)
        .filter(|&c| set.is_set(c))
        .take(n)
        .collect())
}

/// A thread id as the kernel takes it (ESRCH for one that cannot be a thread).
pub fn pid_of(tid: i32) -> io::Result<Option<rustix::process::Pid>> {
    match rustix::process::Pid::from_raw(tid) {
        Some(p) => Ok(Some(p)),
        None => Err(rustix::io::Errno::SRCH.into()),
    }
}

/// USER_HZ: the unit of /proc/stat and of utime/stime.
pub fn clock_ticks() -> f64 {
    rustix::param::clock_ticks_per_second() as f64
}

/// Clock ticks after boot now: the clock of /proc's `starttime` (CLOCK_BOOTTIME).
pub fn boot_ticks(hz: f64) -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    ((t.tv_sec as f64 + t.tv_nsec as f64 / 1e9) * hz) as u64
}
