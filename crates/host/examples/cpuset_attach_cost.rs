//! What moving a vCPU thread between cpusets costs: the price of one rotation move
//! (docs/host-placement.md, the choice of the cycle).
//!
//! Needs root, cgroup v1 cpuset at /sys/fs/cgroup/cpuset and CPUs 0 and 1. It makes two pools
//! of its own (CPU 0, CPU 1) and moves one of its own threads between them with
//! `act::cpuset::attach`, back and forth:
//! 1. the write's wall time for a sleeping thread (only its mask changes) and for a spinning
//!    one (the kernel migrates it before the write returns);
//! 2. what moves cost the moved thread: a thread that walks a 256 KiB buffer (its cache
//!    footprint) is moved every 10 ms, every 100 ms or never, in interleaved 1 s slots; its
//!    walks per second are compared with never.
//!
//! `cargo run --release -p colosched-host --example cpuset_attach_cost [moves]`
//!
//! Wall clock on a shared machine: read the ratios, not the digits.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use colosched_core::cpuset::set;
use colosched_host::act::cpuset::{attach, CpusetPool};

const ROOT: &str = "/sys/fs/cgroup/cpuset";

/// A thread of this process: parked (sleeps) or walking a buffer, counting walks.
struct Worker {
    tid: i32,
    stop: Arc<AtomicBool>,
    walks: Arc<AtomicU64>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Worker {
    fn start(walk: bool) -> Worker {
        let stop = Arc::new(AtomicBool::new(false));
        let walks = Arc::new(AtomicU64::new(0));
        let (tx, rx) = std::sync::mpsc::channel();
        let (s, w) = (stop.clone(), walks.clone());
        let handle = std::thread::spawn(move || {
            tx.send(rustix::thread::gettid().as_raw_pid()).unwrap();
            let mut buf = vec![1u64; 256 * 1024 / 8];
            while !s.load(Ordering::Relaxed) {
                if walk {
                    // One read and write per cache line.
                    for i in (0..buf.len()).step_by(8) {
                        buf[i] = buf[i].wrapping_mul(3).wrapping_add(1);
                    }
                    w.fetch_add(1, Ordering::Relaxed);
                } else {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            std::hint::black_box(&buf);
        });
        Worker {
            tid: rx.recv().unwrap(),
            stop,
            walks,
            handle: Some(handle),
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            h.join().unwrap();
        }
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Moves `tid` between the two pools `n` times; the write's wall time of each, µs.
fn time_moves(pools: &[CpusetPool; 2], tid: i32, n: usize) -> Vec<f64> {
    let mut out: Vec<f64> = (0..n)
        .map(|i| {
            let t = Instant::now();
            pools[i % 2].attach(tid).expect("attach");
            let us = t.elapsed().as_secs_f64() * 1e6;
            std::thread::sleep(Duration::from_micros(200));
            us
        })
        .collect();
    out.sort_by(|a, b| a.partial_cmp(b).unwrap());
    out
}

/// Walks per second of `w` over 1 s, moving it every `every` (never if `None`).
fn walks_per_s(pools: &[CpusetPool; 2], w: &Worker, every: Option<Duration>) -> f64 {
    let start = Instant::now();
    let before = w.walks.load(Ordering::Relaxed);
    let mut n = 0;
    while start.elapsed() < Duration::from_secs(1) {
        let step = every.unwrap_or(Duration::from_millis(100));
        std::thread::sleep(step);
        if every.is_some() {
            n += 1;
            pools[n % 2].attach(w.tid).expect("attach");
        }
    }
    (w.walks.load(Ordering::Relaxed) - before) as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let moves: usize = std::env::args()
        .nth(1)
        .map_or(2000, |a| a.parse().expect("moves: a number"));
    let root = Path::new(ROOT);
    if !rustix::process::geteuid().is_root() || !root.join("tasks").exists() {
        eprintln!("cpuset_attach_cost: needs root and cgroup v1 cpuset at {ROOT}");
        std::process::exit(2);
    }
    let me = std::process::id();
    let pools = [
        CpusetPool::create(root, &format!("colosched-cost-{me}-0"), &set("0")).expect("pool 0"),
        CpusetPool::create(root, &format!("colosched-cost-{me}-1"), &set("1")).expect("pool 1"),
    ];
    let parked = Worker::start(false);
    let walker = Worker::start(true);

    println!("{moves} moves between a pool of CPU 0 and a pool of CPU 1 (write of the tid to `tasks`):\n");
    println!("| thread | median µs | p90 µs | p99 µs | best µs |");
    println!("|---|---|---|---|---|");
    for (name, tid) in [
        ("sleeping", parked.tid),
        ("running (256 KiB walk)", walker.tid),
    ] {
        let t = time_moves(&pools, tid, moves);
        println!(
            "| {name} | {:.1} | {:.1} | {:.1} | {:.1} |",
            percentile(&t, 0.5),
            percentile(&t, 0.9),
            percentile(&t, 0.99),
            t[0]
        );
    }

    println!("\nThe moved thread's walks per second, 1 s slots interleaved, 5 rounds:\n");
    let kinds = [
        ("never moved", None),
        ("moved every 100 ms", Some(Duration::from_millis(100))),
        ("moved every 10 ms", Some(Duration::from_millis(10))),
    ];
    let mut rates = vec![Vec::new(); kinds.len()];
    for _ in 0..5 {
        for (k, (_, every)) in kinds.iter().enumerate() {
            rates[k].push(walks_per_s(&pools, &walker, *every));
        }
    }
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    };
    let base = median(&rates[0]);
    println!("| | walks/s, median of 5 | vs never |");
    println!("|---|---|---|");
    for (k, (name, _)) in kinds.iter().enumerate() {
        let m = median(&rates[k]);
        println!("| {name} | {m:.0} | {:.3} |", m / base);
    }

    for tid in [parked.tid, walker.tid] {
        attach(root, tid).expect("back to the root cpuset");
    }
    drop((parked, walker));
    for p in pools {
        p.remove().expect("remove pool");
    }
}
