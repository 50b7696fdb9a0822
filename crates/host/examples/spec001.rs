//! Spec 001's experiments (Sec. 4.2) on the bundled presets, printed as the Markdown tables of
//! docs/host-sim.md "Spec 001's experiment":
//!
//! - `sets`: completion time per program over Credit's and its geometric mean per test set
//!   (Fig. 5), per scheduler and seed, with each VM's spinning and migrations;
//! - `fairness`: the spread of scaled completion times over 5 equal VMs (Fig. 6);
//! - `overhead`: the test sets on a symmetric host, IA over Credit (Fig. 7);
//! - `sensitivity`: IA over a (μ, Threshold) grid (Figs 8, 9);
//! - `barriers`: the parallel programs' barrier interval and spin budget swept, IA over Credit;
//! - `gang-sr`: IA with the gang as built and with siblings that have no SR left kept out of it
//!   (`IaSchedParams::gang_needs_sr`), on the sets and on their symmetric variant;
//! - `spread`: the sets with every program's length drawn (`work_cv` 0.2), over the seeds;
//! - `aash`: AASH beside IA on the sets, over Credit, with each VM's migrations.
//!
//! `cargo run --release -p colosched-host --example spec001 -- [horizon_ms] [seeds] [sections…]`
//! (defaults: the presets' 20 000 ms, 3 seeds, every section). The presets set no `work_cv`, so
//! every seed gives the same run except in `spread`.

use std::time::Instant;

use colosched_host::decide::ia::IaParams;
use colosched_host::run::{run, run_with, RunResult};
use colosched_host::sim::sched::{Ia, IaSchedParams};
use colosched_host::sim::{Scenario, Topology};
use colosched_host::spec001::{
    geomean, normalised, scenario, sct_spread, symmetric, with_barriers, FAIRNESS, SETS,
};

const SCHEDULERS: [&str; 3] = ["credit", "ia", "eevdf"];

fn runs(sc: &Scenario, name: &str, seeds: u64) -> Vec<RunResult> {
    (1..=seeds).map(|s| run(sc, name, s).unwrap()).collect()
}

fn ia_with(sc: &Scenario, mu: f64, threshold: f64, seed: u64) -> RunResult {
    let params = IaSchedParams {
        ia: IaParams {
            mu,
            threshold,
            ..IaParams::default()
        },
        ..IaSchedParams::default()
    };
    ia_params(sc, params, seed)
}

fn ia_params(sc: &Scenario, params: IaSchedParams, seed: u64) -> RunResult {
    let mut ia = Ia::new(&Topology::new(&sc.host, &sc.vms), params).unwrap();
    run_with(sc, &mut ia, seed)
}

/// Each VM's completion time over Credit's, with "p " before the parallel ones, and their
/// geometric mean.
fn ratio_cells(r: &RunResult, base: &RunResult) -> (String, f64) {
    let (cells, geos) = over_seeds(&[normalised(r, base)]);
    (cells, geos[0])
}

/// IA's gang as built (every waiting sibling joins, paying SR it may not have) against a gang of
/// only the siblings with SR left, on the asymmetric sets and on their symmetric variants.
fn gang_sr(horizon: Option<f64>) {
    println!(
        "\n#### IA's gang with and without siblings that have no SR left, over Credit (seed 1)\n"
    );
    println!("| host | set | gang | VM1 (2) | VM2 (2) | VM3 (6) | VM4 (8) | geomean |");
    println!("|---|---|---|---|---|---|---|---|");
    for set in SETS {
        let asym = scenario(set, horizon);
        for (host, sc) in [
            ("2 fast + 6 slow", asym.clone()),
            ("symmetric", symmetric(&asym)),
        ] {
            let base = run(&sc, "credit", 1).unwrap();
            for (gang, needs_sr) in [("every sibling", false), ("siblings with SR", true)] {
                let params = IaSchedParams {
                    gang_needs_sr: needs_sr,
                    ..IaSchedParams::default()
                };
                let (cells, geo) = ratio_cells(&ia_params(&sc, params, 1), &base);
                println!("| {host} | {set} | {gang} | {cells} | {geo:.3} |");
            }
        }
    }
}

