//! Which CPUs belong to which node: NUMA nodes from sysfs, or pseudo-nodes from the config.

use std::fs;
use std::path::Path;

/// One node of the cell: its index in the topology, its sysfs id, and its CPUs (sorted).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeCpus {
    pub id: usize,
    pub cpus: Vec<usize>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    pub nodes: Vec<NodeCpus>,
    /// Every CPU of every node, sorted.
    pub all_cpus: Vec<usize>,
    /// "numa" or "pseudo".
    pub source: &'static str,
}

impl Topology {
    /// NUMA nodes from `<sysfs>/devices/system/node/node<N>/cpulist`; CPU-less nodes are skipped.
    pub fn from_sysfs(sysfs: &Path) -> Result<Topology, String> {
        let dir = sysfs.join("devices/system/node");
        let entries = fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut nodes = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(id) = name
                .to_str()
                .and_then(|n| n.strip_prefix("node")?.parse().ok())
            else {
                continue;
            };
            let path = entry.path().join("cpulist");
            let text = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let cpus = parse_cpulist(&text).map_err(|e| format!("{}: {e}", path.display()))?;
            if !cpus.is_empty() {
                nodes.push(NodeCpus { id, cpus });
            }
        }
        nodes.sort_by_key(|n| n.id);
        if nodes.is_empty() {
            return Err(format!("{}: no NUMA node with CPUs", dir.display()));
        }
        Topology::new(nodes, "numa")
    }

    /// Pseudo-nodes: node i holds the CPUs of `lists[i]`.
    pub fn pseudo(lists: &[String]) -> Result<Topology, String> {
        let nodes = lists
            .iter()
            .enumerate()
            .map(|(id, l)| {
                Ok(NodeCpus {
                    id,
                    cpus: parse_cpulist(l).map_err(|e| format!("[{id}]: {e}"))?,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        Topology::new(nodes, "pseudo")
    }

    fn new(nodes: Vec<NodeCpus>, source: &'static str) -> Result<Topology, String> {
        if nodes.len() < 2 {
            return Err(format!("needs at least 2 nodes, got {}", nodes.len()));
        }
        let mut all: Vec<usize> = nodes.iter().flat_map(|n| n.cpus.iter().copied()).collect();
        all.sort_unstable();
        if let Some(w) = all.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!("CPU {} belongs to two nodes", w[0]));
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
        self.nodes
            .iter()
            .position(|n| n.cpus.binary_search(&cpu).is_ok())
    }

    /// The node whose CPUs contain every CPU of `mask`, if exactly one does.
    pub fn node_containing(&self, mask: &[usize]) -> Option<usize> {
        let first = self.node_of_cpu(*mask.first()?)?;
        mask.iter()
            .all(|c| self.nodes[first].cpus.binary_search(c).is_ok())
            .then_some(first)
    }
}

/// The CPUs of `<sysfs>/devices/system/cpu/<which>` (`online`, `possible`).
pub fn cpus(sysfs: &Path, which: &str) -> Result<Vec<usize>, String> {
    let path = sysfs.join("devices/system/cpu").join(which);
    let text = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse_cpulist(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The CPUs that exist but are offline now (empty if sysfs does not say).
pub fn offline_cpus(sysfs: &Path) -> Vec<usize> {
    match (cpus(sysfs, "possible"), cpus(sysfs, "online")) {
        (Ok(possible), Ok(online)) => possible
            .into_iter()
            .filter(|c| online.binary_search(c).is_err())
            .collect(),
        _ => Vec::new(),
    }
}

/// Parses the kernel's CPU list format: `0-3,8,10-11` (whitespace and a trailing newline allowed).
pub fn parse_cpulist(text: &str) -> Result<Vec<usize>, String> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.trim().is_empty()) {
        let part = part.trim();
        let num = |s: &str| {
            s.trim()
                .parse::<usize>()
                .map_err(|_| format!("bad CPU list {:?}", text.trim()))
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b || b >= 4096 {
                    return Err(format!("bad CPU range {part:?}"));
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(num(part)?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// The inverse of `parse_cpulist`: `[0,1,2,5]` → `0-2,5`.
pub fn format_cpulist(cpus: &[usize]) -> String {
    let mut out = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpulist_round_trip() {
        assert_eq!(
            parse_cpulist("0-3,8,10-11\n").unwrap(),
            vec![0, 1, 2, 3, 8, 10, 11]
        );
        assert_eq!(format_cpulist(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(parse_cpulist("\n").unwrap(), Vec::<usize>::new());
        assert!(parse_cpulist("3-1").is_err());
        assert!(parse_cpulist("a").is_err());
    }

    #[test]
    fn sysfs_nodes_skip_cpuless_and_sort() {
        let dir = tempfile::tempdir().unwrap();
        for (n, list) in [(1, "2-3"), (0, "0-1"), (2, "")] {
            let d = dir.path().join(format!("devices/system/node/node{n}"));
            fs::create_dir_all(&d).unwrap();
            fs::write(d.join("cpulist"), format!("{list}\n")).unwrap();
        }
        fs::create_dir_all(dir.path().join("devices/system/node/power")).unwrap();
        let t = Topology::from_sysfs(dir.path()).unwrap();
        assert_eq!(t.nodes.iter().map(|n| n.id).collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(t.node_of_cpu(3), Some(1));
        assert_eq!(t.node_containing(&[2, 3]), Some(1));
        assert_eq!(t.node_containing(&[1, 2]), None);
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
