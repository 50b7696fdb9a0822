//! IA, the integrated vCPU scheduler for asymmetric multicore hosts (spec 001), built on the pure
//! functions of `decide::ia`.
//!
//! - Initial mapping (Algorithm 1) at start: each VM's vCPUs on distinct cores of one class.
//! - Each core has three queues (`RunQueue`: home class, too wide, other class); within a queue
//!   vCPUs with scaled resource SR > 0 come first.
//! - Allocation (Algorithm 2) every cycle (Z slots): every vCPU's SR grows by its share of the
//!   host's SR, queues are reordered.
//! - Consumption (Algorithm 3): a running vCPU's SR falls by SF × SR_unit per slot of its core,
//!   charged in proportion to the time it ran (so a vCPU that blocks mid-slot pays part).
//! - A co-scheduled VM's vCPUs are decided by one balance, the mean SR of its vCPUs
//!   (`gang_balance`): wherever this page says "SR" for such a vCPU, read its gang's.
//! - Fast-core shares (`settle_fast_shares`, every cycle): the fast-core time handed to the VMs
//!   that may use fast cores (`shares_fast_cores`) is split among them by weight, and each VM's
//!   owed balance is kept. SR buys equal work; equal work *and* equal CPU time need equal
//!   fast-core time (issue 26).
//! - Selection (Algorithm 4) at the start of every slot: a vCPU whose SR is exhausted (≤ 0), or
//!   that holds a fast core its VM is owed no time on (`fits_core`), gives the core to the first
//!   local vCPU with SR > 0 that fits the core (queue1, queue2, queue3), else one stolen from a
//!   same-class core (its queue1, 2, 3), else from an other-class core (its queue3, 2, 1); then
//!   the same for any vCPU with SR > 0. If no vCPU anywhere has SR left, the core stays
//!   work-conserving: the local head, else any waiting vCPU (open question 4). A stolen vCPU
//!   never joins a core that holds a sibling (principle 1).
//! - Co-scheduling (Algorithm 5): when a vCPU of a parallel VM is selected, each sibling waiting
//!   in its own core's queue is run there at once, for one slot, unless that core already serves
//!   another gang this slot (first come, first served: open question 5). A sibling that wakes
//!   while another is running joins the gang the same way. Gang members pay SR by their own core's
//!   SF, SR or not (`gang_needs_sr` keeps those without SR out). Program type comes from the
//!   workload (open question 6).
//! - Wake-ups do not preempt otherwise (no BOOST): an idle core is kicked to steal, and if there
//!   is none, a vCPU that wakes with SR left (a serial one, or one whose gang is running) takes
//!   the core of a runner without SR (`core_to_displace`) that fits it and holds no sibling.

use super::{Dispatch, Scheduler, Stop};
use crate::decide::ia::{
    core_to_displace, fits_core, gang_balance, initial_mapping, queue_for, refill, reorder_by_sr,
    settle_fast_shares, shares_fast_cores, sr_increment, sr_total, steal_order, CoreClass,
    IaParams, MappingError, Platform, RunQueue, Runner, VmShape, LOCAL_ORDER,
};
use crate::sim::model::{ms, CoreId, Nanos, Topology, VcpuId, Workload};

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IaSchedParams {
    pub ia: IaParams,
    /// The scheduling quantum (10 ms); a cycle is `ia.slots_per_cycle` slots.
    pub slot_ms: f64,
    /// Run the vCPUs of parallel VMs together (Algorithm 5).
    pub coschedule: bool,
    /// Only siblings with SR left join a gang (open question 5); false: every waiting sibling
    /// joins, and pays SR it does not have.
    pub gang_needs_sr: bool,
}

impl Default for IaSchedParams {
    fn default() -> Self {
        IaSchedParams {
            ia: IaParams::default(),
            slot_ms: 10.0,
            coschedule: true,
            gang_needs_sr: false,
        }
    }
}

#[derive(Clone, Debug)]
struct VcpuState {
    vm: usize,
    sr: f64,
    increment: f64,
    /// The core whose queues it joins when it waits.
    core: CoreId,
    running: bool,
    finished: bool,
}

