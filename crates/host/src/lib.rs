//! colosched-host: one hypervisor host — physical cores (each with a speed) holding the vCPUs of
//! VMs.
//!
//! - `decide`: the decisions of spec 001 (IA: which class of core a VM's vCPUs share, how much
//!   scaled resource each gets) and spec 002 (Diff-Scheduler: which VMs are network-sensitive,
//!   how big each CPU pool is), as pure functions a simulator and a real agent share.
//! - `sim`: a discrete-event simulator of the host with pluggable vCPU schedulers (`credit`,
//!   `eevdf`) and workload models (`serial`, `parallel` with barriers).
//!
//! - `real`: the real host agent's readers (QEMU discovery, tap and schedstat sensors, QMP),
//!   rooted at paths so tests fake them; `act`: its writers (cpuset pools, a vCPU thread's
//!   EEVDF slice, the state that puts them back).
//! - `agent`: the real host agent (spec 002 and spec 001 on Linux/KVM): its config, its loop
//!   that senses, decides (`decide`) and acts, its metrics; `colosched-agent host` runs it.
//! - `run`: one scenario under a scheduler chosen by name, summarised per VM; bundled presets.
//! - `spec001`: spec 001's experiments on the presets (test sets, fairness, overhead).
//!
//! See docs/host-sim.md for the model and for every choice made where the specs are uncertain.

pub mod act;
pub mod agent;
pub mod decide;
pub mod real;
pub mod run;
pub mod sim;
pub mod spec001;
