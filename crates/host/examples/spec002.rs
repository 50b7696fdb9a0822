//! Spec 002's evaluation (Sec. 7): the Queue-1 and Queue-2 presets with VM1 streaming TCP or
//! UDP, under credit, diff, eevdf and diff-eevdf, several seeds. Prints VM1's throughput, drops
//! and ping RTT, and the CPU time each VM got. UDP is offered at 200 Mbit/s (above the
//! 160 Mbit/s cap, as the paper's 194 Mbit/s without a cap implies); "Icmp" is VM1 answering
//! pings with no flow. The presets draw nothing at random, so every seed gives the same run;
//! `spread` draws each seed's vCPU start order (`shuffle_start`) and program lengths
//! (`work_cv` 0.2).
//!
//! `cargo run --release -p colosched-host --example spec002 [horizon_ms] [seeds] [spread]`

use colosched_host::run::{preset, run};
use colosched_host::sim::net::{Protocol, NET_QUANTUM};
use colosched_host::sim::sched::{Diff, DiffParams, PoolScheduler};
use colosched_host::sim::{simulate, RunConfig, Topology, Workload, MS};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let horizon: f64 = args.get(1).map_or(20_000.0, |a| a.parse().unwrap());
    let seeds: u64 = args.get(2).map_or(3, |a| a.parse().unwrap());
    let spread_runs = args.get(3).is_some_and(|a| a == "spread");
    println!("| scenario | flow | scheduler | Mbit/s | ring drops | ping mean | p50 | p99 | pings answered | VM1 CPU share | others' CPU (min–max) | events | wall |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for name in ["spec002-queue1", "spec002-queue2"] {
        for proto in [Protocol::Tcp, Protocol::Udp, Protocol::Icmp] {
            let mut sc = preset(name).unwrap();
            sc.horizon_ms = horizon;
            if spread_runs {
                sc.shuffle_start = true;
                for vm in &mut sc.vms {
                    vm.work_cv = 0.2;
                }
            }
            if let Workload::Network(n) = &mut sc.vms[0].workload {
                n.protocol = proto;
                n.rate_mbit_s = 200.0;
            }
            for sched in ["credit", "diff", "eevdf", "diff-eevdf"] {
                let mut rows = Vec::new();
                let t = std::time::Instant::now();
                for seed in 0..seeds {
                    rows.push(run(&sc, sched, seed).unwrap());
                }
                let wall = t.elapsed().as_secs_f64() / seeds as f64;
                let mean = |f: &dyn Fn(&colosched_host::run::RunResult) -> f64| {
                    rows.iter().map(f).sum::<f64>() / rows.len() as f64
                };
                let spread = |f: &dyn Fn(&colosched_host::run::RunResult) -> f64| {
                    let v: Vec<f64> = rows.iter().map(f).collect();
                    let lo = v.iter().cloned().fold(f64::INFINITY, f64::min);
                    let hi = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    format!("{:.1} ({:.1}–{:.1})", mean(f), lo, hi)
                };
                let end = rows[0].end_ms;
                let others: Vec<f64> = rows[0].vms[1..].iter().map(|v| v.run_ms / end).collect();
                println!(
                    "| {name} | {proto:?} | {sched} | {} | {:.0} | {} | {:.0} | {:.0} | {}/{} | {:.2} | {:.2}–{:.2} | {} | {:.3} s |",
                    spread(&|r| r.vms[0].throughput_mbit_s),
                    mean(&|r| r.vms[0].ring_drops as f64),
                    spread(&|r| r.vms[0].ping_mean_ms),
                    mean(&|r| r.vms[0].ping_p50_ms),
                    mean(&|r| r.vms[0].ping_p99_ms),
                    rows[0].vms[0].pings_answered,
                    rows[0].vms[0].pings_sent,
                    mean(&|r| r.vms[0].run_ms / r.end_ms),
                    others.iter().cloned().fold(f64::INFINITY, f64::min),
                    others.iter().cloned().fold(0.0, f64::max),
                    rows[0].events,
                    wall,
                );
            }
            // Diff's view: in how many windows VM1's rings made it an NSVM under Diff.
            let topo = Topology::new(&sc.host, &sc.vms);
            let mut diff = Diff::new(&topo, DiffParams::default(), PoolScheduler::Credit, 0);
            let cfg = RunConfig {
                horizon: (horizon * MS as f64) as u64,
                record_intervals: false,
                seed: 0,
                net_quantum: NET_QUANTUM,
                shuffle_start: sc.shuffle_start,
            };
            simulate(&sc.host, &sc.vms, &mut diff, &cfg);
            // The rule as written (no hold).
            let mut as_written = Diff::new(
                &topo,
                DiffParams {
                    hold_windows: 0,
                    ..DiffParams::default()
                },
                PoolScheduler::Credit,
                0,
            );
            let r = simulate(&sc.host, &sc.vms, &mut as_written, &cfg);
            let n = r.net[0].as_ref().unwrap();
            eprintln!(
                "{name} {proto:?}: diff without hold: {:.1} Mbit/s, ring drops {}, VM1 in the NSVM pool {}/{} windows, rebuilds {}",
                n.delivered as f64 * 12_000.0 / (r.end as f64 / 1e9) / 1e6,
                n.ring_drops,
                as_written.plans.iter().filter(|(_, p)| p.ns_vms == vec![0]).count(),
                as_written.plans.len(),
                as_written.rebuilds
            );
            let ns = diff
                .plans
                .iter()
                .filter(|(_, p)| p.ns_vms == vec![0])
                .count();
            eprintln!(
                "{name} {proto:?}: diff windows with VM1 in the NSVM pool {ns}/{}, classified by its rings {}, pool rebuilds {}",
                diff.plans.len(),
                diff.nsvm_windows[0],
                diff.rebuilds
            );
        }
    }
}
