//! The simulator's vocabulary: the host, its VMs and their workloads, and what a run reports.
//!
//! Work is measured in nanoseconds of computing on a core of speed 1 (the slowest class): a
//! core of SF 1.8 does 1.8 units of work per nanosecond.

pub use super::time::{ms, Nanos, MS};

pub type CoreId = usize;
/// A vCPU's index in `Topology::vcpus` (VM by VM, in order).
pub type VcpuId = usize;

/// A physical core.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Core {
    /// SF: frequency over the slowest core's (1.0 for the slowest class).
    pub speed: f64,
    /// Reserved for the host (dom0): no vCPU of a guest runs here.
    pub reserved: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Host {
    pub cores: Vec<Core>,
    /// Cache warm-up a fully memory-bound program (memory intensity 1) pays, in work
    /// milliseconds, each time its vCPU starts on a different core than it last ran on.
    pub migration_warmup_ms: f64,
}

impl Host {
    /// `n` cores of speed 1, none reserved, no warm-up cost.
    pub fn symmetric(n: usize) -> Host {
        Host::with_speeds(&vec![1.0; n])
    }

    /// One core per speed, in order, none reserved, no warm-up cost.
    pub fn with_speeds(speeds: &[f64]) -> Host {
        Host {
            cores: (speeds.iter())
                .map(|&speed| Core {
                    speed,
                    reserved: false,
                })
                .collect(),
            migration_warmup_ms: 0.0,
        }
    }
}

/// What the threads of a VM do; one thread per vCPU.
#[derive(Clone, Debug, PartialEq)]
pub enum Workload {
    /// Independent CPU work: each vCPU computes `work_ms` (of speed-1 time). A migration to a
    /// new core costs `mem_intensity × Host::migration_warmup_ms` more work (cold cache).
    Serial { work_ms: f64, mem_intensity: f64 },
    /// One thread per vCPU, `phases` phases of `phase_ms` work each, every phase ended by a
    /// barrier. A thread at the barrier spins (burning its vCPU's time, doing no work) for up
    /// to `spin_us` of running time, then blocks until the last thread arrives.
    Parallel {
        phases: u32,
        phase_ms: f64,
        spin_us: f64,
    },
    /// A flow into the VM through a link and its rings, drained only while a vCPU of the VM
    /// runs, plus optional CPU work on every vCPU (`sim::net`).
    Network(crate::sim::net::Network),
}

impl Workload {
    pub fn kind(&self) -> &'static str {
        match self {
            Workload::Serial { .. } => "serial",
            Workload::Parallel { .. } => "parallel",
            Workload::Network(_) => "network",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Vm {
    pub name: String,
    /// Scheduling weight (Xen's default is 256).
    pub weight: f64,
    pub vcpus: usize,
    pub workload: Workload,
    /// Restart the program when it completes, to keep the load steady (as the paper's runs do).
    /// A serial vCPU restarts on its own; a parallel program restarts as a whole.
    pub repeat: bool,
    /// A per-thread slice request (`sched_setattr`'s `sched_runtime`) for schedulers that use one.
    pub slice_ms: Option<f64>,
    /// Fast-core priority (`aash`): its vCPUs get fast cores before other VMs'.
    pub fast_priority: bool,
    /// Coefficient of variation of its programs' work: each serial program's `work_ms`, each
    /// thread's share of a parallel phase (`phase_ms`) and each network VM's `cpu_work_ms` is
    /// drawn from a lognormal distribution with that mean and this CV (`RunConfig::seed`).
    /// 0 (the default): exactly the configured work.
    pub work_cv: f64,
}

impl Vm {
    pub fn new(name: &str, vcpus: usize, workload: Workload) -> Vm {
        Vm {
            name: name.to_string(),
            weight: 256.0,
            vcpus,
            workload,
            repeat: false,
            slice_ms: None,
            fast_priority: false,
            work_cv: 0.0,
        }
    }
}

/// One vCPU as a scheduler sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct Vcpu {
    pub vm: usize,
    /// Index among its VM's vCPUs.
    pub index: usize,
}

/// What a scheduler is built from: core speeds, the cores guests may use, VMs and vCPUs.
#[derive(Clone, Debug, PartialEq)]
pub struct Topology {
    pub speed: Vec<f64>,
    /// Cores not reserved for dom0, in index order.
    pub usable: Vec<CoreId>,
    pub vms: Vec<Vm>,
    pub vcpus: Vec<Vcpu>,
}

impl Topology {
    pub fn new(host: &Host, vms: &[Vm]) -> Topology {
        let vcpus = vms
            .iter()
            .enumerate()
            .flat_map(|(vm, v)| (0..v.vcpus).map(move |index| Vcpu { vm, index }))
            .collect();
        Topology {
            speed: host.cores.iter().map(|c| c.speed).collect(),
            usable: (0..host.cores.len())
                .filter(|&c| !host.cores[c].reserved)
                .collect(),
            vms: vms.to_vec(),
            vcpus,
        }
    }

