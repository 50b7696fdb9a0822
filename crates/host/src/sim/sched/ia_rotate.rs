//! `ia-rotate`: what the real host agent does with spec 001 (`decide::rotate`), so that
//! `sim host` predicts it. Every cycle (100 ms by default) each vCPU thread is pinned to one
//! core by `rotate::place`, and each core runs the kernel's fair scheduler (`Eevdf`) over the
//! threads pinned to it, each thread weighing ω/|P| (a per-VM cgroup's weight split over its
//! vCPUs). At the cycle's end each vCPU's run time on its core and its runnable time (what
//! schedstat gives the agent) go to `rotate::account`, and the next placement is made.
//!
//! A core whose set of pinned threads changes gets a fresh EEVDF queue (its threads' lag is
//! not carried over: Linux keeps it across a migration, the model does not); cores whose set is
//! unchanged keep theirs. A waiting thread joins its new core's queue at once, a running one
//! when its old core next decides (every changed core is kicked), as `diff` does with its pools.
//! Moving a thread costs nothing here beyond the warm-up that the engine charges a
//! memory-intensive VM on every migration.

use super::eevdf::{Eevdf, EevdfParams};
use super::{Dispatch, Scheduler, Stop};
use crate::decide::ia::{MappingError, Platform, VmShape};
use crate::decide::rotate::{account, place, Ledger, Placement, RotVm, RotateParams, VcpuRun};
use crate::sim::model::{CoreId, Nanos, Topology, VcpuId};

pub struct IaRotate {
    params: RotateParams,
    topo: Topology,
    platform: Platform,
    vms: Vec<RotVm>,
    ledger: Ledger,
    placement: Placement,
    /// One queue per usable core (IA's index), over the threads pinned there.
    queues: Vec<Eevdf>,
    /// IA's core index of each vCPU this cycle.
    core_of: Vec<usize>,
    /// IA's index of each core id (`None` for reserved cores).
    index_of: Vec<Option<usize>>,
    /// What each core (by id) runs, and since when.
    running: Vec<Option<(VcpuId, Nanos)>>,
    runnable_since: Vec<Option<Nanos>>,
    run_ns: Vec<Nanos>,
    runnable_ns: Vec<Nanos>,
    /// Cores (by id) whose queue was rebuilt since they last decided.
    fresh: Vec<bool>,
    kicks: Vec<CoreId>,
    next_cycle: Nanos,
    /// Threads moved at the cycle boundaries (what the agent would attach).
    pub moves: usize,
}

impl IaRotate {
    /// Fails when a VM has more vCPUs than the host has usable cores.
    pub fn new(topo: &Topology, params: RotateParams) -> Result<IaRotate, MappingError> {
        let platform = super::ia::platform_of(topo);
        let vms: Vec<RotVm> = topo
            .vms
            .iter()
            .enumerate()
            .map(|(i, v)| RotVm {
                key: i as u64,
                shape: VmShape {
                    weight: v.weight,
                    vcpus: v.vcpus,
                },
            })
            .collect();
        let mut index_of = vec![None; topo.speed.len()];
        for (i, &c) in topo.usable.iter().enumerate() {
            index_of[c] = Some(i);
        }
        let ledger = Ledger::new();
        let placement = place(&platform, &vms, &ledger, None, &params)?;
        let n = topo.vcpus.len();
        let mut s = IaRotate {
            params,
            topo: topo.clone(),
            platform,
            vms,
            ledger,
            placement: Placement::default(),
            queues: Vec::new(),
            core_of: vec![0; n],
            index_of,
            running: vec![None; topo.speed.len()],
            runnable_since: vec![None; n],
            run_ns: vec![0; n],
            runnable_ns: vec![0; n],
            fresh: vec![false; topo.speed.len()],
            kicks: Vec::new(),
            next_cycle: params.cycle_ns,
            moves: 0,
        };
        s.queues = (0..s.topo.usable.len()).map(|i| s.queue(i)).collect();
        s.pin(0, placement);
        s.moves = 0;
        Ok(s)
    }

    /// The placement in force.
    pub fn placement(&self) -> &Placement {
        &self.placement
    }

    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// An EEVDF queue for IA's core `i` (its threads weigh ω/|P|).
    fn queue(&self, i: usize) -> Eevdf {
        let mut topo = self.topo.clone();
        topo.usable = vec![self.topo.usable[i]];
        for vm in &mut topo.vms {
            vm.weight /= vm.vcpus as f64;
        }
        Eevdf::new(&topo, EevdfParams::linux(self.topo.speed.len()))
    }

    /// The vCPUs pinned to IA's core `i` under `placement`.
    fn members(&self, placement: &Placement, i: usize) -> Vec<VcpuId> {
        (0..self.topo.vcpus.len())
            .filter(|&v| {
                let (vm, index) = (self.topo.vcpus[v].vm, self.topo.vcpus[v].index);
                placement.cores[vm][index] == i
            })
            .collect()
    }

