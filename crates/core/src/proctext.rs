//! Parsers of the text of per-task /proc files, shared by the node agent and the host agent:
//! text in, fields out (the reader that opens the files is `colosched_sys::procfs::Procfs`).

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
pub fn parse_stat(text: &str) -> std::result::Result<Vec<(usize, CpuTicks)>, String> {
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
            .collect::<std::result::Result<_, _>>()?;
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

/// The fields of /proc/<pid>/task/<tid>/stat the agents use.
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
/// One pass over the words, parsing only the fields used (a move parses 1,000 of these).
pub fn parse_task_stat(text: &str) -> std::result::Result<TaskStat, String> {
    const USED: [usize; 10] = [4, 9, 10, 12, 14, 15, 20, 22, 24, 39];
    let open = text.find('(').ok_or("no '(' before comm")?;
    let close = text.rfind(')').ok_or("no ')' after comm")?;
    let comm = text.get(open + 1..close).ok_or("bad comm")?.to_string();
    // The words after the comm are fields 3, 4, ...
    let mut words = text[close + 1..].split_ascii_whitespace();
    let state = words.next().and_then(|s| s.chars().next());
    let state = state.ok_or("field 3 missing")?;
    let mut f = [0u64; 40];
    let mut last = 3;
    for (n, w) in (4..=39).zip(words) {
        if USED.contains(&n) {
            f[n] = w.parse().map_err(|_| format!("field {n} not a number"))?;
        }
        last = n;
    }
    if last < 39 {
        return Err(format!("field {} missing", last + 1));
    }
    Ok(TaskStat {
        state,
        ppid: f[4] as i32,
        flags: f[9],
        minflt: f[10],
        majflt: f[12],
        cpu_ticks: f[14] + f[15],
        starttime: f[22],
        num_threads: f[20],
        rss_pages: f[24],
        processor: f[39] as usize,
        comm,
    })
}

/// The scheduler's counters of one thread, from /proc/<pid>/task/<tid>/schedstat
/// (`CONFIG_SCHED_INFO`): time on the CPU and time runnable on a run queue without it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SchedStat {
    /// Time it ran, ns.
    pub run_ns: u64,
    /// Time it waited on a run queue (runnable, not running), ns: `run_delay`.
    pub wait_ns: u64,
    /// Times it was given a CPU (`pcount`).
    pub slices: u64,
}

/// Parses a schedstat line: `run_ns wait_ns timeslices`.
pub fn parse_schedstat(text: &str) -> std::result::Result<SchedStat, String> {
    let mut f = text.split_ascii_whitespace().map(|w| {
        w.parse::<u64>()
            .map_err(|_| format!("bad number {w:?} in schedstat"))
    });
    let mut next = |what: &str| {
        f.next()
            .unwrap_or_else(|| Err(format!("schedstat: {what} missing")))
    };
    let run_ns = next("run time")?;
    let wait_ns = next("wait time")?;
    let slices = next("timeslices")?;
    Ok(SchedStat {
        run_ns,
        wait_ns,
        slices,
    })
}

/// The group of the v1 hierarchy that has `controller`, from the text of /proc/<pid>/cgroup
/// (`3:cpuset,cpu:/machine/vm1`): a path relative to the hierarchy's root.
pub fn cgroup_v1<'t>(text: &'t str, controller: &str) -> Option<&'t str> {
    text.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, controllers, group) = (parts.next()?, parts.next()?, parts.next()?);
        controllers
            .split(',')
            .any(|c| c == controller)
            .then_some(group)
    })
}

/// The cgroup2 group, from the text of /proc/<pid>/cgroup (the `0::` line): a path relative to
/// the cgroup2 root.
pub fn cgroup_v2(text: &str) -> Option<&str> {
    text.lines().find_map(|l| l.strip_prefix("0::"))
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn cgroup_lines_of_either_hierarchy() {
        let text = "4:memory:/a\n3:cpuset,cpu:/machine/vm1\n0::/machine.slice/vm 1.scope\n";
        assert_eq!(cgroup_v1(text, "cpuset"), Some("/machine/vm1"));
        assert_eq!(cgroup_v1(text, "cpuacct"), None);
        assert_eq!(cgroup_v2(text), Some("/machine.slice/vm 1.scope"));
        assert_eq!(cgroup_v2("3:cpuset:/\n"), None);
    }

    #[test]
    fn schedstat_parses_and_names_what_is_missing() {
        let s = parse_schedstat("1500 250 7\n").unwrap();
        assert_eq!((s.run_ns, s.wait_ns, s.slices), (1500, 250, 7));
        assert_eq!(
            parse_schedstat("1500 250").unwrap_err(),
            "schedstat: timeslices missing"
        );
        assert_eq!(
            parse_schedstat("").unwrap_err(),
            "schedstat: run time missing"
        );
        assert!(parse_schedstat("1 x 3").unwrap_err().contains("\"x\""));
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
        assert_eq!(parse_task_stat("1 (x) R 1").unwrap_err(), "field 5 missing");
        let bad = line.replacen(" 4194560 ", " x ", 1);
        assert_eq!(parse_task_stat(&bad).unwrap_err(), "field 9 not a number");
    }
}
