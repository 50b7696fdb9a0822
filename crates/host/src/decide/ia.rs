//! Spec 001 (IA, the integrated vCPU scheduler for asymmetric multicore hosts): the pure parts.
//!
//! A host is a list of cores, each with a *scaled factor* SF = its frequency / the slowest
//! core's frequency. Cores faster than the slowest are `CoreClass::Fast`, the others `Slow` (the
//! paper handles exactly two classes). Everything here is a function of numbers the caller
//! passes in: no clock, no I/O, so the simulator and a real host agent call the same code.
//!
//! Labels as in the spec: what the spec marks "(reconstructed)" is implemented as reconstructed,
//! and each uncertain constant is a field of `IaParams` (see docs/host-sim.md).

use std::cmp::Ordering;

/// The speed class of a core.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CoreClass {
    Fast,
    Slow,
}

/// The tunable constants of IA. `Default` gives the paper's values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IaParams {
    /// μ: weight of demand against load in the utility factor (paper: 0.6).
    pub mu: f64,
    /// UF cut-off: a VM whose UF is at most this goes to fast cores (paper: 0.3).
    pub threshold: f64,
    /// Z: slots per accounting cycle (paper: 30 ms cycle / 10 ms slot = 3).
    pub slots_per_cycle: u32,
    /// SR_unit: scaled resource one slot on a slow core costs (reconstructed: 1).
    pub sr_unit: f64,
    /// Cap on a vCPU's SR balance, as a multiple of its per-cycle increment: the balance stays
    /// within ±cap × SR_inc. `None` (the default) is uncapped, as the paper describes
    /// (open question 3).
    pub sr_cap_cycles: Option<f64>,
}

impl Default for IaParams {
    fn default() -> Self {
        IaParams {
            mu: 0.6,
            threshold: 0.3,
            slots_per_cycle: 3,
            sr_unit: 1.0,
            sr_cap_cycles: None,
        }
    }
}

/// SF(C_i) = freq(C_i) / the lowest core frequency on the platform.
pub fn scaled_factor(freq: f64, lowest_freq: f64) -> f64 {
    freq / lowest_freq
}

/// The cores of a host as IA sees them: each core's SF (the slowest has SF 1).
#[derive(Clone, Debug, PartialEq)]
pub struct Platform {
    pub sf: Vec<f64>,
}

impl Platform {
    /// From core frequencies in any unit: SF is each frequency over the lowest.
    pub fn from_freqs(freqs: &[f64]) -> Platform {
        let lowest = freqs.iter().cloned().fold(f64::INFINITY, f64::min);
        Platform {
            sf: freqs.iter().map(|&f| scaled_factor(f, lowest)).collect(),
        }
    }

    fn slowest(&self) -> f64 {
        self.sf.iter().cloned().fold(f64::INFINITY, f64::min)
    }

    /// A core is fast when it is faster than the slowest core (tolerance 1e-9).
    pub fn class(&self, core: usize) -> CoreClass {
        class_of(self.sf[core], self.slowest())
    }

    pub fn cores_of(&self, class: CoreClass) -> Vec<usize> {
        let slowest = self.slowest();
        (0..self.sf.len())
            .filter(|&c| class_of(self.sf[c], slowest) == class)
            .collect()
    }

    /// N(FC).
    pub fn n_fast(&self) -> usize {
        self.cores_of(CoreClass::Fast).len()
    }

    /// N(SC).
    pub fn n_slow(&self) -> usize {
        self.cores_of(CoreClass::Slow).len()
    }

    pub fn sum_sf(&self) -> f64 {
        self.sf.iter().sum()
    }
}

fn class_of(sf: f64, slowest: f64) -> CoreClass {
    if sf > slowest + 1e-9 {
        CoreClass::Fast
    } else {
        CoreClass::Slow
    }
}

/// What IA needs to know of a VM: its weight ω and its vCPU count |P|.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VmShape {
    pub weight: f64,
    pub vcpus: usize,
}

