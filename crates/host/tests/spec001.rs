//! Spec 001's experiments on short horizons, with the paper's orderings asserted (the numbers
//! themselves are in docs/host-sim.md, from `examples/spec001.rs` on the presets' horizons).

use colosched_host::run::run;
use colosched_host::spec001::{
    geomean, normalised, scenario, sct_spread, symmetric, FAIRNESS, SETS,
};

const HORIZON_MS: f64 = 4000.0;

/// IA's completion time over Credit's for every program of the four test sets, tagged parallel.
fn ia_over_credit(symmetric_host: bool) -> Vec<(bool, f64)> {
    let mut out = Vec::new();
    for set in SETS {
        let mut sc = scenario(set, Some(HORIZON_MS));
        if symmetric_host {
            sc = symmetric(&sc);
        }
        let credit = run(&sc, "credit", 1).unwrap();
        let ia = run(&sc, "ia", 1).unwrap();
        for v in credit.vms.iter().chain(&ia.vms) {
            assert!(v.completions > 0, "{set}: {} completed nothing", v.vm);
        }
        out.extend(normalised(&ia, &credit));
    }
    out
}

fn of(xs: &[(bool, f64)], parallel: bool) -> Vec<f64> {
    xs.iter().filter(|x| x.0 == parallel).map(|x| x.1).collect()
}

#[test]
fn ia_beats_credit_on_the_parallel_programs_and_on_average() {
    let r = ia_over_credit(false);
    let parallel = geomean(&of(&r, true));
    let all = geomean(&r.iter().map(|x| x.1).collect::<Vec<_>>());
    assert!(parallel < 0.95, "parallel: IA / Credit = {parallel:.3}");
    assert!(all < 1.0, "all programs: IA / Credit = {all:.3}");
    // Not asserted: IA beats Credit on the serial programs. In this model it does not
    // (docs/host-sim.md, "Spec 001's experiment"): serial VMs beside a co-scheduled parallel
    // VM lose time to its gang.
    let serial = geomean(&of(&r, false));
    assert!(serial.is_finite() && serial > 0.0);
}

#[test]
fn ia_beats_credit_on_the_parallel_programs_on_a_symmetric_host_too() {
    // Fig. 7: with every core at SF 1, co-scheduling still pays for the parallel programs.
    let r = ia_over_credit(true);
    let parallel = geomean(&of(&r, true));
    assert!(
        parallel < 0.95,
        "parallel, symmetric host: IA / Credit = {parallel:.3}"
    );
}

#[test]
fn ia_is_fairer_than_credit_on_serial_programs() {
    // Credit gives whichever VMs land on the fast cores more work per second; IA charges
    // fast-core time at its SF.
    for name in FAIRNESS
        .iter()
        .filter(|f| f.ends_with("libquantum") || f.ends_with("calculix") || f.ends_with("namd"))
    {
        let sc = scenario(name, Some(HORIZON_MS));
        let credit = sct_spread(&run(&sc, "credit", 1).unwrap());
        let ia = sct_spread(&run(&sc, "ia", 1).unwrap());
        assert!(ia < credit, "{name}: IA {ia:.3} vs Credit {credit:.3}");
    }
}

#[test]
fn ia_keeps_equal_parallel_vms_fairer_than_credit_on_the_fairness_presets() {
    // Fig. 6 on the parallel programs, on the presets' 20 s. main (dd0948e) measured an SCT
    // spread of 0.010 (blackscholes) and 0.023 (fluidanimate) against Credit's ≈ 0.18, and 0.238
    // on facesim, where 5 gangs on 8 cores split over shared cores; issue 26's first change made
    // facesim 0.445 (one VM kept the fast cores). Bound: 0.05, twice main's worst figure where
    // its gangs did not split, and under a third of Credit's.
    for name in FAIRNESS.iter().filter(|f| {
        f.ends_with("blackscholes") || f.ends_with("fluidanimate") || f.ends_with("facesim")
    }) {
        let sc = scenario(name, None);
        let credit = sct_spread(&run(&sc, "credit", 1).unwrap());
        let ia = sct_spread(&run(&sc, "ia", 1).unwrap());
        assert!(
            ia < 0.05 && ia < credit / 3.0,
            "{name}: IA {ia:.3} vs Credit {credit:.3}"
        );
    }
}

#[test]
fn a_gang_of_siblings_with_sr_left_keeps_serial_vms_at_credits_pace_on_a_symmetric_host() {
    // The paper's overhead claim (serial programs within 2 % of Credit on a symmetric host)
    // holds only when siblings without SR stay out of the gang: the gang as built makes W2's
    // serial mcf slower there (docs/host-sim.md, "Spec 001's experiment"). It made it 3.8 ×
    // slower (at 4 s) before a gang was decided by its VM's mean SR (issue 26); since then
    // 1.45 ×, which still fails the paper's claim.
    use colosched_host::run::run_with;
    use colosched_host::sim::sched::{Ia, IaSchedParams};
    use colosched_host::sim::Topology;
    let sc = symmetric(&scenario("spec001-w2", Some(HORIZON_MS)));
    let credit = run(&sc, "credit", 1).unwrap();
    let serial_ratios = |gang_needs_sr: bool| -> Vec<f64> {
        let params = IaSchedParams {
            gang_needs_sr,
            ..IaSchedParams::default()
        };
        let mut ia = Ia::new(&Topology::new(&sc.host, &sc.vms), params).unwrap();
        of(&normalised(&run_with(&sc, &mut ia, 1), &credit), false)
    };
    let every = serial_ratios(false);
    let with_sr = serial_ratios(true);
    let worst = |xs: &[f64]| xs.iter().cloned().fold(0.0, f64::max);
    assert!(worst(&with_sr) < 1.05, "siblings with SR: {with_sr:?}");
    assert!(worst(&every) > 1.2, "every sibling: {every:?}");
}

#[test]
fn ia_beats_aash_on_the_sets() {
    // Fig. 5: IA's set average is shorter than AASH's (the paper: by 23–25 %; here by less,
    // docs/host-sim.md "AASH beside IA").
    let mut ia = Vec::new();
    let mut aash = Vec::new();
    for set in SETS {
        let sc = scenario(set, Some(HORIZON_MS));
        let credit = run(&sc, "credit", 1).unwrap();
        ia.extend(
            normalised(&run(&sc, "ia", 1).unwrap(), &credit)
                .into_iter()
                .map(|x| x.1),
        );
        aash.extend(
            normalised(&run(&sc, "aash", 1).unwrap(), &credit)
                .into_iter()
                .map(|x| x.1),
        );
    }
    let (ia, aash) = (geomean(&ia), geomean(&aash));
    assert!(
        ia < aash,
        "IA / Credit = {ia:.3}, AASH / Credit = {aash:.3}"
    );
}
