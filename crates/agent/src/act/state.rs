//! The state file: every original affinity and kernel file content the agent changed, written
//! atomically *before* each change, so `restore` can put everything back even after SIGKILL.
//!
//! A thread is known by its tid *and its own start time*: a tid the kernel gave to another
//! thread since is not ours. Restore sets exactly the masks recorded, for threads that are still
//! the ones recorded, plus one kind of thread the agent never saw: one born *after* the agent
//! changed its nearest recorded ancestor (a thread of that process, or a process forked below it)
//! that still carries a mask the agent applied, i.e. one that inherited it. The ancestor's own
//! start time is checked (a pid the kernel gave to someone else is not an ancestor).
//!
//! One agent per state file: `StateLock` (`colosched_sys::lock`) is an flock on
//! `<state file>.lock`, held by `run` for its whole life and taken by `restore`; the kernel drops
//! it when the holder dies (SIGKILL too).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::act::kernel::{set_affinity, ErrorCounts};
use crate::cpuset::CpuSet;
use crate::error::{Error, Result};
use crate::sense::kernel::get_affinity;
use colosched_sys::procfs::{Procfs, PF_KTHREAD};

/// The state file's format: 3 = per-thread start times and the tick each thread was changed.
pub const VERSION: u32 = 3;

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct SavedTask {
    /// The thread's process, and its start time: a thread of the same process is re-pinned
    /// from the record without reading its own start time (one syscall, not a file read).
    pub pid: i32,
    #[serde(default)]
    pub process_start: u64,
    /// The start time of the thread itself, clock ticks after boot (state version 2: of its
    /// process; version 1: of the thread).
    pub starttime: u64,
    /// The original affinity, as a CPU list (offline CPUs included: read from the kernel's
    /// `Cpus_allowed_list`, not from `sched_getaffinity`, which leaves them out).
    pub mask: CpuSet,
    /// When the agent first changed it, clock ticks after boot (what `starttime` counts): a
    /// thread born at or after this tick below it may have inherited the agent's mask.
    #[serde(default)]
    pub changed_at: u64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct State {
    pub version: u32,
    pub agent_pid: u32,
    /// Original affinity of every thread the agent changed, by tid.
    pub tasks: BTreeMap<i32, SavedTask>,
    /// Original content of every file the agent wrote (cpuset.cpus, smp_affinity_list, cpumask).
    pub files: BTreeMap<String, String>,
    /// The masks the agent applied: a thread found with one of these that is not in `tasks`
    /// may have inherited it (see the module's header for when restore believes that).
    pub applied: BTreeSet<CpuSet>,
}

/// What a restore did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Restored {
    pub tasks: usize,
    pub inherited: usize,
    pub gone: usize,
    pub files: usize,
    pub errors: ErrorCounts,
    /// Threads whose original mask holds CPUs that are offline now and that the kernel left
    /// out: restored as far as it allows, and kept here to be restored again once they are back.
    pub pending: State,
}

impl Restored {
    /// One line for the log.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "restored {} thread(s), {} inherited, {} file(s); {} gone; {} error(s)",
            self.tasks,
            self.inherited,
            self.files,
            self.gone,
            self.errors.total()
        );
        if !self.pending.tasks.is_empty() {
            s += &format!(
                "; {} thread(s) want CPUs that are offline: kept in the state file, run \
                 `colosched-agent restore` again once they are online",
                self.pending.tasks.len()
            );
        }
        s
    }

    /// Removes the state file, or, with threads pending, leaves them in it (only them).
    pub fn settle(&self, path: &Path) -> Result<()> {
        if self.pending.tasks.is_empty() {
            remove_state(path)
        } else {
            self.pending.save(path)
        }
    }
}

impl State {
    pub fn new() -> State {
        State {
            version: VERSION,
            agent_pid: std::process::id(),
            ..State::default()
        }
    }

    pub fn load(path: &Path) -> Result<State> {
        let text = fs::read_to_string(path).map_err(|e| Error::state(path, e))?;
        serde_json::from_str(&text)
            .map_err(|e| Error::state(path, format!("not an agent state file: {e}")))
    }

