//! The one fake /proc and /sys the unit tests share: a tempdir holding `proc/` and `sys/` with
//! the files the readers of `sense` take, in the kernel's formats. Every test builds its system
//! with these calls, so a format is written in one place.

use std::fs;
use std::path::{Path, PathBuf};

/// A task of the fake /proc. `Default` is a plain user thread of process 1 that used no CPU.
#[derive(Clone, Debug)]
pub struct Task<'a> {
    pub pid: i32,
    pub tid: i32,
    pub ppid: i32,
    pub comm: &'a str,
    /// `PF_*` flags (0x00200000 makes a kernel thread).
    pub flags: u64,
    /// utime, in ticks (stime is 0).
    pub ticks: u64,
    /// Start time after boot, in ticks.
    pub start: u64,
    /// The CPU it last ran on.
    pub cpu: usize,
    /// Its run-queue wait (a schedstat file is written when set).
    pub wait_ns: Option<u64>,
}

impl Default for Task<'_> {
    fn default() -> Self {
        Task {
            pid: 1,
            tid: 1,
            ppid: 1,
            comm: "t",
            flags: 0,
            ticks: 0,
            start: 500,
            cpu: 0,
            wait_ns: None,
        }
    }
}

/// The stat line of `t`: fields 1 to 44, the comm in parentheses.
pub fn stat_line(t: &Task) -> String {
    let (pid, tid, ppid, comm, flags, ticks) = (t.pid, t.tid, t.ppid, t.comm, t.flags, t.ticks);
    let mut line = format!(
        "{tid} ({comm}) S {ppid} {pid} {pid} 0 -1 {flags} 10 0 2 0 {ticks} 0 0 0 20 0 3 0 {} 1000 42",
        t.start
    );
    for _ in 25..=38 {
        line.push_str(" 0");
    }
    line.push_str(&format!(" {} 0 0 0 0 0\n", t.cpu));
    line
}

/// A fake system in a tempdir (`proc/`, `sys/`), removed when dropped. The functions below
/// write into any proc or sys root.
pub struct Fake {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub proc: PathBuf,
    pub sys: PathBuf,
}

impl Fake {
    /// An empty /proc whose kernel keeps per-thread run-queue wait (`thread-self/schedstat`
    /// has been given a CPU), and an empty /sys.
    pub fn new() -> Fake {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let (proc, sys) = (root.join("proc"), root.join("sys"));
        write(&proc.join("thread-self/schedstat"), "1000 0 1\n");
        fs::create_dir_all(&sys).unwrap();
        Fake {
            _dir: dir,
            root,
            proc,
            sys,
        }
    }

    /// A directory standing for a cgroup, with these files.
    pub fn cgroup(&self, name: &str, files: &[(&str, &str)]) -> PathBuf {
        let d = self.root.join(name);
        fs::create_dir_all(&d).unwrap();
        for (f, text) in files {
            write(&d.join(f), text);
        }
        d
    }
}

/// A thread: <pid>/task/<tid>/stat (and schedstat), and for the main thread <pid>/stat and
/// <pid>/comm too.
pub fn task(proc: &Path, t: Task) {
    let line = stat_line(&t);
    let d = proc.join(format!("{}/task/{}", t.pid, t.tid));
    write(&d.join("stat"), &line);
    if let Some(wait) = t.wait_ns {
        write(&d.join("schedstat"), &format!("1000 {wait} 4\n"));
    }
    if t.tid == t.pid {
        write(&proc.join(format!("{}/stat", t.pid)), &line);
        write(
            &proc.join(format!("{}/comm", t.pid)),
            &format!("{}\n", t.comm),
        );
    }
}

/// A single-threaded process that used `ticks` of CPU and last ran on `cpu`.
pub fn process(proc: &Path, pid: i32, comm: &str, flags: u64, cpu: usize, ticks: u64) {
    task(
        proc,
        Task {
            pid,
            tid: pid,
            comm,
            flags,
            cpu,
            ticks,
            ..Task::default()
        },
    );
}

/// A thread with a schedstat file: it waited `wait_ns` on a run queue.
pub fn thread(proc: &Path, pid: i32, tid: i32, cpu: usize, wait_ns: u64) {
    task(
        proc,
        Task {
            pid,
            tid,
            cpu,
            ticks: 5,
            wait_ns: Some(wait_ns),
            ..Task::default()
        },
    );
}

/// `Cpus_allowed_list` (and `Tgid`) of process `pid`'s status and of its main thread's.
pub fn allowed(proc: &Path, pid: i32, list: &str) {
    let text = format!("Tgid:\t{pid}\nCpus_allowed_list:\t{list}\n");
    write(&proc.join(format!("{pid}/status")), &text);
    write(&proc.join(format!("{pid}/task/{pid}/status")), &text);
}

/// /proc/stat with one line per CPU: (user, steal) ticks out of `total` each, the rest idle.
pub fn stat(proc: &Path, total: u64, cpus: &[(u64, u64)]) {
    let mut s = String::from("cpu  0 0 0 0 0 0 0 0 0 0\n");
    for (i, (user, steal)) in cpus.iter().enumerate() {
        let idle = total - user - steal;
        s.push_str(&format!("cpu{i} {user} 0 0 {idle} 0 0 0 {steal} 0 0\n"));
    }
    write(&proc.join("stat"), &s);
}

/// /sys/devices/system/cpu/{possible,online}.
pub fn cpus(sys: &Path, possible: &str, online: &str) {
    let d = sys.join("devices/system/cpu");
    write(&d.join("possible"), &format!("{possible}\n"));
    write(&d.join("online"), &format!("{online}\n"));
}

/// A NUMA node of /sys with these CPUs.
pub fn node(sys: &Path, id: usize, cpulist: &str) {
    write(
        &sys.join(format!("devices/system/node/node{id}/cpulist")),
        &format!("{cpulist}\n"),
    );
}

/// Writes `text` to `path`, making its directories.
pub fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}
