//! Spec 002 (Diff-Scheduler): which VMs are network-queuing-sensitive (NSVM), which are hungry
//! for CPU, and how many physical CPUs each of the two pools gets. Pure functions of ring
//! samples, loads and a random generator the caller owns: no clock, no I/O.

use colosched_core::Rng;

/// One 10 ms reading of a VM's rings (spec 002 §3): receive-side request-queue length, response
/// queue length and requests about to be inserted, and the send-side request-queue length.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingSample {
    pub rx_rq: u32,
    pub rx_rr: u32,
    pub rx_rqn: u32,
    pub tx_sq: u32,
}

/// The classification thresholds. `Default` gives the paper's values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NsvmThresholds {
    /// QL_max: ring capacity; readings are clamped to it (256).
    pub ql_max: u32,
    /// QL_th: request-queue overload level (150).
    pub ql_th: u32,
    /// δ_th: RX overflow-frequency threshold (0.2).
    pub overflow_freq: f64,
    /// θ_th: RX overload-frequency threshold (0.6).
    pub overload_freq: f64,
    /// QL_cth: TX mean non-zero queue threshold (45).
    pub tx_mean_nonzero: f64,
    /// γ_th: TX stall-frequency threshold (0.5).
    pub tx_stall_freq: f64,
}

impl Default for NsvmThresholds {
    fn default() -> Self {
        NsvmThresholds {
            ql_max: 256,
            ql_th: 150,
            overflow_freq: 0.2,
            overload_freq: 0.6,
            tx_mean_nonzero: 45.0,
            tx_stall_freq: 0.5,
        }
    }
}

/// Network-queuing-sensitive or not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VmKind {
    /// NSVM: its rings stall or overflow while its vCPUs wait.
    Sensitive,
    /// NNVM.
    NotSensitive,
}

/// The statistics of one identification window (eqs 5–10) and the verdicts drawn from them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RingStats {
    /// f_ro: fraction of samples whose RX ring overflowed (rq + rr + rqn ≥ QL_max).
    pub rx_overflow_freq: f64,
    /// f_rq: fraction of samples not overflowing with QL_th ≤ rq.
    pub rx_overload_freq: f64,
    /// q_se: mean of the non-zero TX queue samples (0 when none is non-zero).
    pub tx_mean_nonzero: f64,
    /// f_se: fraction of TX samples that are zero.
    pub tx_stall_freq: f64,
    pub rx_sensitive: bool,
    pub tx_sensitive: bool,
}

impl RingStats {
    pub fn kind(&self) -> VmKind {
        if self.rx_sensitive || self.tx_sensitive {
            VmKind::Sensitive
        } else {
            VmKind::NotSensitive
        }
    }
}

/// Classifies a VM once per identification period (T_s, 100 ms) from the samples taken every
/// T_m (10 ms): feed it samples with `push`; every N_s = T_s / T_m samples it returns a verdict
/// and starts a new window.
#[derive(Clone, Debug)]
pub struct NsvmClassifier {
    pub thresholds: NsvmThresholds,
    samples_per_window: usize,
    window: Vec<RingSample>,
}

impl NsvmClassifier {
    /// `sample_ms` = T_m, `window_ms` = T_s; N_s = T_s / T_m (at least 1).
    pub fn new(thresholds: NsvmThresholds, sample_ms: u32, window_ms: u32) -> NsvmClassifier {
        let samples_per_window = (window_ms / sample_ms.max(1)).max(1) as usize;
        NsvmClassifier {
            thresholds,
            samples_per_window,
            window: Vec::with_capacity(samples_per_window),
        }
    }

    /// The paper's setting: 10 ms samples, 100 ms windows, its thresholds.
    pub fn paper() -> NsvmClassifier {
        NsvmClassifier::new(NsvmThresholds::default(), 10, 100)
    }

    pub fn samples_per_window(&self) -> usize {
        self.samples_per_window
    }

    /// Add one sample; at the end of a window return its statistics (and clear the window).
    pub fn push(&mut self, sample: RingSample) -> Option<RingStats> {
        self.window.push(sample);
        if self.window.len() < self.samples_per_window {
            return None;
        }
        let stats = window_stats(&self.thresholds, &self.window);
        self.window.clear();
        Some(stats)
    }
}

