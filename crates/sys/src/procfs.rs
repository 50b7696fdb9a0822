//! The reader of a procfs, rooted at a path: the node agent's and the host agent's look at
//! processes, threads and IRQ affinities, and QEMU discovery's. Unit tests run it against a fake tree in a
//! tempdir (as below's `ProcReader::new_with_custom_procfs`). It opens and reads; what the text
//! means is `colosched_core::proctext`'s (pure parsers). A file that cannot be read is an
//! [`Error`] naming it, or `None` where a task that is gone is an everyday answer.

use std::cell::{OnceCell, RefCell};
use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{numeric_entries, read, read_cpus, Error, Result};
use crate::fs::{fs_type, PROC_SUPER_MAGIC};
use crate::kept::KeptFile;
use colosched_core::cpuset::CpuSet;

/// `PF_KTHREAD` in the flags field of /proc/<pid>/stat: a kernel thread.
pub const PF_KTHREAD: u64 = 0x0020_0000;
/// `PF_NO_SETAFFINITY`: the kernel fixed this task's affinity (per-CPU kthreads, …).
pub const PF_NO_SETAFFINITY: u64 = 0x0400_0000;

pub use colosched_core::proctext::{
    parse_schedstat, parse_stat, parse_task_stat, CpuTicks, SchedStat, TaskStat,
};

/// File descriptors left free for everything else when stat files are kept open.
const FDS_SPARE: u64 = 256;

/// Bytes read from a stat or schedstat file in one `pread`: a page, longer than any of them (a
/// stat line is at most 52 numbers and a 64-byte comm).
const STAT_MAX: usize = 4096;

/// Paths under one procfs root. Two facts about the root are read once, the first time a read
/// needs them (so a `Procfs` made for one file costs no system call more), and decide how it is
/// read (not whether it is "the real one"):
/// - `procfs`: it is a proc filesystem, where a file of a process that died fails to read.
///   Only then are files kept open (a file of a fake tree would read its old text forever).
/// - `own_pids`: its `self` link names this process: its pids are ours, so system calls may
///   stand in for files (`sched_getaffinity`, `tgkill` with signal 0).
///
/// On a proc filesystem, the /proc/<pid>/stat files read are kept open ([`KeptFile`]s) and read
/// again from offset 0 at the next look: a move reads every BE process's stat (1,000 of them),
/// and opening each by path cost a third of the read. A kept file belongs to the process, not to
/// the pid: once that process is gone the read fails, the file is closed and the pid opened
/// anew. The kernel keeps a
/// page of buffer per open stat file (about 4 KiB per BE process); at most the soft
/// RLIMIT_NOFILE − 256 files are kept, the rest are opened at each read as before.
#[derive(Debug)]
pub struct Procfs {
    pub root: PathBuf,
    kept: RefCell<HashMap<i32, KeptFile>>,
    /// Kept /proc/<pid>/task/<tid>/schedstat files of LC threads, by tid (the same budget).
    kept_sched: RefCell<HashMap<i32, KeptFile>>,
    /// What the root is, looked at once (`Root::of`).
    facts: OnceCell<Root>,
}

/// The facts about a root that decide how it is read (see `Procfs`).
#[derive(Clone, Copy, Debug)]
struct Root {
    procfs: bool,
    own_pids: bool,
    max_kept: usize,
}

impl Root {
    fn of(root: &Path) -> Root {
        let procfs = fs_type(root).is_ok_and(|t| t == PROC_SUPER_MAGIC);
        let max_kept = match rustix::process::getrlimit(rustix::process::Resource::Nofile).current {
            Some(n) if procfs => n.saturating_sub(FDS_SPARE) as usize,
            _ => 0,
        };
        let me = std::process::id().to_string();
        let own_pids = fs::read_link(root.join("self")).is_ok_and(|l| l.as_os_str() == me.as_str());
        Root {
            procfs,
            own_pids,
            max_kept,
        }
    }
}

