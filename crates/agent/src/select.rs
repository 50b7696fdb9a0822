//! Which tasks are best-effort. BE = the processes of the configured cgroups, or whose comm
//! matches a regex, or listed in pid files; everything else is LC and is never touched. Kernel
//! threads, tasks whose affinity the kernel fixes, and the agent itself are never BE.

use std::collections::{BTreeSet, HashSet};
use std::fs;
use std::path::PathBuf;

use regex_lite::Regex;

use crate::procfs::{Procfs, TaskStat, PF_KTHREAD, PF_NO_SETAFFINITY};

pub struct Selector {
    pub cgroups: Vec<PathBuf>,
    pub comm: Option<Regex>,
    pub pid_files: Vec<PathBuf>,
    /// The thesis's all-OS mode: every user process is movable.
    pub all: bool,
}

/// One BE process as seen in one cycle.
#[derive(Clone, Debug, PartialEq)]
pub struct BeTask {
    pub pid: i32,
    pub comm: String,
    pub ppid: i32,
    pub starttime: u64,
    /// Process CPU (utime + stime over all threads), cumulative ticks.
    pub cpu_ticks: u64,
    pub num_threads: u64,
    pub rss_pages: u64,
    pub faults: u64,
    /// The CPU the main thread last ran on.
    pub processor: usize,
    /// Only these threads are BE (cgroup v1, where one thread of a process can be in a cgroup
    /// without the others); `None`: all of them.
    pub threads: Option<Vec<i32>>,
}

/// What one selection pass found, with the reasons tasks were left alone.
#[derive(Debug, Default)]
pub struct Selection {
    pub tasks: Vec<BeTask>,
    pub kernel_threads: usize,
    /// Selector problems (a cgroup or pid file that cannot be read, a bad line): counted, logged.
    pub errors: Vec<String>,
}

impl Selector {
    /// The pids the selectors name, without reading anything per process: the cheap part of a
    /// cycle. Errors (a cgroup or pid file that cannot be read, a bad line) are returned beside.
    pub fn candidates(&self, procfs: &Procfs) -> (Vec<i32>, Vec<String>) {
        let mut errors = Vec::new();
        let me = std::process::id() as i32;
        let pids = self.named(procfs, &mut errors);
        // Never ourselves, never init.
        let pids = pids.into_iter().filter(|&p| p != me && p != 1).collect();
        (pids, errors)
    }

    fn named(&self, procfs: &Procfs, errors: &mut Vec<String>) -> BTreeSet<i32> {
        let mut pids = BTreeSet::new();
        for cg in &self.cgroups {
            let path = cg.join("cgroup.procs");
            match fs::read_to_string(&path) {
                Ok(text) => pids.extend(text.lines().filter_map(|l| l.trim().parse::<i32>().ok())),
                Err(e) => errors.push(format!("{}: {e}", path.display())),
            }
        }
        for file in &self.pid_files {
            match fs::read_to_string(file) {
                Ok(text) => {
                    for (i, line) in text
                        .lines()
                        .enumerate()
                        .filter(|(_, l)| !l.trim().is_empty())
                    {
                        match line.trim().parse::<i32>() {
                            Ok(pid) if pid > 0 => {
                                pids.insert(pid);
                            }
                            _ => errors.push(format!(
                                "{}:{}: not a pid: {:?}",
                                file.display(),
                                i + 1,
                                line.trim()
                            )),
                        }
                    }
                }
                Err(e) => errors.push(format!("{}: {e}", file.display())),
            }
        }
        if self.comm.is_some() || self.all {
            for pid in procfs.pids() {
                let hit = self.all
                    || procfs
                        .comm(pid)
                        .is_some_and(|c| self.comm.as_ref().is_some_and(|re| re.is_match(&c)));
                if hit {
                    pids.insert(pid);
                }
            }
        }
        pids
    }

    /// The BE processes alive now among `pids`, with their /proc/<pid>/stat read once (gone
    /// ones are skipped).
    pub fn details(&self, procfs: &Procfs, pids: &[i32]) -> Selection {
        let mut buf = String::new();
        Selection::of(
            pids.iter()
                .filter_map(|&pid| Some((pid, procfs.proc_stat(pid, &mut buf)?))),
        )
    }