/// Demand(V) = max(0, |P(V)| − N(FC))   (eq. 7).
pub fn demand(vcpus: usize, n_fast: usize) -> f64 {
    vcpus.saturating_sub(n_fast) as f64
}

/// VCPULoad(v) = ω(V)/Σω · ΣSF / |P(V)|: the load one vCPU of V puts on its core, in slow-core
/// units, so a core with CoreLoad/SF = 1 is fully subscribed (eq. 11, reconstructed).
pub fn vcpu_load(vm: VmShape, total_weight: f64, sum_sf: f64) -> f64 {
    vm.weight / total_weight * sum_sf / vm.vcpus as f64
}

/// AvgLoad(S) = mean over the cores of S of CoreLoad / SF; 0 for an empty set (eq. 9,
/// reconstructed).
pub fn avg_load(platform: &Platform, core_load: &[f64], cores: &[usize]) -> f64 {
    if cores.is_empty() {
        return 0.0;
    }
    let sum: f64 = cores.iter().map(|&c| core_load[c] / platform.sf[c]).sum();
    sum / cores.len() as f64
}

/// Load = max(0, AvgLoad(FC) − AvgLoad(SC))   (eq. 8).
pub fn load_gap(platform: &Platform, core_load: &[f64]) -> f64 {
    let fast = avg_load(platform, core_load, &platform.cores_of(CoreClass::Fast));
    let slow = avg_load(platform, core_load, &platform.cores_of(CoreClass::Slow));
    (fast - slow).max(0.0)
}

/// UF(V) = μ · Demand(V) + (1 − μ) · Load   (eq. 6).
pub fn utility_factor(mu: f64, demand: f64, load: f64) -> f64 {
    mu * demand + (1.0 - mu) * load
}

/// Why a VM cannot be mapped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MappingError {
    /// Constraint (2): a VM may not have more vCPUs than the host has cores.
    TooManyVcpus {
        vm: usize,
        vcpus: usize,
        cores: usize,
    },
}

impl std::fmt::Display for MappingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MappingError::TooManyVcpus { vm, vcpus, cores } => write!(
                f,
                "VM {vm} has {vcpus} vCPUs but the host has {cores} cores (IA needs one core per vCPU)"
            ),
        }
    }
}

impl std::error::Error for MappingError {}

/// The `n` least-loaded cores of `candidates` by CoreLoad/SF, ties broken by core index
/// (the paper heap-sorts; a sort gives the same set).
pub fn least_loaded(
    platform: &Platform,
    core_load: &[f64],
    candidates: &[usize],
    n: usize,
) -> Vec<usize> {
    let mut cores = candidates.to_vec();
    cores.sort_by(|&a, &b| {
        let (la, lb) = (core_load[a] / platform.sf[a], core_load[b] / platform.sf[b]);
        la.partial_cmp(&lb)
            .unwrap_or(Ordering::Equal)
            .then(a.cmp(&b))
    });
    cores.truncate(n);
    cores
}

/// Algorithm 1 for one VM: the cores its vCPUs go to, one vCPU per core (vCPU i on the i-th
/// core returned). `core_load` is each core's current CoreLoad.
///
/// - more vCPUs than slow cores: the least-loaded cores of the whole host;
/// - UF ≤ Threshold and no more vCPUs than fast cores: the least-loaded fast cores;
/// - otherwise the least-loaded slow cores (this includes UF ≤ Threshold with more vCPUs than
///   fast cores, possible when μ ≤ Threshold: open question 2).
pub fn map_vm(
    platform: &Platform,
    core_load: &[f64],
    vm: VmShape,
    params: &IaParams,
) -> Result<Vec<usize>, MappingError> {
    let all: Vec<usize> = (0..platform.sf.len()).collect();
    if vm.vcpus > all.len() {
        return Err(MappingError::TooManyVcpus {
            vm: 0,
            vcpus: vm.vcpus,
            cores: all.len(),
        });
    }
    let fast = platform.cores_of(CoreClass::Fast);
    let slow = platform.cores_of(CoreClass::Slow);
    let pool = if vm.vcpus > slow.len() {
        all
    } else {
        let uf = utility_factor(
            params.mu,
            demand(vm.vcpus, fast.len()),
            load_gap(platform, core_load),
        );
        if uf <= params.threshold && vm.vcpus <= fast.len() {
            fast
        } else {
            slow
        }
    };
    Ok(least_loaded(platform, core_load, &pool, vm.vcpus))
}