#[derive(Clone, Debug, Default)]
struct CoreState {
    /// queue1, queue2, queue3, indexed by `slot(RunQueue)`.
    queues: [Vec<VcpuId>; 3],
    current: Option<VcpuId>,
    exec_start: Nanos,
    slot_end: Nanos,
    /// A gang sibling this core must run at its next decision.
    forced: Option<VcpuId>,
    /// The core serves a gang (of this VM) until then.
    gang_until: Nanos,
    gang_vm: Option<usize>,
    kicked: bool,
}

/// Algorithm 4's passes: vCPUs with SR left that fit the core's class as far as fast-core
/// shares go, then any with SR left, then anyone (work-conserving, open question 4).
#[derive(Clone, Copy)]
enum Pass {
    Fits,
    HasSr,
    Any,
}

fn slot(q: RunQueue) -> usize {
    match q {
        RunQueue::HomeClass => 0,
        RunQueue::TooWide => 1,
        RunQueue::OtherClass => 2,
    }
}

pub struct Ia {
    params: IaSchedParams,
    usable: Vec<CoreId>,
    /// Per core id (reserved cores included, unused).
    sf: Vec<f64>,
    class: Vec<CoreClass>,
    n_fast: usize,
    n_slow: usize,
    vm_vcpus: Vec<Vec<VcpuId>>,
    parallel: Vec<bool>,
    weight: Vec<f64>,
    vcpus: Vec<VcpuState>,
    cores: Vec<CoreState>,
    kicks: Vec<CoreId>,
    next_cycle: Nanos,
    /// Per VM: whether it takes part in fast-core shares, its fast-core time this cycle (ns),
    /// whether it ran this cycle, and the fast-core time it is owed (ns).
    shares_fast: Vec<bool>,
    fast_this_cycle: Vec<f64>,
    ran_this_cycle: Vec<bool>,
    fast_owed: Vec<f64>,
}

/// The usable cores as IA sees them: each core's speed over the slowest one's (SF).
pub(super) fn platform_of(topo: &Topology) -> Platform {
    let slowest = topo
        .usable
        .iter()
        .map(|&c| topo.speed[c])
        .fold(f64::INFINITY, f64::min);
    Platform {
        sf: topo
            .usable
            .iter()
            .map(|&c| topo.speed[c] / slowest)
            .collect(),
    }
}

impl Ia {
    /// Map the VMs (Algorithm 1) and give every vCPU its first allocation. Fails when a VM has
    /// more vCPUs than the host has usable cores.
    pub fn new(topo: &Topology, params: IaSchedParams) -> Result<Ia, MappingError> {
        let platform = platform_of(topo);
        let shapes: Vec<VmShape> = topo
            .vms
            .iter()
            .map(|v| VmShape {
                weight: v.weight,
                vcpus: v.vcpus,
            })
            .collect();
        let mapping = initial_mapping(&platform, &shapes, &params.ia)?;
        let total = sr_total(&platform, &params.ia);
        let total_weight: f64 = shapes.iter().map(|s| s.weight).sum();
        let mut sf = vec![1.0; topo.speed.len()];
        let mut class = vec![CoreClass::Slow; topo.speed.len()];
        for (i, &c) in topo.usable.iter().enumerate() {
            sf[c] = platform.sf[i];
            class[c] = platform.class(i);
        }
        let vcpus = topo
            .vcpus
            .iter()
            .map(|v| {
                let increment = sr_increment(total, shapes[v.vm], total_weight);
                VcpuState {
                    vm: v.vm,
                    sr: increment,
                    increment,
                    core: topo.usable[mapping[v.vm][v.index]],
                    running: false,
                    finished: false,
                }
            })
            .collect();
        Ok(Ia {
            n_fast: platform.n_fast(),
            n_slow: platform.n_slow(),
            usable: topo.usable.clone(),
            sf,
            class,
            vm_vcpus: (0..topo.vms.len()).map(|vm| topo.vcpus_of(vm)).collect(),
            parallel: topo
                .vms
                .iter()
                .map(|v| matches!(v.workload, Workload::Parallel { .. }))
                .collect(),
            weight: shapes.iter().map(|s| s.weight).collect(),
            vcpus,
            cores: vec![CoreState::default(); topo.speed.len()],
            kicks: Vec::new(),
            next_cycle: ms(params.slot_ms) * params.ia.slots_per_cycle as Nanos,
            shares_fast: topo
                .vms
                .iter()
                .map(|v| {
                    let coscheduled =
                        params.coschedule && matches!(v.workload, Workload::Parallel { .. });
                    shares_fast_cores(v.vcpus, coscheduled, platform.n_fast())
                })
                .collect(),
            fast_this_cycle: vec![0.0; topo.vms.len()],
            ran_this_cycle: vec![false; topo.vms.len()],
            fast_owed: vec![0.0; topo.vms.len()],
            params,
        })
    }

