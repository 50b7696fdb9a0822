//! Whole-run tests of the engine with real schedulers: hand-checked timelines, fairness, and
//! properties over random small hosts.

use proptest::prelude::*;

use super::net::{Network, Protocol, NET_QUANTUM};
use super::sched::{
    Aash, Credit, CreditParams, Diff, DiffParams, Eevdf, EevdfParams, Ia, IaRotate, IaSchedParams,
    PoolScheduler, Stop, VmObservation,
};
use super::*;
use crate::decide::diff::{NsvmClassifier, VmKind};
use crate::decide::rotate::RotateParams;

fn run(host: &Host, vms: &[Vm], scheduler: &str, horizon_ms: u64) -> SimResult {
    let topo = Topology::new(host, vms);
    let cfg = RunConfig {
        horizon: horizon_ms * MS,
        record_intervals: true,
        seed: 0,
        net_quantum: NET_QUANTUM,
        shuffle_start: false,
    };
    let result = match scheduler {
        "credit" => simulate(
            host,
            vms,
            &mut Credit::new(&topo, CreditParams::default()),
            &cfg,
        ),
        "eevdf" => {
            let params = EevdfParams {
                hrtick: true,
                ..EevdfParams::linux(host.cores.len())
            };
            simulate(host, vms, &mut Eevdf::new(&topo, params), &cfg)
        }
        "ia" => {
            let mut ia = Ia::new(&topo, IaSchedParams::default()).expect("VMs fit the host");
            simulate(host, vms, &mut ia, &cfg)
        }
        "aash" => simulate(
            host,
            vms,
            &mut Aash::new(&topo, CreditParams::default()),
            &cfg,
        ),
        "diff" => simulate(
            host,
            vms,
            &mut Diff::new(&topo, DiffParams::default(), PoolScheduler::Credit, 1),
            &cfg,
        ),
        "diff-eevdf" => simulate(
            host,
            vms,
            &mut Diff::new(&topo, DiffParams::default(), PoolScheduler::Eevdf, 1),
            &cfg,
        ),
        "ia-rotate" => {
            let mut s = IaRotate::new(&topo, RotateParams::default()).expect("VMs fit the host");
            simulate(host, vms, &mut s, &cfg)
        }
        other => panic!("no scheduler {other}"),
    };
    check_invariants(host, &result);
    result
}

fn serial(work_ms: f64) -> Workload {
    Workload::Serial {
        work_ms,
        mem_intensity: 0.0,
    }
}

fn parallel(phases: u32, phase_ms: f64, spin_us: f64) -> Workload {
    Workload::Parallel {
        phases,
        phase_ms,
        spin_us,
    }
}

/// What must hold after any run: no core runs two vCPUs at once, no vCPU runs on two cores at
/// once, nothing runs on a reserved core, and work is conserved.
fn check_invariants(host: &Host, r: &SimResult) {
    let mut by_core = vec![Vec::new(); host.cores.len()];
    let mut by_vcpu = vec![Vec::new(); r.vcpus.len()];
    for i in &r.intervals {
        assert!(i.start < i.end && i.end <= r.end, "{i:?}");
        assert!(!host.cores[i.core].reserved, "ran on reserved core: {i:?}");
        by_core[i.core].push((i.start, i.end));
        by_vcpu[i.vcpu].push((i.start, i.end));
    }
    for (what, lists) in [("core", &mut by_core), ("vCPU", &mut by_vcpu)] {
        for (k, list) in lists.iter_mut().enumerate() {
            list.sort();
            for w in list.windows(2) {
                assert!(
                    w[0].1 <= w[1].0,
                    "{what} {k} overlaps: {:?} {:?}",
                    w[0],
                    w[1]
                );
            }
        }
    }
    // Time: what the intervals say each core was busy is what the engine counted.
    for (c, list) in by_core.iter().enumerate() {
        let busy: Nanos = list.iter().map(|(s, e)| e - s).sum();
        assert_eq!(busy, r.core_busy_ns[c], "core {c}");
    }
    let vcpu_time: Nanos = r.vcpus.iter().map(|v| v.compute_ns + v.spin_ns).sum();
    assert_eq!(vcpu_time, r.core_busy_ns.iter().sum::<Nanos>());
    // Work: done + left = given, and no more done than the computing time could deliver.
    let done: f64 = r.vcpus.iter().map(|v| v.work_done).sum();
    let tolerance = 1e-3 * (1.0 + r.events as f64);
    assert!(
        (done + r.work_left - r.work_assigned).abs() < tolerance,
        "done {done} + left {} != given {}",
        r.work_left,
        r.work_assigned
    );
    let fastest = host.cores.iter().map(|c| c.speed).fold(0.0, f64::max);
    let compute: Nanos = r.vcpus.iter().map(|v| v.compute_ns).sum();
    assert!(done <= compute as f64 * fastest + tolerance);
}

#[test]
fn a_fast_core_does_the_work_in_less_time() {
    let host = Host::with_speeds(&[2.0]);
    for s in ["credit", "eevdf", "ia"] {
        let r = run(&host, &[Vm::new("a", 1, serial(20.0))], s, 1_000);
        assert_eq!(r.completions.len(), 1, "{s}");
        assert_eq!(r.completions[0].finished, 10 * MS, "{s}");
        assert_eq!(r.end, 10 * MS);
        assert!((r.vcpus[0].work_done - 20e6).abs() < 1e-3);
    }
}

#[test]
fn threads_that_arrive_together_never_spin() {
    // Two threads on two cores, 3 phases of 10 ms: done at 30 ms, no spinning, no blocking.
    let host = Host::symmetric(2);
    for s in ["credit", "eevdf"] {
        let r = run(
            &host,
            &[Vm::new("p", 2, parallel(3, 10.0, 500.0))],
            s,
            1_000,
        );
        assert_eq!(r.completions.len(), 1);
        assert_eq!(r.completions[0].finished, 30 * MS, "{s}");
        assert_eq!(r.completions[0].vcpu, None);
        assert!(
            r.vcpus.iter().all(|v| v.spin_ns == 0 && v.blocks == 0),
            "{s}: {:?}",
            r.vcpus
        );
    }
}

