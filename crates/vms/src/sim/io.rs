//! The I/O model of one VM on an SSD cache in front of shared storage, and how a saturated
//! device is shared.
//!
//! - **Hit ratio** from the slice and the working set: a random stream over a working set W hits
//!   min(1, slice / W) of the time; a sequential stream longer than the slice streams through it
//!   and hits nothing (LRU), a shorter one hits always.
//! - **What one I/O costs.** A read is a hit (one SSD read) or a miss (a backend read, then one
//!   SSD write to fill the cache). A write goes to the SSD (write-back); when the slice is full of
//!   dirty blocks, which a miss means, a dirty block must first be flushed: one more SSD read,
//!   one backend write (× `write_cost`, the store's replicas), and the backend's latency.
//! - **Closed loop** (fio, Hadoop's streams): a VM keeps `iodepth` I/Os in flight, so it asks
//!   for iodepth ÷ latency I/Os per second; an open-loop VM asks for its rate.
//! - **Sharing** (`share`): what the VMs ask is scaled down, weighted max-min (progressive
//!   filling), until no SSD's IOPS or bandwidth, no host link and no backend limit is exceeded.

/// What a VM's I/O does now.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stream {
    /// Share of reads.
    pub read: f64,
    pub random: bool,
    pub block_kb: f64,
    /// The data the stream goes over (MB).
    pub ws_mb: f64,
    /// I/Os in flight (closed loop), or I/Os per second asked (open loop).
    pub demand: Demand,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Demand {
    Depth(f64),
    Rate(f64),
}

/// What one I/O of a stream costs, on average.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cost {
    pub hit: f64,
    pub ssd_ops: f64,
    pub ssd_mb: f64,
    /// Through the host's link to the backend.
    pub link_mb: f64,
    /// On the backend (writes count `write_cost` times).
    pub be_ops: f64,
    pub be_mb: f64,
    /// Unloaded latency, ms.
    pub latency_ms: f64,
}

pub fn hit_ratio(slice_mb: f64, s: &Stream) -> f64 {
    if s.random {
        (slice_mb / s.ws_mb).min(1.0)
    } else if s.ws_mb <= slice_mb {
        1.0
    } else {
        0.0
    }
}

pub fn cost(s: &Stream, slice_mb: f64, ssd_ms: f64, be_ms: f64, write_cost: f64) -> Cost {
    let hit = hit_ratio(slice_mb, s);
    let (r, w, miss, mb) = (s.read, 1.0 - s.read, 1.0 - hit, s.block_kb / 1024.0);
    let ssd_ops = r + w * (1.0 + miss);
    let be_ops = r * miss + w * miss * write_cost;
    Cost {
        hit,
        ssd_ops,
        ssd_mb: ssd_ops * mb,
        link_mb: (r + w) * miss * mb,
        be_ops,
        be_mb: be_ops * mb,
        latency_ms: r * (hit * ssd_ms + miss * be_ms) + w * (ssd_ms + miss * be_ms),
    }
}

impl Stream {
    /// I/Os per second asked for, given one I/O's latency.
    pub fn asked(&self, latency_ms: f64) -> f64 {
        match self.demand {
            Demand::Depth(d) => d * 1000.0 / latency_ms,
            Demand::Rate(r) => r,
        }
    }
}

/// One limited resource: `use_[i]` is what one unit of VM i's rate takes of it.
pub struct Limit {
    pub capacity: f64,
    pub use_: Vec<(usize, f64)>,
}

