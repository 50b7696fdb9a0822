//! When to plan again (spec 003 §2.4 step 2, reconstructed): each window, every VM's I/O
//! features are compared with a baseline of its own. A VM whose features moved by more than
//! `tau` (relative) for `k` windows in a row has changed pattern; so has a cluster whose VMs or
//! applications changed, or whose busiest SSD is over `ssd_limit`. A change re-plans; the
//! baseline then becomes this window's features (the paper's "pattern change triggers a new
//! placement and the migrations"). Between changes the baseline follows the features slowly
//! (an exponential mean, `follow`), so a slow drift never adds up to a re-plan by itself but a
//! step does. (A drift of g per window leaves the baseline behind by a factor follow / (1 + g −
//! (1 − follow)): with `follow` 0.1, 2 % a window stays 20 % behind, 5 % a window crosses `tau`.)

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use super::model::Cluster;

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct DetectParams {
    /// Relative change of a feature that counts (the spec suggests 0.3).
    pub tau: f64,
    /// Windows in a row it must last (the spec suggests 2).
    pub k: u32,
    /// An SSD busier than this (utilisation) re-plans at once.
    pub ssd_limit: f64,
    /// Weight of this window in the baseline's exponential mean between changes.
    pub follow: f64,
    /// Windows over which `PeakDemand` takes each VM's peak (ours).
    pub history: usize,
}

impl Default for DetectParams {
    fn default() -> Self {
        DetectParams {
            tau: 0.3,
            k: 2,
            ssd_limit: 0.9,
            follow: 0.1,
            history: 10,
        }
    }
}

/// A VM's I/O features for one window: IOPS, bandwidth, and the read share of its I/O.
pub type Features = [f64; 3];

/// Why a window re-plans.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Change {
    /// The first window, or the VMs or applications are not those of the last one.
    Membership,
    /// These VMs' features moved by more than `tau` for `k` windows.
    Pattern(Vec<usize>),
    /// This host's SSD is over `ssd_limit`.
    Overload(usize),
}

/// The detector's memory between windows.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Detector {
    /// VM ids and their application ids, as last seen.
    members: Vec<(String, Option<String>)>,
    baseline: Vec<Features>,
    /// Windows in a row each VM has been off its baseline.
    off: Vec<u32>,
}

/// How far `now` is from `base`, relative: the largest of the features' changes over their
/// baseline (a feature near zero counts against a floor, so noise on an idle VM is no change).
pub(crate) fn distance(base: &Features, now: &Features) -> f64 {
    let floor = [200.0, 5.0, 0.1]; // IOPS, MB/s, read share
    (0..3)
        .map(|i| (now[i] - base[i]).abs() / base[i].abs().max(floor[i]))
        .fold(0.0, f64::max)
}

impl Detector {
    /// One window: `features[v]` of VM `v` of `cluster`. Returns why it should re-plan, if it
    /// should.
    pub fn window(
        &mut self,
        cluster: &Cluster,
        features: &[Features],
        params: &DetectParams,
    ) -> Option<Change> {
        let members: Vec<(String, Option<String>)> = cluster
            .vms
            .iter()
            .map(|v| (v.id.clone(), v.app.map(|a| cluster.apps[a].id.clone())))
            .collect();
        if members != self.members {
            self.members = members;
            self.baseline = features.to_vec();
            self.off = vec![0; features.len()];
            return Some(Change::Membership);
        }
        let mut moved = Vec::new();
        for (v, now) in features.iter().enumerate() {
            if distance(&self.baseline[v], now) > params.tau {
                self.off[v] += 1;
                if self.off[v] >= params.k {
                    moved.push(v);
                }
            } else {
                self.off[v] = 0;
                for (b, n) in self.baseline[v].iter_mut().zip(now) {
                    *b += params.follow * (n - *b);
                }
            }
        }
        let busiest = cluster
            .utilisation(&cluster.placement())
            .into_iter()
            .enumerate()
            .fold((0, 0.0), |a, (h, u)| if u > a.1 { (h, u) } else { a });
        let change = if !moved.is_empty() {
            Some(Change::Pattern(moved))
        } else if busiest.1 > params.ssd_limit {
            Some(Change::Overload(busiest.0))
        } else {
            None
        };
        if change.is_some() {
            self.baseline = features.to_vec();
            self.off.iter_mut().for_each(|o| *o = 0);
        }
        change
    }
}

/// What the planner plans for: each VM's peak demand over the last `history` windows. A VM
/// between two phases (a Hadoop job's CPU part between its I/O parts) then does not look idle,
/// so it is not placed for one phase and moved back for the next. (VMware DRS and Koordinator
/// likewise plan on a high percentile of recent usage, not on the last sample.)
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PeakDemand {
    ids: Vec<String>,
    recent: Vec<VecDeque<[f64; 5]>>,
}

