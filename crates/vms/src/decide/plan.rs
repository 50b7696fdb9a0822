//! Spec 003 §2.4 (reconstructed: the paper's method is lost): where every VM should be, which
//! VMs move, in which order and how many at once. Pure: a cluster in, a plan out.
//!
//! 1. **Place** (`place`): the spec's "cluster, then deal": VMs are taken heaviest first (their
//!    load is the larger of their shares of an SSD's IOPS and bandwidth) and each goes to the
//!    host that then carries the least SSD load — so heavy and light VMs are dealt evenly, the
//!    same outcome as dealing each k-means load level round-robin, without choosing a k. A VM
//!    of a `spread` application goes first to a host holding the fewest of its application's
//!    VMs, then by load: its VMs end on distinct hosts, or as evenly as they can. A host whose
//!    SSD would overflow (cache slices over its capacity) is not a candidate; IOPS and bandwidth
//!    may be exceeded when nothing else fits, and the plan says so (`violations`).
//! 2. **Relabel** (`relabel`): hosts of the same SSD are interchangeable, so the placement's
//!    host groups are matched to real hosts, most VMs already there first: only VMs whose host
//!    really changes move, and a placement that is a relabelling of the current one needs none.
//! 3. **Order** (`order_moves`): the moves off the most loaded SSD first, smallest (cache +
//!    memory) first among those; then dealt into waves of at most `per_host` migrations touching
//!    any one host and `per_cluster` in all. Each migration runs under `bw_cap` of the link.

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};

use super::model::{logical_distance, Cluster, Preference};
use colosched_core::Rng;

/// Settings of the planner; every one is a reconstruction (spec 003 §2.4), named as such in
/// docs/vm-placement.md.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlanParams {
    /// Migrations at once that touch one host (as source or destination); the paper runs one.
    pub per_host: usize,
    /// Migrations at once in the whole cluster.
    pub per_cluster: usize,
    /// A migration's share of the link (the paper measured 40 %).
    pub bw_cap: f64,
    /// A new placement is worth its moves only if it lowers the most loaded SSD's utilisation by
    /// this much, or raises some `spread` application's logical distance (hysteresis).
    pub min_gain: f64,
    /// When placing, a VM's own host counts as this much less loaded (a share of an SSD): among
    /// hosts about as loaded, it stays, so light VMs are not swapped for nothing.
    pub stickiness: f64,
}

impl Default for PlanParams {
    fn default() -> Self {
        PlanParams {
            per_host: 1,
            per_cluster: 4,
            bw_cap: 0.4,
            min_gain: 0.05,
            stickiness: 0.05,
        }
    }
}

/// One live migration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Move {
    pub vm: usize,
    pub from: usize,
    pub to: usize,
}

/// A constraint the target placement breaks because nothing better fits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Violation {
    /// Cache slices over the SSD's capacity (MB asked, MB there).
    Capacity { host: usize, mb: f64, capacity: f64 },
    /// Demand over the SSD's IOPS or bandwidth (utilisation > 1).
    Throughput { host: usize, utilisation: f64 },
    /// A `spread` application with two VMs on one host although it has no more VMs than there
    /// are hosts, or less evenly than it could be.
    Spread {
        app: usize,
        distance: usize,
        best: usize,
    },
}

/// What the planner decided for one window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// Host of every VM after the moves.
    pub target: Vec<usize>,
    /// The moves, in waves that may run at the same time.
    pub waves: Vec<Vec<Move>>,
    pub violations: Vec<Violation>,
    /// Why nothing moves, when nothing does.
    pub reason: Option<String>,
}

impl Plan {
    pub fn moves(&self) -> usize {
        self.waves.iter().map(Vec::len).sum()
    }
}

/// The largest logical distance `n` VMs can have on `hosts` hosts: as even as possible.
pub fn best_distance(n: usize, hosts: usize) -> usize {
    let pairs = n * n.saturating_sub(1) / 2;
    let (q, r) = (n / hosts.max(1), n % hosts.max(1));
    let same = r * (q + 1) * q / 2 + (hosts.max(1) - r) * q * q.saturating_sub(1) / 2;
    pairs - same
}

