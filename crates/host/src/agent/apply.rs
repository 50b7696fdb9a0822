//! What the host agent changes: the cpuset groups a decision wants (spec 002's two pools, or one
//! group per CPU for spec 001's pinning), the vCPU threads moved into them with their EEVDF
//! slices, and everything put back. Each change is recorded in the state file before it is made
//! (`act::state`); only vCPU threads of the VMs watched are touched.
//!
//! The pools are cpuset groups of cgroup v1 (at the hierarchy's root) or of cgroup v2 (a
//! threaded child of each vCPU thread's own cgroup: `act::cgroup2` says why), chosen by
//! `pools.cgroup`; everything here is the same for both, through `act::Cgroup`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use colosched_core::cpuset::CpuSet;

use super::config::HostConfig;
use super::error::{Error, Result};
use super::sense::{narrowed, Tracked};
use crate::act::state::{remove_pool, HostState, Restored};
use crate::act::{cgroup2, set_cpus, slice, Cgroup};

/// The two pools' cpuset groups, made under the v1 cpuset root or, on v2, under each vCPU
/// thread's own cgroup.
pub const NS_POOL: &str = "colosched-host-nsvm";
pub const NN_POOL: &str = "colosched-host-nnvm";
/// ia-rotate's per-CPU groups: `colosched-host-cpu<N>`.
pub const CPU_POOL: &str = "colosched-host-cpu";

/// Errors by kind (gone, attach, slice, narrowed, restore, ...), counted, never fatal.
pub type Counts = BTreeMap<&'static str, u64>;

pub(super) fn count(errors: &mut Counts, kind: &'static str) {
    *errors.entry(kind).or_default() += 1;
}

/// A cpuset group the agent makes: spec 002's two pools, or one CPU (spec 001's pinning).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Pool {
    Ns,
    Nn,
    Cpu(usize),
}

impl Pool {
    fn dir_name(self) -> String {
        match self {
            Pool::Ns => NS_POOL.to_string(),
            Pool::Nn => NN_POOL.to_string(),
            Pool::Cpu(c) => format!("{CPU_POOL}{c}"),
        }
    }
}

/// The groups made and the threads placed in them, with the state that puts them back.
pub struct Groups {
    /// The hierarchy the pools are made in and its root; `None` only in a dry run on a host with
    /// no cpuset controller (nothing is made then).
    pub hierarchy: Option<(Cgroup, PathBuf)>,
    /// What a thread that asked for no slice reads (this thread's request).
    pub default_slice_ns: u64,
    state: HostState,
    /// The groups made, by (parent directory, pool), with their CPU lists. v1: the parent is
    /// always the root; v2: the cgroup of the threads in it.
    made: BTreeMap<(PathBuf, Pool), CpuSet>,
    placed: BTreeMap<i32, Pool>,
}

impl Groups {
    pub fn new(
        hierarchy: Option<(Cgroup, PathBuf)>,
        v1_root: &Path,
        default_slice_ns: u64,
    ) -> Self {
        let (cgroup, root) = hierarchy
            .clone()
            .unwrap_or((Cgroup::V1, v1_root.to_path_buf()));
        Groups {
            hierarchy,
            default_slice_ns,
            state: HostState::new(cgroup, &root),
            made: BTreeMap::new(),
            placed: BTreeMap::new(),
        }
    }

    /// vCPU threads now in a pool.
    pub fn placed(&self) -> usize {
        self.placed.len()
    }

    /// Nothing is made or recorded: the host as it was.
    pub fn untouched(&self) -> bool {
        self.made.is_empty() && self.state.threads.is_empty()
    }

    /// Forgets the threads of VMs that are gone and removes the groups no watched VM's thread
    /// belongs under any more (on v2 a gone VM's cgroup cannot be removed by its manager while
    /// our child is in it).
    pub(super) fn forget(&mut self, gone: &[Tracked], watched: &[Tracked], errors: &mut Counts) {
        for v in gone.iter().flat_map(|t| &t.vm.vcpus) {
            self.placed.remove(&v.tid);
        }
        let Some((cgroup, _)) = self.hierarchy.clone() else {
            return;
        };
        let in_use: BTreeSet<PathBuf> = (watched.iter())
            .flat_map(|t| &t.vm.vcpus)
            .filter_map(|v| self.parent_of(v.tid))
            .collect();
        let unused: Vec<(PathBuf, Pool)> = (self.made.keys())
            .filter(|(parent, _)| !in_use.contains(parent))
            .cloned()
            .collect();
        for (parent, pool) in unused {
            self.made.remove(&(parent.clone(), pool));
            if let Err(e) = remove_pool(cgroup, &parent.join(pool.dir_name())) {
                tracing::warn!("removing a gone VM's group: {e}");
                count(errors, "restore");
            }
        }
    }