/// Algorithm 1 for VMs started in the given order on an empty host: each VM is mapped with
/// `map_vm` against the load of the VMs before it; its vCPUs then add their VCPULoad to their
/// cores. VCPULoad uses the total weight of all the VMs given (open question 7).
/// Returns, per VM, the core of each of its vCPUs.
pub fn initial_mapping(
    platform: &Platform,
    vms: &[VmShape],
    params: &IaParams,
) -> Result<Vec<Vec<usize>>, MappingError> {
    let total_weight: f64 = vms.iter().map(|v| v.weight).sum();
    let mut core_load = vec![0.0; platform.sf.len()];
    let mut out = Vec::with_capacity(vms.len());
    for (i, &vm) in vms.iter().enumerate() {
        let cores = map_vm(platform, &core_load, vm, params).map_err(|e| match e {
            MappingError::TooManyVcpus { vcpus, cores, .. } => MappingError::TooManyVcpus {
                vm: i,
                vcpus,
                cores,
            },
        })?;
        let load = vcpu_load(vm, total_weight, platform.sum_sf());
        for &c in &cores {
            core_load[c] += load;
        }
        out.push(cores);
    }
    Ok(out)
}

/// (12) SR_total = Z · ΣSF · SR_unit: the scaled resource the host hands out per cycle.
pub fn sr_total(platform: &Platform, params: &IaParams) -> f64 {
    params.slots_per_cycle as f64 * platform.sum_sf() * params.sr_unit
}

/// (13) SR_inc(v) = SR_total · ω(V)/Σω / |P(V)|.
pub fn sr_increment(sr_total: f64, vm: VmShape, total_weight: f64) -> f64 {
    sr_total * vm.weight / total_weight / vm.vcpus as f64
}

/// (14) SR(v) ← SR(v) + SR_inc(v), carrying over overdraft and surplus; with
/// `sr_cap_cycles = Some(k)` the result is kept within ±k · SR_inc.
pub fn refill(sr: f64, increment: f64, params: &IaParams) -> f64 {
    let next = sr + increment;
    match params.sr_cap_cycles {
        Some(k) => next.clamp(-k * increment, k * increment),
        None => next,
    }
}

/// Algorithm 3: one slot of running on a core of speed `sf` costs SF · SR_unit, so equal
/// weights buy equal work, not equal time.
pub fn consume(sr: f64, sf: f64, params: &IaParams) -> f64 {
    sr - sf * params.sr_unit
}

/// The balance that decides for a vCPU of a co-scheduled (parallel) VM: the mean SR of its
/// vCPUs (open question 5). Its vCPUs run as one gang, so the gang is selected, kept and queued
/// by what the VM as a whole has left. Per-vCPU balances split a gang's fate: a sibling forced
/// into gang slots on a fast core pays SF for each and sinks below zero while the other,
/// blocked at barriers, piles up SR it cannot spend without that sibling (issue 26: +50 and
/// −47 slots on one VM after 10 s).
pub fn gang_balance(sr: &[f64]) -> f64 {
    if sr.is_empty() {
        return 0.0;
    }
    sr.iter().sum::<f64>() / sr.len() as f64
}

/// Whether a VM takes part in fast-core shares: its vCPUs may use fast cores without breaking
/// principle 1. A serial VM's vCPUs are scheduled one by one, so any of them may run on a fast
/// core; a co-scheduled VM only when its gang fits the fast class (|P| ≤ N(FC)).
pub fn shares_fast_cores(vcpus: usize, coscheduled: bool, n_fast: usize) -> bool {
    n_fast > 0 && (!coscheduled || vcpus <= n_fast)
}