impl Clone for Procfs {
    /// A clone reads the same tree; it keeps files of its own.
    fn clone(&self) -> Procfs {
        Procfs::new(&self.root)
    }
}

impl Procfs {
    pub fn new(root: impl Into<PathBuf>) -> Procfs {
        Procfs {
            root: root.into(),
            kept: RefCell::new(HashMap::new()),
            kept_sched: RefCell::new(HashMap::new()),
            facts: OnceCell::new(),
        }
    }

    fn facts(&self) -> Root {
        *self.facts.get_or_init(|| Root::of(&self.root))
    }

    /// Whether the root is a proc filesystem (not a fake tree).
    pub fn is_procfs(&self) -> bool {
        self.facts().procfs
    }

    /// `<root>/<pid>/task/<tid>/<file>`.
    pub fn task_path(&self, pid: i32, tid: i32, file: &str) -> PathBuf {
        self.root.join(format!("{pid}/task/{tid}/{file}"))
    }

    /// `<root>/<pid>/task/<tid>/<file>` to read again and again, kept open on a proc
    /// filesystem (see `kept`).
    pub fn task_file(&self, pid: i32, tid: i32, file: &str) -> KeptFile {
        KeptFile::new(self.task_path(pid, tid, file), self.is_procfs())
    }

    /// <root>/stat is there: the root is a procfs (or a fake tree that has one). An error
    /// naming the file if not.
    pub fn check_root(&self) -> Result<()> {
        let path = self.root.join("stat");
        fs::metadata(&path).map_err(|e| Error::io(path, e))?;
        Ok(())
    }

    /// `pid`'s root directory as it sees it (<root>/<pid>/root): its own mounts, its own
    /// network namespace's sysfs at `sys` when it has one.
    pub fn process_root(&self, pid: i32) -> PathBuf {
        self.root.join(format!("{pid}/root"))
    }

    /// Every IRQ's `smp_affinity_list` (<root>/irq/<n>/) and the CPUs it allows now; an IRQ
    /// whose file cannot be read, or holds no CPU list, is left out.
    pub fn irq_affinities(&self) -> Vec<(PathBuf, CpuSet)> {
        let Ok(entries) = fs::read_dir(self.root.join("irq")) else {
            return Vec::new();
        };
        (entries.flatten())
            .map(|e| e.path().join("smp_affinity_list"))
            .filter_map(|p| Some((read_cpus(&p).ok()?, p)))
            .map(|(cpus, p)| (p, cpus))
            .collect()
    }

    /// The per-CPU lines of <root>/stat.
    pub fn stat(&self) -> Result<Vec<(usize, CpuTicks)>> {
        let path = self.root.join("stat");
        parse_stat(&read(&path)?).map_err(|e| Error::parse(&path, e))
    }

    /// Field 22 (start time, clock ticks after boot) of <root>/<pid>/task/<tid>/stat: with the
    /// tid, who a thread is (a tid reused by another thread has another start time).
    pub fn starttime(&self, pid: i32, tid: i32) -> Result<u64> {
        let path = self.task_path(pid, tid, "stat");
        let stat = parse_task_stat(&read(&path)?).map_err(|e| Error::parse(&path, e))?;
        Ok(stat.starttime)
    }

    /// The text of <root>/<pid>/task/<tid>/cgroup: the thread's group in each hierarchy
    /// (`colosched_core::proctext::{cgroup_v1, cgroup_v2}` read it).
    pub fn task_cgroup(&self, pid: i32, tid: i32) -> Result<String> {
        read(&self.task_path(pid, tid, "cgroup"))
    }

    /// Every numeric entry of the root: the processes.
    pub fn pids(&self) -> Vec<i32> {
        numeric_entries(&self.root)
    }

    /// The threads of `pid` (empty if it is gone).
    pub fn tids(&self, pid: i32) -> Vec<i32> {
        numeric_entries(&self.root.join(pid.to_string()).join("task"))
    }

