//! The host's decisions as pure functions: no clock, no I/O. The simulator calls them, and a
//! real host agent will call them unchanged with what its sensors read.
//!
//! - `ia`: spec 001, vCPU placement and accounting on fast and slow cores;
//! - `diff`: spec 002, NSVM classification from ring samples and CPU-pool sizing;
//! - `rotate`: spec 001 on a Linux host: per-cycle pinning of vCPUs by SR balances;
//! - `aash`: AASH (VEE 2010), which vCPUs hold the fast cores;
//! - `tap`: spec 002's ring samples from a Linux host's tap counters (and virtio ring fill).

pub mod aash;
pub mod diff;
pub mod ia;
pub mod rotate;
pub mod tap;

pub use diff::{
    NsvmClassifier, NsvmThresholds, PoolParams, PoolPlan, RingSample, RingStats, VmKind, VmNeed,
};
pub use ia::{CoreClass, IaParams, Platform, RunQueue, VmShape};
pub use tap::{ring_sample, TapDelta, TapInterval};