/// Step 1: where every VM should be; where it is counts only through `stickiness`.
pub fn place(cluster: &Cluster, params: &PlanParams) -> Vec<usize> {
    let n = cluster.hosts.len();
    let mut order: Vec<usize> = (0..cluster.vms.len()).collect();
    // Heaviest first (load on the first host: hosts of other SSDs only rescale it); ties by
    // index, so the placement is a function of the cluster alone.
    order.sort_by(|&a, &b| {
        cluster
            .load(b, 0)
            .partial_cmp(&cluster.load(a, 0))
            .unwrap_or(Ordering::Equal)
            .then(a.cmp(&b))
    });
    let mut target = vec![usize::MAX; cluster.vms.len()];
    let mut load = vec![0.0; n];
    let mut cache = vec![0.0; n];
    let mut members = vec![vec![0usize; cluster.apps.len()]; n];
    for vm in order {
        let v = &cluster.vms[vm];
        let spread = v
            .app
            .filter(|&a| cluster.apps[a].preference == Preference::Spread);
        let fits = |h: usize| cache[h] + v.cache_mb <= cluster.hosts[h].ssd_capacity_mb;
        let key = |h: usize| {
            let same = spread.map_or(0, |a| members[h][a]);
            let stay = if h == v.host { params.stickiness } else { 0.0 };
            (!fits(h), same, load[h] + cluster.load(vm, h) - stay)
        };
        let best = (0..n)
            .min_by(|&a, &b| {
                let (ka, kb) = (key(a), key(b));
                (ka.0, ka.1)
                    .cmp(&(kb.0, kb.1))
                    .then(ka.2.partial_cmp(&kb.2).unwrap_or(Ordering::Equal))
                    .then(a.cmp(&b))
            })
            .expect("a cluster has hosts");
        target[vm] = best;
        load[best] += cluster.load(vm, best);
        cache[best] += v.cache_mb;
        if let Some(a) = v.app {
            members[best][a] += 1;
        }
    }
    target
}

/// Step 2: renames the hosts of `target` among hosts of the same SSD so that as many VMs as
/// possible stay where they are (`current`). Greedy on the overlap, largest first: exact when
/// `target` is a relabelling of `current`, close otherwise.
pub fn relabel(cluster: &Cluster, current: &[usize], target: &[usize]) -> Vec<usize> {
    let n = cluster.hosts.len();
    let same_ssd = |a: usize, b: usize| {
        let (x, y) = (&cluster.hosts[a], &cluster.hosts[b]);
        (x.ssd_capacity_mb, x.ssd_iops, x.ssd_bw_mbps)
            == (y.ssd_capacity_mb, y.ssd_iops, y.ssd_bw_mbps)
    };
    let mut overlap = vec![vec![0usize; n]; n]; // [group of target][real host]
    for (&t, &c) in target.iter().zip(current) {
        overlap[t][c] += 1;
    }
    let mut pairs: Vec<(usize, usize, usize)> = (0..n)
        .flat_map(|g| (0..n).map(move |h| (g, h)))
        .filter(|&(g, h)| same_ssd(g, h))
        .map(|(g, h)| (overlap[g][h], g, h))
        .collect();
    // Most overlap first; then a group keeps its own host; then by index.
    pairs.sort_by(|a, b| {
        b.0.cmp(&a.0)
            .then((a.1 != a.2).cmp(&(b.1 != b.2)))
            .then((a.1, a.2).cmp(&(b.1, b.2)))
    });
    let mut host_of = vec![usize::MAX; n];
    let mut taken = vec![false; n];
    for (_, g, h) in pairs {
        if host_of[g] == usize::MAX && !taken[h] {
            host_of[g] = h;
            taken[h] = true;
        }
    }
    target.iter().map(|&g| host_of[g]).collect()
}

/// What `placement` breaks: SSD capacity, IOPS or bandwidth, and `spread` applications below
/// their best logical distance.
pub fn violations(cluster: &Cluster, placement: &[usize]) -> Vec<Violation> {
    let mut out = Vec::new();
    for (host, (&(mb, _, _), u)) in cluster
        .demand(placement)
        .iter()
        .zip(cluster.utilisation(placement))
        .enumerate()
    {
        let capacity = cluster.hosts[host].ssd_capacity_mb;
        if mb > capacity {
            out.push(Violation::Capacity { host, mb, capacity });
        }
        if u > 1.0 {
            out.push(Violation::Throughput {
                host,
                utilisation: u,
            });
        }
    }
    for (app, a) in cluster.apps.iter().enumerate() {
        if a.preference == Preference::Spread {
            let n = cluster.vms.iter().filter(|v| v.app == Some(app)).count();
            let (distance, best) = (
                logical_distance(cluster, placement, app),
                best_distance(n, cluster.hosts.len()),
            );
            if distance < best {
                out.push(Violation::Spread {
                    app,
                    distance,
                    best,
                });
            }
        }
    }
    out
}

