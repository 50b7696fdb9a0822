//! Xen's Credit scheduler (credit1, `xen/common/sched_credit.c`), the baseline of both papers.
//!
//! - One run queue per core, ordered BOOST > UNDER > OVER, first-in first-out within a priority.
//! - Credits are CPU time in nanoseconds. Every accounting period (30 ms) the cores' time for the
//!   period is shared among VMs with an active vCPU by weight, and a VM's share equally among its
//!   active vCPUs. A vCPU with credit < 0 is OVER (floored at −one slice), otherwise UNDER; one
//!   whose credit exceeds one slice stops earning (inactive) and has it halved, as Xen does.
//! - A running vCPU burns credit by the time it runs, and is inactive again as soon as it runs.
//! - A vCPU runs for one slice (30 ms) unless it blocks or is preempted; ticks every 10 ms demote
//!   a BOOSTed vCPU that is running to UNDER.
//! - A waking UNDER vCPU is BOOSTed and preempts its core's vCPU if that one has a lower
//!   priority; otherwise an idle core is kicked to steal it.
//! - A core whose best local vCPU is OVER (or which has none) steals the head of a peer's queue
//!   if it has a higher priority, peers tried in order from the next core. Idle cores steal
//!   anything, so the scheduler is work-conserving.
//! - Credit ignores core speed: a slow core's time costs what a fast core's does.

use super::{Dispatch, Scheduler, Stop};
use crate::sim::model::{ms, CoreId, Nanos, Topology, VcpuId};

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CreditParams {
    pub slice_ms: f64,
    pub tick_ms: f64,
    pub period_ms: f64,
    /// Give waking vCPUs BOOST priority.
    pub boost: bool,
}

impl Default for CreditParams {
    fn default() -> Self {
        CreditParams {
            slice_ms: 30.0,
            tick_ms: 10.0,
            period_ms: 30.0,
            boost: true,
        }
    }
}

/// Credit priorities, lowest first (so `>` means "runs before").
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Priority {
    Over,
    Under,
    Boost,
}

#[derive(Clone, Debug)]
struct VcpuState {
    vm: usize,
    credit: f64,
    priority: Priority,
    /// The core whose queue it joins when it waits.
    core: CoreId,
    active: bool,
    finished: bool,
}

#[derive(Clone, Debug, Default)]
struct CoreState {
    queue: Vec<VcpuId>,
    current: Option<VcpuId>,
    exec_start: Nanos,
    slice_end: Nanos,
    next_tick: Nanos,
    preempt: bool,
    kicked: bool,
}

pub struct Credit {
    params: CreditParams,
    weights: Vec<f64>,
    /// The cores this instance schedules (a CPU pool), in order.
    pool: Vec<CoreId>,
    vcpus: Vec<Option<VcpuState>>,
    cores: Vec<CoreState>,
    kicks: Vec<CoreId>,
    next_acct: Nanos,
}

impl Credit {
    /// Credit over all the host's usable cores and all vCPUs.
    pub fn new(topo: &Topology, params: CreditParams) -> Credit {
        Credit::on_pool(
            topo,
            topo.usable.clone(),
            (0..topo.vcpus.len()).collect(),
            params,
        )
    }

    /// Credit over a pool: only `cores` and only `vcpus` (Diff-Scheduler runs one per pool).
    /// vCPUs start spread round-robin over the pool's cores.
    pub fn on_pool(
        topo: &Topology,
        cores: Vec<CoreId>,
        vcpus: Vec<VcpuId>,
        params: CreditParams,
    ) -> Credit {
        assert!(!cores.is_empty(), "a Credit pool needs at least one core");
        let mut states = vec![None; topo.vcpus.len()];
        for (i, &v) in vcpus.iter().enumerate() {
            states[v] = Some(VcpuState {
                vm: topo.vcpus[v].vm,
                credit: 0.0,
                priority: Priority::Under,
                core: cores[i % cores.len()],
                active: true,
                finished: false,
            });
        }
        Credit {
            params,
            weights: topo.vms.iter().map(|v| v.weight).collect(),
            next_acct: ms(params.period_ms),
            pool: cores,
            vcpus: states,
            cores: vec![CoreState::default(); topo.speed.len()],
            kicks: Vec::new(),
        }
    }

    fn v(&self, v: VcpuId) -> &VcpuState {
        self.vcpus[v]
            .as_ref()
            .expect("vCPU not in this Credit pool")
    }

    fn v_mut(&mut self, v: VcpuId) -> &mut VcpuState {
        self.vcpus[v]
            .as_mut()
            .expect("vCPU not in this Credit pool")
    }