/// AASH and IA on the sets, over Credit (seed 1), with every VM's migrations under each.
fn aash(horizon: Option<f64>) {
    println!("\n#### AASH beside IA on the test sets, completion time over Credit's (seed 1)\n");
    println!(
        "| set | scheduler | VM1 (2) | VM2 (2) | VM3 (6) | VM4 (8) | geomean | migrations per VM |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for set in SETS {
        let sc = scenario(set, horizon);
        let base = run(&sc, "credit", 1).unwrap();
        for name in ["credit", "ia", "aash"] {
            let r = run(&sc, name, 1).unwrap();
            let (cells, geo) = ratio_cells(&r, &base);
            let migrations: Vec<String> = r.vms.iter().map(|v| v.migrations.to_string()).collect();
            println!(
                "| {set} | {name} | {cells} | {geo:.3} | {} |",
                migrations.join(" / ")
            );
        }
    }
}

/// The sets with every program's length drawn around its mean (`work_cv` 0.2): each set's
/// geometric mean over Credit's, mean (min–max) over the seeds, each seed normalised to Credit
/// under the same seed.
fn seed_spread(horizon: Option<f64>, seeds: u64) {
    println!(
        "\n#### Test sets with work_cv 0.2: geometric mean over Credit's, over {seeds} seeds\n"
    );
    println!("| set | ia | eevdf |");
    println!("|---|---|---|");
    for set in SETS {
        let mut sc = scenario(set, horizon);
        for vm in &mut sc.vms {
            vm.work_cv = 0.2;
        }
        let mut geos = [Vec::new(), Vec::new()];
        for seed in 1..=seeds {
            let base = run(&sc, "credit", seed).unwrap();
            for (i, name) in ["ia", "eevdf"].iter().enumerate() {
                geos[i].push(ratio_cells(&run(&sc, name, seed).unwrap(), &base).1);
            }
        }
        println!("| {set} | {} | {} |", spread(&geos[0]), spread(&geos[1]));
    }
}

/// "mean (min–max)" of `xs`, or just the value when all are equal.
fn spread(xs: &[f64]) -> String {
    let mean = xs.iter().sum::<f64>() / xs.len() as f64;
    let lo = xs.iter().cloned().fold(f64::INFINITY, f64::min);
    let hi = xs.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    if hi - lo < 5e-4 {
        format!("{mean:.3}")
    } else {
        format!("{mean:.3} ({lo:.3}–{hi:.3})")
    }
}

/// Per VM, its ratios over the seeds as table cells ("p " before a parallel program's), and per
/// seed the geometric mean over the VMs.
fn over_seeds(per_seed: &[Vec<(bool, f64)>]) -> (String, Vec<f64>) {
    let cells: Vec<String> = (0..per_seed[0].len())
        .map(|vm| {
            let xs: Vec<f64> = per_seed.iter().map(|n| n[vm].1).collect();
            let tag = if per_seed[0][vm].0 { "p " } else { "" };
            format!("{tag}{}", spread(&xs))
        })
        .collect();
    let geos = per_seed
        .iter()
        .map(|n| geomean(&n.iter().map(|x| x.1).collect::<Vec<_>>()))
        .collect();
    (cells.join(" | "), geos)
}

fn range(xs: &[f64]) -> String {
    let lo = xs.iter().cloned().fold(f64::INFINITY, f64::min);
    let hi = xs.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    format!("{lo:.2}–{hi:.2}")
}

