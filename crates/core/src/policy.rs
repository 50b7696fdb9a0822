//! Rebalancing policies over one cell (thesis §4.3, spec 000 §2.3–2.6).
//!
//! - `coarse` (Algorithm 4-1): every other node sends all its migratable tasks to the least
//!   loaded node, when they fit.
//! - `fine` (Algorithm 4-2/4-3): the two least loaded nodes receive; every other node fills the
//!   first, then the second, taking tasks in `Order` until the next one does not fit.
//! - `random` (spec 003's baseline): every `every` cycles, one random migratable task goes to a
//!   random other node of the cell, if it fits under the warning line.
//!
//! Coarse and fine share the thesis's rules (`Limits`): only a node at or above the warning line
//! sends; a receiver may end at most at min(warning line, its sender's load); a batch moves only
//! if `is_useful_migrate` holds. Loads are updated after each accepted batch, so later sources in
//! the same cycle see them.

use crate::{Cell, Move, Rng, Task};

/// The thresholds a policy respects. Defaults are the thesis's text (spec 000 §2.3, the issue's
/// reading of `simulator.py` where the text is silent).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limits {
    /// No move may push a receiving node's load above this (`warning_threshold` = `cap` = 0.5).
    pub warning_threshold: f64,
    /// A node sends only when its load is at or above `warning_threshold` (thesis: only nodes
    /// over the warning line give tasks away).
    pub send_over_warning: bool,
    /// Migratable = priority < this (the text: 2, the "free" band; the code: 3, i.e. ≤ 2) ...
    pub migratable_priority_below: u8,
    /// ... and this CPU figure of the task (the text: its peak usage; the code: its request) ...
    pub migratable_cpu: MigratableCpu,
    /// ... below this (0.025) ...
    pub migratable_cpu_below: f64,
    /// ... and, if set, only tasks with an even `Task::index` (the code's `simulator.py`; the
    /// text has no such rule).
    pub migratable_even_index: bool,
    /// How coarse picks each sender's receiver.
    pub receiver: Receiver,
    /// `is_useful_migrate`: a batch moves only if its CPU usage is at least `min_profit` (0.02,
    /// 4 % of capacity), at most `max_profit` (0.5) and, if set, at most `max_profit_share` of
    /// its sender's load (0.8).
    pub min_profit: f64,
    pub max_profit: f64,
    pub max_profit_share: Option<f64>,
    /// At most this many moves per cell per cycle.
    pub max_moves: usize,
    /// A receiver may end at most at its sender's load (as well as under the warning line), for
    /// coarse as for fine (`can_hold`). Off where loads do not include what moves (loads that
    /// measure pressure from other work, which elastic tasks do not add to): `guards::filter`'s
    /// improvement rule then keeps moves from overshooting.
    pub cap_at_source_load: bool,
}

/// How coarse picks the node a sender's tasks go to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Receiver {
    /// The least loaded node at the start of the cycle, for every sender (the thesis's text,
    /// Algorithm 4-1's `low`).
    Fixed,
    /// For each sender in turn, the least loaded node at that moment (loads include the batches
    /// already moved this cycle), if it is less loaded than the sender (the thesis's code).
    Live,
}

/// Which CPU figure of a task the migratable test compares with `migratable_cpu_below`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MigratableCpu {
    /// Peak CPU usage of the current window (the thesis's text: "max CPU usage").
    MaxCpu,
    /// CPU request (the thesis's `simulator.py`).
    Request,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            warning_threshold: 0.5,
            send_over_warning: true,
            migratable_priority_below: 2,
            migratable_cpu: MigratableCpu::MaxCpu,
            migratable_cpu_below: 0.025,
            migratable_even_index: false,
            receiver: Receiver::Fixed,
            min_profit: 0.02,
            max_profit: 0.5,
            max_profit_share: Some(0.8),
            max_moves: usize::MAX,
            cap_at_source_load: true,
        }
    }
}

impl Limits {
    pub fn is_migratable(&self, t: &Task) -> bool {
        let cpu = match self.migratable_cpu {
            MigratableCpu::MaxCpu => t.max_cpu,
            MigratableCpu::Request => t.cpu_request,
        };
        t.priority < self.migratable_priority_below
            && cpu < self.migratable_cpu_below
            && (!self.migratable_even_index || t.index.is_multiple_of(2))
    }

