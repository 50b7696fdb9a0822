//! One scenario under one scheduler, summarised per VM: what `colosched sim host` and the Python
//! API run. Schedulers are chosen by name here, and the papers' scenarios are bundled as presets.

use crate::decide::rotate::RotateParams;
use crate::sim::net::{NetStats, PACKET_BITS};
use crate::sim::sched::{
    Aash, Credit, CreditParams, Diff, Eevdf, EevdfParams, Ia, IaRotate, IaSchedParams,
    PoolScheduler,
};
use crate::sim::MS;
use colosched_sys::config::ConfigError;
use serde::Serialize;

use crate::sim::{simulate, RunConfig, Scenario, Scheduler, SimResult, Topology};

/// Every scheduler `scheduler` builds, in the order `all` runs them.
pub const SCHEDULERS: &[&str] = &[
    "credit",
    "eevdf",
    "ia",
    "aash",
    "diff",
    "diff-eevdf",
    "ia-rotate",
];

/// Scenarios bundled with colosched, by name: (name, TOML text).
pub const PRESETS: &[(&str, &str)] = &[
    (
        "spec001-sketch",
        include_str!("../scenarios/spec001-sketch.toml"),
    ),
    ("spec001-w1", include_str!("../scenarios/spec001-w1.toml")),
    ("spec001-w2", include_str!("../scenarios/spec001-w2.toml")),
    ("spec001-w3", include_str!("../scenarios/spec001-w3.toml")),
    ("spec001-w4", include_str!("../scenarios/spec001-w4.toml")),
    (
        "spec001-fair-blackscholes",
        include_str!("../scenarios/spec001-fair-blackscholes.toml"),
    ),
    (
        "spec001-fair-fluidanimate",
        include_str!("../scenarios/spec001-fair-fluidanimate.toml"),
    ),
    (
        "spec001-fair-facesim",
        include_str!("../scenarios/spec001-fair-facesim.toml"),
    ),
    (
        "spec001-fair-libquantum",
        include_str!("../scenarios/spec001-fair-libquantum.toml"),
    ),
    (
        "spec001-fair-calculix",
        include_str!("../scenarios/spec001-fair-calculix.toml"),
    ),
    (
        "spec001-fair-namd",
        include_str!("../scenarios/spec001-fair-namd.toml"),
    ),
    (
        "spec002-queue1",
        include_str!("../scenarios/spec002-queue1.toml"),
    ),
    (
        "spec002-queue2",
        include_str!("../scenarios/spec002-queue2.toml"),
    ),
];

/// A bundled scenario by name.
pub fn preset(name: &str) -> Option<Scenario> {
    let (_, text) = PRESETS.iter().find(|(n, _)| *n == name)?;
    Some(Scenario::parse(text).expect("bundled scenarios parse"))
}

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("unknown scheduler {name:?} (known: {})", SCHEDULERS.join(", "))]
    UnknownScheduler { name: String },
    /// The scheduler cannot run this scenario (`Scenario::check_for`).
    #[error(transparent)]
    Scenario(#[from] ConfigError),
    /// The scheduler refused the host or its VMs (`ia`'s and `ia-rotate`'s mapping).
    #[error("{scheduler}: {problem}")]
    Refused {
        scheduler: &'static str,
        problem: String,
    },
}

/// The scheduler called `name`, built for the scenario's VMs on its host, with its default
/// parameters and the scenario's `[diff]` (seed 0 for those that draw random numbers).
pub fn scheduler(name: &str, scenario: &Scenario) -> Result<Box<dyn Scheduler>, RunError> {
    scheduler_seeded(name, scenario, 0)
}