    pub fn sr(&self, v: VcpuId) -> f64 {
        self.vcpus[v].sr
    }

    /// The core whose queues `v` joins (after the initial mapping: its mapped core).
    pub fn home(&self, v: VcpuId) -> CoreId {
        self.vcpus[v].core
    }

    /// The queue of `core` that `v` is in, if it is waiting there.
    pub fn queue_of(&self, core: CoreId, v: VcpuId) -> Option<RunQueue> {
        LOCAL_ORDER
            .into_iter()
            .find(|&q| self.cores[core].queues[slot(q)].contains(&v))
    }

    /// The SR that decides for `v`: its own, or its gang's (`gang_balance`) for a vCPU of a
    /// co-scheduled VM.
    fn balance(&self, v: VcpuId) -> f64 {
        let vm = self.vcpus[v].vm;
        if self.params.coschedule && self.parallel[vm] {
            let sr: Vec<f64> = self.vm_vcpus[vm]
                .iter()
                .map(|&w| self.vcpus[w].sr)
                .collect();
            gang_balance(&sr)
        } else {
            self.vcpus[v].sr
        }
    }

    /// Whether `v` may take or keep `core` while it has SR left (`fits_core`).
    fn fits(&self, core: CoreId, v: VcpuId) -> bool {
        let vm = self.vcpus[v].vm;
        fits_core(self.class[core], self.shares_fast[vm], self.fast_owed[vm])
    }

    fn slot_ns(&self) -> Nanos {
        ms(self.params.slot_ms).max(1)
    }

    fn kick(&mut self, core: CoreId) {
        if !self.cores[core].kicked {
            self.cores[core].kicked = true;
            self.kicks.push(core);
        }
    }

    fn is_idle(&self, core: CoreId) -> bool {
        self.cores[core].current.is_none()
    }

    /// Kicks the first idle core after `from` that is not kicked yet; whether there was one.
    fn kick_an_idle_core(&mut self, from: CoreId) -> bool {
        let n = self.usable.len();
        let start = self.usable.iter().position(|&c| c == from).unwrap_or(0);
        for i in 1..=n {
            let c = self.usable[(start + i) % n];
            if self.is_idle(c) && !self.cores[c].kicked {
                self.kick(c);
                return true;
            }
        }
        false
    }

    /// Algorithm 3, continuously: SF × SR_unit per slot, for the time run since last charged.
    fn charge(&mut self, core: CoreId, now: Nanos) {
        let slot = self.slot_ns() as f64;
        let c = &mut self.cores[core];
        let Some(v) = c.current else { return };
        let dt = now.saturating_sub(c.exec_start) as f64;
        c.exec_start = now;
        self.vcpus[v].sr -= self.sf[core] * self.params.ia.sr_unit * dt / slot;
        let vm = self.vcpus[v].vm;
        if dt > 0.0 {
            self.ran_this_cycle[vm] = true;
            if self.class[core] == CoreClass::Fast {
                self.fast_this_cycle[vm] += dt;
            }
        }
    }

    /// Queue `v` on `core` in the queue its VM's width calls for: after the vCPUs with SR > 0
    /// if it has SR left, else at the end.
    fn enqueue(&mut self, core: CoreId, v: VcpuId) {
        let width = self.vm_vcpus[self.vcpus[v].vm].len();
        let q = slot(queue_for(self.class[core], width, self.n_fast, self.n_slow));
        let positive = self.balance(v) > 0.0;
        let queue = &self.cores[core].queues[q];
        let at = if positive {
            queue
                .iter()
                .position(|&w| self.balance(w) <= 0.0)
                .unwrap_or(queue.len())
        } else {
            queue.len()
        };
        self.cores[core].queues[q].insert(at, v);
        self.vcpus[v].core = core;
    }