/// Fast-core shares, settled once per cycle (with Algorithm 2). SR buys equal *work*, so a VM
/// given more fast-core time than another of equal weight gets less CPU *time* for the same
/// work; equal work and equal time together need equal fast-core time. The fast-core time
/// `received` this cycle by the `active` VMs (those that ran and share fast cores) is split
/// among them by weight; each one's `owed` balance grows by its part and falls by what it got.
/// Zero-sum over the active VMs; the others' balances are left as they are.
pub fn settle_fast_shares(owed: &mut [f64], received: &[f64], weight: &[f64], active: &[bool]) {
    let members = || (0..owed.len()).filter(|&i| active[i]);
    let total: f64 = members().map(|i| received[i]).sum();
    let weights: f64 = members().map(|i| weight[i]).sum();
    if weights <= 0.0 {
        return;
    }
    for i in members() {
        owed[i] += total * weight[i] / weights - received[i];
    }
}

/// Whether a vCPU with SR left may take (or keep past its slot) a core of class `core`, as far
/// as fast-core shares go: a fast core goes first to a VM that is owed fast-core time; VMs that
/// take no part in the shares, and slow cores, are not restricted.
pub fn fits_core(core: CoreClass, shares_fast: bool, fast_owed: f64) -> bool {
    core == CoreClass::Slow || !shares_fast || fast_owed > 0.0
}

/// A vCPU running on a core, as a waking vCPU that might take that core sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Runner {
    pub core: usize,
    /// Its SR (its gang's, `gang_balance`, for a co-scheduled VM).
    pub balance: f64,
    /// It runs in a gang: a sibling of it is running too.
    pub in_gang: bool,
    /// It belongs to a co-scheduled VM.
    pub parallel: bool,
    /// The core is of the other class than the waking vCPU's own core.
    pub other_class: bool,
}

/// Where a vCPU that wakes with SR left (`waker` > 0), and can run neither on its own core nor
/// on an idle one, goes: the core of a runner whose SR is exhausted (≤ 0), if any. Algorithm 4
/// puts SR > 0 first at every slot; without this a vCPU woken at a barrier, whose core another
/// gang holds, waits while vCPUs without SR keep theirs: two gangs split over the same two cores
/// take turns there, one vCPU each, never running together, while a VM far overdrawn keeps the
/// fast cores (spec001-fair-facesim: SCT spread 0.445). Among runners without SR it takes the
/// one whose stop costs least: a serial vCPU before a parallel one running alone before a gang
/// member (its siblings would spin), a core of its own class before the other (its siblings
/// run there), then the least SR.
pub fn core_to_displace(waker: f64, runners: impl IntoIterator<Item = Runner>) -> Option<usize> {
    if waker <= 0.0 {
        return None;
    }
    let cost = |r: &Runner| (r.in_gang, r.parallel, r.other_class);
    runners
        .into_iter()
        .filter(|r| r.balance <= 0.0)
        .min_by(|a, b| cost(a).cmp(&cost(b)).then(a.balance.total_cmp(&b.balance)))
        .map(|r| r.core)
}

/// The three run queues of a core (Sec. 3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RunQueue {
    /// queue1: vCPUs whose VM belongs on this core's class.
    HomeClass,
    /// queue2: vCPUs of VMs wider than the slow cores (too wide for either class).
    TooWide,
    /// queue3: vCPUs whose VM belongs on the other class.
    OtherClass,
}

/// The class a VM of `vcpus` vCPUs belongs on, or `None` when it is wider than the slow cores:
/// |P| ≤ N(FC) → fast; N(FC) < |P| ≤ N(SC) → slow.
pub fn home_class(vcpus: usize, n_fast: usize, n_slow: usize) -> Option<CoreClass> {
    if vcpus > n_slow {
        None
    } else if vcpus <= n_fast {
        Some(CoreClass::Fast)
    } else {
        Some(CoreClass::Slow)
    }
}

