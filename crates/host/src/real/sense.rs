//! What a VM does, read from files under a procfs and a sysfs root (tests pass fake trees in a
//! tempdir), in two readings taken at the cadence their use needs:
//! - [`VmSensor::read_net`], every T_m (10 ms): per tap, the two counters spec 002's mapping
//!   uses (`decide::tap`), `<sys>/class/net/<tap>/statistics/tx_dropped` and `rx_packets`. A
//!   tap's *tx* is toward the guest: `tx_dropped` growing means the guest did not drain its RX
//!   ring (the overflow state); `rx_packets` is what the guest sent;
//! - [`VmSensor::read_cpu`], once per identification window (T_s, 100 ms; L_i is used only
//!   there): each vCPU thread's `<proc>/<pid>/task/<tid>/schedstat` (run and wait ns);
//! - [`VmSensor::tap_totals`], on demand (metrics, reports): all four of `tx_packets`,
//!   `tx_dropped`, `rx_packets`, `rx_dropped`.
//!
//! [`net_delta`] and [`cpu_delta`] turn two readings into one interval's counts, with counters
//! that went back (a reset) handled.
//!
//! The files are `colosched_sys`'s: `Procfs::task_file` and `Sysfs::net_counter` give each as a
//! `KeptFile`.
//!
//! **Cost.** 64 VMs must cost at most 5 % of one CPU. On the real /proc and /sys each file is
//! opened once and read again with one `pread` at offset 0: opening by path each time costs
//! about 13 times as much, and a second read to see the end of the file would make the kernel
//! format the line again. A file whose read fails (its thread or tap is gone) is closed and
//! opened again by path at the next reading. On any other filesystem (a test's fake tree, whose
//! files a test replaces) every reading opens the file anew. Each read is one system call of
//! about 0.9 µs back to back, two to four times that when paced at 10 ms (caches cold; on this
//! shared, virtualised machine), so what is read how often decides the cost. For 64 VMs of 2
//! vCPUs, paced at 10 ms (`cargo run --release -p colosched-host --example host_sense_cost`;
//! bench/RESULTS.md): the two counters every 10 ms and schedstat every 100 ms, 3.7–5.0 % of a
//! CPU over several runs (0.5 % of it the 10 ms wake-up alone; 1.2 % back to back); schedstat
//! every 10 ms too, 5.5–8 %; all four counters and schedstat every 10 ms, 7.5–11 %. Reading
//! all the taps of a network namespace at once (netlink `RTM_GETSTATS`, or
//! `/proc/<pid>/net/dev`, which formats every device of the namespace) would cost less per tap
//! if more VMs must fit.
//!
//! **Namespaces.** sysfs shows the network devices of the namespace it was mounted in. For a VM
//! whose tap lives in another network namespace, pass the sysfs of a mount namespace that
//! mounted it there, e.g. `/proc/<qemu pid>/root/sys` for a QEMU started by `ip netns exec`
//! (which mounts sysfs afresh for the namespace). A tap's files may read for a moment after its
//! QEMU is gone, until the kernel tears the namespace down.

use std::path::Path;
use std::time::Instant;

use crate::decide::tap::{TapDelta, TapInterval};
use colosched_core::proctext::parse_schedstat;
use colosched_qemu::Vm;
use colosched_sys::kept::KeptFile;
use colosched_sys::{Procfs, Sysfs};

/// The counters of a tap read every T_m, under the kernel's names (tx = toward the guest).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TapSample {
    pub tx_dropped: u64,
    pub rx_packets: u64,
}

/// All four counters of a tap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TapCounters {
    pub tx_packets: u64,
    pub tx_dropped: u64,
    pub rx_packets: u64,
    pub rx_dropped: u64,
}

/// The scheduler's counters of one vCPU thread (`CONFIG_SCHED_INFO`): run, wait, slices.
pub use colosched_core::proctext::SchedStat as VcpuTime;

/// One look at a VM's taps: one entry per tap of the [`Vm`] the sensor was made for, `None`
/// where it could not be read (gone, or never there).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetReading {
    pub at: Instant,
    pub taps: Vec<Option<TapSample>>,
}

