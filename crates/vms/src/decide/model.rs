//! The cluster as the planner sees it (spec 003 §3, reconstructed): hypervisors with an SSD
//! cache in front of shared storage, VMs with a cache slice and an I/O demand, applications
//! with a placement preference.

use serde::{Deserialize, Serialize};

use crate::sim::io::{share, Limit};

/// A host's link when a state does not give it (Gbit/s): what a migration's copy time is
/// reckoned on.
pub const DEFAULT_LINK_GBIT: f64 = 10.0;

/// One hypervisor and its SSD cache.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Host {
    pub id: String,
    /// Room for cache slices (MB).
    pub ssd_capacity_mb: f64,
    /// What the SSD sustains: I/O operations and MB per second.
    pub ssd_iops: f64,
    pub ssd_bw_mbps: f64,
    /// Its network link (Gbit/s): the VMs' traffic to the shared backend and the migrations.
    /// None: not a limit of the VMs' I/O, and migrations reckoned at `DEFAULT_LINK_GBIT`.
    #[serde(default)]
    pub link_gbit: Option<f64>,
}

impl Host {
    /// The link in MB/s (`DEFAULT_LINK_GBIT` when not given).
    pub fn link_mbps(&self) -> f64 {
        self.link_gbit.unwrap_or(DEFAULT_LINK_GBIT) * 1000.0 / 8.0
    }
}

/// The shared storage behind every SSD cache: what it sustains, cluster-wide.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Backend {
    pub iops: f64,
    pub bw_mbps: f64,
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
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
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
    /// Demand on the shared backend (its misses and flushes; a write counts once per replica).
    pub backend_iops: f64,
    pub backend_mbps: f64,
    /// Traffic on its host's link to the backend (MB/s).
    pub link_mbps: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct App {
    pub id: String,
    pub preference: Preference,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Cluster {
    pub hosts: Vec<Host>,
    pub vms: Vec<Vm>,
    pub apps: Vec<App>,
    /// None: the backend is not a limit.
    pub backend: Option<Backend>,
}

/// A limit the VMs' I/O is held at.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum Bound {
    /// This host's SSD (its IOPS or bandwidth).
    Ssd(usize),
    /// This host's link to the backend.
    Link(usize),
    Backend,
}

/// What a placement delivers (`Cluster::delivered`).
#[derive(Clone, Debug, PartialEq)]
pub struct Delivered {
    /// Each VM's share of what it asks (1: all of it).
    pub share: Vec<f64>,
    /// The limits that hold some VM below what it asks.
    pub bounds: Vec<Bound>,
    /// What the VMs get, in SSDs: Σ share × the VM's load on the cluster's mean SSD.
    pub load: f64,
    /// What they get: SSD operations and MB per second.
    pub iops: f64,
    pub mbps: f64,
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

    /// A VM's load on the cluster's mean SSD (the unit `Delivered::load` and the planner's
    /// gains are counted in).
    pub fn mean_load(&self, vm: usize) -> f64 {
        let (iops, bw) = self.mean_ssd();
        let v = &self.vms[vm];
        (v.iops / iops).max(v.bw_mbps / bw)
    }

    /// Every VM's `mean_load`, the mean SSD reckoned once.
    pub fn mean_loads(&self) -> Vec<f64> {
        let (iops, bw) = self.mean_ssd();
        (self.vms.iter())
            .map(|v| (v.iops / iops).max(v.bw_mbps / bw))
            .collect()
    }

    /// The cluster's mean SSD: IOPS and MB/s.
    fn mean_ssd(&self) -> (f64, f64) {
        let n = self.hosts.len().max(1) as f64;
        let iops = self.hosts.iter().map(|h| h.ssd_iops).sum::<f64>() / n;
        let bw = self.hosts.iter().map(|h| h.ssd_bw_mbps).sum::<f64>() / n;
        (iops, bw)
    }

    /// What every VM gets under `placement` when what they ask is shared weighted max-min
    /// (the simulator's `io::share`) over every SSD's IOPS and bandwidth, every link whose
    /// speed is known, and the backend if given.
    pub fn delivered(&self, placement: &[usize]) -> Delivered {
        let mut limits = Vec::new();
        let mut bounds = Vec::new();
        let mut by_host = vec![Vec::new(); self.hosts.len()];
        for (v, &h) in placement.iter().enumerate() {
            by_host[h].push(v);
        }
        let on = |h: usize| by_host[h].iter().copied();
        for (h, host) in self.hosts.iter().enumerate() {
            limits.push(Limit {
                capacity: host.ssd_iops,
                use_: on(h).map(|v| (v, self.vms[v].iops)).collect(),
            });
            limits.push(Limit {
                capacity: host.ssd_bw_mbps,
                use_: on(h).map(|v| (v, self.vms[v].bw_mbps)).collect(),
            });
            bounds.extend([Bound::Ssd(h), Bound::Ssd(h)]);
            if host.link_gbit.is_some() {
                limits.push(Limit {
                    capacity: host.link_mbps(),
                    use_: on(h).map(|v| (v, self.vms[v].link_mbps)).collect(),
                });
                bounds.push(Bound::Link(h));
            }
        }
        if let Some(b) = self.backend {
            let all = 0..self.vms.len();
            limits.push(Limit {
                capacity: b.iops,
                use_: all.clone().map(|v| (v, self.vms[v].backend_iops)).collect(),
            });
            limits.push(Limit {
                capacity: b.bw_mbps,
                use_: all.map(|v| (v, self.vms[v].backend_mbps)).collect(),
            });
            bounds.extend([Bound::Backend, Bound::Backend]);
        }
        let asked: Vec<f64> = self.vms.iter().map(|_| 1.0).collect();
        let share = share(&asked, &limits);
        let mut held: Vec<Bound> = Vec::new();
        for (l, b) in limits.iter().zip(bounds) {
            let used: f64 = l.use_.iter().map(|&(v, u)| u * share[v]).sum();
            let below = l
                .use_
                .iter()
                .any(|&(v, u)| u > 0.0 && share[v] < 1.0 - 1e-9);
            if below && used >= l.capacity * (1.0 - 1e-9) && !held.contains(&b) {
                held.push(b);
            }
        }
        Delivered {
            load: (self.mean_loads().iter().zip(&share))
                .map(|(l, s)| s * l)
                .sum(),
            iops: self.vms.iter().zip(&share).map(|(v, s)| v.iops * s).sum(),
            mbps: self
                .vms
                .iter()
                .zip(&share)
                .map(|(v, s)| v.bw_mbps * s)
                .sum(),
            share,
            bounds: held,
        }
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