impl PeakDemand {
    /// Adds this window's demands of `cluster` and returns it with each VM's demands (SSD,
    /// backend, link) replaced by their peaks over the kept windows. A VM not seen before starts afresh.
    pub fn window(&mut self, cluster: &Cluster, history: usize) -> Cluster {
        let ids: Vec<String> = cluster.vms.iter().map(|v| v.id.clone()).collect();
        if ids != self.ids {
            let old: Vec<(String, VecDeque<[f64; 5]>)> =
                self.ids.drain(..).zip(self.recent.drain(..)).collect();
            self.recent = (ids.iter())
                .map(|id| {
                    (old.iter().find(|(o, _)| o == id))
                        .map_or_else(VecDeque::new, |(_, r)| r.clone())
                })
                .collect();
            self.ids = ids;
        }
        let mut out = cluster.clone();
        for (v, r) in out.vms.iter_mut().zip(self.recent.iter_mut()) {
            r.push_back([
                v.iops,
                v.bw_mbps,
                v.backend_iops,
                v.backend_mbps,
                v.link_mbps,
            ]);
            while r.len() > history.max(1) {
                r.pop_front();
            }
            let peak = |i: usize| r.iter().map(|x| x[i]).fold(0.0, f64::max);
            (v.iops, v.bw_mbps, v.backend_iops) = (peak(0), peak(1), peak(2));
            (v.backend_mbps, v.link_mbps) = (peak(3), peak(4));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::model::{Host, Vm};

    fn cluster(iops: &[f64]) -> Cluster {
        Cluster {
            hosts: vec![Host {
                id: "h0".into(),
                ssd_capacity_mb: 8192.0,
                ssd_iops: 40_000.0,
                ssd_bw_mbps: 500.0,
                link_gbit: None,
            }],
            vms: iops
                .iter()
                .enumerate()
                .map(|(i, &iops)| Vm {
                    id: format!("vm{i}"),
                    host: 0,
                    app: None,
                    cache_mb: 256.0,
                    mem_mb: 1024.0,
                    iops,
                    bw_mbps: iops * 32.0 / 1024.0,
                    ..Vm::default()
                })
                .collect(),
            apps: Vec::new(),
            backend: None,
        }
    }

    fn feats(c: &Cluster) -> Vec<Features> {
        c.vms.iter().map(|v| [v.iops, v.bw_mbps, 1.0]).collect()
    }

    #[test]
    fn a_step_that_lasts_k_windows_replans_a_blip_and_a_drift_do_not() {
        let p = DetectParams::default();
        let mut d = Detector::default();
        let c = cluster(&[1000.0, 2000.0]);
        assert_eq!(d.window(&c, &feats(&c), &p), Some(Change::Membership));
        assert_eq!(d.window(&c, &feats(&c), &p), None);
        // A one-window blip of VM 1 (×3): no change.
        let blip = cluster(&[1000.0, 6000.0]);
        assert_eq!(d.window(&blip, &feats(&blip), &p), None);
        assert_eq!(d.window(&c, &feats(&c), &p), None);
        // A slow drift of 2 % a window: the baseline that follows it lags by 20 % at most
        // (0.1 / (1.02 − 0.9) = 0.83 of it), never `tau`.
        let mut iops = 1000.0;
        for _ in 0..40 {
            iops *= 1.02;
            let drift = cluster(&[iops, 2000.0]);
            assert_eq!(d.window(&drift, &feats(&drift), &p), None, "{iops}");
        }
        // A step of VM 1 that lasts: the second window re-plans, then it is the new baseline.
        let step = cluster(&[iops, 6000.0]);
        assert_eq!(d.window(&step, &feats(&step), &p), None);
        assert_eq!(
            d.window(&step, &feats(&step), &p),
            Some(Change::Pattern(vec![1]))
        );
        assert_eq!(d.window(&step, &feats(&step), &p), None);
        // A VM that arrives.
        let more = cluster(&[iops, 6000.0, 10.0]);
        assert_eq!(d.window(&more, &feats(&more), &p), Some(Change::Membership));
    }

    #[test]
    fn the_planner_sees_each_vms_peak_of_the_last_windows() {
        let mut p = PeakDemand::default();
        let seen = |p: &mut PeakDemand, iops: &[f64]| -> Vec<f64> {
            p.window(&cluster(iops), 3)
                .vms
                .iter()
                .map(|v| v.iops)
                .collect()
        };
        assert_eq!(seen(&mut p, &[5000.0, 100.0]), [5000.0, 100.0]);
        // VM 0 between two I/O phases still counts as busy, for 3 windows.
        assert_eq!(seen(&mut p, &[0.0, 100.0]), [5000.0, 100.0]);
        assert_eq!(seen(&mut p, &[0.0, 100.0]), [5000.0, 100.0]);
        assert_eq!(seen(&mut p, &[0.0, 100.0]), [0.0, 100.0]);
        // A new VM starts afresh; the others keep their history.
        assert_eq!(seen(&mut p, &[0.0, 50.0, 7.0]), [0.0, 100.0, 7.0]);
    }

    #[test]
    fn an_ssd_over_its_limit_replans_at_once() {
        let p = DetectParams::default();
        let mut d = Detector::default();
        let c = cluster(&[20_000.0, 18_000.0]); // 0.95 of 40 k IOPS
        d.window(&c, &feats(&c), &p);
        assert_eq!(d.window(&c, &feats(&c), &p), Some(Change::Overload(0)));
        // Idle noise: 0 → 30 IOPS is below the floor, no change.
        let idle = cluster(&[0.0]);
        let mut d = Detector::default();
        d.window(&idle, &feats(&idle), &p);
        let noise = cluster(&[30.0]);
        assert_eq!(d.window(&noise, &feats(&noise), &p), None);
        assert_eq!(d.window(&noise, &feats(&noise), &p), None);
    }
}
