//! What the host agent changed, recorded before each change so that it can be put back: on exit,
//! on SIGTERM, or by `restore` after the agent was killed. For each vCPU thread it touched: its
//! identity (pid, tid, start time: a tid reused by another thread is never "restored") and what
//! it had before (its cpuset group, its slice request); and the pool groups the agent created.
//! Saved as JSON to a temporary file, synced, renamed over the state file.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use colosched_core::proctext::parse_task_stat;
use serde::{Deserialize, Serialize};

use super::{cpuset, slice};

const VERSION: u32 = 1;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostState {
    pub version: u32,
    pub agent_pid: u32,
    /// The cpuset hierarchy's mount point (`/sys/fs/cgroup/cpuset`).
    pub cpuset_root: PathBuf,
    /// Pool groups the agent created, to remove.
    pub pools: Vec<PathBuf>,
    /// The threads changed, by tid.
    pub threads: BTreeMap<i32, SavedThread>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SavedThread {
    pub pid: i32,
    /// Field 22 of its stat file: with the tid, who it is.
    pub starttime: u64,
    /// Its cpuset group before the agent moved it (relative to `cpuset_root`).
    pub group: Option<String>,
    /// Its slice request before the agent changed it, ns; 0 = none (the kernel's default).
    pub slice_ns: Option<u64>,
}

/// What `restore` did.
#[derive(Debug, Default, PartialEq)]
pub struct Restored {
    pub threads: usize,
    /// Recorded threads that are gone (or whose tid another thread has now): nothing to do.
    pub gone: usize,
    pub pools_removed: usize,
    pub errors: Vec<String>,
}

/// Field 22 (start time, clock ticks since boot) of `<proc>/<pid>/task/<tid>/stat`.
pub fn starttime(proc: &Path, pid: i32, tid: i32) -> io::Result<u64> {
    let path = proc.join(format!("{pid}/task/{tid}/stat"));
    let text = fs::read_to_string(&path)?;
    let stat = parse_task_stat(&text).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {e}", path.display()),
        )
    })?;
    Ok(stat.starttime)
}

impl HostState {
    pub fn new(cpuset_root: &Path) -> HostState {
        HostState {
            version: VERSION,
            agent_pid: std::process::id(),
            cpuset_root: cpuset_root.to_path_buf(),
            ..HostState::default()
        }
    }

