//! AASH (Kazempour, Kamali, Fedorova, VEE 2010): Xen's Credit scheduler made asymmetry-aware.
//! Credit decides how much CPU time each vCPU gets; AASH decides who gets the fast cores.
//!
//! - **Fast cores** are the usable cores faster than the slowest usable one.
//! - **Rotation**: at every Credit accounting (30 ms) the runnable vCPUs are ranked by
//!   `decide::aash::designate` (priority VMs first, then least fast-core time received) and the
//!   best `fast cores` of them are *designated* until the next rotation.
//! - A fast core runs a designated vCPU that waits anywhere before anything else; only when none
//!   waits does it choose by Credit's rules (stealing anything when idle, so fast cores never
//!   idle while a vCPU waits). A slow core never takes a designated vCPU.
//! - A designated vCPU that is not on a fast core (at a rotation, a wake-up, or after it was
//!   queued) claims one: an idle fast core is kicked, else one running an undesignated vCPU is
//!   preempted (and the slow core it runs on, if any, gives it up first).
//! - An undesignated vCPU wakes in the queue of a slow core (the first idle one, else the one
//!   with the shortest queue), where Credit's BOOST applies as usual.
//! - Fast-core time is counted per vCPU, in wall time on a fast core; `decide::aash::rebase`
//!   keeps a sleeper within one accounting period of the least-served runnable vCPU.

use super::{Credit, CreditParams, Dispatch, Scheduler, Stop};
use crate::decide::aash::{designate, rebase, FastClaim};
use crate::sim::model::{ms, CoreId, Nanos, Topology, VcpuId};

pub struct Aash {
    credit: Credit,
    period: Nanos,
    /// Usable fast cores and usable slow cores, in index order.
    fast: Vec<CoreId>,
    slow: Vec<CoreId>,
    /// Per vCPU: its VM has fast-core priority; time on fast cores so far; runnable; designated.
    priority: Vec<bool>,
    fast_ns: Vec<Nanos>,
    runnable: Vec<bool>,
    designated: Vec<bool>,
    /// The designated vCPUs, best first.
    chosen: Vec<VcpuId>,
    /// Per core: fast time of its vCPU is counted up to here; a designated vCPU claimed it.
    since: Vec<Nanos>,
    claimed: Vec<bool>,
}

impl Aash {
    pub fn new(topo: &Topology, params: CreditParams) -> Aash {
        let slowest = (topo.usable.iter())
            .map(|&c| topo.speed[c])
            .fold(f64::INFINITY, f64::min);
        let (fast, slow): (Vec<CoreId>, Vec<CoreId>) =
            (topo.usable.iter().copied()).partition(|&c| topo.speed[c] > slowest);
        let n = topo.vcpus.len();
        let mut aash = Aash {
            credit: Credit::new(topo, params),
            period: ms(params.period_ms).max(1),
            fast,
            slow,
            priority: (topo.vcpus.iter())
                .map(|v| topo.vms[v.vm].fast_priority)
                .collect(),
            fast_ns: vec![0; n],
            runnable: vec![true; n],
            designated: vec![false; n],
            chosen: Vec::new(),
            since: vec![0; topo.speed.len()],
            claimed: vec![false; topo.speed.len()],
        };
        aash.rotate();
        aash
    }

    /// Time vCPU `v` has spent on fast cores (counted up to its core's last decision).
    pub fn fast_ns(&self, v: VcpuId) -> Nanos {
        self.fast_ns[v]
    }

    pub fn is_designated(&self, v: VcpuId) -> bool {
        self.designated[v]
    }

    fn is_fast(&self, core: CoreId) -> bool {
        self.fast.contains(&core)
    }

    fn on_fast(&self, v: VcpuId) -> bool {
        self.fast.iter().any(|&c| self.credit.current(c) == Some(v))
    }

    /// Count the fast-core time of `core`'s vCPU up to `now`.
    fn account(&mut self, core: CoreId, now: Nanos) {
        if let Some(v) = self.credit.current(core) {
            if self.is_fast(core) {
                self.fast_ns[v] += now.saturating_sub(self.since[core]);
            }
        }
        self.since[core] = now;
    }

