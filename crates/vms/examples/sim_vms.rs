//! `cargo run --release -p colosched-vms --example sim_vms -- SCENARIO [SEEDS]`: every policy
//! over seeds 1..=SEEDS; per policy the paper's figures, each the mean over seeds of the ratio
//! to `random` in the same seed, with the smallest and largest. (`colosched sim vms` writes the
//! full tables and the report.)

use colosched_vms::sim::{run, RunResult, Scenario, POLICIES};

fn mean(x: &[f64]) -> f64 {
    if x.is_empty() {
        return f64::NAN;
    }
    x.iter().sum::<f64>() / x.len() as f64
}

/// The run's figures: IOPS per VM, I/O job time, CPU job time, DFSIO throughput, spread
/// applications' logical distance, ZooKeeper ops/s, migrations, their time and slowdown.
fn figures(r: &RunResult) -> [f64; 9] {
    let jobs = |io: bool, f: &dyn Fn(&colosched_vms::sim::engine::JobResult) -> f64| {
        let x: Vec<f64> = (r.jobs.iter())
            .filter(|j| j.measured && j.throughput_mbps.is_some() == io)
            .map(f)
            .collect();
        mean(&x)
    };
    let spread: Vec<f64> = (r.apps.iter())
        .filter(|a| a.kind == "zookeeper")
        .map(|a| a.ld_mean)
        .collect();
    let ops: Vec<f64> = r.apps.iter().filter_map(|a| a.ops_s).collect();
    let m = &r.migrations;
    [
        mean(&r.vms.iter().map(|v| v.iops).collect::<Vec<_>>()),
        jobs(true, &|j| j.time_s),
        jobs(false, &|j| j.time_s),
        jobs(true, &|j| j.throughput_mbps.unwrap_or(f64::NAN)),
        mean(&spread),
        mean(&ops),
        m.len() as f64,
        mean(&m.iter().map(|m| m.time_s).collect::<Vec<_>>()),
        mean(&m.iter().map(|m| m.slowdown).collect::<Vec<_>>()),
    ]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let s = Scenario::load(args.get(1).map_or("spec003-fio-read", String::as_str))
        .unwrap_or_else(|e| panic!("{e}"));
    let seeds: u64 = args.get(2).map_or(5, |x| x.parse().expect("seeds"));
    let runs: Vec<Vec<[f64; 9]>> = (POLICIES.iter())
        .map(|p| {
            (1..=seeds)
                .map(|seed| figures(&run(&s, p, seed).unwrap()))
                .collect()
        })
        .collect();
    let random = POLICIES.iter().position(|p| *p == "random").unwrap();
    let names = [
        "IOPS/VM",
        "I/O job s",
        "CPU job s",
        "DFSIO MB/s",
        "LD",
        "ZK ops/s",
        "migrations",
        "migr. s",
        "slowdown",
    ];
    println!(
        "{} — {seeds} seeds; value mean [min–max]; ×random: per-seed ratio mean [min–max]",
        s.name
    );
    for (k, name) in names.iter().enumerate() {
        for (p, policy) in POLICIES.iter().enumerate() {
            let v: Vec<f64> = runs[p].iter().map(|f| f[k]).collect();
            if v.iter().all(|x| x.is_nan()) {
                continue;
            }
            let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let ratio: Vec<f64> = (0..v.len()).map(|i| v[i] / runs[random][i][k]).collect();
            let (rlo, rhi) = (
                ratio.iter().copied().fold(f64::INFINITY, f64::min),
                ratio.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            );
            println!(
                "{name:11} {policy:10} {:10.3} [{lo:.3}–{hi:.3}]  ×random {:.3} [{rlo:.3}–{rhi:.3}]",
                mean(&v),
                mean(&ratio)
            );
        }
    }
}
