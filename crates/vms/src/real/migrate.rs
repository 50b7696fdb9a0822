//! The live-migration executor (spec 003): carries out a plan's moves with QEMU live migration
//! over QMP. It decides nothing — the plan comes from `decide` (`colosched plan vms --json`);
//! it checks the plan against a config and the running VMs, then runs the moves.
//!
//! Here both "hypervisors" are this machine: the destination QEMU is started locally with the
//! source's command line, rewritten by [`argv::destination`] (what it rewrites and what it
//! refuses is listed there). A config whose VMs are libvirt domains is carried out by libvirt's
//! own live migration instead, between the hosts' libvirts (`libvirt`, below).
//!
//! One migration, in order:
//! 1. the source's pid from its QMP socket (SO_PEERCRED), its argv from `/proc/PID/cmdline`,
//!    its working directory and binary from `/proc/PID/{cwd,exe}`;
//! 2. the destination started detached (`setsid`, stdio to `<run_dir>/<vm>.<host>.log`) with
//!    `-incoming defer`, then `migrate-incoming tcp:ADDRESS:PORT` on the first port from the
//!    host's `port_base` that QEMU can listen on;
//! 3. on the source: `migrate-set-parameters {max-bandwidth: bw_cap × link}`, `migrate`, and
//!    `query-migrate` every 100 ms until `completed`, `failed`, or the timeout;
//! 4. the destination's `query-status` must become `running`; then the source gets `quit`.
//!
//! On a failure, a timeout or SIGINT/SIGTERM/SIGHUP: `migrate_cancel` on the source, the
//! destination killed and reaped and its socket, pidfile, log and other files removed, the
//! source's max-bandwidth put back (and `cont` if it was left paused): the source runs on as
//! before. The plan stops there; the moves after it are reported as not started.
//!
//! A SIGKILLed executor cleans up nothing: its destination QEMU runs on. So before it starts, a
//! run looks for each move's `<vm>.<host>.pid`/`.qmp` in run_dir ([`leftover`] decides): stale
//! files are removed, our QEMU that never received the VM (`inmigrate`) is killed, and one that
//! may hold it refuses the plan, naming it.
//!
//! Waves run in order and the migrations within a wave one after another (spec 003 §2.4 step 6:
//! "run one migration at a time"); run at once they would share the link and each would get
//! less than its cap. No migration capability is set: the executor polls `query-migrate`
//! rather than waiting for events.

mod argv;
mod config;
mod libvirt;

use std::io::IsTerminal;
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use colosched_qemu::{Monitor, Qmp, QmpError};
use colosched_sys::config::ConfigError;
use colosched_sys::signals::Signals;
use colosched_sys::Procfs;
use serde::Serialize;
use serde_json::{json, Value};

pub use argv::{destination, Destination};
pub use config::{
    check_plan, parse_config, parse_plan, plan_transient, Bad, Config, Host, Move, Vm,
};

const QMP_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a destination QEMU may take to open its QMP socket.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the end of a migration (the destination running, the source gone, a cancel) may take.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(100);
/// Ports tried from a host's `port_base`.
const PORT_TRIES: u16 = 32;

/// What the executor says of one migration.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// 1 for the plan's first wave.
    pub wave: usize,
    pub vm: String,
    pub from: String,
    pub to: String,
    /// `planned` (dry run), `completed`, `failed`, `timed-out`, `interrupted`, `not-started`.
    pub status: String,
    pub uri: Option<String>,
    /// QEMU's max-bandwidth, bytes/s.
    pub max_bandwidth: u64,
    pub total_time_ms: Option<u64>,
    pub downtime_ms: Option<u64>,
    pub setup_time_ms: Option<u64>,
    /// `ram.transferred`.
    pub bytes: Option<u64>,
    /// bytes × 8 / total time, Mbit/s.
    pub mbps: Option<f64>,
    pub error: Option<String>,
}

impl Report {
    fn new(wave: usize, m: &Move, c: &Config) -> Report {
        Report {
            wave,
            vm: m.vm.clone(),
            from: m.from.clone(),
            to: m.to.clone(),
            status: "not-started".into(),
            uri: None,
            max_bandwidth: c.max_bandwidth(),
            total_time_ms: None,
            downtime_ms: None,
            setup_time_ms: None,
            bytes: None,
            mbps: None,
            error: None,
        }
    }
}

