//! The host agent's schedulers, one per file behind one trait: each window, what the VMs showed
//! (`Seen`) in, the groups and seats wanted (`Decision`) out. The loop applies the decision the
//! same way for all of them (`apply::Groups`), so a new scheduler is a file here, a name in
//! `config::Scheduler` and a line in `for_config`. Their decisions are `crate::decide`'s pure
//! functions.
//!
//! - `diff`: spec 002 (`scheduler = "diff"`): the NSVMs' vCPUs in one pool, the others' in a
//!   second, each pool's size from the VMs' loads (`plan_pools`);
//! - `rotate`: spec 001 on Linux (`scheduler = "ia-rotate"`): each vCPU pinned to one CPU, the
//!   fast cores taken in turns by scaled work owed (`decide::rotate`).

pub mod diff;
pub mod rotate;

use colosched_core::cpuset::CpuSet;
use serde_json::Value;

use super::apply::Pool;
use super::config::{HostConfig, Scheduler};
use super::error::Result;
use super::sense::Tracked;
use crate::decide::diff::VmKind;
use crate::real::CpuDelta;

/// What the VMs showed in one window, in the order of the VMs watched.
pub struct Seen<'a> {
    pub vms: &'a [Tracked],
    /// Each VM's vCPU times over the window and its kind (after the hold).
    pub cpu: &'a [(CpuDelta, VmKind)],
}

/// What a scheduler wants the host to be.
pub enum Want {
    /// The host as it was: no groups, every thread back where it was.
    AsItWas,
    /// These groups with their CPU lists; vCPU `i` of VM `n` in `seats[n][i]`.
    Seats {
        groups: Vec<(Pool, CpuSet)>,
        seats: Vec<Vec<Pool>>,
    },
}

/// One window's decision.
pub struct Decision {
    pub want: Want,
    /// The scheduler's fields of the decision log's line (diff: `plan`, `pools`; ia-rotate:
    /// `classes`).
    pub log: Vec<(&'static str, Value)>,
    /// diff: the NSVMs by name and the NSVM pool's CPU count (0: no pools); ia-rotate: none.
    pub built: (Vec<String>, usize),
}

pub trait Strategy {
    /// Decides one window; may add the scheduler's fields to each VM's log row (`rows`).
    fn decide(&mut self, seen: &Seen, rows: &mut [Value]) -> Result<Decision>;

    /// Everything was put back: the next decision starts from the host as it was.
    fn reset(&mut self) {}

    /// Where its core classes came from (ia-rotate), for check-config.
    fn classes_source(&self) -> Option<&str> {
        None
    }
}

/// The scheduler `cfg` names, for the CPUs `cpus`. Errors name the key.
pub fn for_config(cfg: &HostConfig, cpus: &[usize]) -> Result<Box<dyn Strategy>> {
    Ok(match cfg.scheduler {
        Scheduler::Diff => Box::new(diff::Diff::new(cfg, cpus)),
        Scheduler::IaRotate => Box::new(rotate::IaRotate::new(cfg, cpus)?),
    })
}
