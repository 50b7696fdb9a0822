//! The kernel files the thesis's all-OS mode points at a node: IRQ affinities and unbound
//! workqueue cpumasks (read by `colosched_sys`'s `Procfs` and `Sysfs`).

use std::path::{Path, PathBuf};

use crate::cpuset::CpuSet;
use colosched_sys::{Procfs, Sysfs};

/// The all-OS mode's files as they are now.
#[derive(Debug, Default, PartialEq)]
pub struct OsFiles {
    /// <proc>/irq/<n>/smp_affinity_list and the CPUs it holds.
    pub irqs: Vec<(PathBuf, CpuSet)>,
    /// <sys>/devices/virtual/workqueue/<name>/cpumask (unbound workqueues have one).
    pub workqueues: Vec<PathBuf>,
}

pub fn os_affinity_files(procfs: &Path, sysfs: &Path) -> OsFiles {
    OsFiles {
        irqs: Procfs::new(procfs).irq_affinities(),
        workqueues: Sysfs::new(sysfs).workqueue_cpumasks(),
    }
}