    /// Writes the state to a temporary file, syncs it and renames it over `path`.
    pub fn save(&self, path: &Path) -> Result<()> {
        let err = |e: std::io::Error| Error::state(path, e);
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir).map_err(err)?;
        }
        let tmp = path.with_extension("json.tmp");
        let mut f = fs::File::create(&tmp).map_err(err)?;
        f.write_all(
            serde_json::to_string(self)
                .expect("state serialises")
                .as_bytes(),
        )
        .map_err(err)?;
        f.sync_all().map_err(err)?;
        fs::rename(&tmp, path).map_err(err)
    }

    /// Whether the thread recorded under `tid` is still that thread: same tid, same start time.
    fn alive(&self, procfs: &Procfs, tid: i32, saved: &SavedTask, buf: &mut String) -> bool {
        let own = match procfs.task_stat(saved.pid, tid, buf) {
            Some(t) => t.starttime,
            None => return false,
        };
        if self.version == 2 {
            // Version 2 kept the process's start time.
            return procfs.proc_stat(saved.pid, buf).map(|p| p.starttime) == Some(saved.starttime);
        }
        own == saved.starttime
    }

    /// Drops the threads that are gone (or whose tid is another thread's now). Returns how many.
    pub fn forget_dead(&mut self, procfs: &Procfs) -> usize {
        let mut buf = String::new();
        let before = self.tasks.len();
        let dead: Vec<i32> = (self.tasks.iter())
            .filter(|(&tid, saved)| !self.alive(procfs, tid, saved, &mut buf))
            .map(|(&tid, _)| tid)
            .collect();
        for tid in dead {
            self.tasks.remove(&tid);
        }
        before - self.tasks.len()
    }

    /// The recorded ancestor whose mask a thread not recorded may have inherited: the thread
    /// `tid` of process `pid` (with parent `ppid`), born at `born`. The nearest recorded
    /// process among `pid` and its ancestors counts if it is still the process recorded and the
    /// thread (or the first unrecorded process below it) was born at or after it was changed.
    pub fn inherited_from(
        &self,
        procfs: &Procfs,
        (pid, tid, ppid, born): (i32, i32, i32, u64),
    ) -> Option<&SavedTask> {
        let mut buf = String::new();
        // A new thread of a recorded process.
        if tid != pid {
            if let Some(saved) = self.tasks.get(&pid).filter(|s| s.pid == pid) {
                let same = self.alive(procfs, pid, saved, &mut buf);
                return (same && born >= saved.changed_at).then_some(saved);
            }
        }
        // A process forked below a recorded one: walk up, `born` being the start of the
        // process just below the one looked at.
        let mut born = if tid == pid {
            born
        } else {
            procfs.proc_stat(pid, &mut buf)?.starttime
        };
        let mut up = ppid;
        for _ in 0..32 {
            if up <= 1 {
                return None;
            }
            let st = procfs.proc_stat(up, &mut buf)?;
            if let Some(saved) = self.tasks.get(&up).filter(|s| s.pid == up) {
                let same = self.alive(procfs, up, saved, &mut buf);
                return (same && born >= saved.changed_at).then_some(saved);
            }
            born = st.starttime;
            up = st.ppid;
        }
        None
    }

    /// Puts back every file, then every recorded thread's affinity (cpusets first: a task's
    /// mask may not leave its cpuset), then the affinity of threads that inherited a mask.
    /// `offline`: the CPUs offline now (a kernel may drop them from a mask it is given).
    pub fn restore(&self, procfs: &Procfs, offline: &CpuSet) -> Restored {
        let mut r = Restored {
            pending: State::new(),
            ..Restored::default()
        };
        for (path, content) in self.files.iter().rev() {
            match fs::write(path, content) {
                Ok(()) => r.files += 1,
                Err(e) => r.errors.count(&e, &format!("restore {path}")),
            }
        }
        let mut buf = String::new();
        for (&tid, saved) in &self.tasks {
            if !self.alive(procfs, tid, saved, &mut buf) {
                r.gone += 1;
                continue;
            }
            let mask = &saved.mask;
            match set_affinity(tid, mask) {
                Ok(()) if mask.intersects(offline) => {
                    r.tasks += 1;
                    let got = procfs.allowed(saved.pid, tid).unwrap_or_default();
                    if mask.iter().any(|c| offline.contains(c) && !got.contains(c)) {
                        r.pending.tasks.insert(tid, saved.clone());
                    }
                }
                Ok(()) => r.tasks += 1,
                Err(e) if ErrorCounts::kind(&e) == "esrch" => r.gone += 1,
                Err(e) => r.errors.count(&e, &format!("restore tid {tid}")),
            }
        }
        if self.applied.is_empty() {
            return r;
        }
        // Forks and threads born after the move. A fork in flight during one pass (it copied
        // the mask before its parent was restored, and shows in /proc only after the pass
        // listed it) is caught by the next: passes repeat until one finds nothing, at least two
        // and at most five.
        for pass in 0..5 {
            let fixed = self.restore_inherited(procfs, &mut r);
            if fixed == 0 && pass > 0 {
                break;
            }
        }
        r
    }

    /// One pass over /proc for threads carrying an applied mask that inherited it; returns how
    /// many were restored.
    fn restore_inherited(&self, procfs: &Procfs, r: &mut Restored) -> usize {
        let mut buf = String::new();
        let mut fixed = 0;
        for pid in procfs.pids() {
            let Some(st) = procfs.proc_stat(pid, &mut buf) else {
                continue;
            };
            if st.flags & PF_KTHREAD != 0 {
                continue;
            }
            for tid in procfs
                .tids(pid)
                .into_iter()
                .filter(|t| !self.tasks.contains_key(t))
            {
                let Ok(now) = get_affinity(tid) else { continue };
                if !self.applied.contains(&now) {
                    continue;
                }
                let Some(born) = procfs.task_stat(pid, tid, &mut buf).map(|t| t.starttime) else {
                    continue;
                };
                let Some(from) = self.inherited_from(procfs, (pid, tid, st.ppid, born)) else {
                    continue;
                };
                match set_affinity(tid, &from.mask) {
                    Ok(()) => {
                        r.inherited += 1;
                        fixed += 1;
                    }
                    Err(e) if ErrorCounts::kind(&e) == "esrch" => {}
                    Err(e) => r.errors.count(&e, &format!("restore tid {tid}")),
                }
            }
        }
        fixed
    }
}

