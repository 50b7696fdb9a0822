//! Spec 002 on a Linux host: the NSVMs' vCPU threads in one cpuset pool with a short EEVDF
//! slice, the other VMs' in a second with a long one, the pools sized from the VMs' kinds,
//! weights and loads (`plan_pools`, `pools_built`: the simulator's Diff-Scheduler calls the
//! very same functions). No NSVM: the host as it was.

use colosched_core::cpuset::CpuSet;
use colosched_core::Rng;
use serde_json::{json, Value};

use super::{Decision, Seen, Strategy, Want};
use crate::agent::apply::Pool;
use crate::agent::config::HostConfig;
use crate::agent::error::Result;
use crate::decide::diff::{plan_pools, pools_built, PoolParams, VmNeed};

pub struct Diff {
    /// The CPUs the two pools share, ascending: the NSVM pool takes the first.
    cpus: Vec<usize>,
    params: PoolParams,
    /// The random numbers of the pool sizing (eqs 19–20).
    rng: Rng,
    /// The pools' slices (ms), for the log.
    slices_ms: (f64, f64),
}

impl Diff {
    pub fn new(cfg: &HostConfig, cpus: &[usize]) -> Diff {
        Diff {
            cpus: cpus.to_vec(),
            params: cfg.pools,
            rng: Rng::new(cfg.seed),
            slices_ms: (cfg.nsvm_slice_ms, cfg.nnvm_slice_ms),
        }
    }
}

impl Strategy for Diff {
    fn decide(&mut self, seen: &Seen, _rows: &mut [Value]) -> Result<Decision> {
        let needs: Vec<VmNeed> = (seen.vms.iter().zip(seen.cpu))
            .map(|(t, (d, kind))| VmNeed {
                kind: *kind,
                weight: t.weight,
                load: d.load(),
            })
            .collect();
        let m = self.cpus.len();
        let plan = plan_pools(m, &needs, &mut self.rng, &self.params);
        let (ns_vms, ns_cpus) = pools_built(&plan, m);
        let (ns, nn) = (
            CpuSet::from_slice(&self.cpus[..ns_cpus]),
            CpuSet::from_slice(&self.cpus[ns_cpus..]),
        );
        let want = if ns_cpus == 0 {
            Want::AsItWas
        } else {
            let pool = |n: usize| {
                if ns_vms.contains(&n) {
                    Pool::Ns
                } else {
                    Pool::Nn
                }
            };
            Want::Seats {
                groups: vec![(Pool::Ns, ns.clone()), (Pool::Nn, nn.clone())],
                seats: (seen.vms.iter().enumerate())
                    .map(|(n, t)| vec![pool(n); t.vm.vcpus.len()])
                    .collect(),
            }
        };
        let names = |is_ns: bool| -> Vec<String> {
            (seen.vms.iter().enumerate())
                .filter(|(n, _)| ns_vms.contains(n) == is_ns)
                .map(|(_, t)| t.vm.name.clone())
                .collect()
        };
        let pools = (ns_cpus > 0).then(|| {
            json!({
                "nsvm": {"cpus": ns, "vms": names(true), "slice_ms": self.slices_ms.0},
                "nnvm": {"cpus": nn, "vms": names(false), "slice_ms": self.slices_ms.1},
            })
        });
        let plan = json!({"ns_cpus": plan.ns_cpus, "nn_cpus": plan.nn_cpus,
                          "ns_exact": plan.ns_exact, "nn_exact": plan.nn_exact});
        let built = (if ns_cpus > 0 { names(true) } else { Vec::new() }, ns_cpus);
        Ok(Decision {
            want,
            log: vec![("plan", plan), ("pools", pools.into())],
            built,
        })
    }
}
