//! A Rust caller of `MemoryThresholdWatcher`, for bench/memwatch_perf.py: watches one threshold
//! and, for each event, prints `direction wake_ns returned_ns usage` (CLOCK_MONOTONIC): when the
//! watcher woke, and when `wait` handed the event to this caller — the moment a Rust callback
//! would run.
//!
//!     memwatch_latency CGROUP THRESHOLD
use std::io::Write;

use colosched_memwatch::{MemoryThresholdWatcher, Threshold, WatchOptions};

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, cgroup, threshold] = &args[..] else {
        eprintln!("usage: memwatch_latency CGROUP THRESHOLD");
        std::process::exit(2);
    };
    let opts = WatchOptions {
        thresholds: vec![Threshold::parse(threshold).unwrap_or_else(|e| panic!("{e}"))],
        ..WatchOptions::default()
    };
    let mut w =
        MemoryThresholdWatcher::open(cgroup.as_ref(), &opts).unwrap_or_else(|e| panic!("{e}"));
    println!("ready");
    let mut out = std::io::stdout().lock();
    while !w.finished() {
        let events = w.wait(None).unwrap_or_else(|e| panic!("{e}"));
        let returned = monotonic_ns();
        for e in events {
            let usage = e.usage.unwrap_or(0);
            let _ = writeln!(
                out,
                "{} {} {returned} {usage}",
                e.direction.name(),
                e.monotonic_ns
            );
        }
        let _ = out.flush();
    }
}