#[test]
fn a_thread_at_a_barrier_spins_its_budget_then_blocks() {
    // Two threads share one core under Credit, 2 phases of 10 ms.
    // Spin 0: each thread blocks as soon as it arrives, so no time is lost: 4 × 10 ms = 40 ms.
    let host = Host::symmetric(1);
    let r = run(
        &host,
        &[Vm::new("p", 2, parallel(2, 10.0, 0.0))],
        "credit",
        1_000,
    );
    assert_eq!(r.completions[0].finished, 40 * MS);
    assert_eq!(r.vcpus[0].spin_ns + r.vcpus[1].spin_ns, 0);
    // Spin 5 ms: thread 0 computes 0–10, spins 10–15 while its sibling waits for the core,
    // blocks; thread 1 computes 15–25 and releases the barrier; thread 0 wakes BOOSTed,
    // preempts, computes 25–35, spins 35–40, blocks; thread 1 finishes 40–50.
    let r = run(
        &host,
        &[Vm::new("p", 2, parallel(2, 10.0, 5_000.0))],
        "credit",
        1_000,
    );
    assert_eq!(r.completions[0].finished, 50 * MS);
    assert_eq!(r.vcpus[0].spin_ns, 10 * MS);
    assert_eq!(r.vcpus[1].spin_ns, 0);
    assert_eq!(r.vcpus[0].blocks, 2);
    let timeline: Vec<(VcpuId, Nanos, Nanos)> = r
        .intervals
        .iter()
        .map(|i| (i.vcpu, i.start / MS, i.end / MS))
        .collect();
    assert_eq!(
        timeline,
        vec![(0, 0, 15), (1, 15, 25), (0, 25, 40), (1, 40, 50)]
    );
}

#[test]
fn spinning_is_cut_short_when_the_barrier_opens() {
    // Two cores under Credit. A 30 ms hog starts on core 0 with thread 1 queued behind it;
    // thread 0 has core 1. Thread 0 arrives at 10 ms and spins (budget 50 ms) until thread 1
    // has run its 10 ms: thread 1 gets a core at 30 ms (the hog ends, or core 1's slice ends
    // and it steals thread 1), so the program ends at 40 ms, and thread 0 spun 20–30 ms
    // without ever blocking.
    let host = Host::symmetric(2);
    let vms = [
        Vm::new("hog", 1, serial(30.0)),
        Vm::new("p", 2, parallel(1, 10.0, 50_000.0)),
    ];
    let r = run(&host, &vms, "credit", 1_000);
    let p = r.completions.iter().find(|c| c.vm == 1).unwrap();
    assert_eq!(p.finished, 40 * MS);
    let spin = r.vcpus[1].spin_ns + r.vcpus[2].spin_ns;
    assert!((20 * MS..=30 * MS).contains(&spin), "spin {spin}");
    assert_eq!(r.vcpus[1].blocks + r.vcpus[2].blocks, 0);
}

#[test]
fn credit_shares_symmetric_cores_fairly() {
    // Three single-vCPU hogs on two cores for 3 s: 2 s of CPU each, within 5 %.
    let host = Host::symmetric(2);
    let vms: Vec<Vm> = (0..3)
        .map(|i| Vm {
            repeat: true,
            ..Vm::new(&format!("h{i}"), 1, serial(50.0))
        })
        .collect();
    let r = run(&host, &vms, "credit", 3_000);
    for v in &r.vcpus {
        let share = v.compute_ns as f64 / 2e9;
        assert!((share - 1.0).abs() < 0.05, "{:?}", r.vcpus);
    }
    // Weights 512 : 256 on one core: 2 : 1 within 5 %.
    let host = Host::symmetric(1);
    let vms = [
        Vm {
            weight: 512.0,
            repeat: true,
            ..Vm::new("big", 1, serial(50.0))
        },
        Vm {
            repeat: true,
            ..Vm::new("small", 1, serial(50.0))
        },
    ];
    let r = run(&host, &vms, "credit", 3_000);
    let ratio = r.vcpus[0].compute_ns as f64 / r.vcpus[1].compute_ns as f64;
    assert!((ratio - 2.0).abs() < 0.1, "ratio {ratio}");
}

#[test]
fn eevdf_shares_equally_whatever_the_slices_and_a_slice_bounds_a_run() {
    let host = Host::symmetric(1);
    let vms = [
        Vm {
            slice_ms: Some(1.0),
            repeat: true,
            ..Vm::new("short", 1, serial(50.0))
        },
        Vm {
            slice_ms: Some(9.0),
            repeat: true,
            ..Vm::new("long", 1, serial(50.0))
        },
    ];
    let r = run(&host, &vms, "eevdf", 1_000);
    let (a, b) = (r.vcpus[0].compute_ns as f64, r.vcpus[1].compute_ns as f64);
    assert!((a / b - 1.0).abs() < 0.04, "{a} {b}");
    // With hrtick no run of the 9 ms task lasts longer than its slice.
    let longest = r
        .intervals
        .iter()
        .filter(|i| i.vcpu == 1)
        .map(|i| i.end - i.start)
        .max();
    assert!(longest.unwrap() <= 9 * MS, "{longest:?}");
}

#[test]
fn migrations_of_memory_bound_programs_cost_warm_up_work() {
    let host = Host {
        migration_warmup_ms: 2.0,
        ..Host::symmetric(2)
    };
    let vms: Vec<Vm> = (0..3)
        .map(|i| {
            Vm::new(
                &format!("s{i}"),
                1,
                Workload::Serial {
                    work_ms: 200.0,
                    mem_intensity: 0.5,
                },
            )
        })
        .collect();
    let r = run(&host, &vms, "credit", 10_000);
    let migrations: u32 = r.vcpus.iter().map(|v| v.migrations).sum();
    assert!(migrations > 0);
    for v in &r.vcpus {
        assert!((v.warmup_work - v.migrations as f64 * 1e6).abs() < 1e-6);
    }
    // All three finish; the warm-ups delayed the last completion beyond 3 × 200 / 2 = 300 ms.
    assert_eq!(r.completions.len(), 3);
    assert!(r.end > 300 * MS);
    let cold = Host {
        migration_warmup_ms: 0.0,
        ..host.clone()
    };
    assert!(run(&cold, &vms, "credit", 10_000).end < r.end);
}

#[test]
fn reserved_cores_stay_idle() {
    let mut host = Host::symmetric(3);
    host.cores[0].reserved = true;
    let vms = [Vm::new("a", 2, serial(30.0)), Vm::new("b", 1, serial(30.0))];
    for s in ["credit", "eevdf", "ia"] {
        let r = run(&host, &vms, s, 1_000);
        assert_eq!(r.core_busy_ns[0], 0);
        // 90 ms of work on 2 cores: at least 45 ms.
        assert!(r.end >= 45 * MS, "{s}: {}", r.end);
    }
}