/// Which queue of a core of class `core` a vCPU of a `vcpus`-wide VM joins (Sec. 3.2 table).
pub fn queue_for(core: CoreClass, vcpus: usize, n_fast: usize, n_slow: usize) -> RunQueue {
    match home_class(vcpus, n_fast, n_slow) {
        None => RunQueue::TooWide,
        Some(home) if home == core => RunQueue::HomeClass,
        Some(_) => RunQueue::OtherClass,
    }
}

/// The order a core searches its own queues, and a same-class victim's queues when stealing.
pub const LOCAL_ORDER: [RunQueue; 3] =
    [RunQueue::HomeClass, RunQueue::TooWide, RunQueue::OtherClass];

/// The order a core searches the queues of a victim of the other class when stealing: the
/// victim's queue3 holds the vCPUs that belong on the thief's class.
pub const OTHER_CLASS_ORDER: [RunQueue; 3] =
    [RunQueue::OtherClass, RunQueue::TooWide, RunQueue::HomeClass];

/// The queue order for stealing from a core of class `victim` onto a core of class `thief`.
pub fn steal_order(thief: CoreClass, victim: CoreClass) -> [RunQueue; 3] {
    if thief == victim {
        LOCAL_ORDER
    } else {
        OTHER_CLASS_ORDER
    }
}

