//! Which CPUs belong to which node: NUMA nodes from sysfs, or pseudo-nodes from the config.

use std::path::Path;

use crate::cpuset::CpuSet;
use crate::error::{Error, Result};
use colosched_sys::Sysfs;

/// One node of the cell: its sysfs id and its CPUs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeCpus {
    pub id: usize,
    pub cpus: CpuSet,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    pub nodes: Vec<NodeCpus>,
    /// Every CPU of every node.
    pub all_cpus: CpuSet,
    /// "numa" or "pseudo".
    pub source: &'static str,
}

impl Topology {
    /// NUMA nodes from `<sysfs>/devices/system/node/node<N>/cpulist`; CPU-less nodes are skipped.
    pub fn from_sysfs(sysfs: &Path) -> Result<Topology> {
        let sysfs = Sysfs::new(sysfs);
        let nodes: Vec<NodeCpus> = (sysfs.numa_nodes()?.into_iter())
            .filter(|(_, cpus)| !cpus.is_empty())
            .map(|(id, cpus)| NodeCpus { id, cpus })
            .collect();
        let dir = sysfs.node_dir();
        if nodes.is_empty() {
            return Err(Error::read(&dir, "no NUMA node with CPUs"));
        }
        Topology::new(nodes, "numa").map_err(|e| Error::read(&dir, e))
    }

    /// Pseudo-nodes: node i holds the CPUs of `lists[i]`.
    pub fn pseudo(lists: &[String]) -> std::result::Result<Topology, String> {
        let nodes = lists
            .iter()
            .enumerate()
            .map(|(id, l)| {
                Ok(NodeCpus {
                    id,
                    cpus: l.parse().map_err(|e| format!("[{id}]: {e}"))?,
                })
            })
            .collect::<std::result::Result<Vec<_>, String>>()?;
        Topology::new(nodes, "pseudo")
    }

    fn new(nodes: Vec<NodeCpus>, source: &'static str) -> std::result::Result<Topology, String> {
        if nodes.len() < 2 {
            return Err(format!("needs at least 2 nodes, got {}", nodes.len()));
        }
        let mut all = CpuSet::default();
        for n in &nodes {
            if let Some(c) = n.cpus.iter().find(|&c| all.contains(c)) {
                return Err(format!("CPU {c} belongs to two nodes"));
            }
            n.cpus.iter().for_each(|c| all.insert(c));
        }
        if nodes.iter().any(|n| n.cpus.is_empty()) {
            return Err("a node has no CPUs".into());
        }
        Ok(Topology {
            nodes,
            all_cpus: all,
            source,
        })
    }

    /// The node index (not sysfs id) that holds `cpu`.
    pub fn node_of_cpu(&self, cpu: usize) -> Option<usize> {
        self.nodes.iter().position(|n| n.cpus.contains(cpu))
    }

    /// The node whose CPUs contain every CPU of `mask`, if exactly one does.
    pub fn node_containing(&self, mask: &CpuSet) -> Option<usize> {
        let first = self.node_of_cpu(mask.first()?)?;
        mask.is_subset(&self.nodes[first].cpus).then_some(first)
    }

    /// The nodes `mask` lets a task run on.
    pub fn reach(&self, mask: &CpuSet) -> CpuSet {
        mask.iter().filter_map(|c| self.node_of_cpu(c)).collect()
    }
}

/// The CPUs of `<sysfs>/devices/system/cpu/<which>` (`online`, `possible`).
pub fn cpus(sysfs: &Path, which: &str) -> Result<CpuSet> {
    Ok(Sysfs::new(sysfs).cpus(which)?)
}

/// The CPUs that exist but are offline now (empty if sysfs does not say).
pub fn offline_cpus(sysfs: &Path) -> CpuSet {
    match (cpus(sysfs, "possible"), cpus(sysfs, "online")) {
        (Ok(possible), Ok(online)) => possible.difference(&online),
        _ => CpuSet::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysfs_nodes_skip_cpuless_and_sort() {
        let f = crate::fake::Fake::new();
        for (n, list) in [(1, "2-3"), (0, "0-1"), (2, "")] {
            crate::fake::node(&f.sys, n, list);
        }
        std::fs::create_dir_all(f.sys.join("devices/system/node/power")).unwrap();
        let t = Topology::from_sysfs(&f.sys).unwrap();
        assert_eq!(t.nodes.iter().map(|n| n.id).collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(t.node_of_cpu(3), Some(1));
        assert_eq!(t.node_containing(&crate::cpuset::set("2-3")), Some(1));
        assert_eq!(t.node_containing(&crate::cpuset::set("1-2")), None);
    }

    #[test]
    fn pseudo_nodes_reject_overlap_and_single_node() {
        assert!(Topology::pseudo(&["0".into(), "1".into()]).is_ok());
        assert!(Topology::pseudo(&["0-1".into(), "1".into()])
            .unwrap_err()
            .contains("two nodes"));
        assert!(Topology::pseudo(&["0-1".into()]).is_err());
    }
}