    fn dequeue(&mut self, core: CoreId, v: VcpuId) -> bool {
        for q in &mut self.cores[core].queues {
            if let Some(i) = q.iter().position(|&w| w == v) {
                q.remove(i);
                return true;
            }
        }
        false
    }

    /// Does `core` hold (run or queue) a vCPU of `vm` other than `except`?
    fn holds_sibling(&self, core: CoreId, vm: usize, except: VcpuId) -> bool {
        let c = &self.cores[core];
        c.current
            .into_iter()
            .chain(c.queues.iter().flatten().copied())
            .any(|w| w != except && self.vcpus[w].vm == vm)
    }

    /// The first vCPU of `core`'s queues, in `order`, that `ok` accepts.
    fn find(
        &self,
        core: CoreId,
        order: [RunQueue; 3],
        ok: impl Fn(VcpuId) -> bool,
    ) -> Option<VcpuId> {
        order
            .iter()
            .flat_map(|&q| self.cores[core].queues[slot(q)].iter().copied())
            .find(|&v| ok(v))
    }

    /// Algorithm 4's choice for `core`: local, then same-class victims, then other-class ones,
    /// among the vCPUs that `pass` accepts.
    fn select(&mut self, core: CoreId, pass: Pass) -> Option<VcpuId> {
        let has_sr = |s: &Self, v: VcpuId| match pass {
            Pass::Fits => s.balance(v) > 0.0 && s.fits(core, v),
            Pass::HasSr => s.balance(v) > 0.0,
            Pass::Any => true,
        };
        if let Some(v) = self.find(core, LOCAL_ORDER, |v| has_sr(self, v)) {
            self.dequeue(core, v);
            return Some(v);
        }
        let n = self.usable.len();
        let start = self.usable.iter().position(|&c| c == core)?;
        let thief = self.class[core];
        for same_class in [true, false] {
            for i in 1..n {
                let victim = self.usable[(start + i) % n];
                if (self.class[victim] == thief) != same_class {
                    continue;
                }
                let order = steal_order(thief, self.class[victim]);
                let found = self.find(victim, order, |v| {
                    has_sr(self, v) && !self.holds_sibling(core, self.vcpus[v].vm, v)
                });
                if let Some(v) = found {
                    self.dequeue(victim, v);
                    return Some(v);
                }
            }
        }
        None
    }

    /// Whether `v` belongs to a co-scheduled VM and a sibling of it is running.
    fn in_running_gang(&self, v: VcpuId) -> bool {
        let vm = self.vcpus[v].vm;
        self.params.coschedule
            && self.parallel[vm]
            && (self.vm_vcpus[vm].iter()).any(|&s| s != v && self.vcpus[s].running)
    }

    /// Whether `core` may run a member of `vm`'s gang now: it serves no gang this slot, or it
    /// serves `vm`'s (a member that blocked at a barrier and woke comes back), and no other
    /// member is already on its way.
    fn free_for_gang(&self, core: CoreId, vm: usize, now: Nanos) -> bool {
        let c = &self.cores[core];
        (c.gang_until <= now || c.gang_vm == Some(vm)) && c.forced.is_none()
    }

    /// Whether sibling `s` may be forced into its VM's gang.
    fn may_join(&self, s: VcpuId) -> bool {
        !self.params.gang_needs_sr || self.balance(s) > 0.0
    }

