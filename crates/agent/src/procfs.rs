//! Readers for the few /proc files the agent needs. Every reader takes the procfs root, so unit
//! tests run against a fake tree in a tempdir (as below's `ProcReader::new_with_custom_procfs`).

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

/// `PF_KTHREAD` in the flags field of /proc/<pid>/stat: a kernel thread.
pub const PF_KTHREAD: u64 = 0x0020_0000;
/// `PF_NO_SETAFFINITY`: the kernel fixed this task's affinity (per-CPU kthreads, …).
pub const PF_NO_SETAFFINITY: u64 = 0x0400_0000;

/// Cumulative ticks of one CPU line of /proc/stat.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTicks {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
}

impl CpuTicks {
    /// Time the CPU ran something (the guest's own work; steal is the host's).
    pub fn busy(&self) -> u64 {
        self.user + self.nice + self.system + self.irq + self.softirq
    }

    /// Every tick the CPU accounted, idle and steal included.
    pub fn total(&self) -> u64 {
        self.busy() + self.idle + self.iowait + self.steal
    }
}

/// Per-CPU lines of /proc/stat, as (cpu number, ticks). The aggregate `cpu` line is skipped.
pub fn parse_stat(text: &str) -> Result<Vec<(usize, CpuTicks)>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        // "cpu0 …" lines; the aggregate "cpu  …" line has no number glued to "cpu".
        let Some(rest) = line
            .strip_prefix("cpu")
            .filter(|r| r.starts_with(|c: char| c.is_ascii_digit()))
        else {
            continue;
        };
        let mut fields = rest.split_ascii_whitespace();
        let cpu: usize = fields
            .next()
            .and_then(|f| f.parse().ok())
            .ok_or(format!("line {}: bad cpu number", i + 1))?;
        let v: Vec<u64> = fields
            .map(|f| {
                f.parse()
                    .map_err(|_| format!("line {}: bad number {f:?}", i + 1))
            })
            .collect::<Result<_, _>>()?;
        if v.len() < 4 {
            return Err(format!(
                "line {}: cpu{cpu} has {} fields, expected at least 4",
                i + 1,
                v.len()
            ));
        }
        let at = |k: usize| v.get(k).copied().unwrap_or(0); // old kernels lack iowait..steal
        out.push((
            cpu,
            CpuTicks {
                user: at(0),
                nice: at(1),
                system: at(2),
                idle: at(3),
                iowait: at(4),
                irq: at(5),
                softirq: at(6),
                steal: at(7),
            },
        ));
    }
    if out.is_empty() {
        return Err("no per-CPU lines".into());
    }
    Ok(out)
}

/// The fields of /proc/<pid>/task/<tid>/stat the agent uses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskStat {
    pub comm: String,
    pub state: char,
    pub ppid: i32,
    pub flags: u64,
    pub minflt: u64,
    pub majflt: u64,
    /// utime + stime, in ticks.
    pub cpu_ticks: u64,
    /// Start time after boot, in ticks: with the pid it identifies a task across pid reuse.
    pub starttime: u64,
    pub num_threads: u64,
    pub rss_pages: u64,
    /// The CPU the task last ran on.
    pub processor: usize,
}

/// Parses a stat line. The comm is in parentheses and may itself contain spaces and ')'.
pub fn parse_task_stat(text: &str) -> Result<TaskStat, String> {
    let open = text.find('(').ok_or("no '(' before comm")?;
    let close = text.rfind(')').ok_or("no ')' after comm")?;
    let comm = text.get(open + 1..close).ok_or("bad comm")?.to_string();
    let rest: Vec<&str> = text[close + 1..].split_ascii_whitespace().collect();
    // rest[0] is field 3 (state); field N is rest[N - 3].
    let field = |n: usize| -> Result<u64, String> {
        rest.get(n - 3)
            .ok_or(format!("field {n} missing"))?
            .parse()
            .map_err(|_| format!("field {n} not a number"))
    };
    Ok(TaskStat {
        state: rest
            .first()
            .and_then(|s| s.chars().next())
            .ok_or("field 3 missing")?,
        ppid: field(4)? as i32,
        flags: field(9)?,
        minflt: field(10)?,
        majflt: field(12)?,
        cpu_ticks: field(14)? + field(15)?,
        starttime: field(22)?,
        num_threads: field(20)?,
        rss_pages: field(24)?,
        processor: field(39)? as usize,
        comm,
    })
}

