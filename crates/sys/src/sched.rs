//! What the scheduler says of a thread through system calls rather than files.

use std::io;

use colosched_core::cpuset::CpuSet;
use rustix::thread::CpuSet as KernelCpuSet;

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