    /// Algorithm 5: run the waiting siblings of `v` on their own cores now.
    fn gang(&mut self, v: VcpuId, now: Nanos) {
        let vm = self.vcpus[v].vm;
        if !self.params.coschedule || !self.parallel[vm] {
            return;
        }
        let until = now + self.slot_ns();
        let leader_core = self.vcpus[v].core;
        self.cores[leader_core].gang_until = until;
        self.cores[leader_core].gang_vm = Some(vm);
        for s in self.vm_vcpus[vm].clone() {
            if s == v {
                continue;
            }
            let c = self.vcpus[s].core;
            let waiting_there = self.queue_of(c, s).is_some();
            if waiting_there
                && c != leader_core
                && self.may_join(s)
                && self.free_for_gang(c, vm, now)
            {
                self.cores[c].forced = Some(s);
                self.cores[c].gang_until = until;
                self.cores[c].gang_vm = Some(vm);
                self.kick(c);
            }
        }
    }

    /// A waking `v` that cannot run on its own core (nor on an idle one) takes the core of a
    /// runner without SR (`core_to_displace`), if it has SR left and that core fits it
    /// (`fits_core`), holds none of its siblings and expects no other vCPU.
    fn displace(&mut self, now: Nanos, v: VcpuId) {
        let vm = self.vcpus[v].vm;
        let runners: Vec<Runner> = (self.usable.iter())
            .filter(|&&c| {
                self.cores[c].forced.is_none() && self.fits(c, v) && !self.holds_sibling(c, vm, v)
            })
            .filter_map(|&c| {
                let r = self.cores[c].current?;
                Some(Runner {
                    core: c,
                    balance: self.balance(r),
                    in_gang: self.in_running_gang(r),
                    parallel: self.params.coschedule && self.parallel[self.vcpus[r].vm],
                    other_class: self.class[c] != self.class[self.vcpus[v].core],
                })
            })
            .collect();
        let Some(c) = core_to_displace(self.balance(v), runners) else {
            return;
        };
        self.dequeue(self.vcpus[v].core, v);
        self.enqueue(c, v);
        self.cores[c].forced = Some(v);
        if self.params.coschedule && self.parallel[vm] {
            self.cores[c].gang_until = now + self.slot_ns();
            self.cores[c].gang_vm = Some(vm);
        }
        self.kick(c);
    }

    fn start(&mut self, core: CoreId, v: VcpuId, now: Nanos) -> Dispatch {
        self.vcpus[v].core = core;
        self.vcpus[v].running = true;
        let slot_end = now + self.slot_ns();
        let c = &mut self.cores[core];
        c.current = Some(v);
        c.exec_start = now;
        c.slot_end = slot_end;
        if self.cores[core].queues.iter().any(|q| !q.is_empty()) {
            self.kick_an_idle_core(core);
        }
        Dispatch {
            vcpu: Some(v),
            until: Some(slot_end),
        }
    }
}

