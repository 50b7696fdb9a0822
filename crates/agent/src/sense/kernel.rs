//! What the kernel says through system calls rather than files: a thread's affinity, the clock
//! ticks of /proc, the boot clock.

pub use colosched_sys::sched::{get_affinity, pid_of};

/// USER_HZ: the unit of /proc/stat and of utime/stime.
pub fn clock_ticks() -> f64 {
    rustix::param::clock_ticks_per_second() as f64
}

/// Clock ticks after boot now: the clock of /proc's `starttime` (CLOCK_BOOTTIME).
pub fn boot_ticks(hz: f64) -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    ((t.tv_sec as f64 + t.tv_nsec as f64 / 1e9) * hz) as u64
}