/// `scheduler`, with the seed of the random numbers some schedulers draw (`diff`'s leftover CPU).
pub fn scheduler_seeded(
    name: &str,
    scenario: &Scenario,
    seed: u64,
) -> Result<Box<dyn Scheduler>, RunError> {
    let (host, vms) = (&scenario.host, &scenario.vms);
    let topo = Topology::new(host, vms);
    let refused = |scheduler| {
        move |e: crate::decide::ia::MappingError| RunError::Refused {
            scheduler,
            problem: e.to_string(),
        }
    };
    let diff = |pool: PoolScheduler| Diff::new(&topo, scenario.diff_params(), pool, seed);
    Ok(match name {
        "credit" => Box::new(Credit::new(&topo, CreditParams::default())),
        "eevdf" => Box::new(Eevdf::new(&topo, EevdfParams::linux(host.cores.len()))),
        "ia" => Box::new(Ia::new(&topo, IaSchedParams::default()).map_err(refused("ia"))?),
        "aash" => Box::new(Aash::new(&topo, CreditParams::default())),
        "diff" => Box::new(diff(PoolScheduler::Credit)),
        "diff-eevdf" => Box::new(diff(PoolScheduler::Eevdf)),
        "ia-rotate" => {
            Box::new(IaRotate::new(&topo, RotateParams::default()).map_err(refused("ia-rotate"))?)
        }
        _ => {
            return Err(RunError::UnknownScheduler {
                name: name.to_string(),
            })
        }
    })
}

/// One VM's results in one run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct VmResult {
    pub vm: String,
    pub vcpus: usize,
    pub workload: &'static str,
    /// Programs completed (serial: one per vCPU and run; parallel: one per run of the VM).
    pub completions: usize,
    /// Their mean completion time (NaN if none completed before the horizon).
    pub mean_completion_ms: f64,
    /// Time its vCPUs were on a core, computing and spinning at barriers.
    pub run_ms: f64,
    pub spin_ms: f64,
    /// Work done, in milliseconds of a speed-1 core.
    pub work_ms: f64,
    pub migrations: u64,
    /// Network VMs (NaN or 0 otherwise): data the guest took from its RX ring, in Mbit/s over
    /// the run (1500-byte frames).
    pub throughput_mbit_s: f64,
    /// Packets that found the RX ring full, and that the link's shaper queue refused.
    pub ring_drops: u64,
    pub link_drops: u64,
    /// ICMP echo round trips: answered / sent, mean, median and 99th percentile (nearest rank).
    pub pings_answered: u64,
    pub pings_sent: u64,
    pub ping_mean_ms: f64,
    pub ping_p50_ms: f64,
    pub ping_p99_ms: f64,
    /// Every answered ping's round trip, in ms, in the order the replies arrived (empty for VMs
    /// without pings): the latency CDF's samples.
    pub ping_rtts_ms: Vec<f64>,
}

/// One run: a scenario under a scheduler.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunResult {
    pub scenario: String,
    pub scheduler: String,
    pub seed: u64,
    /// When the run stopped (the horizon, or when every program had completed).
    pub end_ms: f64,
    pub events: u64,
    pub vms: Vec<VmResult>,
}

/// Runs `scenario` under the scheduler called `name`. `seed` drives the workloads' random draws
/// (VMs with a `work_cv`) and those of the schedulers that make some (`diff`'s leftover CPU).
pub fn run(scenario: &Scenario, name: &str, seed: u64) -> Result<RunResult, RunError> {
    scenario.check_for(name)?;
    let mut s = scheduler_seeded(name, scenario, seed)?;
    Ok(run_with(scenario, s.as_mut(), seed))
}

/// Runs `scenario` under a scheduler built by the caller (for parameters other than the
/// defaults, as spec 001's sensitivity sweep needs); `seed` is recorded as `run` does.
pub fn run_with(scenario: &Scenario, sched: &mut dyn Scheduler, seed: u64) -> RunResult {
    let cfg = RunConfig {
        horizon: (scenario.horizon_ms * MS as f64) as u64,
        record_intervals: false,
        seed,
        net_quantum: (scenario.net_quantum_ms * MS as f64).round() as u64,
        shuffle_start: scenario.shuffle_start,
    };
    let r = simulate(&scenario.host, &scenario.vms, sched, &cfg);
    RunResult {
        scenario: scenario.name.clone(),
        scheduler: sched.name().to_string(),
        seed,
        end_ms: r.end as f64 / MS as f64,
        events: r.events,
        vms: per_vm(scenario, &r),
    }
}

