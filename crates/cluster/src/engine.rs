//! The replay loop. Per step `t`: place the runs submitted up to `t`; if this is a migration
//! cycle, plan and apply moves cell by cell; then record the step's statistics, give every running
//! task its step of service, end the finished ones, refresh usage for the next step's window and
//! start waiting runs that now fit. State is per live task only: nothing grows with trace length
//! except the optional per-step series.
//!
//! A step costs what happens in it, not one visit per running task: a machine whose tasks
//! neither start, leave, arrive, finish, lose service to overload nor enter a new usage window
//! is skipped (`end_of_step`), and the service it owes its tasks is taken at its next visit
//! (`Machine::lag`), bit for bit as step-by-step subtraction gives; the planner's view of a
//! machine's migratable tasks is kept until they change (`Machine::view`). At a new usage window,
//! when every machine is visited, the machines are split over the threads of the rayon pool the
//! replay runs in (`Visit`), with the same results. `simulate_eagerly` visits every machine every
//! step, the plain loop the tests compare with.

use std::collections::VecDeque;
use std::time::Instant;

use rayon::prelude::*;

use colosched_core::{metrics::gini_sorted, Cell, Move, Node, Planner, Rng, Task};
use colosched_trace::usage::{CpuLevels, TaskLevels, UsageOrigin, UsageSource};
use colosched_trace::{Run, Usage, END_NONE, NO_MACHINE, WINDOW_S};

use crate::{
    Admission, Config, DurationOver, Outcome, Penalty, Placement, Queue, Selection, Series,
    Summary, Until, UsageGaps, DRAIN_LIMIT_S,
};

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("policy {policy}: {msg}")]
    Planner { policy: String, msg: String },
    #[error("interrupted")]
    Interrupted,
}

/// A run running on a machine, in two parts at the same index of its machine's vectors: `Live`,
/// what a visit reads (64 bytes: at a new usage window every running task is visited, and the
/// step streams these through the cache), and `Rest`, read when it starts, ends, moves, loses
/// service to overload or a planner looks at it. Tasks live inside their machine's vectors, so
/// the per-step loop walks memory in order; each carries a copy of its `Run`, so the loop never
/// reads the (possibly gigabyte-sized) runs table either.
#[derive(Clone, Copy, Debug)]
struct Live {
    /// Unique for the whole replay: the id planners see.
    id: u32,
    /// The usage window `cpu` is for.
    window: u32,
    /// Seconds of service still needed (infinite for runs the trace never ends).
    remaining: f64,
    /// Admission load (see `Admission`), counted in its machine's `admitted` while running.
    admission: f64,
    /// Its mean CPU usage in `window`.
    cpu: f32,
    priority: u8,
    /// `Rest::usage` is its whole usage in `window` (see `detail`).
    detailed: bool,
    /// Its CPU levels in the usage model (`Rest::levels`'s CPU part), once drawn.
    levels: Option<CpuLevels>,
}

/// The rest of a running task (see `Live`).
#[derive(Clone, Copy, Debug)]
struct Rest {
    run: Run,
    /// Seconds of service lost to overloaded steps so far (the thesis's QoS penalty).
    penalty: f64,
    /// When it started running.
    started: u32,
    /// Its usage in `Live::window` when `Live::detailed` (its `cpu` is `Live::cpu`).
    usage: Usage,
    /// Its levels in the usage model, once the model gave it a window's usage.
    levels: Option<TaskLevels>,
    /// Bandwidth mode: the step time at which its copy to `dest` is complete.
    arrives: Option<(u32, u32)>,
}

impl Rest {
    /// Its trace service time, `end − schedule` (infinite for runs the trace never ends).
    fn service(&self) -> f64 {
        if self.run.end_kind == END_NONE {
            f64::INFINITY
        } else {
            f64::from(self.run.end.saturating_sub(self.run.schedule))
        }
    }

    /// The thesis's `duration`: waiting, then service, then what overload added.
    fn duration(&self) -> f64 {
        f64::from(self.started - self.run.submit) + self.service() + self.penalty
    }
}

/// A run placed on a machine and waiting to start there: 8 bytes, for a full-scale replay's
/// queues hold millions (its task is made when it starts, with the same usage at that time).
#[derive(Clone, Copy, Debug)]
struct Waiting {
    /// The id its `Live` will have.
    id: u32,
    /// Its index in the replay's runs (`Selection::runs`).
    run: u32,
}

