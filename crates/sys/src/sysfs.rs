//! The reader of a sysfs rooted at a path (tests pass a fake tree in a tempdir): the CPUs and
//! NUMA nodes (`devices/system/cpu`, `devices/system/node`), a CPU's own files (cpufreq,
//! capacity), a hybrid CPU's core lists, the unbound workqueues, and a network device's
//! counters, read as [`KeptFile`]s. Errors name the file.

use std::cell::OnceCell;
use std::path::PathBuf;

use crate::error::{if_exists, read, read_cpus, Error, Result};
use crate::fs::{fs_type, SYSFS_MAGIC};
use crate::kept::KeptFile;
use colosched_core::cpuset::CpuSet;

#[derive(Clone, Debug)]
pub struct Sysfs {
    pub root: PathBuf,
    /// The root is a sysfs: its files may be kept open (see `kept`). Looked at the first time
    /// a kept file is made, so a `Sysfs` made for one read costs no system call more.
    keep: OnceCell<bool>,
}

impl Sysfs {
    pub fn new(root: impl Into<PathBuf>) -> Sysfs {
        Sysfs {
            root: root.into(),
            keep: OnceCell::new(),
        }
    }

    fn keep(&self) -> bool {
        *(self.keep).get_or_init(|| fs_type(&self.root).is_ok_and(|t| t == SYSFS_MAGIC))
    }

    /// The directory of the CPUs' files (`devices/system/cpu`).
    pub fn cpu_dir(&self) -> PathBuf {
        self.root.join("devices/system/cpu")
    }

    /// The CPUs of `devices/system/cpu/<which>`: `online`, `possible`, `present`.
    pub fn cpus(&self, which: &str) -> Result<CpuSet> {
        read_cpus(&self.cpu_dir().join(which))
    }

    /// CPU `cpu`'s `file` (`devices/system/cpu/cpu<cpu>/<file>`).
    pub fn cpu_file(&self, cpu: usize, file: &str) -> PathBuf {
        self.cpu_dir().join(format!("cpu{cpu}")).join(file)
    }

    /// CPU `cpu`'s `file` as a whole number (`cpu_capacity`, `cpufreq/cpuinfo_max_freq`); an
    /// `Error::Io` when the CPU has no such file.
    pub fn cpu_number(&self, cpu: usize, file: &str) -> Result<u64> {
        let path = self.cpu_file(cpu, file);
        let text = read(&path)?;
        let text = text.trim();
        text.parse()
            .map_err(|_| Error::parse(&path, format!("{text:?} is not a whole number")))
    }

    /// The file that lists the CPUs of performance-monitoring unit `pmu`
    /// (`devices/cpu_core/cpus`, `devices/cpu_atom/cpus` on Intel hybrids).
    pub fn pmu_cpus_file(&self, pmu: &str) -> PathBuf {
        self.root.join("devices").join(pmu).join("cpus")
    }

    /// The CPUs of `pmu` (see `pmu_cpus_file`); `None` if there is no such file.
    pub fn pmu_cpus(&self, pmu: &str) -> Result<Option<CpuSet>> {
        if_exists(read_cpus(&self.pmu_cpus_file(pmu)))
    }

    /// The directory of the NUMA nodes (`devices/system/node`).
    pub fn node_dir(&self) -> PathBuf {
        self.root.join("devices/system/node")
    }