fn per_vm(scenario: &Scenario, r: &SimResult) -> Vec<VmResult> {
    let topo = Topology::new(&scenario.host, &scenario.vms);
    let ms = |ns: u64| ns as f64 / MS as f64;
    (scenario.vms.iter().enumerate())
        .map(|(i, vm)| {
            let times: Vec<f64> = (r.completions.iter())
                .filter(|c| c.vm == i)
                .map(|c| ms(c.finished - c.started))
                .collect();
            let stats: Vec<_> = topo.vcpus_of(i).into_iter().map(|v| r.vcpus[v]).collect();
            let none = NetStats::default();
            let net = r.net[i].as_ref();
            let n = net.unwrap_or(&none);
            let rtts = n.ping_ms.clone();
            let mut pings = rtts.clone();
            pings.sort_by(f64::total_cmp);
            let seconds = r.end as f64 / 1e9;
            VmResult {
                vm: vm.name.clone(),
                vcpus: vm.vcpus,
                workload: vm.workload.kind(),
                throughput_mbit_s: match net {
                    Some(n) if seconds > 0.0 => n.delivered as f64 * PACKET_BITS / seconds / 1e6,
                    _ => f64::NAN,
                },
                ring_drops: n.ring_drops,
                link_drops: n.link_drops,
                pings_answered: pings.len() as u64,
                pings_sent: n.pings_sent,
                ping_mean_ms: pings.iter().sum::<f64>() / pings.len() as f64,
                ping_p50_ms: percentile(&pings, 0.5),
                ping_p99_ms: percentile(&pings, 0.99),
                ping_rtts_ms: rtts,
                completions: times.len(),
                mean_completion_ms: times.iter().sum::<f64>() / times.len() as f64,
                run_ms: stats.iter().map(|s| ms(s.compute_ns + s.spin_ns)).sum(),
                spin_ms: stats.iter().map(|s| ms(s.spin_ns)).sum(),
                work_ms: stats.iter().map(|s| s.work_done).sum::<f64>() / MS as f64,
                migrations: stats.iter().map(|s| s.migrations as u64).sum(),
            }
        })
        .collect()
}