    pub fn load(path: &Path) -> io::Result<HostState> {
        let text = fs::read_to_string(path)?;
        serde_json::from_str(&text).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: not a host agent state file: {e}", path.display()),
            )
        })
    }

    pub fn save(&self, path: &Path) -> io::Result<()> {
        let tmp = path.with_extension("json.tmp");
        let mut f = fs::File::create(&tmp)?;
        f.write_all(
            serde_json::to_string(self)
                .expect("state serialises")
                .as_bytes(),
        )?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    }

    /// Records what thread `tid` of `pid` has before its first change: its cpuset group (if
    /// `group`) and its slice request (if `slice`; the default counts as none: a request equal
    /// to `default_slice_ns`, what a thread that asked for nothing reads). A thread already
    /// recorded keeps its first record, adding only what was not recorded yet.
    pub fn record(
        &mut self,
        proc: &Path,
        pid: i32,
        tid: i32,
        group: bool,
        slice: Option<u64>,
    ) -> io::Result<()> {
        let starttime = starttime(proc, pid, tid)?;
        let saved = self.threads.entry(tid).or_default();
        if saved.pid != pid || saved.starttime != starttime {
            *saved = SavedThread {
                pid,
                starttime,
                ..SavedThread::default()
            };
        }
        if group && saved.group.is_none() {
            saved.group = Some(cpuset::group_of(proc, pid, tid)?);
        }
        if let Some(default_slice_ns) = slice.filter(|_| saved.slice_ns.is_none()) {
            let now = slice::slice_ns(tid)?;
            saved.slice_ns = Some(if now == default_slice_ns { 0 } else { now });
        }
        Ok(())
    }

    /// Puts every recorded thread that is still the same thread back in its group and to its
    /// slice, then removes the pools (a thread someone else put in one goes to the pool's
    /// parent first, so the group can go). Errors are collected, never fatal.
    pub fn restore(&self, proc: &Path) -> Restored {
        let mut r = Restored::default();
        for (&tid, saved) in &self.threads {
            if starttime(proc, saved.pid, tid).ok() != Some(saved.starttime) {
                r.gone += 1;
                continue;
            }
            let mut ok = true;
            if let Some(group) = &saved.group {
                let dir = self.cpuset_root.join(group.trim_start_matches('/'));
                if let Err(e) = cpuset::attach(&dir, tid) {
                    r.errors.push(format!("thread {tid}: back to {group}: {e}"));
                    ok = false;
                }
            }
            if let Some(ns) = saved.slice_ns {
                if let Err(e) = slice::set_slice_ns(tid, ns) {
                    r.errors
                        .push(format!("thread {tid}: slice back to {ns} ns: {e}"));
                    ok = false;
                }
            }
            r.threads += ok as usize;
        }
        for dir in &self.pools {
            let pool = cpuset::CpusetPool { dir: dir.clone() };
            if !dir.exists() {
                continue;
            }
            if let (Ok(stray), Some(parent)) = (pool.tids(), dir.parent()) {
                for tid in stray {
                    let _ = cpuset::attach(parent, tid);
                }
            }
            match pool.remove() {
                Ok(()) => r.pools_removed += 1,
                Err(e) => r.errors.push(e.to_string()),
            }
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::act::Parked;

    #[test]
    fn starttime_reads_past_a_comm_with_parentheses() {
        let dir = tempfile::tempdir().unwrap();
        let task = dir.path().join("7/task/8");
        fs::create_dir_all(&task).unwrap();
        let fields: Vec<String> = (3..=52).map(|i| i.to_string()).collect();
        fs::write(
            task.join("stat"),
            format!("8 (CPU 0/KVM) x) {}\n", fields.join(" ")),
        )
        .unwrap();
        assert_eq!(starttime(dir.path(), 7, 8).unwrap(), 22);
    }

    #[test]
    fn a_recorded_thread_is_put_back_and_the_pool_removed() {
        // Real cpuset and sched_setattr: record a thread, move it into a pool of CPU 0 with a
        // 0.5 ms slice, save and load the state, restore: its group, CPUs (its own mask, CPU 1)
        // and default slice are back, and the pool is gone. Needs root and 2 CPUs.
        let root = Path::new("/sys/fs/cgroup/cpuset");
        assert!(
            root.join("tasks").exists(),
            "no cgroup v1 cpuset at {}",
            root.display()
        );
        let proc = Path::new("/proc");
        let parked = Parked::new(Some(1));
        let tid = parked.tid;
        let pid = std::process::id() as i32;
        let default = slice::slice_ns(pid).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("host-state.json");

        let mut state = HostState::new(root);
        state.record(proc, pid, tid, true, Some(default)).unwrap();
        let pool =
            cpuset::CpusetPool::create(root, &format!("colosched-test-state-{tid}"), "0").unwrap();
        state.pools.push(pool.dir.clone());
        state.save(&path).unwrap();
        pool.attach(tid).unwrap();
        slice::set_slice_ns(tid, 500_000).unwrap();
        // A second record keeps the first one's originals.
        state.record(proc, pid, tid, true, Some(default)).unwrap();
        assert_eq!(state.threads[&tid].group.as_deref(), Some("/"));
        assert_eq!(state.threads[&tid].slice_ns, Some(0));

        let loaded = HostState::load(&path).unwrap();
        let r = loaded.restore(proc);
        assert_eq!(
            (r.threads, r.gone, r.pools_removed),
            (1, 0, 1),
            "{:?}",
            r.errors
        );
        assert!(!pool.dir.exists());
        assert_eq!(cpuset::group_of(proc, pid, tid).unwrap(), "/");
        assert_eq!(slice::slice_ns(tid).unwrap(), default);
        let status = fs::read_to_string(format!("/proc/self/task/{tid}/status")).unwrap();
        assert!(status.contains("Cpus_allowed_list:\t1\n"), "{status}");
        drop(parked);
        // The thread is gone now: a restore finds nothing to do.
        let r = loaded.restore(proc);
        assert_eq!((r.threads, r.gone), (0, 1));
    }

    #[test]
    fn a_file_that_is_not_a_state_names_itself() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        fs::write(&path, "{\"nope\": 1").unwrap();
        let err = HostState::load(&path).unwrap_err();
        assert!(
            err.to_string()
                .contains("s.json: not a host agent state file"),
            "{err}"
        );
    }
}