    /// In cgroup v1 a thread can be in a cgroup without the rest of its process, and
    /// `cgroup.procs` lists the process all the same: when every selector is a cgroup, a
    /// process only partly in the BE cgroups gets `threads` = its threads listed in their
    /// `tasks`. One read of each `tasks` file; a process's threads are listed only when the
    /// counts say some thread is outside.
    pub fn mark_partial(&self, procfs: &Procfs, tasks: &mut [BeTask]) {
        if self.comm.is_some() || !self.pid_files.is_empty() || self.all {
            return;
        }
        let lists: Vec<PathBuf> = (self.cgroups.iter())
            .map(|c| c.join("tasks"))
            .filter(|p| p.exists())
            .collect();
        if lists.is_empty() {
            return;
        }
        let mut in_be = HashSet::new();
        for list in &lists {
            let text = fs::read_to_string(list).unwrap_or_default();
            in_be.extend(text.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
        }
        let threads: u64 = tasks.iter().map(|t| t.num_threads).sum();
        if in_be.len() as u64 == threads {
            return;
        }
        for t in tasks.iter_mut().filter(|t| t.num_threads > 1) {
            let all = procfs.tids(t.pid);
            let be: Vec<i32> = all.iter().copied().filter(|x| in_be.contains(x)).collect();
            if be.len() < all.len() {
                t.threads = Some(be);
            }
        }
    }

    /// `candidates` then `details`.
    pub fn select(&self, procfs: &Procfs) -> Selection {
        let (pids, errors) = self.candidates(procfs);
        Selection {
            errors,
            ..self.details(procfs, &pids)
        }
    }
}

impl Selection {
    /// The BE processes of these (pid, /proc/<pid>/stat) pairs; kernel threads and tasks whose
    /// affinity the kernel fixes are dropped here.
    pub fn of(stats: impl IntoIterator<Item = (i32, TaskStat)>) -> Selection {
        let mut sel = Selection::default();
        for (pid, st) in stats {
            if st.flags & (PF_KTHREAD | PF_NO_SETAFFINITY) != 0 {
                sel.kernel_threads += 1;
                continue;
            }
            sel.tasks.push(BeTask {
                pid,
                comm: st.comm,
                ppid: st.ppid,
                starttime: st.starttime,
                cpu_ticks: st.cpu_ticks,
                num_threads: st.num_threads,
                rss_pages: st.rss_pages,
                faults: st.minflt + st.majflt,
                processor: st.processor,
                threads: None,
            });
        }
        sel
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::path::Path;

    /// A fake /proc entry: `flags` 0x00200000 makes a kernel thread.
    pub(crate) fn fake_proc(root: &Path, pid: i32, comm: &str, flags: u64, cpu: usize, ticks: u64) {
        let mut line = format!("{pid} ({comm}) S 1 {pid} {pid} 0 -1 {flags} 10 0 2 0 {ticks} 0 0 0 20 0 3 0 500 1000 42");
        for _ in 25..=38 {
            line.push_str(" 0");
        }
        line.push_str(&format!(" {cpu} 0 0 0 0 0\n"));
        let d = root.join(format!("{pid}/task/{pid}"));
        fs::create_dir_all(&d).unwrap();
        fs::write(root.join(format!("{pid}/stat")), &line).unwrap();
        fs::write(d.join("stat"), &line).unwrap();
        fs::write(root.join(format!("{pid}/comm")), format!("{comm}\n")).unwrap();
    }

    #[test]
    fn selectors_union_and_exclusions() {
        let dir = tempfile::tempdir().unwrap();
        let proc_root = dir.path().join("proc");
        fake_proc(&proc_root, 10, "stress", 0, 0, 100);
        fake_proc(&proc_root, 11, "memcached", 0, 1, 100);
        fake_proc(&proc_root, 12, "kworker/0:1", PF_KTHREAD, 0, 5);
        fake_proc(
            &proc_root,
            13,
            "ksoftirqd/0",
            PF_KTHREAD | PF_NO_SETAFFINITY,
            0,
            5,
        );
        fake_proc(&proc_root, 14, "batch", 0, 1, 7);
        let cg = dir.path().join("cg");
        fs::create_dir_all(&cg).unwrap();
        fs::write(cg.join("cgroup.procs"), "12\n14\n99\n").unwrap(); // 99 is gone
        let pidfile = dir.path().join("be.pids");
        fs::write(&pidfile, "13\n\nnot-a-pid\n").unwrap();
        let sel = Selector {
            cgroups: vec![cg, dir.path().join("missing")],
            comm: Some(Regex::new("^(stress|kworker)").unwrap()),
            pid_files: vec![pidfile],
            all: false,
        };
        let s = sel.select(&Procfs::new(&proc_root));
        let pids: Vec<i32> = s.tasks.iter().map(|t| t.pid).collect();
        assert_eq!(
            pids,
            vec![10, 14],
            "memcached is LC; kernel threads never BE"
        );
        assert_eq!(s.kernel_threads, 2);
        assert_eq!(s.errors.len(), 2, "{:?}", s.errors);
        assert!(s.errors.iter().any(|e| e.contains("be.pids:3: not a pid")));
        assert_eq!(s.tasks[0].cpu_ticks, 100);
        assert_eq!(s.tasks[1].processor, 1);
    }
}
