//! Spec 002's Diff-Scheduler on top of `decide::diff`: every 10 ms the host monitor's ring
//! readings feed one `NsvmClassifier` per VM; at the end of every 100 ms window the VMs are
//! classified, their CPU need measured, and `plan_pools` sizes the two pools. When the plan
//! changes (which VMs are NSVMs, or the pool sizes) the pools are rebuilt: the NSVM pool gets the
//! first `ns_cpus` usable cores, the NNVM pool the rest, and each pool is run by its own
//! scheduler instance over its cores and its VMs' vCPUs.
//!
//! - `diff`: each pool runs `Credit` (`Credit::on_pool`), slice 5 ms in the NSVM pool and 30 ms
//!   in the other; tick = slice / 3 and accounting every slice, as Xen ≥ 4.2 derives them from
//!   a pool's `tslice`.
//! - `diff-eevdf`: each pool is a core set run by `Eevdf`; the NSVM pool's vCPU threads get a
//!   short slice (`sched_setattr`'s `sched_runtime`, `DiffParams::nsvm_slice_ms`, 1 ms),
//!   the others keep theirs (`DiffParams::nnvm_slice_ms`, 0), as the real agent does.
//!
//! At start every core is in the NNVM pool (spec §2.6). A pool that would hold VMs but no core
//! (only when a single core is usable) is not built: every VM stays in the NNVM pool. A rebuild
//! starts the pools afresh (Credit's credits are lost, as when `xl cpupool-migrate` moves a
//! domain); vCPUs waiting for a core join their new pool at once, running ones when their core
//! next decides (every core is kicked at a rebuild).
//!
//! **Hold** (open questions 1 and 7; not in the paper): a VM that the NSVM pool serves well
//! has calm rings, so the paper's rule as written classifies it NNVM in its next window, sends
//! it back to the 30 ms pool, where its rings overflow again: it flaps every 100 ms and spends
//! half its time in the wrong pool. `hold_windows` (default 10 = 1 s) keeps a VM NSVM for that
//! many windows after it was last classified NSVM, doubled each time the VM comes back soon
//! after its hold let it go, up to `hold_max_windows` (default 80 = 8 s)
//! (`decide::diff::NsvmHold`, which the real host agent calls unchanged); 0 gives the rule as
//! written.
//!
//! The load L_i of eqs 11–18 is the mean number of the VM's runnable vCPUs (running or
//! waiting) at the readings of the window: its demand. The CPU time it got would never exceed
//! its share under Credit, so no VM would ever be hungry (open question 2). W_i = vCPU count
//! (eq 1).

use super::credit::{Credit, CreditParams};
use super::eevdf::{Eevdf, EevdfParams};
use super::{Dispatch, Scheduler, Stop, VmObservation, SAMPLE_PERIOD};
pub use crate::decide::diff::DiffParams;
use crate::decide::diff::{
    plan_pools, pools_built, NsvmClassifier, NsvmHold, PoolPlan, VmKind, VmNeed,
};
use crate::sim::model::{CoreId, Nanos, Topology, VcpuId};
use colosched_core::Rng;

/// What runs each pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolScheduler {
    Credit,
    Eevdf,
}

struct Pool {
    sched: Box<dyn Scheduler>,
}

pub struct Diff {
    params: DiffParams,
    pool_scheduler: PoolScheduler,
    topo: Topology,
    rng: Rng,
    classifiers: Vec<NsvmClassifier>,
    load: Vec<f64>,
    samples: usize,
    pools: Vec<Pool>,
    pool_of_core: Vec<Option<usize>>,
    pool_of_vcpu: Vec<usize>,
    running: Vec<Option<VcpuId>>,
    runnable: Vec<bool>,
    fresh: Vec<bool>,
    kicks: Vec<CoreId>,
    /// The NSVM set and pool sizes in force.
    current: (Vec<usize>, usize),
    /// Every plan, with the time it was made.
    pub plans: Vec<(Nanos, PoolPlan)>,
    pub rebuilds: usize,
    /// Per VM: windows in which it was classified NSVM (by its rings, without the hold).
    pub nsvm_windows: Vec<usize>,
    hold: NsvmHold,
}

