//! CPU pools as cgroup v1 `cpuset` groups: the real form of spec 002's NSVM and NNVM pools.
//! v1 lets each thread of a process sit in its own group (`tasks`), so the vCPU threads of one
//! QEMU can be split between pools while its I/O threads stay where they were. (cgroup v2 needs
//! threaded subtrees for that: `act::cgroup2`.)
//!
//! What the kernel does that restore relies on (checked by the tests on this 6.18 kernel): a
//! thread moved into a cpuset runs on the cpuset's CPUs, and moved back it runs where its own
//! `sched_setaffinity` mask said again (the kernel keeps that mask apart since Linux 6.2), so
//! a vCPU pinned by libvirt keeps its pinning once it leaves the pool.
//!
//! A pool is only ever a group this agent created: `create` refuses a directory that exists.

use super::{make_group, remove_group, set_cpus, write, Cgroup};
use colosched_core::cpuset::CpuSet;
use colosched_sys::Cgroupfs;
use std::io;
use std::path::{Path, PathBuf};

/// One cpuset group the agent made.
#[derive(Debug)]
pub struct CpusetPool {
    pub dir: PathBuf,
}

impl CpusetPool {
    /// Makes `parent/name` with CPUs `cpus` and the parent's memory nodes. Fails if the group
    /// exists (it is not ours) or the kernel refuses the CPUs; a group half made is removed
    /// again.
    pub fn create(parent: &Path, name: &str, cpus: &CpuSet) -> io::Result<CpusetPool> {
        let dir = make_group(parent, name, |dir| {
            let mems = Cgroupfs::new(parent).read("cpuset.mems")?;
            write(&dir.join("cpuset.mems"), mems.trim())?;
            set_cpus(dir, cpus)
        })?;
        Ok(CpusetPool { dir })
    }

    pub fn set_cpus(&self, cpus: &CpuSet) -> io::Result<()> {
        set_cpus(&self.dir, cpus)
    }

    /// Moves thread `tid` (of any process) into the pool.
    pub fn attach(&self, tid: i32) -> io::Result<()> {
        attach(&self.dir, tid)
    }

    /// The threads in the pool.
    pub fn tids(&self) -> io::Result<Vec<i32>> {
        Cgroup::V1.tids(&self.dir)
    }

    /// Removes the pool. The kernel refuses while a thread is in it (EBUSY): the caller first
    /// moves each one back where it was.
    pub fn remove(self) -> io::Result<()> {
        remove_group(&self.dir)
    }
}

/// Moves thread `tid` into the cpuset group `dir` (a pool, or the group it came from).
pub fn attach(dir: &Path, tid: i32) -> io::Result<()> {
    write(&dir.join("tasks"), &tid.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::act::Parked;
    use colosched_core::cpuset::set;
    use std::fs;

    const ROOT: &str = "/sys/fs/cgroup/cpuset";

    fn affinity(tid: i32) -> String {
        let status = fs::read_to_string(format!("/proc/self/task/{tid}/status")).unwrap();
        let line = status.lines().find(|l| l.starts_with("Cpus_allowed_list:"));
        line.unwrap().split_whitespace().nth(1).unwrap().to_string()
    }

    #[test]
    fn group_of_reads_the_cpuset_line_only() {
        let dir = tempfile::tempdir().unwrap();
        let task = dir.path().join("7/task/8");
        fs::create_dir_all(&task).unwrap();
        fs::write(
            task.join("cgroup"),
            "4:memory:/a\n3:cpuset,cpu:/machine/vm1\n0::/\n",
        )
        .unwrap();
        assert_eq!(
            Cgroup::V1.group_of(dir.path(), 7, 8).unwrap(),
            "/machine/vm1"
        );
        fs::write(task.join("cgroup"), "0::/\n").unwrap();
        let err = Cgroup::V1.group_of(dir.path(), 7, 8).unwrap_err();
        assert!(err.to_string().contains("no cpuset line"), "{err}");
    }

    #[test]
    fn a_pool_moves_a_thread_and_the_thread_keeps_its_own_mask_when_back() {
        // Real cgroup v1 cpuset on this machine: a thread pinned to CPU 1 by its own
        // sched_setaffinity goes into a pool of CPU 0, runs on CPU 0 there, and is on CPU 1
        // again once moved back to its group; the pool is then removed. Needs root and 2 CPUs.
        let root = Path::new(ROOT);
        assert!(
            root.join("tasks").exists(),
            "{ROOT} is not a mounted cgroup v1 cpuset hierarchy"
        );
        let parked = Parked::new(Some(1));
        let tid = parked.tid;
        let pid = std::process::id() as i32;
        let home = Cgroup::V1.group_of(Path::new("/proc"), pid, tid).unwrap();
        let name = format!("colosched-test-{pid}-{tid}");
        let pool = CpusetPool::create(root, &name, &set("0")).unwrap();
        assert!(
            CpusetPool::create(root, &name, &set("0")).is_err(),
            "an existing group is not ours"
        );
        pool.attach(tid).unwrap();
        assert_eq!(pool.tids().unwrap(), vec![tid]);
        assert_eq!(affinity(tid), "0");
        attach(&root.join(home.trim_start_matches('/')), tid).unwrap();
        assert_eq!(affinity(tid), "1", "its own mask is back");
        assert_eq!(pool.tids().unwrap(), Vec::<i32>::new());
        pool.remove().unwrap();
        assert!(!root.join(&name).exists());
    }

    #[test]
    fn cpus_the_kernel_refuses_leave_no_group_behind() {
        let root = Path::new(ROOT);
        let name = format!("colosched-test-bad-{}", std::process::id());
        let err = CpusetPool::create(root, &name, &set("0-4095")).unwrap_err();
        assert!(err.to_string().contains("cpuset.cpus"), "{err}");
        assert!(!root.join(&name).exists());
    }
}