pub use colosched_sys::lock::{under_lock, StateLock};

/// Removes the state file (there being none is fine).
pub fn remove_state(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::state(path, e)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake;

    /// A fake /proc/<pid>/task/<tid>/stat (and /proc/<pid>/stat for the main thread) with the
    /// fields these tests read: ppid and start time.
    fn fake(root: &Path, pid: i32, tid: i32, ppid: i32, start: u64) {
        let t = fake::Task {
            pid,
            tid,
            ppid,
            start,
            ..Default::default()
        };
        fake::task(root, t);
    }

    fn saved(pid: i32, starttime: u64, changed_at: u64) -> SavedTask {
        SavedTask {
            pid,
            process_start: 0,
            starttime,
            mask: crate::cpuset::set("0-3"),
            changed_at,
        }
    }

    #[test]
    fn save_is_atomic_and_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/state.json");
        let mut s = State::new();
        s.tasks.insert(7, saved(7, 9, 10));
        s.files
            .insert("/proc/irq/5/smp_affinity_list".into(), "0-3".into());
        s.save(&path).unwrap();
        assert!(!path.with_extension("json.tmp").exists());
        assert_eq!(State::load(&path).unwrap(), s);
        fs::write(&path, "{").unwrap();
        assert!(State::load(&path)
            .unwrap_err()
            .to_string()
            .contains("not an agent state file"));
    }

    #[test]
    fn inherited_only_below_the_recorded_process_and_after_its_change() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let procfs = Procfs::new(root);
        let mut s = State::new();
        // Process 10 (started at tick 100) was changed at tick 200.
        fake(root, 10, 10, 1, 100);
        s.tasks.insert(10, saved(10, 100, 200));
        fake(root, 10, 11, 1, 250); // a thread born after the change
        fake(root, 10, 12, 1, 150); // a thread born before it (it pinned itself, say)
        fake(root, 20, 20, 10, 300); // a fork after the change
        fake(root, 21, 21, 20, 400); // and its fork
        fake(root, 30, 30, 10, 180); // a fork before the change
        fake(root, 31, 31, 30, 400); // its fork: below an unchanged process
        let from = |pid, tid, ppid, born| s.inherited_from(&procfs, (pid, tid, ppid, born));
        assert_eq!(from(10, 11, 1, 250), Some(&s.tasks[&10]));
        assert_eq!(from(10, 12, 1, 150), None, "older than the change");
        assert_eq!(from(20, 20, 10, 300), Some(&s.tasks[&10]));
        assert_eq!(from(21, 21, 20, 400), Some(&s.tasks[&10]));
        assert_eq!(from(30, 30, 10, 180), None);
        assert_eq!(from(31, 31, 30, 400), None);
        // Process 10 dies and its pid goes to another process (start 500), whose child is
        // pinned by its operator to a mask that happens to be one the agent applied.
        fs::remove_dir_all(root.join("10")).unwrap();
        fake(root, 10, 10, 1, 500);
        fake(root, 40, 40, 10, 600);
        assert_eq!(
            from(40, 40, 10, 600),
            None,
            "pid 10 is not the process recorded"
        );
        assert_eq!(from(10, 10, 1, 500), None);
    }

    #[test]
    fn dead_threads_are_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let mut s = State::new();
        fake(root, 10, 10, 1, 100);
        fake(root, 10, 11, 1, 120);
        s.tasks.insert(10, saved(10, 100, 200));
        s.tasks.insert(11, saved(10, 110, 200)); // tid 11 is another thread now
        s.tasks.insert(12, saved(10, 130, 200)); // gone
        s.tasks.insert(13, saved(13, 130, 200)); // gone with its process
        assert_eq!(s.forget_dead(&Procfs::new(root)), 3);
        assert_eq!(s.tasks.keys().copied().collect::<Vec<_>>(), [10]);
    }
}
