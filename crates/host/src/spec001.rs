//! Spec 001's experiments (Sec. 4.2) on the bundled presets: the four test sets (performance,
//! and overhead on a symmetric host), the six fairness runs, and the measures the paper reports
//! (completion time over Credit's, its geometric mean per set, the spread of scaled completion
//! times). The tables are printed by `examples/spec001.rs`; CI asserts the orderings in
//! `tests/spec001.rs`.

use crate::run::{preset, RunResult};
use crate::sim::{Scenario, Workload};

/// The performance test sets W1–W4 (VMs of 2, 2, 6 and 8 vCPUs), Fig. 5.
pub const SETS: [&str; 4] = ["spec001-w1", "spec001-w2", "spec001-w3", "spec001-w4"];

/// The fairness runs (5 equal VMs of 2 vCPUs, one program), Fig. 6.
pub const FAIRNESS: [&str; 6] = [
    "spec001-fair-blackscholes",
    "spec001-fair-fluidanimate",
    "spec001-fair-facesim",
    "spec001-fair-libquantum",
    "spec001-fair-calculix",
    "spec001-fair-namd",
];

/// A bundled scenario, its horizon replaced when `horizon_ms` is given.
pub fn scenario(name: &str, horizon_ms: Option<f64>) -> Scenario {
    let mut sc = preset(name).unwrap_or_else(|| panic!("no preset {name}"));
    if let Some(h) = horizon_ms {
        sc.horizon_ms = h;
    }
    sc
}

/// Each VM's mean completion time in `r` over its mean completion time in `base` (the same
/// scenario under the baseline scheduler), with whether the VM runs a parallel program.
pub fn normalised(r: &RunResult, base: &RunResult) -> Vec<(bool, f64)> {
    assert_eq!(
        r.scenario, base.scenario,
        "normalised against another scenario"
    );
    (r.vms.iter().zip(&base.vms))
        .map(|(v, b)| {
            (
                v.workload == "parallel",
                v.mean_completion_ms / b.mean_completion_ms,
            )
        })
        .collect()
}

pub fn geomean(xs: &[f64]) -> f64 {
    (xs.iter().map(|x| x.ln()).sum::<f64>() / xs.len() as f64).exp()
}

/// The standard deviation (over the VMs) of the scaled completion time SCT_i = t_i / mean_j t_j,
/// where t_i is VM i's mean completion time: 0 when every VM's programs take equally long.
pub fn sct_spread(r: &RunResult) -> f64 {
    let t: Vec<f64> = r.vms.iter().map(|v| v.mean_completion_ms).collect();
    let mean = t.iter().sum::<f64>() / t.len() as f64;
    let var = t.iter().map(|x| (x / mean - 1.0).powi(2)).sum::<f64>() / t.len() as f64;
    var.sqrt()
}

/// The same scenario on a symmetric host: every core at speed 1 (the overhead experiment, where
/// the paper turned DVFS off and ran all cores at 2.7 GHz; our unit of work is a slow core's,
/// so all-slow keeps the programs' lengths and shows the same ratios).
pub fn symmetric(sc: &Scenario) -> Scenario {
    let mut out = sc.clone();
    for c in &mut out.host.cores {
        c.speed = 1.0;
    }
    out.name = format!("{}-symmetric", sc.name);
    out
}

/// The same scenario with every parallel program's barrier interval and spin budget replaced,
/// its work per thread kept (phases × phase_ms, rounded to whole phases).
pub fn with_barriers(sc: &Scenario, phase_ms: f64, spin_us: f64) -> Scenario {
    let mut out = sc.clone();
    for vm in &mut out.vms {
        if let Workload::Parallel {
            phases,
            phase_ms: p,
            spin_us: s,
        } = &mut vm.workload
        {
            let work = *phases as f64 * *p;
            *phases = (work / phase_ms).round().max(1.0) as u32;
            *p = phase_ms;
            *s = spin_us;
        }
    }
    out.name = format!("{}-phase{phase_ms}-spin{spin_us}", sc.name);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::VmResult;

    fn result(times: &[(&'static str, f64)]) -> RunResult {
        RunResult {
            scenario: "s".into(),
            scheduler: "x".into(),
            seed: 0,
            end_ms: 1.0,
            events: 1,
            vms: (times.iter())
                .map(|&(workload, t)| VmResult {
                    vm: "v".into(),
                    vcpus: 2,
                    workload,
                    completions: 1,
                    mean_completion_ms: t,
                    run_ms: 0.0,
                    spin_ms: 0.0,
                    work_ms: 0.0,
                    migrations: 0,
                    throughput_mbit_s: f64::NAN,
                    ring_drops: 0,
                    link_drops: 0,
                    pings_answered: 0,
                    pings_sent: 0,
                    ping_mean_ms: f64::NAN,
                    ping_p50_ms: f64::NAN,
                    ping_p99_ms: f64::NAN,
                    ping_rtts_ms: Vec::new(),
                })
                .collect(),
        }
    }

    #[test]
    fn measures_by_hand() {
        let base = result(&[("serial", 100.0), ("parallel", 400.0)]);
        let r = result(&[("serial", 50.0), ("parallel", 800.0)]);
        assert_eq!(normalised(&r, &base), vec![(false, 0.5), (true, 2.0)]);
        assert!((geomean(&[0.5, 2.0]) - 1.0).abs() < 1e-12);
        assert!((geomean(&[2.0, 8.0]) - 4.0).abs() < 1e-12);
        // t = 1, 3: mean 2, SCT 0.5 and 1.5, std 0.5.
        let r = result(&[("serial", 1.0), ("serial", 3.0)]);
        assert!((sct_spread(&r) - 0.5).abs() < 1e-12);
        assert_eq!(sct_spread(&result(&[("serial", 7.0); 5])), 0.0);
    }

    #[test]
    fn presets_have_the_papers_shapes_and_the_variants_keep_the_work() {
        for name in SETS {
            let sc = scenario(name, None);
            let widths: Vec<usize> = sc.vms.iter().map(|v| v.vcpus).collect();
            assert_eq!(widths, vec![2, 2, 6, 8], "{name}");
            let speeds: Vec<f64> = sc.host.cores.iter().map(|c| c.speed).collect();
            assert_eq!(speeds, [vec![1.8; 2], vec![1.0; 6]].concat(), "{name}");
            assert!(symmetric(&sc).host.cores.iter().all(|c| c.speed == 1.0));
        }
        for name in FAIRNESS {
            let sc = scenario(name, Some(100.0));
            assert_eq!(sc.horizon_ms, 100.0);
            assert!(
                sc.vms.len() == 5 && sc.vms.iter().all(|v| v.vcpus == 2),
                "{name}"
            );
            assert!(sc.vms.iter().all(|v| v.workload == sc.vms[0].workload));
        }
        let sc = with_barriers(&scenario("spec001-w1", None), 4.0, 50.0);
        assert_eq!(
            sc.vms[3].workload,
            Workload::Parallel {
                phases: 125,
                phase_ms: 4.0,
                spin_us: 50.0
            }
        );
        assert_eq!(
            sc.vms[0].workload,
            scenario("spec001-w1", None).vms[0].workload
        );
    }
}
