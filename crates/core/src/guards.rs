//! The node agent's guards around any planner, so the simulator can replay what the agent would
//! decide (`colosched sim cluster --guards agent`) with the very rules the agent applies:
//!
//! - **hysteresis**: a node is pressured only after `hysteresis` looks in a row at or above
//!   `threshold`;
//! - **never onto a pressured node**, and **minimum improvement**: a move off a pressured node
//!   must lower the load by at least `min_improvement` (no ping-pong between two busy nodes); a
//!   move off a calm node must not make things worse;
//! - **cool-down**: a task moved less than `cooldown` cycles ago is not migratable.
//!
//! Pure: the caller gives the cycle number (the simulator's step, the agent's sample count).

use std::collections::HashMap;
use std::hash::Hash;

use crate::{Cell, Limits, Move, Planner, Rng, TaskId};

/// The guards' settings as people write them, with their one `Default`: the node agent's config
/// (`[sensor] hysteresis`, `[limits] min_improvement`, `cooldown_s`) and the cluster simulator's
/// `guard_*` parameters start from it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GuardSettings {
    pub hysteresis: u32,
    pub min_improvement: f64,
    /// Seconds a moved task stays put.
    pub cooldown_s: u32,
}

impl Default for GuardSettings {
    fn default() -> Self {
        GuardSettings {
            hysteresis: 2,
            min_improvement: 0.1,
            cooldown_s: 10,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Guards {
    /// A node is over at this load (the agent's sensor threshold).
    pub threshold: f64,
    /// Looks in a row over `threshold` before a node counts as pressured (≥ 1).
    pub hysteresis: u32,
    pub min_improvement: f64,
    /// Cycles a moved task stays put.
    pub cooldown: u64,
}

/// Keeps the planned moves that go onto no pressured node and gain enough; returns them and how
/// many were dropped.
pub fn filter(
    planned: Vec<Move>,
    loads: &[f64],
    over: &[bool],
    min_improvement: f64,
) -> (Vec<Move>, usize) {
    let before = planned.len();
    let kept: Vec<Move> = planned
        .into_iter()
        .filter(|m| {
            let needed = if over[m.from] { min_improvement } else { 0.0 };
            !over[m.to] && loads[m.from] - loads[m.to] >= needed
        })
        .collect();
    let dropped = before - kept.len();
    (kept, dropped)
}

/// Consecutive looks over the threshold, per node.
#[derive(Clone, Debug, Default)]
pub struct Hysteresis {
    streak: Vec<u32>,
}

impl Hysteresis {
    /// Counts this look; returns which nodes have been over `threshold` for `needed` looks.
    pub fn look(&mut self, loads: &[f64], threshold: f64, needed: u32) -> Vec<bool> {
        self.streak.resize(loads.len(), 0);
        for (s, &l) in self.streak.iter_mut().zip(loads) {
            *s = if l >= threshold { *s + 1 } else { 0 };
        }
        self.streak.iter().map(|&s| s >= needed.max(1)).collect()
    }

    pub fn reset(&mut self) {
        self.streak.clear();
    }
}

/// A planner with the agent's guards, for the simulator. Cells are told apart by their place
/// in the cycle (`plan_at`); a cell not looked at in the previous cycle starts its streaks anew.
/// Tasks moved recently, which may not move again until `span` has passed. Time is a number in
/// the caller's unit: cycles in the simulator, milliseconds in the agent.
#[derive(Clone, Debug)]
pub struct Cooldown<K> {
    pub span: u64,
    moved_at: HashMap<K, u64>,
}

impl<K: Hash + Eq> Cooldown<K> {
    pub fn new(span: u64) -> Cooldown<K> {
        Cooldown {
            span,
            moved_at: HashMap::new(),
        }
    }

    /// `task` moved at `now`.
    pub fn moved(&mut self, task: K, now: u64) {
        self.moved_at.insert(task, now);
    }

    /// Whether `task` moved less than `span` before `now`.
    pub fn cooling(&self, task: &K, now: u64) -> bool {
        (self.moved_at.get(task)).is_some_and(|&at| now.saturating_sub(at) < self.span)
    }

    /// Forgets the tasks that are no longer cooling at `now`, and those `keep` says no to.
    pub fn expire(&mut self, now: u64, keep: impl Fn(&K) -> bool) {
        let span = self.span;
        (self.moved_at).retain(|k, &mut at| now.saturating_sub(at) < span && keep(k));
    }
}

pub struct Guarded<P> {
    pub inner: P,
    pub guards: Guards,
    cells: HashMap<usize, (u64, Hysteresis)>,
    /// The cycle of the previous look at any cell, and of the look before that cycle.
    cycles: (u64, u64),
    cooldown: Cooldown<TaskId>,
}

impl<P: Planner> Guarded<P> {
    pub fn new(inner: P, guards: Guards) -> Guarded<P> {
        Guarded {
            inner,
            guards,
            cells: HashMap::new(),
            cycles: (u64::MAX, u64::MAX),
            cooldown: Cooldown::new(guards.cooldown),
        }
    }
}

impl<P: Planner> Planner for Guarded<P> {
    fn name(&self) -> String {
        format!("{}+guards", self.inner.name())
    }

    fn plan(&mut self, cell: &Cell, limits: &Limits, rng: &mut Rng, cycle: u64) -> Vec<Move> {
        self.plan_at(0, cell, limits, rng, cycle)
    }

    fn plan_at(
        &mut self,
        at: usize,
        cell: &Cell,
        limits: &Limits,
        rng: &mut Rng,
        cycle: u64,
    ) -> Vec<Move> {
        if cycle != self.cycles.0 {
            self.cycles = (cycle, self.cycles.0);
            self.cooldown.expire(cycle, |_| true);
        }
        let previous = self.cycles.1;
        let (last, hysteresis) = self.cells.entry(at).or_default();
        if *last != previous {
            hysteresis.reset();
        }
        *last = cycle;
        let loads: Vec<f64> = cell.nodes.iter().map(|n| n.load).collect();
        let g = self.guards;
        let over = hysteresis.look(&loads, g.threshold, g.hysteresis);
        if !over.contains(&true) {
            return Vec::new();
        }
        // Cooling tasks are left out of the planner's view.
        let mut view = cell.clone();
        for node in &mut view.nodes {
            node.tasks.retain(|t| !self.cooldown.cooling(&t.id, cycle));
        }
        let planned = self.inner.plan_at(at, &view, limits, rng, cycle);
        let (kept, _) = filter(planned, &loads, &over, g.min_improvement);
        for m in &kept {
            self.cooldown.moved(m.task, cycle);
        }
        kept
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Node, Policy, Task};

    fn task(id: u64, cpu: f64) -> Task {
        Task {
            id,
            index: 0,
            priority: 0,
            cpu_request: cpu,
            cpu_usage: cpu,
            max_cpu: cpu,
            mem_usage: 1.0,
            mai: 0.0,
        }
    }

    fn cell(loads: &[f64]) -> Cell {
        Cell {
            nodes: loads
                .iter()
                .enumerate()
                .map(|(i, &load)| Node {
                    load,
                    tasks: vec![task(i as u64 * 10, 0.01)],
                })
                .collect(),
        }
    }

    #[test]
    fn filter_keeps_only_moves_off_pressure_that_gain_enough() {
        let m = |from, to| Move {
            task: 1,
            from,
            to,
            rank: 0,
        };
        let loads = [0.9, 0.85, 0.2, 0.3];
        let over = [true, true, false, false];
        let (kept, dropped) = filter(
            vec![m(0, 2), m(0, 1), m(1, 0), m(2, 3), m(3, 2)],
            &loads,
            &over,
            0.1,
        );
        assert_eq!(
            kept,
            vec![m(0, 2), m(3, 2)],
            "onto pressure, too little gain, or worse"
        );
        assert_eq!(dropped, 3);
    }

    #[test]
    fn hysteresis_cooldown_and_cells_for_the_simulator() {
        let limits = Limits {
            send_over_warning: false,
            migratable_priority_below: 1,
            migratable_cpu_below: f64::INFINITY,
            min_profit: 0.0,
            max_profit: f64::INFINITY,
            max_profit_share: None,
            warning_threshold: 1.0,
            ..Limits::default()
        };
        let guards = Guards {
            threshold: 0.5,
            hysteresis: 2,
            min_improvement: 0.1,
            cooldown: 30,
        };
        let mut g = Guarded::new(Policy::Coarse, guards);
        let mut rng = Rng::new(1);
        let hot = cell(&[0.9, 0.1]);
        assert!(
            g.plan_at(0, &hot, &limits, &mut rng, 10).is_empty(),
            "one look over: not yet"
        );
        // Another cell looked at in between does not disturb cell 0's streak.
        assert!(g
            .plan_at(1, &cell(&[0.1, 0.1]), &limits, &mut rng, 10)
            .is_empty());
        let moved = g.plan_at(0, &hot, &limits, &mut rng, 20);
        assert_eq!(
            moved.len(),
            1,
            "second look in a row: coarse moves node 0's task"
        );
        assert_eq!((moved[0].task, moved[0].from, moved[0].to), (0, 0, 1));
        // Still hot at 30: task 0 is cooling (moved at 20, cool-down 30), nothing else to move.
        assert!(g.plan_at(0, &hot, &limits, &mut rng, 30).is_empty());
        assert_eq!(
            g.plan_at(0, &hot, &limits, &mut rng, 50).len(),
            1,
            "cooled down"
        );
        // Cell 1 was not looked at in cycle 50: its streak starts anew.
        let hot1 = cell(&[0.1, 0.9]);
        assert!(g.plan_at(1, &hot1, &limits, &mut rng, 60).is_empty());
        assert!(g.plan_at(1, &hot1, &limits, &mut rng, 70).len() == 1);
        assert_eq!(g.name(), "coarse+guards");
    }
}