    /// Whether a node with this load may give tasks away.
    pub fn sends(&self, load: f64) -> bool {
        !self.send_over_warning || load >= self.warning_threshold
    }

    /// The highest load a receiver may reach when taking tasks from a sender at `source_load`.
    fn receiver_limit(&self, source_load: f64) -> f64 {
        if self.cap_at_source_load {
            self.warning_threshold.min(source_load)
        } else {
            self.warning_threshold
        }
    }

    /// `is_useful_migrate`: is moving `util` of CPU away from a sender at `source_load` worth it?
    pub fn is_useful(&self, util: f64, source_load: f64) -> bool {
        util >= self.min_profit
            && util <= self.max_profit
            && self
                .max_profit_share
                .is_none_or(|share| util <= share * source_load)
    }
}

/// In which order a fine-grained source offers its tasks (ascending unless named otherwise).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// The thesis's unsorted `pop()`: a random order.
    Random,
    CpuRequest,
    CpuUsage,
    MemUsage,
    /// CPU usage descending (the thesis's "1/cpu_usage").
    CpuUsageDesc,
    /// Memory accesses per instruction (the thesis's "cache_misses").
    CacheMisses,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    NoMigration,
    Coarse,
    Fine(Order),
    Random { every: u64 },
}

/// Anything that plans moves for a cell: the built-in policies, or a user's (e.g. Python) one.
pub trait Planner {
    fn name(&self) -> String;
    fn plan(&mut self, cell: &Cell, limits: &Limits, rng: &mut Rng, cycle: u64) -> Vec<Move>;
    /// `plan` for the cell at place `at` of the cycle (the simulator's cell index), for a
    /// planner that keeps something per cell (`guards::Guarded`); others ignore it.
    fn plan_at(
        &mut self,
        at: usize,
        cell: &Cell,
        limits: &Limits,
        rng: &mut Rng,
        cycle: u64,
    ) -> Vec<Move> {
        let _ = at;
        self.plan(cell, limits, rng, cycle)
    }
    /// Whether `plan` reads the tasks of a node with this load. A node it does not read may be
    /// handed to it without its tasks (the simulator then skips building them), so a planner
    /// answers false only where its plan is the same either way. Any planner may answer true.
    fn reads_tasks(&self, load: f64, limits: &Limits) -> bool {
        let _ = (load, limits);
        true
    }
}

/// A planner borrowed is a planner (so a wrapper such as `Guarded` can hold `&mut dyn Planner`).
impl<P: Planner + ?Sized> Planner for &mut P {
    fn name(&self) -> String {
        (**self).name()
    }
    fn plan(&mut self, cell: &Cell, limits: &Limits, rng: &mut Rng, cycle: u64) -> Vec<Move> {
        (**self).plan(cell, limits, rng, cycle)
    }
    fn plan_at(
        &mut self,
        at: usize,
        cell: &Cell,
        limits: &Limits,
        rng: &mut Rng,
        cycle: u64,
    ) -> Vec<Move> {
        (**self).plan_at(at, cell, limits, rng, cycle)
    }
    fn reads_tasks(&self, load: f64, limits: &Limits) -> bool {
        (**self).reads_tasks(load, limits)
    }
}

/// The 8 policies of the thesis's Fig. 5-4, in its x-axis order.
pub const THESIS_POLICIES: [&str; 8] = [
    "no_migration",
    "coarse",
    "fine",
    "fine:cpu_request",
    "fine:cpu_usage",
    "fine:mem_usage",
    "fine:-cpu_usage",
    "fine:cache_misses",
];

const ORDERS: [(&str, Order); 5] = [
    ("cpu_request", Order::CpuRequest),
    ("cpu_usage", Order::CpuUsage),
    ("mem_usage", Order::MemUsage),
    ("-cpu_usage", Order::CpuUsageDesc),
    ("cache_misses", Order::CacheMisses),
];

/// Default interval of the `random` policy, in cycles.
pub const RANDOM_EVERY: u64 = 10;