    pub fn credit(&self, v: VcpuId) -> f64 {
        self.v(v).credit
    }

    pub fn priority(&self, v: VcpuId) -> Priority {
        self.v(v).priority
    }

    /// The core `v` runs on, or whose queue it waits in (or will wake in).
    pub fn home(&self, v: VcpuId) -> CoreId {
        self.v(v).core
    }

    /// Make `v` wait (or wake) in `core`'s queue next time it is queued.
    pub(super) fn set_home(&mut self, v: VcpuId, core: CoreId) {
        self.v_mut(v).core = core;
    }

    /// The vCPUs waiting in `core`'s queue, in the order they would run.
    pub fn queue(&self, core: CoreId) -> &[VcpuId] {
        &self.cores[core].queue
    }

    pub(super) fn kick(&mut self, core: CoreId) {
        if !self.cores[core].kicked {
            self.cores[core].kicked = true;
            self.kicks.push(core);
        }
    }

    /// Kick one idle core of the pool not yet kicked, searching from the core after `from`.
    fn kick_an_idle_core(&mut self, from: CoreId) {
        let n = self.pool.len();
        let start = self.pool.iter().position(|&c| c == from).unwrap_or(0);
        for i in 1..=n {
            let c = self.pool[(start + i) % n];
            if self.cores[c].current.is_none() && !self.cores[c].kicked {
                self.kick(c);
                return;
            }
        }
    }

    /// Charge the running vCPU of `core` for its time since it was last charged.
    fn burn(&mut self, core: CoreId, now: Nanos) {
        let c = &mut self.cores[core];
        let Some(v) = c.current else { return };
        let dt = now.saturating_sub(c.exec_start);
        c.exec_start = now;
        if dt > 0 {
            let s = self.v_mut(v);
            s.credit -= dt as f64;
            s.active = true;
        }
    }

    /// Queue `v` on `core` behind every vCPU of equal or higher priority.
    fn enqueue(&mut self, core: CoreId, v: VcpuId) {
        let p = self.v(v).priority;
        let queue = &self.cores[core].queue;
        let at = queue
            .iter()
            .position(|&w| self.v(w).priority < p)
            .unwrap_or(queue.len());
        self.cores[core].queue.insert(at, v);
        self.v_mut(v).core = core;
    }

    /// The head of a peer's queue (its first `allowed` vCPU) with a priority above `than`
    /// (`None`: any), peers in order from the core after `core`.
    fn steal(
        &mut self,
        core: CoreId,
        than: Option<Priority>,
        allowed: &dyn Fn(VcpuId) -> bool,
    ) -> Option<VcpuId> {
        let n = self.pool.len();
        let start = self.pool.iter().position(|&c| c == core)?;
        for i in 1..n {
            let peer = self.pool[(start + i) % n];
            let queue = &self.cores[peer].queue;
            if let Some(at) = queue.iter().position(|&v| allowed(v)) {
                if than.is_none_or(|p| self.v(queue[at]).priority > p) {
                    return Some(self.cores[peer].queue.remove(at));
                }
            }
        }
        None
    }

    /// The vCPU running on `core`, if any.
    pub fn current(&self, core: CoreId) -> Option<VcpuId> {
        self.cores[core].current
    }

    /// Make `core` decide now and give up its vCPU (AASH's rotation).
    pub(super) fn preempt(&mut self, core: CoreId) {
        self.cores[core].preempt = true;
        self.kick(core);
    }

    /// Take `v` out of the queue it waits in; false if it was not waiting.
    pub(super) fn unqueue(&mut self, v: VcpuId) -> bool {
        let core = self.v(v).core;
        let queue = &mut self.cores[core].queue;
        match queue.iter().position(|&w| w == v) {
            Some(at) => {
                queue.remove(at);
                true
            }
            None => false,
        }
    }

    /// The first half of `schedule`: account for `prev` and queue it if it stops. Returns the
    /// dispatch when it keeps its core (its slice is not over and nobody preempts it).
    pub(super) fn stop(
        &mut self,
        now: Nanos,
        core: CoreId,
        prev: Option<(VcpuId, Stop)>,
    ) -> Option<Dispatch> {
        self.cores[core].kicked = false;
        if let Some((v, stop)) = prev {
            self.burn(core, now);
            if now >= self.cores[core].next_tick {
                if self.v(v).priority == Priority::Boost {
                    self.v_mut(v).priority = Priority::Under;
                }
                self.cores[core].next_tick = self.next_tick_after(now);
            }
            match stop {
                Stop::Runnable => {
                    let c = &self.cores[core];
                    if now < c.slice_end && !c.preempt {
                        return Some(Dispatch {
                            vcpu: Some(v),
                            until: self.until(core),
                        });
                    }
                    self.enqueue(core, v);
                }
                Stop::Blocked => {}
                Stop::Finished => {
                    let s = self.v_mut(v);
                    s.finished = true;
                    s.active = false;
                }
            }
            self.cores[core].current = None;
        }
        self.cores[core].preempt = false;
        None
    }