/// Paths under one procfs root.
#[derive(Clone, Debug)]
pub struct Procfs {
    pub root: PathBuf,
}

impl Procfs {
    pub fn new(root: impl Into<PathBuf>) -> Procfs {
        Procfs { root: root.into() }
    }

    pub fn stat(&self) -> Result<Vec<(usize, CpuTicks)>, String> {
        let path = self.root.join("stat");
        let text = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        parse_stat(&text).map_err(|e| format!("{}: {e}", path.display()))
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

    /// /proc/<pid>/stat (the whole process: utime/stime summed over its threads).
    pub fn proc_stat(&self, pid: i32, buf: &mut String) -> Option<TaskStat> {
        read_into(&self.root.join(format!("{pid}/stat")), buf).ok()?;
        parse_task_stat(buf).ok()
    }

    /// The CPUs `pid` may run on: `sched_getaffinity` on the real /proc (a syscall, no file),
    /// `Cpus_allowed_list` of <root>/<pid>/status on a fake tree.
    pub fn affinity(&self, pid: i32) -> Option<Vec<usize>> {
        if self.root == Path::new("/proc") {
            return crate::actuator::get_affinity(pid).ok();
        }
        let text = fs::read_to_string(self.root.join(format!("{pid}/status"))).ok()?;
        let list = text
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?;
        crate::topology::parse_cpulist(list).ok()
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

    pub fn comm(&self, pid: i32) -> Option<String> {
        let text = fs::read_to_string(self.root.join(format!("{pid}/comm"))).ok()?;
        Some(text.trim_end_matches('\n').to_string())
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

fn read_into(path: &Path, buf: &mut String) -> std::io::Result<()> {
    buf.clear();
    fs::File::open(path)?.read_to_string(buf).map(|_| ())
}

fn numeric_entries(dir: &Path) -> Vec<i32> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<i32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    out.sort_unstable();
    out
}

/// USER_HZ: the unit of /proc/stat and of utime/stime.
pub fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as f64
    } else {
        100.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_is_mapped_to_its_process() {
        // Our own threads, read for real: the main thread and a spawned one share our pid.
        let p = Procfs::new("/proc");
        let me = std::process::id() as i32;
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            tx.send(unsafe { libc::gettid() }).unwrap();
            done_rx.recv().ok(); // alive until the checks are done
        });
        let tid = rx.recv().unwrap();
        assert_ne!(tid, me);
        assert_eq!(p.tgid(tid), Some(me));
        assert_eq!(p.tgid(me), Some(me));
        assert_eq!(p.tgid(i32::MAX), None, "no such task");
        done_tx.send(()).unwrap();
        t.join().unwrap();
    }

    #[test]
    fn stat_lines_skip_aggregate_and_fill_old_kernels() {
        let text =
            "cpu  10 0 5 100 0 0 0 9 0 0\ncpu0 4 0 2 50 1 0 0 7 0 0\ncpu1 6 0 3 50\nintr 5\n";
        let v = parse_stat(text).unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].0, 0);
        assert_eq!(v[0].1.steal, 7);
        assert_eq!(v[0].1.busy(), 6);
        assert_eq!(v[1].1.steal, 0);
        assert!(parse_stat("cpu0 1 2\n").unwrap_err().contains("line 1"));
        assert!(parse_stat("cpu0 1 x 3 4\n").is_err());
        assert!(parse_stat("intr 1\n").is_err());
    }

    #[test]
    fn task_stat_with_parens_and_spaces_in_comm() {
        let mut line = String::from(
            "42 (we (ird) x) R 1 42 42 0 -1 4194560 100 0 3 0 250 50 0 0 20 0 3 0 12345 1000 77",
        );
        for _ in 25..=38 {
            line.push_str(" 0");
        }
        line.push_str(" 1 0 0 0 0 0\n"); // field 39 = processor = 1
        let s = parse_task_stat(&line).unwrap();
        assert_eq!(s.comm, "we (ird) x");
        assert_eq!((s.state, s.ppid, s.flags), ('R', 1, 4194560));
        assert_eq!((s.minflt, s.majflt, s.cpu_ticks), (100, 3, 300));
        assert_eq!((s.starttime, s.rss_pages, s.processor), (12345, 77, 1));
        assert!(parse_task_stat("1 (x) R 1").is_err());
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
    }
}
