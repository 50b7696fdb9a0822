//! Actuators: the only code that changes the system. Every change is recorded in the state file
//! before it is made. Errors the kernel gives for single tasks or IRQs (ESRCH: the task is gone;
//! EINVAL: the mask is outside its cpuset; EIO/EPERM: an IRQ that cannot move) are counted and
//! logged, never fatal.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::path::PathBuf;

use crate::cpuset::CpuSet;

use crate::act::kernel::{migrate_pages, set_affinity, ErrorCounts};
use crate::act::state::{SavedTask, State};
use crate::decide::os::FileWrite;
use crate::error::Result;
use crate::sense::kernel::{boot_ticks, get_affinity};
use crate::sense::select::BeTask;
use colosched_sys::cgroupfs::read_ids;
use colosched_sys::Procfs;

/// A process to pin, its CPUs, and the threads of it this pass looks at.
type Batch<'a> = (&'a BeTask, &'a CpuSet, Vec<i32>);

/// What `pin` did: threads whose mask was set, and the processes with at least one of them
/// (in a dry run: none set, and every process it was given).
#[derive(Debug, Default)]
pub struct Pinned {
    pub threads: usize,
    pub pids: HashSet<i32>,
}

/// The state is checked for dead threads once it holds this many, and then again at twice
/// what was left.
const FORGET_AT_LEAST: usize = 256;

/// Applies moves and file writes, recording originals first. In dry-run it records nothing and
/// changes nothing.
pub struct Actuator {
    pub procfs: Procfs,
    pub state: State,
    pub state_path: PathBuf,
    pub dry_run: bool,
    pub errors: ErrorCounts,
    /// Some CPU is offline: originals are read from `Cpus_allowed_list` (which keeps offline
    /// CPUs) instead of `sched_getaffinity` (which leaves them out). Set by the daemon.
    pub cpus_offline: bool,
    /// When the state holds this many threads, the dead ones are forgotten.
    forget_at: usize,
    hz: f64,
    /// The threads each process had when it was last pinned, by (pid, start time): pinned again
    /// with as many threads, all still its own, it is not listed again (listing
    /// /proc/<pid>/task of 1,000 processes was a sixth of a move's CPU).
    threads: HashMap<(i32, u64), Vec<i32>>,
}

impl Actuator {
    /// Drops the records of threads that are gone and saves the state if that changed it
    /// (nothing is recorded in a dry run). Returns how many were dropped.
    pub fn forget_dead(&mut self) -> Result<usize> {
        let n = self.state.forget_dead(&self.procfs);
        if n > 0 && !self.dry_run {
            self.state.save(&self.state_path)?;
        }
        Ok(n)
    }

    pub fn new(procfs: Procfs, state_path: PathBuf, dry_run: bool) -> Actuator {
        Actuator {
            procfs,
            state: State::new(),
            state_path,
            dry_run,
            errors: ErrorCounts::default(),
            cpus_offline: false,
            forget_at: FORGET_AT_LEAST,
            hz: crate::sense::kernel::clock_ticks(),
            threads: HashMap::new(),
        }
    }

    /// Pins every BE thread of each task to its CPU list (all its threads, or those `threads`
    /// names). The originals of threads not seen before go to the state file first; if it
    /// cannot be written nothing is changed and the error is returned.
    ///
    /// `thread_lists`: the BE cgroups' thread lists (`tasks`, `cgroup.threads`) when `moves`
    /// holds every process in them; else empty.
    pub fn pin(
        &mut self,
        moves: &[(&BeTask, &CpuSet)],
        thread_lists: &[PathBuf],
    ) -> Result<Pinned> {
        let mut done = Pinned::default();
        if self.dry_run {
            // Nothing is set; every process counts as pinned: a dry run's moves are its plan.
            done.pids = moves.iter().map(|(t, _)| t.pid).collect();
            return Ok(done);
        }
        if moves.is_empty() {
            return Ok(done);
        }
        let changed_at = boot_ticks(self.hz);
        // A thread created while a pass runs, by a thread not yet pinned, inherits the old mask:
        // later passes look for threads no earlier pass saw, until one finds none (at most 3).
        let mut seen = HashSet::new();
        let mut batch: Vec<Batch> = moves
            .iter()
            .map(|&(t, cpus)| {
                let tids = match self.threads.get(&(t.pid, t.starttime)) {
                    _ if t.threads.is_some() => t.threads.clone().unwrap_or_default(),
                    _ if t.num_threads == 1 => vec![t.pid],
                    Some(k)
                        if k.len() as u64 == t.num_threads
                            && self.procfs.still_threads(t.pid, k) =>
                    {
                        k.clone()
                    }
                    _ => self.procfs.tids(t.pid),
                };
                (t, cpus, tids)
            })
            .collect();
        for pass in 0..3 {
            let set = self.pin_pass(&batch, &mut seen, changed_at, &mut done.pids)?;
            // The first pass had every thread; later ones only those born meanwhile.
            for (t, _, tids) in &batch {
                let known = self.threads.entry((t.pid, t.starttime)).or_default();
                if pass == 0 {
                    known.clear();
                }
                known.extend(tids);
            }
            done.threads += set;
            if set == 0 {
                break;
            }
            batch = self.born_since(moves, &seen, thread_lists);
        }
        Ok(done)
    }