/// A running source QEMU, as seen through its QMP socket and /proc.
struct Source {
    pid: i32,
    exe: PathBuf,
    cwd: PathBuf,
    argv: Vec<String>,
}

/// Why a source QEMU cannot be migrated (or not read).
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error(transparent)]
    Qmp(#[from] QmpError),
    #[error("the VM is {0:?}, not running: only a running VM is migrated")]
    NotRunning(String),
    /// Its command line could not be read from /proc.
    #[error("{} (the QEMU on its QMP socket): {}", .0.path().display(), .0.msg())]
    Cmdline(colosched_sys::Error),
    #[error(transparent)]
    Proc(colosched_sys::Error),
}

fn inspect(path: &Path) -> Result<(Qmp, Source), SourceError> {
    let mut q = Qmp::connect(path, QMP_TIMEOUT)?;
    let st = q.query_status()?;
    if st.status != "running" {
        return Err(SourceError::NotRunning(st.status));
    }
    let pid = q.peer_pid()?;
    let procfs = Procfs::new("/proc");
    let cmdline = procfs.cmdline(pid).map_err(SourceError::Cmdline)?;
    let argv: Vec<String> = cmdline
        .split(|&b| b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let argv = argv[..argv.len().saturating_sub(1)].to_vec(); // the last NUL ends the last one
    let exe = procfs.exe(pid).map_err(SourceError::Proc)?;
    // A binary replaced on disk (an upgrade) reads "PATH (deleted)": the new one is started.
    let exe = PathBuf::from(
        exe.to_string_lossy()
            .trim_end_matches(" (deleted)")
            .to_string(),
    );
    let cwd = procfs.cwd(pid).unwrap_or_else(|_| PathBuf::from("/"));
    Ok((
        q,
        Source {
            pid,
            exe,
            cwd,
            argv,
        },
    ))
}

/// Whether `addr` is an address of this machine (one can bind to it).
fn is_local(addr: IpAddr) -> bool {
    TcpListener::bind(SocketAddr::new(addr, 0)).is_ok()
}

/// The first port from `base` nothing listens on (what a dry run shows; the destination tries
/// the ports again itself).
fn free_port(addr: IpAddr, base: u16) -> Option<u16> {
    (base..=base.saturating_add(PORT_TRIES - 1))
        .find(|&p| TcpListener::bind(SocketAddr::new(addr, p)).is_ok())
}

fn uri(addr: IpAddr, port: u16) -> String {
    format!("tcp:{}", SocketAddr::new(addr, port))
}

/// Everything a dry run checks, for each move: the plan fits the config; the VM's QMP socket
/// answers, it is running, its QEMU's command line can be duplicated; the destination host is
/// this machine and has a free port; what an earlier run's destination left (see [`leftover`]):
/// a QEMU holding a VM refuses the plan. Returns a report per move (status `planned`) and the
/// leftovers to [`clean`] before the plan runs; nothing is changed.
pub fn check(c: &Config, waves: &[Vec<Move>]) -> Result<(Vec<Report>, Vec<Leftover>), Bad> {
    if c.libvirt() {
        return libvirt::check(c, waves).map(|r| (r, Vec::new()));
    }
    check_plan(c, waves)?;
    let mut out = Vec::new();
    let mut left: Vec<Leftover> = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for (w, wave) in waves.iter().enumerate() {
        for m in wave {
            let (i, vm) = c.vm(&m.vm).expect("check_plan found it");
            let hi = c.hosts.iter().position(|h| h.id == m.to).expect("checked");
            let host = &c.hosts[hi];
            if !is_local(host.address) {
                return Err(bad(
                    format!("host[{hi}].address"),
                    format!(
                        "{} is not an address of this machine: this executor starts destination \
                         QEMUs here (on a cluster, use libvirt: docs/vm-placement.md)",
                        host.address
                    ),
                ));
            }
            if let Some(l) = find_leftover(c, m)? {
                if !left.iter().any(|o: &Leftover| o.files == l.files) {
                    left.push(l);
                }
            }
            if !seen.contains(&vm.id.as_str()) {
                seen.push(&vm.id);
                let at = format!("vm[{i}] ({})", vm.id);
                let (_q, src) = inspect(&vm.qmp).map_err(|e| bad(format!("{at}.qmp"), e))?;
                destination(&src.argv, &src.cwd, &vm.qmp, &c.run_dir, &vm.id, &m.to)
                    .map_err(|e| bad(at, e))?;
            }
            let port = free_port(host.address, host.port_base).ok_or_else(|| {
                bad(
                    format!("host[{hi}].port_base"),
                    format!(
                        "no free port in {}-{}",
                        host.port_base,
                        host.port_base.saturating_add(PORT_TRIES - 1)
                    ),
                )
            })?;
            let mut r = Report::new(w + 1, m, c);
            r.status = "planned".into();
            r.uri = Some(uri(host.address, port));
            out.push(r);
        }
    }
    Ok((out, left))
}

/// A config key the system cannot honour (a VM's socket that does not answer, an address that
/// is not this machine's).
fn bad(key: impl Into<String>, problem: impl ToString) -> Bad {
    Bad::Config(ConfigError::key(key, problem.to_string()))
}

/// Why a migration stopped short.
enum Stop {
    Failed(String),
    TimedOut(String),
    Signal(i32),
}

/// Whatever error a migration met fails it, in its words.
impl<E: std::error::Error> From<E> for Stop {
    fn from(e: E) -> Stop {
        Stop::Failed(e.to_string())
    }
}

/// A file or program the executor could not make, start or remove.
#[derive(Debug, thiserror::Error)]
#[error("cannot {what} {}: {source}", path.display())]
pub struct FileError {
    what: &'static str,
    path: PathBuf,
    source: std::io::Error,
}

impl FileError {
    fn new(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> FileError {
        let path = path.to_path_buf();
        move |source| FileError { what, path, source }
    }
}

/// A destination QEMU this executor started, and what it makes.
struct Dest {
    child: Child,
    d: Destination,
}

impl Dest {
    fn spawn(src: &Source, d: Destination) -> Result<Dest, FileError> {
        let log = std::fs::File::create(&d.log).map_err(FileError::new("create", &d.log))?;
        let err = log.try_clone().map_err(FileError::new("create", &d.log))?;
        let mut cmd = Command::new(&src.exe);
        cmd.args(&d.args)
            .current_dir(&src.cwd)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err);
        // SAFETY: setsid(2) is async-signal-safe; the child leaves our session and process
        // group, so a ^C to the executor never reaches the VM it moved.
        unsafe {
            cmd.pre_exec(|| rustix::process::setsid().map(drop).map_err(Into::into));
        }
        match cmd.spawn() {
            Ok(child) => Ok(Dest { child, d }),
            Err(e) => {
                let _ = std::fs::remove_file(&d.log);
                Err(FileError::new("start", &src.exe)(e))
            }
        }
    }

    /// The last lines QEMU wrote, for an error message.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.d.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().rev().take(4).collect();
        let tail: Vec<&str> = lines.into_iter().rev().collect();
        if tail.is_empty() {
            String::new()
        } else {
            format!(" (its log: {})", tail.join(" | "))
        }
    }

    fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(st)) => Some(format!(
                "the destination QEMU exited ({st}){}",
                self.log_tail()
            )),
            _ => None,
        }
    }

    /// Waits for its QMP socket and connects.
    fn connect(&mut self, signals: &Signals) -> Result<Qmp, Stop> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(e) = self.exited() {
                return Err(Stop::Failed(e));
            }
            if self.d.qmp.exists() {
                if let Ok(q) = Qmp::connect(&self.d.qmp, QMP_TIMEOUT) {
                    return Ok(q);
                }
            }
            if Instant::now() > deadline {
                return Err(Stop::Failed(format!(
                    "the destination's QMP socket {} did not answer within {START_TIMEOUT:?}{}",
                    self.d.qmp.display(),
                    self.log_tail()
                )));
            }
            if let Some(sig) = signals.wait(POLL) {
                return Err(Stop::Signal(sig));
            }
        }
    }

    /// Kills and reaps it, and removes everything it made.
    fn discard(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        for p in self.d.paths() {
            let _ = std::fs::remove_file(p);
        }
    }
}

