//! What the real host agent's sensors cost for N VMs (issue 15: 64 VMs at ≤ 5 % of one CPU),
//! and what a QMP round trip costs.
//!
//! Needs root. It moves itself into a network and mount namespace of its own, mounts sysfs
//! there and makes N taps in it (they vanish with the process), and spawns 2 threads per VM
//! to stand for its vCPUs. A VM is then one tap and two threads, read as the daemon will read
//! them (files kept open): `read_net` (2 tap counters) + `net_delta` + `ring_sample` every
//! 10 ms, `read_cpu` (2 schedstat files) + `cpu_delta` once per 100 ms window; and, for
//! comparison, `tap_totals` (4 counters) and the same 6 files read by path each time
//! (`fs::read_to_string`). Then the same paced at 10 ms for 5 s, measured as the process's CPU
//! time. With QEMU installed it also times QMP `query-status` and `x-query-virtio-queue-status`
//! against a stopped QEMU.
//!
//! `cargo run --release -p colosched-host --example host_sense_cost [samples]`
//!
//! Wall clock on a shared machine: read the ratios and the best figures, not the digits.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use colosched_host::decide::tap::ring_sample;
use colosched_host::real::sense::{cpu_delta, net_delta, CpuReading, NetReading, VmSensor};
use colosched_qemu::{Accel, Monitor, Qmp, Vcpu, Vm};
use rustix::thread::UnshareFlags;

const PERIOD_NS: u64 = 10_000_000;

