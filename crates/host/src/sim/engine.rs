//! The event loop. Each core has at most one pending event (a generation number invalidates
//! the older ones): the earlier of the scheduler's timer for that core and the moment its vCPU's
//! current activity ends (its work unit completes, or its spin budget runs out). Every event
//! and every kick goes through `resched`: bring the core's vCPU up to date, apply what its
//! program does next (barrier arrival, release, blocking), then ask the scheduler what to run.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use colosched_core::rng::{lognormal, mix, Rng};

use super::model::{
    Completion, CoreId, Host, Nanos, RunConfig, RunInterval, SimResult, Topology, VcpuId,
    VcpuStats, Vm, Workload,
};
use super::net::NetSim;
use super::sched::{Dispatch, Scheduler, Stop, VmObservation, SAMPLE_PERIOD};

/// Work (speed-1 ns) below which a unit counts as finished (absorbs float rounding).
const EPS_WORK: f64 = 1e-6;

/// What a vCPU's thread is doing.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Activity {
    Compute { left: f64 },
    Spin { left: Nanos },
    Blocked,
    Done,
}

impl Activity {
    fn runnable(self) -> bool {
        matches!(self, Activity::Compute { .. } | Activity::Spin { .. })
    }
}

struct VcpuSim {
    vm: usize,
    activity: Activity,
    on_core: Option<CoreId>,
    last_core: Option<CoreId>,
    /// When the current serial program started.
    started: Nanos,
    stats: VcpuStats,
    /// Its own stream of work draws (`Vm::work_cv`).
    rng: Rng,
    /// Its current work is only its rings' packets (a network vCPU woken by their interrupt),
    /// not a program: it grows to the ring's backlog, and its end is no completion.
    packets: bool,
}

struct VmSim {
    vcpus: Vec<VcpuId>,
    /// Parallel programs: the phase being computed, and how many threads reached its barrier.
    phase: u32,
    arrived: usize,
    started: Nanos,
    done: bool,
    net: Option<NetSim>,
    /// Its vCPUs on a core now; since when at least one has been (and that core's speed).
    running: usize,
    serve_since: Nanos,
    serve_speed: f64,
    /// CPU work (speed-1 ns) its rings could use since the last network quantum.
    service: f64,
    /// Work given to a vCPU woken for the packets waiting in its ring, not yet matched by
    /// drained packets: running it is what drains them, so their cost is not charged again.
    prepaid: f64,
}

struct CoreSim {
    speed: f64,
    running: Option<VcpuId>,
    /// Progress of `running` is accounted up to here.
    since: Nanos,
    interval_start: Nanos,
    generation: u64,
    busy: Nanos,
}