/// One look at a VM's vCPU threads, one entry per vCPU of its [`Vm`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuReading {
    pub at: Instant,
    pub vcpus: Vec<Option<VcpuTime>>,
}

/// The counter files of a tap, in the order read: the two of every T_m first.
const TAP_COUNTERS: [&str; 4] = ["tx_dropped", "rx_packets", "tx_packets", "rx_dropped"];

/// The first `N` counters of a tap's files; if one cannot be read, the tap is gone (or never
/// was): none of its files is held open any longer.
fn read_counters<const N: usize>(files: &mut [KeptFile; 4], buf: &mut [u8]) -> Option<[u64; N]> {
    let mut v = [0u64; N];
    for (x, f) in v.iter_mut().zip(files.iter_mut()) {
        match f.read(buf).and_then(|t| t.trim_end().parse().ok()) {
            Some(n) => *x = n,
            None => {
                files.iter_mut().for_each(KeptFile::close);
                return None;
            }
        }
    }
    Some(v)
}

/// Reads one VM's taps and vCPU threads; made from a [`Vm`] (remake it when discovery finds the
/// VM changed).
#[derive(Debug)]
pub struct VmSensor {
    /// Per tap, its counter files in `TAP_COUNTERS` order (opened when first read).
    taps: Vec<[KeptFile; 4]>,
    vcpus: Vec<KeptFile>,
}

impl VmSensor {
    pub fn new(proc_root: &Path, sys_root: &Path, vm: &Vm) -> VmSensor {
        let (proc, sys) = (Procfs::new(proc_root), Sysfs::new(sys_root));
        let taps = vm
            .taps
            .iter()
            .map(|tap| TAP_COUNTERS.map(|c| sys.net_counter(tap, c)))
            .collect();
        let vcpus = vm
            .vcpus
            .iter()
            .map(|v| proc.task_file(vm.pid, v.tid, "schedstat"))
            .collect();
        VmSensor { taps, vcpus }
    }

    /// The taps' `tx_dropped` and `rx_packets` (two reads per tap): every T_m.
    pub fn read_net(&mut self) -> NetReading {
        let mut buf = [0u8; 32];
        let taps = self
            .taps
            .iter_mut()
            .map(|files| {
                let [tx_dropped, rx_packets] = read_counters::<2>(files, &mut buf)?;
                Some(TapSample {
                    tx_dropped,
                    rx_packets,
                })
            })
            .collect();
        NetReading {
            at: Instant::now(),
            taps,
        }
    }

    /// The vCPU threads' schedstat (one read per vCPU): once per identification window.
    pub fn read_cpu(&mut self) -> CpuReading {
        let mut buf = [0u8; 128];
        let vcpus = self
            .vcpus
            .iter_mut()
            .map(|f| parse_schedstat(f.read(&mut buf)?).ok())
            .collect();
        CpuReading {
            at: Instant::now(),
            vcpus,
        }
    }

    /// All four counters of each tap (four reads per tap), for metrics and reports.
    pub fn tap_totals(&mut self) -> Vec<Option<TapCounters>> {
        let mut buf = [0u8; 32];
        self.taps
            .iter_mut()
            .map(|files| {
                let [tx_dropped, rx_packets, tx_packets, rx_dropped] =
                    read_counters::<4>(files, &mut buf)?;
                Some(TapCounters {
                    tx_packets,
                    tx_dropped,
                    rx_packets,
                    rx_dropped,
                })
            })
            .collect()
    }

    /// How many files are held open (for tests and reports).
    pub fn open_files(&self) -> usize {
        let taps = self.taps.iter().flatten();
        taps.chain(&self.vcpus).filter(|s| s.is_open()).count()
    }
}

/// The growth of a counter between two readings, and whether it went back. A counter that went
/// back was reset (a tap made anew under the same name, a thread id reused): it counts from 0
/// again, so its growth is its new value, never a wrapped-around huge number.
pub fn counter_delta(prev: u64, cur: u64) -> (u64, bool) {
    if cur >= prev {
        (cur - prev, false)
    } else {
        (cur, true)
    }
}

