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
//! 3. **Never worse** (`plan_with`): moves a cool-down forbids are dropped (`Recent`); moves
//!    are put back one at a time until the target adds no violation over today's (`added`:
//!    no host's cache slices further over its SSD, no more SSD demand beyond what the SSDs
//!    serve, no `spread` application less spread than both its best and today); moves that
//!    bring nothing are put back (`prune`). When the result still overflows some cache, a search
//!    (`fitting`) looks for a placement that fits every cache. A move back to the host a VM left
//!    within the cool-down (allowed when its demand changed by more than `tau`) stays only if
//!    it alone brings `min_gain` (`returns`).
//! 4. **Worth it**: the model (`Cluster::delivered`, the simulator's max-min sharing) must predict
//!    more delivered I/O (by `min_gain` of an SSD), and the gain over `hold_s` must exceed the
//!    moves' cost (`pays`) — unless the target fixes an overflowing cache or spreads an
//!    application further. Otherwise the plan is empty and says why (nothing saturated, the
//!    backend or a link the limit, too small a gain, does not pay).
//! 5. **Order** (`order_moves`): the moves off the most loaded SSD first, smallest (cache +
//!    memory) first among those; then dealt into waves of at most `per_host` migrations touching
//!    any one host and `per_cluster` in all, none into an SSD without room for the slices
//!    arriving (a rotation that cannot avoid it is reported, `transient`). Each migration runs
//!    under `bw_cap` of the link.

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};

use super::detect::distance;
use super::model::{logical_distance, Bound, Cluster, Preference};
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
    /// How long a new placement is expected to hold (s): what a move's gain is earned over.
    pub hold_s: f64,
    /// A VM is not moved back to the host it left for this long (s), unless its demand changed
    /// by more than the detector's `tau`.
    pub cooldown_s: f64,
    /// What a moved VM loses while it copies (the paper measured 7 %).
    pub slowdown: f64,
}