    /// Credit's choice for `core` among the waiting vCPUs that are `allowed`: its first local
    /// one if above OVER, else a peer's of a higher priority, else its first local one.
    pub(super) fn pick(
        &mut self,
        core: CoreId,
        allowed: &dyn Fn(VcpuId) -> bool,
    ) -> Option<VcpuId> {
        let local = self.cores[core].queue.iter().position(|&v| allowed(v));
        let head = local.map(|at| self.v(self.cores[core].queue[at]).priority);
        match (head, local) {
            (Some(p), Some(at)) if p > Priority::Over => Some(self.cores[core].queue.remove(at)),
            _ => match self.steal(core, head, allowed) {
                Some(v) => Some(v),
                None => local.map(|at| self.cores[core].queue.remove(at)),
            },
        }
    }

    /// The second half of `schedule`: run `next` on `core` for a slice (or idle).
    pub(super) fn start(&mut self, now: Nanos, core: CoreId, next: Option<VcpuId>) -> Dispatch {
        let Some(v) = next else {
            return Dispatch::IDLE;
        };
        self.v_mut(v).core = core;
        let slice_end = now + ms(self.params.slice_ms).max(1);
        let next_tick = self.next_tick_after(now);
        let c = &mut self.cores[core];
        c.current = Some(v);
        c.exec_start = now;
        c.slice_end = slice_end;
        c.next_tick = next_tick;
        if !self.cores[core].queue.is_empty() {
            self.kick_an_idle_core(core);
        }
        Dispatch {
            vcpu: Some(v),
            until: self.until(core),
        }
    }

    fn next_tick_after(&self, now: Nanos) -> Nanos {
        let tick = ms(self.params.tick_ms).max(1);
        (now / tick + 1) * tick
    }

    fn until(&self, core: CoreId) -> Option<Nanos> {
        let c = &self.cores[core];
        Some(c.slice_end.min(c.next_tick))
    }
}