fn arb_workload() -> impl Strategy<Value = Workload> {
    prop_oneof![
        (1.0..40.0f64, 0.0..1.0f64).prop_map(|(work_ms, mem_intensity)| Workload::Serial {
            work_ms,
            mem_intensity
        }),
        (1u32..5, 0.5..15.0f64, 0.0..3_000.0f64).prop_map(|(phases, phase_ms, spin_us)| {
            Workload::Parallel {
                phases,
                phase_ms,
                spin_us,
            }
        }),
        (
            prop::sample::select(vec![Protocol::Tcp, Protocol::Udp, Protocol::Icmp]),
            (1.0..300.0f64, 0.0..20.0f64, 1.0..300.0f64),
            (1.0..50.0f64, prop::option::of(1.0..40.0f64)),
            (any::<bool>(), any::<bool>(), 8u64..300),
        )
            .prop_map(
                |(protocol, (rate, delay, cap), (cpu_us, cpu_work), (ping, any_vcpu, slots))| {
                    Workload::Network(Network {
                        protocol,
                        rate_mbit_s: rate,
                        delay_ms: delay,
                        cap_mbit_s: cap,
                        cpu_us_per_packet: cpu_us,
                        cpu_work_ms: cpu_work,
                        ping,
                        ring_slots: slots,
                        ping_interval_ms: 100.0,
                        ping_jitter: 0.0,
                        any_vcpu,
                    })
                }
            ),
    ]
}

fn arb_vm() -> impl Strategy<Value = Vm> {
    (
        1usize..4,
        arb_workload(),
        any::<bool>(),
        prop::sample::select(vec![128.0, 256.0, 512.0]),
        (any::<bool>(), prop::sample::select(vec![0.0, 0.5])),
    )
        .prop_map(
            |(vcpus, workload, repeat, weight, (fast_priority, work_cv))| Vm {
                weight,
                repeat,
                fast_priority,
                work_cv,
                slice_ms: if repeat { Some(0.5) } else { None },
                ..Vm::new("vm", vcpus, workload)
            },
        )
}