/// Nearest-rank percentile of sorted values (NaN when empty).
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scheduler_runs_the_preset_and_reports_each_vm() {
        let mut sc = preset("spec001-sketch").unwrap();
        sc.horizon_ms = 2000.0;
        for name in SCHEDULERS {
            let r = run(&sc, name, 7).unwrap();
            assert_eq!((r.scheduler.as_str(), r.seed, r.vms.len()), (*name, 7, 4));
            assert!(r.end_ms <= 2000.0 + 1e-6 && r.events > 0, "{r:?}");
            let s6 = &r.vms[2];
            assert_eq!((s6.vm.as_str(), s6.vcpus, s6.workload), ("s6", 6, "serial"));
            // 500 ms programs on 6 slow cores and a busy host: done within 2 s, some of them.
            assert!(
                s6.completions >= 6 && s6.mean_completion_ms >= 500.0,
                "{s6:?}"
            );
            assert!(r.vms[3].spin_ms > 0.0 && r.vms[3].workload == "parallel");
            // The host's 8 cores can give at most 8 × 2 s of time, at speed ≤ 1.8.
            let run: f64 = r.vms.iter().map(|v| v.run_ms).sum();
            assert!(run <= 8.0 * 2000.0 + 1e-6, "{run}");
        }
    }

    #[test]
    fn spec002_presets_report_the_flow_and_diff_beats_credit() {
        for name in ["spec002-queue1", "spec002-queue2"] {
            let mut sc = preset(name).unwrap();
            sc.horizon_ms = 4000.0;
            assert_eq!(sc.vms.len(), 6);
            assert_eq!(sc.host.cores.iter().filter(|c| c.reserved).count(), 2);
            if let crate::sim::Workload::Network(n) = &mut sc.vms[0].workload {
                n.protocol = crate::sim::net::Protocol::Udp;
                n.rate_mbit_s = 200.0;
            }
            let credit = run(&sc, "credit", 3).unwrap();
            let diff = run(&sc, "diff", 3).unwrap();
            for r in [&credit, &diff] {
                let vm1 = &r.vms[0];
                assert_eq!(vm1.workload, "network");
                assert!(vm1.throughput_mbit_s > 10.0 && vm1.throughput_mbit_s <= 160.0);
                assert!(vm1.pings_sent >= 39 && vm1.pings_answered <= vm1.pings_sent);
                assert_eq!(vm1.ping_rtts_ms.len() as u64, vm1.pings_answered);
                let other = &r.vms[1];
                assert!(other.throughput_mbit_s.is_nan() && other.ping_mean_ms.is_nan());
                assert_eq!((other.ring_drops, other.pings_sent), (0, 0));
                assert!(other.ping_rtts_ms.is_empty());
            }
            assert!(credit.vms[0].ring_drops > 0);
            assert!(
                diff.vms[0].throughput_mbit_s > credit.vms[0].throughput_mbit_s,
                "{name}: {} vs {}",
                diff.vms[0].throughput_mbit_s,
                credit.vms[0].throughput_mbit_s
            );
            assert!(diff.vms[0].ring_drops < credit.vms[0].ring_drops);
        }
    }

    /// An echo VM (pings, no delay, `cost_us` per request) on the one usable core, with `hogs`
    /// CPU hogs, under `eevdf` with 10 µs network quanta, pinged as `gaps` says (its
    /// `ping_interval_ms` and `ping_jitter` lines) for `horizon_ms`: its ping round trips, sorted.
    fn echo_rtts(hogs: usize, slice: &str, cost_us: f64, gaps: &str, horizon_ms: u32) -> Vec<f64> {
        let mut text = format!(
            "horizon_ms = {horizon_ms}\nnet_quantum_ms = 0.01\n[[cores]]\ncount = 1\n\
             reserved = true\n[[cores]]\ncount = 1\n[[vms]]\nname = \"echo\"\nvcpus = 1\n\
             workload = \"network\"\nprotocol = \"icmp\"\ndelay_ms = 0\ncap_mbit_s = 10000\n\
             cpu_us_per_packet = {cost_us}\n{gaps}\n{slice}\n"
        );
        for i in 0..hogs {
            text += &format!(
                "[[vms]]\nname = \"hog{i}\"\nvcpus = 1\nrepeat = true\nworkload = \"serial\"\n\
                 work_ms = 1000\n"
            );
        }
        let r = run(&Scenario::parse(&text).unwrap(), "eevdf", 1).unwrap();
        let mut rtts = r.vms[0].ping_rtts_ms.clone();
        assert!(rtts.len() as u32 >= horizon_ms / 120, "{rtts:?}");
        rtts.sort_by(f64::total_cmp);
        rtts
    }

    const EVERY_100_MS: &str = "ping_interval_ms = 100.04";

    #[test]
    fn a_fine_quantum_resolves_the_wake_up_wait_and_a_short_slice_cuts_it() {
        // Alone: the ping arrives, the vCPU wakes and drains it at once; the reply is seen two
        // quanta later.
        let alone = echo_rtts(0, "", 5.0, EVERY_100_MS, 5000);
        assert!(alone.iter().all(|&t| t <= 0.03 + 1e-9), "{alone:?}");
        // Beside one hog the woken VM has more lag than the hog and preempts it at once.
        assert_eq!(
            percentile(&echo_rtts(1, "", 5.0, EVERY_100_MS, 5000), 0.99),
            0.02
        );
        // Beside two under the default 1.5 ms slice (2 CPUs): a hog that has just started its
        // slice is eligible and protected (RUN_TO_PARITY), so some waits run to that slice's
        // end, noticed at a 4 ms tick.
        let default = echo_rtts(2, "", 5.0, EVERY_100_MS, 5000);
        let p99 = percentile(&default, 0.99);
        assert!(p99 > 1.0 && p99 <= 4.1, "{default:?}");
        // A 0.5 ms slice breaks the protection and preempts at once (PREEMPT_SHORT).
        let short = echo_rtts(2, "slice_ms = 0.5", 5.0, EVERY_100_MS, 5000);
        assert!(percentile(&short, 0.99) <= 0.05, "{short:?}");
    }

    #[test]
    fn a_short_slice_beside_four_hogs_cuts_the_waits_at_every_request_cost() {
        // Pings at a real client's random gaps (30 ms ± 50 %) for 20 s, ~660 requests, each
        // costing 30–160 µs (what bench/host_validate.py's real server spends): with a 0.5 ms
        // slice fewer requests wait for a hog, and the 90th percentile is lower, at every cost.
        let gaps = "ping_interval_ms = 30\nping_jitter = 0.5";
        let waited = |rtts: &[f64]| rtts.iter().filter(|&&t| t > 1.0).count() as f64;
        for cost in (30..=160).step_by(10) {
            let default = echo_rtts(4, "slice_ms = 1.4", cost as f64, gaps, 20_000);
            let short = echo_rtts(4, "slice_ms = 0.5", cost as f64, gaps, 20_000);
            let (d, s) = (percentile(&default, 0.9), percentile(&short, 0.9));
            assert!(
                waited(&short) < waited(&default) && s < d,
                "{cost} µs: p90 {s} vs {d}"
            );
        }
    }

    #[test]
    fn a_woken_network_vm_spends_each_packet_once_and_drains_at_the_offered_rate() {
        // Alone, 100 µs per ping, 10 pings a second for 5 s: the vCPU runs each request's cost
        // once (it is woken with the waiting packets' work, which drains them).
        let echo = format!("{EVERY_100_MS}\nslice_ms = 1.4");
        let text = |cost: f64| {
            format!(
                "horizon_ms = 5000\nnet_quantum_ms = 0.01\n[[cores]]\ncount = 1\n[[vms]]\n\
                 name = \"echo\"\nvcpus = 1\nworkload = \"network\"\nprotocol = \"icmp\"\n\
                 delay_ms = 0\ncap_mbit_s = 10000\ncpu_us_per_packet = {cost}\n{echo}\n"
            )
        };
        let r = run(&Scenario::parse(&text(100.0)).unwrap(), "eevdf", 1).unwrap();
        let per_ping = r.vms[0].run_ms / r.vms[0].pings_answered as f64;
        assert!(
            (per_ping - 0.1).abs() < 0.005,
            "{per_ping} ms of CPU per ping"
        );
        // UDP at 150 Mbit/s into a VM with no CPU work of its own, alone on 6 cores: the drain
        // keeps up whatever the network quantum (it was one packet a quantum: 12 Mbit/s).
        for quantum in ["1", "0.1"] {
            for sched in SCHEDULERS {
                let text = format!(
                    "horizon_ms = 3000\nnet_quantum_ms = {quantum}\n[[cores]]\ncount = 6\n[[vms]]\n\
                     name = \"rx\"\nvcpus = 2\nworkload = \"network\"\nprotocol = \"udp\"\n\
                     rate_mbit_s = 150\ndelay_ms = 1\ncap_mbit_s = 1000\ncpu_us_per_packet = 5\n"
                );
                let r = run(&Scenario::parse(&text).unwrap(), sched, 1).unwrap();
                let got = r.vms[0].throughput_mbit_s;
                assert!(
                    got > 145.0,
                    "{sched}, {quantum} ms quanta: {got} Mbit/s of 150"
                );
            }
        }
    }

    #[test]
    fn percentiles_by_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!((percentile(&v, 0.5), percentile(&v, 0.99)), (50.0, 99.0));
        assert_eq!(percentile(&[7.0], 0.99), 7.0);
        assert!(percentile(&[], 0.5).is_nan());
    }

    #[test]
    fn unknown_scheduler_and_too_wide_vm_are_refused() {
        let sc = preset("spec001-sketch").unwrap();
        let e = run(&sc, "cfs", 1).unwrap_err();
        assert!(matches!(&e, RunError::UnknownScheduler { name } if name == "cfs"));
        assert!(e
            .to_string()
            .starts_with("unknown scheduler \"cfs\" (known: credit,"));
        let mut wide = sc.clone();
        wide.vms[0].vcpus = 9;
        let e = run(&wide, "ia", 1).unwrap_err();
        assert!(
            matches!(&e, RunError::Scenario(ConfigError::Key { key, .. }) if key == "vms[0].vcpus")
        );
        assert!(preset("nope").is_none());
    }
}