#[derive(Default)]
struct Machine {
    /// Its running tasks: `running[i]` and `rest[i]` are one task.
    running: Vec<Live>,
    rest: Vec<Rest>,
    pending: VecDeque<Waiting>,
    /// Sum of the admission loads of the running tasks.
    admitted: f64,
    /// Sum of the running tasks' current mean CPU usage (`Live::cpu`).
    load: f64,
    /// When this machine's migration link is free again (bandwidth mode).
    link_free: f64,
    /// Steps it was skipped since its last visit, whose service its tasks' `remaining` still
    /// owes (`catch_up`).
    lag: u32,
    /// The first step at which one of its tasks may end (0: visit at the next step).
    due: u64,
    /// A task started, left or arrived since its last visit: `admitted` and `load` were changed
    /// by addition, and the next visit sums them again in `running`'s order.
    changed: bool,
    /// The planner's view of its migratable tasks, in `running`'s order, while `view_ok`.
    view: Vec<Task>,
    view_ok: bool,
}

impl Machine {
    fn position(&self, id: u32) -> Option<usize> {
        self.running.iter().position(|t| t.id == id)
    }

    fn push(&mut self, (live, rest): (Live, Rest)) {
        self.running.push(live);
        self.rest.push(rest);
    }

    fn swap_remove(&mut self, i: usize) -> (Live, Rest) {
        (self.running.swap_remove(i), self.rest.swap_remove(i))
    }

    /// Takes the service of the steps it was skipped from each running task.
    fn catch_up(&mut self, step: f64) {
        if self.lag > 0 {
            for task in &mut self.running {
                task.remaining = after_steps(task.remaining, self.lag, step);
            }
            self.lag = 0;
        }
    }

    /// Its set of running tasks is about to change (a start, a departure, an arrival).
    fn touch(&mut self, step: f64) {
        self.catch_up(step);
        self.changed = true;
        self.view_ok = false;
    }
}

/// Asks the CPU to start loading `items` into its cache: the step loop visits machines in
/// order, and each machine's tasks are one allocation it cannot predict.
#[inline(always)]
fn prefetch<T>(items: &[T]) {
    #[cfg(target_arch = "x86_64")]
    for line in (0..std::mem::size_of_val(items)).step_by(64) {
        let at = items.as_ptr().cast::<i8>().wrapping_add(line);
        // SAFETY: a prefetch is only a hint; it never faults, whatever the address.
        unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(at) };
    }
}

/// `remaining` less `n` steps of `step` seconds, bit for bit what `n` subtractions give. Every
/// value on the way is exact: a step and the times are whole seconds below 2^32, `remaining`
/// (> 0 until its task's last step, see `steps_left`) is below 2^53 so its spacing divides 1, and
/// a multiple of that spacing between 0 and `remaining` is a float. Only the last subtraction
/// may round (a result below 0), and it rounds the same real number either way.
fn after_steps(remaining: f64, n: u32, step: f64) -> f64 {
    remaining - f64::from(n) * step
}

/// In how many steps a task with `remaining` (> 0) seconds left may end: ⌈remaining / step⌉,
/// which the rounded division can only make earlier (a visit early costs only time).
fn steps_left(remaining: f64, step: f64) -> u64 {
    if remaining.is_finite() {
        ((remaining / step).ceil() as u64).max(1)
    } else {
        u64::MAX
    }
}

struct Sim<'a> {
    cfg: &'a Config,
    /// Visit every machine every step (`simulate_eagerly`).
    eager: bool,
    usage: &'a UsageSource,
    /// The selection's runs, which `Waiting::run` indexes.
    runs: &'a [Run],
    machines: Vec<Machine>,
    /// Bandwidth mode: (task id, source machine) of copies under way.
    in_flight: Vec<(u32, u32)>,
    /// Which nodes of the cell being planned hold their machine's view (`fill_cell`).
    lent: Vec<bool>,
    next_id: u32,
    /// The cell the next run goes to (`Placement::Cells`).
    next_cell: usize,
    sum: Summary,
    series: Series,
    mem_bytes: f64,
    migrated_bytes: f64,
    duration_total: f64,
}

/// Refreshes a task's CPU usage for the window holding `t`, and its admission load if that
/// follows the usage. The model gives the CPU alone (without detail): the loop needs no more of
/// most tasks, and from its kept `CpuLevels` it reads no `Rest`.
fn refresh(live: &mut Live, rest: &mut Rest, usage: &UsageSource, cfg: &Config, t: u32) {
    let window = t / WINDOW_S;
    if live.window != window {
        live.window = window;
        match live.levels.and_then(|l| usage.model_cpu(&l, window)) {
            Some(cpu) => {
                live.cpu = cpu;
                live.detailed = false;
            }
            None => look_up(live, rest, usage, cfg, false),
        }
        if cfg.admission == Admission::Usage {
            live.admission = admission_load(cfg, &rest.run, live.cpu);
        }
    }
}