    /// The vCPU ids of VM `vm`.
    pub fn vcpus_of(&self, vm: usize) -> Vec<VcpuId> {
        (0..self.vcpus.len())
            .filter(|&v| self.vcpus[v].vm == vm)
            .collect()
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RunConfig {
    /// Stop at this time even if programs are still running.
    pub horizon: Nanos,
    /// Keep every run interval (for tests and timelines; memory grows with the run).
    pub record_intervals: bool,
    /// Seeds the workloads' random draws (`Vm::work_cv`); each vCPU has its own stream, so a
    /// seed gives every scheduler the same sequence of program lengths.
    pub seed: u64,
    /// The network quantum (`sim::net`): packets move once per quantum, so latencies are
    /// multiples of it. `NET_QUANTUM` (1 ms) unless a scenario asks for less; it must divide
    /// the monitor's `SAMPLE_PERIOD` (10 ms).
    pub net_quantum: Nanos,
    /// Admit the vCPUs at time 0 in an order drawn from `seed` instead of by index: which vCPU
    /// a scheduler queues first (and where) is an accident of start-up on a real host.
    pub shuffle_start: bool,
}

/// One completed program: a serial vCPU's work or a parallel VM's last barrier.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Completion {
    pub vm: usize,
    /// The vCPU for a serial program; `None` for a parallel one.
    pub vcpu: Option<VcpuId>,
    pub started: Nanos,
    pub finished: Nanos,
}

/// A vCPU ran on a core from `start` to `end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunInterval {
    pub core: CoreId,
    pub vcpu: VcpuId,
    pub start: Nanos,
    pub end: Nanos,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct VcpuStats {
    /// Time on a core computing.
    pub compute_ns: Nanos,
    /// Time on a core spinning at a barrier.
    pub spin_ns: Nanos,
    /// Work done (speed-1 nanoseconds).
    pub work_done: f64,
    /// Work added by cache warm-ups after migrations.
    pub warmup_work: f64,
    /// Times it started on a different core than it last ran on.
    pub migrations: u32,
    /// Times it stopped running because it blocked.
    pub blocks: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SimResult {
    pub scheduler: &'static str,
    /// When the run stopped: the horizon, or when every program had completed.
    pub end: Nanos,
    pub completions: Vec<Completion>,
    pub vcpus: Vec<VcpuStats>,
    /// Busy time per core (computing or spinning).
    pub core_busy_ns: Vec<Nanos>,
    /// All the work programs were given (including warm-ups) and what was still left at the end.
    pub work_assigned: f64,
    pub work_left: f64,
    pub intervals: Vec<RunInterval>,
    pub events: u64,
    /// Per VM: its flow's totals (`None` for VMs without a network workload).
    pub net: Vec<Option<crate::sim::net::NetStats>>,
}
