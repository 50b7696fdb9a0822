//! The reader of a cgroup hierarchy (v1 or v2), rooted at a path: a mount point, or any group
//! in it (a group is read as the hierarchy below it). Tests pass a fake tree in a tempdir. It
//! only reads; the writers (pools, attaching threads) are each agent's.

use std::path::{Path, PathBuf};

use crate::error::{read, read_cpus, Error, Result};
use crate::fs::{fs_type, CGROUP2_SUPER_MAGIC, CGROUP_SUPER_MAGIC};
use colosched_core::cpuset::CpuSet;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cgroupfs {
    pub root: PathBuf,
}

impl Cgroupfs {
    pub fn new(root: impl Into<PathBuf>) -> Cgroupfs {
        Cgroupfs { root: root.into() }
    }

    /// The directory of `group`, given relative to the root (`/` is the root itself).
    pub fn dir(&self, group: &str) -> PathBuf {
        self.root.join(group.trim_start_matches('/'))
    }

    /// The groups directly below the root, as (name, directory), sorted by name; none if the
    /// root group is gone (groups come and go at any time: the kubelet's pods, say).
    pub fn children(&self) -> Result<Vec<(String, PathBuf)>> {
        let entries = match std::fs::read_dir(&self.root) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            r => r.map_err(|e| Error::io(&self.root, e))?,
        };
        let mut out: Vec<(String, PathBuf)> = entries
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| Some((e.file_name().into_string().ok()?, e.path())))
            .collect();
        out.sort();
        Ok(out)
    }

    /// The text of the root's `file`.
    pub fn read(&self, file: &str) -> Result<String> {
        read(&self.root.join(file))
    }

    /// The ids listed one a line in `file`: `tasks` (v1), `cgroup.threads`, `cgroup.procs`.
    pub fn ids(&self, file: &str) -> Result<Vec<i32>> {
        read_ids(&self.root.join(file))
    }

    /// The CPU list in `file`: `cpuset.cpus`, `cpuset.cpus.effective` (the same in v1 and v2).
    pub fn cpus(&self, file: &str) -> Result<CpuSet> {
        read_cpus(&self.root.join(file))
    }

    /// The CPUs the group's threads may run on: its `cpuset.cpus`, or its parent's when those
    /// are not in them (v2's `cpuset.cpus.effective`).
    pub fn effective_cpus(&self) -> Result<CpuSet> {
        self.cpus("cpuset.cpus.effective")
    }

    /// Whether `file` (`cgroup.controllers` or `cgroup.subtree_control`) lists `controller`.
    pub fn lists(&self, file: &str, controller: &str) -> Result<bool> {
        Ok(self.read(file)?.split_whitespace().any(|c| c == controller))
    }

    /// The directory of `cgroup` that has `file` of `controller`: the cgroup itself (cgroup2,
    /// or a v1 path in that controller's hierarchy), else the same path in the v1 `controller`
    /// hierarchy under the root (the cgroup mounts, /sys/fs/cgroup): with cpu, cpuacct and
    /// cpuset mounted separately, <root>/cpu/be has a twin <root>/cpuset/be when the operator
    /// made one.
    pub fn controller_dir(&self, cgroup: &Path, controller: &str, file: &str) -> Option<PathBuf> {
        if cgroup.join(file).exists() {
            return Some(cgroup.to_path_buf());
        }
        let rest = cgroup.strip_prefix(&self.root).ok()?;
        let rel = rest.iter().skip(1).collect::<PathBuf>();
        let dir = self.root.join(controller).join(rel);
        dir.join(file).exists().then_some(dir)
    }
}

/// The ids listed one a line in the file at `path` (a group's `tasks`, `cgroup.threads` or
/// `cgroup.procs`); lines that are not numbers are passed over.
pub fn read_ids(path: &Path) -> Result<Vec<i32>> {
    let text = read(path)?;
    Ok(text.lines().filter_map(|l| l.trim().parse().ok()).collect())
}

