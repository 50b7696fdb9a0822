//! The replay loop. Per step `t`: place the runs submitted up to `t`; if this is a migration
//! cycle, plan and apply moves cell by cell; then record the step's statistics, give every running
//! task its step of service, end the finished ones, refresh usage for the next step's window and
//! start pending runs that now fit. State is per live task only: nothing grows with trace length
//! except the optional per-step series.

use std::collections::VecDeque;
use std::time::Instant;

use colosched_core::{metrics::gini_with, Cell, Move, Node, Planner, Rng, Task};
use colosched_trace::{usage::UsageSource, Run, Runs, Usage, NEVER, NO_MACHINE, WINDOW_S};

use crate::{Admission, Config, Outcome, Placement, Replay, Series, Summary};

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("policy {policy}: {msg}")]
    Planner { policy: String, msg: String },
    #[error("interrupted")]
    Interrupted,
}

/// A run that has been placed on a machine (pending or running). Tasks live inside their
/// machine's vectors, so the per-step loop walks memory in order; each carries a copy of its
/// `Run`, so the loop never reads the (possibly gigabyte-sized) runs table either.
#[derive(Clone, Copy, Debug)]
struct Live {
    /// Unique for the whole replay: the id planners see.
    id: u32,
    run: Run,
    /// Admission load (see `Admission`), counted in its machine's `admitted` while running.
    admission: f64,
    /// Seconds of service still needed (infinite for runs the trace never ends).
    remaining: f64,
    usage: Usage,
    window: u32,
    /// Bandwidth mode: the step time at which its copy to `dest` is complete.
    arrives: Option<(u32, u32)>,
}

#[derive(Default)]
struct Machine {
    running: Vec<Live>,
    pending: VecDeque<Live>,
    /// Sum of the admission loads of the running tasks.
    admitted: f64,
    /// Sum of the running tasks' current mean CPU usage.
    load: f64,
    /// When this machine's migration link is free again (bandwidth mode).
    link_free: f64,
}

impl Machine {
    fn position(&self, id: u32) -> Option<usize> {
        self.running.iter().position(|t| t.id == id)
    }
}

struct Sim<'a> {
    runs: &'a [Run],
    usage: &'a UsageSource,
    cfg: &'a Config,
    machines: Vec<Machine>,
    /// Bandwidth mode: (task id, source machine) of copies under way.
    in_flight: Vec<(u32, u32)>,
    next_id: u32,
    sum: Summary,
    series: Series,
    mem_bytes: f64,
    migrated_bytes: f64,
    duration_total: f64,
}

/// Refreshes a task's usage for the window holding `t` and its admission load.
fn refresh(task: &mut Live, usage: &UsageSource, cfg: &Config, t: u32) {
    let window = t / WINDOW_S;
    if task.window != window {
        task.usage = usage.usage(&task.run, window);
        task.window = window;
    }
    let base = match cfg.admission {
        Admission::Request => task.run.cpu_request,
        Admission::Usage => task.usage.cpu,
    };
    task.admission = f64::from(base) * cfg.overcommit_ratio;
}