impl VmSim {
    /// Whether `v`'s running drains the rings (`running` counts only these).
    fn serves(&self, v: VcpuId) -> bool {
        match &self.net {
            Some(n) if !n.spec.any_vcpu => self.vcpus.first() == Some(&v),
            _ => true,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// The scheduler's host-wide periodic work (ordered first at equal times).
    Periodic,
    /// A network quantum (and every `SAMPLE_PERIOD` the monitor's readings).
    Net,
    Core {
        core: CoreId,
        generation: u64,
    },
}

struct Engine<'a> {
    topo: Topology,
    host: &'a Host,
    sched: &'a mut dyn Scheduler,
    cfg: RunConfig,
    vcpus: Vec<VcpuSim>,
    vms: Vec<VmSim>,
    cores: Vec<CoreSim>,
    heap: BinaryHeap<Reverse<(Nanos, u64, Event)>>,
    seq: u64,
    /// Cores whose running vCPU changed activity outside their own event (a spinning thread
    /// released by a sibling): they must recompute their next event.
    dirty: Vec<CoreId>,
    completions: Vec<Completion>,
    intervals: Vec<RunInterval>,
    work_assigned: f64,
}

/// Run `vms` on `host` under `scheduler` (built for `Topology::new(host, vms)`) until every
/// program has completed or `cfg.horizon`.
pub fn simulate(
    host: &Host,
    vms: &[Vm],
    scheduler: &mut dyn Scheduler,
    cfg: &RunConfig,
) -> SimResult {
    let topo = Topology::new(host, vms);
    let engine = Engine {
        vcpus: (topo.vcpus.iter().enumerate())
            .map(|(v, vcpu)| VcpuSim {
                vm: vcpu.vm,
                activity: Activity::Blocked,
                on_core: None,
                last_core: None,
                started: 0,
                stats: VcpuStats::default(),
                rng: Rng::new(mix(mix(cfg.seed) ^ v as u64)),
                packets: false,
            })
            .collect(),
        vms: (0..vms.len())
            .map(|vm| VmSim {
                vcpus: topo.vcpus_of(vm),
                phase: 0,
                arrived: 0,
                started: 0,
                done: false,
                net: match &vms[vm].workload {
                    Workload::Network(n) => {
                        let mut net = NetSim::new(n.clone(), mix(mix(cfg.seed) ^ !(vm as u64)));
                        net.quantum = cfg.net_quantum;
                        Some(net)
                    }
                    _ => None,
                },
                running: 0,
                serve_since: 0,
                serve_speed: 1.0,
                service: 0.0,
                prepaid: 0.0,
            })
            .collect(),
        cores: host
            .cores
            .iter()
            .map(|c| CoreSim {
                speed: c.speed,
                running: None,
                since: 0,
                interval_start: 0,
                generation: 0,
                busy: 0,
            })
            .collect(),
        topo,
        host,
        sched: scheduler,
        cfg: *cfg,
        heap: BinaryHeap::new(),
        seq: 0,
        dirty: Vec::new(),
        completions: Vec::new(),
        intervals: Vec::new(),
        work_assigned: 0.0,
    };
    engine.run()
}

impl Engine<'_> {
    fn run(mut self) -> SimResult {
        let mut order: Vec<usize> = (0..self.vcpus.len()).collect();
        if self.cfg.shuffle_start {
            let mut rng = Rng::new(mix(self.cfg.seed) ^ u64::MAX);
            for i in (1..order.len()).rev() {
                order.swap(i, rng.below(i + 1));
            }
        }
        for v in order {
            let work = self.unit_work(v);
            self.vcpus[v].activity = Activity::Compute { left: work };
            // A network VM without CPU work starts by taking packets.
            self.vcpus[v].packets = matches!(
                &self.topo.vms[self.vcpus[v].vm].workload,
                Workload::Network(n) if n.cpu_work_ms.is_none()
            );
            self.work_assigned += work;
            self.sched.admit(0, v);
        }
        self.drain(0);
        if let Some(t) = self.sched.next_periodic() {
            self.push(t, Event::Periodic);
        }
        if self.sched.observes() || self.vms.iter().any(|vm| vm.net.is_some()) {
            self.push(self.cfg.net_quantum, Event::Net);
        }
        let mut now = 0;
        let mut events = 0u64;
        while let Some(Reverse((t, _, event))) = self.heap.pop() {
            if t > self.cfg.horizon || self.all_done() {
                break;
            }
            now = t;
            events += 1;
            match event {
                Event::Periodic => {
                    self.sched.periodic(t);
                    if let Some(next) = self.sched.next_periodic() {
                        self.push(next.max(t.saturating_add(1)), Event::Periodic);
                    }
                }
                Event::Net => {
                    self.net_tick(t);
                    self.push(t.saturating_add(self.cfg.net_quantum), Event::Net);
                }
                Event::Core { core, generation } => {
                    if generation == self.cores[core].generation {
                        self.resched(core, t);
                    }
                }
            }
            self.drain(t);
        }
        let end = if self.all_done() {
            now
        } else {
            self.cfg.horizon
        };
        for core in 0..self.cores.len() {
            self.progress(core, end);
            if let Some(v) = self.cores[core].running {
                self.close_interval(core, v, end);
            }
        }
        let work_left = self
            .vcpus
            .iter()
            .map(|v| match v.activity {
                Activity::Compute { left } => left,
                _ => 0.0,
            })
            .sum();
        SimResult {
            scheduler: self.sched.name(),
            end,
            completions: self.completions,
            vcpus: self.vcpus.iter().map(|v| v.stats).collect(),
            core_busy_ns: self.cores.iter().map(|c| c.busy).collect(),
            work_assigned: self.work_assigned,
            work_left,
            intervals: self.intervals,
            events,
            net: self
                .vms
                .iter()
                .map(|vm| vm.net.as_ref().map(|n| n.stats.clone()))
                .collect(),
        }
    }

