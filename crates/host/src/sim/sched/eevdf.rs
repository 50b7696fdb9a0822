//! The Linux 6.x fair scheduler (EEVDF, `kernel/sched/fair.c`) as a KVM host runs vCPU threads.
//!
//! - One run queue per core. Each task has a virtual runtime v (advancing by real time ×
//!   1024 / weight) and a virtual deadline d = v + slice × 1024 / weight. The queue's average
//!   V = Σ w·v / Σ w; a task is eligible when v ≤ V (its lag V − v ≥ 0). The core runs the
//!   eligible task with the earliest deadline.
//! - A task runs until it has used its slice (v reaches d; then d moves one slice on and the core
//!   picks again). Without `hrtick` the kernel notices at the next tick (HZ = 250: 4 ms).
//!   `run_to_parity`: between ticks only a wake-up may preempt it, and only a wakee with a
//!   shorter slice (`PREEMPT_SHORT`) breaks that protection; the wakee then preempts if it is
//!   the eligible task with the earliest deadline.
//! - Slices: `base_slice_ms` (Linux: 0.7 ms × (1 + log2(min(CPUs, 8)))), or the VM's
//!   `slice_ms` (`sched_setattr`'s `sched_runtime`), clamped to 0.1–100 ms.
//! - Sleep and wake-up keep the task's lag (`PLACE_LAG`, clamped to ± max(2 slices, 1 tick));
//!   a new task's first deadline is half a slice away (`PLACE_DEADLINE_INITIAL`).
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
    /// Preempt exactly at the end of a slice instead of at the next tick.
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
    /// Lag saved when it blocked.
    vlag: f64,
    core: CoreId,
}

impl Task {
    /// The slice in virtual time.
    fn vslice(&self) -> f64 {
        self.slice * NICE_0 / self.weight
    }
}

