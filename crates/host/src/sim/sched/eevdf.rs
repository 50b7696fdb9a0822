//! The Linux 6.x fair scheduler (EEVDF, `kernel/sched/fair.c` as of 6.17–6.18) as a KVM host
//! runs vCPU threads.
//!
//! - One run queue per core. Each task has a virtual runtime v (advancing by real time ×
//!   1024 / weight) and a virtual deadline d = v + slice × 1024 / weight. The queue's average
//!   V = Σ w·v / Σ w; a task is eligible when v ≤ V (its lag V − v ≥ 0). The core runs the
//!   eligible task with the earliest deadline.
//! - **Slice protection** (`RUN_TO_PARITY`): a task picked to run is protected up to
//!   `vprot` = min(d, v + the shortest slice on its queue) (`set_protect_slice`; without
//!   `run_to_parity`, v + min(0.7 ms, its slice)). Once past `vprot`, or once its slice is used
//!   (v ≥ d: d moves one slice on), the next tick reschedules (HZ = 250: every 4 ms; `hrtick`:
//!   exactly then). A task that stays the best after such a pick runs on unprotected.
//! - **Wake-up preemption** (`check_preempt_wakeup_fair`): the wake-up first accounts the
//!   running task and reschedules if it is no longer protected (`update_curr`). A wakee with a
//!   shorter slice than the running task (`PREEMPT_SHORT`) ignores that protection: it preempts
//!   if it is then the eligible task with the earliest deadline (and the running task's
//!   protection is cancelled); if it is not, the running task's protection is cut to the
//!   wakee's slice (`update_protect_slice`). Any other wakee preempts only if it is the best
//!   task while the running one's protection holds.
//! - **Sleeping with negative lag** (`DELAY_DEQUEUE`, `DELAY_ZERO`): a task that blocks while
//!   not eligible stays on its queue (counted in V) until it would be picked, and is dequeued
//!   then with its lag set to zero; woken before that, it keeps its place (a positive lag gained
//!   meanwhile is dropped). A task that blocks eligible keeps its lag (`PLACE_LAG`, clamped to
//!   ± max(2 slices, 1 tick)) and is placed with it when it wakes, the lag inflated by the
//!   queue's load so that it survives joining it. A new task's first deadline is half a slice
//!   away (`PLACE_DEADLINE_INITIAL`).
//! - Slices: `base_slice_ms` (Linux: 0.7 ms × (1 + log2(min(CPUs, 8)))), or the VM's
//!   `slice_ms` (`sched_setattr`'s `sched_runtime`), clamped to 0.1–100 ms.
//! - Placement and balancing (simplified from Linux's domains): a waking task goes to its last
//!   core if idle, else to an idle core, else to its last core; a core with nothing to run pulls
//!   the task its busiest peer would run next; a core that queues a task while another is idle
//!   kicks that one. No periodic balancing.
//! - Every vCPU thread has weight 1024 × VM weight / 256 (nice 0 for Xen's default weight 256);
//!   no cgroup hierarchy.

use std::cmp::Ordering;

use super::{Dispatch, Scheduler, Stop};
use crate::sim::model::{ms, CoreId, Nanos, Topology, VcpuId};

/// Linux clamps a requested slice to this range (ms).
pub const MIN_SLICE_MS: f64 = 0.1;
pub const MAX_SLICE_MS: f64 = 100.0;

/// The weight of a nice-0 task.
const NICE_0: f64 = 1024.0;
/// `normalized_sysctl_sched_base_slice`: the protection without `run_to_parity` (ns).
const NORMALIZED_BASE_SLICE: f64 = 0.7e6;
/// Rounding slack on virtual times (ns).
const EPS: f64 = 1e-6;

pub fn clamp_slice_ms(slice_ms: f64) -> f64 {
    slice_ms.clamp(MIN_SLICE_MS, MAX_SLICE_MS)
}