impl Default for PlanParams {
    fn default() -> Self {
        PlanParams {
            per_host: 1,
            per_cluster: 4,
            bw_cap: 0.4,
            min_gain: 0.05,
            stickiness: 0.05,
            hold_s: 600.0,
            cooldown_s: 1800.0,
            slowdown: 0.07,
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

/// A wave during which `host`'s SSD holds `mb` of cache slices on `capacity`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Transient {
    pub wave: usize,
    pub host: usize,
    pub mb: f64,
    pub capacity: f64,
}

/// What the planner decided for one window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// Host of every VM after the moves.
    pub target: Vec<usize>,
    /// The moves, in waves that may run at the same time.
    pub waves: Vec<Vec<Move>>,
    pub violations: Vec<Violation>,
    /// Waves during which an SSD holds more cache slices than it has room for (a migration
    /// holds its slice on both hosts): only when no order of the moves avoids it.
    pub transient: Vec<Transient>,
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
        // The first host of the smallest key (each key reckoned once).
        let later = |ka: (bool, usize, f64), kb: (bool, usize, f64)| {
            (ka.0, ka.1)
                .cmp(&(kb.0, kb.1))
                .then(ka.2.partial_cmp(&kb.2).unwrap_or(Ordering::Equal))
                == Ordering::Greater
        };
        let (mut best, mut kbest) = (0, key(0));
        for h in 1..n {
            let k = key(h);
            if later(kbest, k) {
                (best, kbest) = (h, k);
            }
        }
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

/// Step 4: the moves from `current` to `target`, ordered and dealt into waves. A migration
/// holds its cache slice on both hosts until it ends, so a wave takes a move only if its
/// destination then still has room for every slice arriving in the wave; when no move has room
/// (a rotation of full hosts), the one that overflows least goes alone and is reported as a
/// `Transient` violation. (Greedy: it finds an order without overflow whenever freeing one
/// host at a time suffices; the property tests check it never hides an overflow.)
pub fn order_moves(
    cluster: &Cluster,
    current: &[usize],
    target: &[usize],
    params: &PlanParams,
) -> (Vec<Vec<Move>>, Vec<Transient>) {
    let util = cluster.utilisation(current);
    let mut left: Vec<Move> = (0..current.len())
        .filter(|&v| current[v] != target[v])
        .map(|vm| Move {
            vm,
            from: current[vm],
            to: target[vm],
        })
        .collect();
    let size = |m: &Move| cluster.vms[m.vm].cache_mb + cluster.vms[m.vm].mem_mb;
    left.sort_by(|a, b| {
        util[b.from]
            .total_cmp(&util[a.from])
            .then(size(a).total_cmp(&size(b)))
            .then(a.vm.cmp(&b.vm))
    });
    let (per_host, per_cluster) = (params.per_host.max(1), params.per_cluster.max(1));
    let slice = |m: &Move| cluster.vms[m.vm].cache_mb;
    let capacity = |h: usize| cluster.hosts[h].ssd_capacity_mb;
    let mut held: Vec<f64> = cluster.demand(current).iter().map(|d| d.0).collect();
    let (mut waves, mut transient) = (Vec::new(), Vec::new());
    while !left.is_empty() {
        let (mut wave, mut busy, mut arriving) =
            (Vec::new(), vec![0; held.len()], vec![0.0; held.len()]);
        let mut rest = Vec::new();
        for m in left {
            let room = held[m.to] + arriving[m.to] + slice(&m) <= capacity(m.to) + 1e-9;
            if room && wave.len() < per_cluster && busy[m.from] < per_host && busy[m.to] < per_host
            {
                busy[m.from] += 1;
                busy[m.to] += 1;
                arriving[m.to] += slice(&m);
                wave.push(m);
            } else {
                rest.push(m);
            }
        }
        if wave.is_empty() {
            let over = |m: &Move| held[m.to] + slice(m) - capacity(m.to);
            let k = (0..rest.len())
                .min_by(|&a, &b| over(&rest[a]).total_cmp(&over(&rest[b])))
                .expect("moves left");
            let m = rest.remove(k);
            transient.push(Transient {
                wave: waves.len(),
                host: m.to,
                mb: held[m.to] + slice(&m),
                capacity: capacity(m.to),
            });
            wave.push(m);
        }
        for m in &wave {
            held[m.to] += slice(m);
            held[m.from] -= slice(m);
        }
        waves.push(wave);
        left = rest;
    }
    (waves, transient)
}

/// A placement's sums, kept up to date as VMs shift one at a time (each shift touches two
/// hosts and one application), against the current placement `now`: what it breaks beyond
/// what `now` breaks (`added`), the MB of cache slices over their SSDs (`overflow`), and what
/// the SSDs serve (`served`, each host's VMs' load held at its SSD's and link's capacity;
/// the exact model with the backend, `Cluster::delivered`, judges the final plan).
struct Sums<'a> {
    c: &'a Cluster,
    p: Vec<usize>,
    /// Each VM's `Cluster::mean_load`.
    mean: Vec<f64>,
    /// Per host: cache MB, IOPS, MB/s, link MB/s, mean-SSD load of its VMs.
    host: Vec<[f64; 5]>,
    /// Per host, its cache's overflow under `now`, relative to its capacity.
    over_now: Vec<f64>,
    /// Per `spread` application: its VMs per host, its logical distance, its floor (the lower
    /// of its best and its distance under `now`).
    count: Vec<Vec<usize>>,
    dist: Vec<usize>,
    floor: Vec<usize>,
    thr_now: f64,
    /// Σ per host of its terms (`terms`), and Σ per application of its shortfall.
    cap: f64,
    thr: f64,
    mb_over: f64,
    served: f64,
    short: f64,
}

impl<'a> Sums<'a> {
    fn new(c: &'a Cluster, now: &[usize], p: &[usize]) -> Sums<'a> {
        let (nh, na) = (c.hosts.len(), c.apps.len());
        let mut s = Sums {
            c,
            p: now.to_vec(),
            mean: c.mean_loads(),
            host: vec![[0.0; 5]; nh],
            over_now: vec![0.0; nh],
            count: vec![vec![0; nh]; na],
            dist: vec![0; na],
            floor: vec![0; na],
            thr_now: 0.0,
            cap: 0.0,
            thr: 0.0,
            mb_over: 0.0,
            served: 0.0,
            short: 0.0,
        };
        for (v, &h) in now.iter().enumerate() {
            s.add(v, h, 1.0);
        }
        for h in 0..nh {
            let cap = c.hosts[h].ssd_capacity_mb;
            s.over_now[h] = (s.host[h][0] - cap).max(0.0) / cap;
            s.count_host(h, 1.0);
        }
        s.thr_now = s.thr;
        for a in 0..na {
            let n: usize = s.count[a].iter().sum();
            s.dist[a] = (n * n - s.count[a].iter().map(|k| k * k).sum::<usize>()) / 2;
            s.floor[a] = best_distance(n, nh).min(s.dist[a]);
            if c.apps[a].preference != Preference::Spread {
                s.floor[a] = 0;
            }
        }
        for (v, &h) in p.iter().enumerate() {
            s.shift(v, h);
        }
        s
    }

    fn add(&mut self, v: usize, h: usize, sign: f64) {
        let vm = &self.c.vms[v];
        let x = [vm.cache_mb, vm.iops, vm.bw_mbps, vm.link_mbps, self.mean[v]];
        for (a, b) in self.host[h].iter_mut().zip(x) {
            *a += sign * b;
        }
        if let Some(a) = vm.app {
            if sign > 0.0 {
                self.count[a][h] += 1;
            } else {
                self.count[a][h] -= 1;
            }
        }
    }

    /// Host `h`'s cache overflow beyond `now`'s (relative), SSD demand beyond 1, MB over, and
    /// load served.
    /// Adds (`sign` 1) or takes out (−1) host `h`'s terms from the totals.
    fn count_host(&mut self, h: usize, sign: f64) {
        let t = self.terms(h);
        self.cap += sign * t[0];
        self.thr += sign * t[1];
        self.mb_over += sign * t[2];
        self.served += sign * t[3];
    }

    fn terms(&self, h: usize) -> [f64; 4] {
        let (x, host) = (&self.host[h], &self.c.hosts[h]);
        let over = (x[0] - host.ssd_capacity_mb).max(0.0);
        let u = (x[1] / host.ssd_iops).max(x[2] / host.ssd_bw_mbps);
        let link = if host.link_gbit.is_some() {
            x[3] / host.link_mbps()
        } else {
            0.0
        };
        [
            (over / host.ssd_capacity_mb - self.over_now[h]).max(0.0),
            (u - 1.0).max(0.0),
            over,
            x[4] / u.max(link).max(1.0),
        ]
    }

    /// Moves VM `v` to host `to`.
    fn shift(&mut self, v: usize, to: usize) {
        let from = self.p[v];
        if from == to {
            return;
        }
        for h in [from, to] {
            self.count_host(h, -1.0);
        }
        self.add(v, from, -1.0);
        self.add(v, to, 1.0);
        for h in [from, to] {
            self.count_host(h, 1.0);
        }
        if let Some(a) = self.c.vms[v].app {
            // v's pairs on other hosts: (n − its host's count) before and after.
            let before = self.floor[a].saturating_sub(self.dist[a]);
            self.dist[a] = self.dist[a] + self.count[a][from] + 1 - self.count[a][to];
            self.short =
                self.short - before as f64 + self.floor[a].saturating_sub(self.dist[a]) as f64;
        }
        self.p[v] = to;
    }

    /// What the placement breaks beyond `now` (0: nothing added).
    fn added(&self) -> f64 {
        let x = self.cap + (self.thr - self.thr_now).max(0.0) + self.short;
        if x > 1e-9 {
            x
        } else {
            0.0
        }
    }

    /// What putting VM `v` back must not make worse.
    fn state(&self, v: usize) -> State {
        let app = (self.c.vms[v].app).filter(|&a| self.c.apps[a].preference == Preference::Spread);
        State {
            added: self.added(),
            mb_over: self.mb_over,
            served: self.served,
            dist: app.map(|a| self.dist[a]),
        }
    }

    /// No violation added, no more overflow, VM `v`'s `spread` application no less spread
    /// than in `before`.
    fn no_worse(&self, v: usize, before: &State) -> bool {
        let now = self.state(v);
        now.added <= before.added && now.mb_over <= before.mb_over + 1e-9 && now.dist >= before.dist
    }
}

/// A placement's figures that a move put back must not worsen (`Sums::no_worse`).
struct State {
    added: f64,
    mb_over: f64,
    served: f64,
    dist: Option<usize>,
}

/// What `p` breaks beyond what `now` breaks, summed (0: nothing added): each host's cache
/// slices over its SSD beyond its overflow now (relative to its capacity); the SSD demand no
/// SSD can serve (Σ over hosts of utilisation beyond 1) beyond today's; each `spread`
/// application's logical distance below both its best and today's.
pub(crate) fn added(cluster: &Cluster, now: &[usize], p: &[usize]) -> f64 {
    Sums::new(cluster, now, p).added()
}

/// MB of cache slices over their SSDs, all hosts.
pub(crate) fn overflow(cluster: &Cluster, p: &[usize]) -> f64 {
    (cluster.demand(p).iter().zip(&cluster.hosts))
        .map(|(d, h)| (d.0 - h.ssd_capacity_mb).max(0.0))
        .sum()
}

/// Moves of `p` (VMs not on their `now` host) put back while that takes `added` down, in
/// passes over them, until `p` adds nothing or a pass changes nothing.
fn repair(cluster: &Cluster, now: &[usize], p: Vec<usize>) -> Vec<usize> {
    let mut s = Sums::new(cluster, now, &p);
    let mut changed = true;
    while changed && s.added() > 0.0 {
        changed = false;
        for (v, &home) in now.iter().enumerate() {
            let (to, bad) = (s.p[v], s.added());
            if to == home || bad == 0.0 {
                continue;
            }
            s.shift(v, home);
            if s.added() < bad - 1e-12 {
                changed = true;
            } else {
                s.shift(v, to);
            }
        }
    }
    s.p
}

/// Moves of `p` that bring nothing put back, lightest VM first: a move stays only if putting
/// it back would serve less, add a violation, overflow more or lower its `spread`
/// application's logical distance.
fn prune(cluster: &Cluster, now: &[usize], p: Vec<usize>) -> Vec<usize> {
    let mut s = Sums::new(cluster, now, &p);
    let mut order: Vec<usize> = (0..p.len()).filter(|&v| p[v] != now[v]).collect();
    order.sort_by(|&a, &b| s.mean[a].total_cmp(&s.mean[b]).then(a.cmp(&b)));
    for v in order {
        let (to, before) = (s.p[v], s.state(v));
        s.shift(v, now[v]);
        if !s.no_worse(v, &before) || s.served < before.served - 1e-9 {
            s.shift(v, to);
        }
    }
    s.p
}

/// Moves of `p` that take a VM back to the host it left within the cool-down (`Recent` allows
/// them when its demand changed by more than `tau`) put back unless each, by itself, makes the
/// VMs get `min_gain` more (`Cluster::delivered`) — or putting it back would add a violation,
/// overflow more or lower a `spread` application's distance. The demand that moved it once has
/// changed, but a move back that brings little is the first step of a chase.
fn returns(
    cluster: &Cluster,
    now: &[usize],
    p: Vec<usize>,
    params: &PlanParams,
    recent: &Recent,
) -> Vec<usize> {
    let mut s = Sums::new(cluster, now, &p);
    for (v, &home) in now.iter().enumerate() {
        let to = s.p[v];
        if to == home || !recent.returns(v, to, params.cooldown_s) {
            continue;
        }
        let (got, before) = (cluster.delivered(&s.p).load, s.state(v));
        s.shift(v, home);
        let gain = got - cluster.delivered(&s.p).load;
        if !s.no_worse(v, &before) || gain >= params.min_gain.max(1e-9) {
            s.shift(v, to);
        }
    }
    s.p
}

/// From `now`, the single allowed move that serves most (and adds no violation), then the next,
/// at most `steps` of them: what `plan_with` tries when every move of the greedy placement was
/// put back (a cool-down can forbid the one it chose while another VM could go instead).
fn climb(
    cluster: &Cluster,
    now: &[usize],
    steps: usize,
    allows: impl Fn(usize, usize) -> bool,
) -> Vec<usize> {
    let mut s = Sums::new(cluster, now, now);
    for _ in 0..steps {
        let (base, mut best) = (s.served, None);
        for (v, &home) in now.iter().enumerate() {
            if s.p[v] != home {
                continue; // each VM moves once
            }
            for h in (0..cluster.hosts.len()).filter(|&h| h != home && allows(v, h)) {
                s.shift(v, h);
                let gain = s.served - base;
                if s.added() == 0.0 && s.mb_over <= 1e-9 && best.is_none_or(|(g, _, _)| gain > g) {
                    best = Some((gain, v, h));
                }
                s.shift(v, home);
            }
        }
        match best {
            Some((g, v, h)) if g > 1e-9 => s.shift(v, h),
            _ => break,
        }
    }
    s.p
}

/// A placement that fits every SSD cache, if the search finds one within `SEARCH_NODES`
/// steps: VMs largest slice first, each tried on its `hint` host, its current host, then the
/// others, roomiest first. One that adds no other violation is preferred; the first found that
/// fits is kept otherwise.
fn fitting(cluster: &Cluster, hint: &[usize]) -> Option<Vec<usize>> {
    let now = cluster.placement();
    let mut order: Vec<usize> = (0..cluster.vms.len()).collect();
    order.sort_by(|&a, &b| {
        (cluster.vms[b].cache_mb)
            .total_cmp(&cluster.vms[a].cache_mb)
            .then(a.cmp(&b))
    });
    struct Search<'a> {
        cluster: &'a Cluster,
        now: &'a [usize],
        hint: &'a [usize],
        order: Vec<usize>,
        free: Vec<f64>,
        p: Vec<usize>,
        nodes: usize,
        found: Option<Vec<usize>>,
    }
    impl Search<'_> {
        /// True when done (a clean placement found, or out of steps).
        fn go(&mut self, i: usize) -> bool {
            self.nodes += 1;
            if self.nodes > SEARCH_NODES {
                return true;
            }
            if i == self.order.len() {
                let clean = added(self.cluster, self.now, &self.p) == 0.0;
                if clean || self.found.is_none() {
                    self.found = Some(self.p.clone());
                }
                return clean;
            }
            let rest: f64 = self.order[i..]
                .iter()
                .map(|&v| self.cluster.vms[v].cache_mb)
                .sum();
            if rest > self.free.iter().sum::<f64>() + 1e-9 {
                return false;
            }
            let v = self.order[i];
            let mb = self.cluster.vms[v].cache_mb;
            let mut hosts: Vec<usize> = (0..self.free.len()).collect();
            let (hint, now) = (self.hint[v], self.now[v]);
            hosts.sort_by(|&a, &b| {
                (a != hint)
                    .cmp(&(b != hint))
                    .then((a != now).cmp(&(b != now)))
                    .then(self.free[b].total_cmp(&self.free[a]))
                    .then(a.cmp(&b))
            });
            let mut tried: Vec<usize> = Vec::new();
            for h in hosts {
                // Hosts alike (same SSD, same room left) lead to the same searches.
                let alike = |g: &usize| {
                    self.free[*g] == self.free[h]
                        && self.cluster.hosts[*g].ssd_capacity_mb
                            == self.cluster.hosts[h].ssd_capacity_mb
                };
                if mb > self.free[h] + 1e-9 || tried.iter().any(alike) {
                    continue;
                }
                tried.push(h);
                self.free[h] -= mb;
                self.p[v] = h;
                let done = self.go(i + 1);
                self.free[h] += mb;
                if done {
                    return true;
                }
            }
            false
        }
    }
    let mut s = Search {
        cluster,
        now: &now,
        hint,
        order,
        free: cluster.hosts.iter().map(|h| h.ssd_capacity_mb).collect(),
        p: now.clone(),
        nodes: 0,
        found: None,
    };
    s.go(0);
    s.found
}