fn alive(pid: i32) -> bool {
    // A zombie has ended.
    (Procfs::new("/proc").proc_stat(pid, &mut String::new())).is_some_and(|s| s.state != 'Z')
}

/// What an earlier run's destination for one move (`<vm>.<host>.pid`, `.qmp` in run_dir) is
/// now: the executor was SIGKILLed (or the machine lost power) before it could clean up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// Neither file.
    Nothing,
    /// Files, but no QEMU of ours on the pidfile's pid: none readable, the process has ended,
    /// or the pid is another process's now.
    Dead,
    /// Our QEMU (its command line names the pidfile) runs; its `query-status` and
    /// `query-migrate` statuses, `None` when its QMP socket does not answer.
    Alive {
        status: Option<String>,
        migration: Option<String>,
    },
}

/// What to do with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Nothing,
    /// Remove the stale files.
    Remove,
    /// Kill the QEMU and remove its files: it never received the VM (still `inmigrate`, its
    /// migration not `completed`), so the VM runs on its source.
    Kill,
    /// Leave it and refuse the plan: it may hold the VM. Says why.
    Refuse(String),
}

/// The decision on a leftover destination (pure).
pub fn leftover(found: &Found) -> Action {
    match found {
        Found::Nothing => Action::Nothing,
        Found::Dead => Action::Remove,
        Found::Alive {
            status: Some(s),
            migration,
        } if s == "inmigrate" && migration.as_deref() != Some("completed") => Action::Kill,
        Found::Alive {
            status: None,
            migration: _,
        } => Action::Refuse(
            "its QMP socket does not answer, so whether it holds the VM is unknown".into(),
        ),
        Found::Alive { status, migration } => Action::Refuse(format!(
            "it is {:?} (migration {:?}): it received the VM",
            status.as_deref().unwrap_or("?"),
            migration.as_deref().unwrap_or("?")
        )),
    }
}