fn main() {
    let samples: usize = std::env::args()
        .nth(1)
        .map_or(2000, |a| a.parse().expect("samples: a number"));
    if !rustix::process::geteuid().is_root() {
        eprintln!("host_sense_cost: needs root (network namespace, taps)");
        std::process::exit(2);
    }
    // Before any thread exists: our own network and mount namespaces, sysfs for the former.
    // SAFETY: the hazard is `UnshareFlags::FILES` (descriptors of other threads); not asked.
    unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWNET | UnshareFlags::NEWNS) }
        .expect("unshare net+mount");
    rustix::mount::mount_change(
        "/",
        rustix::mount::MountPropagationFlags::PRIVATE | rustix::mount::MountPropagationFlags::REC,
    )
    .expect("make mounts private");
    rustix::mount::mount(
        "sysfs",
        "/sys",
        "sysfs",
        rustix::mount::MountFlags::empty(),
        None,
    )
    .expect("mount sysfs");

    let max_vms = 128;
    let batch: String = (0..max_vms)
        .map(|i| format!("tuntap add dev st{i} mode tap\n"))
        .collect();
    let mut ip = Command::new("ip")
        .args(["-batch", "-"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("ip");
    use std::io::Write;
    ip.stdin
        .take()
        .unwrap()
        .write_all(batch.as_bytes())
        .unwrap();
    assert!(ip.wait().unwrap().success(), "ip tuntap add failed");

    // Two parked threads per VM stand for its vCPUs.
    let me = std::process::id() as i32;
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let stop_rx = std::sync::Arc::new(std::sync::Mutex::new(stop_rx));
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let threads: Vec<_> = (0..2 * max_vms)
        .map(|_| {
            let tid_tx = tid_tx.clone();
            let stop_rx = stop_rx.clone();
            std::thread::spawn(move || {
                tid_tx.send(rustix::thread::gettid().as_raw_pid()).unwrap();
                let _ = stop_rx.lock().unwrap().recv();
            })
        })
        .collect();
    let tids: Vec<i32> = (0..2 * max_vms).map(|_| tid_rx.recv().unwrap()).collect();
    let vms: Vec<Vm> = (0..max_vms)
        .map(|i| Vm {
            pid: me,
            name: format!("vm{i}"),
            vcpus: (0..2)
                .map(|k| Vcpu {
                    index: k,
                    tid: tids[2 * i + k as usize],
                    accel: Accel::Kvm,
                })
                .collect(),
            taps: vec![format!("st{i}")],
            qmp: None,
        })
        .collect();

    println!("{samples} samples back to back per row; µs per sample of N VMs (median, p99, best);");
    println!("% of one CPU if done every 10 ms (from the median).\n");
    println!("| VMs | reading | median µs | p99 µs | best µs | µs per VM | % of a CPU at 10 ms |");
    println!("|---|---|---|---|---|---|---|");
    for n in [1, 8, 16, 32, 64, 128] {
        let vms = &vms[..n];
        let mut sensors = sensors_for(vms);
        let mut net: Vec<NetReading> = sensors.iter_mut().map(|s| s.read_net()).collect();
        let mut cpu: Vec<CpuReading> = sensors.iter_mut().map(|s| s.read_cpu()).collect();
        assert!(
            net.iter().all(|r| r.taps.iter().all(|t| t.is_some()))
                && cpu.iter().all(|r| r.vcpus.iter().all(|v| v.is_some())),
            "every file readable"
        );
        let kept = sensors.iter().map(|s| s.open_files()).sum::<usize>();
        assert_eq!(kept, 4 * n, "files kept open");
        let mut sink = 0u64;
        let times = time_samples(samples, || sink += sample_net(&mut sensors, &mut net));
        row(n, "`read_net`: 2 tap counters", &times);
        let times = time_samples(samples, || sink += sample_cpu(&mut sensors, &mut cpu));
        row(n, "`read_cpu`: 2 schedstat", &times);
        let times = time_samples(samples, || {
            for s in sensors.iter_mut() {
                sink += s.tap_totals()[0].unwrap().tx_packets;
            }
        });
        row(n, "`tap_totals`: 4 tap counters", &times);
        let paths: Vec<PathBuf> =
            vms.iter()
                .flat_map(|vm| {
                    let stats = PathBuf::from(format!("/sys/class/net/{}/statistics", vm.taps[0]));
                    let tap = ["tx_packets", "tx_dropped", "rx_packets", "rx_dropped"]
                        .map(|c| stats.join(c));
                    let cpus = vm.vcpus.iter().map(|v| {
                        PathBuf::from(format!("/proc/{}/task/{}/schedstat", vm.pid, v.tid))
                    });
                    tap.into_iter().chain(cpus).collect::<Vec<_>>()
                })
                .collect();
        let times = time_samples(samples, || {
            for p in &paths {
                sink += std::fs::read_to_string(p).unwrap().len() as u64;
            }
        });
        row(n, "all 6 files by path", &times);
        std::hint::black_box(sink);
    }

    // Paced, as the daemon will run: 64 VMs, a tick every 10 ms for 5 s; the process's CPU.
    let n = 64;
    println!(
        "\nPaced: {n} VMs, one tick every 10 ms for 5 s; process CPU time (wake-ups included):\n"
    );
    println!("| every 10 ms | every 100 ms | % of one CPU | a tick's work, median µs | p90 µs |");
    println!("|---|---|---|---|---|");
    // (what every tick reads, what every 10th tick reads)
    for (fast, slow) in [
        ("nothing (the tick alone)", ""),
        ("`read_net`", "`read_cpu`"),
        ("`read_net` + `read_cpu`", ""),
        ("`tap_totals` + `read_cpu`", ""),
    ] {
        let mut sensors = sensors_for(&vms[..n]);
        let mut net: Vec<NetReading> = sensors.iter_mut().map(|s| s.read_net()).collect();
        let mut cpu: Vec<CpuReading> = sensors.iter_mut().map(|s| s.read_cpu()).collect();
        let cpu0 = process_cpu();
        let t0 = Instant::now();
        let mut next = t0;
        let mut tick = 0u64;
        let mut sink = 0u64;
        let mut work = Vec::new();
        while t0.elapsed() < Duration::from_secs(5) {
            let w0 = Instant::now();
            if fast.starts_with("`tap_totals`") {
                for s in sensors.iter_mut() {
                    sink += s.tap_totals()[0].unwrap().tx_dropped;
                }
            } else if fast.starts_with("`read_net`") {
                sink += sample_net(&mut sensors, &mut net);
            }
            if fast.ends_with("`read_cpu`") || (!slow.is_empty() && tick.is_multiple_of(10)) {
                sink += sample_cpu(&mut sensors, &mut cpu);
            }
            work.push(w0.elapsed());
            tick += 1;
            next += Duration::from_nanos(PERIOD_NS);
            if let Some(wait) = next.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
        let used = (process_cpu() - cpu0).as_secs_f64() / t0.elapsed().as_secs_f64();
        std::hint::black_box(sink);
        work.sort();
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        println!(
            "| {fast} | {slow} | {:.2} | {:.0} | {:.0} |",
            100.0 * used,
            us(work[work.len() / 2]),
            us(work[work.len() * 9 / 10])
        );
    }

    drop(stop_tx);
    for t in threads {
        t.join().unwrap();
    }
    qmp_round_trips();
}

fn sensors_for(vms: &[Vm]) -> Vec<VmSensor> {
    vms.iter()
        .map(|vm| VmSensor::new(Path::new("/proc"), Path::new("/sys"), vm))
        .collect()
}

/// One T_m sample of every VM: tap counters, their delta, the ring sample.
fn sample_net(sensors: &mut [VmSensor], prev: &mut [NetReading]) -> u64 {
    let mut sink = 0;
    for (s, p) in sensors.iter_mut().zip(prev.iter_mut()) {
        let cur = s.read_net();
        let d = net_delta(p, &cur);
        let r = ring_sample(&d.interval(None), PERIOD_NS, 256);
        sink += (r.tx_sq + r.rx_rq) as u64;
        *p = cur;
    }
    sink
}

/// One window's CPU reading of every VM and its load.
fn sample_cpu(sensors: &mut [VmSensor], prev: &mut [CpuReading]) -> u64 {
    let mut sink = 0.0;
    for (s, p) in sensors.iter_mut().zip(prev.iter_mut()) {
        let cur = s.read_cpu();
        sink += cpu_delta(p, &cur).load();
        *p = cur;
    }
    sink as u64
}

fn time_samples(n: usize, mut f: impl FnMut()) -> Vec<Duration> {
    for _ in 0..n / 10 {
        f(); // warm up
    }
    let mut v: Vec<Duration> = (0..n)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    v.sort();
    v
}

fn row(n: usize, reader: &str, sorted: &[Duration]) {
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let med = us(sorted[sorted.len() / 2]);
    let p99 = us(sorted[sorted.len() * 99 / 100]);
    println!(
        "| {n} | {reader} | {med:.1} | {p99:.1} | {:.1} | {:.2} | {:.2} |",
        us(sorted[0]),
        med / n as f64,
        med / (PERIOD_NS as f64 / 1e3) * 100.0
    );
}

/// Run time of every thread of `pid`, ns (schedstat).
fn task_run_ns(pid: i32) -> u64 {
    let dir = format!("/proc/{pid}/task");
    std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("schedstat")).ok())
        .filter_map(|t| t.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

fn process_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// QMP round trips against a stopped QEMU with a virtio-net device (no backend).
fn qmp_round_trips() {
    let qemu = "/usr/bin/qemu-system-x86_64";
    if !Path::new(qemu).exists() {
        println!("\nQMP: {qemu} not installed, not measured");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("q.sock");
    let mut child = Command::new(qemu)
        .args([
            "-machine",
            "q35,accel=tcg",
            "-S",
            "-nodefaults",
            "-display",
            "none",
            "-m",
            "64",
        ])
        .args(["-device", "virtio-net-pci,id=nic0", "-qmp"])
        .arg(format!("unix:{},server=on,wait=off", sock.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn qemu");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !sock.exists() {
        assert!(Instant::now() < deadline, "qemu made no QMP socket");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut q = Qmp::connect(&sock, Duration::from_secs(5)).expect("qmp");
    let path = q.query_virtio().unwrap()[0].path.clone();
    let n = 500;
    let qemu_pid = child.id() as i32;
    let mut calls: Vec<(&str, Vec<Duration>, f64, f64)> = Vec::new();
    for name in ["query-status", "x-query-virtio-queue-status"] {
        let (ours0, theirs0) = (process_cpu(), task_run_ns(qemu_pid));
        let t = time_samples(n, || {
            if name == "query-status" {
                q.query_status().unwrap();
            } else {
                q.virtio_queue_status(&path, 0).unwrap();
            }
        });
        let calls_made = (n + n / 10) as f64;
        let ours = (process_cpu() - ours0).as_secs_f64() * 1e6 / calls_made;
        let theirs = (task_run_ns(qemu_pid) - theirs0) as f64 / 1e3 / calls_made;
        calls.push((name, t, ours, theirs));
    }
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!("\nQMP, {n} calls each against a stopped QEMU: round trip (median / p99 / best, µs), CPU per call (ours + QEMU's, µs):");
    for (name, t, ours, theirs) in &calls {
        let med = us(t[t.len() / 2]);
        println!(
            "- {name}: {med:.0} / {:.0} / {:.0}; CPU {ours:.0} + {theirs:.0}. For 64 VMs every 10 ms: \
             {:.1} ms of round trips per 10 ms, {:.0} % of a CPU",
            us(t[t.len() * 99 / 100]),
            us(t[0]),
            med * 64.0 / 1e3,
            (ours + theirs) * 64.0 / 1e4 * 100.0
        );
    }
    drop(q);
    let _ = child.kill();
    let _ = child.wait();
}
