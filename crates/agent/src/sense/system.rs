//! The kernel files the thesis's all-OS mode points at a node: IRQ affinities and unbound
//! workqueue cpumasks.

use std::fs;
use std::path::{Path, PathBuf};

/// The all-OS mode's files as they are now.
#[derive(Debug, Default, PartialEq)]
pub struct OsFiles {
    /// <proc>/irq/<n>/smp_affinity_list and what it holds.
    pub irqs: Vec<(PathBuf, String)>,
    /// <sys>/devices/virtual/workqueue/<name>/cpumask (unbound workqueues have one).
    pub workqueues: Vec<PathBuf>,
}

pub fn os_affinity_files(procfs: &Path, sysfs: &Path) -> OsFiles {
    let dirs = |p: &Path| {
        fs::read_dir(p)
            .map(|d| d.flatten().map(|e| e.path()).collect::<Vec<_>>())
            .unwrap_or_default()
    };
    let irqs = (dirs(&procfs.join("irq")).into_iter())
        .map(|d| d.join("smp_affinity_list"))
        .filter_map(|p| {
            let text = fs::read_to_string(&p).ok()?.trim().to_string();
            Some((p, text))
        })
        .collect();
    let workqueues = (dirs(&sysfs.join("devices/virtual/workqueue")).into_iter())
        .map(|d| d.join("cpumask"))
        .filter(|p| p.exists())
        .collect();
    OsFiles { irqs, workqueues }
}