/// A leftover destination to remove before the plan runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Leftover {
    pub vm: String,
    pub host: String,
    /// The QEMU to kill (`Action::Kill`); `None`: only stale files.
    pub pid: Option<i32>,
    /// Everything of `<vm>.<host>.` in run_dir.
    pub files: Vec<PathBuf>,
}

/// Whether `pid` is a live QEMU whose command line has `-pidfile PIDFILE`: one this executor
/// started (a pid reused by another process is not).
fn ours(pid: i32, pidfile: &Path) -> bool {
    let Ok(cmdline) = Procfs::new("/proc").cmdline(pid) else {
        return false;
    };
    let argv: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
    let want = pidfile.as_os_str().as_encoded_bytes();
    alive(pid)
        && argv
            .first()
            .is_some_and(|a0| a0.windows(4).any(|w| w == b"qemu"))
        && argv.windows(2).any(|w| w[0] == b"-pidfile" && w[1] == want)
}

/// A live QEMU of ours, asked over its QMP socket.
fn probe(qmp: &Path) -> Found {
    let Ok(mut q) = Qmp::connect(qmp, QMP_TIMEOUT) else {
        return Found::Alive {
            status: None,
            migration: None,
        };
    };
    let status = q.query_status().ok().map(|s| s.status);
    let migration = q.execute("query-migrate", None).ok();
    let migration = migration.and_then(|v| Some(v.get("status")?.as_str()?.to_string()));
    Found::Alive { status, migration }
}