/// Moves `climb` may chain.
const CLIMB_STEPS: usize = 32;

/// Steps the search for a fitting placement may take (each places one VM).
const SEARCH_NODES: usize = 200_000;

/// A VM's last move, as the caller remembers it: the host it left, how long ago it arrived
/// (seconds), and its demand when it was planned.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Left {
    pub host: usize,
    pub age_s: f64,
    pub iops: f64,
    pub bw_mbps: f64,
}

/// What the planner remembers between windows (the simulator keeps it; `plan vms` has none):
/// each VM's last move, and the detector's `tau`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Recent {
    pub left: Vec<Option<Left>>,
    pub tau: f64,
}

impl Recent {
    /// Does VM `v` going to `host` take it back to the host it left within `cooldown_s`?
    fn returns(&self, v: usize, host: usize, cooldown_s: f64) -> bool {
        matches!(self.left.get(v), Some(Some(l)) if l.host == host && l.age_s < cooldown_s)
    }

    /// May VM `v` of `cluster` go to `host`? Not back to the host it left within `cooldown_s`,
    /// unless its demand has since changed by more than `tau` (as the detector measures it).
    fn allows(&self, cluster: &Cluster, v: usize, host: usize, cooldown_s: f64) -> bool {
        let Some(Some(l)) = self.left.get(v) else {
            return true;
        };
        let vm = &cluster.vms[v];
        let changed = distance(&[l.iops, l.bw_mbps, 0.0], &[vm.iops, vm.bw_mbps, 0.0]) > self.tau;
        l.host != host || l.age_s >= cooldown_s || changed
    }
}