/// Algorithm 2's reorder: vCPUs with SR > 0 move before the others, each group keeping its
/// order (a stable partition; SR = 0 counts as exhausted, as in Algorithm 4's test).
pub fn reorder_by_sr<T>(queue: &mut Vec<T>, sr: impl Fn(&T) -> f64) {
    let (mut positive, rest): (Vec<T>, Vec<T>) = queue.drain(..).partition(|v| sr(v) > 0.0);
    positive.extend(rest);
    *queue = positive;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paper's testbed: 2 cores at 2.7 GHz and 6 at 1.5 GHz.
    fn testbed() -> Platform {
        Platform::from_freqs(&[2.7, 2.7, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5])
    }

    fn vm(vcpus: usize) -> VmShape {
        VmShape {
            weight: 256.0,
            vcpus,
        }
    }

    #[test]
    fn scaled_factor_and_classes_of_the_testbed() {
        let p = testbed();
        assert!((p.sf[0] - 1.8).abs() < 1e-12);
        assert_eq!(p.sf[2], 1.0);
        assert_eq!(p.cores_of(CoreClass::Fast), vec![0, 1]);
        assert_eq!((p.n_fast(), p.n_slow()), (2, 6));
        assert!((p.sum_sf() - 9.6).abs() < 1e-12);
        // A symmetric host has no fast core.
        assert_eq!(Platform::from_freqs(&[2.7; 4]).n_fast(), 0);
    }

    #[test]
    fn utility_factor_by_hand() {
        // 4 vCPUs, 2 fast cores: demand 2; load gap 0.5: UF = 0.6·2 + 0.4·0.5 = 1.4.
        assert_eq!(demand(4, 2), 2.0);
        assert_eq!(demand(1, 2), 0.0);
        assert!((utility_factor(0.6, 2.0, 0.5) - 1.4).abs() < 1e-12);
    }

    #[test]
    fn loads_are_relative_to_capacity() {
        let p = testbed();
        // One VM of weight 1 out of 4 equal VMs, 2 vCPUs: 1/4 · 9.6 / 2 = 1.2.
        let l = vcpu_load(
            VmShape {
                weight: 1.0,
                vcpus: 2,
            },
            4.0,
            p.sum_sf(),
        );
        assert!((l - 1.2).abs() < 1e-12);
        // Both fast cores carry 1.8 (CoreLoad/SF = 1), slow ones 0.5: gap 0.5.
        let mut load = vec![0.5; 8];
        load[0] = 1.8;
        load[1] = 1.8;
        assert!((avg_load(&p, &load, &[0, 1]) - 1.0).abs() < 1e-12);
        assert!((load_gap(&p, &load) - 0.5).abs() < 1e-12);
        // Busier slow cores never give a negative gap.
        assert_eq!(load_gap(&p, &[0.0, 0.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0]), 0.0);
    }

    #[test]
    fn narrow_vm_goes_fast_until_the_gap_passes_threshold_over_one_minus_mu() {
        let p = testbed();
        let params = IaParams::default();
        // Empty host: a 2-vCPU VM has UF 0 and gets both fast cores.
        assert_eq!(map_vm(&p, &[0.0; 8], vm(2), &params).unwrap(), vec![0, 1]);
        // Gap 0.74 (UF 0.296 ≤ 0.3): still fast. Gap 0.76 (UF 0.304): slow.
        let with_gap = |g: f64| {
            let mut l = vec![0.0; 8];
            l[0] = g * 1.8;
            l[1] = g * 1.8;
            l
        };
        assert_eq!(
            map_vm(&p, &with_gap(0.74), vm(1), &params).unwrap(),
            vec![0]
        );
        assert_eq!(
            map_vm(&p, &with_gap(0.76), vm(1), &params).unwrap(),
            vec![2]
        );
    }

    #[test]
    fn wide_vms_go_slow_or_everywhere() {
        let p = testbed();
        let params = IaParams::default();
        // 3 vCPUs > 2 fast cores: UF ≥ 0.6, slow cores, least loaded first.
        let mut load = vec![0.0; 8];
        load[2] = 1.0;
        load[3] = 0.5;
        assert_eq!(map_vm(&p, &load, vm(3), &params).unwrap(), vec![4, 5, 6]);
        // 8 vCPUs > 6 slow cores: all cores; 9 is too many.
        let mut all = map_vm(&p, &load, vm(8), &params).unwrap();
        all.sort();
        assert_eq!(all, (0..8).collect::<Vec<_>>());
        assert_eq!(
            map_vm(&p, &load, vm(9), &params),
            Err(MappingError::TooManyVcpus {
                vm: 0,
                vcpus: 9,
                cores: 8
            })
        );
    }

    #[test]
    fn uf_under_threshold_but_wider_than_fast_cores_goes_slow() {
        // μ = 0.1 ≤ Threshold: a 3-vCPU VM has UF 0.1 but cannot fit on 2 fast cores.
        let p = testbed();
        let params = IaParams {
            mu: 0.1,
            ..IaParams::default()
        };
        assert_eq!(
            map_vm(&p, &[0.0; 8], vm(3), &params).unwrap(),
            vec![2, 3, 4]
        );
    }

    #[test]
    fn initial_mapping_of_the_papers_vm_set() {
        // Sec. 4.2.1: VMs of 2, 2, 6, 8 vCPUs, equal weights. ΣSF = 9.6, Σω = 4.
        let p = testbed();
        let m = initial_mapping(&p, &[vm(2), vm(2), vm(6), vm(8)], &IaParams::default()).unwrap();
        // VM0 on the empty fast cores. Each of its vCPUs adds 1/4·9.6/2 = 1.2, so the fast cores
        // sit at 1.2/1.8 = 0.667 and the gap is 0.667 < 0.75: VM1 shares the fast cores too.
        assert_eq!(m[0], vec![0, 1]);
        assert_eq!(m[1], vec![0, 1]);
        // VM2 (6 vCPUs) fills the six slow cores.
        assert_eq!(m[2], vec![2, 3, 4, 5, 6, 7]);
        // VM3 (8 vCPUs) spans every core, one vCPU each.
        let mut v3 = m[3].clone();
        v3.sort();
        assert_eq!(v3, (0..8).collect::<Vec<_>>());
        // Error names the VM.
        let err = initial_mapping(&p, &[vm(2), vm(9)], &IaParams::default()).unwrap_err();
        assert_eq!(
            err,
            MappingError::TooManyVcpus {
                vm: 1,
                vcpus: 9,
                cores: 8
            }
        );
    }

    #[test]
    fn scaled_resource_allocation_and_consumption() {
        let p = testbed();
        let params = IaParams::default();
        // SR_total = 3 · 9.6 · 1 = 28.8; a VM of weight 1 in 4, 2 vCPUs: 28.8/4/2 = 3.6.
        let total = sr_total(&p, &params);
        assert!((total - 28.8).abs() < 1e-12);
        let inc = sr_increment(
            total,
            VmShape {
                weight: 1.0,
                vcpus: 2,
            },
            4.0,
        );
        assert!((inc - 3.6).abs() < 1e-12);
        // A slot on a fast core costs 1.8, on a slow core 1: two fast slots overdraw 3.6 → 0,
        // three fast slots leave −1.8, and the next cycle's refill starts from there.
        let after_two = consume(consume(inc, 1.8, &params), 1.8, &params);
        assert!(after_two.abs() < 1e-12);
        let overdrawn = consume(after_two, 1.8, &params);
        assert!((refill(overdrawn, inc, &params) - 1.8).abs() < 1e-12);
        assert_eq!(consume(3.0, 1.0, &params), 2.0);
        // Uncapped by default; capped at ±1 cycle when asked.
        assert_eq!(refill(10.0, 3.6, &params), 13.6);
        let capped = IaParams {
            sr_cap_cycles: Some(1.0),
            ..params
        };
        assert_eq!(refill(10.0, 3.6, &capped), 3.6);
        assert_eq!(refill(-10.0, 3.6, &capped), -3.6);
    }

    #[test]
    fn equal_weights_buy_equal_work_on_fast_and_slow_cores() {
        // Over one cycle a vCPU on a fast core exhausts its SR in fewer slots than one on a
        // slow core, and both get the same SF-weighted work before SR runs out.
        let params = IaParams::default();
        let slots_until_empty = |sf: f64| {
            let (mut sr, mut n) = (5.4, 0);
            while sr > 1e-9 {
                sr = consume(sr, sf, &params);
                n += 1;
            }
            n
        };
        assert_eq!(slots_until_empty(1.8), 3); // 3 · 1.8 = 5.4 units of work
        assert_eq!(slots_until_empty(1.0), 6); // 5.4 units need 6 whole slow slots
    }

    #[test]
    fn three_way_queue_split_matches_the_table() {
        let (nf, ns) = (2, 6);
        // |P| ≤ N(FC): queue1 on fast cores, queue3 on slow cores.
        assert_eq!(queue_for(CoreClass::Fast, 2, nf, ns), RunQueue::HomeClass);
        assert_eq!(queue_for(CoreClass::Slow, 2, nf, ns), RunQueue::OtherClass);
        // N(FC) < |P| ≤ N(SC): queue1 on slow cores, queue3 on fast cores (boundaries 3 and 6).
        assert_eq!(queue_for(CoreClass::Slow, 3, nf, ns), RunQueue::HomeClass);
        assert_eq!(queue_for(CoreClass::Slow, 6, nf, ns), RunQueue::HomeClass);
        assert_eq!(queue_for(CoreClass::Fast, 6, nf, ns), RunQueue::OtherClass);
        // |P| > N(SC): queue2 everywhere.
        assert_eq!(queue_for(CoreClass::Fast, 7, nf, ns), RunQueue::TooWide);
        assert_eq!(queue_for(CoreClass::Slow, 8, nf, ns), RunQueue::TooWide);
        // Symmetric host (no fast core): every VM that fits is home on the slow cores.
        assert_eq!(queue_for(CoreClass::Slow, 1, 0, 8), RunQueue::HomeClass);
    }

    #[test]
    fn steal_orders() {
        use RunQueue::*;
        assert_eq!(
            steal_order(CoreClass::Fast, CoreClass::Fast),
            [HomeClass, TooWide, OtherClass]
        );
        assert_eq!(
            steal_order(CoreClass::Slow, CoreClass::Fast),
            [OtherClass, TooWide, HomeClass]
        );
    }

    #[test]
    fn a_gang_is_decided_by_its_mean_balance() {
        assert_eq!(gang_balance(&[50.0, -47.0]), 1.5);
        assert_eq!(gang_balance(&[2.0, -3.0]), -0.5);
        assert_eq!(gang_balance(&[]), 0.0);
    }

    #[test]
    fn fast_core_shares_are_split_by_weight_among_active_vms() {
        // Three VMs; VM 2 did not run. 30 ms of fast time went 20 to VM 0, 10 to VM 1, weights
        // 1 : 2: VM 0 is owed 10 − 20 = −10, VM 1 20 − 10 = +10; VM 2 keeps its balance.
        let mut owed = vec![0.0, 0.0, 5.0];
        settle_fast_shares(
            &mut owed,
            &[20.0, 10.0, 0.0],
            &[1.0, 2.0, 1.0],
            &[true, true, false],
        );
        assert_eq!(owed, vec![-10.0, 10.0, 5.0]);
        // Zero-sum: the next cycle VM 1 takes all 30 at equal weights: −10 + 15, 10 + 15 − 30.
        settle_fast_shares(
            &mut owed,
            &[0.0, 30.0, 0.0],
            &[1.0, 1.0, 1.0],
            &[true, true, false],
        );
        assert_eq!(owed, vec![5.0, -5.0, 5.0]);
        // Nobody active: nothing moves.
        settle_fast_shares(&mut owed, &[1.0, 1.0, 1.0], &[1.0; 3], &[false; 3]);
        assert_eq!(owed, vec![5.0, -5.0, 5.0]);
    }

    #[test]
    fn who_shares_the_fast_cores_and_who_may_take_one() {
        // Serial VMs of any width; gangs only if they fit the fast class; nobody without one.
        assert!(shares_fast_cores(8, false, 2));
        assert!(shares_fast_cores(2, true, 2));
        assert!(!shares_fast_cores(3, true, 2));
        assert!(!shares_fast_cores(1, false, 0));
        assert!(fits_core(CoreClass::Fast, true, 0.5));
        assert!(!fits_core(CoreClass::Fast, true, 0.0));
        assert!(fits_core(CoreClass::Fast, false, -9.0));
        assert!(fits_core(CoreClass::Slow, true, -9.0));
    }

    #[test]
    fn a_waker_with_sr_takes_the_cheapest_core_of_a_runner_without_sr() {
        let r = |core, balance, in_gang, parallel, other_class| Runner {
            core,
            balance,
            in_gang,
            parallel,
            other_class,
        };
        let runners = [
            r(0, -9.0, true, true, false),
            r(1, -1.0, false, true, false),
            r(2, 5.0, false, false, false),
            r(3, -0.5, false, false, true),
            r(4, -2.0, false, false, true),
        ];
        // A serial runner first (the most overdrawn of them), whatever its class.
        assert_eq!(core_to_displace(1.0, runners), Some(4));
        // Among serial runners, one on the waker's class first.
        let same = [runners[3], r(5, 0.0, false, false, false)];
        assert_eq!(core_to_displace(1.0, same), Some(5));
        // Then a parallel vCPU running alone, then a gang member; never one with SR left.
        assert_eq!(core_to_displace(1.0, [runners[0], runners[1]]), Some(1));
        assert_eq!(core_to_displace(1.0, [runners[0], runners[2]]), Some(0));
        assert_eq!(core_to_displace(1.0, [runners[2]]), None);
        // A waker without SR takes nobody's core.
        assert_eq!(core_to_displace(0.0, runners), None);
    }

    #[test]
    fn reorder_puts_positive_sr_first_and_keeps_order() {
        let mut q = vec![("a", -1.0), ("b", 2.0), ("c", 0.0), ("d", 1.0), ("e", -3.0)];
        reorder_by_sr(&mut q, |v| v.1);
        let names: Vec<&str> = q.iter().map(|v| v.0).collect();
        assert_eq!(names, vec!["b", "d", "a", "c", "e"]);
    }
}