    /// Every NUMA node's id and CPUs (`node<N>/cpulist`), by id; CPU-less nodes too.
    pub fn numa_nodes(&self) -> Result<Vec<(usize, CpuSet)>> {
        let dir = self.node_dir();
        let entries = std::fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))?;
        let mut nodes = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(id) = (name.to_str()).and_then(|n| n.strip_prefix("node")?.parse().ok())
            else {
                continue;
            };
            nodes.push((id, read_cpus(&entry.path().join("cpulist"))?));
        }
        nodes.sort_by_key(|&(id, _)| id);
        Ok(nodes)
    }

    /// The `cpumask` file of every workqueue that has one (the unbound ones) under
    /// `devices/virtual/workqueue`; none if sysfs does not show them.
    pub fn workqueue_cpumasks(&self) -> Vec<PathBuf> {
        let dir = self.root.join("devices/virtual/workqueue");
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        (entries.flatten())
            .map(|e| e.path().join("cpumask"))
            .filter(|p| p.exists())
            .collect()
    }

    /// The directory of network device `dev`'s counters (`class/net/<dev>/statistics`).
    pub fn net_stats(&self, dev: &str) -> PathBuf {
        self.root.join("class/net").join(dev).join("statistics")
    }

    /// Counter `name` of network device `dev` (`tx_dropped`, `rx_packets`, …).
    pub fn net_counter(&self, dev: &str, name: &str) -> KeptFile {
        KeptFile::new(self.net_stats(dev).join(name), self.keep())
    }

    /// Whether the root shows network device `dev`.
    pub fn has_net_device(&self, dev: &str) -> bool {
        self.root.join("class/net").join(dev).exists()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::path::Path;

    fn put(root: &Path, rel: &str, text: &str) {
        let path = root.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    #[test]
    fn nodes_by_id_cpus_and_a_cpus_numbers() {
        let dir = tempfile::tempdir().unwrap();
        let sys = Sysfs::new(dir.path());
        let e = sys.numa_nodes().unwrap_err();
        assert_eq!(e.path(), dir.path().join("devices/system/node"));
        for (n, list) in [(1, "2-3\n"), (0, "0-1\n"), (2, "\n")] {
            put(
                dir.path(),
                &format!("devices/system/node/node{n}/cpulist"),
                list,
            );
        }
        fs::create_dir_all(dir.path().join("devices/system/node/power")).unwrap();
        let nodes = sys.numa_nodes().unwrap();
        let got: Vec<(usize, String)> = nodes.iter().map(|(n, c)| (*n, c.to_string())).collect();
        let want = [(0, "0-1"), (1, "2-3"), (2, "")];
        assert_eq!(got, want.map(|(n, c)| (n, c.to_string())));
        put(dir.path(), "devices/system/node/node1/cpulist", "2-x\n");
        let e = sys.numa_nodes().unwrap_err();
        assert_eq!(
            e.path(),
            dir.path().join("devices/system/node/node1/cpulist")
        );
        assert!(e.msg().contains("bad CPU list"), "{e}");

        put(dir.path(), "devices/system/cpu/online", "0-2,5\n");
        assert_eq!(sys.cpus("online").unwrap().to_string(), "0-2,5");
        assert!(matches!(sys.cpus("possible"), Err(Error::Io { .. })));
        put(dir.path(), "devices/system/cpu/cpu1/cpu_capacity", "1024\n");
        put(dir.path(), "devices/system/cpu/cpu2/cpu_capacity", "big\n");
        assert_eq!(sys.cpu_number(1, "cpu_capacity").unwrap(), 1024);
        let e = sys.cpu_number(2, "cpu_capacity").unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{}: \"big\" is not a whole number",
                dir.path()
                    .join("devices/system/cpu/cpu2/cpu_capacity")
                    .display()
            )
        );
        assert!(matches!(
            sys.cpu_number(0, "cpu_capacity"),
            Err(Error::Io { .. })
        ));
    }

    #[test]
    fn hybrid_lists_workqueues_and_net_devices() {
        let dir = tempfile::tempdir().unwrap();
        let sys = Sysfs::new(dir.path());
        assert_eq!(sys.pmu_cpus("cpu_core").unwrap(), None, "not a hybrid");
        put(dir.path(), "devices/cpu_core/cpus", "0-3\n");
        put(dir.path(), "devices/cpu_atom/cpus", "x\n");
        assert_eq!(
            sys.pmu_cpus("cpu_core").unwrap().unwrap().to_string(),
            "0-3"
        );
        let e = sys.pmu_cpus("cpu_atom").unwrap_err();
        assert_eq!(e.path(), sys.pmu_cpus_file("cpu_atom"));

        assert!(sys.workqueue_cpumasks().is_empty());
        put(
            dir.path(),
            "devices/virtual/workqueue/writeback/cpumask",
            "3\n",
        );
        fs::create_dir_all(dir.path().join("devices/virtual/workqueue/bound")).unwrap();
        let wq = dir
            .path()
            .join("devices/virtual/workqueue/writeback/cpumask");
        assert_eq!(sys.workqueue_cpumasks(), [wq]);

        assert!(!sys.has_net_device("tap0"));
        put(dir.path(), "class/net/tap0/statistics/rx_packets", "7\n");
        assert!(sys.has_net_device("tap0"));
        let mut counter = sys.net_counter("tap0", "rx_packets");
        assert_eq!(counter.read(&mut [0u8; 16]), Some("7\n"));
        assert!(!counter.is_open(), "a tempdir's files are not kept open");
    }

    #[test]
    fn this_machines_sysfs() {
        let sys = Sysfs::new("/sys");
        let online = sys.cpus("online").unwrap();
        assert!(online.is_subset(&sys.cpus("possible").unwrap()) && !online.is_empty());
        assert!(sys.keep());
    }
}
