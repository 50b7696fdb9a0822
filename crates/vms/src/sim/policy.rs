//! The placement policies the simulator runs, behind one trait: at each window's end a policy
//! sees what a controller would see and may replace the queue of planned migrations.
//!
//! `none` never moves; `random` moves one random VM when nothing is moving; `cloudcache` is
//! CloudCache's cache-capacity trigger; `planner` is spec 003's detector and planner (the same
//! code `colosched plan vms` runs).

use super::scenario::Scenario;
use crate::decide::detect::{Change, DetectParams, Detector, PeakDemand};
use crate::decide::model::Cluster;
use crate::decide::plan::{plan_with, random_move, Left, Move, PlanParams, Recent};
use colosched_core::rng::Rng;

/// The placement policies: spec 003's planner and its baselines.
pub const POLICIES: &[&str] = &["none", "random", "cloudcache", "planner"];

/// The VM's SSD demand (IOPS, MB/s) a move was planned on ((0, 0) when the policy does not look
/// at demand), and the move.
pub(super) type Queued = ((f64, f64), Move);

/// A VM's last migration: the host it left, when it ended, its SSD demand when planned.
pub(super) type LastMove = (usize, f64, (f64, f64));

/// What a controller measured of one VM over the window.
pub(super) struct VmSeen {
    pub host: usize,
    /// The detector's features: I/Os per second, MB per second, the share of reads.
    pub features: [f64; 3],
    /// Its reused working set (MB) if its I/O is random, else 0: what CloudCache sizes by.
    pub cache_mb: f64,
}

/// What a policy sees at a window's end.
pub(super) struct Window<'a> {
    /// The cluster as measured over the window.
    pub cluster: &'a Cluster,
    pub vms: &'a [VmSeen],
    /// The window's end (s).
    pub end: u32,
    /// Nothing is moving and nothing is queued.
    pub idle: bool,
    /// Each VM's last migration.
    pub last: &'a [Option<LastMove>],
}

pub(super) trait Placement {
    /// The waves of moves to run next, replacing the queue; `None` leaves the queue as it is.
    /// `rng` is the run's own stream (the demand has another).
    fn decide(&mut self, w: &Window, rng: &mut Rng) -> Option<Vec<Vec<Queued>>>;
}

/// The policy named `name` (one of [`POLICIES`]).
pub(super) fn placement(name: &str, s: &Scenario) -> Result<Box<dyn Placement>, String> {
    Ok(match name {
        "none" => Box::new(Stay),
        "random" => Box::new(RandomMove),
        "cloudcache" => Box::new(CloudCache),
        "planner" => Box::new(Planner::new(s)),
        _ => {
            return Err(format!(
                "unknown policy {name:?} (known: {})",
                POLICIES.join(", ")
            ))
        }
    })
}

/// `none`: the initial placement stays.
struct Stay;

impl Placement for Stay {
    fn decide(&mut self, _: &Window, _: &mut Rng) -> Option<Vec<Vec<Queued>>> {
        None
    }
}

/// `random`: when idle, one VM to another host, both drawn at random.
struct RandomMove;

impl Placement for RandomMove {
    fn decide(&mut self, w: &Window, rng: &mut Rng) -> Option<Vec<Vec<Queued>>> {
        if !w.idle {
            return None;
        }
        random_move(w.cluster, rng).map(|m| vec![vec![((0.0, 0.0), m)]])
    }
}

/// `cloudcache`: when idle, [`cloudcache_move`].
struct CloudCache;

impl Placement for CloudCache {
    fn decide(&mut self, w: &Window, _: &mut Rng) -> Option<Vec<Vec<Queued>>> {
        if !w.idle {
            return None;
        }
        cloudcache_move(w.cluster, w.vms).map(|m| vec![vec![((0.0, 0.0), m)]])
    }
}

/// `planner`: the detector watches every window (waiting while a plan runs); a change it sees
/// makes the planner plan on the peak demands of the kept windows.
struct Planner {
    plan: PlanParams,
    detect: DetectParams,
    window_s: u32,
    detector: Detector,
    peaks: PeakDemand,
    /// When the detector saw the demand's pattern change (s).
    changes: Vec<f64>,
}

impl Planner {
    fn new(s: &Scenario) -> Planner {
        Planner {
            plan: s.plan_params(),
            detect: s.detect_params(),
            window_s: s.window_s,
            detector: Detector::default(),
            peaks: PeakDemand::default(),
            changes: Vec::new(),
        }
    }
}

impl Placement for Planner {
    fn decide(&mut self, w: &Window, _: &mut Rng) -> Option<Vec<Vec<Queued>>> {
        let features: Vec<[f64; 3]> = w.vms.iter().map(|v| v.features).collect();
        let peak = self.peaks.window(w.cluster, self.detect.history);
        // Busy with a plan: the detector waits, so a change is seen after it.
        let change = if w.idle {
            self.detector.window(w.cluster, &features, &self.detect)
        } else {
            None
        };
        if matches!(change, Some(Change::Pattern(_))) {
            self.changes.push(w.end as f64);
        }
        change?;
        // A placement is expected to hold as long as demand has held between the changes seen
        // so far, less the k windows the detector took to see this one.
        let mut params = self.plan;
        let changes = &self.changes;
        if changes.len() >= 2 {
            let every = (changes[changes.len() - 1] - changes[0]) / (changes.len() - 1) as f64;
            params.hold_s = every - (self.detect.k * self.window_s) as f64;
        }
        let recent = Recent {
            left: (w.last.iter())
                .map(|l| {
                    l.map(|(host, ended, (iops, bw_mbps))| Left {
                        host,
                        age_s: w.end as f64 - ended,
                        iops,
                        bw_mbps,
                    })
                })
                .collect(),
            tau: self.detect.tau,
        };
        let waves = plan_with(&peak, &params, &recent).waves;
        let demand = |m: &Move| (peak.vms[m.vm].iops, peak.vms[m.vm].bw_mbps);
        Some(
            (waves.into_iter())
                .map(|wave| wave.into_iter().map(|m| (demand(&m), m)).collect())
                .collect(),
        )
    }
}

/// CloudCache's trigger (Arteaga et al., FAST '16): a host whose VMs' cache demand — their
/// reused working sets — exceeds its SSD moves its largest demand to the host with the most
/// room, if it fits there. IOPS and bandwidth are not looked at.
fn cloudcache_move(cluster: &Cluster, vms: &[VmSeen]) -> Option<Move> {
    let demand: Vec<f64> = vms.iter().map(|v| v.cache_mb).collect();
    let n = cluster.hosts.len();
    let mut on = vec![0.0; n];
    for (v, d) in vms.iter().zip(&demand) {
        on[v.host] += d;
    }
    let room = |h: usize| cluster.hosts[h].ssd_capacity_mb - on[h];
    let from = (0..n)
        .filter(|&h| room(h) < 0.0)
        .min_by(|&a, &b| room(a).total_cmp(&room(b)))?;
    let vm = (0..vms.len())
        .filter(|&i| vms[i].host == from)
        .max_by(|&a, &b| demand[a].total_cmp(&demand[b]))?;
    let to = (0..n)
        .filter(|&h| h != from)
        .max_by(|&a, &b| room(a).total_cmp(&room(b)))?;
    (room(to) >= demand[vm]).then_some(Move { vm, from, to })
}