/// Linux's default base slice for a machine with `cpus` CPUs: 0.7 ms × (1 + ⌊log2(min(cpus,
/// 8))⌋) since 6.15 (0.75 ms before); 1.4 ms read back with `sched_getattr` on this 2-CPU 6.18.
pub fn linux_base_slice_ms(cpus: usize) -> f64 {
    let n = cpus.clamp(1, 8);
    0.7 * (1.0 + n.ilog2() as f64)
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EevdfParams {
    pub base_slice_ms: f64,
    pub tick_ms: f64,
    /// Reschedule exactly when protection ends instead of at the next tick.
    pub hrtick: bool,
    pub run_to_parity: bool,
    pub preempt_short: bool,
}

impl EevdfParams {
    /// The defaults of a Linux 6.x kernel on a machine with `cpus` CPUs (HZ = 250).
    pub fn linux(cpus: usize) -> EevdfParams {
        EevdfParams {
            base_slice_ms: linux_base_slice_ms(cpus),
            tick_ms: 4.0,
            hrtick: false,
            run_to_parity: true,
            preempt_short: true,
        }
    }
}

#[derive(Clone, Debug)]
struct Task {
    weight: f64,
    /// The slice in real nanoseconds.
    slice: f64,
    vruntime: f64,
    deadline: f64,
    /// Protected from rescheduling while its vruntime is below this (set when picked).
    vprot: f64,
    /// Lag saved when it left its queue.
    vlag: f64,
    core: CoreId,
    /// Blocked while not eligible, still on its queue (`DELAY_DEQUEUE`).
    delayed: bool,
}

impl Task {
    /// `real` nanoseconds in this task's virtual time.
    fn virt(&self, real: f64) -> f64 {
        real * NICE_0 / self.weight
    }

    fn vslice(&self) -> f64 {
        self.virt(self.slice)
    }

    fn protected(&self) -> bool {
        self.vruntime < self.vprot - EPS
    }
}

#[derive(Clone, Debug, Default)]
struct Rq {
    /// Runnable tasks not running.
    queued: Vec<VcpuId>,
    /// Blocked tasks still on the queue (`DELAY_DEQUEUE`).
    delayed: Vec<VcpuId>,
    current: Option<VcpuId>,
    exec_start: Nanos,
    /// V when the queue last had tasks (used while it is empty).
    idle_v: f64,
    /// A wake-up asked the running task to be rescheduled (not only its timer re-armed).
    resched: bool,
    kicked: bool,
}

pub struct Eevdf {
    params: EevdfParams,
    usable: Vec<CoreId>,
    tasks: Vec<Task>,
    rqs: Vec<Rq>,
    kicks: Vec<CoreId>,
}

impl Eevdf {
    pub fn new(topo: &Topology, params: EevdfParams) -> Eevdf {
        assert!(
            !topo.usable.is_empty(),
            "EEVDF needs at least one usable core"
        );
        let tasks = topo
            .vcpus
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let vm = &topo.vms[v.vm];
                let slice_ms = clamp_slice_ms(vm.slice_ms.unwrap_or(params.base_slice_ms));
                Task {
                    weight: NICE_0 * vm.weight / 256.0,
                    slice: slice_ms * 1e6,
                    vruntime: 0.0,
                    deadline: 0.0,
                    vprot: 0.0,
                    vlag: 0.0,
                    core: topo.usable[i % topo.usable.len()],
                    delayed: false,
                }
            })
            .collect();
        Eevdf {
            params,
            usable: topo.usable.clone(),
            tasks,
            rqs: vec![Rq::default(); topo.speed.len()],
            kicks: Vec::new(),
        }
    }

    /// The slice of `v` in milliseconds, after clamping.
    pub fn slice_ms(&self, v: VcpuId) -> f64 {
        self.tasks[v].slice / 1e6
    }

    pub fn vruntime(&self, v: VcpuId) -> f64 {
        self.tasks[v].vruntime
    }

    pub fn deadline(&self, v: VcpuId) -> f64 {
        self.tasks[v].deadline
    }

    fn kick(&mut self, core: CoreId) {
        if !self.rqs[core].kicked {
            self.rqs[core].kicked = true;
            self.kicks.push(core);
        }
    }

    /// Nothing runnable on `core` (delayed tasks do not count).
    fn is_idle(&self, core: CoreId) -> bool {
        self.rqs[core].current.is_none() && self.rqs[core].queued.is_empty()
    }

    /// `update_curr`: advance the running task's virtual runtime to `now`.
    fn update_curr(&mut self, core: CoreId, now: Nanos) {
        let rq = &mut self.rqs[core];
        let Some(v) = rq.current else { return };
        let dt = now.saturating_sub(rq.exec_start) as f64;
        rq.exec_start = now;
        let t = &mut self.tasks[v];
        t.vruntime += t.virt(dt);
    }

    /// The tasks on `core`'s queue: the running one, the runnable and the delayed ones.
    fn members(&self, core: CoreId) -> Vec<VcpuId> {
        let rq = &self.rqs[core];
        (rq.current.into_iter())
            .chain(rq.queued.iter().copied())
            .chain(rq.delayed.iter().copied())
            .collect()
    }

    /// V: the weighted average virtual runtime of the queue (its last value while empty).
    fn avg_vruntime(&self, core: CoreId) -> f64 {
        let (mut sum, mut weight) = (0.0, 0.0);
        for v in self.members(core) {
            sum += self.tasks[v].weight * self.tasks[v].vruntime;
            weight += self.tasks[v].weight;
        }
        if weight == 0.0 {
            self.rqs[core].idle_v
        } else {
            sum / weight
        }
    }

    fn load(&self, core: CoreId) -> f64 {
        self.members(core)
            .iter()
            .map(|&v| self.tasks[v].weight)
            .sum()
    }

    /// `cfs_rq_min_slice`: the shortest slice on `core`'s queue (real ns).
    fn min_slice(&self, core: CoreId) -> f64 {
        (self.members(core).iter())
            .map(|&v| self.tasks[v].slice)
            .fold(f64::INFINITY, f64::min)
    }

    fn eligible(&self, v_avg: f64, v: VcpuId) -> bool {
        self.tasks[v].vruntime <= v_avg + EPS
    }

    /// The eligible task with the earliest deadline among `candidates` (ties: lower id); if
    /// rounding left none eligible, the earliest deadline.
    fn best(&self, v_avg: f64, candidates: &[VcpuId]) -> Option<VcpuId> {
        let earliest = |eligible_only: bool| {
            candidates
                .iter()
                .copied()
                .filter(|&v| !eligible_only || self.eligible(v_avg, v))
                .min_by(|&a, &b| {
                    let (da, db) = (self.tasks[a].deadline, self.tasks[b].deadline);
                    da.partial_cmp(&db)
                        .unwrap_or(Ordering::Equal)
                        .then(a.cmp(&b))
                })
        };
        earliest(true).or_else(|| earliest(false))
    }

    /// `pick_eevdf` on `core`'s whole queue: the running task if `protect` and it is eligible
    /// and protected, else the best task.
    fn pick(&self, core: CoreId, protect: bool) -> Option<VcpuId> {
        let v_avg = self.avg_vruntime(core);
        if let Some(cur) = self.rqs[core].current {
            if protect && self.eligible(v_avg, cur) && self.tasks[cur].protected() {
                return Some(cur);
            }
        }
        self.best(v_avg, &self.members(core))
    }

    /// `set_protect_slice`: `v` was just picked on `core`.
    fn protect(&mut self, core: CoreId, v: VcpuId) {
        let quantum = if self.params.run_to_parity {
            self.min_slice(core)
        } else {
            NORMALIZED_BASE_SLICE
        };
        let t = &mut self.tasks[v];
        t.vprot = t.deadline.min(t.vruntime + t.virt(quantum.min(t.slice)));
    }

    /// `place_entity`: put `v` on `core`'s queue with its saved lag, inflated by the queue's
    /// load as Linux does so that the lag survives joining it.
    fn place(&mut self, core: CoreId, v: VcpuId, initial: bool) {
        let v_avg = self.avg_vruntime(core);
        let load = self.load(core);
        let t = &mut self.tasks[v];
        let mut lag = t.vlag;
        if load > 0.0 {
            lag = lag * (load + t.weight) / load;
        }
        t.vruntime = v_avg - lag;
        let vslice = t.vslice();
        t.deadline = t.vruntime + if initial { vslice / 2.0 } else { vslice };
        t.core = core;
        self.rqs[core].queued.push(v);
    }

    /// `update_entity_lag`: `v`'s lag on `core`, clamped to ± max(2 slices, 1 tick).
    fn lag(&self, core: CoreId, v: VcpuId) -> f64 {
        let t = &self.tasks[v];
        let limit = t.virt((2.0 * t.slice).max(self.params.tick_ms * 1e6));
        (self.avg_vruntime(core) - t.vruntime).clamp(-limit, limit)
    }

    /// Take `v` off `core`'s queue (runnable or delayed) with `lag` saved.
    fn dequeue(&mut self, core: CoreId, v: VcpuId, lag: f64) {
        let v_avg = self.avg_vruntime(core);
        self.tasks[v].vlag = lag;
        self.tasks[v].delayed = false;
        let rq = &mut self.rqs[core];
        rq.queued.retain(|&w| w != v);
        rq.delayed.retain(|&w| w != v);
        if rq.current == Some(v) {
            rq.current = None;
        }
        if rq.queued.is_empty() && rq.delayed.is_empty() && rq.current.is_none() {
            rq.idle_v = v_avg;
        }
    }

    /// `v` stops running on `core` because it blocked: off the queue with its lag if eligible,
    /// else left on it, delayed.
    fn block(&mut self, core: CoreId, v: VcpuId) {
        if self.eligible(self.avg_vruntime(core), v) {
            let lag = self.lag(core, v);
            self.dequeue(core, v, lag);
        } else {
            self.rqs[core].current = None;
            self.rqs[core].delayed.push(v);
            self.tasks[v].delayed = true;
        }
    }

    /// The next time `core` must look at its running task `v`: when its protection ends (at the
    /// next tick unless `hrtick`), or the next tick once it has; never while it runs alone.
    fn timer(&self, core: CoreId, now: Nanos, v: VcpuId) -> Option<Nanos> {
        let rq = &self.rqs[core];
        if rq.queued.is_empty() && rq.delayed.is_empty() {
            return None;
        }
        let t = &self.tasks[v];
        let tick = ms(self.params.tick_ms).max(1);
        let next_tick = (now / tick).saturating_add(1).saturating_mul(tick);
        if !t.protected() {
            return Some(next_tick);
        }
        let left = ((t.vprot - t.vruntime) * t.weight / NICE_0).max(1.0).ceil();
        let end = now.saturating_add(left.min(1e18) as Nanos);
        Some(if self.params.hrtick {
            end
        } else {
            end.div_ceil(tick).saturating_mul(tick).max(next_tick)
        })
    }

    /// A core with nothing to run pulls the task its busiest peer would run next.
    fn pull(&mut self, core: CoreId) -> Option<VcpuId> {
        let busiest = self
            .usable
            .iter()
            .copied()
            .filter(|&c| c != core && !self.rqs[c].queued.is_empty())
            .max_by_key(|&c| (self.rqs[c].queued.len(), std::cmp::Reverse(c)))?;
        let v_avg = self.avg_vruntime(busiest);
        let v = self.best(v_avg, &self.rqs[busiest].queued)?;
        let lag = self.lag(busiest, v);
        self.dequeue(busiest, v, lag);
        self.place(core, v, false);
        Some(v)
    }

    fn kick_an_idle_core(&mut self, from: CoreId) {
        let n = self.usable.len();
        let start = self.usable.iter().position(|&c| c == from).unwrap_or(0);
        for i in 1..=n {
            let c = self.usable[(start + i) % n];
            if self.is_idle(c) && !self.rqs[c].kicked {
                self.kick(c);
                return;
            }
        }
    }

    /// `check_preempt_wakeup_fair` for `v`, just queued on `core` where `cur` runs: whether to
    /// reschedule now; otherwise the running task's protection may be cut to `v`'s slice.
    fn wakeup_preempts(&mut self, core: CoreId, cur: VcpuId, v: VcpuId) -> bool {
        let c = &self.tasks[cur];
        if c.vruntime >= c.deadline - EPS || !c.protected() {
            return true; // update_curr: the running task's slice or protection is over
        }
        let short = self.params.preempt_short && self.tasks[v].slice < c.slice;
        if self.pick(core, !short) == Some(v) {
            if short {
                self.tasks[cur].vprot = self.tasks[cur].vruntime; // cancel_protect_slice
            }
            return true;
        }
        if short && self.params.run_to_parity {
            let quantum = self.min_slice(core);
            let c = &mut self.tasks[cur];
            c.vprot = c.vprot.min(c.vruntime + c.virt(quantum));
        }
        false
    }
}