/// Replays `runs` under `planner`. `progress(done, total)` is called every few hundred steps;
/// returning false stops the replay with `SimError::Interrupted`.
pub fn simulate(
    runs: &Runs,
    usage: &UsageSource,
    cfg: &Config,
    planner: &mut dyn Planner,
    progress: &mut dyn FnMut(u64, u64) -> bool,
) -> Result<Outcome, SimError> {
    let started = Instant::now();
    let machines = match cfg.placement {
        Placement::Random => cfg.machines,
        Placement::Trace => runs.machine_ids.len(),
    };
    check(cfg, machines)?;
    let mut sim = Sim {
        runs: &runs.runs,
        usage,
        cfg,
        machines: (0..machines).map(|_| Machine::default()).collect(),
        in_flight: Vec::new(),
        next_id: 0,
        sum: Summary {
            policy: planner.name(),
            seed: cfg.seed,
            machines,
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
    let steps = u64::from(runs.trace_end / step) + 1;
    let mut next_run = 0;
    let mut scratch = (Cell::default(), Vec::new(), Vec::new());
    for k in 0..steps {
        let t = k as u32 * step;
        sim.land_migrations(t);
        let before = next_run;
        while next_run < sim.runs.len() && sim.runs[next_run].submit <= t {
            sim.place(next_run as u32, t, &mut place_rng);
            next_run += 1;
        }
        let interval = if next_run > before {
            cfg.busy_interval
        } else {
            cfg.idle_interval
        };
        let bytes_before = sim.migrated_bytes;
        let mut moves = [0; 3];
        if k.is_multiple_of(u64::from(interval)) {
            sim.sum.cycles += 1;
            moves = sim.migrate(planner, &mut policy_rng, k, t, &mut scratch.0)?;
        }
        let net_mbit = (sim.migrated_bytes - bytes_before) * 8.0 / 1e6;
        sim.end_of_step(k, t, (&mut scratch.1, &mut scratch.2), moves, net_mbit);
        if (k % 64 == 0 || k + 1 == steps) && !progress(k + 1, steps) {
            return Err(SimError::Interrupted);
        }
    }
    Ok(sim.finish(steps, started))
}

fn check(cfg: &Config, machines: usize) -> Result<(), SimError> {
    let bad = |m: &str| Err(SimError::Config(m.to_string()));
    if machines == 0 {
        return bad("machines must be at least 1 (with --placement trace: the trace has no SCHEDULE events)");
    }
    if machines > u32::MAX as usize - 1 {
        return bad("machines must fit in 32 bits");
    }
    if cfg.cell_size == 0 {
        return bad("cell_size must be at least 1");
    }
    if cfg.step_s == 0 || cfg.busy_interval == 0 || cfg.idle_interval == 0 {
        return bad("step_s, busy_interval and idle_interval must be at least 1");
    }
    if !(cfg.capacity > 0.0 && cfg.overcommit_ratio > 0.0 && cfg.machine_mem_gib > 0.0) {
        return bad("capacity, overcommit_ratio and machine_mem_gib must be positive");
    }
    if !(0.0..=1.0).contains(&cfg.overload_penalty) {
        return bad("overload_penalty must be within 0..=1 (a fraction of a step)");
    }
    if cfg.bandwidth_mbit_s.is_some_and(|b| b.is_nan() || b <= 0.0) {
        return bad("bandwidth_mbit_s must be positive");
    }
    Ok(())
}

impl Sim<'_> {
    fn place(&mut self, run: u32, t: u32, rng: &mut Rng) {
        let r = self.runs[run as usize];
        let open = r.end_kind == colosched_trace::END_NONE;
        // A run the trace never scheduled consumed nothing there, so it is not replayed.
        if r.schedule == NEVER || (open && self.cfg.replay == Replay::Ended) {
            self.sum.skipped += 1;
            return;
        }
        let machine = match self.cfg.placement {
            Placement::Trace if r.machine != NO_MACHINE => r.machine,
            _ => rng.below(self.machines.len()) as u32,
        };
        let remaining = if open {
            f64::INFINITY
        } else {
            f64::from(r.end.saturating_sub(r.schedule))
        };
        let task = Live {
            id: self.next_id,
            run: r,
            admission: 0.0,
            remaining,
            usage: Usage::default(),
            window: u32::MAX,
            arrives: None,
        };
        self.next_id += 1;
        let m = &mut self.machines[machine as usize];
        m.pending.push_back(task);
        if m.pending.len() == 1 {
            self.admit(machine, t);
        }
    }

    /// Starts pending runs on `machine`, in FIFO order, while they fit.
    fn admit(&mut self, machine: u32, t: u32) {
        let cap = self.cfg.capacity;
        let m = &mut self.machines[machine as usize];
        while let Some(task) = m.pending.front_mut() {
            refresh(task, self.usage, self.cfg, t);
            if m.admitted + task.admission > cap + 1e-12 && !m.running.is_empty() {
                return;
            }
            m.admitted += task.admission;
            m.load += f64::from(task.usage.cpu);
            let task = m.pending.pop_front().expect("front exists");
            m.running.push(task);
            self.sum.started += 1;
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
        for base in (0..self.machines.len()).step_by(size) {
            let end = (base + size).min(self.machines.len());
            if !self.fill_cell(cell, base..end) {
                continue;
            }
            let moves = planner.plan(cell, &self.cfg.limits, rng, cycle);
            for m in &moves {
                self.apply(cell, base, m, t)
                    .map_err(|msg| SimError::Planner {
                        policy: planner.name(),
                        msg,
                    })?;
            }
            counts[0] += moves.len() as u32;
            counts[1] += moves.iter().filter(|m| m.rank == 0).count() as u32;
            counts[2] += moves.iter().filter(|m| m.rank == 1).count() as u32;
        }
        Ok(counts)
    }

    /// Builds the planner's view of machines `range`: each node's load and migratable tasks.
    /// Returns false when no node has a migratable task (nothing could move).
    fn fill_cell(&self, cell: &mut Cell, range: std::ops::Range<usize>) -> bool {
        cell.nodes.resize_with(range.len(), Node::default);
        let mut any = false;
        for (node, m) in cell.nodes.iter_mut().zip(&self.machines[range]) {
            node.load = m.load;
            node.tasks.clear();
            for task in &m.running {
                // Cheap rejections first: most tasks are not in the free band.
                let run = &task.run;
                if run.priority >= self.cfg.limits.migratable_priority_below
                    || task.arrives.is_some()
                {
                    continue;
                }
                let view = Task {
                    id: u64::from(task.id),
                    priority: run.priority,
                    cpu_request: f64::from(run.cpu_request),
                    cpu_usage: f64::from(task.usage.cpu),
                    max_cpu: f64::from(task.usage.max_cpu),
                    mem_usage: f64::from(task.usage.mem),
                    mai: f64::from(task.usage.mai),
                };
                if self.cfg.limits.is_migratable(&view) {
                    node.tasks.push(view);
                }
            }
            any |= !node.tasks.is_empty();
        }
        any
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
            None => self.relocate(id, src, dst),
            Some(mbit) => {
                let m = &mut self.machines[src as usize];
                m.link_free = m.link_free.max(f64::from(t)) + bytes * 8.0 / (mbit * 1e6);
                let at = m.link_free.ceil() as u32;
                if let Some(pos) = m.position(id) {
                    m.running[pos].arrives = Some((at, dst));
                    self.in_flight.push((id, src));
                }
            }
        }
        Ok(())
    }

    fn relocate(&mut self, id: u32, src: u32, dst: u32) {
        let s = &mut self.machines[src as usize];
        let Some(pos) = s.position(id) else { return };
        let mut task = s.running.swap_remove(pos);
        task.arrives = None;
        s.admitted -= task.admission;
        s.load -= f64::from(task.usage.cpu);
        let d = &mut self.machines[dst as usize];
        d.admitted += task.admission;
        d.load += f64::from(task.usage.cpu);
        d.running.push(task);
    }

    /// Bandwidth mode: copies that are complete by `t` switch the task to its destination;
    /// copies of tasks that ended meanwhile are dropped.
    fn land_migrations(&mut self, t: u32) {
        let mut i = 0;
        while i < self.in_flight.len() {
            let (id, src) = self.in_flight[i];
            let m = &self.machines[src as usize];
            match m.position(id).and_then(|pos| m.running[pos].arrives) {
                Some((at, _)) if at > t => i += 1,
                Some((_, dst)) => {
                    self.in_flight.swap_remove(i);
                    self.relocate(id, src, dst);
                }
                None => {
                    self.in_flight.swap_remove(i);
                }
            }
        }
    }

    fn end_of_step(
        &mut self,
        k: u64,
        t: u32,
        scratch: (&mut Vec<f64>, &mut Vec<f64>),
        moves: [u32; 3],
        net_mbit: f64,
    ) {
        let (loads, sorted) = scratch;
        let cap = self.cfg.capacity;
        let step = f64::from(self.cfg.step_s);
        let next_t = t + self.cfg.step_s;
        let (mut load_sum, mut over_sum) = (0.0, 0.0);
        loads.clear();
        for mi in 0..self.machines.len() {
            let m = &mut self.machines[mi];
            let load = m.load.max(0.0);
            loads.push(load);
            load_sum += load;
            over_sum += (load - cap).max(0.0);
            self.sum.task_steps += m.running.len() as u64;
            let service = if load > cap {
                step * (1.0 - self.cfg.overload_penalty)
            } else {
                step
            };
            // Recomputed from scratch each step, so no rounding drift accumulates.
            let (mut admitted, mut new_load, mut freed) = (0.0, 0.0, false);
            let mut i = 0;
            while i < m.running.len() {
                let task = &mut m.running[i];
                task.remaining -= service;
                if task.remaining <= 0.0 {
                    self.duration_total += f64::from(next_t - task.run.submit);
                    self.sum.completed += 1;
                    m.running.swap_remove(i);
                    freed = true;
                    continue;
                }
                refresh(task, self.usage, self.cfg, next_t);
                new_load += f64::from(task.usage.cpu);
                admitted += task.admission;
                i += 1;
            }
            m.admitted = admitted;
            m.load = new_load;
            if freed && !m.pending.is_empty() {
                self.admit(mi as u32, next_t);
            }
        }
        let n = self.machines.len() as f64;
        let mean_cpu = load_sum / n / cap;
        let g = gini_with(loads, sorted);
        let overcommit = over_sum / n;
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
        s.duration = if s.completed > 0 {
            self.duration_total / s.completed as f64
        } else {
            0.0
        };
        s.net_mbit_s = self.migrated_bytes * 8.0 / 1e6 / (n * f64::from(self.cfg.step_s));
        s.migrated_gib = self.migrated_bytes / (1u64 << 30) as f64;
        s.pending_at_end = self.machines.iter().map(|m| m.pending.len() as u64).sum();
        s.wall_s = started.elapsed().as_secs_f64();
        Outcome {
            summary: self.sum,
            series: self.series,
        }
    }
}

#[cfg(test)]
mod tests;