#[derive(Clone, Debug, Default)]
struct Rq {
    /// Runnable tasks not running.
    queued: Vec<VcpuId>,
    current: Option<VcpuId>,
    exec_start: Nanos,
    /// V when the queue last had tasks (used while it is empty).
    idle_v: f64,
    preempt: bool,
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
                    vlag: 0.0,
                    core: topo.usable[i % topo.usable.len()],
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
        t.vruntime += dt * NICE_0 / t.weight;
    }

    /// The tasks on `core`'s queue, the running one included.
    fn members(&self, core: CoreId) -> Vec<VcpuId> {
        let rq = &self.rqs[core];
        rq.current
            .into_iter()
            .chain(rq.queued.iter().copied())
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

    /// The eligible task with the earliest deadline among `candidates` (ties: lower id); if
    /// rounding left none eligible, the earliest deadline.
    fn best(&self, v_avg: f64, candidates: &[VcpuId]) -> Option<VcpuId> {
        let earliest = |eligible_only: bool| {
            candidates
                .iter()
                .copied()
                .filter(|&v| !eligible_only || self.tasks[v].vruntime <= v_avg + 1e-6)
                .min_by(|&a, &b| {
                    let (da, db) = (self.tasks[a].deadline, self.tasks[b].deadline);
                    da.partial_cmp(&db)
                        .unwrap_or(Ordering::Equal)
                        .then(a.cmp(&b))
                })
        };
        earliest(true).or_else(|| earliest(false))
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

    /// Take `v` off `core` (it blocks or migrates), keeping its lag, clamped to
    /// ± max(2 slices, 1 tick) in virtual time.
    fn save_lag(&mut self, core: CoreId, v: VcpuId) {
        let v_avg = self.avg_vruntime(core);
        let tick = self.params.tick_ms * 1e6;
        let t = &mut self.tasks[v];
        let limit = (2.0 * t.slice).max(tick) * NICE_0 / t.weight;
        t.vlag = (v_avg - t.vruntime).clamp(-limit, limit);
    }

    fn remove_queued(&mut self, core: CoreId, v: VcpuId) {
        let rq = &mut self.rqs[core];
        rq.queued.retain(|&w| w != v);
        if rq.queued.is_empty() && rq.current.is_none() {
            rq.idle_v = self.tasks[v].vruntime + self.tasks[v].vlag;
        }
    }

    /// When the core must look again at its running task `v`: the end of its slice, at the next
    /// tick unless `hrtick` (and at every tick without `run_to_parity`).
    fn timer(&self, now: Nanos, v: VcpuId) -> Nanos {
        let t = &self.tasks[v];
        let real = ((t.deadline - t.vruntime) * t.weight / NICE_0)
            .max(0.0)
            .ceil() as Nanos;
        let slice_end = now + real.max(1);
        if self.params.hrtick {
            return slice_end;
        }
        let tick = ms(self.params.tick_ms).max(1);
        let next_tick = (now / tick + 1) * tick;
        if self.params.run_to_parity {
            slice_end.div_ceil(tick).max(1) * tick
        } else {
            next_tick
        }
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
        self.save_lag(busiest, v);
        self.remove_queued(busiest, v);
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
        let last = self.tasks[v].core;
        let n = self.usable.len();
        let start = self.usable.iter().position(|&c| c == last).unwrap_or(0);
        let target = (0..n)
            .map(|i| self.usable[(start + i) % n])
            .find(|&c| self.is_idle(c))
            .unwrap_or(last);
        self.update_curr(target, now);
        self.place(target, v, false);
        let Some(cur) = self.rqs[target].current else {
            self.kick(target);
            return;
        };
        // check_preempt_wakeup_fair
        let v_avg = self.avg_vruntime(target);
        let c = &self.tasks[cur];
        let shorter = self.params.preempt_short && self.tasks[v].slice < c.slice;
        let protected = self.params.run_to_parity
            && !shorter
            && c.vruntime < c.deadline
            && c.vruntime <= v_avg + 1e-6;
        if !protected && self.best(v_avg, &self.members(target)) == Some(v) {
            self.rqs[target].preempt = true;
            self.kick(target);
        }
    }

    fn retire(&mut self, _now: Nanos, v: VcpuId) {
        let core = self.tasks[v].core;
        self.save_lag(core, v);
        self.remove_queued(core, v);
    }

    fn schedule(&mut self, now: Nanos, core: CoreId, prev: Option<(VcpuId, Stop)>) -> Dispatch {
        self.rqs[core].kicked = false;
        self.update_curr(core, now);
        if let Some((v, stop)) = prev {
            match stop {
                Stop::Runnable => {
                    let t = &mut self.tasks[v];
                    let slice_used = t.vruntime >= t.deadline - 1e-6;
                    if slice_used {
                        t.deadline = t.vruntime + t.vslice();
                    }
                    let keep = !slice_used && !self.rqs[core].preempt && self.params.run_to_parity;
                    if keep {
                        return Dispatch {
                            vcpu: Some(v),
                            until: Some(self.timer(now, v)),
                        };
                    }
                    self.rqs[core].current = None;
                    self.rqs[core].queued.push(v);
                }
                Stop::Blocked | Stop::Finished => {
                    self.save_lag(core, v);
                    self.rqs[core].current = None;
                    if self.rqs[core].queued.is_empty() {
                        self.rqs[core].idle_v = self.tasks[v].vruntime + self.tasks[v].vlag;
                    }
                }
            }
        }
        self.rqs[core].preempt = false;
        let v_avg = self.avg_vruntime(core);
        let next = match self.best(v_avg, &self.rqs[core].queued) {
            Some(v) => Some(v),
            None => self.pull(core),
        };
        let Some(v) = next else {
            return Dispatch::IDLE;
        };
        let rq = &mut self.rqs[core];
        rq.queued.retain(|&w| w != v);
        rq.current = Some(v);
        rq.exec_start = now;
        if !rq.queued.is_empty() {
            self.kick_an_idle_core(core);
        }
        Dispatch {
            vcpu: Some(v),
            until: Some(self.timer(now, v)),
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
                s.tasks[1].vruntime = 0.0;
                s.save_lag(0, 1);
                s.remove_queued(0, 1);
            }
            assert_eq!(d.vcpu, Some(0));
            s.wake(MS, 1);
            // Short wakee: deadline 1.5 ms < 3 ms and protection cancelled → preempt. Equal
            // slice: task 0 is protected until the end of its slice.
            let kicked = s.take_kicks() == vec![0];
            assert_eq!(kicked, preempts, "wakee slice {wakee_slice} ms");
            let d = s.schedule(MS, 0, Some((0, Stop::Runnable)));
            assert_eq!(d.vcpu, Some(if preempts { 1 } else { 0 }));
        }
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