    /// /proc/<pid>/task/<tid>/stat; `None` if the task is gone or the file is malformed.
    pub fn task_stat(&self, pid: i32, tid: i32, buf: &mut String) -> Option<TaskStat> {
        let path = self.root.join(format!("{pid}/task/{tid}/stat"));
        read_into(&path, buf).ok()?;
        parse_task_stat(buf).ok()
    }

    /// /proc/<pid>/task/<tid>/schedstat; `None` if the task is gone or the file is malformed.
    /// On the real /proc the file is kept open and read again with `pread` (opening it by path
    /// was half the cost of reading it), within the budget of kept stat files.
    pub fn task_schedstat(&self, pid: i32, tid: i32, buf: &mut String) -> Option<SchedStat> {
        let path = || self.root.join(format!("{pid}/task/{tid}/schedstat"));
        self.read_kept(&self.kept_sched, tid, path, buf)?;
        parse_schedstat(buf).ok()
    }

    /// Reads the file kept in `kept` under `key` into `buf` (a [`KeptFile`]: one `pread`, and
    /// opened by `path` again when that fails: its task is gone, and the id may be another's by
    /// now). A file not kept yet is kept if both maps together stay within the budget; one that
    /// cannot be read is dropped.
    fn read_kept(
        &self,
        kept: &RefCell<HashMap<i32, KeptFile>>,
        key: i32,
        path: impl Fn() -> PathBuf,
        buf: &mut String,
    ) -> Option<()> {
        let open = self.kept.borrow().len() + self.kept_sched.borrow().len();
        let mut kept = kept.borrow_mut();
        let file = kept
            .entry(key)
            .or_insert_with(|| KeptFile::new(path(), open < self.facts().max_kept));
        let mut bytes = [0u8; STAT_MAX];
        let text = file.read(&mut bytes);
        if !file.is_open() {
            kept.remove(&key);
        }
        buf.clear();
        buf.push_str(text?);
        Some(())
    }

    /// Closes the kept schedstat files of the threads `keep` says no.
    pub fn keep_schedstat_files(&self, keep: impl Fn(i32) -> bool) {
        self.kept_sched.borrow_mut().retain(|&tid, _| keep(tid));
    }

    /// How many schedstat files are kept open.
    pub fn kept_schedstat_files(&self) -> usize {
        self.kept_sched.borrow().len()
    }

    /// Whether the kernel keeps per-thread run-queue wait (`CONFIG_SCHED_INFO`; without it every
    /// schedstat file reads `0 0 0`). On the real /proc: this thread is running, so it was given
    /// a CPU at least once (its run time may not be accounted yet: a fresh thread reads
    /// `0 0 1`).
    pub fn has_sched_info(&self) -> bool {
        fs::read_to_string(self.root.join("thread-self/schedstat"))
            .ok()
            .and_then(|t| parse_schedstat(&t).ok())
            .is_some_and(|s| s.slices > 0)
    }

    /// /proc/<pid>/stat (the whole process: utime/stime summed over its threads), from the file
    /// kept open for `pid` if there is one.
    pub fn proc_stat(&self, pid: i32, buf: &mut String) -> Option<TaskStat> {
        let path = || self.root.join(format!("{pid}/stat"));
        self.read_kept(&self.kept, pid, path, buf)?;
        parse_task_stat(buf).ok()
    }

    /// Closes the kept stat files of the pids `keep` says no.
    pub fn keep_stat_files(&self, keep: impl Fn(i32) -> bool) {
        self.kept.borrow_mut().retain(|&pid, _| keep(pid));
    }

    /// How many stat files are kept open.
    pub fn kept_stat_files(&self) -> usize {
        self.kept.borrow().len()
    }

    /// The CPUs `pid` may run on: `sched_getaffinity` where the pids are ours (a syscall, no
    /// file), else `Cpus_allowed_list` of <root>/<pid>/status.
    pub fn affinity(&self, pid: i32) -> Option<CpuSet> {
        if self.facts().own_pids {
            return crate::sched::get_affinity(pid).ok();
        }
        let text = fs::read_to_string(self.root.join(format!("{pid}/status"))).ok()?;
        let list = text
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?;
        list.parse().ok()
    }