fn arb_host() -> impl Strategy<Value = Host> {
    (
        prop::collection::vec(prop::sample::select(vec![1.0, 1.5, 1.8]), 1..5),
        any::<bool>(),
        0.0..2.0f64,
    )
        .prop_map(|(speeds, reserve_first, migration_warmup_ms)| {
            let n = speeds.len();
            Host {
                cores: speeds
                    .into_iter()
                    .enumerate()
                    .map(|(i, speed)| Core {
                        speed,
                        reserved: reserve_first && i == 0 && n > 1,
                    })
                    .collect(),
                migration_warmup_ms,
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Any small host and VM set, under either scheduler: the invariants hold, every core is
    /// only busy while it has a vCPU, and a run whose programs all end stops when the last does.
    #[test]
    fn invariants_hold_for_random_hosts(
        host in arb_host(),
        vms in prop::collection::vec(arb_vm(), 1..4),
        scheduler in prop::sample::select(vec!["credit", "eevdf", "ia", "aash", "diff", "diff-eevdf", "ia-rotate"]),
    ) {
        let usable = host.cores.iter().filter(|c| !c.reserved).count();
        prop_assume!(!scheduler.starts_with("ia") || vms.iter().all(|v| v.vcpus <= usable));
        let r = run(&host, &vms, scheduler, 400);
        let any_repeat = vms.iter().any(|v| v.repeat);
        if !any_repeat && r.end < 400 * MS {
            // Finished early: every program completed exactly once.
            let expected: usize = vms
                .iter()
                .map(|v| match v.workload { Workload::Serial { .. } => v.vcpus, _ => 1 })
                .sum();
            prop_assert_eq!(r.completions.len(), expected);
            prop_assert!(r.work_left < 1e-3);
        }
        // Work conservation in the whole run: busy core time never exceeds the run's length.
        for &busy in &r.core_busy_ns {
            prop_assert!(busy <= r.end);
        }
    }

    /// Diff rebuilding its pools as often as it can (20 ms windows, no hold) beside a flow that
    /// overflows its ring and a CPU hog, with random other VMs (blocked, spinning, finished vCPUs at the
    /// rebuilds): the invariants hold and the pools really change.
    #[test]
    fn diff_rebuilding_pools_keeps_the_invariants(
        host in arb_host().prop_filter("two usable cores", |h| {
            h.cores.iter().filter(|c| !c.reserved).count() >= 2
        }),
        vms in prop::collection::vec(arb_vm(), 1..4),
        eevdf in any::<bool>(),
        seed in 0u64..1000,
    ) {
        let flood = Network {
            rate_mbit_s: 2000.0,
            delay_ms: 0.0,
            cap_mbit_s: 4000.0,
            cpu_us_per_packet: 20.0,
            cpu_work_ms: Some(5.0),
            ..Network::spec002(Protocol::Udp)
        };
        // A CPU hog that never becomes an NSVM, so the flood's pool is never the whole host.
        let hog = Workload::Serial { work_ms: 50.0, mem_intensity: 0.0 };
        let mut all = vec![
            Vm { repeat: true, ..Vm::new("flood", 2, Workload::Network(flood)) },
            Vm { repeat: true, ..Vm::new("hog", 1, hog) },
        ];
        all.extend(vms);
        let topo = Topology::new(&host, &all);
        let pool = if eevdf { PoolScheduler::Eevdf } else { PoolScheduler::Credit };
        let params = DiffParams { hold_windows: 0, window_ms: 20, ..DiffParams::default() };
        let mut diff = Diff::new(&topo, params, pool, seed);
        let cfg = RunConfig { horizon: 400 * MS, record_intervals: true, seed: 0, net_quantum: NET_QUANTUM, shuffle_start: false };
        let r = simulate(&host, &all, &mut diff, &cfg);
        check_invariants(&host, &r);
        prop_assert!(diff.plans.iter().any(|(_, p)| p.ns_vms.contains(&0)));
        prop_assert!(diff.rebuilds >= 2);
    }
}

/// A saturated network VM (one vCPU, UDP at 10 packets per ms, 1 µs per packet) sharing one
/// core with a CPU hog under Credit with slice `slice_ms`: the ring's drops.
fn ring_drops_beside_a_hog(slice_ms: f64) -> (u64, SimResult) {
    let host = Host::symmetric(1);
    let net = Network {
        rate_mbit_s: 120.0,
        delay_ms: 1.0,
        cap_mbit_s: 1000.0,
        cpu_us_per_packet: 1.0,
        ping: false,
        ..Network::spec002(Protocol::Udp)
    };
    let mut vms = vec![
        Vm::new("net", 1, Workload::Network(net)),
        Vm::new("hog", 1, serial(1000.0)),
    ];
    vms.iter_mut().for_each(|v| v.repeat = true);
    let topo = Topology::new(&host, &vms);
    // Tick and accounting per slice, as Xen derives them from `tslice`.
    let params = CreditParams {
        slice_ms,
        tick_ms: slice_ms / 3.0,
        period_ms: slice_ms,
        boost: true,
    };
    let cfg = RunConfig {
        horizon: 1000 * MS,
        record_intervals: true,
        seed: 0,
        net_quantum: NET_QUANTUM,
        shuffle_start: false,
    };
    let r = simulate(&host, &vms, &mut Credit::new(&topo, params), &cfg);
    check_invariants(&host, &r);
    (r.net[0].as_ref().unwrap().ring_drops, r)
}

#[test]
fn a_ring_overflows_when_its_vcpu_waits_longer_than_ring_over_rate() {
    // 30 ms slices: the net VM waits 30 ms while 300 packets arrive for 256 slots, so each wait
    // loses about 44 (± a quantum's 10).
    let (drops, r) = ring_drops_beside_a_hog(30.0);
    let waits = r
        .intervals
        .iter()
        .filter(|i| i.vcpu == 1 && i.end - i.start >= 29 * MS && i.start >= 2 * MS)
        .count() as u64;
    assert!(waits >= 10, "{waits}");
    assert!(
        drops >= waits * 34 && drops <= waits * 54 + 54,
        "{drops} drops over {waits} waits"
    );
    // 10 ms slices: 100 packets per wait fit in the ring.
    let (drops, _) = ring_drops_beside_a_hog(10.0);
    assert_eq!(drops, 0);
}

#[test]
fn ping_rtt_is_two_delays_plus_the_wait_for_a_vcpu() {
    let ping = Network {
        protocol: Protocol::Icmp,
        delay_ms: 10.0,
        cpu_work_ms: Some(1000.0),
        ..Network::spec002(Protocol::Icmp)
    };
    let mut vm = Vm::new("ping", 1, Workload::Network(ping));
    vm.repeat = true;
    // Alone on its core: every reply after exactly 2 × 10 ms.
    let host = Host::symmetric(1);
    let r = run(&host, std::slice::from_ref(&vm), "credit", 1000);
    let alone = &r.net[0].as_ref().unwrap().ping_ms;
    assert!(
        alone.len() >= 9 && alone.iter().all(|&t| t == 20.0),
        "{alone:?}"
    );
    // Beside a hog under 30 ms slices: 20 ms plus a wait of 0 to 30 ms (and a quantum).
    let mut hog = Vm::new("hog", 1, serial(1000.0));
    hog.repeat = true;
    let r = run(&host, &[vm, hog], "credit", 2000);
    let shared = &r.net[0].as_ref().unwrap().ping_ms;
    assert!(shared.len() >= 18, "{shared:?}");
    assert!(
        shared.iter().all(|&t| (20.0..=51.0).contains(&t)),
        "{shared:?}"
    );
    assert!(shared.iter().any(|&t| t >= 30.0), "{shared:?}");
}

/// Credit, with the monitor's readings classified as Diff-Scheduler would.
struct Watched {
    credit: Credit,
    classifiers: Vec<NsvmClassifier>,
    kinds: Vec<Vec<VmKind>>,
}

impl Scheduler for Watched {
    fn name(&self) -> &'static str {
        "credit"
    }
    fn admit(&mut self, now: Nanos, v: VcpuId) {
        self.credit.admit(now, v)
    }
    fn wake(&mut self, now: Nanos, v: VcpuId) {
        self.credit.wake(now, v)
    }
    fn retire(&mut self, now: Nanos, v: VcpuId) {
        self.credit.retire(now, v)
    }
    fn schedule(&mut self, now: Nanos, core: CoreId, prev: Option<(VcpuId, Stop)>) -> Dispatch {
        self.credit.schedule(now, core, prev)
    }
    fn take_kicks(&mut self) -> Vec<CoreId> {
        self.credit.take_kicks()
    }
    fn next_periodic(&self) -> Option<Nanos> {
        self.credit.next_periodic()
    }
    fn periodic(&mut self, now: Nanos) {
        self.credit.periodic(now)
    }
    fn observes(&self) -> bool {
        true
    }
    fn observe(&mut self, _now: Nanos, vms: &[VmObservation]) {
        for (vm, o) in vms.iter().enumerate() {
            if let Some(stats) = self.classifiers[vm].push(o.ring) {
                self.kinds[vm].push(stats.kind());
            }
        }
    }
}

#[test]
fn a_saturated_network_vm_is_an_nsvm_under_credit_and_diff_serves_it_better() {
    // UDP: TCP's window keeps its ring mostly below QL_th in this model (docs/host-sim.md).
    for (preset, protocol) in [
        ("spec002-queue1", Protocol::Udp),
        ("spec002-queue2", Protocol::Udp),
    ] {
        let mut sc = crate::run::preset(preset).unwrap();
        if let Workload::Network(n) = &mut sc.vms[0].workload {
            n.protocol = protocol;
            n.rate_mbit_s = 200.0;
        }
        let topo = Topology::new(&sc.host, &sc.vms);
        let cfg = RunConfig {
            horizon: 6000 * MS,
            record_intervals: true,
            seed: 0,
            net_quantum: NET_QUANTUM,
            shuffle_start: false,
        };
        let mut watched = Watched {
            credit: Credit::new(&topo, CreditParams::default()),
            classifiers: vec![NsvmClassifier::paper(); sc.vms.len()],
            kinds: vec![Vec::new(); sc.vms.len()],
        };
        let credit = simulate(&sc.host, &sc.vms, &mut watched, &cfg);
        check_invariants(&sc.host, &credit);
        let nsvm = |k: &Vec<VmKind>| k.iter().filter(|&&k| k == VmKind::Sensitive).count();
        let windows = watched.kinds[0].len();
        assert!(windows >= 59, "{windows}");
        let what = format!("{preset} {protocol:?}");
        assert!(
            nsvm(&watched.kinds[0]) * 2 > windows,
            "{what}: VM1 NSVM in {} of {windows} windows",
            nsvm(&watched.kinds[0])
        );
        assert!(watched.kinds[1..].iter().all(|k| nsvm(k) == 0), "{what}");

        let mut diff = Diff::new(&topo, DiffParams::default(), PoolScheduler::Credit, 7);
        let with_diff = simulate(&sc.host, &sc.vms, &mut diff, &cfg);
        check_invariants(&sc.host, &with_diff);
        // Spec 002 §2.8: VM1 alone in a 1-CPU pool at 5 ms slices, the others on 5 CPUs.
        let ns_plans = diff
            .plans
            .iter()
            .filter(|(_, p)| p.ns_vms == vec![0])
            .count();
        assert!(ns_plans > 0, "{what}");
        assert!(diff
            .plans
            .iter()
            .filter(|(_, p)| p.ns_vms == vec![0])
            .all(|(_, p)| (p.ns_cpus, p.nn_cpus) == (1, 5)));
        let delivered = |r: &SimResult| r.net[0].as_ref().unwrap().delivered;
        assert!(
            delivered(&with_diff) as f64 > 1.2 * delivered(&credit) as f64,
            "{what}: diff {} vs credit {}",
            delivered(&with_diff),
            delivered(&credit)
        );
    }
}

#[test]
fn diff_and_diff_eevdf_confine_an_nsvm_to_its_own_pool() {
    // 2 usable cores (and dom0's), a 1 Gbit/s UDP VM (83 packets/ms) beside three 2-vCPU hogs:
    // its ring overflows in a few ms of waiting, under either pool scheduler's sharing, so it
    // becomes an NSVM and gets 1 core for itself; the hogs get the other.
    let mut host = Host::symmetric(3);
    host.cores[2].reserved = true;
    let net = Network {
        rate_mbit_s: 1000.0,
        delay_ms: 1.0,
        cap_mbit_s: 2000.0,
        cpu_us_per_packet: 1.0,
        ping: false,
        ..Network::spec002(Protocol::Udp)
    };
    let mut vms = vec![Vm::new("net", 1, Workload::Network(net))];
    for i in 0..3 {
        vms.push(Vm::new(&format!("hog{i}"), 2, serial(1000.0)));
    }
    vms.iter_mut().for_each(|v| v.repeat = true);
    let topo = Topology::new(&host, &vms);
    let cfg = RunConfig {
        horizon: 2000 * MS,
        record_intervals: true,
        seed: 0,
        net_quantum: NET_QUANTUM,
        shuffle_start: false,
    };
    for pool in [PoolScheduler::Credit, PoolScheduler::Eevdf] {
        let mut diff = Diff::new(&topo, DiffParams::default(), pool, 5);
        let r = simulate(&host, &vms, &mut diff, &cfg);
        check_invariants(&host, &r);
        let name = diff.name();
        let (since, plan) = diff
            .plans
            .iter()
            .find(|(_, p)| p.ns_vms == vec![0])
            .unwrap_or_else(|| panic!("{name}: VM0 never an NSVM"));
        assert_eq!((plan.ns_cpus, plan.nn_cpus), (1, 1), "{name}");
        let since = *since;
        // The first pool: core 0 for VM0 (vCPU 0), core 1 for the hogs, until the hold ends.
        let first_hold_end = since + 1000 * MS;
        // Intervals clipped to (since + 1 ms, first_hold_end): a core decides within 1 ms of a
        // rebuild, at the kick.
        let from = since + MS;
        let inside: Vec<RunInterval> = (r.intervals.iter())
            .filter(|i| i.end > from && i.start < first_hold_end)
            .map(|i| RunInterval {
                start: i.start.max(from),
                end: i.end.min(first_hold_end),
                ..*i
            })
            .collect();
        for i in &inside {
            assert_eq!(
                i.core == 0,
                i.vcpu == 0,
                "{name}: {i:?} (pool from {since})"
            );
        }
        let ran = |core| -> Nanos {
            (inside.iter())
                .filter(|i| i.core == core)
                .map(|i| i.end - i.start)
                .sum()
        };
        assert!(ran(0) > 900 * MS && ran(1) > 900 * MS, "{name}");
    }
}

/// One fast core (SF 2, core 0) and one slow core.
fn one_fast_one_slow() -> Host {
    Host::with_speeds(&[2.0, 1.0])
}

/// Time each vCPU ran on `core`, in ms.
fn time_on(r: &SimResult, core: CoreId) -> Vec<f64> {
    let mut t = vec![0.0; r.vcpus.len()];
    for i in r.intervals.iter().filter(|i| i.core == core) {
        t[i.vcpu] += (i.end - i.start) as f64 / MS as f64;
    }
    t
}

fn hog(name: &str) -> Vm {
    Vm {
        repeat: true,
        ..Vm::new(name, 1, serial(50.0))
    }
}

#[test]
fn aash_shares_the_fast_core_where_credit_leaves_one_vcpu_on_it() {
    // Two equal CPU-bound VMs on 1 fast + 1 slow core for 600 ms. Credit never moves them:
    // vCPU 0 keeps the fast core. AASH rotates every 30 ms accounting: the holder keeps it on a
    // tie, so each holds it 60 ms at a time after the first 30 ms: 300 ms each.
    let host = one_fast_one_slow();
    let vms = [hog("a"), hog("b")];
    let credit = time_on(&run(&host, &vms, "credit", 600), 0);
    assert_eq!(credit, vec![600.0, 0.0]);
    let r = run(&host, &vms, "aash", 600);
    let fast = time_on(&r, 0);
    assert_eq!(fast, vec![300.0, 300.0]);
    // And the slow core was never idle: both ran all the time.
    assert_eq!(r.core_busy_ns, vec![600 * MS, 600 * MS]);
    // Fairer fast-core time is more work for the VM Credit left on the slow core.
    let work = |r: &SimResult, v: usize| r.vcpus[v].work_done / 1e6;
    let credit_run = run(&host, &vms, "credit", 600);
    assert!((work(&credit_run, 1) - 600.0).abs() < 1e-3);
    assert!((work(&r, 1) - 900.0).abs() < 1e-3, "{}", work(&r, 1));
}

#[test]
fn aash_gives_the_fast_core_to_a_priority_vm_first() {
    // VM "b" (vCPU 1) has fast-core priority: it takes the fast core at time 0 and keeps it.
    let host = one_fast_one_slow();
    let vms = [
        hog("a"),
        Vm {
            fast_priority: true,
            ..hog("b")
        },
    ];
    let r = run(&host, &vms, "aash", 600);
    let first = r.intervals.iter().find(|i| i.core == 0).unwrap();
    assert_eq!((first.vcpu, first.start), (1, 0));
    assert_eq!(time_on(&r, 0), vec![0.0, 600.0]);
    // Two priority VMs and one other on 1 fast + 2 slow cores: the priority ones share the fast
    // core; the other never gets it.
    let mut host = one_fast_one_slow();
    host.cores.push(host.cores[1]);
    let vms = [
        hog("a"),
        Vm {
            fast_priority: true,
            ..hog("b")
        },
        Vm {
            fast_priority: true,
            ..hog("c")
        },
    ];
    let fast = time_on(&run(&host, &vms, "aash", 600), 0);
    assert_eq!(fast[0], 0.0);
    assert!(
        (fast[1] - 300.0).abs() <= 30.0 && (fast[2] - 300.0).abs() <= 30.0,
        "{fast:?}"
    );
}

#[test]
fn aash_is_credit_on_a_symmetric_host() {
    let host = Host::symmetric(2);
    let vms = [
        hog("a"),
        Vm::new("p", 2, parallel(20, 3.0, 50.0)),
        Vm {
            fast_priority: true,
            ..hog("b")
        },
    ];
    let credit = run(&host, &vms, "credit", 500);
    let aash = run(&host, &vms, "aash", 500);
    assert_eq!(credit.intervals, aash.intervals);
    assert_eq!(credit.completions, aash.completions);
}

/// The spec001-sketch preset, shortened, with every VM's work drawn at `work_cv`.
fn sketch_with_cv(work_cv: f64) -> Scenario {
    let mut sc = crate::run::preset("spec001-sketch").unwrap();
    sc.horizon_ms = 2000.0;
    for vm in &mut sc.vms {
        vm.work_cv = work_cv;
    }
    sc
}

#[test]
fn a_seed_gives_one_run_and_seeds_differ_only_with_work_cv() {
    use crate::run::run as run_named;
    for name in ["credit", "aash"] {
        // Debug text, as NaN (no flow) is not equal to itself.
        let same = |a: &crate::run::RunResult, b: &crate::run::RunResult| {
            format!("{:?}", a.vms) == format!("{:?}", b.vms)
        };
        let sc = sketch_with_cv(0.3);
        let a = run_named(&sc, name, 1).unwrap();
        assert!(same(&a, &run_named(&sc, name, 1).unwrap()), "{name}");
        let b = run_named(&sc, name, 2).unwrap();
        for vm in 0..4 {
            assert_ne!(
                a.vms[vm].mean_completion_ms, b.vms[vm].mean_completion_ms,
                "{name} vm {vm}"
            );
        }
        // No spread asked: every seed gives the same run (only the seed field differs).
        let sc = sketch_with_cv(0.0);
        let a = run_named(&sc, name, 1).unwrap();
        let b = run_named(&sc, name, 2).unwrap();
        assert!(same(&a, &b), "{name}");
    }
}

#[test]
fn drawn_work_keeps_its_mean_and_spread() {
    // One vCPU alone on a core runs 10 ms programs back to back for 10 s: each completion time
    // is its program's work. With CV 0.5, ~1000 programs: the mean within 0.8 ms of 10 (five
    // standard errors) and the CV within 0.1 of 0.5.
    let host = Host::symmetric(1);
    for seed in 1..=4 {
        let vm = Vm {
            repeat: true,
            work_cv: 0.5,
            ..Vm::new("s", 1, serial(10.0))
        };
        let topo = Topology::new(&host, std::slice::from_ref(&vm));
        let cfg = RunConfig {
            horizon: 10_000 * MS,
            record_intervals: true,
            seed,
            net_quantum: NET_QUANTUM,
            shuffle_start: false,
        };
        let mut credit = Credit::new(&topo, CreditParams::default());
        let r = simulate(&host, std::slice::from_ref(&vm), &mut credit, &cfg);
        check_invariants(&host, &r);
        let t: Vec<f64> = (r.completions.iter())
            .map(|c| (c.finished - c.started) as f64 / MS as f64)
            .collect();
        let n = t.len() as f64;
        let mean = t.iter().sum::<f64>() / n;
        let sd = (t.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt();
        assert!(n > 900.0, "{n}");
        assert!((mean - 10.0).abs() < 0.8, "seed {seed}: mean {mean}");
        assert!(
            (sd / mean - 0.5).abs() < 0.1,
            "seed {seed}: cv {}",
            sd / mean
        );
    }
}

#[test]
fn drawn_phases_make_threads_wait_at_barriers() {
    // Two threads on two cores with equal phases arrive together and never spin; with drawn
    // phase lengths one waits for the other at almost every barrier.
    let host = Host::symmetric(2);
    let vm = |work_cv| Vm {
        work_cv,
        ..Vm::new("p", 2, parallel(50, 2.0, 10_000.0))
    };
    let even = run(&host, &[vm(0.0)], "credit", 1_000);
    assert_eq!(even.vcpus[0].spin_ns + even.vcpus[1].spin_ns, 0);
    let drawn = run(&host, &[vm(0.3)], "credit", 1_000);
    assert!(drawn.vcpus[0].spin_ns + drawn.vcpus[1].spin_ns > 10 * MS);
    assert!(drawn.completions[0].finished > even.completions[0].finished);
}

#[test]
fn shuffle_start_draws_the_start_order_from_the_seed() {
    // Four hogs on one core under Credit: the vCPU admitted first runs first. By index it is
    // always vCPU 0; shuffled, the seed picks it, and the same seed picks the same one.
    let host = Host::symmetric(1);
    let vms = [hog("a"), hog("b"), hog("c"), hog("d")];
    let topo = Topology::new(&host, &vms);
    let first = |seed: u64, shuffle_start: bool| {
        let cfg = RunConfig {
            horizon: 10 * MS,
            record_intervals: true,
            seed,
            net_quantum: NET_QUANTUM,
            shuffle_start,
        };
        let mut credit = Credit::new(&topo, CreditParams::default());
        simulate(&host, &vms, &mut credit, &cfg).intervals[0].vcpu
    };
    assert!((0..8).all(|seed| first(seed, false) == 0));
    let drawn: std::collections::BTreeSet<_> = (0..8).map(|seed| first(seed, true)).collect();
    assert!(
        drawn.len() > 1,
        "eight seeds drew one start order: {drawn:?}"
    );
    assert_eq!(first(5, true), first(5, true));
}

#[test]
fn ia_rotate_gives_equal_vms_equal_scaled_work() {
    // One fast core (SF 1.5) and one slow, three always-busy 1-vCPU VMs of equal weight, 3 s
    // (30 cycles of 100 ms). Each cycle two VMs share the fast core (0.75 each) and one has the
    // slow core alone (1.0): D = 0.25 cycle = 25 ms of work. decide::rotate's bound says the
    // VMs' work differs by at most D over the run (the pure model); EEVDF's sharing of the fast
    // core is what it measured, so allow one 4 ms tick of the fast core on top.
    let host = Host::with_speeds(&[1.5, 1.0]);
    let vms: Vec<Vm> = (0..3)
        .map(|i| Vm {
            repeat: true,
            ..Vm::new(&format!("h{i}"), 1, serial(50.0))
        })
        .collect();
    let work = |r: &SimResult| -> Vec<f64> { r.vcpus.iter().map(|v| v.work_done / 1e6).collect() };
    let spread = |w: &[f64]| {
        w.iter().cloned().fold(f64::MIN, f64::max) - w.iter().cloned().fold(f64::MAX, f64::min)
    };
    let r = run(&host, &vms, "ia-rotate", 3_000);
    let w = work(&r);
    println!("ia-rotate work ms: {w:?}");
    // The host did its 3 s · 2.5 of work, all of it.
    assert!((w.iter().sum::<f64>() - 7_500.0).abs() < 1.0, "{w:?}");
    assert!(spread(&w) <= 25.0 + 6.0, "{w:?}");
    // Plain EEVDF (no pinning) balances thread counts, not speed: here the two VMs that share
    // the fast core keep sharing it, 2,250 ms against 3,000 for the one alone on the slow core.
    let e = work(&run(&host, &vms, "eevdf", 3_000));
    println!("eevdf work ms: {e:?}");
    assert!(spread(&e) > 500.0, "{e:?}");
    // Weights 2 : 1 : 1. decide::rotate's measured bound across weights: 2 cycles of a unit of
    // weight's due, g = 100 ms · 2.5 / 4 = 62.5 ms of work, per unit of weight.
    let mut weighted = vms.clone();
    weighted[0].weight = 512.0;
    let w = work(&run(&host, &weighted, "ia-rotate", 3_000));
    println!("ia-rotate 2:1:1 work ms: {w:?}");
    assert!(spread(&[w[0] / 2.0, w[1], w[2]]) <= 125.0, "{w:?}");
    assert!(w[0] > 3_500.0, "more than an equal share (2,500): {w:?}");
}

#[test]
fn ia_rotate_keeps_the_invariants_when_it_moves_vcpus_often() {
    // 5 ms cycles on random hosts and VMs: many placements, threads moved while running,
    // blocked or spinning; the engine's invariants hold and threads did move.
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(48));
    let strategy = (arb_host(), prop::collection::vec(arb_vm(), 2..5));
    runner
        .run(&strategy, |(host, vms)| {
            let usable = host.cores.iter().filter(|c| !c.reserved).count();
            prop_assume!(vms.iter().all(|v| v.vcpus <= usable));
            let topo = Topology::new(&host, &vms);
            let params = RotateParams {
                cycle_ns: 5 * MS,
                ..RotateParams::default()
            };
            let mut s = IaRotate::new(&topo, params).unwrap();
            let cfg = RunConfig {
                horizon: 300 * MS,
                record_intervals: true,
                seed: 0,
                net_quantum: NET_QUANTUM,
                shuffle_start: false,
            };
            let r = simulate(&host, &vms, &mut s, &cfg);
            check_invariants(&host, &r);
            for &busy in &r.core_busy_ns {
                prop_assert!(busy <= r.end);
            }
            // Pinning: within a cycle each vCPU runs on one core only, and two vCPUs of one VM
            // never on the same core (principle 1).
            let cycles = (r.end / (5 * MS) + 1) as usize;
            let mut core_in = vec![vec![None; cycles]; topo.vcpus.len()];
            for i in &r.intervals {
                for k in (i.start / (5 * MS))..=((i.end - 1) / (5 * MS)) {
                    let seen = &mut core_in[i.vcpu][k as usize];
                    prop_assert!(seen.is_none() || *seen == Some(i.core), "{i:?} cycle {k}");
                    *seen = Some(i.core);
                }
            }
            for a in 0..topo.vcpus.len() {
                for b in a + 1..topo.vcpus.len() {
                    if topo.vcpus[a].vm != topo.vcpus[b].vm {
                        continue;
                    }
                    for (k, (ca, cb)) in core_in[a].iter().zip(&core_in[b]).enumerate() {
                        prop_assert!(ca.is_none() || ca != cb, "cycle {k}: vCPUs {a}, {b}");
                    }
                }
            }
            Ok(())
        })
        .unwrap();
}

/// Issue 26: a network VM with no CPU work, alone on an idle 6-core host, takes UDP at the
/// offered rate up to the link's cap, under every scheduler and whatever the network quantum
/// (it was capped at one packet per quantum: 12 Mbit/s at 1 ms, 120 at 0.1 ms).
#[test]
fn a_network_vm_without_cpu_work_drains_at_the_offered_rate_whatever_the_quantum() {
    for (rate, cap) in [(150.0, 1000.0), (150.0, 100.0), (400.0, 1000.0)] {
        for quantum in ["1", "0.1", "0.02"] {
            let text = format!(
                "horizon_ms = 2000\nnet_quantum_ms = {quantum}\n[[cores]]\ncount = 6\n\
                 [[vms]]\nname = \"u\"\nvcpus = 2\nworkload = \"network\"\nprotocol = \"udp\"\n\
                 rate_mbit_s = {rate}\ndelay_ms = 5\ncap_mbit_s = {cap}\ncpu_us_per_packet = 5\n"
            );
            let s = Scenario::parse(&text).unwrap();
            // What the link lets through after its delay, over the run.
            let expected = f64::min(rate, cap) * (2000.0 - 5.0) / 2000.0;
            for name in crate::run::SCHEDULERS {
                let r = crate::run::run(&s, name, 1).unwrap();
                let got = r.vms[0].throughput_mbit_s;
                assert!(
                    (got - expected).abs() < 0.02 * expected,
                    "{name}, {rate} Mbit/s, cap {cap}, quantum {quantum} ms: {got} Mbit/s"
                );
                assert_eq!(r.vms[0].ring_drops, 0, "{name} {quantum}");
                // Each packet costs its 5 µs once: CPU time = packets × 5 µs (± a quantum's).
                let packets = got * 2.0 / PACKET_MBIT;
                let cpu = packets * 0.005;
                assert!(
                    (r.vms[0].run_ms - cpu).abs() < 0.02 * cpu + 1.0,
                    "{name} {quantum}: {} ms of CPU for {packets} packets",
                    r.vms[0].run_ms
                );
            }
        }
    }
}

/// Megabits per 1500-byte packet.
const PACKET_MBIT: f64 = super::net::PACKET_BITS / 1e6;

/// A host of `speeds` with `n` VMs of `width` vCPUs and equal weight: every `k`-th a parallel
/// program (500 ms of work per thread in phases of `phase_ms`, spinning `spin_us` at barriers),
/// the others serial (500 ms, memory intensity 0.2), with drawn start order and program lengths.
fn equal_vms(
    speeds: &[f64],
    n: usize,
    width: usize,
    k: usize,
    phase_ms: f64,
    spin_us: f64,
) -> Scenario {
    let mut host = Host::with_speeds(speeds);
    host.migration_warmup_ms = 0.5;
    let vms = (0..n)
        .map(|i| {
            let workload = if i % k == 0 {
                parallel((500.0 / phase_ms) as u32, phase_ms, spin_us)
            } else {
                Workload::Serial {
                    work_ms: 500.0,
                    mem_intensity: 0.2,
                }
            };
            Vm {
                repeat: true,
                work_cv: 0.2,
                ..Vm::new(&format!("vm{i}"), width, workload)
            }
        })
        .collect();
    Scenario {
        name: "equal-vms".into(),
        horizon_ms: 10_000.0,
        net_quantum_ms: 1.0,
        shuffle_start: true,
        host,
        vms,
        diff: Default::default(),
    }
}

/// Issue 26's many-gangs host: 2 fast cores (speed 2) and 6 slow ones, 9 parallel VMs (facesim:
/// 250 phases of 2 ms, 1 ms spins) and 9 serial ones, every VM 2 vCPUs of equal weight,
/// interleaved, with drawn start order and program lengths.
fn many_gangs(horizon_ms: f64) -> Scenario {
    let speeds = [2.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
    Scenario {
        name: "many-gangs".into(),
        horizon_ms,
        ..equal_vms(&speeds, 18, 2, 2, 2.0, 1000.0)
    }
}

/// Each VM's CPU time and scaled CPU time (time × core speed: the SR it consumed, spec 001's
/// measure of a VM's share) in ms, in `sc` under IA with `seed`.
fn ia_cpu_per_vm(sc: &Scenario, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let topo = Topology::new(&sc.host, &sc.vms);
    let cfg = RunConfig {
        horizon: (sc.horizon_ms * MS as f64) as Nanos,
        record_intervals: true,
        seed,
        net_quantum: NET_QUANTUM,
        shuffle_start: sc.shuffle_start,
    };
    let mut ia = Ia::new(&topo, IaSchedParams::default()).unwrap();
    let r = simulate(&sc.host, &sc.vms, &mut ia, &cfg);
    check_invariants(&sc.host, &r);
    let (mut time, mut scaled) = (vec![0.0; sc.vms.len()], vec![0.0; sc.vms.len()]);
    for i in &r.intervals {
        let t = (i.end - i.start) as f64 / MS as f64;
        time[topo.vcpus[i.vcpu].vm] += t;
        scaled[topo.vcpus[i.vcpu].vm] += t * sc.host.cores[i.core].speed;
    }
    (time, scaled)
}

/// The largest relative distance of `xs` from their mean.
fn worst_from_mean(xs: &[f64]) -> f64 {
    let mean = xs.iter().sum::<f64>() / xs.len() as f64;
    xs.iter()
        .map(|x| (x / mean - 1.0).abs())
        .fold(0.0, f64::max)
}

/// Issue 26: with more gangs than cores, IA keeps every equal-weight VM's CPU time within 10 %
/// of the mean and its scaled CPU (time × core speed, the SR it consumed) too, and still runs
/// the parallel programs faster than Credit.
///
/// Both are IA's guarantee among equal weights (docs/host-sim.md, "Fairness among equal
/// weights"): SR equalises work (scaled CPU), and fast-core shares equalise each VM's
/// fast-core time, so CPU time is equal as well. Before (main at dd0948e): CPU time 15.6–27.5 %
/// off the mean, scaled 9.5–13.1 %, parallel 1.03–1.07 × Credit — the parallel VMs' gangs
/// were split over a fast and a slow core, the fast sibling's SR sank (it paid SF for gang
/// slots) while the slow one's piled up behind barriers, and the parallel VMs held 1.3–2.1 s
/// of fast-core time each against 0.3–0.75 s for the serial ones. Now (seeds 1–4, 10 s,
/// `cargo test --release -p colosched-host --lib many_equal_gangs -- --nocapture`): CPU time
/// 2.9–3.5 % off the mean, scaled 0.4–0.9 %, parallel 0.969–0.998 × Credit.
#[test]
fn ia_is_fair_among_many_equal_gangs_and_keeps_its_lead_on_parallel_programs() {
    let sc = many_gangs(10_000.0);
    let mut failures = Vec::new();
    for seed in 1..=4 {
        let (time, scaled) = ia_cpu_per_vm(&sc, seed);
        let ratio = ia_over_credit_on_parallel(&sc, seed);
        let (wt, ws) = (worst_from_mean(&time), worst_from_mean(&scaled));
        println!(
            "seed {seed}: worst from mean: cpu {:.1} %, scaled cpu {:.1} %; \
             parallel programs ia/credit {ratio:.3}\n  cpu {time:.0?}\n  scaled {scaled:.0?}",
            100.0 * wt,
            100.0 * ws
        );
        if wt > 0.10 || ws > 0.10 || ratio >= 1.0 {
            failures.push(format!(
                "seed {seed}: cpu {wt:.3}, scaled {ws:.3}, ratio {ratio:.3}"
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:?}");
}

/// The geometric mean over the parallel programs of IA's completion time over Credit's.
fn ia_over_credit_on_parallel(sc: &Scenario, seed: u64) -> f64 {
    let ia = crate::run::run(sc, "ia", seed).unwrap();
    let credit = crate::run::run(sc, "credit", seed).unwrap();
    let parallel: Vec<f64> = crate::spec001::normalised(&ia, &credit)
        .into_iter()
        .filter_map(|(p, x)| p.then_some(x))
        .collect();
    crate::spec001::geomean(&parallel)
}

/// Issue 26's fairness on hosts the change was not tuned on (written after it, run once):
/// other sizes, core speeds, VM widths and programs, seeds 1–3. Every VM's CPU time and scaled
/// CPU within 10 % of the mean, except where the guarantee does not reach: on one fast core a
/// 2-vCPU gang cannot run on the fast class (principle 1), takes no fast-core share and gets
/// only slow-core time, so more CPU time for its equal work; there the serial VMs' CPU time and
/// everyone's scaled CPU are checked. The parallel lead over Credit is checked only on the host
/// with 20 ms phases: with 1–2 ms phases IA does not keep it there, before or after the change
/// (docs/host-sim.md, "Fairness among equal weights").
#[test]
fn ia_keeps_equal_weight_vms_fair_on_hosts_it_was_not_tuned_on() {
    let fast2 = [1.8, 1.8, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
    let fast3 = [1.5, 1.5, 1.5, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
    let speed2 = [2.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
    // (scenario, whether the lead is asserted)
    let cases = [
        (equal_vms(&fast2, 24, 2, 2, 1.0, 1000.0), false),
        (equal_vms(&speed2, 12, 2, 3, 20.0, 200.0), true),
        (equal_vms(&fast3, 16, 3, 2, 2.0, 1000.0), false),
        (
            equal_vms(&[2.0, 1.0, 1.0, 1.0], 12, 2, 3, 10.0, 1000.0),
            false,
        ),
    ];
    let mut failures = Vec::new();
    for (case, (sc, lead)) in cases.iter().enumerate() {
        for seed in 1..=3 {
            let (time, scaled) = ia_cpu_per_vm(sc, seed);
            let ratio = ia_over_credit_on_parallel(sc, seed);
            let n_fast = sc.host.cores.iter().filter(|c| c.speed > 1.0).count();
            let covered: Vec<f64> = (0..sc.vms.len())
                .filter(|&i| {
                    crate::decide::ia::shares_fast_cores(
                        sc.vms[i].vcpus,
                        matches!(sc.vms[i].workload, Workload::Parallel { .. }),
                        n_fast,
                    )
                })
                .map(|i| time[i])
                .collect();
            let (wt, ws) = (worst_from_mean(&covered), worst_from_mean(&scaled));
            println!(
                "case {case} seed {seed}: cpu {:.1} % ({} of {} VMs), scaled {:.1} %, \
                 parallel ia/credit {ratio:.3}",
                100.0 * wt,
                covered.len(),
                sc.vms.len(),
                100.0 * ws
            );
            if wt > 0.10 || ws > 0.10 || (*lead && ratio >= 1.0) {
                failures.push(format!(
                    "case {case} seed {seed}: cpu {wt:.3}, scaled {ws:.3}, ratio {ratio:.3}"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:?}");
}
