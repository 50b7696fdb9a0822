//! `cargo run --release -p colosched-vms --example sim_vms -- SCENARIO [SEEDS]`: every policy
//! over seeds 1..=SEEDS, the headline figures per run (the full results: `colosched sim vms`).

use colosched_vms::sim::{run, Scenario, POLICIES};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let s = Scenario::load(args.get(1).map_or("spec003-fio-read", String::as_str))
        .unwrap_or_else(|e| panic!("{e}"));
    let seeds: u64 = args.get(2).map_or(5, |x| x.parse().expect("seeds"));
    for policy in POLICIES {
        for seed in 1..=seeds {
            let r = run(&s, policy, seed).expect("run");
            let iops: f64 = r.vms.iter().map(|v| v.iops).sum::<f64>() / r.vms.len() as f64;
            let jobs: Vec<String> = (r.jobs.iter().filter(|j| j.measured))
                .map(|j| {
                    format!(
                        "{}:{:.0}s/{:.0}",
                        j.job,
                        j.time_s,
                        j.throughput_mbps.unwrap_or(0.0)
                    )
                })
                .collect();
            let apps: Vec<String> = (r.apps.iter())
                .map(|a| {
                    format!(
                        "{} ld {:.1}/{} ops {:.0}",
                        a.app,
                        a.ld_mean,
                        a.ld_final,
                        a.ops_s.unwrap_or(0.0)
                    )
                })
                .collect();
            let mig = r.migrations.len();
            let mt = r.migrations.iter().map(|m| m.time_s).sum::<f64>() / mig.max(1) as f64;
            let sl = r.migrations.iter().map(|m| m.slowdown).sum::<f64>() / mig.max(1) as f64;
            println!(
                "{policy:10} {seed} iops/vm {iops:7.0} migr {mig:3} {mt:5.1}s slow {:.3} {} | {}",
                sl,
                apps.join(" "),
                jobs.iter().take(8).cloned().collect::<Vec<_>>().join(" ")
            );
        }
    }
}