impl Policy {
    /// Parses `no_migration`, `coarse`, `fine`, `fine:<order>`, `random` or `random:<cycles>`.
    pub fn parse(name: &str) -> Result<Policy, String> {
        let bad = || {
            format!(
                "unknown policy {name:?}; known: {}, random, random:<cycles>",
                THESIS_POLICIES.join(", ")
            )
        };
        match name.split_once(':') {
            None => match name {
                "no_migration" => Ok(Policy::NoMigration),
                "coarse" => Ok(Policy::Coarse),
                "fine" => Ok(Policy::Fine(Order::Random)),
                "random" => Ok(Policy::Random {
                    every: RANDOM_EVERY,
                }),
                _ => Err(bad()),
            },
            Some(("fine", key)) => ORDERS
                .iter()
                .find(|(k, _)| *k == key)
                .map(|&(_, o)| Policy::Fine(o))
                .ok_or_else(bad),
            Some(("random", every)) => match every.parse::<u64>() {
                Ok(every) if every > 0 => Ok(Policy::Random { every }),
                _ => Err(format!(
                    "policy {name:?}: random:<cycles> needs a positive integer"
                )),
            },
            Some(_) => Err(bad()),
        }
    }
}

impl std::fmt::Display for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Policy::NoMigration => f.write_str("no_migration"),
            Policy::Coarse => f.write_str("coarse"),
            Policy::Fine(Order::Random) => f.write_str("fine"),
            Policy::Fine(o) => {
                let key = ORDERS.iter().find(|(_, x)| x == o).map(|(k, _)| *k);
                write!(f, "fine:{}", key.unwrap_or("?"))
            }
            Policy::Random { every } if *every == RANDOM_EVERY => f.write_str("random"),
            Policy::Random { every } => write!(f, "random:{every}"),
        }
    }
}

impl Planner for Policy {
    fn name(&self) -> String {
        self.to_string()
    }

    fn plan(&mut self, cell: &Cell, limits: &Limits, rng: &mut Rng, cycle: u64) -> Vec<Move> {
        match *self {
            Policy::NoMigration => Vec::new(),
            Policy::Coarse => coarse(cell, limits),
            Policy::Fine(order) => fine(cell, limits, order, rng),
            Policy::Random { every } if cycle.is_multiple_of(every) => random(cell, limits, rng),
            Policy::Random { .. } => Vec::new(),
        }
    }

    /// Coarse and fine read only senders' tasks, and a sender is over the line.
    fn reads_tasks(&self, load: f64, limits: &Limits) -> bool {
        match self {
            Policy::NoMigration => false,
            Policy::Coarse | Policy::Fine(_) => limits.sends(load),
            Policy::Random { .. } => true,
        }
    }
}

impl Policy {
    /// The nodes this policy would make receivers for these loads: coarse's least loaded node,
    /// fine's two least loaded (one in a cell of two). The agent pins unpinned tasks it finds
    /// already on a receiver, so it asks the policy rather than repeating the rule.
    pub fn receivers(&self, loads: &[f64]) -> Vec<usize> {
        let ranked = by_load(loads);
        match self {
            Policy::Coarse => ranked.into_iter().take(1).collect(),
            Policy::Fine(_) => fine_receivers(&ranked).to_vec(),
            Policy::NoMigration | Policy::Random { .. } => Vec::new(),
        }
    }
}

fn fine_receivers(ranked: &[usize]) -> &[usize] {
    &ranked[..ranked.len().saturating_sub(1).min(2)]
}

/// Node indices sorted by load, ties by index (so plans are deterministic).
fn by_load(loads: &[f64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..loads.len()).collect();
    order.sort_by(|&a, &b| loads[a].total_cmp(&loads[b]).then(a.cmp(&b)));
    order
}

/// The least loaded node other than `node` (ties: the lowest index).
fn least_loaded_other(loads: &[f64], node: usize) -> Option<usize> {
    (0..loads.len())
        .filter(|&n| n != node)
        .min_by(|&a, &b| loads[a].total_cmp(&loads[b]).then(a.cmp(&b)))
}

fn migratable<'a>(cell: &'a Cell, node: usize, limits: &Limits) -> Vec<&'a Task> {
    cell.nodes[node]
        .tasks
        .iter()
        .filter(|t| limits.is_migratable(t))
        .collect()
}