/// Step 3: the moves from `current` to `target`, ordered and dealt into waves.
pub fn order_moves(
    cluster: &Cluster,
    current: &[usize],
    target: &[usize],
    params: &PlanParams,
) -> Vec<Vec<Move>> {
    let util = cluster.utilisation(current);
    let mut moves: Vec<Move> = (0..current.len())
        .filter(|&v| current[v] != target[v])
        .map(|vm| Move {
            vm,
            from: current[vm],
            to: target[vm],
        })
        .collect();
    let size = |m: &Move| cluster.vms[m.vm].cache_mb + cluster.vms[m.vm].mem_mb;
    moves.sort_by(|a, b| {
        util[b.from]
            .partial_cmp(&util[a.from])
            .unwrap_or(Ordering::Equal)
            .then(size(a).partial_cmp(&size(b)).unwrap_or(Ordering::Equal))
            .then(a.vm.cmp(&b.vm))
    });
    let (per_host, per_cluster) = (params.per_host.max(1), params.per_cluster.max(1));
    let mut waves: Vec<Vec<Move>> = Vec::new();
    let mut busy: Vec<Vec<usize>> = Vec::new(); // per wave, migrations touching each host
    for m in moves {
        let fits = |w: &Vec<Move>, b: &Vec<usize>| {
            w.len() < per_cluster && b[m.from] < per_host && b[m.to] < per_host
        };
        let i = match (0..waves.len()).find(|&i| fits(&waves[i], &busy[i])) {
            Some(i) => i,
            None => {
                waves.push(Vec::new());
                busy.push(vec![0; cluster.hosts.len()]);
                waves.len() - 1
            }
        };
        busy[i][m.from] += 1;
        busy[i][m.to] += 1;
        waves[i].push(m);
    }
    waves
}

/// One window of spec 003's planner: place, relabel, keep the current placement unless the new
/// one is worth its moves (`min_gain`), order the moves.
pub fn plan(cluster: &Cluster, params: &PlanParams) -> Plan {
    let current = cluster.placement();
    let target = relabel(cluster, &current, &place(cluster, params));
    if target == current {
        return Plan {
            violations: violations(cluster, &current),
            target: current,
            waves: Vec::new(),
            reason: Some("the placement is already the planner's".to_string()),
        };
    }
    let peak = |p: &[usize]| cluster.utilisation(p).into_iter().fold(0.0, f64::max);
    let (now, then) = (peak(&current), peak(&target));
    let spread_gain = (0..cluster.apps.len()).any(|a| {
        cluster.apps[a].preference == Preference::Spread
            && logical_distance(cluster, &target, a) > logical_distance(cluster, &current, a)
    });
    let (broken_now, broken_then) = (violations(cluster, &current), violations(cluster, &target));
    if spread_gain || broken_then.len() < broken_now.len() || now - then >= params.min_gain {
        return Plan {
            violations: broken_then,
            waves: order_moves(cluster, &current, &target, params),
            target,
            reason: None,
        };
    }
    Plan {
        violations: broken_now,
        target: current,
        waves: Vec::new(),
        reason: Some(format!(
            "not worth moving: the busiest SSD would go from {now:.2} to {then:.2} (min_gain \
             {:.2}), no spread application gains, no limit is fixed",
            params.min_gain
        )),
    }
}

/// Spec 003 §2.2's baseline: one VM chosen at random moves to another host chosen at random.
pub fn random_move(cluster: &Cluster, rng: &mut Rng) -> Option<Move> {
    let n = cluster.hosts.len();
    if cluster.vms.is_empty() || n < 2 {
        return None;
    }
    let vm = rng.below(cluster.vms.len());
    let from = cluster.vms[vm].host;
    let to = (from + 1 + rng.below(n - 1)) % n;
    Some(Move { vm, from, to })
}