/// Gives a task its whole usage in its window (`max_cpu`, `mem`, `mai` too), for a planner's view.
fn detail(live: &mut Live, rest: &mut Rest, usage: &UsageSource, cfg: &Config) {
    if !live.detailed {
        look_up(live, rest, usage, cfg, true);
    }
}

fn look_up(live: &mut Live, rest: &mut Rest, usage: &UsageSource, cfg: &Config, detail: bool) {
    let run = &rest.run;
    let (found, origin) = usage.lookup_kept(run, live.window, &mut rest.levels, detail);
    let gap = match origin {
        UsageOrigin::Real => false,
        UsageOrigin::RealEarlier => true,
        UsageOrigin::Model => usage.has_real(run.job, run.index),
    };
    let zero = gap && cfg.usage_gaps == UsageGaps::Zero;
    rest.usage = if zero { Usage::default() } else { found };
    live.cpu = rest.usage.cpu;
    live.detailed = detail || zero || origin != UsageOrigin::Model;
    live.levels = rest.levels.map(|l| l.cpu());
}

/// A run's admission load (see `Admission`) while its mean CPU usage is `cpu`.
fn admission_load(cfg: &Config, run: &Run, cpu: f32) -> f64 {
    let base = match cfg.admission {
        Admission::Request => run.cpu_request,
        Admission::Usage => cpu,
    };
    f64::from(base) * cfg.overcommit_ratio
}

/// Replays the selected runs under `planner`. `progress(done, total)` is called every few hundred
/// steps; returning false stops the replay with `SimError::Interrupted`.
pub fn simulate(
    selection: &Selection,
    usage: &UsageSource,
    cfg: &Config,
    planner: &mut dyn Planner,
    progress: &mut dyn FnMut(u64, u64) -> bool,
) -> Result<Outcome, SimError> {
    replay(selection, usage, cfg, planner, progress, false)
}

/// `simulate` visiting every machine and every running task every step, and building the
/// planner's view afresh each cycle: the plain loop, whose results `simulate` must repeat bit
/// for bit (the tests compare them).
#[cfg(test)]
pub fn simulate_eagerly(
    selection: &Selection,
    usage: &UsageSource,
    cfg: &Config,
    planner: &mut dyn Planner,
) -> Result<Outcome, SimError> {
    replay(selection, usage, cfg, planner, &mut |_, _| true, true)
}

fn replay(
    selection: &Selection,
    usage: &UsageSource,
    cfg: &Config,
    planner: &mut dyn Planner,
    progress: &mut dyn FnMut(u64, u64) -> bool,
    eager: bool,
) -> Result<Outcome, SimError> {
    let started = Instant::now();
    let machines = match cfg.placement {
        Placement::Trace => selection.trace_machines,
        Placement::Cells | Placement::Random => cfg.machines,
    };
    cfg.check().map_err(SimError::Config)?;
    // The node agent's guards around the policy, when asked for (the same code the agent runs).
    let mut guarded;
    let planner: &mut dyn Planner = match cfg.agent_guards() {
        Some(g) => {
            guarded = colosched_core::Guarded::new(planner, g);
            &mut guarded
        }
        None => planner,
    };
    if machines == 0 {
        return Err(SimError::Config(
            "placement trace: the trace has no SCHEDULE events, so no machines".into(),
        ));
    }
    let mut sim = Sim {
        cfg,
        eager,
        usage,
        runs: &selection.runs,
        machines: (0..machines).map(|_| Machine::default()).collect(),
        in_flight: Vec::new(),
        lent: Vec::new(),
        next_id: 0,
        next_cell: 0,
        sum: Summary {
            policy: planner.name(),
            seed: cfg.seed,
            machines,
            skipped: selection.skipped,
            ..Summary::default()
        },
        series: Series::default(),
        mem_bytes: cfg.machine_mem_gib * (1u64 << 30) as f64,
        migrated_bytes: 0.0,
        duration_total: 0.0,
    };
    let mut place_rng = Rng::new(cfg.seed);
    let mut policy_rng = Rng::new(cfg.seed ^ 0x5EED_0F90_11C7);
    let step = cfg.step_s;
    let planned = selection.steps(cfg);
    let limit = planned + u64::from(DRAIN_LIMIT_S / step);
    let keep = selection.keep;
    let mut runs = (selection.runs.iter().enumerate())
        .filter(|(_, r)| keep(r))
        .peekable();
    let (mut cell, mut loads) = (Cell::default(), Loads::default());
    let mut k = 0u64;
    while k < planned || (cfg.until == Until::Drain && k < limit && sim.busy()) {
        let t = (k * u64::from(step)).min(u64::from(u32::MAX - step)) as u32;
        sim.land_migrations(t);
        let mut placed = false;
        while let Some((i, r)) = runs.next_if(|(_, r)| r.submit <= t) {
            sim.place(i as u32, r, t, &mut place_rng);
            placed = true;
        }
        let interval = if placed {
            cfg.busy_interval
        } else {
            cfg.idle_interval
        };
        let bytes_before = sim.migrated_bytes;
        let mut moves = [0; 3];
        if k.is_multiple_of(u64::from(interval)) {
            sim.sum.cycles += 1;
            moves = sim.migrate(planner, &mut policy_rng, k, t, &mut cell)?;
        }
        let net_mbit = (sim.migrated_bytes - bytes_before) * 8.0 / 1e6;
        sim.end_of_step(k, t, &mut loads, moves, net_mbit);
        k += 1;
        if (k.is_multiple_of(64) || k == planned) && !progress(k, planned.max(k)) {
            return Err(SimError::Interrupted);
        }
    }
    Ok(sim.finish(k, started))
}