impl Diff {
    /// Diff with each pool run by `pool_scheduler` (`diff` or `diff-eevdf`).
    pub fn new(
        topo: &Topology,
        params: DiffParams,
        pool_scheduler: PoolScheduler,
        seed: u64,
    ) -> Diff {
        assert!(
            !topo.usable.is_empty(),
            "Diff needs at least one usable core"
        );
        let sample_ms = (SAMPLE_PERIOD / 1_000_000) as u32;
        let mut d = Diff {
            params,
            pool_scheduler,
            topo: topo.clone(),
            rng: Rng::new(seed),
            classifiers: (0..topo.vms.len())
                .map(|_| NsvmClassifier::new(params.thresholds, sample_ms, params.window_ms))
                .collect(),
            load: vec![0.0; topo.vms.len()],
            samples: 0,
            pools: Vec::new(),
            pool_of_core: vec![None; topo.speed.len()],
            pool_of_vcpu: vec![0; topo.vcpus.len()],
            running: vec![None; topo.speed.len()],
            runnable: vec![false; topo.vcpus.len()],
            fresh: vec![false; topo.speed.len()],
            kicks: Vec::new(),
            current: (Vec::new(), 0),
            plans: Vec::new(),
            rebuilds: 0,
            nsvm_windows: vec![0; topo.vms.len()],
            hold: NsvmHold::new(topo.vms.len(), params.hold_windows, params.hold_max_windows),
        };
        d.build(&[], 0);
        d
    }

    /// The NSVMs and the NSVM pool's cores in force.
    pub fn nsvm_pool(&self) -> (&[usize], usize) {
        (&self.current.0, self.current.1)
    }

    fn pool_sched(&self, cores: &[CoreId], vms: &[usize], ns: bool) -> Box<dyn Scheduler> {
        let vcpus: Vec<VcpuId> = vms.iter().flat_map(|&vm| self.topo.vcpus_of(vm)).collect();
        let slice = if ns {
            self.params.pools.ns_slice_ms
        } else {
            self.params.pools.nn_slice_ms
        };
        match self.pool_scheduler {
            PoolScheduler::Credit => Box::new(Credit::on_pool(
                &self.topo,
                cores.to_vec(),
                vcpus,
                CreditParams {
                    slice_ms: slice,
                    tick_ms: slice / 3.0,
                    period_ms: slice,
                    boost: true,
                },
            )),
            PoolScheduler::Eevdf => {
                let mut topo = self.topo.clone();
                topo.usable = cores.to_vec();
                let slice = if ns {
                    self.params.nsvm_slice_ms
                } else {
                    self.params.nnvm_slice_ms
                };
                if slice > 0.0 {
                    for &vm in vms {
                        topo.vms[vm].slice_ms = Some(slice);
                    }
                }
                Box::new(Eevdf::new(&topo, EevdfParams::linux(self.topo.speed.len())))
            }
        }
    }

    /// Rebuild the pools: NSVMs `ns_vms` on the first `ns_cpus` usable cores, the rest on the
    /// others (`pools_built`'s split: no NSVM pool when `ns_cpus` is 0).
    fn build(&mut self, ns_vms: &[usize], ns_cpus: usize) {
        let usable = self.topo.usable.clone();
        let ns_vms = ns_vms.to_vec();
        let nn_vms: Vec<usize> = (0..self.topo.vms.len())
            .filter(|vm| !ns_vms.contains(vm))
            .collect();
        self.pools.clear();
        let mut groups = vec![(usable[ns_cpus..].to_vec(), nn_vms, false)];
        if ns_cpus > 0 {
            groups.push((usable[..ns_cpus].to_vec(), ns_vms.clone(), true));
        }
        for (i, (cores, vms, ns)) in groups.into_iter().enumerate() {
            for &c in &cores {
                self.pool_of_core[c] = Some(i);
            }
            for &vm in &vms {
                for v in self.topo.vcpus_of(vm) {
                    self.pool_of_vcpu[v] = i;
                }
            }
            let sched = self.pool_sched(&cores, &vms, ns);
            self.pools.push(Pool { sched });
        }
        self.current = (ns_vms, ns_cpus);
        self.rebuilds += 1;
    }

