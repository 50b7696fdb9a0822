//! What the host agent changed, recorded before each change so that it can be put back: on exit,
//! on SIGTERM, or by `restore` after the agent was killed. For each vCPU thread it touched: its
//! identity (pid, tid, start time: a tid reused by another thread is never "restored") and what
//! it had before (its cpuset group, its slice request); the pool groups the agent created; and,
//! on cgroup v2, each `cgroup.subtree_control` it added `cpuset` to. The fields added for v2 have
//! serde defaults: a state file of an older agent (v1 only) loads as it was written. Saved as JSON to a temporary file, synced, renamed over the state file.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use colosched_sys::Procfs;
use serde::{Deserialize, Serialize};

use super::{cgroup2, slice, Cgroup};

const VERSION: u32 = 1;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostState {
    pub version: u32,
    pub agent_pid: u32,
    /// The hierarchy the groups are in (older state files: v1).
    #[serde(default)]
    pub cgroup: Cgroup,
    /// Its mount point: the v1 cpuset hierarchy's (`/sys/fs/cgroup/cpuset`) or cgroup2's.
    pub cpuset_root: PathBuf,
    /// Pool groups the agent created, to remove.
    pub pools: Vec<PathBuf>,
    /// The threads changed, by tid.
    pub threads: BTreeMap<i32, SavedThread>,
    /// v2: the groups whose `cgroup.subtree_control` the agent added `cpuset` to, in the order
    /// it did (root first); taken out again in the reverse order.
    #[serde(default)]
    pub subtree_control: Vec<PathBuf>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SavedThread {
    pub pid: i32,
    /// Field 22 of its stat file: with the tid, who it is.
    pub starttime: u64,
    /// Its group before the agent moved it (relative to `cpuset_root`).
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
    /// v2: `cgroup.subtree_control`s `cpuset` was taken out of again.
    pub cpuset_disabled: usize,
    pub errors: Vec<String>,
}

impl HostState {
    pub fn new(cgroup: Cgroup, root: &Path) -> HostState {
        HostState {
            version: VERSION,
            agent_pid: std::process::id(),
            cgroup,
            cpuset_root: root.to_path_buf(),
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
        let starttime = Procfs::new(proc).starttime(pid, tid)?;
        let saved = self.threads.entry(tid).or_default();
        if saved.pid != pid || saved.starttime != starttime {
            *saved = SavedThread {
                pid,
                starttime,
                ..SavedThread::default()
            };
        }
        if group && saved.group.is_none() {
            saved.group = Some(self.cgroup.group_of(proc, pid, tid)?);
        }
        if let Some(default_slice_ns) = slice.filter(|_| saved.slice_ns.is_none()) {
            let now = slice::slice_ns(tid)?;
            saved.slice_ns = Some(if now == default_slice_ns { 0 } else { now });
        }
        Ok(())
    }

    /// The directory of a group given relative to the root (`/` is the root).
    pub fn dir_of(&self, group: &str) -> PathBuf {
        self.cpuset_root.join(group.trim_start_matches('/'))
    }

    /// Puts every recorded thread that is still the same thread back in its group and to its
    /// slice, then removes the pools (a thread someone else put in one goes to the pool's
    /// parent first, so the group can go), then takes `cpuset` out of the subtree_controls it
    /// was added to, deepest first (the kernel refuses a parent's while a child has it). Errors
    /// are collected, never fatal.
    pub fn restore(&self, proc: &Path) -> Restored {
        let mut r = Restored::default();
        let procfs = Procfs::new(proc);
        for (&tid, saved) in &self.threads {
            if procfs.starttime(saved.pid, tid).ok() != Some(saved.starttime) {
                r.gone += 1;
                continue;
            }
            let mut ok = true;
            if let Some(group) = &saved.group {
                if let Err(e) = self.cgroup.attach(&self.dir_of(group), tid) {
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
            match remove_pool(self.cgroup, dir) {
                Ok(true) => r.pools_removed += 1,
                Ok(false) => {}
                Err(e) => r.errors.push(e.to_string()),
            }
        }
        for dir in self.subtree_control.iter().rev() {
            // A group removed since (its VM's scope) has nothing to put back.
            if !dir.exists() {
                continue;
            }
            match cgroup2::disable_cpuset(dir) {
                Ok(()) => r.cpuset_disabled += 1,
                Err(e) => r.errors.push(format!("-cpuset: {e}")),
            }
        }
        r
    }
}

/// Removes the pool `dir` if it exists (`Ok(false)`: it did not), a thread someone else put in
/// it moved to its parent first.
pub fn remove_pool(cgroup: Cgroup, dir: &Path) -> io::Result<bool> {
    if !dir.exists() {
        return Ok(false);
    }
    if let (Ok(stray), Some(parent)) = (cgroup.tids(dir), dir.parent()) {
        for tid in stray {
            let _ = cgroup.attach(parent, tid);
        }
    }
    fs::remove_dir(dir).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::act::{cpuset, Parked};
    use colosched_core::cpuset::set;

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

        let mut state = HostState::new(Cgroup::V1, root);
        state.record(proc, pid, tid, true, Some(default)).unwrap();
        let pool =
            cpuset::CpusetPool::create(root, &format!("colosched-test-state-{tid}"), &set("0"))
                .unwrap();
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
        assert_eq!(Cgroup::V1.group_of(proc, pid, tid).unwrap(), "/");
        assert_eq!(slice::slice_ns(tid).unwrap(), default);
        let status = fs::read_to_string(format!("/proc/self/task/{tid}/status")).unwrap();
        assert!(status.contains("Cpus_allowed_list:\t1\n"), "{status}");
        drop(parked);
        // The thread is gone now: a restore finds nothing to do.
        let r = loaded.restore(proc);
        assert_eq!((r.threads, r.gone), (0, 1));
    }

    /// A fake /proc with thread `tid` of `pid` (start time 22).
    fn fake_proc(proc: &Path, pid: i32, tid: i32) {
        let task = proc.join(format!("{pid}/task/{tid}"));
        fs::create_dir_all(&task).unwrap();
        let fields: Vec<String> = (3..=52).map(|i| i.to_string()).collect();
        fs::write(
            task.join("stat"),
            format!("{tid} (CPU 0/KVM) {}\n", fields.join(" ")),
        )
        .unwrap();
    }

    #[test]
    fn a_state_file_of_the_v1_only_agent_loads_as_v1() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        fs::write(
            &path,
            r#"{"version":1,"agent_pid":9,"cpuset_root":"/sys/fs/cgroup/cpuset",
               "pools":["/sys/fs/cgroup/cpuset/colosched-host-nsvm"],
               "threads":{"8":{"pid":7,"starttime":22,"group":"/","slice_ns":0}}}"#,
        )
        .unwrap();
        let s = HostState::load(&path).unwrap();
        assert_eq!(s.cgroup, Cgroup::V1);
        assert!(s.subtree_control.is_empty());
        assert_eq!(s.threads[&8].group.as_deref(), Some("/"));
        // And a v2 state comes back as written.
        let mut v2 = HostState::new(Cgroup::V2, Path::new("/sys/fs/cgroup"));
        v2.subtree_control.push("/sys/fs/cgroup/vms".into());
        v2.save(&path).unwrap();
        assert_eq!(HostState::load(&path).unwrap(), v2);
    }

    #[test]
    fn a_v2_restore_writes_cgroup_threads_and_takes_cpuset_out_where_it_was_added() {
        // A fake cgroup2 tree of plain files: which file gets what. (The order, deepest first,
        // matters to the kernel only, which refuses a parent's -cpuset while a child has it: the
        // NUMA guest test checks that restore then reports no error.) Thread 8 goes back through
        // its group's cgroup.threads; thread 9 is gone; `-cpuset` goes to each recorded
        // subtree_control whose group still exists.
        let dir = tempfile::tempdir().unwrap();
        let (proc, root) = (dir.path().join("proc"), dir.path().join("cg"));
        fake_proc(&proc, 7, 8);
        for d in ["", "vms", "vms/a"] {
            fs::create_dir_all(root.join(d)).unwrap();
            fs::write(root.join(d).join("cgroup.subtree_control"), "+cpuset").unwrap();
        }
        let mut s = HostState::new(Cgroup::V2, &root);
        for (tid, starttime) in [(8, 22), (9, 22)] {
            let saved = SavedThread {
                pid: 7,
                starttime,
                group: Some("/vms/a".into()),
                slice_ns: None,
            };
            s.threads.insert(tid, saved);
        }
        s.pools.push(root.join("vms/a/colosched-host-cpu0")); // removed already: skipped
        s.subtree_control = vec![
            root.clone(),
            root.join("vms"),
            root.join("vms/b"),
            root.join("vms/a"),
        ];
        let r = s.restore(&proc);
        assert_eq!(
            (r.threads, r.gone, r.pools_removed, r.cpuset_disabled),
            (1, 1, 0, 3),
            "{:?}",
            r.errors
        );
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        assert_eq!(
            fs::read_to_string(root.join("vms/a/cgroup.threads")).unwrap(),
            "8"
        );
        for d in ["", "vms", "vms/a"] {
            let sc = fs::read_to_string(root.join(d).join("cgroup.subtree_control")).unwrap();
            assert_eq!(sc, "-cpuset", "{d}");
        }
        assert!(!root.join("vms/b").exists(), "a gone group is not made");
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