impl Sim<'_> {
    /// Drain: is a task with a finite service still running (or being copied)?
    fn busy(&self) -> bool {
        !self.in_flight.is_empty()
            || self
                .machines
                .iter()
                .any(|m| m.running.iter().any(|t| t.remaining.is_finite()))
    }

    /// Places run `i` (`r`) on a machine, where it starts or waits.
    fn place(&mut self, i: u32, r: &Run, t: u32, rng: &mut Rng) {
        let n = self.machines.len();
        let machine = match self.cfg.placement {
            Placement::Trace if r.machine != NO_MACHINE => r.machine as usize,
            Placement::Cells => {
                let size = self.cfg.cell_size.min(n);
                let cells = n.div_ceil(size);
                let base = (self.next_cell % cells) * size;
                self.next_cell += 1;
                base + rng.below(size.min(n - base))
            }
            _ => rng.below(n),
        };
        let waiting = Waiting {
            id: self.next_id,
            run: i,
        };
        self.next_id += 1;
        match self.cfg.queue {
            Queue::Fifo => {
                let m = &mut self.machines[machine];
                m.pending.push_back(waiting);
                if m.pending.len() == 1 {
                    self.admit(machine, t);
                }
            }
            Queue::Backfill => self.start_or_wait(machine, waiting, t),
        }
    }

    /// The task a waiting run becomes when it starts at `t`, its usage and admission load then.
    fn live(&self, w: Waiting, t: u32) -> (Live, Rest) {
        let run = self.runs[w.run as usize];
        let mut rest = Rest {
            run,
            penalty: 0.0,
            started: t,
            usage: Usage::default(),
            levels: None,
            arrives: None,
        };
        let mut live = Live {
            id: w.id,
            window: t / WINDOW_S,
            remaining: rest.service(),
            admission: 0.0,
            cpu: 0.0,
            priority: run.priority,
            detailed: false,
            levels: None,
        };
        look_up(&mut live, &mut rest, self.usage, self.cfg, false);
        live.admission = admission_load(self.cfg, &run, live.cpu);
        (live, rest)
    }

    /// A waiting run's admission load at `t` (by request, it needs no usage).
    fn admission(&self, w: Waiting, t: u32) -> f64 {
        match self.cfg.admission {
            Admission::Request => admission_load(self.cfg, &self.runs[w.run as usize], 0.0),
            Admission::Usage => self.live(w, t).0.admission,
        }
    }

    /// Backfill: starts `w` if its admission load fits strictly in what is left (the thesis's
    /// `reserve > request`), else queues it.
    fn start_or_wait(&mut self, machine: usize, w: Waiting, t: u32) {
        let m = &self.machines[machine];
        if self.cfg.capacity - m.admitted > self.admission(w, t) {
            let task = self.live(w, t);
            self.start(machine, task);
        } else {
            self.machines[machine].pending.push_back(w);
        }
    }

    fn start(&mut self, machine: usize, task: (Live, Rest)) {
        let m = &mut self.machines[machine];
        m.touch(f64::from(self.cfg.step_s));
        m.admitted += task.0.admission;
        m.load += f64::from(task.0.cpu);
        m.push(task);
        self.sum.started += 1;
    }

    /// Starts waiting runs on `machine` that now fit: FIFO while the head fits; backfill every
    /// one that fits, in order.
    fn admit(&mut self, machine: usize, t: u32) {
        match self.cfg.queue {
            Queue::Fifo => loop {
                let m = &self.machines[machine];
                let Some(&w) = m.pending.front() else {
                    return;
                };
                let over = m.admitted + self.admission(w, t) > self.cfg.capacity + 1e-12;
                if over && !m.running.is_empty() {
                    return;
                }
                self.machines[machine].pending.pop_front();
                let task = self.live(w, t);
                self.start(machine, task);
            },
            Queue::Backfill => {
                let waiting = std::mem::take(&mut self.machines[machine].pending);
                for w in waiting {
                    self.start_or_wait(machine, w, t);
                }
            }
        }
    }

    /// Plans and applies one migration cycle; returns [moves, moves to the least loaded
    /// receiver, moves to the second].
    fn migrate(
        &mut self,
        planner: &mut dyn Planner,
        rng: &mut Rng,
        cycle: u64,
        t: u32,
        cell: &mut Cell,
    ) -> Result<[u32; 3], SimError> {
        let size = self.cfg.cell_size;
        let mut counts = [0; 3];
        for (at, base) in (0..self.machines.len()).step_by(size).enumerate() {
            let end = (base + size).min(self.machines.len());
            if !self.fill_cell(&*planner, cell, base..end) {
                self.take_views(cell, base);
                continue;
            }
            let moves = planner.plan_at(at, cell, &self.cfg.limits, rng, cycle);
            for m in &moves {
                self.apply(cell, base, m, t)
                    .map_err(|msg| SimError::Planner {
                        policy: planner.name(),
                        msg,
                    })?;
            }
            self.take_views(cell, base);
            counts[0] += moves.len() as u32;
            counts[1] += moves.iter().filter(|m| m.rank == 0).count() as u32;
            counts[2] += moves.iter().filter(|m| m.rank == 1).count() as u32;
        }
        Ok(counts)
    }

    /// Builds the planner's view of machines `range`: each node's load and, where the planner
    /// reads them (`Planner::reads_tasks`), its migratable tasks (the machine's `view`, lent to
    /// the cell until `take_views`). Returns false when no node has a migratable task the
    /// planner reads (its plan is then empty).
    fn fill_cell(
        &mut self,
        planner: &dyn Planner,
        cell: &mut Cell,
        range: std::ops::Range<usize>,
    ) -> bool {
        cell.nodes.resize_with(range.len(), Node::default);
        self.lent.clear();
        let mut any = false;
        for (node, m) in cell.nodes.iter_mut().zip(&mut self.machines[range]) {
            node.load = m.load;
            let lend = self.eager || planner.reads_tasks(m.load, &self.cfg.limits);
            if lend {
                if !m.view_ok || self.eager {
                    Self::view(self.cfg, self.usage, m);
                }
                std::mem::swap(&mut node.tasks, &mut m.view);
                any |= !node.tasks.is_empty();
            } else {
                node.tasks.clear();
            }
            self.lent.push(lend);
        }
        any
    }

    /// Gives the machines from `base` on their lent views back from the cell. A view a move took
    /// a task from belongs to a machine the move changed (`touch`, or `view_ok` cleared).
    fn take_views(&mut self, cell: &mut Cell, base: usize) {
        let machines = &mut self.machines[base..];
        for ((node, m), _) in
            (cell.nodes.iter_mut().zip(machines).zip(&self.lent)).filter(|(_, &lent)| lent)
        {
            std::mem::swap(&mut node.tasks, &mut m.view);
        }
    }

    /// Builds `m.view`: its running tasks that are migratable and not being copied away.
    fn view(cfg: &Config, usage: &UsageSource, m: &mut Machine) {
        m.view.clear();
        for (live, rest) in m.running.iter_mut().zip(&mut m.rest) {
            // Cheap rejections first: most tasks are not in the free band.
            if live.priority >= cfg.limits.migratable_priority_below || rest.arrives.is_some() {
                continue;
            }
            detail(live, rest, usage, cfg);
            let (run, usage) = (&rest.run, &rest.usage);
            let view = Task {
                id: u64::from(live.id),
                index: run.index,
                priority: run.priority,
                cpu_request: f64::from(run.cpu_request),
                cpu_usage: f64::from(live.cpu),
                max_cpu: f64::from(usage.max_cpu),
                mem_usage: f64::from(usage.mem),
                mai: f64::from(usage.mai),
            };
            if cfg.limits.is_migratable(&view) {
                m.view.push(view);
            }
        }
        m.view_ok = true;
    }

    /// Checks a planned move against the cell view and carries it out (or starts its copy).
    fn apply(&mut self, cell: &mut Cell, base: usize, mv: &Move, t: u32) -> Result<(), String> {
        let nodes = cell.nodes.len();
        if mv.from >= nodes || mv.to >= nodes || mv.from == mv.to {
            return Err(format!(
                "move of task {} from node {} to node {}: the cell has nodes 0..{nodes}",
                mv.task, mv.from, mv.to
            ));
        }
        let from = &mut cell.nodes[mv.from].tasks;
        let Some(pos) = from.iter().position(|t| t.id == mv.task) else {
            return Err(format!(
                "task {} is not a migratable task of node {} (or was moved twice)",
                mv.task, mv.from
            ));
        };
        let bytes = from.swap_remove(pos).mem_usage * self.mem_bytes;
        let (src, dst, id) = (
            (base + mv.from) as u32,
            (base + mv.to) as u32,
            mv.task as u32,
        );
        self.migrated_bytes += bytes;
        self.sum.moves += 1;
        match self.cfg.bandwidth_mbit_s {
            None => self.relocate(id, src, dst, t),
            Some(mbit) => {
                let m = &mut self.machines[src as usize];
                m.link_free = m.link_free.max(f64::from(t)) + bytes * 8.0 / (mbit * 1e6);
                let at = m.link_free.ceil() as u32;
                if let Some(pos) = m.position(id) {
                    m.rest[pos].arrives = Some((at, dst));
                    m.view_ok = false;
                    self.in_flight.push((id, src));
                }
            }
        }
        Ok(())
    }

    /// Moves a running task from `src` to `dst` without admission (the thesis: migrated-in tasks
    /// skip it); its departure lets the source start waiting runs that now fit.
    fn relocate(&mut self, id: u32, src: u32, dst: u32, t: u32) {
        let step = f64::from(self.cfg.step_s);
        let s = &mut self.machines[src as usize];
        let Some(pos) = s.position(id) else { return };
        s.touch(step);
        let (live, mut rest) = s.swap_remove(pos);
        rest.arrives = None;
        s.admitted -= live.admission;
        s.load -= f64::from(live.cpu);
        let waiting = !s.pending.is_empty();
        let d = &mut self.machines[dst as usize];
        d.touch(step);
        d.admitted += live.admission;
        d.load += f64::from(live.cpu);
        d.push((live, rest));
        if waiting {
            self.admit(src as usize, t);
        }
    }

    /// Bandwidth mode: copies that are complete by `t` switch the task to its destination;
    /// copies of tasks that ended meanwhile are dropped.
    fn land_migrations(&mut self, t: u32) {
        let mut i = 0;
        while i < self.in_flight.len() {
            let (id, src) = self.in_flight[i];
            let m = &self.machines[src as usize];
            match m.position(id).and_then(|pos| m.rest[pos].arrives) {
                Some((at, _)) if at > t => i += 1,
                Some((_, dst)) => {
                    self.in_flight.swap_remove(i);
                    self.relocate(id, src, dst, t);
                }
                None => {
                    self.in_flight.swap_remove(i);
                }
            }
        }
    }

    fn end_of_step(&mut self, k: u64, t: u32, loads: &mut Loads, moves: [u32; 3], net_mbit: f64) {
        let cap = self.cfg.capacity;
        let step = f64::from(self.cfg.step_s);
        let next_t = t + self.cfg.step_s;
        // Every task's usage moves to a new window: every machine is visited.
        let new_window = next_t / WINDOW_S != t / WINDOW_S;
        let visit = Visit {
            cfg: self.cfg,
            usage: self.usage,
            eager: self.eager,
            k,
            next_t,
            new_window,
        };
        let (mut load_sum, mut over_sum) = (0.0, 0.0);
        for (mi, m) in self.machines.iter_mut().enumerate() {
            let load = m.load.max(0.0);
            // Mean CPU and Gini on loads clipped at capacity; overcommit on what exceeds it.
            loads.set(mi, load.min(cap));
            load_sum += load.min(cap);
            over_sum += (load - cap).max(0.0) / cap;
            self.sum.task_steps += m.running.len() as u64;
            // Nothing of its tasks changes this step but their `remaining`: owe it.
            if visit.lost(m).is_none() {
                m.lag += 1;
            }
        }
        // At a new window every machine draws every task's usage: split them over the threads.
        let machines = self.machines.len();
        let chunk = if new_window && machines >= 2 * PARALLEL_MACHINES {
            machines
                .div_ceil(rayon::current_num_threads())
                .max(PARALLEL_MACHINES)
        } else {
            machines
        };
        let visits = |(c, ms): (usize, &mut [Machine])| visit.machines(c * chunk, ms);
        let ended: Vec<Ended> = if chunk < machines {
            self.machines
                .par_chunks_mut(chunk)
                .enumerate()
                .map(visits)
                .collect()
        } else {
            self.machines
                .chunks_mut(chunk)
                .enumerate()
                .map(visits)
                .collect()
        };
        // In machine order, as one loop would: the float sum's order is part of the result.
        for e in ended {
            self.sum.completed += e.durations.len() as u64;
            for d in e.durations {
                self.duration_total += d;
            }
            for mi in e.freed {
                if !self.machines[mi as usize].pending.is_empty() {
                    self.admit(mi as usize, next_t);
                }
            }
        }
        let n = self.machines.len() as f64;
        let mean_cpu = load_sum / n / cap;
        let g = gini_sorted(loads.sorted(self.eager));
        let overcommit = over_sum;
        self.sum.mean_cpu += mean_cpu;
        self.sum.gini += g;
        self.sum.overcommit += overcommit;
        self.sum.net_peak_mbit_s = self.sum.net_peak_mbit_s.max(net_mbit / step);
        if self.cfg.keep_series {
            let s = &mut self.series;
            s.cycle.push(k as u32);
            s.time_s.push(t);
            s.mean_cpu.push(mean_cpu);
            s.gini.push(g);
            s.overcommit.push(overcommit);
            s.net_mbit.push(net_mbit);
            s.moves.push(moves[0]);
            s.move_to_first.push(moves[1]);
            s.move_to_second.push(moves[2]);
        }
    }

    fn finish(mut self, steps: u64, started: Instant) -> Outcome {
        let s = &mut self.sum;
        let n = steps as f64;
        s.steps = steps;
        s.mean_cpu /= n;
        s.gini /= n;
        s.overcommit /= n;
        let (mut total, mut count) = (self.duration_total, s.completed);
        if self.cfg.duration_over == DurationOver::Started {
            // Tasks still running count with the penalties they have had so far.
            let running = self
                .machines
                .iter()
                .flat_map(|m| m.running.iter().zip(&m.rest));
            for (_, rest) in running.filter(|(live, _)| live.remaining.is_finite()) {
                total += rest.duration();
                count += 1;
            }
        }
        s.duration = if count > 0 { total / count as f64 } else { 0.0 };
        let seconds = n * f64::from(self.cfg.step_s);
        s.net_mbit_s = self.migrated_bytes * 8.0 / 1e6 / seconds;
        s.net_kbit_s_per_machine = self.migrated_bytes * 8.0
            / f64::from(self.cfg.kbit_bits)
            / (seconds * self.machines.len() as f64);
        s.migrated_gib = self.migrated_bytes / (1u64 << 30) as f64;
        s.pending_at_end = self.machines.iter().map(|m| m.pending.len() as u64).sum();
        s.wall_s = started.elapsed().as_secs_f64();
        Outcome {
            summary: self.sum,
            series: self.series,
        }
    }
}