/// One T_m interval of a VM's taps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NetDelta {
    pub interval_ns: u64,
    /// Summed over the taps readable in both readings.
    pub tap: TapDelta,
    /// Counters that went back (see [`counter_delta`]).
    pub resets: u32,
    /// Taps missing from either reading.
    pub missing: u32,
}

impl NetDelta {
    /// The interval as `decide::tap::ring_sample` takes it, with the RX ring fill if the caller
    /// read one.
    pub fn interval(&self, rx_queued: Option<u32>) -> TapInterval {
        TapInterval {
            delta: self.tap,
            interval_ns: self.interval_ns,
            rx_queued,
        }
    }
}

/// The taps' counts between two readings of the same sensor (`prev` first), matched by
/// position.
pub fn net_delta(prev: &NetReading, cur: &NetReading) -> NetDelta {
    let mut out = NetDelta {
        interval_ns: nanos_between(prev.at, cur.at),
        ..NetDelta::default()
    };
    for (p, c) in prev.taps.iter().zip(&cur.taps) {
        let (Some(p), Some(c)) = (p, c) else {
            out.missing += 1;
            continue;
        };
        let (dropped, r1) = counter_delta(p.tx_dropped, c.tx_dropped);
        let (sent, r2) = counter_delta(p.rx_packets, c.rx_packets);
        out.resets += r1 as u32 + r2 as u32;
        out.tap += TapDelta {
            to_guest_dropped: dropped,
            from_guest: sent,
        };
    }
    out.missing += prev.taps.len().abs_diff(cur.taps.len()) as u32;
    out
}

/// One interval of a VM's vCPU threads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuDelta {
    pub interval_ns: u64,
    /// Per vCPU; `None` where either reading lacks it.
    pub vcpus: Vec<Option<VcpuTime>>,
    /// Counters that went back (see [`counter_delta`]).
    pub resets: u32,
    /// vCPUs missing from either reading.
    pub missing: u32,
}

impl CpuDelta {
    pub fn run_ns(&self) -> u64 {
        self.vcpus.iter().flatten().map(|v| v.run_ns).sum()
    }

    pub fn wait_ns(&self) -> u64 {
        self.vcpus.iter().flatten().map(|v| v.wait_ns).sum()
    }

    /// The VM's CPU load over the interval in CPUs (spec 002's L_i: 1.5 = 150 %): the time its
    /// vCPU threads ran *or waited to run*, as the simulator counts a VM's runnable vCPUs. Its
    /// demand, not what it got: the CPU time alone never exceeds a VM's share under a fair
    /// scheduler, so no VM would ever be hungry (docs/host-sim.md, open question 2).
    pub fn load(&self) -> f64 {
        if self.interval_ns == 0 {
            return 0.0;
        }
        (self.run_ns() + self.wait_ns()) as f64 / self.interval_ns as f64
    }
}

/// The vCPUs' counts between two readings of the same sensor (`prev` first), matched by
/// position.
pub fn cpu_delta(prev: &CpuReading, cur: &CpuReading) -> CpuDelta {
    let mut out = CpuDelta {
        interval_ns: nanos_between(prev.at, cur.at),
        ..CpuDelta::default()
    };
    for (p, c) in prev.vcpus.iter().zip(&cur.vcpus) {
        let (Some(p), Some(c)) = (p, c) else {
            out.missing += 1;
            out.vcpus.push(None);
            continue;
        };
        let mut d = |a: u64, b: u64| {
            let (n, reset) = counter_delta(a, b);
            out.resets += reset as u32;
            n
        };
        let v = VcpuTime {
            run_ns: d(p.run_ns, c.run_ns),
            wait_ns: d(p.wait_ns, c.wait_ns),
            slices: d(p.slices, c.slices),
        };
        out.vcpus.push(Some(v));
    }
    out.missing += prev.vcpus.len().abs_diff(cur.vcpus.len()) as u32;
    out
}