    /// Choose the designated vCPUs anew.
    fn rotate(&mut self) {
        rebase(&mut self.fast_ns, &self.runnable, self.period);
        let claims: Vec<FastClaim> = (0..self.fast_ns.len())
            .map(|v| FastClaim {
                fast_ns: self.fast_ns[v],
                priority: self.priority[v],
                on_fast: self.on_fast(v),
                runnable: self.runnable[v],
            })
            .collect();
        self.chosen = designate(&claims, self.fast.len());
        self.designated.iter_mut().for_each(|d| *d = false);
        for &v in &self.chosen {
            self.designated[v] = true;
        }
    }

    /// A designated runnable vCPU not on a fast core claims one: an idle fast core is kicked,
    /// else one running an undesignated vCPU is preempted (after the slow core `v` runs on).
    fn place(&mut self, v: VcpuId) {
        if !self.designated[v] || !self.runnable[v] || self.on_fast(v) {
            return;
        }
        let free = |a: &Aash, c: CoreId| !a.claimed[c];
        let idle = (self.fast.iter().copied())
            .find(|&c| free(self, c) && self.credit.current(c).is_none());
        let busy = (self.fast.iter().copied()).find(|&c| {
            free(self, c) && self.credit.current(c).is_some_and(|w| !self.designated[w])
        });
        let Some(target) = idle.or(busy) else {
            return;
        };
        let home = self.credit.home(v);
        if self.credit.current(home) == Some(v) {
            self.credit.preempt(home);
        }
        self.claimed[target] = true;
        if idle.is_some() {
            self.credit.kick(target);
        } else {
            self.credit.preempt(target);
        }
    }

    fn place_all(&mut self) {
        for v in self.chosen.clone() {
            self.place(v);
        }
    }

    /// The slow core an undesignated vCPU wakes on: the first idle one, else the one with the
    /// shortest queue.
    fn slow_home(&self) -> Option<CoreId> {
        let idle = (self.slow.iter().copied()).find(|&c| self.credit.current(c).is_none());
        idle.or_else(|| {
            (self.slow.iter().copied()).min_by_key(|&c| (self.credit.queue(c).len(), c))
        })
    }
}

impl Scheduler for Aash {
    fn name(&self) -> &'static str {
        "aash"
    }

    fn admit(&mut self, now: Nanos, v: VcpuId) {
        self.runnable[v] = true;
        self.credit.admit(now, v);
        self.place(v);
    }

    fn wake(&mut self, now: Nanos, v: VcpuId) {
        self.runnable[v] = true;
        if !self.designated[v] && self.is_fast(self.credit.home(v)) {
            if let Some(core) = self.slow_home() {
                self.credit.set_home(v, core);
            }
        }
        self.credit.wake(now, v);
        self.place(v);
    }

    fn retire(&mut self, now: Nanos, v: VcpuId) {
        self.runnable[v] = false;
        self.credit.retire(now, v);
    }

    fn schedule(&mut self, now: Nanos, core: CoreId, prev: Option<(VcpuId, Stop)>) -> Dispatch {
        self.account(core, now);
        self.claimed[core] = false;
        if let Some((v, stop)) = prev {
            self.runnable[v] = stop == Stop::Runnable;
        }
        if let Some(d) = self.credit.stop(now, core, prev) {
            return d;
        }
        let next = if self.is_fast(core) {
            let waiting = (self.chosen.iter().copied()).find(|&v| self.credit.unqueue(v));
            waiting.or_else(|| self.credit.pick(core, &|_| true))
        } else {
            let designated = &self.designated;
            self.credit.pick(core, &|v| !designated[v])
        };
        let d = self.credit.start(now, core, next);
        self.place_all();
        d
    }

    fn take_kicks(&mut self) -> Vec<CoreId> {
        self.credit.take_kicks()
    }

    fn next_periodic(&self) -> Option<Nanos> {
        self.credit.next_periodic()
    }

    /// Credit's accounting, then the rotation.
    fn periodic(&mut self, now: Nanos) {
        self.credit.periodic(now);
        for core in self.fast.clone() {
            self.account(core, now);
        }
        self.rotate();
        self.place_all();
    }
}