/// Looks for what an earlier run's destination of move `m` left; `Err` (naming the VM, the pid
/// and run_dir) when it must be left alone.
fn find_leftover(c: &Config, m: &Move) -> Result<Option<Leftover>, ConfigError> {
    let stem = format!("{}.{}.", m.vm, m.to);
    let (qmp, pidfile) = (
        c.run_dir.join(format!("{stem}qmp")),
        c.run_dir.join(format!("{stem}pid")),
    );
    // A VM the config names runs there (the destination of a completed earlier run): not ours
    // to touch, and the plan moves it elsewhere first.
    if c.vms.iter().any(|v| v.qmp == qmp) || !(qmp.exists() || pidfile.exists()) {
        return Ok(None);
    }
    let pid = std::fs::read_to_string(&pidfile)
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok())
        .filter(|&p| p > 0 && ours(p, &pidfile));
    let found = match pid {
        None => Found::Dead,
        Some(_) => probe(&qmp),
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(&c.run_dir)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with(&stem))
                })
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    let l = |pid| Leftover {
        vm: m.vm.clone(),
        host: m.to.clone(),
        pid,
        files: files.clone(),
    };
    match leftover(&found) {
        Action::Nothing => Ok(None),
        Action::Remove => Ok(Some(l(None))),
        Action::Kill => Ok(Some(l(pid))),
        Action::Refuse(why) => Err(ConfigError::key(
            "migrate.run_dir",
            format!(
                "{}: QEMU pid {} is a destination of {} on {} left by an earlier run, and {why}. \
                 If the VM runs there, make {} its [[vm]] qmp (host = {:?}) and plan again; if \
                 not, stop pid {} and remove {stem}* from run_dir",
                c.run_dir.display(),
                pid.expect("alive"),
                m.vm,
                m.to,
                qmp.display(),
                m.to,
                pid.expect("alive"),
            ),
        )),
    }
}