    /// The CPUs thread `tid` of `pid` is allowed, offline ones included: `Cpus_allowed_list` of
    /// <root>/<pid>/task/<tid>/status (`sched_getaffinity` leaves offline CPUs out).
    pub fn allowed(&self, pid: i32, tid: i32) -> Option<CpuSet> {
        let path = self.root.join(format!("{pid}/task/{tid}/status"));
        let text = fs::read_to_string(path).ok()?;
        let list = text
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?;
        list.parse().ok()
    }

    /// Whether every one of `tids` is still a thread of `pid` (tgkill with signal 0, which checks
    /// and sends nothing): a thread list kept from an earlier look is still right, with no
    /// /proc/<pid>/task listing. The main thread (`tid == pid`) is not checked: the caller has just
    /// read the process. Always false where the pids are not ours (the caller lists them).
    pub fn still_threads(&self, pid: i32, tids: &[i32]) -> bool {
        self.facts().own_pids
            && tids.iter().filter(|&&tid| tid != pid).all(|&tid| {
                // SAFETY: tgkill with signal 0 only looks the thread up. (Neither rustix nor nix
                // wraps tgkill.)
                unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, 0) == 0 }
            })
    }

    /// The process a thread belongs to (`Tgid:` of /proc/<tid>/status).
    pub fn tgid(&self, tid: i32) -> Option<i32> {
        let text = fs::read_to_string(self.root.join(format!("{tid}/status"))).ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix("Tgid:"))?
            .trim()
            .parse()
            .ok()
    }

    /// Seconds since boot (the first field of <root>/uptime).
    pub fn uptime(&self) -> Option<f64> {
        let text = fs::read_to_string(self.root.join("uptime")).ok()?;
        text.split_whitespace().next()?.parse().ok()
    }

    /// The process's name (<root>/<pid>/comm).
    pub fn comm(&self, pid: i32) -> Option<String> {
        read_trimmed(&self.root.join(format!("{pid}/comm")))
    }

    /// A thread's name (<root>/<pid>/task/<tid>/comm).
    pub fn task_comm(&self, pid: i32, tid: i32) -> Option<String> {
        read_trimmed(&self.task_path(pid, tid, "comm"))
    }

    /// Where `pid`'s executable is (the `exe` link).
    pub fn exe(&self, pid: i32) -> Result<PathBuf> {
        self.link(&format!("{pid}/exe"))
    }

    /// `pid`'s current directory (the `cwd` link).
    pub fn cwd(&self, pid: i32) -> Result<PathBuf> {
        self.link(&format!("{pid}/cwd"))
    }

    fn link(&self, rel: &str) -> Result<PathBuf> {
        let path = self.root.join(rel);
        fs::read_link(&path).map_err(|e| Error::io(path, e))
    }

    /// `pid`'s arguments, NUL-terminated, as the kernel keeps them (empty for a zombie).
    pub fn cmdline(&self, pid: i32) -> Result<Vec<u8>> {
        let path = self.root.join(format!("{pid}/cmdline"));
        fs::read(&path).map_err(|e| Error::io(path, e))
    }

    /// `pid`'s open file descriptors (empty if it is gone).
    pub fn fds(&self, pid: i32) -> Vec<i32> {
        numeric_entries(&self.root.join(format!("{pid}/fd")))
    }

    /// What descriptor `fd` of `pid` is open on (its `fd/<fd>` link).
    pub fn fd_target(&self, pid: i32, fd: i32) -> Option<PathBuf> {
        fs::read_link(self.root.join(format!("{pid}/fd/{fd}"))).ok()
    }

    /// The text of `fdinfo/<fd>` of `pid`.
    pub fn fdinfo(&self, pid: i32, fd: i32) -> Option<String> {
        fs::read_to_string(self.root.join(format!("{pid}/fdinfo/{fd}"))).ok()
    }

    /// `hypervisor` among the CPU flags of /proc/cpuinfo: we run inside a VM.
    pub fn in_vm(&self) -> bool {
        fs::read_to_string(self.root.join("cpuinfo"))
            .map(|t| {
                t.lines().any(|l| {
                    l.starts_with("flags") && l.split_whitespace().any(|f| f == "hypervisor")
                })
            })
            .unwrap_or(false)
    }
}