fn sets(horizon: Option<f64>, seeds: u64) {
    println!("\n#### Test sets: completion time over Credit's (mean over seeds; min–max when they differ)\n");
    println!("| set | scheduler | VM1 (2) | VM2 (2) | VM3 (6) | VM4 (8) | geomean | seeds |");
    println!("|---|---|---|---|---|---|---|---|");
    let mut why = Vec::new();
    // Per scheduler: the parallel and serial programs' ratios and the sets' geomeans (seed 1
    // is enough for the summary when seeds agree; all seeds go in).
    let mut summary: Vec<(Vec<f64>, Vec<f64>, Vec<f64>)> = vec![Default::default(); 3];
    let mut wall = [0.0f64; 3];
    for set in SETS {
        let sc = scenario(set, horizon);
        let mut all: Vec<Vec<RunResult>> = Vec::new();
        for (i, name) in SCHEDULERS.iter().enumerate() {
            let t = Instant::now();
            all.push(runs(&sc, name, seeds));
            wall[i] += t.elapsed().as_secs_f64() / seeds as f64;
        }
        for (i, name) in SCHEDULERS.iter().enumerate() {
            let per_seed: Vec<Vec<(bool, f64)>> = (all[i].iter().zip(&all[0]))
                .map(|(r, b)| normalised(r, b))
                .collect();
            let (vm_cells, geos) = over_seeds(&per_seed);
            println!(
                "| {set} | {name} | {vm_cells} | {} | {seeds} |",
                spread(&geos)
            );
            for n in &per_seed {
                for &(par, x) in n {
                    if par {
                        summary[i].0.push(x)
                    } else {
                        summary[i].1.push(x)
                    }
                }
            }
            summary[i].2.extend(geos);
            let r = &all[i][0];
            for v in &r.vms {
                why.push(format!(
                    "| {set} | {name} | {} | {} | {:.0} | {} | {:.0} | {:.0} | {} |",
                    v.vm,
                    v.workload,
                    v.mean_completion_ms,
                    v.completions,
                    v.run_ms,
                    v.spin_ms,
                    v.migrations
                ));
            }
        }
    }
    println!("\n#### Summary: ratio to Credit (1 − ratio = how much shorter), over sets, VMs and seeds\n");
    println!("| | paper IA | ours ia | ours eevdf |");
    println!("|---|---|---|---|");
    println!(
        "| set geomean | 0.72–0.77 | {} | {} |",
        range(&summary[1].2),
        range(&summary[2].2)
    );
    println!(
        "| parallel programs | 0.52–0.63 | {} | {} |",
        range(&summary[1].0),
        range(&summary[2].0)
    );
    println!(
        "| serial programs | ≤ 0.81 | {} | {} |",
        range(&summary[1].1),
        range(&summary[2].1)
    );
    println!("\n#### Per VM, seed 1: mean completion (ms), completions, time on a core, spinning (ms), migrations\n");
    println!("| set | scheduler | VM | workload | completion ms | runs | run ms | spin ms | migrations |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for line in why {
        println!("{line}");
    }
    println!("\n#### Cost: the four sets, wall seconds per scheduler (one seed)\n");
    println!("| scheduler | seconds |");
    println!("|---|---|");
    for (i, name) in SCHEDULERS.iter().enumerate() {
        println!("| {name} | {:.3} |", wall[i]);
    }
}

fn fairness(horizon: Option<f64>, seeds: u64) {
    println!(
        "\n#### Fairness: std of scaled completion time over 5 equal VMs (paper: IA ≤ 0.02)\n"
    );
    println!("| program | credit | ia | eevdf |");
    println!("|---|---|---|---|");
    for name in FAIRNESS {
        let sc = scenario(name, horizon);
        let cells: Vec<String> = SCHEDULERS
            .iter()
            .map(|s| {
                let xs: Vec<f64> = runs(&sc, s, seeds).iter().map(sct_spread).collect();
                spread(&xs)
            })
            .collect();
        let program = name.trim_start_matches("spec001-fair-");
        println!("| {program} | {} |", cells.join(" | "));
    }
}

fn overhead(horizon: Option<f64>, seeds: u64) {
    println!("\n#### Overhead: symmetric host (all SF 1), completion time over Credit's (paper: serial ≤ 1.02, parallel 0.80–0.83)\n");
    println!("| set | scheduler | VM1 (2) | VM2 (2) | VM3 (6) | VM4 (8) | geomean |");
    println!("|---|---|---|---|---|---|---|");
    for set in SETS {
        let sc = symmetric(&scenario(set, horizon));
        let base = runs(&sc, "credit", seeds);
        for name in ["ia", "eevdf"] {
            let per_seed: Vec<Vec<(bool, f64)>> = (runs(&sc, name, seeds).iter().zip(&base))
                .map(|(r, b)| normalised(r, b))
                .collect();
            let (cells, geos) = over_seeds(&per_seed);
            println!("| {set} | {name} | {cells} | {} |", spread(&geos));
        }
    }
}