    fn all_done(&self) -> bool {
        self.vms.iter().all(|vm| vm.done)
    }

    fn push(&mut self, t: Nanos, event: Event) {
        self.seq += 1;
        self.heap.push(Reverse((t, self.seq, event)));
    }

    /// The work of vCPU `v`'s next unit: a serial run or its share of a parallel phase, drawn
    /// around the configured mean when its VM has a `work_cv`.
    fn unit_work(&mut self, v: VcpuId) -> f64 {
        work_of(&self.topo.vms[self.vcpus[v].vm], &mut self.vcpus[v].rng)
    }

    /// vCPU `v`'s program starts again at `now` (a VM with `repeat`): a new unit of work.
    fn restart(&mut self, v: VcpuId, now: Nanos) {
        let work = self.unit_work(v);
        self.vcpus[v].activity = Activity::Compute { left: work };
        self.vcpus[v].started = now;
        self.vcpus[v].packets = false;
        self.work_assigned += work;
    }

    /// One network quantum ending at `now`: every VM's flow moves on with the CPU time its
    /// vCPUs had; the drained packets' cost becomes work of one of its vCPUs (one that runs, else
    /// one that waits, else a blocked one, woken as by an interrupt). Every `SAMPLE_PERIOD`
    /// the monitor reads every VM for the scheduler.
    fn net_tick(&mut self, now: Nanos) {
        for vm in 0..self.vms.len() {
            let state = &mut self.vms[vm];
            if state.running > 0 {
                state.service += (now - state.serve_since) as f64 * state.serve_speed;
                state.serve_since = now;
            }
            let service = std::mem::take(&mut state.service);
            let Some(net) = state.net.as_mut() else {
                continue;
            };
            let drained = net.tick(now, service);
            let cost = drained as f64 * net.cost_per_packet();
            let covered = cost.min(state.prepaid);
            state.prepaid -= covered;
            let charge = cost - covered;
            let backlog = net.rx_len() as f64 * net.cost_per_packet();
            if charge > 0.0 || backlog > 0.0 {
                self.charge(vm, now, charge, backlog);
            }
        }
        if now.is_multiple_of(SAMPLE_PERIOD) && self.sched.observes() {
            let readings: Vec<VmObservation> = (0..self.vms.len())
                .map(|vm| VmObservation {
                    ring: self.vms[vm]
                        .net
                        .as_mut()
                        .map(|n| n.sample())
                        .unwrap_or_default(),
                    runnable_vcpus: (self.vms[vm].vcpus.iter())
                        .filter(|&&v| self.vcpus[v].activity.runnable())
                        .count(),
                })
                .collect();
            self.sched.observe(now, &readings);
        }
    }