/// One window of spec 003's planner, with nothing remembered (`plan vms`).
pub fn plan(cluster: &Cluster, params: &PlanParams) -> Plan {
    plan_with(cluster, params, &Recent::default())
}

/// One window of spec 003's planner: place, relabel, keep only the moves that are allowed,
/// add no violation and deliver more; find a placement that fits every cache if the current
/// one does not; keep the plan only if it is worth its moves; order them.
pub fn plan_with(cluster: &Cluster, params: &PlanParams, recent: &Recent) -> Plan {
    let now = cluster.placement();
    let placed = relabel(cluster, &now, &place(cluster, params));
    let mut greedy = placed.clone();
    for (v, h) in greedy.iter_mut().enumerate() {
        if !recent.allows(cluster, v, *h, params.cooldown_s) {
            *h = now[v];
        }
    }
    let mut target = prune(cluster, &now, repair(cluster, &now, greedy.clone()));
    if target == now && placed != now {
        let allows = |v: usize, h: usize| recent.allows(cluster, v, h, params.cooldown_s);
        let steps = (0..now.len()).filter(|&v| placed[v] != now[v]).count();
        target = prune(
            cluster,
            &now,
            climb(cluster, &now, steps.min(CLIMB_STEPS), allows),
        );
    }
    if overflow(cluster, &target) > 0.0 {
        if let Some(f) = fitting(cluster, &greedy) {
            target = prune(cluster, &now, f);
        }
    }
    target = returns(cluster, &now, target, params, recent);
    let empty = |reason: String| Plan {
        violations: violations(cluster, &now),
        target: now.clone(),
        waves: Vec::new(),
        transient: Vec::new(),
        reason: Some(reason),
    };
    let (d_now, d_then) = (cluster.delivered(&now), cluster.delivered(&target));
    let fixes = overflow(cluster, &target) < overflow(cluster, &now) - 1e-9;
    let spread_gain = (0..cluster.apps.len()).any(|a| {
        cluster.apps[a].preference == Preference::Spread
            && logical_distance(cluster, &target, a) > logical_distance(cluster, &now, a)
    });
    let gain = d_then.load - d_now.load;
    let (waves, transient) = order_moves(cluster, &now, &target, params);
    let worth = |gain: f64| -> Result<(), String> {
        if d_now.bounds.is_empty() {
            return Err("nothing is saturated: every VM gets all the I/O it asks".into());
        }
        if gain < params.min_gain.max(1e-9) {
            let said: Vec<String> = (d_now.bounds.iter())
                .map(|b| match b {
                    Bound::Ssd(h) => format!("the SSD of {}", cluster.hosts[*h].id),
                    Bound::Link(h) => format!("the link of {}", cluster.hosts[*h].id),
                    Bound::Backend => "the shared backend".into(),
                })
                .collect();
            return Err(format!(
                "no placement found delivers more: the limit is {} (the best found adds {gain:.3} \
                 of an SSD, min_gain {:.2})",
                said.join(", "),
                params.min_gain
            ));
        }
        let (benefit, cost) = pays(cluster, &waves, gain, params);
        if benefit < cost {
            return Err(format!(
                "does not pay for itself: {gain:.3} of an SSD more for the {:.0} s it is expected \
                 to hold ({benefit:.1} SSD-seconds) is less than the moves cost ({cost:.1})",
                params.hold_s
            ));
        }
        Ok(())
    };
    if target == now {
        // Every move put back: say why the greedy placement was not taken.
        let why = if placed == now {
            "the placement is already the planner's".to_string()
        } else if added(cluster, &now, &greedy) > 0.0 {
            "every placement found adds a violation (capacity, throughput or spread)".to_string()
        } else {
            worth(cluster.delivered(&greedy).load - d_now.load)
                .err()
                .unwrap_or_else(|| "its moves bring nothing".into())
        };
        return empty(why);
    }
    let safe = added(cluster, &now, &target) == 0.0 || (fixes && overflow(cluster, &target) == 0.0);
    if !safe {
        return empty(
            "every placement found adds a violation (capacity, throughput or spread)".into(),
        );
    }
    if !fixes && !spread_gain {
        if let Err(why) = worth(gain) {
            return empty(why);
        }
    }
    Plan {
        violations: violations(cluster, &target),
        target,
        waves,
        transient,
        reason: None,
    }
}

