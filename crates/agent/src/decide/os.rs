//! What the thesis's all-OS mode writes: every IRQ and unbound workqueue pointed at one node.

use std::path::PathBuf;

use crate::cpuset::{cpumask_hex, CpuSet};
use crate::sense::system::OsFiles;

/// A kernel file to overwrite (cpuset.cpus, smp_affinity_list, a workqueue's cpumask).
#[derive(Clone, Debug, PartialEq)]
pub struct FileWrite {
    pub path: PathBuf,
    pub content: String,
}

/// The writes that point `files` at `cpus`: IRQs not already there, and every workqueue.
pub fn os_writes(files: &OsFiles, cpus: &CpuSet) -> Vec<FileWrite> {
    let list = cpus.to_string();
    let irqs = (files.irqs.iter())
        .filter(|(_, now)| now != cpus)
        .map(|(path, _)| FileWrite {
            path: path.clone(),
            content: list.clone(),
        });
    let hex = cpumask_hex(cpus);
    let workqueues = files.workqueues.iter().map(|path| FileWrite {
        path: path.clone(),
        content: hex.clone(),
    });
    irqs.chain(workqueues).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpuset::set;
    use crate::fake::{self, Fake};
    use crate::sense::system::os_affinity_files;

    #[test]
    fn irqs_not_on_the_node_and_every_workqueue() {
        let f = Fake::new();
        fake::write(&f.proc.join("irq/1/smp_affinity_list"), "0-1\n");
        fake::write(&f.proc.join("irq/2/smp_affinity_list"), "0\n");
        std::fs::create_dir_all(f.proc.join("irq/default_smp_affinity_dir")).unwrap();
        fake::write(
            &f.sys.join("devices/virtual/workqueue/writeback/cpumask"),
            "3\n",
        );
        std::fs::create_dir_all(f.sys.join("devices/virtual/workqueue/bound")).unwrap();
        let files = os_affinity_files(&f.proc, &f.sys);
        assert_eq!((files.irqs.len(), files.workqueues.len()), (2, 1));
        let w = os_writes(&files, &set("0"));
        let got: Vec<(String, &str)> = (w.iter())
            .map(|w| {
                (
                    w.path.strip_prefix(&f.root).unwrap().display().to_string(),
                    &*w.content,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("proc/irq/1/smp_affinity_list".into(), "0"),
                (
                    "sys/devices/virtual/workqueue/writeback/cpumask".into(),
                    "1"
                ),
            ]
        );
    }
}
