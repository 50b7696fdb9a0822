//! The cluster as the planner sees it (spec 003 §3, reconstructed): hypervisors with an SSD
//! cache in front of shared storage, VMs with a cache slice and an I/O demand, applications
//! with a placement preference.

use serde::{Deserialize, Serialize};

/// One hypervisor and its SSD cache.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Host {
    pub id: String,
    /// Room for cache slices (MB).
    pub ssd_capacity_mb: f64,
    /// What the SSD sustains: I/O operations and MB per second.
    pub ssd_iops: f64,
    pub ssd_bw_mbps: f64,
}

/// How an application wants its VMs placed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Preference {
    /// ZooKeeper: its VMs on distinct hosts, as evenly as possible (maximise logical distance).
    Spread,
    /// Hadoop: its I/O-heavy VMs over distinct SSDs (placed like `none`, by load: the spread of
    /// load is what keeps each DataNode's local reads fast).
    Locality,
    #[default]
    None,
}

/// One VM: where it is, its application, its cache slice and this window's I/O demand.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Vm {
    pub id: String,
    /// Index into `Cluster::hosts`.
    pub host: usize,
    /// Index into `Cluster::apps`, if it belongs to one.
    pub app: Option<usize>,
    /// Its SSD cache slice (MB; the paper's 256).
    pub cache_mb: f64,
    /// Its memory (MB): with the cache slice, what a live migration copies.
    pub mem_mb: f64,
    /// Demand on the SSD cache this window.
    pub iops: f64,
    pub bw_mbps: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct App {
    pub id: String,
    pub preference: Preference,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Cluster {
    pub hosts: Vec<Host>,
    pub vms: Vec<Vm>,
    pub apps: Vec<App>,
}

impl Cluster {
    /// Where every VM is now: host index by VM index.
    pub fn placement(&self) -> Vec<usize> {
        self.vms.iter().map(|v| v.host).collect()
    }

    /// A VM's load on an SSD: the larger of its shares of the device's IOPS and bandwidth.
    pub fn load(&self, vm: usize, host: usize) -> f64 {
        let (v, h) = (&self.vms[vm], &self.hosts[host]);
        (v.iops / h.ssd_iops).max(v.bw_mbps / h.ssd_bw_mbps)
    }

    /// Each host's summed demand under `placement`: (cache MB, IOPS, MB/s).
    pub fn demand(&self, placement: &[usize]) -> Vec<(f64, f64, f64)> {
        let mut d = vec![(0.0, 0.0, 0.0); self.hosts.len()];
        for (v, &h) in self.vms.iter().zip(placement) {
            d[h].0 += v.cache_mb;
            d[h].1 += v.iops;
            d[h].2 += v.bw_mbps;
        }
        d
    }

    /// Each host's SSD utilisation under `placement`: the largest of its IOPS and bandwidth
    /// use over the device's (1 = saturated).
    pub fn utilisation(&self, placement: &[usize]) -> Vec<f64> {
        self.demand(placement)
            .iter()
            .zip(&self.hosts)
            .map(|(&(_, iops, bw), h)| (iops / h.ssd_iops).max(bw / h.ssd_bw_mbps))
            .collect()
    }
}

/// Spec 003 §2.3: the number of pairs of `app`'s VMs on different hosts (larger is more
/// reliable; 6 VMs on 2 hosts give at most 9).
pub fn logical_distance(cluster: &Cluster, placement: &[usize], app: usize) -> usize {
    let hosts: Vec<usize> = (0..cluster.vms.len())
        .filter(|&v| cluster.vms[v].app == Some(app))
        .map(|v| placement[v])
        .collect();
    let mut ld = 0;
    for (i, a) in hosts.iter().enumerate() {
        ld += hosts[i + 1..].iter().filter(|b| *b != a).count();
    }
    ld
}
