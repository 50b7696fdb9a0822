//! Where cgroup files are: which directory of a cgroup has a controller's file, and whether a
//! path is a cgroup at all.

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// The directory of `cgroup` that has `file` of `controller`: the cgroup itself (cgroup2, or a
/// v1 path in that controller's hierarchy), else the same path in the v1 `controller` hierarchy
/// under `root` (the cgroup mounts, /sys/fs/cgroup): with cpu, cpuacct and cpuset mounted
/// separately, <root>/cpu/be has a twin <root>/cpuset/be when the operator made one.
pub fn controller_dir(root: &Path, cgroup: &Path, controller: &str, file: &str) -> Option<PathBuf> {
    if cgroup.join(file).exists() {
        return Some(cgroup.to_path_buf());
    }
    let rest = cgroup.strip_prefix(root).ok()?;
    let rel = rest.iter().skip(1).collect::<PathBuf>();
    let dir = root.join(controller).join(rel);
    dir.join(file).exists().then_some(dir)
}

/// Whether `path` is a directory of a cgroup filesystem (v1 or v2).
pub fn is_cgroup_dir(path: &Path) -> Result<()> {
    use colosched_sys::fs::{fs_type, CGROUP2_SUPER_MAGIC, CGROUP_SUPER_MAGIC};
    let meta = std::fs::metadata(path).map_err(|e| Error::read(path, e))?;
    if !meta.is_dir() {
        return Err(Error::read(path, "not a directory"));
    }
    match fs_type(path).map_err(|e| Error::read(path, format!("statfs: {e}")))? {
        CGROUP_SUPER_MAGIC | CGROUP2_SUPER_MAGIC => Ok(()),
        t => Err(Error::read(
            path,
            format!("not a cgroup (filesystem type {t:#x}; cgroups live under /sys/fs/cgroup)"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_v1_twin_in_another_controllers_hierarchy() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("cpu/be")).unwrap();
        std::fs::create_dir_all(root.join("cpuset/be")).unwrap();
        std::fs::write(root.join("cpuset/be/cpuset.cpus"), "0-1").unwrap();
        let be = root.join("cpu/be");
        let twin = controller_dir(root, &be, "cpuset", "cpuset.cpus");
        assert_eq!(twin, Some(root.join("cpuset/be")));
        assert_eq!(
            controller_dir(root, &be, "cpuacct", "cpuacct.usage_percpu"),
            None
        );
        let own = controller_dir(root, &root.join("cpuset/be"), "cpuset", "cpuset.cpus");
        assert_eq!(
            own,
            Some(root.join("cpuset/be")),
            "the cgroup itself has it"
        );
        assert_eq!(
            controller_dir(Path::new("/elsewhere"), &be, "cpuset", "cpuset.cpus"),
            None
        );
    }
}