/// A new window is visited in parallel when there are at least twice this many machines.
const PARALLEL_MACHINES: usize = 1024;

/// What one step's visits of machines read (`Sim::end_of_step`).
struct Visit<'a> {
    cfg: &'a Config,
    usage: &'a UsageSource,
    eager: bool,
    k: u64,
    next_t: u32,
    new_window: bool,
}

/// What visits of machines leave to the step: the durations of the tasks that ended, in order,
/// and the machines where tasks ended.
#[derive(Default)]
struct Ended {
    durations: Vec<f64>,
    freed: Vec<u32>,
}

impl Visit<'_> {
    /// `Some(the service its tasks lose to overload this step)` if `m` is visited this step:
    /// something changes there, besides its tasks' `remaining`.
    fn lost(&self, m: &Machine) -> Option<f64> {
        let (cap, load) = (self.cfg.capacity, m.load.max(0.0));
        let lost = if load > cap {
            f64::from(self.cfg.step_s)
                * match self.cfg.penalty {
                    Penalty::Excess => ((load - cap) / cap).min(1.0),
                    Penalty::Fixed(fraction) => fraction,
                }
        } else {
            0.0
        };
        let visit = self.eager || self.new_window || lost > 0.0 || m.changed || self.k >= m.due;
        visit.then_some(lost)
    }

    /// Visits the machines of `ms` (from index `base`) that `end_of_step` marked.
    fn machines(&self, base: usize, ms: &mut [Machine]) -> Ended {
        let mut ended = Ended::default();
        for i in 0..ms.len() {
            // (At a new window every machine is visited; in other steps few are.)
            if let Some(next) = ms.get(i + 2).filter(|_| self.new_window) {
                prefetch(&next.running);
            }
            if let Some(lost) = self.lost(&ms[i]) {
                if self.machine(&mut ms[i], lost, &mut ended.durations) {
                    ended.freed.push((base + i) as u32);
                }
            }
        }
        ended
    }

    /// Gives `m`'s tasks their service, ends those done (their durations to `durations`) and
    /// draws the others' usage for the next step. Returns whether a task ended.
    fn machine(&self, m: &mut Machine, lost: f64, durations: &mut Vec<f64>) -> bool {
        let (cfg, k) = (self.cfg, self.k);
        let step = f64::from(cfg.step_s);
        // This step's service and that of the steps skipped, in one subtraction.
        let steps = std::mem::take(&mut m.lag) + 1;
        // Recomputed from scratch each visit, so no rounding drift accumulates.
        let (mut admitted, mut new_load, mut freed, mut due) = (0.0, 0.0, false, u64::MAX);
        let mut i = 0;
        while i < m.running.len() {
            let task = &mut m.running[i];
            task.remaining = after_steps(task.remaining, steps, step);
            if lost > 0.0 && task.priority <= cfg.penalty_max_priority {
                task.remaining += lost;
                m.rest[i].penalty += lost;
            }
            if task.remaining <= 0.0 {
                durations.push(m.swap_remove(i).1.duration());
                freed = true;
                continue;
            }
            refresh(task, &mut m.rest[i], self.usage, cfg, self.next_t);
            new_load += f64::from(task.cpu);
            admitted += task.admission;
            due = due.min(k.saturating_add(steps_left(task.remaining, step)));
            i += 1;
        }
        m.admitted = admitted;
        m.load = new_load;
        m.due = due;
        m.changed = false;
        m.view_ok &= !(freed || self.new_window);
        freed
    }
}