impl Scheduler for Ia {
    fn name(&self) -> &'static str {
        "ia"
    }

    fn admit(&mut self, _now: Nanos, v: VcpuId) {
        let core = self.vcpus[v].core;
        self.enqueue(core, v);
        if self.is_idle(core) {
            self.kick(core);
        }
    }

    fn wake(&mut self, now: Nanos, v: VcpuId) {
        let core = self.vcpus[v].core;
        self.enqueue(core, v);
        if self.is_idle(core) {
            self.kick(core);
            return;
        }
        let vm = self.vcpus[v].vm;
        let gang_running = self.in_running_gang(v);
        if gang_running && self.may_join(v) && self.free_for_gang(core, vm, now) {
            let until = now + self.slot_ns();
            let c = &mut self.cores[core];
            c.forced = Some(v);
            if c.gang_vm != Some(vm) || c.gang_until <= now {
                c.gang_until = until;
                c.gang_vm = Some(vm);
            }
            self.kick(core);
        } else if !self.kick_an_idle_core(core) && (gang_running || !self.parallel[vm]) {
            self.displace(now, v);
        }
    }

    fn retire(&mut self, _now: Nanos, v: VcpuId) {
        let core = self.vcpus[v].core;
        self.dequeue(core, v);
        self.vcpus[v].finished = true;
    }

    fn schedule(&mut self, now: Nanos, core: CoreId, prev: Option<(VcpuId, Stop)>) -> Dispatch {
        self.cores[core].kicked = false;
        self.charge(core, now);
        let forced = self.cores[core]
            .forced
            .take()
            .filter(|&g| Some(g) != prev.map(|p| p.0) && self.queue_of(core, g).is_some());
        if let Some((v, stop)) = prev {
            match stop {
                Stop::Runnable => {
                    let slot_over = now >= self.cores[core].slot_end;
                    if forced.is_none()
                        && (!slot_over || (self.balance(v) > 0.0 && self.fits(core, v)))
                    {
                        if slot_over {
                            self.cores[core].slot_end = now + self.slot_ns();
                        }
                        return Dispatch {
                            vcpu: Some(v),
                            until: Some(self.cores[core].slot_end),
                        };
                    }
                    self.enqueue(core, v);
                }
                Stop::Blocked => {}
                Stop::Finished => self.vcpus[v].finished = true,
            }
            self.vcpus[v].running = false;
            self.cores[core].current = None;
        }
        if let Some(g) = forced {
            self.dequeue(core, g);
            return self.start(core, g, now);
        }
        let next = [Pass::Fits, Pass::HasSr, Pass::Any]
            .into_iter()
            .find_map(|pass| self.select(core, pass));
        let Some(v) = next else {
            return Dispatch::IDLE;
        };
        let d = self.start(core, v, now);
        self.gang(v, now);
        d
    }

    fn take_kicks(&mut self) -> Vec<CoreId> {
        std::mem::take(&mut self.kicks)
    }

    fn next_periodic(&self) -> Option<Nanos> {
        Some(self.next_cycle)
    }

    /// Algorithm 2: refill every vCPU's SR and reorder the queues.
    fn periodic(&mut self, now: Nanos) {
        for core in self.usable.clone() {
            self.charge(core, now);
        }
        let active: Vec<bool> = (self.shares_fast.iter().zip(&self.ran_this_cycle))
            .map(|(&shares, &ran)| shares && ran)
            .collect();
        settle_fast_shares(
            &mut self.fast_owed,
            &self.fast_this_cycle,
            &self.weight,
            &active,
        );
        self.fast_this_cycle.fill(0.0);
        self.ran_this_cycle.fill(false);
        for v in &mut self.vcpus {
            if !v.finished {
                v.sr = refill(v.sr, v.increment, &self.params.ia);
            }
        }
        for core in self.usable.clone() {
            for q in 0..3 {
                let mut queue = std::mem::take(&mut self.cores[core].queues[q]);
                reorder_by_sr(&mut queue, |&v| self.balance(v));
                self.cores[core].queues[q] = queue;
            }
        }
        self.next_cycle = now + self.slot_ns() * self.params.ia.slots_per_cycle.max(1) as Nanos;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::model::{Host, Vm, MS};

    /// The paper's testbed: 2 fast cores (SF 1.8) and 6 slow ones.
    fn testbed() -> Host {
        Host::with_speeds(&[1.8, 1.8, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    }

    fn serial_vm(vcpus: usize) -> Vm {
        Vm::new(
            "s",
            vcpus,
            Workload::Serial {
                work_ms: 1e3,
                mem_intensity: 0.0,
            },
        )
    }

    fn parallel_vm(vcpus: usize) -> Vm {
        Vm::new(
            "p",
            vcpus,
            Workload::Parallel {
                phases: 10,
                phase_ms: 5.0,
                spin_us: 100.0,
            },
        )
    }

    #[test]
    fn papers_vm_set_is_mapped_and_queued_by_width() {
        let vms = [serial_vm(2), serial_vm(2), serial_vm(6), serial_vm(8)];
        let topo = Topology::new(&testbed(), &vms);
        let mut s = Ia::new(&topo, IaSchedParams::default()).unwrap();
        for v in 0..topo.vcpus.len() {
            s.admit(0, v);
        }
        // VMs 0 and 1 on the fast cores, VM 2 on the slow ones, VM 3 on every core.
        assert_eq!((s.home(0), s.home(1), s.home(2), s.home(3)), (0, 1, 0, 1));
        assert_eq!(
            (4..10).map(|v| s.home(v)).collect::<Vec<_>>(),
            vec![2, 3, 4, 5, 6, 7]
        );
        let mut vm3: Vec<CoreId> = (10..18).map(|v| s.home(v)).collect();
        vm3.sort();
        assert_eq!(vm3, (0..8).collect::<Vec<_>>());
        // Queues: a 2-vCPU VM is at home on a fast core, a 6-vCPU VM on a slow one, and the
        // 8-vCPU VM is too wide everywhere.
        assert_eq!(s.queue_of(0, 0), Some(RunQueue::HomeClass));
        assert_eq!(s.queue_of(2, 4), Some(RunQueue::HomeClass));
        let v3_on_0 = (10..18).find(|&v| s.home(v) == 0).unwrap();
        assert_eq!(s.queue_of(0, v3_on_0), Some(RunQueue::TooWide));
        // First allocation: SR_total = 3 · 9.6 = 28.8, split 4 ways then by vCPUs.
        assert!((s.sr(0) - 3.6).abs() < 1e-12);
        assert!((s.sr(4) - 1.2).abs() < 1e-12);
        assert!((s.sr(10) - 0.9).abs() < 1e-12);
        // A VM wider than the host is refused.
        let topo = Topology::new(&testbed(), &[serial_vm(9)]);
        assert!(Ia::new(&topo, IaSchedParams::default()).is_err());
    }

    #[test]
    fn a_slot_on_a_fast_core_costs_sf_and_a_vcpu_owed_no_fast_time_yields_it() {
        // One fast core (SF 2) and one slow; three 1-vCPU VMs.
        let host = Host::with_speeds(&[2.0, 1.0]);
        let vms = [serial_vm(1), serial_vm(1), serial_vm(1)];
        let topo = Topology::new(&host, &vms);
        let mut s = Ia::new(&topo, IaSchedParams::default()).unwrap();
        // SR_total = 3 slots · ΣSF 3 = 9; each vCPU gets 3. Each vCPU's load is 1/3 · 3 = 1.
        // VM0 goes fast (empty host); VM1 too (gap 1/2 = 0.5, UF 0.2); VM2 slow (gap 1, UF 0.4).
        assert_eq!((s.home(0), s.home(1), s.home(2)), (0, 0, 1));
        for v in 0..3 {
            s.admit(0, v);
        }
        assert_eq!(s.schedule(0, 0, None).vcpu, Some(0));
        assert_eq!(s.schedule(0, 1, None).vcpu, Some(2));
        // One slot: vCPU 0 pays 2 (fast core), vCPU 2 pays 1. vCPU 0 has SR left but is owed
        // no fast-core time (nobody is yet), so it gives the fast core to vCPU 1 (SR 3); the
        // slow core keeps vCPU 2.
        assert_eq!(
            s.schedule(10 * MS, 0, Some((0, Stop::Runnable))).vcpu,
            Some(1)
        );
        assert_eq!(
            s.schedule(10 * MS, 1, Some((2, Stop::Runnable))).vcpu,
            Some(2)
        );
        assert!((s.sr(0) - 1.0).abs() < 1e-9 && (s.sr(2) - 2.0).abs() < 1e-9);
        // vCPU 1 pays 2 for its slot and hands back to vCPU 0 (SR 1).
        assert_eq!(
            s.schedule(20 * MS, 0, Some((1, Stop::Runnable))).vcpu,
            Some(0)
        );
        assert!((s.sr(1) - 1.0).abs() < 1e-9);
        // Half a slot then blocking costs half: vCPU 0 pays 1, down to 0.
        assert_eq!(
            s.schedule(25 * MS, 0, Some((0, Stop::Blocked))).vcpu,
            Some(1)
        );
        assert!(s.sr(0).abs() < 1e-9);
        // Cycle at 30 ms: vCPU 1 pays 1 for 25–30 ms, vCPU 2 3 for 0–30; then +3 each.
        s.periodic(30 * MS);
        assert!((s.sr(0) - 3.0).abs() < 1e-9);
        assert!((s.sr(1) - 3.0).abs() < 1e-9);
        assert!((s.sr(2) - 3.0).abs() < 1e-9);
        // Fast-core shares: 30 ms of fast time, 15 each to VMs 0 and 1, none to VM 2; a third
        // each is owed: −5, −5, +10 ms.
        let owed: Vec<f64> = s.fast_owed.iter().map(|&x| x / MS as f64).collect();
        assert!((owed[0] + 5.0).abs() < 1e-9 && (owed[1] + 5.0).abs() < 1e-9);
        assert!((owed[2] - 10.0).abs() < 1e-9);
        // VM 2's vCPU, owed fast time with SR left, now passes the first test of a fast core's
        // selection; VM 1's does not.
        assert!(s.fits(0, 2) && !s.fits(0, 1));
        // A slow core takes anyone with SR left.
        assert!(s.fits(1, 1));
    }

    #[test]
    fn a_parallel_vms_siblings_run_together() {
        // Two slow cores; a 2-vCPU parallel VM and two serial hogs. When core 0 picks the
        // parallel VM's vCPU, core 1 is made to run its sibling at the same time.
        let vms = [parallel_vm(2), serial_vm(1), serial_vm(1)];
        let topo = Topology::new(&Host::symmetric(2), &vms);
        let mut s = Ia::new(&topo, IaSchedParams::default()).unwrap();
        assert_eq!((s.home(0), s.home(1)), (0, 1));
        for v in 0..4 {
            s.admit(0, v);
        }
        s.take_kicks();
        // Put the hog that lives on core 1 ahead of vCPU 1 there, and let core 1 start it.
        let hog = if s.home(2) == 1 { 2 } else { 3 };
        s.dequeue(1, hog);
        s.cores[1].queues[0].insert(0, hog);
        assert_eq!(s.schedule(0, 1, None).vcpu, Some(hog));
        // Core 0 picks vCPU 0 (the head of its queue): core 1 is kicked to run vCPU 1.
        assert_eq!(s.schedule(0, 0, None).vcpu, Some(0));
        assert_eq!(s.take_kicks(), vec![1]);
        assert_eq!(s.schedule(0, 1, Some((hog, Stop::Runnable))).vcpu, Some(1));
        // Without co-scheduling core 1 keeps its hog.
        let mut s = Ia::new(
            &topo,
            IaSchedParams {
                coschedule: false,
                ..IaSchedParams::default()
            },
        )
        .unwrap();
        for v in 0..4 {
            s.admit(0, v);
        }
        s.take_kicks();
        s.dequeue(1, hog);
        s.cores[1].queues[0].insert(0, hog);
        s.schedule(0, 1, None);
        s.schedule(0, 0, None);
        assert!(s.take_kicks().is_empty());
    }

    #[test]
    fn a_gang_member_that_blocked_and_woke_gets_its_gang_slot_back() {
        // Two slow cores; a 2-vCPU parallel VM and two serial hogs. The gang starts at 0 for a
        // 10 ms slot; at 1 ms vCPU 1 reaches a barrier and blocks, and its core runs a hog; at
        // 2 ms the barrier is released while vCPU 0 still runs. The slot belongs to the gang:
        // vCPU 1 preempts the hog at once instead of waiting for the hog's slot to end.
        let vms = [parallel_vm(2), serial_vm(1), serial_vm(1)];
        let topo = Topology::new(&Host::symmetric(2), &vms);
        let mut s = Ia::new(&topo, IaSchedParams::default()).unwrap();
        for v in 0..4 {
            s.admit(0, v);
        }
        s.take_kicks();
        assert_eq!(s.schedule(0, 0, None).vcpu, Some(0));
        assert_eq!(s.schedule(0, 1, None).vcpu, Some(1));
        let hog = if s.home(2) == 1 { 2 } else { 3 };
        assert_eq!(s.schedule(MS, 1, Some((1, Stop::Blocked))).vcpu, Some(hog));
        s.take_kicks();
        s.wake(2 * MS, 1);
        assert_eq!(s.take_kicks(), vec![1]);
        assert_eq!(
            s.schedule(2 * MS, 1, Some((hog, Stop::Runnable))).vcpu,
            Some(1)
        );
        // Once the slot is over, a core that served the gang is free again: the hog, woken
        // alone, does not preempt (no BOOST), and a gang of another VM may take the core.
        assert!(s.free_for_gang(1, 1, 10 * MS));
        assert!(!s.free_for_gang(1, 1, 5 * MS));
        assert!(s.free_for_gang(1, 0, 5 * MS));
    }
}