/// Why a leftover could not be removed.
#[derive(Debug, thiserror::Error)]
pub enum CleanError {
    /// Asked again, it holds the VM now (the source completed the migration since the check).
    #[error("pid {pid} ({}): {why} since the check: left alone", qmp.display())]
    Changed { pid: i32, qmp: PathBuf, why: String },
    #[error("kill pid {pid}: {e}")]
    Kill { pid: i32, e: rustix::io::Errno },
    #[error("pid {pid} did not end within {SETTLE_TIMEOUT:?} of SIGKILL")]
    Lingers { pid: i32 },
    #[error(transparent)]
    File(#[from] FileError),
}

/// Removes a leftover: kills its QEMU (through a pidfd, checked again to be ours) and waits for
/// it to end, removes its files, and waits for the VM's source (the config's QMP socket) to see
/// its migration end. Says what it did.
pub fn clean(c: &Config, l: &Leftover) -> Result<String, CleanError> {
    use rustix::process::{pidfd_open, pidfd_send_signal, Pid, PidfdFlags, Signal};
    let pidfile = c.run_dir.join(format!("{}.{}.pid", l.vm, l.host));
    let mut said = String::new();
    if let Some(pid) = l.pid {
        let fd = Pid::from_raw(pid).and_then(|p| pidfd_open(p, PidfdFlags::empty()).ok());
        // Opened first, checked after: the fd cannot come to mean another process.
        if let Some(fd) = fd.filter(|_| ours(pid, &pidfile)) {
            // Asked again: the source may have completed the migration since the check.
            let qmp = c.run_dir.join(format!("{}.{}.qmp", l.vm, l.host));
            if let Action::Refuse(why) = leftover(&probe(&qmp)) {
                return Err(CleanError::Changed { pid, qmp, why });
            }
            pidfd_send_signal(&fd, Signal::KILL).map_err(|e| CleanError::Kill { pid, e })?;
            let deadline = Instant::now() + SETTLE_TIMEOUT;
            while alive(pid) {
                if Instant::now() > deadline {
                    return Err(CleanError::Lingers { pid });
                }
                std::thread::sleep(POLL);
            }
            said = format!("killed QEMU pid {pid} (it never received {}), ", l.vm);
        }
    }
    for f in &l.files {
        match std::fs::remove_file(f) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(FileError::new("remove", f)(e).into()),
        }
    }
    // The source's migration fails once its destination is gone; a new `migrate` waits for that.
    if let Some((_, vm)) = c.vm(&l.vm) {
        if let Ok(mut q) = Qmp::connect(&vm.qmp, QMP_TIMEOUT) {
            settle(&mut q);
        }
    }
    Ok(format!(
        "{said}removed {}: a destination of {} on {} left by an earlier run",
        l.files
            .iter()
            .map(|f| f.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        l.vm,
        l.host
    ))
}

/// Waits (up to SETTLE_TIMEOUT) for a source's migration to end (after a cancel, or once its
/// destination is gone).
fn settle(src: &mut Qmp) {
    let deadline = Instant::now() + SETTLE_TIMEOUT;
    while Instant::now() < deadline {
        let st = src.execute("query-migrate", None).ok();
        let st = st.as_ref().and_then(|q| q.get("status")?.as_str());
        if !matches!(
            st,
            Some("setup" | "active" | "cancelling" | "device" | "pre-switchover")
        ) {
            break;
        }
        std::thread::sleep(POLL);
    }
}

fn ms(q: &Value, key: &str) -> Option<u64> {
    q.get(key).and_then(Value::as_u64)
}

/// One migration: `vm` from the QEMU on `src_qmp` to a new QEMU on `m.to`. Returns its report
/// and, when it completed, the destination's QMP socket (the VM's socket from then on).
fn migrate_one(
    c: &Config,
    r: &mut Report,
    m: &Move,
    src_qmp: &Path,
    signals: &Signals,
) -> Result<PathBuf, Stop> {
    let host = c.host(&m.to).expect("checked").clone();
    let (mut src, source) = inspect(src_qmp)?;
    let d = destination(&source.argv, &source.cwd, src_qmp, &c.run_dir, &m.vm, &m.to)?;
    for p in [&d.qmp, &d.pidfile] {
        if p.exists() {
            return Err(Stop::Failed(format!(
                "{} exists: a destination of an earlier run?",
                p.display()
            )));
        }
    }
    let old_bw = src
        .execute("query-migrate-parameters", None)?
        .get("max-bandwidth")
        .and_then(Value::as_u64);
    // Made last, after every check, and only the directory itself (not its parents), so that
    // every failure below can remove what was made.
    let made_run_dir = !c.run_dir.exists();
    if made_run_dir {
        std::fs::create_dir(&c.run_dir).map_err(FileError::new("create", &c.run_dir))?;
    }
    let mut dest = Dest::spawn(&source, d).inspect_err(|_| {
        if made_run_dir {
            let _ = std::fs::remove_dir(&c.run_dir);
        }
    })?;
    match run(c, r, &host, &mut src, &source, &mut dest, signals) {
        Ok(()) => {
            let qmp = dest.d.qmp.clone();
            drop(dest.child); // runs on, detached, after the executor exits
            Ok(qmp)
        }
        Err(stop) => {
            let _ = src.execute("migrate_cancel", None);
            settle(&mut src);
            dest.discard();
            if made_run_dir {
                let _ = std::fs::remove_dir(&c.run_dir); // only if empty
            }
            if let Some(bw) = old_bw {
                let _ = src.execute(
                    "migrate-set-parameters",
                    Some(json!({ "max-bandwidth": bw })),
                );
            }
            // A migration that failed after the source stopped leaves it paused: resume it.
            if let Ok(st) = src.query_status() {
                if !st.running {
                    let _ = src.execute("cont", None);
                }
            }
            Err(stop)
        }
    }
}

/// Steps 2–4 of a migration; on an error the caller cancels and cleans up.
fn run(
    c: &Config,
    r: &mut Report,
    host: &Host,
    src: &mut Qmp,
    source: &Source,
    dest: &mut Dest,
    signals: &Signals,
) -> Result<(), Stop> {
    let mut dq = dest.connect(signals)?;
    let mut last = String::new();
    for port in host.port_base..=host.port_base.saturating_add(PORT_TRIES - 1) {
        let u = uri(host.address, port);
        match dq.execute("migrate-incoming", Some(json!({ "uri": u }))) {
            Ok(_) => {
                r.uri = Some(u);
                break;
            }
            Err(e) => last = e.to_string(),
        }
    }
    let Some(u) = r.uri.clone() else {
        return Err(Stop::Failed(format!(
            "no port from {} on which the destination can listen: {last}",
            host.port_base
        )));
    };
    let bw = json!({ "max-bandwidth": c.max_bandwidth() });
    src.execute("migrate-set-parameters", Some(bw))?;
    src.execute("migrate", Some(json!({ "uri": u })))?;
    let deadline = Instant::now() + c.timeout;
    let tty = std::io::stderr().is_terminal();
    let q = loop {
        if let Some(sig) = signals.wait(POLL) {
            return Err(Stop::Signal(sig));
        }
        let q = src.execute("query-migrate", None)?;
        let status = q.get("status").and_then(Value::as_str).unwrap_or("");
        match status {
            "completed" => break q,
            "failed" | "cancelled" => {
                let why = q
                    .get("error-desc")
                    .and_then(Value::as_str)
                    .unwrap_or(status);
                let gone = dest.exited().map(|e| format!("; {e}")).unwrap_or_default();
                return Err(Stop::Failed(format!("migration {status}: {why}{gone}")));
            }
            _ => {}
        }
        if let Some(e) = dest.exited() {
            return Err(Stop::Failed(e));
        }
        if Instant::now() > deadline {
            return Err(Stop::TimedOut(format!(
                "not completed after {:?}: cancelled",
                c.timeout
            )));
        }
        if tty {
            let ram = |k: &str| q["ram"][k].as_u64().unwrap_or(0) as f64 / 1e6;
            eprint!(
                "\r{}: {status}, {:.0} MB sent, {:.0} MB left   ",
                r.vm,
                ram("transferred"),
                ram("remaining")
            );
        }
    };
    if tty {
        eprint!("\r{:60}\r", "");
    }
    r.total_time_ms = ms(&q, "total-time");
    r.downtime_ms = ms(&q, "downtime");
    r.setup_time_ms = ms(&q, "setup-time");
    r.bytes = q["ram"]["transferred"].as_u64();
    if let (Some(b), Some(t)) = (r.bytes, r.total_time_ms.filter(|&t| t > 0)) {
        r.mbps = Some((b as f64 * 8.0 / 1e6 / (t as f64 / 1e3) * 10.0).round() / 10.0);
    }
    // The destination runs the VM once it has it all.
    let deadline = Instant::now() + SETTLE_TIMEOUT;
    loop {
        let st = dq.query_status()?;
        if st.running {
            break;
        }
        if Instant::now() > deadline {
            return Err(Stop::Failed(format!(
                "migration completed but the destination is {:?}, not running",
                st.status
            )));
        }
        std::thread::sleep(POLL);
    }
    // The source's copy is stale now: it goes.
    let _ = src.execute("quit", None);
    let deadline = Instant::now() + SETTLE_TIMEOUT;
    while alive(source.pid) && Instant::now() < deadline {
        std::thread::sleep(POLL);
    }
    if alive(source.pid) {
        let _ = rustix::process::kill_process(
            rustix::process::Pid::from_raw(source.pid).expect("a pid is positive"),
            rustix::process::Signal::KILL,
        );
    }
    Ok(())
}

/// Runs the plan (already `check`ed); `report` is called once per move, in plan order, as
/// each one ends (the moves after a failure as `not-started`). Returns the exit status: 0 when
/// all completed, 1 when one failed or timed out, 128 + N after signal N.
pub fn execute(
    c: &Config,
    waves: &[Vec<Move>],
    signals: &Signals,
    report: &mut dyn FnMut(&Report),
) -> i32 {
    let mut qmp: Vec<PathBuf> = c.vms.iter().map(|v| v.qmp.clone()).collect();
    let mut code = 0;
    for (w, wave) in waves.iter().enumerate() {
        for m in wave {
            let mut r = Report::new(w + 1, m, c);
            if code == 0 {
                if let Some(sig) = signals.pending() {
                    code = 128 + sig;
                }
            }
            if code != 0 {
                report(&r);
                continue;
            }
            let (i, _) = c.vm(&m.vm).expect("checked");
            let moved = if c.libvirt() {
                libvirt::migrate_one(c, &mut r, m, signals).map(|()| qmp[i].clone())
            } else {
                migrate_one(c, &mut r, m, &qmp[i], signals)
            };
            match moved {
                Ok(new) => {
                    r.status = "completed".into();
                    qmp[i] = new;
                }
                Err(Stop::Failed(e)) => {
                    r.status = "failed".into();
                    r.error = Some(e);
                    code = 1;
                }
                Err(Stop::TimedOut(e)) => {
                    r.status = "timed-out".into();
                    r.error = Some(e);
                    code = 1;
                }
                Err(Stop::Signal(sig)) => {
                    r.status = "interrupted".into();
                    r.error = Some(format!("signal {sig}: cancelled"));
                    code = 128 + sig;
                }
            }
            report(&r);
        }
    }
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alive_as(status: Option<&str>, migration: Option<&str>) -> Found {
        Found::Alive {
            status: status.map(Into::into),
            migration: migration.map(Into::into),
        }
    }

    #[test]
    fn a_leftover_is_killed_only_while_it_never_received_the_vm() {
        assert_eq!(leftover(&Found::Nothing), Action::Nothing);
        assert_eq!(leftover(&Found::Dead), Action::Remove);
        // `-incoming defer` before `migrate-incoming` ("none"), during it ("active", "setup"),
        // after a failed one, or no answer to query-migrate: the VM is still on its source.
        for m in [
            None,
            Some("none"),
            Some("setup"),
            Some("active"),
            Some("failed"),
        ] {
            assert_eq!(
                leftover(&alive_as(Some("inmigrate"), m)),
                Action::Kill,
                "{m:?}"
            );
        }
        // It has the VM, or may have: left alone.
        for (s, m) in [
            (Some("running"), Some("completed")),
            (Some("running"), None),
            (Some("paused"), Some("completed")),
            (Some("inmigrate"), Some("completed")),
            (Some("postmigrate"), Some("completed")),
            (Some("internal-error"), None),
            (Some(""), None),
            (None, None),
            (None, Some("active")),
        ] {
            match leftover(&alive_as(s, m)) {
                Action::Refuse(why) => assert!(!why.is_empty()),
                other => panic!("{s:?}/{m:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_process_that_is_no_qemu_of_the_pidfile_is_not_ours() {
        let me = std::process::id() as i32;
        assert!(alive(me));
        assert!(!ours(me, Path::new("/run/colosched-vms/zk1.h1.pid")));
        assert!(!ours(i32::MAX, Path::new("/run/colosched-vms/zk1.h1.pid")));
    }

    #[test]
    fn stale_files_are_found_and_a_configured_vm_is_not_a_leftover() {
        let dir = std::env::temp_dir().join(format!("colosched-leftover-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let text = format!(
            "[migrate]\nlink_mbps = 100\nrun_dir = \"{}\"\n[[host]]\nid = \"h0\"\naddress = \
             \"127.0.0.1\"\n[[host]]\nid = \"h1\"\naddress = \"127.0.0.1\"\n[[vm]]\nid = \"zk1\"\n\
             host = \"h0\"\nqmp = \"{}\"\n",
            dir.display(),
            dir.join("zk1.h0.qmp").display()
        );
        let c = parse_config(&text, &dir).unwrap();
        let mv = |from: &str, to: &str| Move {
            vm: "zk1".into(),
            from: from.into(),
            to: to.into(),
        };
        assert_eq!(find_leftover(&c, &mv("h0", "h1")), Ok(None));
        // A pid that is no QEMU's (ours) and a log: stale, removed, nothing killed.
        std::fs::write(dir.join("zk1.h1.pid"), format!("{}\n", std::process::id())).unwrap();
        std::fs::write(dir.join("zk1.h1.log"), "").unwrap();
        std::fs::write(dir.join("zk1.h10.pid"), "1").unwrap(); // another host's: kept
        let l = find_leftover(&c, &mv("h0", "h1"))
            .unwrap()
            .expect("stale files");
        assert_eq!(l.pid, None);
        assert_eq!(
            l.files,
            vec![dir.join("zk1.h1.log"), dir.join("zk1.h1.pid")]
        );
        // The config's own socket is the VM, not a leftover, whatever runs there.
        std::fs::write(dir.join("zk1.h0.pid"), "1").unwrap();
        std::fs::write(dir.join("zk1.h0.qmp"), "").unwrap();
        assert_eq!(find_leftover(&c, &mv("h1", "h0")), Ok(None));
        let said = clean(&c, &l).unwrap();
        assert!(
            said.contains("zk1.h1.pid") && !said.contains("killed"),
            "{said}"
        );
        assert!(!dir.join("zk1.h1.pid").exists() && !dir.join("zk1.h1.log").exists());
        assert!(dir.join("zk1.h10.pid").exists() && dir.join("zk1.h0.pid").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