fn sensitivity(horizon: Option<f64>) {
    println!("\n#### Sensitivity: IA over Credit, mean of the four sets' geomeans / mean fairness spread (seed 1)\n");
    let mus = [0.2, 0.4, 0.6, 0.8];
    let thresholds = [0.1, 0.3, 0.5, 0.7];
    println!(
        "| μ \\ Threshold | {} |",
        thresholds.map(|t| t.to_string()).join(" | ")
    );
    println!("|---|---|---|---|---|");
    let bases: Vec<(Scenario, RunResult)> = SETS
        .iter()
        .map(|s| {
            let sc = scenario(s, horizon);
            let b = run(&sc, "credit", 1).unwrap();
            (sc, b)
        })
        .collect();
    let fair: Vec<Scenario> = FAIRNESS.iter().map(|f| scenario(f, horizon)).collect();
    for mu in mus {
        let cells: Vec<String> = thresholds
            .iter()
            .map(|&t| {
                let geos: Vec<f64> = (bases.iter())
                    .map(|(sc, b)| {
                        let n = normalised(&ia_with(sc, mu, t, 1), b);
                        geomean(&n.iter().map(|x| x.1).collect::<Vec<_>>())
                    })
                    .collect();
                let spreads: Vec<f64> = fair
                    .iter()
                    .map(|sc| sct_spread(&ia_with(sc, mu, t, 1)))
                    .collect();
                format!(
                    "{:.3} / {:.3}",
                    geos.iter().sum::<f64>() / geos.len() as f64,
                    spreads.iter().sum::<f64>() / spreads.len() as f64
                )
            })
            .collect();
        println!("| {mu} | {} |", cells.join(" | "));
    }
}

fn barriers(horizon: Option<f64>) {
    let phases = [1.0, 2.0, 5.0, 20.0];
    let spins = [0.0, 20.0, 200.0, 1000.0, 10_000.0, 100_000.0];
    println!("\n#### Barrier interval × spin budget: IA over Credit, geomean of the parallel programs of the four sets (seed 1)\n");
    println!(
        "| phase ms \\ spin µs | {} |",
        spins.map(|s| s.to_string()).join(" | ")
    );
    println!("|---|---|---|---|---|---|---|");
    for p in phases {
        let cells: Vec<String> = spins
            .iter()
            .map(|&s| {
                let mut par = Vec::new();
                for set in SETS {
                    let sc = with_barriers(&scenario(set, horizon), p, s);
                    let n =
                        normalised(&run(&sc, "ia", 1).unwrap(), &run(&sc, "credit", 1).unwrap());
                    par.extend(n.iter().filter(|x| x.0).map(|x| x.1));
                }
                format!("{:.3}", geomean(&par))
            })
            .collect();
        println!("| {p} | {} |", cells.join(" | "));
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let horizon: Option<f64> = args.first().and_then(|a| a.parse().ok());
    let seeds: u64 = args.get(1).map_or(3, |a| a.parse().unwrap());
    let named: Vec<&str> = args.iter().skip(2).map(String::as_str).collect();
    let want = |s: &str| named.is_empty() || named.contains(&s);
    if want("sets") {
        sets(horizon, seeds);
    }
    if want("fairness") {
        fairness(horizon, seeds);
    }
    if want("overhead") {
        overhead(horizon, seeds);
    }
    if want("sensitivity") {
        sensitivity(horizon);
    }
    if want("barriers") {
        barriers(horizon);
    }
    if want("gang-sr") {
        gang_sr(horizon);
    }
    if want("spread") {
        seed_spread(horizon, seeds);
    }
    if want("aash") {
        aash(horizon);
    }
}