/// Whether `path` is a directory of a cgroup filesystem (v1 or v2).
pub fn is_cgroup_dir(path: &Path) -> Result<()> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    if !meta.is_dir() {
        return Err(Error::parse(path, "not a directory"));
    }
    match fs_type(path).map_err(|e| Error::parse(path, format!("statfs: {e}")))? {
        CGROUP_SUPER_MAGIC | CGROUP2_SUPER_MAGIC => Ok(()),
        t => Err(Error::parse(
            path,
            format!("not a cgroup (filesystem type {t:#x}; cgroups live under /sys/fs/cgroup)"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn a_v1_twin_in_another_controllers_hierarchy() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("cpu/be")).unwrap();
        fs::create_dir_all(root.join("cpuset/be")).unwrap();
        fs::write(root.join("cpuset/be/cpuset.cpus"), "0-1").unwrap();
        let cg = Cgroupfs::new(root);
        let be = root.join("cpu/be");
        let twin = cg.controller_dir(&be, "cpuset", "cpuset.cpus");
        assert_eq!(twin, Some(root.join("cpuset/be")));
        assert_eq!(
            cg.controller_dir(&be, "cpuacct", "cpuacct.usage_percpu"),
            None
        );
        let own = cg.controller_dir(&root.join("cpuset/be"), "cpuset", "cpuset.cpus");
        assert_eq!(
            own,
            Some(root.join("cpuset/be")),
            "the cgroup itself has it"
        );
        let elsewhere = Cgroupfs::new("/elsewhere");
        assert_eq!(elsewhere.controller_dir(&be, "cpuset", "cpuset.cpus"), None);
    }

    #[test]
    fn a_groups_files_read_as_ids_cpus_and_controllers() {
        let dir = tempfile::tempdir().unwrap();
        let cg = Cgroupfs::new(dir.path());
        assert_eq!(cg.dir("/"), dir.path());
        assert_eq!(cg.dir("/a/b"), dir.path().join("a/b"));
        fs::write(dir.path().join("cgroup.threads"), "7\n8\n").unwrap();
        fs::write(dir.path().join("cgroup.controllers"), "cpuset cpu\n").unwrap();
        fs::write(dir.path().join("cpuset.cpus.effective"), "0-2,5\n").unwrap();
        fs::write(dir.path().join("cpuset.cpus"), "x\n").unwrap();
        assert_eq!(cg.ids("cgroup.threads").unwrap(), [7, 8]);
        assert!(cg.lists("cgroup.controllers", "cpuset").unwrap());
        assert!(!cg.lists("cgroup.controllers", "memory").unwrap());
        assert_eq!(cg.effective_cpus().unwrap().to_string(), "0-2,5");
        let e = cg.cpus("cpuset.cpus").unwrap_err();
        assert_eq!(e.path(), dir.path().join("cpuset.cpus"));
        assert!(e.to_string().contains("bad CPU list \"x\""), "{e}");
        let e = cg.ids("tasks").unwrap_err();
        assert!(
            matches!(&e, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
        );
        let io: std::io::Error = e.into();
        assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
        assert!(io
            .to_string()
            .starts_with(&format!("{}: ", dir.path().join("tasks").display())));
    }

    #[test]
    fn a_groups_children_are_its_directories_by_name() {
        let dir = tempfile::tempdir().unwrap();
        for d in ["b/nested", "a"] {
            fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        fs::write(dir.path().join("cgroup.procs"), "").unwrap();
        let got = Cgroupfs::new(dir.path()).children().unwrap();
        let want = [("a", dir.path().join("a")), ("b", dir.path().join("b"))];
        assert_eq!(got, want.map(|(n, p)| (n.to_string(), p)));
        let gone = Cgroupfs::new(dir.path().join("gone"));
        assert_eq!(gone.children().unwrap(), [], "a group gone has none");
        let file = Cgroupfs::new(dir.path().join("cgroup.procs"));
        let e = file.children().unwrap_err();
        assert_eq!(e.path(), dir.path().join("cgroup.procs"));
    }

    #[test]
    fn only_a_cgroup_filesystem_is_a_cgroup() {
        let dir = tempfile::tempdir().unwrap();
        let e = is_cgroup_dir(dir.path()).unwrap_err();
        assert!(e.msg().starts_with("not a cgroup (filesystem type"), "{e}");
        let f = dir.path().join("f");
        fs::write(&f, "").unwrap();
        assert_eq!(is_cgroup_dir(&f).unwrap_err().msg(), "not a directory");
        assert!(is_cgroup_dir(&dir.path().join("none")).is_err());
    }
}