/// What a plan's moves earn and cost, in SSD-seconds (a VM's load on the mean SSD × seconds):
/// `gain` for the `hold_s` the new placement is expected to hold once the waves are done,
/// against, per move, the moved VM's `slowdown` × what it gets while it copies (its memory and
/// slice at `bw_cap` of the slower link) and the copy of its slice read on one SSD and written
/// on the other.
pub fn pays(cluster: &Cluster, waves: &[Vec<Move>], gain: f64, params: &PlanParams) -> (f64, f64) {
    let got = cluster.delivered(&cluster.placement()).share;
    let n = cluster.hosts.len().max(1) as f64;
    let mean_bw = cluster.hosts.iter().map(|h| h.ssd_bw_mbps).sum::<f64>() / n;
    let copy_s = |m: &Move| {
        let v = &cluster.vms[m.vm];
        let link = cluster.hosts[m.from]
            .link_mbps()
            .min(cluster.hosts[m.to].link_mbps());
        (v.mem_mb + v.cache_mb) / (params.bw_cap * link)
    };
    let took: f64 = (waves.iter())
        .map(|w| w.iter().map(copy_s).fold(0.0, f64::max))
        .sum();
    let cost = (waves.iter().flatten())
        .map(|m| {
            copy_s(m) * params.slowdown * got[m.vm] * cluster.mean_load(m.vm)
                + 2.0 * cluster.vms[m.vm].cache_mb / mean_bw
        })
        .sum();
    (gain * (params.hold_s - took).max(0.0), cost)
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
