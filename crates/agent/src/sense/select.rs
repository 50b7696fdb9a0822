//! Which tasks are best-effort. BE = the processes of the configured cgroups, or whose comm
//! matches a regex, or listed in pid files, or of the Kubernetes pods of the BE QoS classes;
//! everything else is LC and is never touched. Kernel threads, tasks whose affinity the kernel
//! fixes, and the agent itself are never BE.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs;
use std::path::PathBuf;

use regex_lite::Regex;

use crate::sense::kubernetes::{Kubepods, Qos};
use colosched_sys::cgroupfs::{read_ids, Cgroupfs};
use colosched_sys::procfs::{Procfs, TaskStat};

#[derive(Default)]
pub struct Selector {
    pub cgroups: Vec<PathBuf>,
    pub comm: Option<Regex>,
    pub pid_files: Vec<PathBuf>,
    /// The thesis's all-OS mode: every user process is movable.
    pub all: bool,
    pub kubernetes: Option<Pods>,
    /// The pod and container of each BE pid the last `candidates` found in a pod.
    pub pods: HashMap<i32, PodRef>,
}

/// BE = the pods of these QoS classes (BestEffort, and Burstable if asked).
pub struct Pods {
    pub kubepods: Kubepods,
    pub burstable_be: bool,
}

/// The pod (uid) and container (id; None: the pod's own cgroup) a process is in.
#[derive(Clone, Debug, PartialEq)]
pub struct PodRef {
    pub uid: String,
    pub container: Option<String>,
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

impl Selector {
    /// The pids the selectors name, without reading anything per process: the cheap part of a
    /// cycle. Errors (a cgroup or pid file that cannot be read, a bad line) are returned beside.
    pub fn candidates(&mut self, procfs: &Procfs) -> (Vec<i32>, Vec<String>) {
        let mut errors = Vec::new();
        let me = std::process::id() as i32;
        let mut pids = self.named(procfs, &mut errors);
        self.pods = self.pods(&mut pids, &mut errors);
        // Never ourselves, never init.
        let pids = pids.into_iter().filter(|&p| p != me && p != 1).collect();
        (pids, errors)
    }

    /// The processes of the BE pods, added to `pids`, with their pod and container. A pod
    /// is read fresh every time: one made since the last look is in, one deleted is out.
    fn pods(&self, pids: &mut BTreeSet<i32>, errors: &mut Vec<String>) -> HashMap<i32, PodRef> {
        let mut found = HashMap::new();
        let Some(k) = &self.kubernetes else {
            return found;
        };
        let cgroups = k.kubepods.cgroups().unwrap_or_else(|e| {
            errors.push(e.to_string());
            Vec::new()
        });
        let be = |q| q == Qos::BestEffort || (q == Qos::Burstable && k.burstable_be);
        for cg in cgroups.into_iter().filter(|c| be(c.qos)) {
            // The kubelet removes a pod's cgroups any time: one gone is no error.
            for pid in Cgroupfs::new(&cg.dir)
                .ids("cgroup.procs")
                .unwrap_or_default()
            {
                pids.insert(pid);
                let (uid, container) = (cg.uid.clone(), cg.container.clone());
                found.insert(pid, PodRef { uid, container });
            }
        }
        found
    }

    /// What `check-config` says of the pods: where, the driver, how many of each QoS class.
    pub fn pods_summary(&self) -> Option<String> {
        let k = self.kubernetes.as_ref()?;
        let cgroups = k.kubepods.cgroups().unwrap_or_default();
        let count = |q| {
            let uids: HashSet<&str> = (cgroups.iter())
                .filter(|c| c.qos == q)
                .map(|c| c.uid.as_str())
                .collect();
            uids.len()
        };
        Some(format!(
            "pods from {} ({:?} driver): {} BestEffort, {} Burstable ({}), {} Guaranteed (LC)",
            k.kubepods.dir.display(),
            k.kubepods.driver,
            count(Qos::BestEffort),
            count(Qos::Burstable),
            if k.burstable_be { "BE" } else { "LC" },
            count(Qos::Guaranteed),
        ))
    }

    fn named(&self, procfs: &Procfs, errors: &mut Vec<String>) -> BTreeSet<i32> {
        let mut pids = BTreeSet::new();
        for cg in &self.cgroups {
            match Cgroupfs::new(cg).ids("cgroup.procs") {
                Ok(p) => pids.extend(p),
                Err(e) => errors.push(e.to_string()),
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

    /// /proc/<pid>/stat of each of `pids` alive now, read once (gone ones are skipped).
    pub fn details(&self, procfs: &Procfs, pids: &[i32]) -> Vec<(i32, TaskStat)> {
        let mut buf = String::new();
        pids.iter()
            .filter_map(|&pid| Some((pid, procfs.proc_stat(pid, &mut buf)?)))
            .collect()
    }

    /// In cgroup v1 a thread can be in a cgroup without the rest of its process, and
    /// `cgroup.procs` lists the process all the same: when every selector is a cgroup, a
    /// process only partly in the BE cgroups gets `threads` = its threads listed in their
    /// `tasks`. One read of each `tasks` file; a process's threads are listed only when the
    /// counts say some thread is outside.
    pub fn mark_partial(&self, procfs: &Procfs, tasks: &mut [BeTask]) {
        if self.comm.is_some()
            || !self.pid_files.is_empty()
            || self.all
            || self.kubernetes.is_some()
        {
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
            in_be.extend(read_ids(list).unwrap_or_default());
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
}
