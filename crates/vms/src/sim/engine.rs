//! The VM-level simulator's loop: one-second steps; every `window_s` the placement policy looks
//! at the window's measurements (what a real controller would see) and may start migrations.
//!
//! Each step: every VM's stream asks for I/O (`io`), the SSDs, links and the backend are shared
//! (`io::share`), Hadoop tasks and ZooKeeper operations progress, migrations copy memory and
//! cache. A live migration is pre-copy: memory plus the VM's cache slice (the paper moves the
//! cache with the VM) at `bw_cap` of the link, memory dirtied meanwhile sent again, and the last
//! of it sent with the VM paused once it fits in `max_downtime_ms`. While it moves, the VM
//! loses `cpu_overhead` of its speed (dirty-page tracking), the copy takes the link from the
//! VM's backend traffic, and reading and writing the cache slice takes both SSDs' bandwidth.

use serde::{Deserialize, Serialize};

use super::io::{self, Demand, Limit, Stream};
use super::policy::{placement, LastMove, Placement, Queued, VmSeen, Window};
use super::scenario::{
    job_kind, vm_id, HostGroup, Initial, InitialRule, JobKind, Rw, Scenario, Workload,
};
use crate::decide::model::{logical_distance, App, Backend, Cluster, Host, Preference, Vm};
use crate::decide::plan::{best_distance, Move};
use colosched_core::rng::{lognormal, mix, Rng};

pub use super::policy::POLICIES;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunResult {
    pub scenario: String,
    pub policy: String,
    pub seed: u64,
    pub vms: Vec<VmResult>,
    pub jobs: Vec<JobResult>,
    pub apps: Vec<AppResult>,
    pub migrations: Vec<MigrationResult>,
    /// Each host's SSD utilisation, mean over each window.
    pub windows: Vec<WindowResult>,
    /// Each `spread` application's logical distance at each window's end.
    pub spread: Vec<SpreadResult>,
}