    /// Add `charge` work to a vCPU of `vm`; with packets waiting (`backlog`: their cost) and no
    /// vCPU runnable, wake one (the ring's interrupt) to take them all. A vCPU that runs only
    /// for the rings keeps at least the backlog's work, whatever the quantum, so the ring drains
    /// as fast as packets come (NAPI polls until the ring is empty). That backlog work is
    /// prepaid: running it is what drains the packets, so their cost is not charged again.
    fn charge(&mut self, vm: usize, now: Nanos, charge: f64, backlog: f64) {
        let state = &self.vms[vm];
        let vcpus: Vec<VcpuId> = (state.vcpus.iter())
            .copied()
            .filter(|&v| state.serves(v))
            .collect();
        let target = (vcpus.iter().find(|&&v| self.vcpus[v].on_core.is_some()))
            .or_else(|| {
                vcpus
                    .iter()
                    .find(|&&v| matches!(self.vcpus[v].activity, Activity::Compute { .. }))
            })
            .copied();
        match target {
            Some(v) => {
                if let Some(core) = self.vcpus[v].on_core {
                    self.progress(core, now);
                    self.dirty.push(core);
                }
                let more = if self.vcpus[v].packets {
                    self.prepay(vm, backlog)
                } else {
                    0.0
                };
                if let Activity::Compute { left } = &mut self.vcpus[v].activity {
                    *left += charge + more;
                    self.work_assigned += charge + more;
                }
            }
            None => {
                let Some(&v) = vcpus
                    .iter()
                    .find(|&&v| self.vcpus[v].activity == Activity::Blocked)
                else {
                    return;
                };
                let work = (charge + self.prepay(vm, backlog)).max(1.0);
                self.vcpus[v].activity = Activity::Compute { left: work };
                self.vcpus[v].packets = true;
                self.work_assigned += work;
                self.sched.wake(now, v);
            }
        }
    }

    /// The work to give for the ring's packets (`backlog`: their cost) that no prepaid work
    /// covers yet, now prepaid too.
    fn prepay(&mut self, vm: usize, backlog: f64) -> f64 {
        let prepaid = &mut self.vms[vm].prepaid;
        *prepaid = prepaid.min(backlog);
        let more = backlog - *prepaid;
        *prepaid = backlog;
        more
    }

    /// Let every core the scheduler (or a barrier release) asked for decide now.
    fn drain(&mut self, now: Nanos) {
        for _ in 0..1_000_000 {
            let mut cores = self.sched.take_kicks();
            cores.append(&mut self.dirty);
            if cores.is_empty() {
                return;
            }
            for core in cores {
                self.resched(core, now);
            }
        }
        panic!("{}: kicks did not settle at t={now}", self.sched.name());
    }

    /// Account the running vCPU's progress on `core` up to `now` (no state transitions).
    fn progress(&mut self, core: CoreId, now: Nanos) {
        let c = &mut self.cores[core];
        let dt = now.saturating_sub(c.since);
        c.since = now;
        let Some(v) = c.running else { return };
        c.busy += dt;
        let speed = c.speed;
        let vcpu = &mut self.vcpus[v];
        match &mut vcpu.activity {
            Activity::Compute { left } => {
                let work = (dt as f64 * speed).min(*left);
                *left -= work;
                vcpu.stats.work_done += work;
                vcpu.stats.compute_ns += dt;
            }
            Activity::Spin { left } => {
                *left = left.saturating_sub(dt);
                vcpu.stats.spin_ns += dt;
            }
            // Only for an instant: its core is about to be rescheduled.
            Activity::Blocked | Activity::Done => debug_assert_eq!(dt, 0),
        }
    }

    /// Apply what a running vCPU's program does when its activity has ended.
    fn settle(&mut self, v: VcpuId, now: Nanos) {
        match self.vcpus[v].activity {
            Activity::Compute { left } if left <= EPS_WORK => {
                self.vcpus[v].stats.work_done += left;
                self.unit_done(v, now);
            }
            Activity::Spin { left: 0 } => self.vcpus[v].activity = Activity::Blocked,
            _ => {}
        }
    }