/// Eqs 5–10 over one window of samples (N_s = samples.len(), which must not be 0). Each reading
/// is first clamped to QL_max.
pub fn window_stats(t: &NsvmThresholds, samples: &[RingSample]) -> RingStats {
    assert!(
        !samples.is_empty(),
        "an identification window needs at least one sample"
    );
    let n = samples.len() as f64;
    let clamp = |x: u32| x.min(t.ql_max);
    let (mut overflows, mut overloads, mut tx_sum, mut tx_nonzero) = (0u32, 0u32, 0u64, 0u32);
    for s in samples {
        let rq = clamp(s.rx_rq);
        let overflow = rq + clamp(s.rx_rr) + clamp(s.rx_rqn) >= t.ql_max;
        if overflow {
            overflows += 1;
        } else if rq >= t.ql_th {
            overloads += 1;
        }
        let sq = clamp(s.tx_sq);
        if sq != 0 {
            tx_sum += sq as u64;
            tx_nonzero += 1;
        }
    }
    let rx_overflow_freq = overflows as f64 / n;
    let rx_overload_freq = overloads as f64 / n;
    let tx_mean_nonzero = if tx_nonzero == 0 {
        0.0
    } else {
        tx_sum as f64 / tx_nonzero as f64
    };
    let tx_stall_freq = (n - tx_nonzero as f64) / n;
    RingStats {
        rx_overflow_freq,
        rx_overload_freq,
        tx_mean_nonzero,
        tx_stall_freq,
        rx_sensitive: rx_overflow_freq > t.overflow_freq || rx_overload_freq > t.overload_freq,
        tx_sensitive: tx_mean_nonzero > t.tx_mean_nonzero && tx_stall_freq > t.tx_stall_freq,
    }
}

/// Keeps a VM NSVM after its rings last made it one (not in the paper, open questions 1 and 7):
/// a VM the NSVM pool serves well has calm rings, so the rule as written sends it back to the
/// long-slice pool in its next window, where its rings overflow again, and it flaps every
/// window.
///
/// The hold is `windows` windows at first. A VM whose rings make it NSVM again within as many
/// windows as its last hold lasted, after the hold let it go, was calm only because of the
/// pool: its hold doubles, up to `max_windows` (the back-off of route-flap damping and of
/// Kubernetes' CrashLoopBackOff). A VM that stays out of the pool for `max_windows` windows
/// starts again from `windows`. So a VM whose traffic goes on leaves the pool for one window
/// in `max_windows` instead of one in `windows`, and one whose traffic has ended is let go
/// after at most `max_windows`. `windows = 0` is the rule as written; `max_windows = windows`
/// is a fixed hold.
#[derive(Clone, Debug, PartialEq)]
pub struct NsvmHold {
    pub windows: u32,
    pub max_windows: u32,
    vms: Vec<Held>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct Held {
    /// Windows of hold left.
    left: u32,
    /// The hold this VM gets when its rings make it NSVM.
    hold: u32,
    /// Windows since the hold let it go (`u32::MAX`: never held, or long ago).
    out: u32,
}

impl NsvmHold {
    pub fn new(vms: usize, windows: u32, max_windows: u32) -> NsvmHold {
        let max_windows = max_windows.max(windows);
        let held = Held {
            left: 0,
            hold: windows,
            out: u32::MAX,
        };
        NsvmHold {
            windows,
            max_windows,
            vms: vec![held; vms],
        }
    }

    /// The kind VM `vm` is treated as in this window, given what its rings said.
    pub fn kind(&mut self, vm: usize, rings: VmKind) -> VmKind {
        let h = &mut self.vms[vm];
        if rings == VmKind::Sensitive {
            if h.out <= h.hold {
                h.hold = (h.hold * 2).min(self.max_windows);
            }
            h.left = h.hold;
            h.out = u32::MAX;
            VmKind::Sensitive
        } else if h.left > 0 {
            h.left -= 1;
            if h.left == 0 {
                h.out = 0;
            }
            VmKind::Sensitive
        } else {
            h.out = h.out.saturating_add(1);
            if h.out >= self.max_windows && h.out != u32::MAX {
                (h.hold, h.out) = (self.windows, u32::MAX);
            }
            VmKind::NotSensitive
        }
    }