impl Scheduler for Eevdf {
    fn name(&self) -> &'static str {
        "eevdf"
    }

    fn admit(&mut self, _now: Nanos, v: VcpuId) {
        let core = self.tasks[v].core;
        self.place(core, v, true);
        if self.rqs[core].current.is_none() {
            self.kick(core);
        }
    }

    fn wake(&mut self, now: Nanos, v: VcpuId) {
        let target = if self.tasks[v].delayed {
            // Still on its queue: it stays there (`requeue_delayed_entity`), a positive lag
            // gained meanwhile dropped.
            let core = self.tasks[v].core;
            self.update_curr(core, now);
            self.rqs[core].delayed.retain(|&w| w != v);
            self.tasks[v].delayed = false;
            self.rqs[core].queued.push(v);
            if self.lag(core, v) > 0.0 {
                self.rqs[core].queued.retain(|&w| w != v);
                self.tasks[v].vlag = 0.0;
                self.place(core, v, false);
            }
            core
        } else {
            let last = self.tasks[v].core;
            let n = self.usable.len();
            let start = self.usable.iter().position(|&c| c == last).unwrap_or(0);
            let target = (0..n)
                .map(|i| self.usable[(start + i) % n])
                .find(|&c| self.is_idle(c))
                .unwrap_or(last);
            self.update_curr(target, now);
            self.place(target, v, false);
            target
        };
        // The running task's timer is re-armed whatever is decided (its protection may end
        // sooner now, and a task that ran alone now has company).
        if let Some(cur) = self.rqs[target].current {
            if self.wakeup_preempts(target, cur, v) {
                self.rqs[target].resched = true;
            }
        }
        self.kick(target);
    }

    fn retire(&mut self, _now: Nanos, v: VcpuId) {
        let core = self.tasks[v].core;
        let lag = self.lag(core, v);
        self.dequeue(core, v, lag);
    }

    fn schedule(&mut self, now: Nanos, core: CoreId, prev: Option<(VcpuId, Stop)>) -> Dispatch {
        self.rqs[core].kicked = false;
        let resched = std::mem::take(&mut self.rqs[core].resched);
        self.update_curr(core, now);
        match prev {
            Some((v, Stop::Runnable)) => {
                let t = &mut self.tasks[v];
                let slice_used = t.vruntime >= t.deadline - EPS;
                if slice_used {
                    t.deadline = t.vruntime + t.vslice(); // update_deadline
                }
                let keep = if resched || slice_used || !self.tasks[v].protected() {
                    self.pick(core, true) == Some(v)
                } else {
                    true // a timer re-armed, nothing more
                };
                if keep {
                    return Dispatch {
                        vcpu: Some(v),
                        until: self.timer(core, now, v),
                    };
                }
                self.rqs[core].current = None;
                self.rqs[core].queued.push(v);
            }
            Some((v, Stop::Blocked)) => self.block(core, v),
            Some((v, Stop::Finished)) => {
                let lag = self.lag(core, v);
                self.dequeue(core, v, lag);
            }
            None => {}
        }
        // pick_next_entity: a delayed task it would pick leaves the queue with no lag instead.
        let next = loop {
            let v_avg = self.avg_vruntime(core);
            let rq = &self.rqs[core];
            let candidates: Vec<VcpuId> = rq.queued.iter().chain(&rq.delayed).copied().collect();
            match self.best(v_avg, &candidates) {
                Some(d) if self.tasks[d].delayed => {
                    let lag = self.lag(core, d).min(0.0); // DELAY_ZERO
                    self.dequeue(core, d, lag);
                }
                Some(v) => break Some(v),
                None => break self.pull(core),
            }
        };
        let Some(v) = next else {
            return Dispatch::IDLE;
        };
        let rq = &mut self.rqs[core];
        rq.queued.retain(|&w| w != v);
        rq.current = Some(v);
        rq.exec_start = now;
        self.protect(core, v);
        if !self.rqs[core].queued.is_empty() {
            self.kick_an_idle_core(core);
        }
        Dispatch {
            vcpu: Some(v),
            until: self.timer(core, now, v),
        }
    }

    fn take_kicks(&mut self) -> Vec<CoreId> {
        std::mem::take(&mut self.kicks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::model::{Host, Vm, Workload, MS};

    fn topo(cores: usize, slices: &[Option<f64>]) -> Topology {
        let vms: Vec<Vm> = slices
            .iter()
            .enumerate()
            .map(|(i, &slice_ms)| Vm {
                slice_ms,
                ..Vm::new(
                    &format!("vm{i}"),
                    1,
                    Workload::Serial {
                        work_ms: 1e3,
                        mem_intensity: 0.0,
                    },
                )
            })
            .collect();
        Topology::new(&Host::symmetric(cores), &vms)
    }

    fn exact(base_slice_ms: f64) -> EevdfParams {
        EevdfParams {
            base_slice_ms,
            hrtick: true,
            ..EevdfParams::linux(8)
        }
    }

    #[test]
    fn linux_default_slices_and_clamping() {
        assert_eq!(linux_base_slice_ms(1), 0.7);
        assert_eq!(linux_base_slice_ms(2), 1.4);
        assert!((linux_base_slice_ms(8) - 2.8).abs() < 1e-12);
        assert_eq!(linux_base_slice_ms(128), linux_base_slice_ms(8));
        let t = topo(1, &[Some(0.01), Some(250.0), Some(7.0), None]);
        let s = Eevdf::new(&t, EevdfParams::linux(2));
        assert_eq!(s.slice_ms(0), 0.1);
        assert_eq!(s.slice_ms(1), 100.0);
        assert_eq!(s.slice_ms(2), 7.0);
        assert_eq!(s.slice_ms(3), 1.4);
    }

    #[test]
    fn earliest_eligible_deadline_runs_first() {
        // Three new tasks on one core at V = 0 with slices 6, 2 and 4 ms: first deadlines are
        // half a slice away (3, 1, 2 ms), so they run 1, 2, 0.
        let t = topo(1, &[Some(6.0), Some(2.0), Some(4.0)]);
        let mut s = Eevdf::new(&t, exact(3.0));
        for v in 0..3 {
            s.admit(0, v);
        }
        let d = s.schedule(0, 0, None);
        // Task 1 runs until its deadline (1 ms of virtual time = 1 ms real at weight 1024).
        assert_eq!(
            d,
            Dispatch {
                vcpu: Some(1),
                until: Some(MS)
            }
        );
        // At 1 ms task 1 has v = 1 > V = 1/3: not eligible. Task 2 (deadline 2) runs.
        let d = s.schedule(MS, 0, Some((1, Stop::Runnable)));
        assert_eq!(d.vcpu, Some(2));
        assert_eq!(s.deadline(1), 1e6 + 2e6); // a new deadline one slice on
                                              // Task 2 has a 4 ms slice and deadline 2 ms: it runs 2 ms, to t = 3 ms.
        assert_eq!(d.until, Some(3 * MS));
        let d = s.schedule(3 * MS, 0, Some((2, Stop::Runnable)));
        assert_eq!(d.vcpu, Some(0));
    }

    #[test]
    fn without_hrtick_the_slice_ends_at_the_next_tick() {
        let t = topo(1, &[None, None]);
        let mut s = Eevdf::new(&t, EevdfParams::linux(8)); // 3 ms slices, 4 ms ticks
        s.admit(0, 0);
        s.admit(0, 1);
        // First deadline 1.5 ms away, noticed at the 4 ms tick.
        assert_eq!(s.schedule(0, 0, None).until, Some(4 * MS));
    }

    #[test]
    fn a_shorter_slice_wakee_preempts_an_equal_slice_one_does_not() {
        for (wakee_slice, preempts) in [(0.5, true), (6.0, false)] {
            // Task 0 (6 ms slice, first deadline 3 ms) runs from 0; task 1 is off the core
            // with no lag and wakes at 1 ms, placed at V = 1 ms.
            let t = topo(1, &[Some(6.0), Some(wakee_slice)]);
            let mut s = Eevdf::new(&t, exact(3.0));
            s.admit(0, 0);
            s.admit(0, 1);
            s.take_kicks();
            let mut d = s.schedule(0, 0, None);
            if d.vcpu == Some(1) {
                // The short-slice task's first deadline (0.25 ms) is earlier: let it block.
                d = s.schedule(0, 0, Some((1, Stop::Blocked)));
            } else {
                s.dequeue(0, 1, 0.0);
            }
            assert_eq!(d.vcpu, Some(0));
            s.wake(MS, 1);
            // Short wakee: deadline 1.5 ms < 3 ms and protection cancelled → preempt. Equal
            // slice: task 0 is protected until the end of its slice.
            assert_eq!(s.rqs[0].resched, preempts, "wakee slice {wakee_slice} ms");
            assert_eq!(s.take_kicks(), vec![0]);
            let d = s.schedule(MS, 0, Some((0, Stop::Runnable)));
            assert_eq!(d.vcpu, Some(if preempts { 1 } else { 0 }));
        }
    }

    #[test]
    fn a_short_wakee_that_cannot_preempt_cuts_the_running_protection_to_its_slice() {
        // Task 0 (6 ms slice) runs from 0 beside task 1 (6 ms), protected to its first deadline
        // (3 ms). Task 2 (0.5 ms slice) wakes at 1 ms with a lag of −2 ms: not eligible, so it
        // cannot preempt, but task 0's protection ends 0.5 ms later (1.5 ms), not at 3 ms.
        let t = topo(1, &[Some(6.0), Some(6.0), Some(0.5)]);
        let mut s = Eevdf::new(&t, exact(3.0));
        s.admit(0, 0);
        s.admit(0, 1);
        assert_eq!(s.schedule(0, 0, None).until, Some(3 * MS));
        s.tasks[2].vlag = -2e6;
        s.wake(MS, 2);
        assert!(!s.rqs[0].resched);
        let d = s.schedule(MS, 0, Some((0, Stop::Runnable)));
        assert_eq!(
            d,
            Dispatch {
                vcpu: Some(0),
                until: Some(3 * MS / 2)
            }
        );
    }

    #[test]
    fn a_task_that_blocks_not_eligible_is_delayed_and_leaves_with_no_lag() {
        // Two tasks on one core; task 0 runs 3 ms past V and blocks: not eligible, it stays on
        // the queue (V counts it) until picked, then leaves with lag 0 (DELAY_ZERO), not −1.5.
        let t = topo(1, &[None, None]);
        let mut s = Eevdf::new(&t, exact(3.0));
        s.admit(0, 0);
        s.admit(0, 1);
        assert_eq!(s.schedule(0, 0, None).vcpu, Some(0));
        assert_eq!(
            s.schedule(3 * MS, 0, Some((0, Stop::Blocked))).vcpu,
            Some(1)
        );
        assert_eq!(s.rqs[0].delayed, vec![0]);
        assert!((s.avg_vruntime(0) - 1.5e6).abs() < 1.0);
        // Task 1 runs 3 ms: task 0 (v = 3 ms, deadline 4.5) is eligible and the earliest
        // deadline, so the pick dequeues it instead of running it.
        let d = s.schedule(6 * MS, 0, Some((1, Stop::Runnable)));
        assert_eq!(d.vcpu, Some(1));
        assert!(s.rqs[0].delayed.is_empty() && !s.tasks[0].delayed);
        assert_eq!(s.tasks[0].vlag, 0.0);
        s.wake(7 * MS, 0);
        // Placed at V with no lag: V before it joined was task 1's v (4 ms at 7 ms).
        assert!((s.vruntime(0) - 4e6).abs() < 1.0, "{}", s.vruntime(0));
    }

    #[test]
    fn a_sleeper_keeps_its_lag() {
        // Two tasks on one core; task 1 blocks with positive lag and comes back with it.
        let t = topo(1, &[None, None]);
        let mut s = Eevdf::new(&t, exact(3.0));
        s.admit(0, 0);
        s.admit(0, 1);
        assert_eq!(s.schedule(0, 0, None).vcpu, Some(0));
        // Task 0 runs to 1.5 ms (its first deadline); task 1 then runs.
        assert_eq!(
            s.schedule(3 * MS / 2, 0, Some((0, Stop::Runnable))).vcpu,
            Some(1)
        );
        // Task 1 blocks immediately: V = 0.75 ms, its v = 0: lag 0.75 ms.
        assert_eq!(
            s.schedule(3 * MS / 2, 0, Some((1, Stop::Blocked))).vcpu,
            Some(0)
        );
        // It wakes at 2 ms: V is task 0's v = 2 ms; with lag 0.75 ms inflated by (1024 + 1024)
        // / 1024 it is placed at 2 − 1.5 = 0.5 ms.
        s.wake(2 * MS, 1);
        assert!((s.vruntime(1) - 0.5e6).abs() < 1.0, "{}", s.vruntime(1));
    }
}
