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

use super::{make_group, read, remove_group, set_cpus, write};
use std::io;
use std::path::{Path, PathBuf};

/// One cpuset group the agent made.
#[derive(Debug)]
pub struct CpusetPool {
    pub dir: PathBuf,
}

impl CpusetPool {
    /// Makes `parent/name` with CPUs `cpus` (a kernel CPU list, e.g. `0-1,4`) and the parent's
    /// memory nodes. Fails if the group exists (it is not ours) or the kernel refuses the CPUs;
    /// a group half made is removed again.
    pub fn create(parent: &Path, name: &str, cpus: &str) -> io::Result<CpusetPool> {
        let dir = make_group(parent, name, |dir| {
            let mems = read(&parent.join("cpuset.mems"))?;
            write(&dir.join("cpuset.mems"), mems.trim())?;
            set_cpus(dir, cpus)
        })?;
        Ok(CpusetPool { dir })
    }

    pub fn set_cpus(&self, cpus: &str) -> io::Result<()> {
        set_cpus(&self.dir, cpus)
    }

    /// Moves thread `tid` (of any process) into the pool.
    pub fn attach(&self, tid: i32) -> io::Result<()> {
        attach(&self.dir, tid)
    }

    /// The threads in the pool.
    pub fn tids(&self) -> io::Result<Vec<i32>> {
        let text = read(&self.dir.join("tasks"))?;
        Ok(text.lines().filter_map(|l| l.trim().parse().ok()).collect())
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

/// The cpuset group thread `tid` of `pid` is in, from `<proc>/<pid>/task/<tid>/cgroup` (the v1
/// line naming `cpuset`): a path relative to the hierarchy's root, e.g. `/` or `/machine/vm1`.
pub fn group_of(proc: &Path, pid: i32, tid: i32) -> io::Result<String> {
    let path = proc.join(format!("{pid}/task/{tid}/cgroup"));
    let text = read(&path)?;
    text.lines()
        .find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, controllers, group) = (parts.next()?, parts.next()?, parts.next()?);
            controllers
                .split(',')
                .any(|c| c == "cpuset")
                .then(|| group.to_string())
        })
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "{}: no cpuset line (is cgroup v1 cpuset mounted?)",
                    path.display()
                ),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::act::Parked;
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
        assert_eq!(group_of(dir.path(), 7, 8).unwrap(), "/machine/vm1");
        fs::write(task.join("cgroup"), "0::/\n").unwrap();
        let err = group_of(dir.path(), 7, 8).unwrap_err();
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
        let home = group_of(Path::new("/proc"), pid, tid).unwrap();
        let name = format!("colosched-test-{pid}-{tid}");
        let pool = CpusetPool::create(root, &name, "0").unwrap();
        assert!(
            CpusetPool::create(root, &name, "0").is_err(),
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
        let err = CpusetPool::create(root, &name, "0-4095").unwrap_err();
        assert!(err.to_string().contains("cpuset.cpus"), "{err}");
        assert!(!root.join(&name).exists());
    }
}