fn nanos_between(a: Instant, b: Instant) -> u64 {
    b.saturating_duration_since(a)
        .as_nanos()
        .min(u64::MAX as u128) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::tap::ring_sample;
    use colosched_qemu::discover::{read_vm, Accel, Vcpu};
    use colosched_qemu::testing::{Qemu, QemuOpts};
    use std::fs;
    use std::time::Duration;

    fn vm(taps: &[&str], tids: &[i32]) -> Vm {
        Vm {
            pid: 7,
            name: "t".into(),
            vcpus: tids
                .iter()
                .enumerate()
                .map(|(i, &tid)| Vcpu {
                    index: i as u32,
                    tid,
                    accel: Accel::Kvm,
                })
                .collect(),
            taps: taps.iter().map(|s| s.to_string()).collect(),
            qmp: None,
        }
    }

    /// Fake /proc and /sys with the files of `vm(["tap0", "tap1"], [8, 9])`.
    struct Fake {
        proc: tempfile::TempDir,
        sys: tempfile::TempDir,
    }

    impl Fake {
        fn new() -> Fake {
            let f = Fake {
                proc: tempfile::tempdir().unwrap(),
                sys: tempfile::tempdir().unwrap(),
            };
            for tap in ["tap0", "tap1"] {
                f.tap(tap, [0, 0, 0, 0]);
            }
            for tid in [8, 9] {
                f.schedstat(tid, "0 0 0\n");
            }
            f
        }

        /// tx_packets, tx_dropped, rx_packets, rx_dropped.
        fn tap(&self, tap: &str, v: [u64; 4]) {
            let d = self.sys.path().join(format!("class/net/{tap}/statistics"));
            fs::create_dir_all(&d).unwrap();
            for (name, x) in ["tx_packets", "tx_dropped", "rx_packets", "rx_dropped"]
                .iter()
                .zip(v)
            {
                fs::write(d.join(name), format!("{x}\n")).unwrap();
            }
        }

        fn schedstat(&self, tid: i32, text: &str) {
            let d = self.proc.path().join(format!("7/task/{tid}"));
            fs::create_dir_all(&d).unwrap();
            fs::write(d.join("schedstat"), text).unwrap();
        }

        fn sensor(&self) -> VmSensor {
            VmSensor::new(
                self.proc.path(),
                self.sys.path(),
                &vm(&["tap0", "tap1"], &[8, 9]),
            )
        }
    }

    #[test]
    fn reads_taps_and_vcpus_and_sums_an_interval() {
        let f = Fake::new();
        let mut s = f.sensor();
        let (n0, c0) = (s.read_net(), s.read_cpu());
        assert_eq!(n0.taps, vec![Some(TapSample::default()); 2]);
        assert_eq!(c0.vcpus, vec![Some(VcpuTime::default()); 2]);
        assert_eq!(s.open_files(), 0, "a fake tree is read afresh each time");
        f.tap("tap0", [100, 5, 40, 1]);
        f.tap("tap1", [30, 0, 2, 0]);
        f.schedstat(8, "6000000 1000000 3\n");
        f.schedstat(9, "2000000 500000 1\n");
        std::thread::sleep(Duration::from_millis(2));
        let (n1, c1) = (s.read_net(), s.read_cpu());
        let d = net_delta(&n0, &n1);
        assert_eq!(
            d.tap,
            TapDelta {
                to_guest_dropped: 5,
                from_guest: 42,
            }
        );
        assert_eq!((d.resets, d.missing), (0, 0));
        assert!(d.interval_ns >= 2_000_000);
        let sample = ring_sample(&d.interval(None), d.interval_ns, 256);
        assert_eq!((sample.rx_rq, sample.rx_rqn, sample.tx_sq), (256, 5, 42));
        let c = cpu_delta(&c0, &c1);
        assert_eq!((c.run_ns(), c.wait_ns()), (8_000_000, 1_500_000));
        assert_eq!(c.vcpus[0].unwrap().slices, 3);
        assert!((c.load() - 9.5e6 / c.interval_ns as f64).abs() < 1e-12);
        assert_eq!((c.resets, c.missing), (0, 0));
        assert_eq!(
            s.tap_totals(),
            vec![
                Some(TapCounters {
                    tx_packets: 100,
                    tx_dropped: 5,
                    rx_packets: 40,
                    rx_dropped: 1
                }),
                Some(TapCounters {
                    tx_packets: 30,
                    tx_dropped: 0,
                    rx_packets: 2,
                    rx_dropped: 0
                }),
            ]
        );
    }

    #[test]
    fn a_counter_that_goes_back_is_a_reset() {
        assert_eq!(counter_delta(5, 9), (4, false));
        assert_eq!(counter_delta(9, 9), (0, false));
        assert_eq!(counter_delta(1_000_000, 3), (3, true));
        let f = Fake::new();
        let mut s = f.sensor();
        f.tap("tap0", [1_000, 10, 500, 0]);
        f.schedstat(8, "9000000000 5 10\n");
        let (n0, c0) = (s.read_net(), s.read_cpu());
        // tap0 made anew (counts from 0), thread 8 reused by a new thread.
        f.tap("tap0", [4, 0, 2, 0]);
        f.schedstat(8, "1000 0 1\n");
        let d = net_delta(&n0, &s.read_net());
        assert_eq!(
            d.tap,
            TapDelta {
                to_guest_dropped: 0,
                from_guest: 2,
            }
        );
        assert_eq!(d.resets, 2, "tx_dropped and rx_packets went back");
        let c = cpu_delta(&c0, &s.read_cpu());
        assert_eq!(c.vcpus[0].unwrap().run_ns, 1000);
        assert_eq!(c.resets, 3, "run, wait and slices went back");
    }

    #[test]
    fn vanished_and_malformed_files_read_as_missing() {
        let f = Fake::new();
        let mut s = f.sensor();
        let (n0, c0) = (s.read_net(), s.read_cpu());
        fs::remove_dir_all(f.sys.path().join("class/net/tap1")).unwrap();
        fs::remove_dir_all(f.proc.path().join("7/task/9")).unwrap();
        f.tap("tap0", [3, 0, 1, 0]);
        let (n1, c1) = (s.read_net(), s.read_cpu());
        assert_eq!((n1.taps[1], c1.vcpus[1]), (None, None));
        let d = net_delta(&n0, &n1);
        assert_eq!((d.tap.from_guest, d.missing), (1, 1));
        let c = cpu_delta(&c0, &c1);
        assert_eq!((c.vcpus[1], c.missing), (None, 1));
        assert_eq!(s.tap_totals()[1], None);
        // Garbage, a short schedstat, a file longer than any counter: each unreadable.
        let stats = f.sys.path().join("class/net/tap0/statistics");
        fs::write(stats.join("rx_packets"), "x\n").unwrap();
        f.schedstat(8, "1 2\n");
        assert_eq!((s.read_net().taps[0], s.read_cpu().vcpus[0]), (None, None));
        f.tap("tap0", [1, 1, 1, 1]);
        fs::write(stats.join("rx_dropped"), format!("{}\n", "9".repeat(40))).unwrap();
        f.schedstat(8, &format!("{}\n", "1 ".repeat(100)));
        assert!(
            s.read_net().taps[0].is_some(),
            "rx_dropped is not read every T_m"
        );
        assert_eq!(s.tap_totals()[0], None, "40 digits is no counter");
        assert_eq!(
            s.read_cpu().vcpus[0],
            None,
            "200 bytes is no schedstat line"
        );
        // Readings of different shapes (a sensor remade in between) count the odd ones out.
        f.schedstat(8, "5 5 5\n");
        let mut other = VmSensor::new(f.proc.path(), f.sys.path(), &vm(&[], &[8]));
        assert_eq!(net_delta(&n0, &other.read_net()).missing, 2);
        assert_eq!(cpu_delta(&c0, &other.read_cpu()).missing, 1);
    }

    #[test]
    fn this_kernel_keeps_schedstat_and_files_stay_open_on_real_proc() {
        // Our own thread stands for a vCPU: real /proc, kept open, read again by pread.
        let me = std::process::id() as i32;
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            tx.send(rustix::thread::gettid().as_raw_pid()).unwrap();
            // Spin a little so the run time grows between the readings.
            let end = Instant::now() + Duration::from_millis(30);
            while Instant::now() < end {
                std::hint::black_box(0u64);
            }
            stop_rx.recv().ok();
        });
        let tid = rx.recv().unwrap();
        let mut v = vm(&[], &[tid]);
        v.pid = me;
        let mut s = VmSensor::new(Path::new("/proc"), Path::new("/sys"), &v);
        let a = s.read_cpu();
        assert_eq!(s.open_files(), 1, "kept open on a proc filesystem");
        std::thread::sleep(Duration::from_millis(40));
        let b = s.read_cpu();
        let d = cpu_delta(&a, &b);
        assert!(d.run_ns() > 0, "{a:?} {b:?}");
        assert_eq!(d.missing, 0);
        stop_tx.send(()).unwrap();
        t.join().unwrap();
        // The thread is gone: its kept file fails and the path no longer opens. (A joined
        // thread's task may linger a moment: join returns when its tid is cleared, a little
        // before the kernel unhashes it.)
        let deadline = Instant::now() + Duration::from_secs(5);
        while s.read_cpu().vcpus != vec![None] {
            assert!(Instant::now() < deadline, "an exited thread still reads");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(s.open_files(), 0, "its file is closed");
    }

    #[test]
    fn a_real_tap_toward_a_stopped_guest_overflows() {
        // A QEMU that never runs its guest stops reading its tap: datagrams sent to the guest
        // fill the tap's queue (500 packets for a tap made by `ip tuntap`) and the rest are
        // dropped — the overflow state, for real, in QEMU's own network namespace.
        let q = Qemu::spawn(&QemuOpts {
            name: "sense",
            smp: 2,
            tap: Some("cst1"),
        });
        let vm = read_vm(Path::new("/proc"), q.pid).unwrap();
        assert_eq!(vm.taps, vec!["cst1".to_string()]);
        let mut s = VmSensor::new(Path::new("/proc"), &q.sys_root(), &vm);
        let (n0, c0) = (s.read_net(), s.read_cpu());
        assert!(
            n0.taps[0].is_some(),
            "tap readable through {:?}",
            q.sys_root()
        );
        assert!(c0.vcpus.iter().all(|v| v.is_some()));
        assert_eq!(
            s.open_files(),
            4,
            "2 tap counters + 2 schedstat files kept open"
        );
        q.send_to_guest(1_500);
        let (n1, c1) = (s.read_net(), s.read_cpu());
        let d = net_delta(&n0, &n1);
        assert!(
            d.tap.to_guest_dropped >= 400,
            "{d:?} (a queue of 500, 1,500 sent)"
        );
        assert_eq!(d.tap.from_guest, 0, "a stopped guest sends nothing");
        assert_eq!((d.resets, d.missing), (0, 0));
        let sample = ring_sample(&d.interval(None), 10_000_000, 256);
        assert_eq!((sample.rx_rq, sample.rx_rqn, sample.tx_sq), (256, 256, 0));
        let totals = s.tap_totals()[0].unwrap();
        assert!(
            totals.tx_packets <= 5,
            "QEMU took almost nothing: {totals:?}"
        );
        assert_eq!(s.open_files(), 6, "the other two counters, once asked for");
        // Stopped vCPUs hardly run.
        let c = cpu_delta(&c0, &c1);
        assert!(c.run_ns() < 5_000_000, "{c:?}");
        drop(q);
        assert_eq!(
            s.read_cpu().vcpus,
            vec![None, None],
            "its threads are gone at once"
        );
        // The tap goes when the kernel tears the namespace down, a little later (its kept
        // files read until then).
        let deadline = Instant::now() + Duration::from_secs(10);
        while s.read_net().taps[0].is_some() {
            assert!(Instant::now() < deadline, "the tap outlived its namespace");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(s.open_files(), 0);
    }
}