/// Per VM, over the measured time (after `measure_from_s`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct VmResult {
    pub vm: String,
    pub app: String,
    pub kind: String,
    pub iops: f64,
    pub mbps: f64,
    pub hit_ratio: f64,
    pub migrations: u32,
    pub host: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct JobResult {
    pub app: String,
    pub job: String,
    pub start_s: f64,
    /// From submission to the last task's end (the set-up overhead included).
    pub time_s: f64,
    /// TestDFSIO's: all MB over the sum of the tasks' times (None for CPU jobs).
    pub throughput_mbps: Option<f64>,
    /// Began after `measure_from_s`.
    pub measured: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AppResult {
    pub app: String,
    pub kind: String,
    pub preference: Preference,
    pub vms: usize,
    /// Logical distance, mean over the measured windows' ends, and at the end.
    pub ld_mean: f64,
    pub ld_final: usize,
    pub ld_best: usize,
    /// ZooKeeper: operations per second of the ensemble, measured time.
    pub ops_s: Option<f64>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MigrationResult {
    pub vm: String,
    pub from: String,
    pub to: String,
    pub start_s: f64,
    pub time_s: f64,
    pub mb: f64,
    pub downtime_ms: f64,
    /// Its share of the slower of the two links.
    pub link_share: f64,
    /// How much slower the moved VM ran while it moved than it would have at the same time
    /// without the migration (1 − rate with ÷ rate without, mean over its seconds).
    pub slowdown: f64,
    /// It takes the VM back where its previous migration took it from, begun within
    /// `STRAIGHT_BACK_S` of that one's end.
    pub straight_back: bool,
}

/// How soon a move that undoes a VM's previous one counts as straight back (s): ten of the
/// paper's windows.
pub const STRAIGHT_BACK_S: f64 = 600.0;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WindowResult {
    pub t_s: u32,
    pub host: String,
    pub utilisation: f64,
    /// VMs on it at the window's end.
    pub vms: usize,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SpreadResult {
    pub t_s: u32,
    pub app: String,
    pub ld: usize,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Task {
    Idle,
    Cpu {
        left_s: f64,
    },
    Io {
        left_mb: f64,
        read: bool,
        random: bool,
    },
}

struct VmState {
    id: String,
    app: usize,
    host: usize,
    task: Task,
    /// `other`'s current rate.
    level: f64,
    /// This task's active seconds (Hadoop).
    task_s: f64,
    /// ZooKeeper: operations per second last step.
    ops: f64,
    migrating: bool,
    migrations: u32,
    // the window's sums of what it asked (I/Os, reads, MB; SSD operations and MB), whatever
    // it got: a controller estimates this from the VM's queue depth and the unloaded latency
    // (Little's law), so a VM on a saturated SSD does not look light
    pub(super) w_ios: f64,
    pub(super) w_reads: f64,
    w_ssd_ops: f64,
    w_ssd_mb: f64,
    pub(super) w_mb: f64,
    w_be_ops: f64,
    w_be_mb: f64,
    w_link_mb: f64,
    // the measured time's sums
    m_ios: f64,
    m_mb: f64,
    m_hits: f64,
    m_ops: f64,
}

enum Phase {
    /// Submitted at `start`; tasks begin at `until`.
    Setup {
        start: f64,
        until: f64,
    },
    Running {
        start: f64,
    },
    Gap {
        until: f64,
    },
}

struct HadoopState {
    app: usize,
    next_job: usize,
    phase: Phase,
    /// The running job's tasks: their summed active seconds, how many ended, the last end.
    task_sum_s: f64,
    done: usize,
    last_end: f64,
}

struct Migration {
    vm: usize,
    from: usize,
    to: usize,
    start: f64,
    left_mb: f64,
    sent_mb: f64,
    rate: f64,
    slow_sum: f64,
    slow_n: f64,
    /// The VM's SSD demand (IOPS, MB/s) when the move was planned.
    planned: (f64, f64),
}

/// One run of `s` under `policy` with `seed`.
pub fn run(s: &Scenario, policy: &str, seed: u64) -> Result<RunResult, String> {
    let mut placement = placement(policy, s)?;
    let mut rng = Rng::new(seed);
    // The demand's own stream: every policy sees the same levels for a seed, whatever it draws.
    let mut levels = Rng::new(mix(seed) ^ u64::MAX);
    let mut sim = Sim::new(s, &mut rng);
    sim.out.policy = policy.to_string();
    sim.out.seed = seed;
    for t in 0..s.duration_s {
        let now = t as f64;
        sim.new_levels(t, &mut levels);
        for hs in sim.hadoop.iter_mut() {
            hadoop_phase(s, hs, &mut sim.vms, now);
        }
        sim.start_next_wave(now);
        sim.step(now, t >= s.measure_from_s);
        sim.progress_migrations(now);
        let end = t + 1;
        if end % s.window_s == 0 {
            sim.window_end(end, placement.as_mut(), &mut rng);
        }
    }
    Ok(sim.results())
}

fn host_id(h: usize) -> String {
    format!("h{h}")
}

/// A run's state between one-second steps.
struct Sim<'a> {
    s: &'a Scenario,
    hosts: Vec<&'a HostGroup>,
    vms: Vec<VmState>,
    hadoop: Vec<HadoopState>,
    /// The planned waves not started yet.
    queue: Vec<Vec<Queued>>,
    moving: Vec<Migration>,
    /// Each VM's last migration.
    last: Vec<Option<LastMove>>,
    /// Each host's SSD utilisation in the last step, and its sum over the window.
    util_prev: Vec<f64>,
    w_util: Vec<f64>,
    /// Each application's logical distance summed over the measured windows' ends, and their
    /// number.
    ld_sum: Vec<f64>,
    ld_n: f64,
    measured_s: f64,
    out: RunResult,
}

impl<'a> Sim<'a> {
    /// The initial placement (`rng` draws the `random` rule's hosts), nothing running yet.
    fn new(s: &'a Scenario, rng: &mut Rng) -> Sim<'a> {
        let hosts = s.host_list();
        let nh = hosts.len();
        let mut vms: Vec<VmState> = Vec::new();
        let mut rr = 0;
        for (a, app) in s.apps.iter().enumerate() {
            for i in 0..app.vms {
                let host = match &app.initial {
                    Initial::Hosts(h) => h[i],
                    Initial::Rule(InitialRule::RoundRobin) => {
                        rr += 1;
                        (rr - 1) % nh
                    }
                    Initial::Rule(InitialRule::Random) => rng.below(nh),
                };
                let level = match app.workload {
                    Workload::Other { iops, .. } => iops,
                    _ => 0.0,
                };
                vms.push(VmState {
                    id: vm_id(&app.id, i),
                    app: a,
                    host,
                    task: Task::Idle,
                    level,
                    task_s: 0.0,
                    ops: 0.0,
                    migrating: false,
                    migrations: 0,
                    w_ios: 0.0,
                    w_reads: 0.0,
                    w_ssd_ops: 0.0,
                    w_ssd_mb: 0.0,
                    w_mb: 0.0,
                    w_be_ops: 0.0,
                    w_be_mb: 0.0,
                    w_link_mb: 0.0,
                    m_ios: 0.0,
                    m_mb: 0.0,
                    m_hits: 0.0,
                    m_ops: 0.0,
                });
            }
        }
        let hadoop: Vec<HadoopState> = (0..s.apps.len())
            .filter(|&a| matches!(s.apps[a].workload, Workload::Hadoop { .. }))
            .map(|app| HadoopState {
                app,
                next_job: 0,
                phase: Phase::Gap { until: 0.0 },
                task_sum_s: 0.0,
                done: 0,
                last_end: 0.0,
            })
            .collect();
        let out = RunResult {
            scenario: s.name.clone(),
            policy: String::new(),
            seed: 0,
            vms: Vec::new(),
            jobs: Vec::new(),
            apps: Vec::new(),
            migrations: Vec::new(),
            windows: Vec::new(),
            spread: Vec::new(),
        };
        Sim {
            s,
            last: vec![None; vms.len()],
            vms,
            hadoop,
            queue: Vec::new(),
            moving: Vec::new(),
            util_prev: vec![0.0; nh],
            w_util: vec![0.0; nh],
            ld_sum: vec![0.0; s.apps.len()],
            ld_n: 0.0,
            measured_s: 0.0,
            out,
            hosts,
        }
    }

    fn link_mb(&self, h: usize) -> f64 {
        self.hosts[h].link_gbit * 1000.0 / 8.0
    }

    /// `other` takes a new level every `change_every_s`.
    fn new_levels(&mut self, t: u32, levels: &mut Rng) {
        let now = t as f64;
        for v in self.vms.iter_mut() {
            if let Workload::Other {
                iops,
                change_every_s,
                change_cv,
                ..
            } = self.s.apps[v.app].workload
            {
                if change_every_s > 0.0 && t > 0 && now % change_every_s == 0.0 {
                    let uniforms = || (levels.next_f64().max(1e-300), levels.next_f64());
                    v.level = iops * lognormal(change_cv, uniforms);
                }
            }
        }
    }

    /// Starts the next wave when the last one is done.
    fn start_next_wave(&mut self, now: f64) {
        if self.moving.is_empty() && !self.queue.is_empty() {
            for (planned, m) in self.queue.remove(0) {
                if self.vms[m.vm].host == m.from {
                    let mig = start_migration(self.s, &self.hosts, &mut self.vms, m, planned, now);
                    self.moving.push(mig);
                }
            }
        }
    }

    /// One second of I/O (with the migrations' costs and, for the slowdown, without), CPU
    /// tasks and ZooKeeper operations, and its sums.
    fn step(&mut self, now: f64, measuring: bool) {
        let Sim {
            s,
            hosts,
            vms,
            hadoop,
            moving,
            out,
            ..
        } = self;
        let s = *s;
        let nh = hosts.len();
        let streams: Vec<Option<Stream>> = vms.iter().map(|v| stream(s, v)).collect();
        let with = step_io(s, hosts, vms, &streams, moving, true);
        let without = if moving.is_empty() {
            None
        } else {
            Some(step_io(s, hosts, vms, &streams, moving, false))
        };

        let mut ssd_ops = vec![0.0; nh];
        let mut ssd_mb = vec![0.0; nh];
        for m in moving.iter() {
            let copy = m.rate * cache_share(s, &vms[m.vm]);
            ssd_mb[m.from] += copy;
            ssd_mb[m.to] += copy;
        }
        for (i, v) in vms.iter_mut().enumerate() {
            let speed = if v.migrating {
                1.0 - s.migration.cpu_overhead
            } else {
                1.0
            };
            let (rate, c) = (with.rate[i], with.cost[i]);
            if let (Some(st), Some(c)) = (streams[i], c) {
                let mb = rate * st.block_kb / 1024.0;
                let asked = with.asked[i];
                v.w_ios += asked;
                v.w_reads += asked * st.read;
                v.w_ssd_ops += asked * c.ssd_ops;
                v.w_ssd_mb += asked * c.ssd_mb;
                v.w_mb += asked * st.block_kb / 1024.0;
                v.w_be_ops += asked * c.be_ops;
                v.w_be_mb += asked * c.be_mb;
                v.w_link_mb += asked * c.link_mb;
                ssd_ops[v.host] += rate * c.ssd_ops;
                ssd_mb[v.host] += rate * c.ssd_mb;
                if measuring {
                    v.m_ios += rate;
                    v.m_mb += mb;
                    v.m_hits += rate * c.hit;
                }
            }
            let mbs = streams[i].map_or(0.0, |st| rate * st.block_kb / 1024.0);
            if let Some(at) = advance_task(v, speed, mbs, now) {
                finish_task(s, hadoop, v, at, &mut out.jobs);
            }
            if let Workload::Zookeeper { .. } = s.apps[v.app].workload {
                if measuring {
                    v.m_ops += v.ops;
                }
            }
            // The moved VM's slowdown: its work with the migration over without it.
            if v.migrating {
                let mig = moving.iter_mut().find(|m| m.vm == i).expect("migrating");
                let ratio = match (&without, streams[i]) {
                    (Some(wo), Some(_)) if wo.rate[i] > 0.0 => rate / wo.rate[i],
                    _ => speed, // CPU work, or nothing to compare: the tracking's cost
                };
                mig.slow_sum += 1.0 - ratio.min(1.0);
                mig.slow_n += 1.0;
            }
        }
        zookeeper_ops(s, hosts, vms, &self.util_prev);
        for h in 0..nh {
            self.util_prev[h] =
                (ssd_ops[h] / hosts[h].ssd_iops).max(ssd_mb[h] / hosts[h].ssd_bw_mbps);
            self.w_util[h] += self.util_prev[h];
        }
        if measuring {
            self.measured_s += 1.0;
        }
    }

    /// The migrations copy for one second; those whose rest fits the downtime end.
    fn progress_migrations(&mut self, now: f64) {
        let s = self.s;
        let mut ended = Vec::new();
        for (k, m) in self.moving.iter_mut().enumerate() {
            let v = &self.vms[m.vm];
            let dirty = s.apps[v.app].dirty_mbps;
            let send = m.rate.min(m.left_mb);
            m.left_mb -= send;
            m.sent_mb += send;
            m.left_mb += dirty.min(s.apps[v.app].mem_mb);
            let elapsed = now + 1.0 - m.start;
            // Stop-and-copy once the rest fits the downtime, or after 10 minutes (QEMU would
            // throttle the VM to converge).
            if m.left_mb <= m.rate * s.migration.max_downtime_ms / 1000.0 || elapsed >= 600.0 {
                ended.push(k);
            }
        }
        for k in ended.into_iter().rev() {
            let m = self.moving.remove(k);
            let downtime_s = m.left_mb / m.rate;
            let end_s = now + 1.0 + downtime_s;
            let straight_back = self.last[m.vm]
                .is_some_and(|(left, ended, _)| left == m.to && m.start - ended < STRAIGHT_BACK_S);
            self.last[m.vm] = Some((m.from, end_s, m.planned));
            let link_share = m.rate / self.link_mb(m.from).min(self.link_mb(m.to));
            let v = &mut self.vms[m.vm];
            v.host = m.to;
            v.migrating = false;
            v.migrations += 1;
            self.out.migrations.push(MigrationResult {
                vm: v.id.clone(),
                from: host_id(m.from),
                to: host_id(m.to),
                start_s: m.start,
                time_s: now + 1.0 - m.start + downtime_s,
                mb: m.sent_mb + m.left_mb,
                downtime_ms: downtime_s * 1000.0,
                link_share,
                slowdown: if m.slow_n > 0.0 {
                    m.slow_sum / m.slow_n
                } else {
                    0.0
                },
                straight_back,
            });
        }
    }

    /// The window's end (`end` s): its measurements, then the policy's decision.
    fn window_end(&mut self, end: u32, placement: &mut dyn Placement, rng: &mut Rng) {
        let s = self.s;
        let w = s.window_s as f64;
        for (h, u) in self.w_util.iter_mut().enumerate() {
            self.out.windows.push(WindowResult {
                t_s: end,
                host: host_id(h),
                utilisation: *u / w,
                vms: self.vms.iter().filter(|v| v.host == h).count(),
            });
            *u = 0.0;
        }
        let cluster = observed(s, &self.hosts, &self.vms, w);
        for (a, app) in s.apps.iter().enumerate() {
            if app.preference() == Preference::Spread {
                self.out.spread.push(SpreadResult {
                    t_s: end,
                    app: app.id.clone(),
                    ld: logical_distance(&cluster, &cluster.placement(), a),
                });
            }
        }
        if end > s.measure_from_s {
            for (a, sum) in self.ld_sum.iter_mut().enumerate() {
                *sum += logical_distance(&cluster, &cluster.placement(), a) as f64;
            }
            self.ld_n += 1.0;
        }
        let seen: Vec<VmSeen> = (self.vms.iter())
            .map(|v| {
                let read = if v.w_ios > 0.0 {
                    v.w_reads / v.w_ios
                } else {
                    0.0
                };
                VmSeen {
                    host: v.host,
                    features: [v.w_ios / w, v.w_mb / w, read],
                    cache_mb: match stream(s, v) {
                        Some(st) if st.random => st.ws_mb,
                        _ => 0.0,
                    },
                }
            })
            .collect();
        let window = Window {
            cluster: &cluster,
            vms: &seen,
            end,
            idle: self.moving.is_empty() && self.queue.is_empty(),
            last: &self.last,
        };
        if let Some(waves) = placement.decide(&window, rng) {
            self.queue = waves;
        }
        for v in self.vms.iter_mut() {
            (v.w_ios, v.w_reads, v.w_ssd_ops, v.w_ssd_mb, v.w_mb) = (0.0, 0.0, 0.0, 0.0, 0.0);
            (v.w_be_ops, v.w_be_mb, v.w_link_mb) = (0.0, 0.0, 0.0);
        }
    }

    /// Per VM and per application, over the measured time.
    fn results(mut self) -> RunResult {
        let s = self.s;
        let measured_s = self.measured_s;
        let final_cluster = observed(s, &self.hosts, &self.vms, 1.0);
        for v in &self.vms {
            self.out.vms.push(VmResult {
                vm: v.id.clone(),
                app: s.apps[v.app].id.clone(),
                kind: kind(&s.apps[v.app].workload).to_string(),
                iops: v.m_ios / measured_s,
                mbps: v.m_mb / measured_s,
                hit_ratio: if v.m_ios > 0.0 {
                    v.m_hits / v.m_ios
                } else {
                    0.0
                },
                migrations: v.migrations,
                host: host_id(v.host),
            });
        }
        for (a, app) in s.apps.iter().enumerate() {
            let members: Vec<&VmState> = self.vms.iter().filter(|v| v.app == a).collect();
            self.out.apps.push(AppResult {
                app: app.id.clone(),
                kind: kind(&app.workload).to_string(),
                preference: app.preference(),
                vms: app.vms,
                ld_mean: if self.ld_n > 0.0 {
                    self.ld_sum[a] / self.ld_n
                } else {
                    f64::NAN
                },
                ld_final: logical_distance(&final_cluster, &final_cluster.placement(), a),
                ld_best: best_distance(app.vms, self.hosts.len()),
                ops_s: matches!(app.workload, Workload::Zookeeper { .. })
                    .then(|| members.iter().map(|v| v.m_ops).sum::<f64>() / measured_s),
            });
        }
        self.out
    }
}

/// A Hadoop task's progress this step at `speed` (CPU) or `mbs` MB this second (I/O): the time
/// it ended at, if it did (fractional ends within the step).
fn advance_task(v: &mut VmState, speed: f64, mbs: f64, now: f64) -> Option<f64> {
    match v.task {
        Task::Cpu { left_s } => {
            let used = left_s.min(speed) / speed;
            v.task_s += used;
            v.task = if left_s <= speed {
                Task::Idle
            } else {
                Task::Cpu {
                    left_s: left_s - speed,
                }
            };
            (v.task == Task::Idle).then_some(now + used)
        }
        Task::Io {
            left_mb,
            read,
            random,
        } => {
            if mbs > 0.0 && left_mb <= mbs {
                let used = left_mb / mbs;
                v.task_s += used;
                v.task = Task::Idle;
                Some(now + used)
            } else {
                v.task_s += 1.0;
                v.task = Task::Io {
                    left_mb: left_mb - mbs,
                    read,
                    random,
                };
                None
            }
        }
        Task::Idle => None,
    }
}

fn kind(w: &Workload) -> &'static str {
    match w {
        Workload::IoBenchmark { .. } => "io_benchmark",
        Workload::Hadoop { .. } => "hadoop",
        Workload::Zookeeper { .. } => "zookeeper",
        Workload::Other { .. } => "other",
    }
}

fn cache_share(s: &Scenario, v: &VmState) -> f64 {
    let a = &s.apps[v.app];
    a.cache_mb / (a.cache_mb + a.mem_mb)
}

/// What a VM's I/O does now, if anything.
fn stream(s: &Scenario, v: &VmState) -> Option<Stream> {
    let a = &s.apps[v.app];
    match &a.workload {
        Workload::IoBenchmark {
            rw,
            block_kb,
            file_mb,
            iodepth,
        } => Some(Stream {
            read: if *rw == Rw::Randread { 1.0 } else { 0.0 },
            random: true,
            block_kb: *block_kb,
            ws_mb: *file_mb,
            demand: Demand::Depth(*iodepth),
        }),
        Workload::Hadoop {
            data_mb,
            iodepth,
            block_kb,
            ..
        } => match v.task {
            Task::Io { read, random, .. } => Some(Stream {
                read: if read { 1.0 } else { 0.0 },
                random,
                block_kb: *block_kb,
                ws_mb: *data_mb,
                demand: Demand::Depth(*iodepth),
            }),
            _ => None,
        },
        // ZooKeeper's log appends are small and group-committed: not the cache's load.
        Workload::Zookeeper { .. } => None,
        Workload::Other {
            read,
            block_kb,
            ws_mb,
            ..
        } => Some(Stream {
            read: *read,
            random: true,
            block_kb: *block_kb,
            ws_mb: *ws_mb,
            demand: Demand::Rate(v.level),
        }),
    }
}

struct StepIo {
    asked: Vec<f64>,
    rate: Vec<f64>,
    cost: Vec<Option<io::Cost>>,
}

/// Every VM's I/O rate this step; `migrations` false leaves their costs out (the slowdown's
/// reference).
fn step_io(
    s: &Scenario,
    hosts: &[&HostGroup],
    vms: &[VmState],
    streams: &[Option<Stream>],
    moving: &[Migration],
    migrations: bool,
) -> StepIo {
    let nh = hosts.len();
    let (mut asked, mut cost) = (vec![0.0; vms.len()], vec![None; vms.len()]);
    for (i, v) in vms.iter().enumerate() {
        if let Some(st) = streams[i] {
            let h = hosts[v.host];
            let c = io::cost(
                &st,
                s.apps[v.app].cache_mb,
                h.ssd_latency_ms,
                s.backend.latency_ms,
                s.backend.write_cost,
            );
            let speed = if migrations && v.migrating {
                1.0 - s.migration.cpu_overhead
            } else {
                1.0
            };
            asked[i] = st.asked(c.latency_ms) * speed;
            cost[i] = Some(c);
        }
    }
    // What the migrations take: link on both ends, SSD bandwidth for the cache slice.
    let (mut link_taken, mut ssd_taken) = (vec![0.0; nh], vec![0.0; nh]);
    if migrations {
        for m in moving {
            let copy = m.rate * cache_share(s, &vms[m.vm]);
            link_taken[m.from] += m.rate;
            link_taken[m.to] += m.rate;
            ssd_taken[m.from] += copy;
            ssd_taken[m.to] += copy;
        }
    }
    let mut limits = Vec::new();
    for (h, g) in hosts.iter().enumerate() {
        let on: Vec<(usize, io::Cost)> = (0..vms.len())
            .filter(|&i| vms[i].host == h)
            .filter_map(|i| cost[i].map(|c| (i, c)))
            .collect();
        let link = g.link_gbit * 1000.0 / 8.0;
        limits.push(Limit {
            capacity: g.ssd_iops,
            use_: on.iter().map(|&(i, c)| (i, c.ssd_ops)).collect(),
        });
        limits.push(Limit {
            capacity: (g.ssd_bw_mbps - ssd_taken[h]).max(0.0),
            use_: on.iter().map(|&(i, c)| (i, c.ssd_mb)).collect(),
        });
        limits.push(Limit {
            capacity: (link - link_taken[h]).max(0.0),
            use_: on.iter().map(|&(i, c)| (i, c.link_mb)).collect(),
        });
    }
    let all: Vec<(usize, io::Cost)> = (0..vms.len())
        .filter_map(|i| cost[i].map(|c| (i, c)))
        .collect();
    limits.push(Limit {
        capacity: s.backend.iops,
        use_: all.iter().map(|&(i, c)| (i, c.be_ops)).collect(),
    });
    limits.push(Limit {
        capacity: s.backend.bw_mbps,
        use_: all.iter().map(|&(i, c)| (i, c.be_mb)).collect(),
    });
    let f = io::share(&asked, &limits);
    StepIo {
        rate: asked.iter().zip(&f).map(|(a, f)| a * f).collect(),
        asked,
        cost,
    }
}

fn start_migration(
    s: &Scenario,
    hosts: &[&HostGroup],
    vms: &mut [VmState],
    m: Move,
    planned: (f64, f64),
    now: f64,
) -> Migration {
    let link = |h: usize| hosts[h].link_gbit * 1000.0 / 8.0;
    let a = &s.apps[vms[m.vm].app];
    vms[m.vm].migrating = true;
    Migration {
        vm: m.vm,
        from: m.from,
        to: m.to,
        start: now,
        left_mb: a.mem_mb + a.cache_mb,
        sent_mb: 0.0,
        rate: s.migration.bw_cap * link(m.from).min(link(m.to)),
        slow_sum: 0.0,
        slow_n: 0.0,
        planned,
    }
}

/// Hadoop's job cycle: set-up, one task per VM, a gap, the next job.
fn hadoop_phase(s: &Scenario, hs: &mut HadoopState, vms: &mut [VmState], now: f64) {
    let Workload::Hadoop {
        jobs,
        data_mb,
        overhead_s,
        pi_map_s,
        ..
    } = &s.apps[hs.app].workload
    else {
        return;
    };
    match hs.phase {
        Phase::Gap { until } if now >= until => {
            hs.phase = Phase::Setup {
                start: now,
                until: now + overhead_s,
            };
        }
        Phase::Setup { start, until } if now >= until => {
            let kind = job_kind(&jobs[hs.next_job % jobs.len()]).expect("checked");
            let members: Vec<usize> = (0..vms.len()).filter(|&i| vms[i].app == hs.app).collect();
            let n = members.len();
            (hs.task_sum_s, hs.done, hs.last_end) = (0.0, 0, now);
            for (k, &i) in members.iter().enumerate() {
                vms[i].task_s = 0.0;
                vms[i].task = match kind {
                    JobKind::Pi(maps) => {
                        // Maps dealt over the VMs in turn.
                        let mine = maps as usize / n + usize::from(k < maps as usize % n);
                        if mine == 0 {
                            hs.done += 1;
                            Task::Idle
                        } else {
                            Task::Cpu {
                                left_s: mine as f64 * pi_map_s,
                            }
                        }
                    }
                    JobKind::Io { read, random } => Task::Io {
                        left_mb: *data_mb,
                        read,
                        random,
                    },
                };
            }
            hs.phase = Phase::Running { start };
        }
        _ => {}
    }
}

/// A Hadoop task ended at `at`: the job ends with its last task.
fn finish_task(
    s: &Scenario,
    hadoop: &mut [HadoopState],
    v: &VmState,
    at: f64,
    jobs_out: &mut Vec<JobResult>,
) {
    let Some(hs) = hadoop.iter_mut().find(|h| h.app == v.app) else {
        return;
    };
    let app = &s.apps[v.app];
    let Workload::Hadoop {
        jobs,
        data_mb,
        gap_s,
        ..
    } = &app.workload
    else {
        return;
    };
    hs.task_sum_s += v.task_s;
    hs.done += 1;
    hs.last_end = hs.last_end.max(at);
    if hs.done < app.vms {
        return;
    }
    let Phase::Running { start } = hs.phase else {
        return;
    };
    let name = &jobs[hs.next_job % jobs.len()];
    let io = matches!(job_kind(name), Some(JobKind::Io { .. }));
    jobs_out.push(JobResult {
        app: app.id.clone(),
        job: name.clone(),
        start_s: start,
        time_s: hs.last_end - start,
        throughput_mbps: io.then(|| data_mb * app.vms as f64 / hs.task_sum_s),
        measured: start >= s.measure_from_s as f64,
    });
    hs.next_job += 1;
    hs.phase = Phase::Gap {
        until: hs.last_end + gap_s,
    };
}

/// ZooKeeper: each server's operations per second this step. A read is served where it
/// arrives; a write goes to the leader (the application's first VM), which waits for a majority's
/// acknowledgements (the slowest round trip it needs) and its log write (the SSD's latency,
/// longer when its SSD is busy).
fn zookeeper_ops(s: &Scenario, hosts: &[&HostGroup], vms: &mut [VmState], util: &[f64]) {
    for (a, app) in s.apps.iter().enumerate() {
        let Workload::Zookeeper {
            outstanding,
            cpu_ms,
            write_share,
        } = app.workload
        else {
            continue;
        };
        let members: Vec<usize> = (0..vms.len()).filter(|&i| vms[i].app == a).collect();
        let leader = vms[members[0]].host;
        let rtt = |h: usize| {
            if h == leader {
                s.network.rtt_local_ms
            } else {
                s.network.rtt_remote_ms
            }
        };
        let mut acks: Vec<f64> = members[1..].iter().map(|&i| rtt(vms[i].host)).collect();
        acks.sort_by(f64::total_cmp);
        let need = members.len() / 2; // followers in a majority, with the leader
        let quorum = if need == 0 { 0.0 } else { acks[need - 1] };
        let ssd = hosts[leader].ssd_latency_ms;
        let log = ssd / (1.0 - util[leader].min(0.9));
        for (k, &i) in members.iter().enumerate() {
            let to_leader = if k == 0 { 0.0 } else { rtt(vms[i].host) };
            let latency = cpu_ms + write_share * (to_leader + quorum + log);
            let speed = if vms[i].migrating {
                1.0 - s.migration.cpu_overhead
            } else {
                1.0
            };
            vms[i].ops = outstanding * 1000.0 / latency * speed;
        }
    }
}

/// The cluster as a controller sees it at a window's end: each VM's SSD load is what it asked
/// of its SSD in the window (operations and MB per second).
fn observed(s: &Scenario, hosts: &[&HostGroup], vms: &[VmState], window_s: f64) -> Cluster {
    Cluster {
        hosts: (hosts.iter().enumerate())
            .map(|(h, g)| Host {
                id: format!("h{h}"),
                ssd_capacity_mb: g.ssd_capacity_mb,
                ssd_iops: g.ssd_iops,
                ssd_bw_mbps: g.ssd_bw_mbps,
                link_gbit: Some(g.link_gbit),
            })
            .collect(),
        vms: (vms.iter())
            .map(|v| Vm {
                id: v.id.clone(),
                host: v.host,
                app: Some(v.app),
                cache_mb: s.apps[v.app].cache_mb,
                mem_mb: s.apps[v.app].mem_mb,
                iops: v.w_ssd_ops / window_s,
                bw_mbps: v.w_ssd_mb / window_s,
                backend_iops: v.w_be_ops / window_s,
                backend_mbps: v.w_be_mb / window_s,
                link_mbps: v.w_link_mb / window_s,
            })
            .collect(),
        apps: (s.apps.iter())
            .map(|a| App {
                id: a.id.clone(),
                preference: a.preference(),
            })
            .collect(),
        backend: Some(Backend {
            iops: s.backend.iops,
            bw_mbps: s.backend.bw_mbps,
        }),
    }
}
