//! The contract between the engine and a vCPU scheduler.
//!
//! The engine owns what the vCPUs do (their work, barriers, spinning); a scheduler owns which
//! vCPU runs on which core and for how long. The engine calls `schedule` for a core whenever that
//! core must decide: its timer fired, its vCPU blocked or finished, or the scheduler asked for it
//! by a *kick* (after a wake-up, to preempt or to let an idle core steal). `schedule` may keep
//! the same vCPU running.

pub mod aash;
pub mod credit;
pub mod diff;
pub mod eevdf;
pub mod ia;
pub mod ia_rotate;

pub use aash::Aash;
pub use credit::{Credit, CreditParams};
pub use diff::{Diff, DiffParams, PoolScheduler};
pub use eevdf::{Eevdf, EevdfParams};
pub use ia::{Ia, IaSchedParams};
pub use ia_rotate::IaRotate;

use super::model::{CoreId, Nanos, VcpuId};
use crate::decide::diff::RingSample;

/// What the host monitor reads of one VM every `SAMPLE_PERIOD` (10 ms, spec 002's T_m).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct VmObservation {
    /// Its rings (all zero for a VM without a network workload).
    pub ring: RingSample,
    /// Its vCPUs that are runnable (running or waiting for a core) at the reading: its CPU
    /// demand.
    pub runnable_vcpus: usize,
}

/// How often the engine hands `VmObservation`s to a scheduler that `observes`.
pub const SAMPLE_PERIOD: Nanos = 10_000_000;

/// Why the vCPU that was on a core is being looked at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// It can keep running (its timer fired, or the core was kicked).
    Runnable,
    /// It blocked (waiting at a barrier); a later `wake` brings it back.
    Blocked,
    /// Its program is over for good.
    Finished,
}

/// What a core runs next, and until when at most (`None`: until something else happens).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dispatch {
    pub vcpu: Option<VcpuId>,
    pub until: Option<Nanos>,
}

impl Dispatch {
    pub const IDLE: Dispatch = Dispatch {
        vcpu: None,
        until: None,
    };
}

pub trait Scheduler {
    fn name(&self) -> &'static str;

    /// At the start of a run: `vcpu` is runnable (no wake-up bonus).
    fn admit(&mut self, now: Nanos, vcpu: VcpuId);

    /// `vcpu` was blocked and is runnable again.
    fn wake(&mut self, now: Nanos, vcpu: VcpuId);

    /// `vcpu` was waiting for a core (runnable, not running) and its program is over for good:
    /// take it off the queues. (A running vCPU's end comes through `schedule` instead.)
    fn retire(&mut self, now: Nanos, vcpu: VcpuId);

    /// Core `core` decides what to run. `prev` is the vCPU that was running on it (if any) and
    /// whether it can go on.
    fn schedule(&mut self, now: Nanos, core: CoreId, prev: Option<(VcpuId, Stop)>) -> Dispatch;

    /// Cores that must call `schedule` now (drained by the engine after every call).
    fn take_kicks(&mut self) -> Vec<CoreId>;

    /// The next time `periodic` must run, if the scheduler has host-wide periodic work.
    fn next_periodic(&self) -> Option<Nanos> {
        None
    }

    /// Host-wide periodic work (Credit's accounting).
    fn periodic(&mut self, _now: Nanos) {}

    /// Whether it wants the monitor's readings (`observe`) every `SAMPLE_PERIOD`.
    fn observes(&self) -> bool {
        false
    }

    /// The monitor's readings of every VM (in VM order).
    fn observe(&mut self, _now: Nanos, _vms: &[VmObservation]) {}
}