    fn unit_done(&mut self, v: VcpuId, now: Nanos) {
        let vm = self.vcpus[v].vm;
        let spec = &self.topo.vms[vm];
        match spec.workload {
            Workload::Serial { .. } => {
                self.completions.push(Completion {
                    vm,
                    vcpu: Some(v),
                    started: self.vcpus[v].started,
                    finished: now,
                });
                if spec.repeat {
                    self.restart(v, now);
                } else {
                    self.vcpus[v].activity = Activity::Done;
                    if self.vms[vm]
                        .vcpus
                        .iter()
                        .all(|&t| self.vcpus[t].activity == Activity::Done)
                    {
                        self.vms[vm].done = true;
                    }
                }
            }
            Workload::Network(ref n) => {
                let program = n.cpu_work_ms.is_some() && !self.vcpus[v].packets;
                if program {
                    self.completions.push(Completion {
                        vm,
                        vcpu: Some(v),
                        started: self.vcpus[v].started,
                        finished: now,
                    });
                }
                if program && spec.repeat {
                    self.restart(v, now);
                } else {
                    // Nothing to do until packets arrive.
                    self.vcpus[v].activity = Activity::Blocked;
                    self.vcpus[v].started = now;
                }
            }
            Workload::Parallel { spin_us, .. } => {
                self.vms[vm].arrived += 1;
                if self.vms[vm].arrived == self.vms[vm].vcpus.len() {
                    self.release(vm, now);
                } else {
                    let spin = (spin_us * 1e3).round() as Nanos;
                    self.vcpus[v].activity = if spin > 0 {
                        Activity::Spin { left: spin }
                    } else {
                        Activity::Blocked
                    };
                }
            }
        }
    }

    /// The last thread reached the barrier: every thread goes on to the next phase (or the
    /// program completes). Blocked threads are woken; spinning ones stop spinning.
    fn release(&mut self, vm: usize, now: Nanos) {
        let Workload::Parallel { phases, .. } = self.topo.vms[vm].workload else {
            unreachable!()
        };
        let state = &mut self.vms[vm];
        state.arrived = 0;
        state.phase += 1;
        if state.phase == phases {
            self.completions.push(Completion {
                vm,
                vcpu: None,
                started: state.started,
                finished: now,
            });
            if self.topo.vms[vm].repeat {
                state.phase = 0;
                state.started = now;
            } else {
                state.done = true;
            }
        }
        let done = state.done;
        for t in self.vms[vm].vcpus.clone() {
            let was = self.vcpus[t].activity;
            if let Some(core) = self.vcpus[t].on_core {
                // Account its spinning so far before its activity changes.
                self.progress(core, now);
                self.dirty.push(core);
            }
            if done {
                self.vcpus[t].activity = Activity::Done;
                if was.runnable() && self.vcpus[t].on_core.is_none() {
                    self.sched.retire(now, t);
                }
                continue;
            }
            let work = self.unit_work(t);
            self.vcpus[t].activity = Activity::Compute { left: work };
            self.work_assigned += work;
            if was == Activity::Blocked {
                self.sched.wake(now, t);
            }
        }
    }

    fn resched(&mut self, core: CoreId, now: Nanos) {
        self.progress(core, now);
        let prev = self.cores[core].running;
        if let Some(v) = prev {
            self.settle(v, now);
        }
        let prev = prev.map(|v| {
            let stop = match self.vcpus[v].activity {
                Activity::Compute { .. } | Activity::Spin { .. } => Stop::Runnable,
                Activity::Blocked => Stop::Blocked,
                Activity::Done => Stop::Finished,
            };
            if stop == Stop::Blocked {
                self.vcpus[v].stats.blocks += 1;
            }
            (v, stop)
        });
        let dispatch = self.sched.schedule(now, core, prev);
        self.apply(core, now, dispatch);
    }