    fn rebuild(&mut self, now: Nanos, ns_vms: &[usize], ns_cpus: usize) {
        self.build(ns_vms, ns_cpus);
        let running: Vec<VcpuId> = self.running.iter().flatten().copied().collect();
        for v in 0..self.runnable.len() {
            if self.runnable[v] && !running.contains(&v) {
                let p = self.pool_of_vcpu[v];
                self.pools[p].sched.admit(now, v);
            }
        }
        for c in self.topo.usable.clone() {
            self.fresh[c] = true;
            self.kicks.push(c);
        }
    }

    fn pool_of(&mut self, v: VcpuId) -> &mut Box<dyn Scheduler> {
        let p = self.pool_of_vcpu[v];
        &mut self.pools[p].sched
    }
}

impl Scheduler for Diff {
    fn name(&self) -> &'static str {
        match self.pool_scheduler {
            PoolScheduler::Credit => "diff",
            PoolScheduler::Eevdf => "diff-eevdf",
        }
    }

    fn admit(&mut self, now: Nanos, v: VcpuId) {
        self.runnable[v] = true;
        self.pool_of(v).admit(now, v);
    }

    fn wake(&mut self, now: Nanos, v: VcpuId) {
        self.runnable[v] = true;
        self.pool_of(v).wake(now, v);
    }

    fn retire(&mut self, now: Nanos, v: VcpuId) {
        self.runnable[v] = false;
        self.pool_of(v).retire(now, v);
    }

    fn schedule(&mut self, now: Nanos, core: CoreId, prev: Option<(VcpuId, Stop)>) -> Dispatch {
        if let Some((v, stop)) = prev {
            if stop != Stop::Runnable {
                self.runnable[v] = false;
            }
        }
        let Some(p) = self.pool_of_core[core] else {
            return Dispatch::IDLE;
        };
        let prev = if std::mem::take(&mut self.fresh[core]) {
            // The pools were rebuilt since this core last decided: its vCPU joins its new pool.
            if let Some((v, Stop::Runnable)) = prev {
                self.pool_of(v).admit(now, v);
            }
            None
        } else {
            prev
        };
        let d = self.pools[p].sched.schedule(now, core, prev);
        self.running[core] = d.vcpu;
        d
    }

    fn take_kicks(&mut self) -> Vec<CoreId> {
        let mut kicks = std::mem::take(&mut self.kicks);
        for pool in &mut self.pools {
            kicks.append(&mut pool.sched.take_kicks());
        }
        kicks
    }

    fn next_periodic(&self) -> Option<Nanos> {
        self.pools
            .iter()
            .filter_map(|p| p.sched.next_periodic())
            .min()
    }

    fn periodic(&mut self, now: Nanos) {
        for pool in &mut self.pools {
            if pool.sched.next_periodic().is_some_and(|t| t <= now) {
                pool.sched.periodic(now);
            }
        }
    }

    fn observes(&self) -> bool {
        true
    }

    fn observe(&mut self, now: Nanos, vms: &[VmObservation]) {
        let mut verdicts = Vec::with_capacity(vms.len());
        for (vm, o) in vms.iter().enumerate() {
            self.load[vm] += o.runnable_vcpus as f64;
            verdicts.push(self.classifiers[vm].push(o.ring));
        }
        self.samples += 1;
        if verdicts.iter().any(Option::is_none) {
            return;
        }
        let mut needs = Vec::with_capacity(vms.len());
        for (vm, stats) in verdicts.iter().enumerate() {
            let rings = stats.unwrap().kind();
            if rings == VmKind::Sensitive {
                self.nsvm_windows[vm] += 1;
            }
            let kind = self.hold.kind(vm, rings);
            needs.push(VmNeed {
                kind,
                weight: self.topo.vms[vm].vcpus as f64,
                load: self.load[vm] / self.samples as f64,
            });
        }
        self.load.iter_mut().for_each(|l| *l = 0.0);
        self.samples = 0;
        let m = self.topo.usable.len();
        let plan = plan_pools(m, &needs, &mut self.rng, &self.params.pools);
        let wanted = pools_built(&plan, m);
        if wanted != self.current {
            self.rebuild(now, &wanted.0, wanted.1);
        }
        self.plans.push((now, plan));
    }
}
