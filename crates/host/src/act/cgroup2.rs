//! CPU pools on cgroup v2: threaded groups beside the thread's own cgroup, the way libvirt makes
//! its `libvirt/vcpuN` groups. v2 keeps all threads of a process in one cgroup unless that
//! cgroup is the root of a threaded subtree, and moving the QEMU process into a cgroup of ours
//! would take it out of its libvirt/systemd cgroup (memory.max, cpu.weight): so a vCPU thread in
//! cgroup P goes into `P/<pool>`, a child of type `threaded`, and P stays its resource domain.
//!
//! The kernel's rules, as checked in the NUMA guest (Linux 6.1; tests/test_host_pools_v2.py):
//! - `cpuset.cpus` exists in `P/<pool>` only once `cpuset` is in P's `cgroup.subtree_control`,
//!   which needs it in every ancestor's, enabled from the root down (ENOENT otherwise). A P that
//!   holds processes may enable it: cpuset is a threaded controller, and P becomes
//!   "domain threaded".
//! - `threaded` can be written to `cgroup.type` before or after that; never back to `domain`
//!   (EINVAL): the group is rmdir'd instead, and P is a plain domain again.
//! - Only `cgroup.threads` moves one thread: a tid written to a threaded group's `cgroup.procs`
//!   moves its whole process. A thread of another threaded domain is refused (EOPNOTSUPP), a gone
//!   one is ESRCH.
//! - A child's `cpuset.cpus` outside P's effective CPUs falls back to P's (the write succeeds):
//!   `effective_cpus` tells.
//! - Undoing: threads back to P's `cgroup.threads`, rmdir (EBUSY while a thread is in it), then
//!   `-cpuset` from the deepest `cgroup.subtree_control` up (EBUSY while a child still has it).
//!   While our child exists P cannot be removed (EBUSY), so a gone VM's groups go at once.
//!
//! A pool is only ever a group this agent created: `create` refuses a directory that exists.

use super::{make_group, remove_group, set_cpus, write, Cgroup};
use colosched_core::cpuset::CpuSet;
use colosched_sys::Cgroupfs;
use std::io;
use std::path::{Path, PathBuf};

/// One threaded group the agent made.
#[derive(Debug)]
pub struct ThreadedPool {
    pub dir: PathBuf,
}

impl ThreadedPool {
    /// Makes `parent/name`, threaded, with CPUs `cpus`. `parent` must have `cpuset` in its
    /// `cgroup.subtree_control` already (`enable_cpuset`). Fails if the group exists (it is not
    /// ours) or the kernel refuses; a group half made is removed again.
    pub fn create(parent: &Path, name: &str, cpus: &CpuSet) -> io::Result<ThreadedPool> {
        let dir = make_group(parent, name, |dir| {
            write(&dir.join("cgroup.type"), "threaded")?;
            set_cpus(dir, cpus)
        })?;
        Ok(ThreadedPool { dir })
    }

    pub fn set_cpus(&self, cpus: &CpuSet) -> io::Result<()> {
        set_cpus(&self.dir, cpus)
    }

    /// The CPUs its threads may run on: `cpus`, or the parent's when those are not in it.
    pub fn effective_cpus(&self) -> io::Result<CpuSet> {
        Ok(Cgroupfs::new(&self.dir).effective_cpus()?)
    }

    /// Moves thread `tid` (of a process in the parent's threaded domain) into the pool.
    pub fn attach(&self, tid: i32) -> io::Result<()> {
        attach(&self.dir, tid)
    }

    pub fn tids(&self) -> io::Result<Vec<i32>> {
        Cgroup::V2.tids(&self.dir)
    }

    /// Removes the pool (EBUSY while a thread is in it).
    pub fn remove(self) -> io::Result<()> {
        remove_group(&self.dir)
    }
}

/// Moves thread `tid` into the v2 group `dir`: `cgroup.threads`, never `cgroup.procs` (which
/// would move the whole process).
pub fn attach(dir: &Path, tid: i32) -> io::Result<()> {
    write(&dir.join("cgroup.threads"), &tid.to_string())
}

/// The groups from `root` down to `root/group` (both included) whose `cgroup.subtree_control`
/// lacks cpuset, root first: where `enable_cpuset` must go, in this order, before a pool can be
/// made in `root/group`.
pub fn cpuset_missing(root: &Path, group: &str) -> io::Result<Vec<PathBuf>> {
    let mut dir = root.to_path_buf();
    let mut out = Vec::new();
    let parts = group.split('/').filter(|p| !p.is_empty());
    for next in std::iter::once(None).chain(parts.map(Some)) {
        if let Some(p) = next {
            dir.push(p);
        }
        if !Cgroupfs::new(&dir).lists("cgroup.subtree_control", "cpuset")? {
            out.push(dir.clone());
        }
    }
    Ok(out)
}

pub fn enable_cpuset(dir: &Path) -> io::Result<()> {
    write(&dir.join("cgroup.subtree_control"), "+cpuset")
}

pub fn disable_cpuset(dir: &Path) -> io::Result<()> {
    write(&dir.join("cgroup.subtree_control"), "-cpuset")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn group_of_reads_the_v2_line() {
        let dir = tempfile::tempdir().unwrap();
        let task = dir.path().join("7/task/8");
        fs::create_dir_all(&task).unwrap();
        fs::write(
            task.join("cgroup"),
            "3:cpuset:/\n0::/machine.slice/vm 1.scope\n",
        )
        .unwrap();
        assert_eq!(
            Cgroup::V2.group_of(dir.path(), 7, 8).unwrap(),
            "/machine.slice/vm 1.scope"
        );
        fs::write(task.join("cgroup"), "3:cpuset:/\n").unwrap();
        let err = Cgroup::V2.group_of(dir.path(), 7, 8).unwrap_err();
        assert!(err.to_string().contains("no 0:: line"), "{err}");
    }

    #[test]
    fn cpuset_missing_lists_the_path_root_first() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        for (d, sc) in [("", "memory cpuset"), ("vms", "memory"), ("vms/a", "")] {
            fs::create_dir_all(r.join(d)).unwrap();
            fs::write(r.join(d).join("cgroup.subtree_control"), sc).unwrap();
        }
        assert_eq!(
            cpuset_missing(r, "/vms/a").unwrap(),
            vec![r.join("vms"), r.join("vms/a")]
        );
        assert_eq!(cpuset_missing(r, "/").unwrap(), Vec::<PathBuf>::new());
        assert!(cpuset_missing(r, "/vms/nope").is_err());
    }
}