    /// Puts `next` in force: cores whose members change get a fresh queue, waiting threads
    /// of those cores join their new queue now.
    fn pin(&mut self, now: Nanos, next: Placement) {
        self.moves += next.moves_from(&self.placement);
        let changed: Vec<usize> = (0..self.topo.usable.len())
            .filter(|&i| {
                self.placement.cores.is_empty()
                    || self.members(&self.placement, i) != self.members(&next, i)
            })
            .collect();
        for v in 0..self.topo.vcpus.len() {
            let (vm, index) = (self.topo.vcpus[v].vm, self.topo.vcpus[v].index);
            self.core_of[v] = next.cores[vm][index];
        }
        self.placement = next;
        let running: Vec<VcpuId> = self.running.iter().flatten().map(|r| r.0).collect();
        for &i in &changed {
            self.queues[i] = self.queue(i);
            let id = self.topo.usable[i];
            self.fresh[id] = true;
            self.kicks.push(id);
        }
        for v in 0..self.topo.vcpus.len() {
            let waiting = self.runnable_since[v].is_some() && !running.contains(&v);
            if waiting && changed.contains(&self.core_of[v]) {
                self.queues[self.core_of[v]].admit(now, v);
            }
        }
    }

    /// Charges the run and runnable time up to `now`.
    fn charge(&mut self, now: Nanos) {
        for r in self.running.iter_mut().flatten() {
            self.run_ns[r.0] += now - r.1;
            r.1 = now;
        }
        for v in 0..self.runnable_since.len() {
            if let Some(since) = self.runnable_since[v] {
                self.runnable_ns[v] += now - since;
                self.runnable_since[v] = Some(now);
            }
        }
    }

    fn stop_runnable(&mut self, now: Nanos, v: VcpuId) {
        if let Some(since) = self.runnable_since[v].take() {
            self.runnable_ns[v] += now - since;
        }
    }
}

impl Scheduler for IaRotate {
    fn name(&self) -> &'static str {
        "ia-rotate"
    }

    fn admit(&mut self, now: Nanos, v: VcpuId) {
        self.runnable_since[v] = Some(now);
        self.queues[self.core_of[v]].admit(now, v);
    }

    fn wake(&mut self, now: Nanos, v: VcpuId) {
        self.runnable_since[v] = Some(now);
        self.queues[self.core_of[v]].wake(now, v);
    }

    fn retire(&mut self, now: Nanos, v: VcpuId) {
        self.stop_runnable(now, v);
        self.queues[self.core_of[v]].retire(now, v);
    }

    fn schedule(&mut self, now: Nanos, core: CoreId, prev: Option<(VcpuId, Stop)>) -> Dispatch {
        if let Some((v, since)) = self.running[core].take() {
            self.run_ns[v] += now - since;
        }
        if let Some((v, stop)) = prev {
            if stop != Stop::Runnable {
                self.stop_runnable(now, v);
            }
        }
        let Some(i) = self.index_of[core] else {
            return Dispatch::IDLE;
        };
        let prev = if std::mem::take(&mut self.fresh[core]) {
            // This core's queue was rebuilt: its thread joins the queue of its (new) core.
            if let Some((v, Stop::Runnable)) = prev {
                self.queues[self.core_of[v]].admit(now, v);
            }
            None
        } else {
            prev
        };
        let d = self.queues[i].schedule(now, core, prev);
        self.running[core] = d.vcpu.map(|v| (v, now));
        d
    }

    fn take_kicks(&mut self) -> Vec<CoreId> {
        let mut kicks = std::mem::take(&mut self.kicks);
        for q in &mut self.queues {
            kicks.append(&mut q.take_kicks());
        }
        kicks
    }

    fn next_periodic(&self) -> Option<Nanos> {
        Some(self.next_cycle)
    }

    /// The cycle's end: account what each vCPU did where it was pinned, place the next one.
    fn periodic(&mut self, now: Nanos) {
        self.charge(now);
        let runs: Vec<VcpuRun> = (0..self.topo.vcpus.len())
            .map(|v| VcpuRun {
                vm: self.topo.vcpus[v].vm as u64,
                core: self.core_of[v],
                run_ns: self.run_ns[v],
                wait_ns: self.runnable_ns[v].saturating_sub(self.run_ns[v]),
            })
            .collect();
        account(
            &mut self.ledger,
            &self.platform,
            &self.vms,
            &runs,
            self.params.cycle_ns, // the simulator's cycles are exact
            &self.params,
        );
        self.run_ns.iter_mut().for_each(|n| *n = 0);
        self.runnable_ns.iter_mut().for_each(|n| *n = 0);
        let next = place(
            &self.platform,
            &self.vms,
            &self.ledger,
            Some(&self.placement),
            &self.params,
        )
        .expect("the VMs fitted at the start");
        if next != self.placement {
            self.pin(now, next);
        }
        self.next_cycle = now + self.params.cycle_ns;
    }
}