/// Weighted max-min sharing by progressive filling: every VM gets the same fraction of what it
/// asked (`asked`), raised together until a limit is full; the VMs on a full limit stop there,
/// the others rise on. Returns each VM's fraction (0..=1).
pub fn share(asked: &[f64], limits: &[Limit]) -> Vec<f64> {
    let n = asked.len();
    let mut level = vec![0.0f64; n];
    let mut frozen: Vec<bool> = asked.iter().map(|&a| a <= 0.0).collect();
    for v in 0..n {
        if frozen[v] {
            level[v] = 1.0;
        }
    }
    let mut full = vec![false; limits.len()];
    loop {
        if frozen.iter().all(|&f| f) {
            return level;
        }
        // The level at which each open limit fills if every unfrozen VM rises to it.
        let mut next = 1.0f64;
        let mut binding = Vec::new();
        for (c, l) in limits.iter().enumerate() {
            if full[c] {
                continue;
            }
            let (mut fixed, mut per_level) = (0.0, 0.0);
            for &(v, u) in &l.use_ {
                let x = asked[v] * u;
                if frozen[v] {
                    fixed += x * level[v];
                } else {
                    per_level += x;
                }
            }
            if per_level <= 0.0 {
                continue;
            }
            let at = ((l.capacity - fixed) / per_level).max(0.0);
            if at < next - 1e-12 {
                next = at;
                binding = vec![c];
            } else if (at - next).abs() <= 1e-12 {
                binding.push(c);
            }
        }
        for v in 0..n {
            if !frozen[v] {
                level[v] = next;
            }
        }
        if binding.is_empty() {
            return level; // everyone got all they asked
        }
        for c in binding {
            full[c] = true;
            for &(v, u) in &limits[c].use_ {
                if u > 0.0 {
                    frozen[v] = true;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn random_read(ws: f64) -> Stream {
        Stream {
            read: 1.0,
            random: true,
            block_kb: 32.0,
            ws_mb: ws,
            demand: Demand::Depth(8.0),
        }
    }

    #[test]
    fn a_quarter_of_a_random_working_set_hits_a_quarter_and_a_long_sequential_stream_never() {
        let c = cost(&random_read(1024.0), 256.0, 0.2, 2.0, 3.0);
        assert!((c.hit - 0.25).abs() < 1e-12);
        assert!((c.latency_ms - (0.25 * 0.2 + 0.75 * 2.0)).abs() < 1e-12);
        assert_eq!((c.ssd_ops, c.be_ops), (1.0, 0.75));
        let seq = Stream {
            random: false,
            ..random_read(1024.0)
        };
        assert_eq!(hit_ratio(256.0, &seq), 0.0);
        assert_eq!(hit_ratio(2048.0, &seq), 1.0);
        // A random write that misses flushes a dirty block first: two SSD operations, and three
        // backend writes (the replicas).
        let w = Stream {
            read: 0.0,
            ..random_read(1024.0)
        };
        let c = cost(&w, 256.0, 0.2, 2.0, 3.0);
        assert!((c.ssd_ops - 1.75).abs() < 1e-12 && (c.be_ops - 2.25).abs() < 1e-12);
        assert!((c.latency_ms - (0.2 + 0.75 * 2.0)).abs() < 1e-12);
    }

    #[test]
    fn sharing_is_max_min_over_every_limit() {
        // Two VMs on one SSD of 100, one VM alone on another; a backend of 150 for all three.
        let asked = [80.0, 80.0, 80.0];
        let limits = [
            Limit {
                capacity: 100.0,
                use_: vec![(0, 1.0), (1, 1.0)],
            },
            Limit {
                capacity: 100.0,
                use_: vec![(2, 1.0)],
            },
            Limit {
                capacity: 150.0,
                use_: vec![(0, 1.0), (1, 1.0), (2, 1.0)],
            },
        ];
        let f = share(&asked, &limits);
        // The backend fills first at 150 / 240 = 0.625 of everyone's ask (the SSD of two at
        // 100 / 160, the same): all three stop there.
        assert!(f.iter().all(|x| (x - 0.625).abs() < 1e-9), "{f:?}");
        // A larger backend: the pair stops at the SSD's 0.625; the single VM rises to all it asked.
        let limits = [
            Limit {
                capacity: 100.0,
                use_: vec![(0, 1.0), (1, 1.0)],
            },
            Limit {
                capacity: 1000.0,
                use_: vec![(0, 1.0), (1, 1.0), (2, 1.0)],
            },
        ];
        let f = share(&asked, &limits);
        assert!((f[0] - 0.625).abs() < 1e-9 && (f[1] - 0.625).abs() < 1e-9);
        assert_eq!(f[2], 1.0);
        // Nothing is ever over a limit.
        let used: f64 = (0..2).map(|v| asked[v] * f[v]).sum();
        assert!(used <= 100.0 + 1e-9);
    }
}
