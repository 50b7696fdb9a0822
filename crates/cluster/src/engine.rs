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

/// A run that has been placed on a machine (pending or running).
#[derive(Clone, Copy, Debug)]
struct Live {
    run: u32,
    machine: u32,
    /// Admission load (see `Admission`), counted in its machine's `admitted` while running.
    admission: f64,
    /// Seconds of service still needed (infinite for runs the trace never ends).
    remaining: f64,
    usage: Usage,
    window: u32,
    /// When a bandwidth-limited copy of this task will have reached `dest`.
    arrives: Option<(u32, u32)>,
}

#[derive(Default)]
struct Machine {
    running: Vec<u32>,
    pending: VecDeque<u32>,
    /// Sum of the admission loads of the running tasks.
    admitted: f64,
    /// Sum of the running tasks' current mean CPU usage.
    load: f64,
    /// When this machine's migration link is free again (bandwidth mode).
    link_free: f64,
}

struct Sim<'a> {
    runs: &'a [Run],
    usage: &'a UsageSource,
    cfg: &'a Config,
    live: Vec<Live>,
    free: Vec<u32>,
    machines: Vec<Machine>,
    in_flight: Vec<u32>,
    sum: Summary,
    series: Series,
    mem_bytes: f64,
    migrated_bytes: f64,
    duration_total: f64,
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
        live: Vec::new(),
        free: Vec::new(),
        machines: (0..machines).map(|_| Machine::default()).collect(),
        in_flight: Vec::new(),
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
        let (mut moved, mut first, mut second) = (0, 0, 0);
        let bytes_before = sim.migrated_bytes;
        if k.is_multiple_of(u64::from(interval)) {
            sim.sum.cycles += 1;
            for m in sim.migrate(planner, &mut policy_rng, k, t, &mut scratch.0)? {
                moved += 1;
                first += u32::from(m.rank == 0);
                second += u32::from(m.rank == 1);
            }
        }
        let net_mbit = (sim.migrated_bytes - bytes_before) * 8.0 / 1e6;
        sim.end_of_step(
            k,
            t,
            (&mut scratch.1, &mut scratch.2),
            [moved, first, second],
            net_mbit,
        );
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
        let r = &self.runs[run as usize];
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
        let service = if open {
            f64::INFINITY
        } else {
            f64::from(r.end.saturating_sub(r.schedule))
        };
        let task = Live {
            run,
            machine,
            admission: 0.0,
            remaining: service,
            usage: Usage::default(),
            window: u32::MAX,
            arrives: None,
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.live[id as usize] = task;
                id
            }
            None => {
                self.live.push(task);
                (self.live.len() - 1) as u32
            }
        };
        let m = &mut self.machines[machine as usize];
        m.pending.push_back(id);
        if m.pending.len() == 1 {
            self.admit(machine, t);
        }
    }

    /// Starts pending runs on `machine`, in FIFO order, while they fit.
    fn admit(&mut self, machine: u32, t: u32) {
        let cap = self.cfg.capacity;
        loop {
            let Some(&id) = self.machines[machine as usize].pending.front() else {
                return;
            };
            let usage = self.usage_at(id, t);
            let admission = self.admission_load(id);
            let m = &self.machines[machine as usize];
            if m.admitted + admission > cap + 1e-12 && !m.running.is_empty() {
                return;
            }
            self.live[id as usize].admission = admission;
            let m = &mut self.machines[machine as usize];
            m.pending.pop_front();
            m.running.push(id);
            m.admitted += admission;
            m.load += usage.cpu as f64;
            self.sum.started += 1;
        }
    }

    /// The admission load of a task whose usage is current.
    fn admission_load(&self, id: u32) -> f64 {
        let task = &self.live[id as usize];
        let base = match self.cfg.admission {
            Admission::Request => self.runs[task.run as usize].cpu_request,
            Admission::Usage => task.usage.cpu,
        };
        f64::from(base) * self.cfg.overcommit_ratio
    }

    /// Refreshes a task's usage for the window holding `t`; returns it.
    fn usage_at(&mut self, id: u32, t: u32) -> Usage {
        let window = t / WINDOW_S;
        let task = &mut self.live[id as usize];
        if task.window != window {
            task.usage = self.usage.usage(&self.runs[task.run as usize], window);
            task.window = window;
        }
        task.usage
    }

    fn migrate(
        &mut self,
        planner: &mut dyn Planner,
        rng: &mut Rng,
        cycle: u64,
        t: u32,
        cell: &mut Cell,
    ) -> Result<Vec<Move>, SimError> {
        let size = self.cfg.cell_size;
        let mut all = Vec::new();
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
            all.extend(moves);
        }
        Ok(all)
    }

    /// Builds the planner's view of machines `range`: each node's load and migratable tasks.
    /// Returns false when no node has a migratable task (nothing could move).
    fn fill_cell(&self, cell: &mut Cell, range: std::ops::Range<usize>) -> bool {
        cell.nodes.resize_with(range.len(), Node::default);
        let mut any = false;
        for (node, m) in cell.nodes.iter_mut().zip(&self.machines[range]) {
            node.load = m.load;
            node.tasks.clear();
            for &id in &m.running {
                let task = &self.live[id as usize];
                let run = &self.runs[task.run as usize];
                let view = Task {
                    id: u64::from(id),
                    priority: run.priority,
                    cpu_request: f64::from(run.cpu_request),
                    cpu_usage: f64::from(task.usage.cpu),
                    max_cpu: f64::from(task.usage.max_cpu),
                    mem_usage: f64::from(task.usage.mem),
                    mai: f64::from(task.usage.mai),
                };
                if task.arrives.is_none() && self.cfg.limits.is_migratable(&view) {
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
        from.swap_remove(pos);
        let (src, dst, id) = (
            (base + mv.from) as u32,
            (base + mv.to) as u32,
            mv.task as u32,
        );
        let task = self.live[id as usize];
        let bytes = f64::from(task.usage.mem) * self.mem_bytes;
        self.migrated_bytes += bytes;
        self.sum.moves += 1;
        match self.cfg.bandwidth_mbit_s {
            None => self.relocate(id, src, dst),
            Some(mbit) => {
                let link = &mut self.machines[src as usize].link_free;
                *link = link.max(f64::from(t)) + bytes * 8.0 / (mbit * 1e6);
                self.live[id as usize].arrives = Some((link.ceil() as u32, dst));
                self.in_flight.push(id);
            }
        }
        Ok(())
    }

    fn relocate(&mut self, id: u32, src: u32, dst: u32) {
        let task = &mut self.live[id as usize];
        task.machine = dst;
        task.arrives = None;
        let (admission, cpu) = (task.admission, f64::from(task.usage.cpu));
        let s = &mut self.machines[src as usize];
        if let Some(pos) = s.running.iter().position(|&x| x == id) {
            s.running.swap_remove(pos);
        }
        s.admitted -= admission;
        s.load -= cpu;
        let d = &mut self.machines[dst as usize];
        d.running.push(id);
        d.admitted += admission;
        d.load += cpu;
    }

    /// Bandwidth mode: copies that are complete by `t` switch the task to its destination.
    fn land_migrations(&mut self, t: u32) {
        let mut i = 0;
        while i < self.in_flight.len() {
            let id = self.in_flight[i];
            match self.live[id as usize].arrives {
                Some((at, dst)) if at <= t => {
                    self.in_flight.swap_remove(i);
                    let src = self.live[id as usize].machine;
                    self.relocate(id, src, dst);
                }
                Some(_) => i += 1,
                None => {
                    self.in_flight.swap_remove(i); // the task finished during its copy
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
            let load = self.machines[mi].load.max(0.0);
            self.sum.task_steps += self.machines[mi].running.len() as u64;
            loads.push(load);
            load_sum += load;
            over_sum += (load - cap).max(0.0);
            let service = if load > cap {
                step * (1.0 - self.cfg.overload_penalty)
            } else {
                step
            };
            let (mut admitted, mut new_load, mut freed) = (0.0, 0.0, false);
            let mut i = 0;
            while i < self.machines[mi].running.len() {
                let id = self.machines[mi].running[i];
                let task = &mut self.live[id as usize];
                task.remaining -= service;
                if task.remaining <= 0.0 {
                    self.machines[mi].running.swap_remove(i);
                    task.arrives = None;
                    let submit = self.runs[task.run as usize].submit;
                    self.duration_total += f64::from(next_t - submit);
                    self.sum.completed += 1;
                    self.free.push(id);
                    freed = true;
                    continue;
                }
                new_load += f64::from(self.usage_at(id, next_t).cpu);
                let admission = self.admission_load(id);
                self.live[id as usize].admission = admission;
                admitted += admission;
                i += 1;
            }
            // Recomputed from scratch each step, so no rounding drift accumulates.
            let m = &mut self.machines[mi];
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
