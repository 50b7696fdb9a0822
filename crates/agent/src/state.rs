//! The state file: every original affinity and kernel file content the agent changed, written
//! atomically *before* each change, so `restore` can put everything back even after SIGKILL.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::actuator::{get_affinity, set_affinity, ErrorCounts};
use crate::procfs::{Procfs, PF_KTHREAD};
use crate::topology::{format_cpulist, parse_cpulist};

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct SavedTask {
    pub pid: i32,
    /// The start time of the thread's process (state version 1: of the thread itself): a reused
    /// pid is not ours to restore.
    pub starttime: u64,
    /// The original affinity, as a CPU list.
    pub mask: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct State {
    pub version: u32,
    pub agent_pid: u32,
    /// Original affinity of every thread the agent changed, by tid.
    pub tasks: BTreeMap<i32, SavedTask>,
    /// Original content of every file the agent wrote (cpuset.cpus, smp_affinity_list, cpumask).
    pub files: BTreeMap<String, String>,
    /// The masks the agent applied: a task found with one of these that is not in `tasks` was
    /// forked from a moved task (it inherited the mask), and is restored like its ancestor.
    pub applied: BTreeSet<String>,
}

/// What a restore did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Restored {
    pub tasks: usize,
    pub inherited: usize,
    pub gone: usize,
    pub files: usize,
    pub errors: ErrorCounts,
}

impl State {
    pub fn new() -> State {
        State {
            version: 2,
            agent_pid: std::process::id(),
            ..State::default()
        }
    }

    pub fn load(path: &Path) -> Result<State, String> {
        let text = fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        serde_json::from_str(&text)
            .map_err(|e| format!("{}: not an agent state file: {e}", path.display()))
    }

    /// Writes the state to a temporary file, syncs it and renames it over `path`.
    pub fn save(&self, path: &Path) -> Result<(), String> {
        let err = |e: std::io::Error| format!("state file {}: {e}", path.display());
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

    /// The original mask of a thread not seen before: its process's (a new thread inherits the
    /// mask the agent gave its process), else its parent process's (a fork of a moved process),
    /// else its current one.
    pub fn original_for(&self, pid: i32, ppid: i32, current: &[usize]) -> String {
        self.tasks
            .get(&pid)
            .or_else(|| self.tasks.get(&ppid))
            .filter(|_| self.applied.contains(&format_cpulist(current)))
            .map(|t| t.mask.clone())
            .unwrap_or_else(|| format_cpulist(current))
    }

    /// Puts back every file, then every thread's affinity (cpusets first: a task's mask may not
    /// leave its cpuset), then the affinity of tasks that inherited an applied mask.
    pub fn restore(&self, procfs: &Procfs) -> Restored {
        let mut r = Restored::default();
        for (path, content) in self.files.iter().rev() {
            match fs::write(path, content) {
                Ok(()) => r.files += 1,
                Err(e) => r.errors.count(&e, &format!("restore {path}")),
            }
        }
        let mut buf = String::new();
        let mut started: HashMap<i32, Option<u64>> = HashMap::new();
        for (&tid, saved) in &self.tasks {
            let thread = procfs.task_stat(saved.pid, tid, &mut buf);
            let alive = match thread {
                Some(t) if self.version < 2 => t.starttime == saved.starttime,
                Some(_) => {
                    *started
                        .entry(saved.pid)
                        .or_insert_with(|| Some(procfs.proc_stat(saved.pid, &mut buf)?.starttime))
                        == Some(saved.starttime)
                }
                None => false,
            };
            if !alive {
                r.gone += 1;
                continue;
            }
            let mask = parse_cpulist(&saved.mask).unwrap_or_default();
            match set_affinity(tid, &mask) {
                Ok(()) => r.tasks += 1,
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => r.gone += 1,
                Err(e) => r.errors.count(&e, &format!("restore tid {tid}")),
            }
        }
        if self.applied.is_empty() {
            return r;
        }
        // Forks and threads born after the move: find them by the mask they inherited. A fork
        // in flight during one pass (it copied the mask before its parent was restored, and shows
        // in /proc only after the pass listed it) is caught by the next: passes repeat until one
        // finds nothing, at least two and at most five.
        for pass in 0..5 {
            let fixed = self.restore_inherited(procfs, &mut r);
            if fixed == 0 && pass > 0 {
                break;
            }
        }
        r
    }

    /// One pass over /proc for threads carrying an applied mask; returns how many were restored.
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
                if !self.applied.contains(&format_cpulist(&now)) {
                    continue;
                }
                let Some(mask) = self.ancestor_mask(procfs, pid, st.ppid) else {
                    continue;
                };
                match set_affinity(tid, &parse_cpulist(&mask).unwrap_or_default()) {
                    Ok(()) => {
                        r.inherited += 1;
                        fixed += 1;
                    }
                    Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                    Err(e) => r.errors.count(&e, &format!("restore tid {tid}")),
                }
            }
        }
        fixed
    }

    /// The saved mask of the nearest recorded process among `pid` and its ancestors.
    fn ancestor_mask(&self, procfs: &Procfs, pid: i32, ppid: i32) -> Option<String> {
        let mut buf = String::new();
        let (mut pid, mut ppid) = (pid, ppid);
        for _ in 0..32 {
            if let Some(t) = self.tasks.get(&pid).filter(|t| t.pid == pid) {
                return Some(t.mask.clone());
            }
            if ppid <= 1 {
                return None;
            }
            pid = ppid;
            ppid = procfs.proc_stat(pid, &mut buf)?.ppid;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn save_is_atomic_and_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/state.json");
        let mut s = State::new();
        s.tasks.insert(
            7,
            SavedTask {
                pid: 7,
                starttime: 9,
                mask: "0-1".into(),
            },
        );
        s.files
            .insert("/proc/irq/5/smp_affinity_list".into(), "0-3".into());
        s.save(&path).unwrap();
        assert!(!path.with_extension("json.tmp").exists());
        assert_eq!(State::load(&path).unwrap(), s);
        fs::write(&path, "{").unwrap();
        assert!(State::load(&path)
            .unwrap_err()
            .contains("not an agent state file"));
    }

    #[test]
    fn inherited_original_only_for_applied_masks() {
        let mut s = State::new();
        s.tasks.insert(
            10,
            SavedTask {
                pid: 10,
                starttime: 1,
                mask: "0-3".into(),
            },
        );
        s.applied.insert("2-3".into());
        assert_eq!(
            s.original_for(10, 1, &[2, 3]),
            "0-3",
            "new thread of a moved process"
        );
        assert_eq!(
            s.original_for(11, 10, &[2, 3]),
            "0-3",
            "fork of a moved process"
        );
        assert_eq!(
            s.original_for(11, 10, &[0]),
            "0",
            "the child changed its own mask"
        );
        assert_eq!(s.original_for(12, 1, &[2, 3]), "2-3", "unrelated task");
    }
}