impl Scheduler for Credit {
    fn name(&self) -> &'static str {
        "credit"
    }

    fn admit(&mut self, _now: Nanos, v: VcpuId) {
        let core = self.v(v).core;
        self.enqueue(core, v);
        if self.cores[core].current.is_none() {
            self.kick(core);
        }
    }

    fn wake(&mut self, now: Nanos, v: VcpuId) {
        if self.params.boost && self.v(v).priority == Priority::Under {
            self.v_mut(v).priority = Priority::Boost;
        }
        let core = self.v(v).core;
        self.enqueue(core, v);
        match self.cores[core].current {
            None => self.kick(core),
            Some(cur) => {
                self.burn(core, now);
                if self.v(v).priority > self.v(cur).priority {
                    self.cores[core].preempt = true;
                    self.kick(core);
                } else {
                    self.kick_an_idle_core(core);
                }
            }
        }
    }

    fn retire(&mut self, _now: Nanos, v: VcpuId) {
        let core = self.v(v).core;
        self.cores[core].queue.retain(|&w| w != v);
        let s = self.v_mut(v);
        s.finished = true;
        s.active = false;
    }

    fn schedule(&mut self, now: Nanos, core: CoreId, prev: Option<(VcpuId, Stop)>) -> Dispatch {
        if let Some(d) = self.stop(now, core, prev) {
            return d;
        }
        let next = self.pick(core, &|_| true);
        self.start(now, core, next)
    }

    fn take_kicks(&mut self) -> Vec<CoreId> {
        std::mem::take(&mut self.kicks)
    }

    fn next_periodic(&self) -> Option<Nanos> {
        Some(self.next_acct)
    }

    /// Accounting (`csched_acct`): hand out one period of the pool's CPU time as credits.
    fn periodic(&mut self, now: Nanos) {
        for core in self.pool.clone() {
            self.burn(core, now);
        }
        let members: Vec<VcpuId> = (0..self.vcpus.len())
            .filter(|&v| {
                self.vcpus[v]
                    .as_ref()
                    .is_some_and(|s| s.active && !s.finished)
            })
            .collect();
        let mut active_per_vm = vec![0usize; self.weights.len()];
        for &v in &members {
            active_per_vm[self.v(v).vm] += 1;
        }
        let total_weight: f64 = (0..self.weights.len())
            .filter(|&vm| active_per_vm[vm] > 0)
            .map(|vm| self.weights[vm])
            .sum();
        let period = ms(self.params.period_ms) as f64;
        let budget = period * self.pool.len() as f64;
        let cap = ms(self.params.slice_ms) as f64;
        for &v in &members {
            let vm = self.v(v).vm;
            let fair = budget * self.weights[vm] / total_weight / active_per_vm[vm] as f64;
            let s = self.v_mut(v);
            s.credit += fair;
            if s.credit < 0.0 {
                s.priority = Priority::Over;
                s.credit = s.credit.max(-cap);
            } else {
                s.priority = Priority::Under;
                if s.credit > cap {
                    s.active = false;
                    s.credit /= 2.0;
                }
            }
        }
        for core in self.pool.clone() {
            let mut queue = std::mem::take(&mut self.cores[core].queue);
            queue.sort_by_key(|&v| std::cmp::Reverse(self.v(v).priority));
            self.cores[core].queue = queue;
        }
        self.next_acct = now + ms(self.params.period_ms).max(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::model::{Host, Vm, Workload, MS};

    fn topo(cores: usize, vms: &[(f64, usize)]) -> Topology {
        let vms: Vec<Vm> = vms
            .iter()
            .enumerate()
            .map(|(i, &(weight, vcpus))| Vm {
                weight,
                ..Vm::new(
                    &format!("vm{i}"),
                    vcpus,
                    Workload::Serial {
                        work_ms: 1e3,
                        mem_intensity: 0.0,
                    },
                )
            })
            .collect();
        Topology::new(&Host::symmetric(cores), &vms)
    }

    #[test]
    fn credit_burns_by_time_and_refills_by_weight() {
        // One core, VM0 weight 256 and VM1 weight 512, one vCPU each, both queued on core 0.
        let t = topo(1, &[(256.0, 1), (512.0, 1)]);
        let mut s = Credit::new(&t, CreditParams::default());
        s.admit(0, 0);
        s.admit(0, 1);
        assert_eq!(s.take_kicks(), vec![0]);
        let d = s.schedule(0, 0, None);
        assert_eq!(
            d,
            Dispatch {
                vcpu: Some(0),
                until: Some(10 * MS)
            }
        );
        // At the 10 ms tick it keeps running and has burnt 10 ms.
        let d = s.schedule(10 * MS, 0, Some((0, Stop::Runnable)));
        assert_eq!(d.vcpu, Some(0));
        assert_eq!(s.credit(0), -10e6);
        // Accounting at 30 ms (before the slice ends): 30 ms to share, 1/3 and 2/3.
        s.periodic(30 * MS);
        assert_eq!(s.credit(0), -30e6 + 10e6);
        assert_eq!(s.priority(0), Priority::Over);
        assert_eq!(s.credit(1), 20e6);
        assert_eq!(s.priority(1), Priority::Under);
        // Slice over at 30 ms: vCPU 1 (UNDER) runs, vCPU 0 waits behind it.
        let d = s.schedule(30 * MS, 0, Some((0, Stop::Runnable)));
        assert_eq!(d.vcpu, Some(1));
        assert_eq!(s.queue(0), &[0]);
        // vCPU 1 runs a whole slice: 20 − 30 = −10 ms; at 60 ms it gets +20: 10 ms, UNDER;
        // vCPU 0 gets +10: −10 ms, still OVER.
        s.periodic(60 * MS);
        assert_eq!(s.credit(1), 10e6);
        assert_eq!(s.credit(0), -10e6);
        assert_eq!(s.priority(0), Priority::Over);
    }

    #[test]
    fn credit_is_floored_at_minus_one_slice_and_surplus_above_one_slice_is_halved() {
        let t = topo(2, &[(256.0, 1)]);
        let mut s = Credit::new(&t, CreditParams::default());
        s.admit(0, 0);
        s.schedule(0, 0, None);
        // The only vCPU of the only VM earns both cores' time (60 ms) and burns 30 ms: +30 ms,
        // not above the cap of one slice.
        s.periodic(30 * MS);
        assert_eq!(s.credit(0), 30e6);
        // Blocked, it burns nothing: 30 + 60 = 90 > 30 → halved to 45 and inactive.
        s.schedule(30 * MS, 0, Some((0, Stop::Blocked)));
        s.periodic(60 * MS);
        assert_eq!(s.credit(0), 45e6);
        s.periodic(90 * MS); // inactive: earns nothing
        assert_eq!(s.credit(0), 45e6);
        // Floor: a vCPU far in debt is held at −30 ms.
        let t = topo(1, &[(256.0, 1), (256.0, 1), (256.0, 1), (256.0, 1)]);
        let mut s = Credit::new(&t, CreditParams::default());
        for v in 0..4 {
            s.admit(0, v);
        }
        s.schedule(0, 0, None);
        s.periodic(90 * MS); // vCPU 0 ran 90 ms and earned 7.5 ms: −82.5 ms, floored
        assert_eq!(s.credit(0), -30e6);
        assert_eq!(s.credit(1), 7.5e6);
    }

    #[test]
    fn a_waking_vcpu_is_boosted_preempts_and_is_demoted_at_the_next_tick() {
        let t = topo(1, &[(256.0, 1), (256.0, 1)]);
        let mut s = Credit::new(&t, CreditParams::default());
        s.admit(0, 0);
        s.admit(0, 1);
        s.take_kicks();
        assert_eq!(s.schedule(0, 0, None).vcpu, Some(0));
        // vCPU 0 blocks at 2 ms; vCPU 1 runs.
        assert_eq!(
            s.schedule(2 * MS, 0, Some((0, Stop::Blocked))).vcpu,
            Some(1)
        );
        // vCPU 0 wakes at 5 ms: UNDER → BOOST, higher than vCPU 1 (UNDER): preempt core 0.
        s.wake(5 * MS, 0);
        assert_eq!(s.priority(0), Priority::Boost);
        assert_eq!(s.take_kicks(), vec![0]);
        let d = s.schedule(5 * MS, 0, Some((1, Stop::Runnable)));
        assert_eq!(
            d,
            Dispatch {
                vcpu: Some(0),
                until: Some(10 * MS)
            }
        );
        assert_eq!(s.queue(0), &[1]);
        // At the 10 ms tick the running BOOSTed vCPU drops to UNDER and keeps running.
        assert_eq!(
            s.schedule(10 * MS, 0, Some((0, Stop::Runnable))).vcpu,
            Some(0)
        );
        assert_eq!(s.priority(0), Priority::Under);
        // Without boost, a waking vCPU does not preempt an equal one.
        let mut s = Credit::new(
            &t,
            CreditParams {
                boost: false,
                ..CreditParams::default()
            },
        );
        s.admit(0, 0);
        s.admit(0, 1);
        s.take_kicks();
        s.schedule(0, 0, None);
        s.schedule(2 * MS, 0, Some((0, Stop::Blocked)));
        s.wake(5 * MS, 0);
        assert_eq!(s.priority(0), Priority::Under);
        assert!(s.take_kicks().is_empty());
    }

    #[test]
    fn idle_cores_steal_and_busy_cores_steal_only_better_priority() {
        // Two cores; vCPUs 0, 2 start on core 0 and vCPU 1 on core 1.
        let t = topo(2, &[(256.0, 3)]);
        let mut s = Credit::new(&t, CreditParams::default());
        for v in 0..3 {
            s.admit(0, v);
        }
        let mut kicks = s.take_kicks();
        kicks.sort();
        assert_eq!(kicks, vec![0, 1]);
        assert_eq!(s.schedule(0, 0, None).vcpu, Some(0));
        assert_eq!(s.schedule(0, 1, None).vcpu, Some(1));
        assert_eq!(s.queue(0), &[2]);
        // vCPU 1 blocks: core 1 is idle locally and steals vCPU 2 from core 0.
        assert_eq!(s.schedule(MS, 1, Some((1, Stop::Blocked))).vcpu, Some(2));
        assert!(s.queue(0).is_empty());
        // A core whose local head is UNDER does not look elsewhere; one whose head is OVER
        // steals an UNDER head from a peer.
        let t = topo(2, &[(256.0, 2), (256.0, 2)]);
        let mut s = Credit::new(&t, CreditParams::default());
        for v in 0..4 {
            s.admit(0, v);
        }
        s.take_kicks();
        s.schedule(0, 0, None); // runs 0, queue [2]
        s.schedule(0, 1, None); // runs 1, queue [3]
        s.v_mut(0).priority = Priority::Over;
        s.v_mut(2).priority = Priority::Over;
        // Core 0's slice ends: its best local vCPUs (2, 0) are OVER and core 1's head (3) is
        // UNDER: steal 3.
        let d = s.schedule(30 * MS, 0, Some((0, Stop::Runnable)));
        assert_eq!(d.vcpu, Some(3));
    }
}
