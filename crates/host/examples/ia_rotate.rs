//! What `ia-rotate` (spec 001 as the real host agent does it: per-cycle pinning, EEVDF per
//! core) predicts on spec 001's presets, beside the paper's IA (`ia`), Linux unpinned
//! (`eevdf`) and Xen Credit: the fairness runs' spread of scaled completion times (Fig. 6) and
//! the test sets' completion time over Credit's (Fig. 5), for docs/host-placement.md.
//!
//! `cargo run --release -p colosched-host --example ia_rotate -- [horizon_ms]`
//! (default: the presets' 20 000 ms; every preset draws nothing, so one seed).

use colosched_host::run::{run, RunResult};
use colosched_host::spec001::{geomean, normalised, scenario, sct_spread, FAIRNESS, SETS};

const SCHEDULERS: [&str; 4] = ["credit", "eevdf", "ia", "ia-rotate"];

fn main() {
    let horizon: Option<f64> = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("horizon_ms: a number"));
    println!("#### Fairness: std of scaled completion time over 5 equal VMs (paper: IA ≤ 0.02)\n");
    println!("| program | {} |", SCHEDULERS.join(" | "));
    println!("|---|---|---|---|---|");
    for name in FAIRNESS {
        let sc = scenario(name, horizon);
        let cells: Vec<String> = SCHEDULERS
            .iter()
            .map(|s| format!("{:.3}", sct_spread(&run(&sc, s, 1).unwrap())))
            .collect();
        let program = name.trim_start_matches("spec001-fair-");
        println!("| {program} | {} |", cells.join(" | "));
    }
    println!("\n#### Test sets: completion time over Credit's, per VM (vCPUs) and geomean\n");
    println!("| set | scheduler | VM1 (2) | VM2 (2) | VM3 (6) | VM4 (8) | geomean | migrations |");
    println!("|---|---|---|---|---|---|---|---|");
    for set in SETS {
        let sc = scenario(set, horizon);
        let all: Vec<RunResult> = SCHEDULERS.iter().map(|s| run(&sc, s, 1).unwrap()).collect();
        for (name, r) in SCHEDULERS.iter().zip(&all).skip(1) {
            let ratios: Vec<f64> = normalised(r, &all[0]).iter().map(|x| x.1).collect();
            let cells: Vec<String> = ratios.iter().map(|x| format!("{x:.2}")).collect();
            let migrations: u64 = r.vms.iter().map(|v| v.migrations).sum();
            println!(
                "| {set} | {name} | {} | {:.2} | {migrations} |",
                cells.join(" | "),
                geomean(&ratios)
            );
        }
    }
}