    fn apply(&mut self, core: CoreId, now: Nanos, d: Dispatch) {
        let name = self.sched.name();
        if let Some(v) = d.vcpu {
            assert!(
                self.vcpus[v].activity.runnable(),
                "{name}: core {core} was given vCPU {v}, which is not runnable"
            );
            assert!(
                self.vcpus[v].on_core.is_none() || self.vcpus[v].on_core == Some(core),
                "{name}: vCPU {v} given to core {core} while running on core {:?}",
                self.vcpus[v].on_core
            );
            assert!(
                !self.host.cores[core].reserved,
                "{name}: vCPU {v} given to reserved core {core}"
            );
        }
        let prev = self.cores[core].running;
        if prev != d.vcpu {
            if let Some(p) = prev {
                self.close_interval(core, p, now);
                self.vcpus[p].on_core = None;
                let vm = &mut self.vms[self.vcpus[p].vm];
                if !vm.serves(p) {
                    // Not a vCPU that takes the rings' interrupts.
                } else {
                    vm.running -= 1;
                    if vm.running == 0 {
                        vm.service += (now - vm.serve_since) as f64 * vm.serve_speed;
                    }
                }
            }
            if let Some(v) = d.vcpu {
                self.start_on(core, v, now);
                let speed = self.cores[core].speed;
                let vm = &mut self.vms[self.vcpus[v].vm];
                if vm.serves(v) {
                    vm.running += 1;
                    if vm.running == 1 {
                        vm.serve_since = now;
                        vm.serve_speed = speed;
                    }
                }
            }
            self.cores[core].running = d.vcpu;
            self.cores[core].since = now;
        }
        let c = &mut self.cores[core];
        c.generation += 1;
        let boundary = d.vcpu.map(|v| match self.vcpus[v].activity {
            // Saturating: a unit too long for the clock ends at its end, never in the past.
            Activity::Compute { left } => {
                now.saturating_add(((left / c.speed).ceil() as Nanos).max(1))
            }
            Activity::Spin { left } => now.saturating_add(left.max(1)),
            Activity::Blocked | Activity::Done => unreachable!(),
        });
        let until = d.until.map(|t| t.max(now.saturating_add(1)));
        let next = match (boundary, until) {
            (Some(b), Some(u)) => Some(b.min(u)),
            (b, u) => b.or(u),
        };
        let generation = c.generation;
        if let Some(t) = next {
            self.push(t, Event::Core { core, generation });
        }
    }

    fn start_on(&mut self, core: CoreId, v: VcpuId, now: Nanos) {
        self.cores[core].interval_start = now;
        let vcpu = &mut self.vcpus[v];
        vcpu.on_core = Some(core);
        if vcpu.last_core.is_some_and(|c| c != core) {
            vcpu.stats.migrations += 1;
            if let (Workload::Serial { mem_intensity, .. }, Activity::Compute { left }) =
                (&self.topo.vms[vcpu.vm].workload, &mut vcpu.activity)
            {
                let warmup = mem_intensity * self.host.migration_warmup_ms * 1e6;
                *left += warmup;
                vcpu.stats.warmup_work += warmup;
                self.work_assigned += warmup;
            }
        }
        vcpu.last_core = Some(core);
    }

    fn close_interval(&mut self, core: CoreId, v: VcpuId, now: Nanos) {
        let start = self.cores[core].interval_start;
        if self.cfg.record_intervals && now > start {
            self.intervals.push(RunInterval {
                core,
                vcpu: v,
                start,
                end: now,
            });
        }
    }
}

/// The work (speed-1 ns) of one unit of `vm`'s program, drawn around its mean with `rng` when
/// the VM has a `work_cv`: a serial run or one thread's share of a parallel phase.
fn work_of(vm: &Vm, rng: &mut Rng) -> f64 {
    let mean = match vm.workload {
        Workload::Serial { work_ms, .. } => work_ms * 1e6,
        Workload::Parallel { phase_ms, .. } => phase_ms * 1e6,
        Workload::Network(ref n) => match n.cpu_work_ms {
            Some(work_ms) => work_ms * 1e6,
            // No CPU work: a vCPU runs only to take packets (at least one packet's cost).
            None => return (n.cpu_us_per_packet * 1e3).max(1.0),
        },
    };
    // At least 1 ns of work: a unit always ends after the instant it starts, so no chain of
    // empty units (barrier after barrier) can run at one instant.
    (mean * lognormal(vm.work_cv, || (1.0 - rng.next_f64(), rng.next_f64()))).max(1.0)
}