/// Reads a small /proc file with plain pread(2) calls. `read_to_string` on a `File` first asks
/// for its size and position (statx, lseek), which /proc files do not have: two wasted system
/// calls per file, a tenth of reading 1,000 stat files.
fn read_into(path: &Path, buf: &mut String) -> std::io::Result<()> {
    read_all(&fs::File::open(path)?, buf)
}

/// The whole of `f` from offset 0, until a read returns nothing: a seq file of many records
/// (maps) may stop short before its end.
fn read_all(f: &fs::File, buf: &mut String) -> std::io::Result<()> {
    let mut bytes = std::mem::take(buf).into_bytes();
    bytes.clear();
    let mut chunk = [0u8; 1024];
    loop {
        match f.read_at(&mut chunk, bytes.len() as u64) {
            Ok(0) => break,
            Ok(n) => bytes.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    *buf = String::from_utf8(bytes)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    Ok(())
}

fn read_trimmed(path: &Path) -> Option<String> {
    let text = fs::read_to_string(path).ok()?;
    Some(text.trim_end_matches('\n').to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread of our own that lives until `end` is called: its tid and `end`.
    fn own_thread() -> (i32, impl FnOnce()) {
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            tx.send(rustix::thread::gettid().as_raw_pid()).unwrap();
            stop_rx.recv().ok();
        });
        let tid = rx.recv().unwrap();
        (tid, move || {
            stop_tx.send(()).unwrap();
            t.join().unwrap();
        })
    }

    #[test]
    fn starttime_reads_past_a_comm_with_parentheses_and_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = Procfs::new(dir.path());
        let task = dir.path().join("7/task/8");
        fs::create_dir_all(&task).unwrap();
        let fields: Vec<String> = (3..=52).map(|i| i.to_string()).collect();
        fs::write(
            task.join("stat"),
            format!("8 (CPU 0/KVM) x) {}\n", fields.join(" ")),
        )
        .unwrap();
        assert_eq!(p.starttime(7, 8).unwrap(), 22);
        let gone = p.starttime(7, 9).unwrap_err();
        assert_eq!(gone.path(), dir.path().join("7/task/9/stat"));
        assert!(matches!(gone, Error::Io { .. }));
        fs::write(task.join("stat"), "8 (x) R 1\n").unwrap();
        let bad = p.starttime(7, 8).unwrap_err();
        assert_eq!(
            bad.to_string(),
            format!("{}: field 5 missing", task.join("stat").display())
        );
        fs::write(task.join("cgroup"), "0::/a\n").unwrap();
        assert_eq!(p.task_cgroup(7, 8).unwrap(), "0::/a\n");
        assert!(p.task_cgroup(7, 9).is_err());
        let e = p.cmdline(7).unwrap_err();
        assert_eq!(e.path(), dir.path().join("7/cmdline"));
        assert_eq!(p.exe(7).unwrap_err().path(), dir.path().join("7/exe"));
        std::os::unix::fs::symlink("/usr/bin/qemu-kvm", dir.path().join("7/exe")).unwrap();
        assert_eq!(p.exe(7).unwrap(), Path::new("/usr/bin/qemu-kvm"));
    }

    #[test]
    fn irq_affinities_and_the_roots_stat() {
        let dir = tempfile::tempdir().unwrap();
        let p = Procfs::new(dir.path());
        assert!(p.irq_affinities().is_empty(), "no irq directory");
        let e = p.check_root().unwrap_err();
        assert_eq!(e.path(), dir.path().join("stat"));
        fs::write(dir.path().join("stat"), "cpu 0 0 0 0\n").unwrap();
        p.check_root().unwrap();
        for (irq, list) in [("1", "0-1\n"), ("2", "x\n")] {
            fs::create_dir_all(dir.path().join("irq").join(irq)).unwrap();
            let path = dir.path().join("irq").join(irq).join("smp_affinity_list");
            fs::write(path, list).unwrap();
        }
        fs::create_dir_all(dir.path().join("irq/3")).unwrap();
        fs::write(dir.path().join("irq/default_smp_affinity"), "3\n").unwrap();
        let got = p.irq_affinities();
        let one = dir.path().join("irq/1/smp_affinity_list");
        assert_eq!(got, [(one, "0-1".parse().unwrap())]);
        assert_eq!(p.process_root(7), dir.path().join("7/root"));
        // The real /proc: every IRQ listed there allows some CPU.
        let real = Procfs::new("/proc");
        real.check_root().unwrap();
        assert!(real
            .irq_affinities()
            .iter()
            .all(|(_, cpus)| !cpus.is_empty()));
    }

    #[test]
    fn a_thread_is_mapped_to_its_process() {
        // Our own threads, read for real: the main thread and a spawned one share our pid.
        let p = Procfs::new("/proc");
        let me = std::process::id() as i32;
        let (tid, end) = own_thread();
        assert_ne!(tid, me);
        assert_eq!(p.tgid(tid), Some(me));
        assert_eq!(p.tgid(me), Some(me));
        assert_eq!(p.tgid(i32::MAX), None, "no such task");
        end();
    }

    #[test]
    fn a_line_is_read_to_its_end() {
        // One read for a file: one without a final newline, or longer than a schedstat line,
        // comes whole all the same, into a buffer that held another.
        let dir = tempfile::tempdir().unwrap();
        let p = Procfs::new(dir.path());
        fs::create_dir_all(dir.path().join("7/task/8")).unwrap();
        let mut buf = String::from("old");
        for text in ["1 2 3\n", "1 2 3", &format!("{} 2 3\n", "1".repeat(300))] {
            fs::write(dir.path().join("7/task/8/schedstat"), text).unwrap();
            p.task_schedstat(7, 8, &mut buf);
            assert_eq!(buf, text);
        }
        fs::write(dir.path().join("7/task/8/schedstat"), "10 20 3\n").unwrap();
        assert_eq!(
            p.task_schedstat(7, 8, &mut String::new()),
            Some(SchedStat {
                run_ns: 10,
                wait_ns: 20,
                slices: 3
            })
        );
        assert_eq!(p.task_schedstat(7, 9, &mut String::new()), None, "gone");
    }

    #[test]
    fn this_kernel_keeps_run_queue_wait_per_thread() {
        // CONFIG_SCHED_INFO: the agent's LC wait needs it. Our own thread has run.
        let p = Procfs::new("/proc");
        assert!(
            p.has_sched_info(),
            "/proc/thread-self/schedstat reads 0 0 0"
        );
        let me = std::process::id() as i32;
        let s = p.task_schedstat(me, me, &mut String::new()).unwrap();
        assert!(s.slices > 0 && s.run_ns > 0, "{s:?}");
    }

    #[test]
    fn own_process_parses_for_real() {
        let p = Procfs::new("/proc");
        let me = std::process::id() as i32;
        let mut buf = String::new();
        let s = p.task_stat(me, me, &mut buf).expect("own stat");
        assert_eq!(s.flags & PF_KTHREAD, 0);
        assert!(p.tids(me).contains(&me));
        assert!(!p.stat().unwrap().is_empty());
        // read_into reads to the end however small its chunks: a stat file of 1,000+ bytes
        // (the real one here) comes whole, and a reused buffer holds only the new file.
        buf.push_str("left over");
        read_into(Path::new("/proc/self/maps"), &mut buf).unwrap();
        assert!(buf.len() > 1024 && buf.ends_with('\n') && !buf.contains("left over"));
    }

    #[test]
    fn stat_files_are_kept_open_and_closed_with_their_process() {
        let p = Procfs::new("/proc");
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let mut buf = String::new();
        assert!(p.proc_stat(pid, &mut buf).is_some());
        assert_eq!(p.kept_stat_files(), 1);
        // The kept file is read afresh: it sees the child stop.
        let child_pid = rustix::process::Pid::from_raw(pid).unwrap();
        rustix::process::kill_process(child_pid, rustix::process::Signal::STOP).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while p.proc_stat(pid, &mut buf).unwrap().state != 'T' {
            assert!(std::time::Instant::now() < deadline, "never seen stopped");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(p.kept_stat_files(), 1, "still the one file");
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(p.proc_stat(pid, &mut buf).is_none(), "a reaped process");
        assert_eq!(p.kept_stat_files(), 0, "its file is closed");
        let me = std::process::id() as i32;
        p.proc_stat(me, &mut buf).unwrap();
        p.keep_stat_files(|x| x != me);
        assert_eq!(p.kept_stat_files(), 0);
        // What counts is the filesystem, not the path: /proc by another path keeps files, a
        // copy of the file in a tempdir (which would read its old text forever) does not.
        let other = Procfs::new("/proc/self/..");
        other.proc_stat(me, &mut buf).unwrap();
        assert_eq!(other.kept_stat_files(), 1, "a proc filesystem keeps files");
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join(me.to_string())).unwrap();
        let line = fs::read_to_string(format!("/proc/{me}/stat")).unwrap();
        fs::write(dir.path().join(format!("{me}/stat")), line).unwrap();
        let fake = Procfs::new(dir.path());
        fake.proc_stat(me, &mut buf).unwrap();
        assert_eq!(fake.kept_stat_files(), 0, "a tempdir keeps none");
        let tids = other.tids(me);
        assert!(tids.len() > 1 && other.still_threads(me, &tids));
        assert!(!fake.still_threads(me, &tids), "its pids are not ours");
    }

    #[test]
    fn schedstat_files_are_kept_open_and_closed_with_their_thread() {
        let p = Procfs::new("/proc");
        let mut child = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 3000000 ]; do i=$((i+1)); done"])
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let mut buf = String::new();
        let first = p.task_schedstat(pid, pid, &mut buf).unwrap();
        assert_eq!(p.kept_schedstat_files(), 1);
        // The kept file is read afresh: the spinning child's run time grows.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while p.task_schedstat(pid, pid, &mut buf).unwrap().run_ns == first.run_ns {
            assert!(std::time::Instant::now() < deadline, "run time never grew");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(p.kept_schedstat_files(), 1, "still the one file");
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(
            p.task_schedstat(pid, pid, &mut buf).is_none(),
            "a reaped thread"
        );
        assert_eq!(p.kept_schedstat_files(), 0, "its file is closed");
        let me = std::process::id() as i32;
        p.task_schedstat(me, me, &mut buf).unwrap();
        p.keep_schedstat_files(|t| t != me);
        assert_eq!(p.kept_schedstat_files(), 0);
    }

    #[test]
    fn still_threads_checks_each_thread_for_real() {
        let p = Procfs::new("/proc");
        let me = std::process::id() as i32;
        let (tid, end) = own_thread();
        assert!(p.still_threads(me, &[me, tid]));
        assert!(!p.still_threads(1, &[tid]), "a thread of another process");
        assert!(
            !Procfs::new("/fake").still_threads(me, &[me]),
            "never on a fake tree"
        );
        end();
        // pthread_join returns when the thread has cleared its tid, a moment before the kernel
        // reaps it; wait (at most 2 s) until /proc no longer lists it, as the caller would see.
        let listed = Path::new("/proc/self/task").join(tid.to_string());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while listed.exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(!p.still_threads(me, &[me, tid]), "a thread that has exited");
    }
}