    /// The directory thread `tid`'s pools are made in: the root on v1, on v2 the cgroup it was
    /// in when recorded. `None`: not recorded (never moved).
    fn parent_of(&self, tid: i32) -> Option<PathBuf> {
        match self.state.cgroup {
            Cgroup::V1 => Some(self.state.cpuset_root.clone()),
            Cgroup::V2 => {
                let group = self.state.threads.get(&tid)?.group.as_ref()?;
                Some(self.state.dir_of(group))
            }
        }
    }

    /// How the pools are made, for the start line and check-config.
    pub fn text(&self) -> String {
        match &self.hierarchy {
            Some((Cgroup::V1, root)) => {
                format!("cgroup v1: cpuset groups in {}", root.display())
            }
            Some((Cgroup::V2, root)) => format!(
                "cgroup v2: a threaded cpuset group beside each vCPU thread, under its own \
                 cgroup in {}",
                root.display()
            ),
            None => "no cpuset controller found (a dry run: none is needed)".to_string(),
        }
    }

    /// Makes the host match a decision: the groups exist with their CPUs, and the vCPU `i` of
    /// VM `vm` sits in group `want(vm, i)` with that group's slice. Each thread not yet where it
    /// belongs is recorded, with each group and (v2) each `cgroup.subtree_control` about to be
    /// changed, then one save, before anything is changed. With `pools.cpusets = false` only
    /// the slices change. Returns the threads changed.
    pub(super) fn apply(
        &mut self,
        cfg: &HostConfig,
        vms: &[Tracked],
        groups: &[(Pool, CpuSet)],
        want: &dyn Fn(usize, usize) -> Pool,
        errors: &mut Counts,
    ) -> Result<usize> {
        let mut moves = Vec::new();
        for (n, t) in vms.iter().enumerate() {
            for (i, v) in t.vm.vcpus.iter().enumerate() {
                let pool = want(n, i);
                if self.placed.get(&v.tid) != Some(&pool) {
                    moves.push((t.vm.pid, v.tid, pool));
                }
            }
        }
        let cpusets = cfg.cpusets;
        let (ns_ms, nn_ms) = (cfg.nsvm_slice_ms, cfg.nnvm_slice_ms);
        let slice_ms = move |pool| match pool {
            Pool::Ns => ns_ms,
            Pool::Nn => nn_ms,
            Pool::Cpu(_) => 0.0,
        };
        let mut ready = Vec::with_capacity(moves.len());
        for &(pid, tid, pool) in &moves {
            let slice = (slice_ms(pool) > 0.0).then_some(self.default_slice_ns);
            match self.state.record(&cfg.proc_root, pid, tid, cpusets, slice) {
                Ok(()) => ready.push((tid, pool)),
                Err(_) => count(errors, "gone"),
            }
        }
        // The groups wanted: v1 every pool at the root; v2 each pool a thread moves into, under
        // that thread's own cgroup (a pool no thread needs is not made there).
        let cgroup = self.state.cgroup;
        let wanted: BTreeSet<(PathBuf, Pool)> = match (cpusets, cgroup) {
            (false, _) => BTreeSet::new(),
            (true, Cgroup::V1) => groups
                .iter()
                .map(|(p, _)| (self.state.cpuset_root.clone(), *p))
                .collect(),
            (true, Cgroup::V2) => ready
                .iter()
                .filter_map(|&(tid, pool)| Some((self.parent_of(tid)?, pool)))
                .collect(),
        };
        let new: Vec<(PathBuf, Pool)> = (wanted.into_iter())
            .filter(|k| !self.made.contains_key(k))
            .collect();
        let mut enable = Vec::new();
        for (parent, pool) in &new {
            let dir = parent.join(pool.dir_name());
            if !self.state.pools.contains(&dir) {
                self.state.pools.push(dir);
            }
            if cgroup == Cgroup::V2 {
                let group = parent
                    .strip_prefix(&self.state.cpuset_root)
                    .unwrap_or(parent);
                let missing =
                    cgroup2::cpuset_missing(&self.state.cpuset_root, &group.to_string_lossy())
                        .map_err(|e| Error::Runtime(format!("reading subtree_control: {e}")))?;
                for dir in missing {
                    if !enable.contains(&dir) {
                        enable.push(dir);
                    }
                }
            }
        }
        for dir in &enable {
            if !self.state.subtree_control.contains(dir) {
                self.state.subtree_control.push(dir.clone());
            }
        }
        let path = &cfg.state_file;
        self.state.save(path).map_err(|e| Error::state(path, e))?;

        // Root first: a group can enable cpuset for its children only when its parent has.
        for dir in &enable {
            cgroup2::enable_cpuset(dir)
                .map_err(|e| Error::Runtime(format!("enabling cpuset for the pools: {e}")))?;
        }
        let cpus_of = |pool: &Pool| groups.iter().find(|(p, _)| p == pool).map(|(_, c)| c);
        let mut touched = Vec::new();
        for ((parent, pool), now) in &mut self.made {
            match cpus_of(pool) {
                Some(cpus) if cpus != now => {
                    set_cpus(&parent.join(pool.dir_name()), cpus)
                        .map_err(|e| Error::Runtime(format!("group CPUs: {e}")))?;
                    *now = cpus.clone();
                    touched.push(parent.join(pool.dir_name()));
                }
                _ => {}
            }
        }
        for (parent, pool) in new {
            let (name, cpus) = (pool.dir_name(), cpus_of(&pool).cloned().unwrap_or_default());
            cgroup.create(&parent, &name, &cpus).map_err(|e| {
                let hint = if e.kind() == std::io::ErrorKind::AlreadyExists {
                    " (not this agent's: remove it, or run `colosched host restore`)"
                } else {
                    ""
                };
                Error::Runtime(format!("making group {name}: {e}{hint}"))
            })?;
            touched.push(parent.join(&name));
            self.made.insert((parent, pool), cpus);
        }
        if cgroup == Cgroup::V2 {
            // v2 takes CPUs its parent has not without a word, and gives the parent's instead.
            for dir in touched {
                check_effective(&dir, errors);
            }
        }

        let mut changed = 0;
        for (tid, pool) in ready {
            let attached = match self.parent_of(tid) {
                Some(parent) if self.made.contains_key(&(parent.clone(), pool)) => {
                    cgroup.attach(&parent.join(pool.dir_name()), tid)
                }
                _ => Ok(()), // slices alone (pools.cpusets = false)
            };
            if let Err(e) = attached {
                count(
                    errors,
                    if e.raw_os_error() == Some(libc::ESRCH) {
                        "gone"
                    } else {
                        "attach"
                    },
                );
                continue;
            }
            // A thread its group gives no slice gets back the one it had.
            let ns = match slice_ms(pool) {
                ms if ms > 0.0 => Some((ms * 1e6) as u64),
                _ => self.state.threads.get(&tid).and_then(|s| s.slice_ns),
            };
            if let Some(ns) = ns {
                if let Err(e) = slice::set_slice_ns(tid, ns) {
                    count(
                        errors,
                        if e.raw_os_error() == Some(libc::ESRCH) {
                            "gone"
                        } else {
                            "slice"
                        },
                    );
                }
            }
            self.placed.insert(tid, pool);
            changed += 1;
        }
        Ok(changed)
    }

