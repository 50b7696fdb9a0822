//! The real host agent's writers: what it changes on a Linux/KVM host, each change put back by
//! the caller from what it read first. What they read back (a group's threads, a thread's
//! group, a start time) is read by `colosched_sys::{Cgroupfs, Procfs}`; CPU lists are
//! `CpuSet`s, written in the kernel's list format.

pub mod cgroup2;
pub mod cpuset;
pub mod slice;
pub mod state;

use std::io;
use std::path::{Path, PathBuf};

use colosched_core::cpuset::CpuSet;
use colosched_core::proctext::{cgroup_v1, cgroup_v2};
use colosched_sys::{Cgroupfs, Procfs};
use serde::{Deserialize, Serialize};

/// Which cgroup hierarchy the pools are made in; what differs between the two is here, the
/// callers (the daemon, `state`) are the same for both.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Cgroup {
    /// cgroup v1 `cpuset`: pools at the hierarchy's root, a thread moved through `tasks`.
    #[default]
    V1,
    /// cgroup2: a threaded pool under each thread's own cgroup (`cgroup2`).
    V2,
}

impl Cgroup {
    pub fn name(self) -> &'static str {
        match self {
            Cgroup::V1 => "v1",
            Cgroup::V2 => "v2",
        }
    }

    /// Makes the pool `parent/name` with CPUs `cpus`; refuses a group that exists.
    pub fn create(self, parent: &Path, name: &str, cpus: &CpuSet) -> io::Result<()> {
        match self {
            Cgroup::V1 => cpuset::CpusetPool::create(parent, name, cpus).map(drop),
            Cgroup::V2 => cgroup2::ThreadedPool::create(parent, name, cpus).map(drop),
        }
    }

    /// Moves thread `tid` into the group `dir`.
    pub fn attach(self, dir: &Path, tid: i32) -> io::Result<()> {
        match self {
            Cgroup::V1 => cpuset::attach(dir, tid),
            Cgroup::V2 => cgroup2::attach(dir, tid),
        }
    }

    /// The file that lists a group's threads: `tasks` (v1), `cgroup.threads` (v2).
    fn threads_file(self) -> &'static str {
        match self {
            Cgroup::V1 => "tasks",
            Cgroup::V2 => "cgroup.threads",
        }
    }

    /// The threads in the group `dir`.
    pub fn tids(self, dir: &Path) -> io::Result<Vec<i32>> {
        Ok(Cgroupfs::new(dir).ids(self.threads_file())?)
    }

    /// The group of thread `tid` of `pid`, relative to the hierarchy's root, from
    /// `<proc>/<pid>/task/<tid>/cgroup`: v1 the line naming `cpuset` (e.g. `/machine/vm1`), v2
    /// the `0::` line (e.g. `/machine.slice/vm1.scope`).
    pub fn group_of(self, proc: &Path, pid: i32, tid: i32) -> io::Result<String> {
        let procfs = Procfs::new(proc);
        let text = procfs.task_cgroup(pid, tid)?;
        let (group, missing) = match self {
            Cgroup::V1 => (
                cgroup_v1(&text, "cpuset"),
                "no cpuset line (is cgroup v1 cpuset mounted?)",
            ),
            Cgroup::V2 => (cgroup_v2(&text), "no 0:: line (is cgroup2 mounted?)"),
        };
        group.map(str::to_string).ok_or_else(|| {
            let path = procfs.task_path(pid, tid, "cgroup");
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("{}: {missing}", path.display()),
            )
        })
    }
}

/// A group's CPUs (`cpuset.cpus`: the same file in v1 and v2).
pub fn set_cpus(dir: &Path, cpus: &CpuSet) -> io::Result<()> {
    write(&dir.join("cpuset.cpus"), &cpus.to_string())
}

/// Errors of the writers name the file.
fn named(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

fn write(path: &Path, text: &str) -> io::Result<()> {
    std::fs::write(path, text).map_err(|e| named(path, e))
}

/// Makes the group `parent/name` and sets it up with `setup`; a group half made is removed
/// again. Fails if the group exists: a pool is only ever a group this agent created.
fn make_group(
    parent: &Path,
    name: &str,
    setup: impl FnOnce(&Path) -> io::Result<()>,
) -> io::Result<PathBuf> {
    let dir = parent.join(name);
    std::fs::create_dir(&dir).map_err(|e| named(&dir, e))?;
    match setup(&dir) {
        Ok(()) => Ok(dir),
        Err(e) => {
            let _ = std::fs::remove_dir(&dir);
            Err(e)
        }
    }
}

/// Removes a group (EBUSY while a thread is in it).
fn remove_group(dir: &Path) -> io::Result<()> {
    std::fs::remove_dir(dir).map_err(|e| named(dir, e))
}

/// A thread of this process for the writers' real tests: it sleeps until dropped.
#[cfg(test)]
pub(crate) struct Parked {
    pub tid: i32,
    done: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

#[cfg(test)]
impl Parked {
    /// Starts it; pinned to `cpu` by its own `sched_setaffinity` when given.
    pub fn new(cpu: Option<usize>) -> Parked {
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let (done, done_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let tid = rustix::thread::gettid();
            if let Some(cpu) = cpu {
                let mut one = rustix::thread::CpuSet::new();
                one.set(cpu);
                rustix::thread::sched_setaffinity(Some(tid), &one).unwrap();
            }
            tid_tx.send(tid.as_raw_nonzero().get()).unwrap();
            let _ = done_rx.recv();
        });
        Parked {
            tid: tid_rx.recv().unwrap(),
            done: Some(done),
            thread: Some(thread),
        }
    }
}

#[cfg(test)]
impl Drop for Parked {
    fn drop(&mut self) {
        self.done.take();
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        // The join returns when the kernel clears the thread's tid, a moment before the thread
        // leaves /proc: wait for that too (at most 5 s), so that a test sees a dropped one gone.
        let task = format!("/proc/self/task/{}", self.tid);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while Path::new(&task).exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}