    /// The hold VM `vm` gets the next time its rings make it NSVM.
    pub fn hold_of(&self, vm: usize) -> u32 {
        self.vms[vm].hold
    }
}

/// The pools a plan builds on `m` CPUs: the NSVMs and the number of CPUs of the short-slice
/// pool. A pool of no VMs, or one that would take none or all of the CPUs, is no pool: then
/// every VM shares one long-slice pool, returned as no NSVMs and 0 CPUs.
pub fn pools_built(plan: &PoolPlan, m: usize) -> (Vec<usize>, usize) {
    if plan.ns_vms.is_empty() || plan.ns_cpus == 0 || plan.ns_cpus >= m {
        (Vec::new(), 0)
    } else {
        (plan.ns_vms.clone(), plan.ns_cpus)
    }
}

/// (1)–(3): the physical CPUs each VM may use on average, C_i = M · W_i / ΣW. The paper takes
/// W_i ∝ vCPU count (pass vCPU counts); configured weights may be passed instead.
pub fn baseline_shares(m: f64, weights: &[f64]) -> Vec<f64> {
    let total: f64 = weights.iter().sum();
    weights.iter().map(|w| m * w / total).collect()
}

/// Hungry when the measured load (in CPUs) exceeds the baseline share.
pub fn is_hungry(load: f64, share: f64) -> bool {
    load > share
}

/// What pool sizing needs to know of one VM.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VmNeed {
    pub kind: VmKind,
    /// W_i (any scale: only ratios matter).
    pub weight: f64,
    /// L_i: measured CPU load in CPUs (1.5 = 150 %).
    pub load: f64,
}

/// Settings of the pool plan. `Default` gives the paper's slices and the spec's suggested floor.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PoolParams {
    /// Credit time slice in the NSVM pool (5 ms).
    pub ns_slice_ms: f64,
    /// Credit time slice in the NNVM pool (30 ms).
    pub nn_slice_ms: f64,
    /// A pool that holds VMs gets at least one CPU, taken from the other pool if that one keeps
    /// at least one (open question 4; not in the paper).
    pub nonempty_pool_floor: bool,
}

impl Default for PoolParams {
    fn default() -> Self {
        PoolParams {
            ns_slice_ms: 5.0,
            nn_slice_ms: 30.0,
            nonempty_pool_floor: true,
        }
    }
}

/// Every parameter of Diff's decision, with its one `Default`: the simulator's `diff` and
/// `diff-eevdf` start from it (a scenario's `[diff]` table overrides it), and so does the real
/// host agent's host.toml. The paper's values where it gives one; the hold and the EEVDF slices
/// are ours (open questions 1, 7 and the Linux port).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DiffParams {
    pub thresholds: NsvmThresholds,
    /// The pool plan's settings; its slices are the Credit slices (5 ms / 30 ms) in the
    /// simulator's `diff`; in the real agent, the EEVDF slices of host.toml's `[pools]`.
    pub pools: PoolParams,
    /// T_s: one classification and plan per window (100 ms); samples come every 10 ms (T_m).
    pub window_ms: u32,
    /// A VM stays NSVM this many windows after its rings last said so (`NsvmHold`, 10 = 1 s);
    /// 0 = the paper's rule as written...
    pub hold_windows: u32,
    /// ...doubled each time it comes back soon after, up to this many (80 = 8 s).
    pub hold_max_windows: u32,
    /// On Linux (EEVDF): the slice the NSVMs' vCPU threads ask for (1 ms; 0 = leave theirs).
    pub nsvm_slice_ms: f64,
    /// On Linux: the NNVMs' slice (0 = leave theirs, the kernel's default). The paper's 30 ms
    /// Credit slice served no VM better on EEVDF where it was measured
    /// (docs/host-experiment.md, "The NNVM slice"), so the agent leaves these threads alone
    /// unless told.
    pub nnvm_slice_ms: f64,
}

impl Default for DiffParams {
    fn default() -> Self {
        DiffParams {
            thresholds: NsvmThresholds::default(),
            pools: PoolParams::default(),
            window_ms: 100,
            hold_windows: 10,
            hold_max_windows: 80,
            nsvm_slice_ms: 1.0,
            nnvm_slice_ms: 0.0,
        }
    }
}

