//! Parsers of the text of per-task /proc files, shared by the node agent and the host agent:
//! text in, fields out (the readers that open the files live with each agent).

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

#[cfg(test)]
mod tests {
    use super::*;

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