/// Algorithm 4-1: each sender gives all its migratable tasks to its receiver (`Receiver`), or
/// none.
fn coarse(cell: &Cell, limits: &Limits) -> Vec<Move> {
    let mut loads: Vec<f64> = cell.nodes.iter().map(|n| n.load).collect();
    let Some(&first) = by_load(&loads).first() else {
        return Vec::new();
    };
    let mut moves = Vec::new();
    for src in 0..loads.len() {
        let low = match limits.receiver {
            Receiver::Fixed if src == first => continue,
            Receiver::Fixed => first,
            Receiver::Live => match least_loaded_other(&loads, src) {
                Some(low) if loads[low] < loads[src] => low,
                _ => continue,
            },
        };
        if !limits.sends(loads[src]) {
            continue;
        }
        let removed = migratable(cell, src, limits);
        let util: f64 = removed.iter().map(|t| t.cpu_usage).sum();
        let fits = loads[low] + util <= limits.receiver_limit(loads[src]);
        if fits
            && limits.is_useful(util, loads[src])
            && moves.len() + removed.len() <= limits.max_moves
        {
            moves.extend(removed.iter().map(|t| Move {
                task: t.id,
                from: src,
                to: low,
                rank: 0,
            }));
            loads[low] += util;
            loads[src] -= util;
        }
    }
    moves
}

/// Algorithms 4-2 (unsorted) and 4-3 (sorted). With a cell of two nodes only the least loaded
/// node receives (the other one is the only source).
fn fine(cell: &Cell, limits: &Limits, order: Order, rng: &mut Rng) -> Vec<Move> {
    let mut loads: Vec<f64> = cell.nodes.iter().map(|n| n.load).collect();
    let ranked = by_load(&loads);
    let receivers = fine_receivers(&ranked);
    let mut moves = Vec::new();
    for src in (0..loads.len()).filter(|n| !receivers.contains(n)) {
        // can_hold and is_useful_migrate look at the source's load as it was before it gave
        // anything (both batches are chosen before either moves).
        let source_load = loads[src];
        if !limits.sends(source_load) {
            continue;
        }
        let mut removed = migratable(cell, src, limits);
        sort_tasks(&mut removed, order, rng);
        let mut next = removed.into_iter().peekable();
        let limit = limits.receiver_limit(source_load);
        for (rank, &dst) in receivers.iter().enumerate() {
            let mut util = 0.0;
            let mut batch = Vec::new();
            while let Some(t) = next.next_if(|t| loads[dst] + util + t.cpu_usage <= limit) {
                util += t.cpu_usage;
                batch.push(t);
            }
            if limits.is_useful(util, source_load) && moves.len() + batch.len() <= limits.max_moves
            {
                let rank = rank as u8;
                moves.extend(batch.iter().map(|t| Move {
                    task: t.id,
                    from: src,
                    to: dst,
                    rank,
                }));
                loads[dst] += util;
                loads[src] -= util;
            }
        }
    }
    moves
}

fn sort_tasks(tasks: &mut [&Task], order: Order, rng: &mut Rng) {
    let key: fn(&Task) -> f64 = match order {
        Order::Random => return rng.shuffle(tasks),
        Order::CpuRequest => |t| t.cpu_request,
        Order::CpuUsage => |t| t.cpu_usage,
        Order::MemUsage => |t| t.mem_usage,
        Order::CpuUsageDesc => |t| -t.cpu_usage,
        Order::CacheMisses => |t| t.mai,
    };
    tasks.sort_by(|a, b| key(a).total_cmp(&key(b)).then(a.id.cmp(&b.id)));
}

/// One random migratable task to one random other node, if it fits under the warning line.
fn random(cell: &Cell, limits: &Limits, rng: &mut Rng) -> Vec<Move> {
    let n = cell.nodes.len();
    let sources: Vec<usize> = (0..n)
        .filter(|&i| cell.nodes[i].tasks.iter().any(|t| limits.is_migratable(t)))
        .collect();
    if n < 2 || sources.is_empty() || limits.max_moves == 0 {
        return Vec::new();
    }
    let src = sources[rng.below(sources.len())];
    let tasks = migratable(cell, src, limits);
    let task = tasks[rng.below(tasks.len())];
    let dst = (src + 1 + rng.below(n - 1)) % n;
    if cell.nodes[dst].load + task.cpu_usage > limits.warning_threshold {
        return Vec::new();
    }
    vec![Move {
        task: task.id,
        from: src,
        to: dst,
        rank: 0,
    }]
}

#[cfg(test)]
mod tests;