/// The machines' loads clipped at capacity, and the same sorted (for the Gini coefficient): a
/// step merges the values that changed into the sorted array instead of sorting it again.
#[derive(Default)]
struct Loads {
    by_machine: Vec<f64>,
    sorted: Vec<f64>,
    /// The values replaced and the values set since `sorted` was last brought up to date.
    old: Vec<f64>,
    new: Vec<f64>,
    scratch: Vec<f64>,
}

impl Loads {
    fn set(&mut self, machine: usize, load: f64) {
        if machine == self.by_machine.len() {
            self.by_machine.push(load);
        } else if self.by_machine[machine].to_bits() != load.to_bits() {
            self.old.push(self.by_machine[machine]);
            self.new.push(load);
            self.by_machine[machine] = load;
        }
    }

    /// Every value, ascending by `f64::total_cmp`: the same array a sort of `by_machine` gives
    /// (values equal under `total_cmp` have the same bits), which `resort` asks for. With few
    /// changes, the sorted array, plus the new values, less the replaced ones: one merge of
    /// sorted runs, O(machines + changes × log changes).
    fn sorted(&mut self, resort: bool) -> &[f64] {
        // Most machines changed (at a new window): one sort beats sorting the changes twice.
        let many = self.new.len() * 2 > self.by_machine.len();
        if resort || many || self.sorted.len() != self.by_machine.len() {
            self.sorted.clone_from(&self.by_machine);
            // A radix sort: the same order as `total_cmp` (a test checks), several times faster.
            radsort::sort(&mut self.sorted);
        } else if !self.new.is_empty() {
            self.old.sort_unstable_by(f64::total_cmp);
            self.new.sort_unstable_by(f64::total_cmp);
            let (sorted, new) = (&self.sorted, &self.new);
            let mut old = self.old.iter().peekable();
            self.scratch.clear();
            let (mut i, mut j) = (0, 0);
            while i < sorted.len() || j < new.len() {
                // The smaller head of the two sorted runs (the array's first on a tie).
                let take_new =
                    i == sorted.len() || (j < new.len() && new[j].total_cmp(&sorted[i]).is_lt());
                let x = if take_new { new[j] } else { sorted[i] };
                (i, j) = if take_new { (i, j + 1) } else { (i + 1, j) };
                // A replaced value is dropped once (an intermediate value set twice is both).
                if old.next_if(|o| o.to_bits() == x.to_bits()).is_none() {
                    self.scratch.push(x);
                }
            }
            debug_assert!(old.next().is_none(), "every replaced value was there");
            std::mem::swap(&mut self.sorted, &mut self.scratch);
        }
        self.old.clear();
        self.new.clear();
        &self.sorted
    }
}

#[cfg(test)]
mod tests;