    /// Puts back everything recorded and removes the groups and the state file.
    pub(super) fn release(&mut self, cfg: &HostConfig, errors: &mut Counts) -> Result<Restored> {
        let r = self.state.restore(&cfg.proc_root);
        for e in &r.errors {
            tracing::warn!("restore: {e}");
            count(errors, "restore");
        }
        self.made.clear(); // removed by the restore
        self.placed.clear();
        self.state = HostState::new(self.state.cgroup, &self.state.cpuset_root.clone());
        match std::fs::remove_file(&cfg.state_file) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(Error::state(&cfg.state_file, e))
            }
            _ => Ok(r),
        }
    }
}

/// Warns (and counts `narrowed`) when v2 gave the group `dir` other CPUs than it was given.
pub fn check_effective(dir: &Path, errors: &mut Counts) {
    if let Some((asked, got)) = narrowed(dir) {
        tracing::warn!(
            "{}: CPUs {asked} asked, the kernel gives {got} (those of its parent: the \
             VM's own cgroup does not have them)",
            dir.display()
        );
        count(errors, "narrowed");
    }
}

/// A state file left by an agent that was killed: put back what it changed first.
pub fn take_over_state(cfg: &HostConfig) -> Result<Option<String>> {
    let path = &cfg.state_file;
    if !path.exists() {
        return Ok(None);
    }
    let old = HostState::load(path).map_err(|e| Error::state(path, e))?;
    let r = old.restore(&cfg.proc_root);
    std::fs::remove_file(path).map_err(|e| Error::state(path, e))?;
    Ok(Some(format!(
        "state file of agent {} found: {}",
        old.agent_pid,
        summary(&r)
    )))
}

/// `restore`'s one line.
pub fn summary(r: &Restored) -> String {
    let cpuset = match r.cpuset_disabled {
        0 => String::new(),
        n => format!(", cpuset taken out of {n} cgroup.subtree_control(s)"),
    };
    format!(
        "put back {} thread(s), {} gone, {} pool(s) removed{cpuset}, {} error(s)",
        r.threads,
        r.gone,
        r.pools_removed,
        r.errors.len()
    )
}
