//! Spec 001 on a Linux host (`ia-rotate`): each window, charge each VM the scaled work its vCPUs
//! did in the cycle that ended (`rotate::account`), place every vCPU for the next one
//! (`rotate::place`) and pin each thread to its CPU's group.

use colosched_core::cpuset::CpuSet;
use serde_json::{json, Value};

use super::{Decision, Seen, Strategy, Want};
use crate::agent::apply::Pool;
use crate::agent::config::HostConfig;
use crate::agent::error::{Error, Result};
use crate::decide::ia::{CoreClass, VmShape};
use crate::decide::rotate::{
    account, class_of, place, Ledger, Placement, RotVm, RotateParams, VcpuRun,
};
use crate::real::classes::{read_classes, HostClasses};

/// The host's classes, the scaled-resource ledger and the placement in force, with the VMs it
/// was made for.
pub struct IaRotate {
    classes: HostClasses,
    ledger: Ledger,
    params: RotateParams,
    prev: Option<(Vec<RotVm>, Placement)>,
}

impl IaRotate {
    /// The classes of `cpus` from `[classes]` or sysfs; a host of one class is a config error.
    pub fn new(cfg: &HostConfig, cpus: &[usize]) -> Result<IaRotate> {
        let key = if cfg.classes.is_some() {
            "classes"
        } else {
            "paths.sys_root"
        };
        let classes = read_classes(&cfg.sys_root, cpus, cfg.classes.as_ref())
            .map_err(|e| Error::config(key, e))?;
        if classes.single_class() {
            return Err(Error::config(
                "scheduler",
                format!(
                    "ia-rotate needs two core classes; this host has one ({}): give \
                     [classes] fast, slow and sf_fast, or use scheduler = \"diff\"",
                    classes.source
                ),
            ));
        }
        let params = RotateParams {
            cycle_ns: cfg.window_ms as u64 * 1_000_000,
            ..RotateParams::default()
        };
        Ok(IaRotate {
            classes,
            ledger: Ledger::new(),
            params,
            prev: None,
        })
    }
}

impl Strategy for IaRotate {
    /// Adds each VM's CPUs, class and balance to its log row.
    fn decide(&mut self, seen: &Seen, rows: &mut [Value]) -> Result<Decision> {
        let platform = &self.classes.platform;
        let vms: Vec<RotVm> = (seen.vms.iter())
            .map(|t| RotVm {
                key: t.key(),
                shape: VmShape {
                    weight: t.weight,
                    vcpus: t.vm.vcpus.len(),
                },
            })
            .collect();
        if let Some((prev_vms, prev)) = &self.prev {
            let mut runs = Vec::new();
            for (t, (d, _)) in seen.vms.iter().zip(seen.cpu) {
                let Some(cores) = prev.cores_of(t.key()) else {
                    continue;
                };
                for (v, &core) in d.vcpus.iter().zip(cores) {
                    if let Some(v) = v {
                        runs.push(VcpuRun {
                            vm: t.key(),
                            core,
                            run_ns: v.run_ns,
                            wait_ns: v.wait_ns,
                        });
                    }
                }
            }
            // The run times cover the readings' interval, however long the cycle really was.
            let elapsed = seen
                .cpu
                .iter()
                .map(|(d, _)| d.interval_ns)
                .max()
                .unwrap_or(0);
            account(
                &mut self.ledger,
                platform,
                prev_vms,
                &runs,
                elapsed,
                &self.params,
            );
        }
        let placement = place(
            platform,
            &vms,
            &self.ledger,
            self.prev.as_ref().map(|p| &p.1),
            &self.params,
        )
        .map_err(|e| Error::Runtime(format!("ia-rotate placement: {e}")))?;
        let cpus_of = |n: usize| -> Vec<usize> {
            placement.cores[n]
                .iter()
                .map(|&c| self.classes.cpus[c])
                .collect()
        };
        let mut fast = Vec::new();
        for (n, row) in rows.iter_mut().enumerate() {
            let class = class_of(platform, &placement.cores[n]);
            if class == Some(CoreClass::Fast) {
                fast.push(seen.vms[n].vm.name.clone());
            }
            row["cpus_next"] = json!(cpus_of(n));
            row["class_next"] = json!(match class {
                Some(CoreClass::Fast) => "fast",
                Some(CoreClass::Slow) => "slow",
                None => "both",
            });
            row["sr_per_weight"] = json!(self.ledger.get(vms[n].key).map(|a| a.per_weight()));
        }
        let groups: Vec<(Pool, CpuSet)> = (self.classes.cpus.iter())
            .map(|&c| (Pool::Cpu(c), CpuSet::from_slice(&[c])))
            .collect();
        let seats = (0..vms.len())
            .map(|n| cpus_of(n).into_iter().map(Pool::Cpu).collect())
            .collect();
        let classes = json!({"source": self.classes.source, "fast": fast});
        self.prev = Some((vms, placement));
        Ok(Decision {
            want: Want::Seats { groups, seats },
            log: vec![("classes", classes)],
            built: (Vec::new(), 0),
        })
    }

    fn reset(&mut self) {
        self.prev = None;
    }

    fn classes_source(&self) -> Option<&str> {
        Some(&self.classes.source)
    }
}