/// The result of one planning round: CPUs per pool, the VMs (indices into the input) in each,
/// and each pool's slice.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolPlan {
    pub ns_cpus: usize,
    pub nn_cpus: usize,
    pub ns_vms: Vec<usize>,
    pub nn_vms: Vec<usize>,
    pub ns_slice_ms: f64,
    pub nn_slice_ms: f64,
    /// C_ns and C_nn before flooring (eqs 12–18), for reports.
    pub ns_exact: f64,
    pub nn_exact: f64,
}

/// Eqs 11–20: size the two pools over `m` physical CPUs (Dom0's excluded).
///
/// Non-hungry VMs keep what they use; the rest, C_h = M − C_nh, is shared among hungry VMs by
/// weight. If no VM is hungry, C_h is shared among all VMs by weight (open question 4). Each
/// pool gets the floor of its sum; the CPUs the floors leave over go one by one to a pool drawn
/// with probability proportional to its fractional part rounded to one decimal (eqs 19–20).
pub fn plan_pools(m: usize, vms: &[VmNeed], rng: &mut Rng, params: &PoolParams) -> PoolPlan {
    let weights: Vec<f64> = vms.iter().map(|v| v.weight).collect();
    let shares = baseline_shares(m as f64, &weights);
    let hungry: Vec<bool> = vms
        .iter()
        .zip(&shares)
        .map(|(v, &c)| is_hungry(v.load.max(0.0), c))
        .collect();
    let (mut ns_exact, mut nn_exact) = (0.0, 0.0);
    for (v, &h) in vms.iter().zip(&hungry) {
        if !h {
            match v.kind {
                VmKind::Sensitive => ns_exact += v.load.max(0.0),
                VmKind::NotSensitive => nn_exact += v.load.max(0.0),
            }
        }
    }
    let left = m as f64 - ns_exact - nn_exact; // C_h (15)
    let any_hungry = hungry.iter().any(|&h| h);
    let receives = |i: usize| !any_hungry || hungry[i];
    let receiving_weight: f64 = (0..vms.len())
        .filter(|&i| receives(i))
        .map(|i| weights[i])
        .sum();
    if receiving_weight > 0.0 {
        for (i, v) in vms.iter().enumerate().filter(|&(i, _)| receives(i)) {
            let part = left * weights[i] / receiving_weight; // C_h^j (16)
            match v.kind {
                VmKind::Sensitive => ns_exact += part,
                VmKind::NotSensitive => nn_exact += part,
            }
        }
    }
    // Floors, with a 1e-9 tolerance so 1.9999999999 counts as 2.
    let floor = |x: f64| (x + 1e-9).floor().max(0.0) as usize;
    let (mut ns, mut nn) = (floor(ns_exact).min(m), floor(nn_exact).min(m));
    // Fractional parts rounded to one decimal, as tenths (eqs 19–20).
    let tenths = |x: f64, f: usize| ((x - f as f64).max(0.0) * 10.0).round() as usize;
    let (dt, et) = (tenths(ns_exact, ns), tenths(nn_exact, nn));
    while ns + nn < m {
        let total = dt + et;
        let to_ns = if total == 0 {
            rng.below(2) == 0
        } else {
            rng.below(total) < dt // r uniform in 1..=total, r ≤ 10δ
        };
        if to_ns {
            ns += 1
        } else {
            nn += 1
        }
    }
    let ns_vms: Vec<usize> = (0..vms.len())
        .filter(|&i| vms[i].kind == VmKind::Sensitive)
        .collect();
    let nn_vms: Vec<usize> = (0..vms.len())
        .filter(|&i| vms[i].kind == VmKind::NotSensitive)
        .collect();
    if params.nonempty_pool_floor {
        if !ns_vms.is_empty() && ns == 0 && nn > 1 {
            (ns, nn) = (1, nn - 1);
        }
        if !nn_vms.is_empty() && nn == 0 && ns > 1 {
            (ns, nn) = (ns - 1, 1);
        }
    }
    PoolPlan {
        ns_cpus: ns,
        nn_cpus: nn,
        ns_vms,
        nn_vms,
        ns_slice_ms: params.ns_slice_ms,
        nn_slice_ms: params.nn_slice_ms,
        ns_exact,
        nn_exact,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rx(rq: u32, rr: u32, rqn: u32) -> RingSample {
        RingSample {
            rx_rq: rq,
            rx_rr: rr,
            rx_rqn: rqn,
            tx_sq: 0,
        }
    }

    fn tx(sq: u32) -> RingSample {
        RingSample {
            tx_sq: sq,
            ..RingSample::default()
        }
    }

    #[test]
    fn the_hold_keeps_a_vm_nsvm_for_its_windows_after_its_rings_last_said_so() {
        use VmKind::{NotSensitive as N, Sensitive as S};
        let mut hold = NsvmHold::new(2, 2, 2);
        let rings = [S, N, N, N, N, N, S, N];
        let kinds: Vec<VmKind> = rings.iter().map(|&k| hold.kind(0, k)).collect();
        assert_eq!(kinds, [S, S, S, N, N, N, S, S]);
        assert_eq!(hold.kind(1, N), N, "VMs are held apart");
        let mut as_written = NsvmHold::new(1, 0, 80);
        assert_eq!(
            [S, N, S, N].map(|k| as_written.kind(0, k)),
            [S, N, S, N],
            "no hold: the rings decide"
        );
    }

    #[test]
    fn a_vm_back_soon_after_its_hold_gets_twice_the_hold_up_to_the_most_then_the_first_again() {
        use VmKind::{NotSensitive as N, Sensitive as S};
        let run = |h: &mut NsvmHold, rings: &[VmKind]| -> Vec<VmKind> {
            rings.iter().map(|&k| h.kind(0, k)).collect()
        };
        // Held 2 windows; out one window; back: 4; out one window; back: 6 (the most).
        let mut hold = NsvmHold::new(1, 2, 6);
        let kinds = run(&mut hold, &[S, N, N, N, S, N, N, N, N, N, S]);
        assert_eq!(kinds, [S, S, S, N, S, S, S, S, S, N, S]);
        assert_eq!(hold.hold_of(0), 6);
        // A VM that was let go long enough ago to have been calm on its own: not doubled.
        let (mut far, mut near) = (NsvmHold::new(1, 2, 6), NsvmHold::new(1, 2, 6));
        run(&mut far, &[S, N, N, N, N, N, S]);
        run(&mut near, &[S, N, N, N, N, S]);
        assert_eq!((far.hold_of(0), near.hold_of(0)), (2, 4));
        // Out for `max_windows` windows: the hold starts again from `windows`.
        let mut back = NsvmHold::new(1, 2, 6);
        run(&mut back, &[S, N, N, N, S]);
        assert_eq!(back.hold_of(0), 4);
        run(&mut back, &[N; 4 + 6]);
        assert_eq!(back.hold_of(0), 2);
    }

    #[test]
    fn a_pool_with_no_vms_or_no_share_of_the_cpus_is_not_built() {
        let plan = |ns_cpus: usize, ns_vms: Vec<usize>| PoolPlan {
            ns_cpus,
            nn_cpus: 6 - ns_cpus,
            ns_vms,
            nn_vms: vec![1],
            ns_slice_ms: 5.0,
            nn_slice_ms: 30.0,
            ns_exact: 0.0,
            nn_exact: 0.0,
        };
        assert_eq!(pools_built(&plan(2, vec![0]), 6), (vec![0], 2));
        assert_eq!(pools_built(&plan(0, vec![0]), 6), (vec![], 0));
        assert_eq!(pools_built(&plan(6, vec![0]), 6), (vec![], 0));
        assert_eq!(pools_built(&plan(2, vec![]), 6), (vec![], 0));
    }

    fn classify(samples: &[RingSample]) -> RingStats {
        window_stats(&NsvmThresholds::default(), samples)
    }

    #[test]
    fn quiet_rings_are_not_sensitive() {
        let s = classify(&[rx(40, 5, 0); 10]);
        assert_eq!(s.rx_overflow_freq, 0.0);
        assert_eq!(s.rx_overload_freq, 0.0);
        assert_eq!(s.tx_stall_freq, 1.0); // no TX traffic at all: all samples zero …
        assert_eq!(s.tx_mean_nonzero, 0.0); // … but the mean of none is 0, under 45
        assert_eq!(s.kind(), VmKind::NotSensitive);
    }

    #[test]
    fn rx_overflow_frequency_must_exceed_one_fifth() {
        // 2 overflows in 10 (0.2) is not > 0.2; 3 in 10 is. rq+rr+rqn = 256 counts as overflow.
        let mut w = vec![rx(10, 0, 0); 10];
        w[0] = rx(200, 50, 6);
        w[1] = rx(256, 0, 0);
        let s = classify(&w);
        assert_eq!(s.rx_overflow_freq, 0.2);
        assert!(!s.rx_sensitive);
        w[2] = rx(100, 100, 100);
        assert!(classify(&w).rx_sensitive);
        // rq + rr + rqn = 255 is not an overflow.
        assert_eq!(classify(&[rx(200, 50, 5)]).rx_overflow_freq, 0.0);
    }

    #[test]
    fn rx_overload_needs_more_than_six_in_ten_and_excludes_overflows() {
        let mut w = vec![rx(150, 0, 0); 6];
        w.extend([rx(149, 0, 0); 4]);
        let s = classify(&w);
        assert_eq!(s.rx_overload_freq, 0.6);
        assert!(!s.rx_sensitive);
        w[6] = rx(180, 10, 0);
        assert!(classify(&w).rx_sensitive);
        // An overflowing sample counts as overflow, not overload.
        let s = classify(&[rx(200, 100, 0)]);
        assert_eq!((s.rx_overflow_freq, s.rx_overload_freq), (1.0, 0.0));
    }

    #[test]
    fn readings_above_the_ring_are_clamped() {
        // A garbage reading of 10 000 counts as 256: an overflow, and a TX sample of 256.
        let s = classify(&[RingSample {
            rx_rq: 10_000,
            rx_rr: 0,
            rx_rqn: 0,
            tx_sq: 10_000,
        }]);
        assert_eq!(s.rx_overflow_freq, 1.0);
        assert_eq!(s.tx_mean_nonzero, 256.0);
    }

    #[test]
    fn tx_stagnation_needs_big_bursts_and_many_zeros() {
        // The paper's Queue-1 TCP send side: few non-zero samples of mean ≈ 50.7 → sensitive.
        let mut w = vec![tx(0); 10];
        w[2] = tx(48);
        w[7] = tx(53);
        w[9] = tx(51);
        let s = classify(&w);
        assert!((s.tx_mean_nonzero - 50.666_666).abs() < 1e-3);
        assert_eq!(s.tx_stall_freq, 0.7);
        assert!(s.tx_sensitive);
        assert_eq!(s.kind(), VmKind::Sensitive);
        // Queue-0: the queue never empties (mean ≈ 5): not sensitive.
        assert!(!classify(&[tx(5); 10]).tx_sensitive);
        // Big bursts but only half the samples zero (0.5 is not > 0.5): not sensitive.
        let half: Vec<RingSample> = (0..10)
            .map(|i| tx(if i % 2 == 0 { 0 } else { 90 }))
            .collect();
        assert!(!classify(&half).tx_sensitive);
        // Mean exactly 45 is not > 45.
        let mut w = vec![tx(0); 10];
        w[0] = tx(45);
        assert!(!classify(&w).tx_sensitive);
    }

    #[test]
    fn classifier_reports_once_per_window() {
        let mut c = NsvmClassifier::paper();
        assert_eq!(c.samples_per_window(), 10);
        for _ in 0..9 {
            assert!(c.push(rx(0, 0, 0)).is_none());
        }
        assert_eq!(c.push(rx(0, 0, 0)).unwrap().kind(), VmKind::NotSensitive);
        // The next window starts empty: ten overflowing samples make it sensitive.
        let mut last = None;
        for _ in 0..10 {
            last = c.push(rx(256, 0, 0));
        }
        assert_eq!(last.unwrap().kind(), VmKind::Sensitive);
    }

    #[test]
    fn shares_and_hunger() {
        // Six VMs with 2 vCPUs on M = 6: C_i = 1 each (spec 002 §2.8).
        let c = baseline_shares(6.0, &[2.0; 6]);
        assert!(c.iter().all(|&x| (x - 1.0).abs() < 1e-12));
        assert!(is_hungry(2.0, 1.0));
        assert!(!is_hungry(1.0, 1.0));
    }

    fn need(kind: VmKind, weight: f64, load: f64) -> VmNeed {
        VmNeed { kind, weight, load }
    }

    #[test]
    fn papers_worked_example_one_nsvm_among_six_hungry_vms() {
        let mut vms = vec![need(VmKind::NotSensitive, 2.0, 2.0); 6];
        vms[0].kind = VmKind::Sensitive;
        let plan = plan_pools(6, &vms, &mut Rng::new(1), &PoolParams::default());
        assert_eq!((plan.ns_cpus, plan.nn_cpus), (1, 5));
        assert_eq!(plan.ns_vms, vec![0]);
        assert_eq!(plan.nn_vms, vec![1, 2, 3, 4, 5]);
        assert_eq!((plan.ns_slice_ms, plan.nn_slice_ms), (5.0, 30.0));
    }

    #[test]
    fn non_hungry_vms_keep_their_load_and_the_rest_goes_by_weight() {
        // M = 6, four equal VMs (C_i = 1.5). NSVM A uses 0.5 (not hungry), NNVM B uses 1.0 (not
        // hungry); NSVM C and NNVM D are hungry. C_nh = 1.5, C_h = 4.5, 2.25 each.
        // C_ns = 0.5 + 2.25 = 2.75, C_nn = 1.0 + 2.25 = 3.25: floors 2 + 3, one CPU left;
        // fractions 0.75 and 0.25 round (half away from zero) to 8 and 3 tenths.
        let vms = [
            need(VmKind::Sensitive, 1.0, 0.5),
            need(VmKind::NotSensitive, 1.0, 1.0),
            need(VmKind::Sensitive, 1.0, 3.0),
            need(VmKind::NotSensitive, 1.0, 3.0),
        ];
        let mut rng = Rng::new(7);
        let mut to_ns = 0;
        for _ in 0..11_000 {
            let plan = plan_pools(6, &vms, &mut rng, &PoolParams::default());
            assert!((plan.ns_exact - 2.75).abs() < 1e-12);
            assert!((plan.nn_exact - 3.25).abs() < 1e-12);
            assert_eq!(plan.ns_cpus + plan.nn_cpus, 6);
            assert!(plan.ns_cpus == 2 || plan.ns_cpus == 3);
            to_ns += (plan.ns_cpus == 3) as u32;
        }
        // P(leftover → NSVM pool) = 8 / 11: 8000 of 11 000 expected.
        assert!((7_700..8_300).contains(&to_ns), "{to_ns}");
    }

    #[test]
    fn no_nsvm_means_an_empty_nsvm_pool_and_no_hungry_vm_shares_by_weight() {
        let vms = [
            need(VmKind::NotSensitive, 1.0, 0.2),
            need(VmKind::NotSensitive, 1.0, 0.1),
        ];
        let plan = plan_pools(4, &vms, &mut Rng::new(3), &PoolParams::default());
        assert_eq!((plan.ns_cpus, plan.nn_cpus), (0, 4));
        // Nobody hungry: C_h = 4 − 0.3 = 3.7 split by weight, so C_ns = 0.1 + 1.85 for an NSVM.
        let vms = [
            need(VmKind::Sensitive, 1.0, 0.1),
            need(VmKind::NotSensitive, 1.0, 0.2),
        ];
        let plan = plan_pools(4, &vms, &mut Rng::new(3), &PoolParams::default());
        assert!((plan.ns_exact - 1.95).abs() < 1e-12);
        assert!((plan.nn_exact - 2.05).abs() < 1e-12);
        assert_eq!(plan.ns_cpus + plan.nn_cpus, 4);
    }

    #[test]
    fn a_pool_with_vms_gets_at_least_one_cpu() {
        // A sensitive VM that uses almost nothing next to a hungry NNVM: C_ns = 0.05, C_nn = 5.95;
        // floors 0 + 5 and the leftover goes to the NSVM pool with odds 1 in 11 (tenths 1 and
        // 10). With the floor the NSVM pool always has a CPU.
        let vms = [
            need(VmKind::Sensitive, 1.0, 0.05),
            need(VmKind::NotSensitive, 1.0, 9.0),
        ];
        for seed in 0..50 {
            let plan = plan_pools(6, &vms, &mut Rng::new(seed), &PoolParams::default());
            assert_eq!(plan.ns_cpus + plan.nn_cpus, 6);
            assert!(plan.ns_cpus >= 1, "seed {seed}");
            let bare = PoolParams {
                nonempty_pool_floor: false,
                ..PoolParams::default()
            };
            let raw = plan_pools(6, &vms, &mut Rng::new(seed), &bare);
            assert!(raw.ns_cpus <= 1);
        }
    }
}