    /// Drops the kept thread lists of processes `alive` says are gone.
    pub fn forget_threads(&mut self, alive: impl Fn(&(i32, u64)) -> bool) {
        self.threads.retain(|k, _| alive(k));
    }

    /// Threads of the moved processes that no pass has seen: from the cgroups' thread lists
    /// (one read each) if given, else by listing every moved process's threads again.
    fn born_since<'a>(
        &self,
        moves: &[(&'a BeTask, &'a CpuSet)],
        seen: &HashSet<i32>,
        thread_lists: &[PathBuf],
    ) -> Vec<Batch<'a>> {
        if thread_lists.is_empty() {
            // Processes only partly BE (`threads`) have no other threads to follow.
            return moves
                .iter()
                .filter(|(t, _)| t.threads.is_none())
                .map(|&(t, cpus)| {
                    let tids = self.procfs.tids(t.pid);
                    (
                        t,
                        cpus,
                        tids.into_iter().filter(|x| !seen.contains(x)).collect(),
                    )
                })
                .collect();
        }
        let by_pid: HashMap<i32, (&BeTask, &CpuSet)> =
            moves.iter().map(|&(t, cpus)| (t.pid, (t, cpus))).collect();
        let mut born: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
        for list in thread_lists {
            let tids = read_ids(list).unwrap_or_default();
            for tid in tids.into_iter().filter(|t| !seen.contains(t)) {
                // A process that joined the cgroup after the selectors were read is not moving.
                if let Some(pid) = self.procfs.tgid(tid).filter(|p| by_pid.contains_key(p)) {
                    born.entry(pid).or_default().push(tid);
                }
            }
        }
        born.into_iter()
            .map(|(pid, tids)| (by_pid[&pid].0, by_pid[&pid].1, tids))
            .collect()
    }

    /// One pass. A thread whose original is already recorded is set without reading its mask
    /// first (one syscall, not two). A thread already on its CPUs is left alone (not recorded).
    /// A thread recorded in this pass whose mask the kernel refuses to change loses its record
    /// again: nothing of it was changed, and its mask may change by other hands before the
    /// agent's next try (restore would put back a stale one).
    fn pin_pass(
        &mut self,
        batch: &[Batch],
        seen: &mut HashSet<i32>,
        changed_at: u64,
        pids: &mut HashSet<i32>,
    ) -> Result<usize> {
        let mut plan = Vec::new();
        let mut recorded = false;
        let mut buf = String::new();
        for (task, cpus, tids) in batch {
            for &tid in tids {
                if !seen.insert(tid) {
                    continue;
                }
                // Known: recorded for this process (pid and start time); the thread's own start
                // time was read when it was recorded, and restore checks it.
                let known = self
                    .state
                    .tasks
                    .get(&tid)
                    .is_some_and(|s| (s.pid, s.process_start) == (task.pid, task.starttime));
                if !known {
                    let Ok(now) = get_affinity(tid) else { continue }; // gone
                    if now == **cpus {
                        continue;
                    }
                    let born = if tid == task.pid {
                        Some(task.starttime)
                    } else {
                        let stat = self.procfs.task_stat(task.pid, tid, &mut buf);
                        stat.map(|t| t.starttime)
                    };
                    let Some(born) = born else { continue }; // gone
                    let inherited = if self.state.applied.contains(&now) {
                        let me = (task.pid, tid, task.ppid, born);
                        self.state.inherited_from(&self.procfs, me)
                    } else {
                        None
                    };
                    let mask = match inherited {
                        Some(from) => from.mask.clone(),
                        None if self.cpus_offline => self
                            .procfs
                            .allowed(task.pid, tid)
                            .unwrap_or_else(|| now.clone()),
                        None => now.clone(),
                    };
                    let saved = SavedTask {
                        pid: task.pid,
                        process_start: task.starttime,
                        starttime: born,
                        mask,
                        changed_at,
                    };
                    self.state.tasks.insert(tid, saved);
                    recorded = true;
                }
                plan.push((tid, task.pid, cpus, !known));
            }
            if !self.state.applied.contains(*cpus) {
                recorded |= self.state.applied.insert((*cpus).clone());
            }
        }
        if plan.is_empty() {
            return Ok(0);
        }
        if recorded {
            if self.state.tasks.len() >= self.forget_at {
                self.state.forget_dead(&self.procfs);
                self.forget_at = (2 * self.state.tasks.len()).max(FORGET_AT_LEAST);
            }
            self.state.save(&self.state_path)?;
        }
        let (mut set, mut unrecorded) = (0, false);
        for (tid, pid, cpus, new) in plan {
            match set_affinity(tid, cpus) {
                Ok(()) => {
                    set += 1;
                    pids.insert(pid);
                }
                Err(e) => {
                    self.errors
                        .count(&e, &format!("sched_setaffinity tid {tid}"));
                    if new {
                        self.state.tasks.remove(&tid);
                        unrecorded = true;
                    }
                }
            }
        }
        if unrecorded {
            self.state.save(&self.state_path)?;
        }
        Ok(set)
    }

    /// Writes kernel files, saving each one's original content first. Returns how many took.
    pub fn write_files(&mut self, writes: &[FileWrite]) -> Result<usize> {
        if self.dry_run || writes.is_empty() {
            return Ok(0);
        }
        for w in writes {
            let key = w.path.display().to_string();
            if let std::collections::btree_map::Entry::Vacant(slot) = self.state.files.entry(key) {
                match fs::read_to_string(&w.path) {
                    Ok(orig) => {
                        slot.insert(orig.trim_end().to_string());
                    }
                    Err(e) => self.errors.count(&e, &format!("read {}", w.path.display())),
                }
            }
        }
        self.state.save(&self.state_path)?;
        let mut ok = 0;
        for w in writes
            .iter()
            .filter(|w| self.state.files.contains_key(&w.path.display().to_string()))
        {
            match fs::write(&w.path, &w.content) {
                Ok(()) => ok += 1,
                Err(e) => self
                    .errors
                    .count(&e, &format!("write {}", w.path.display())),
            }
        }
        Ok(ok)
    }

    /// Moves a task's memory to its new node (NUMA topologies only).
    pub fn migrate_memory(&mut self, pid: i32, from: &CpuSet, to: &CpuSet) {
        if self.dry_run {
            return;
        }
        if let Err(e) = migrate_pages(pid, from, to) {
            self.errors.count(&e, &format!("migrate_pages pid {pid}"));
        }
    }

    /// Restores everything recorded and removes the state file (keeping what must wait for
    /// offline CPUs, see `Restored::settle`).
    pub fn restore_all(&mut self, offline: &CpuSet) -> Result<crate::act::state::Restored> {
        let r = self.state.restore(&self.procfs, offline);
        r.settle(&self.state_path)?;
        self.state = State::new();
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpuset::set;

    #[test]
    fn migrate_pages_runs_for_real() {
        // One NUMA node here: moving our pages from node 0 to node 0 is a real call that succeeds.
        assert_eq!(
            migrate_pages(std::process::id() as i32, &set("0"), &set("0")).unwrap(),
            0
        );
        assert_eq!(
            ErrorCounts::kind(&migrate_pages(i32::MAX, &set("0"), &set("0")).unwrap_err()),
            "esrch"
        );
    }

    #[test]
    fn a_thread_whose_move_is_refused_is_not_recorded() {
        // A thread of our own, pinned as a BE process's only BE thread: first to a CPU that does
        // not exist (EINVAL), then to one that does.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        let procfs = Procfs::new(std::path::Path::new("/proc"));
        let pid = std::process::id() as i32;
        let starttime = procfs.proc_stat(pid, &mut String::new()).unwrap().starttime;
        std::thread::spawn(move || {
            let tid = rustix::thread::gettid().as_raw_pid();
            let all = get_affinity(tid).unwrap();
            let task = BeTask {
                pid,
                comm: "test".into(),
                ppid: 1,
                starttime,
                cpu_ticks: 0,
                num_threads: 2,
                rss_pages: 0,
                faults: 0,
                processor: 0,
                threads: Some(vec![tid]),
            };
            let mut a = Actuator::new(procfs, path.clone(), false);
            let (nowhere, one) = (set("4000"), all.first().into_iter().collect::<CpuSet>());
            let p = a.pin(&[(&task, &nowhere)], &[]).unwrap();
            assert!(p.pids.is_empty() && p.threads == 0);
            assert_eq!(a.errors.by_kind.get("einval"), Some(&1));
            assert!(
                a.state.tasks.is_empty(),
                "nothing changed, nothing recorded"
            );
            assert!(
                State::load(&path).unwrap().tasks.is_empty(),
                "nor in the file"
            );
            let p = a.pin(&[(&task, &one)], &[]).unwrap();
            assert_eq!((p.pids.len(), p.threads), (1, 1));
            assert_eq!(State::load(&path).unwrap().tasks[&tid].mask, all);
            assert_eq!(a.restore_all(&CpuSet::default()).unwrap().tasks, 1);
            assert_eq!(get_affinity(tid).unwrap(), all);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn own_affinity_round_trips_for_real() {
        // A thread of our own, so the test process's other threads keep their masks.
        std::thread::spawn(|| {
            let tid = rustix::thread::gettid().as_raw_pid();
            let all = get_affinity(tid).unwrap();
            let one: CpuSet = all.first().into_iter().collect();
            set_affinity(tid, &one).unwrap();
            assert_eq!(get_affinity(tid).unwrap(), one);
            set_affinity(tid, &all).unwrap();
            let e = set_affinity(tid, &set("4000")).unwrap_err();
            assert_eq!(ErrorCounts::kind(&e), "einval");
            assert_eq!(
                ErrorCounts::kind(&set_affinity(i32::MAX, &all).unwrap_err()),
                "esrch"
            );
        })
        .join()
        .unwrap();
    }
}
