//! `colosched memwatch` / `colosched-agent memwatch`: print, exec or signal on threshold events.
//! Exit 2 on bad input (the message names the flag), 0 after a `gone` event or SIGTERM/SIGINT,
//! 1 on a failure while watching (every error of `MemoryThresholdWatcher::open` is bad input). It writes nothing but what the watcher registers, and the
//! watcher undoes that when it is dropped, on every path out of `run`.

use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::Duration;

use clap::Parser;
use rustix::process::{kill_process, Pid, Signal};

use crate::{BackendChoice, Direction, Event, MemoryThresholdWatcher, Threshold};
use crate::{ParseError, WatchError, WatchOptions};

/// What the flags' one-line help cannot say (`--help` prints it after the flags).
const NOTES: &str = "\
PATH must be a directory on a cgroup filesystem (v1 or v2).
SIZE is bytes or 512K, 256M, 1G; PCT is a percentage of the group's limit (80%), or, when the
group has none (v1: unlimited; v2: memory.max is \"max\"), of its nearest ancestor's limit.
--debounce reports a crossing only once usage stayed on its new side that long (a crossing back
within it cancels the report); memory.events and PSI are not debounced.
--psi alone, without --threshold, also works on a v2 group without the memory controller.
--exec runs `sh -c CMD` per event with COLOSCHED_THRESHOLD, COLOSCHED_THRESHOLD_BYTES,
COLOSCHED_DIRECTION, COLOSCHED_USAGE, COLOSCHED_LIMIT, COLOSCHED_CGROUP, COLOSCHED_BACKEND set.
--signal without --pid goes to every process in the cgroup at the time of the event.
`gone` (the cgroup was removed) is printed and ends the watch with exit 0.
Exit: 0 after `gone` or SIGTERM/SIGINT; 2 on bad input; 1 on a failure while watching.";

/// Print, run a command or send a signal when a cgroup's memory usage crosses thresholds.
#[derive(Parser, Debug)]
#[command(name = "colosched memwatch", after_help = NOTES)]
struct Args {
    /// The cgroup directory to watch.
    #[arg(long, value_name = "PATH")]
    cgroup: PathBuf,
    /// A threshold (repeat the flag for several).
    #[arg(long, value_name = "SIZE|PCT", value_parser = Threshold::parse, allow_hyphen_values = true)]
    threshold: Vec<Threshold>,
    /// v1: watch memory + swap (memory.memsw.usage_in_bytes).
    #[arg(long)]
    memsw: bool,
    /// How to be notified.
    #[arg(long, value_name = "auto|v1|v2|poll", default_value = "auto", value_parser = BackendChoice::parse)]
    backend: BackendChoice,
    /// Period of the polling path (ms, 1 to 60000; the watcher's default, 100, if not given).
    #[arg(long, value_name = "MS", value_parser = parse_period)]
    period: Option<Duration>,
    /// v2: set memory.high to this while watching (put back on exit).
    #[arg(long, value_name = "SIZE|PCT", value_parser = Threshold::parse, allow_hyphen_values = true)]
    high: Option<Threshold>,
    /// v2: a PSI trigger on memory.pressure, e.g. "some 150000 2000000".
    #[arg(long, value_name = "SPEC")]
    psi: Option<String>,
    /// Report a crossing only once it held this long (500ms, 2s).
    #[arg(long, value_name = "DURATION", value_parser = crate::parse_duration)]
    debounce: Option<Duration>,
    /// Which crossings --exec and --signal act on.
    #[arg(long, value_enum, default_value = "both")]
    direction: Which,
    /// Run `sh -c CMD` per event.
    #[arg(long, value_name = "CMD")]
    exec: Option<String>,
    /// Send SIG (USR1, USR2, HUP, TERM, INT, KILL or 1-64) per event.
    #[arg(long, value_name = "SIG", value_parser = parse_signal)]
    signal: Option<Signal>,
    /// Send --signal to this process instead of the cgroup's (repeatable).
    #[arg(long, value_name = "PID", requires = "signal", value_parser = clap::value_parser!(i32).range(1..))]
    pid: Vec<i32>,
    /// Print events as JSON lines.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Which {
    Up,
    Down,
    Both,
}

impl Args {
    fn options(&self) -> WatchOptions {
        WatchOptions {
            thresholds: self.threshold.clone(),
            memsw: self.memsw,
            backend: self.backend,
            poll_period: self.period.unwrap_or(WatchOptions::default().poll_period),
            high: self.high.clone(),
            psi: self.psi.clone(),
            debounce: self.debounce,
        }
    }

    /// Whether --exec and --signal act on an event that went `d`.
    fn wants(&self, d: Direction) -> bool {
        match (d, self.direction) {
            (Direction::Gone, _) => false,
            (_, Which::Both) => true,
            (Direction::Up, Which::Up) | (Direction::Down, Which::Down) => true,
            _ => false,
        }
    }
}

fn parse_signal(s: &str) -> Result<Signal, ParseError> {
    let name = s.trim_start_matches("SIG");
    let named = match name {
        "USR1" => Some(Signal::USR1),
        "USR2" => Some(Signal::USR2),
        "HUP" => Some(Signal::HUP),
        "TERM" => Some(Signal::TERM),
        "INT" => Some(Signal::INT),
        "KILL" => Some(Signal::KILL),
        _ => None,
    };
    let number = || {
        let n: i32 = name.parse().ok().filter(|n| (1..=64).contains(n))?;
        // SAFETY: Linux signals are 1..=64 (the real-time ones, 34 and up, have no name).
        Signal::from_named_raw(n).or(Some(unsafe { Signal::from_raw_unchecked(n) }))
    };
    named.or_else(number).ok_or_else(|| {
        ParseError::new(
            s,
            format!("{s:?} is not USR1, USR2, HUP, TERM, INT, KILL or 1-64"),
        )
    })
}

fn parse_period(s: &str) -> Result<Duration, ParseError> {
    s.parse()
        .ok()
        .filter(|ms| (1.0..=60_000.0).contains(ms))
        .map(|ms: f64| Duration::from_secs_f64(ms / 1000.0))
        .ok_or_else(|| ParseError::new(s, format!("{s:?} is not milliseconds from 1 to 60000")))
}

/// Entry point: returns the exit code.
pub fn main(args: &[String]) -> i32 {
    let argv = std::iter::once("colosched memwatch").chain(args.iter().map(String::as_str));
    let a = match Args::try_parse_from(argv) {
        Ok(a) => a,
        Err(e) => {
            // Help and version go to stdout with exit 0; usage errors to stderr with exit 2.
            let _ = e.print();
            return e.exit_code();
        }
    };
    let watcher = match MemoryThresholdWatcher::open(&a.cgroup, &a.options()) {
        Ok(w) => w,
        Err(e) => return fail(&e, 2),
    };
    log(&format!(
        "watching {}: {}",
        a.cgroup.display(),
        watcher.describe()
    ));
    match run(watcher, &a) {
        Ok(code) => code,
        Err(e) => fail(&e, 1),
    }
}

fn fail(e: &WatchError, code: i32) -> i32 {
    eprintln!("colosched memwatch: error: {e}");
    code
}

fn log(msg: &str) {
    eprintln!("colosched memwatch: {msg}");
}

fn run(mut w: MemoryThresholdWatcher, a: &Args) -> Result<i32, WatchError> {
    let signals = colosched_sys::signals::Signals::catch().map_err(|source| WatchError::Call {
        what: "catching SIGTERM, SIGINT and SIGHUP".into(),
        call: "pipe",
        source,
    })?;
    let mut children: Vec<Child> = Vec::new();
    let result = loop {
        // The wait wakes at once on an event; the timeout only bounds how late a signal is seen.
        let events = match w.wait(Some(Duration::from_millis(200))) {
            Ok(e) => e,
            Err(e) => break Err(e),
        };
        for e in &events {
            print_event(e, a.json);
            if a.wants(e.direction) {
                deliver(e, a, &mut children);
            }
        }
        children.retain_mut(|c| !matches!(c.try_wait(), Ok(Some(_))));
        if w.finished() {
            log("the cgroup is gone: exiting");
            break Ok(0);
        }
        if let Some(sig) = signals.pending() {
            log(&format!("signal {sig}: unregistering and exiting"));
            break Ok(0);
        }
    };
    drop(w);
    for mut c in children {
        let _ = c.wait();
    }
    result
}

fn print_event(e: &Event, json: bool) {
    if json {
        println!("{}", e.to_json());
        return;
    }
    let opt = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
    println!(
        "{:.6} {} {} ({}) {} usage {} limit {}",
        e.time,
        e.cgroup.display(),
        e.threshold,
        opt(e.threshold_bytes),
        e.direction.name(),
        opt(e.usage),
        opt(e.limit)
    );
}

fn deliver(e: &Event, a: &Args, children: &mut Vec<Child>) {
    let opt = |v: Option<u64>| v.map_or(String::new(), |v| v.to_string());
    if let Some(cmd) = &a.exec {
        let spawned = Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .env("COLOSCHED_CGROUP", &e.cgroup)
            .env("COLOSCHED_THRESHOLD", &e.threshold)
            .env("COLOSCHED_THRESHOLD_BYTES", opt(e.threshold_bytes))
            .env("COLOSCHED_DIRECTION", e.direction.name())
            .env("COLOSCHED_USAGE", opt(e.usage))
            .env("COLOSCHED_LIMIT", opt(e.limit))
            .env("COLOSCHED_BACKEND", e.backend.name())
            .env("COLOSCHED_TIME", format!("{:.6}", e.time))
            .spawn();
        match spawned {
            Ok(c) => children.push(c),
            Err(err) => log(&format!("--exec: cannot run sh: {err}")),
        }
    }
    if let Some(sig) = a.signal {
        let pids = if a.pid.is_empty() {
            cgroup_pids(&e.cgroup)
        } else {
            a.pid.clone()
        };
        for pid in pids.into_iter().filter_map(Pid::from_raw) {
            if let Err(err) = kill_process(pid, sig) {
                log(&format!("--signal {} to {pid}: {err}", sig.as_raw()));
            }
        }
    }
}

/// The processes in the cgroup now (`cgroup.procs`); none if it cannot be read.
fn cgroup_pids(cgroup: &std::path::Path) -> Vec<i32> {
    colosched_sys::Cgroupfs::new(cgroup)
        .ids("cgroup.procs")
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_size;

    fn parse(v: &[&str]) -> Result<Args, String> {
        Args::try_parse_from(std::iter::once("memwatch").chain(v.iter().copied()))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn bad_flags_name_the_flag() {
        let e = |v: &[&str]| parse(v).expect_err("should fail");
        assert!(e(&["--cgroup", "/x", "--threshold", "0"]).contains("--threshold"));
        assert!(e(&["--cgroup", "/x", "--threshold", "-5M"]).contains("--threshold"));
        assert!(e(&["--cgroup", "/x", "--threshold", "12Q"]).contains("suffix"));
        assert!(e(&["--cgroup", "/x", "--signal", "FOO"]).contains("--signal"));
        assert!(e(&["--cgroup", "/x", "--pid", "12"]).contains("--signal"));
        assert!(e(&["--cgroup", "/x", "--signal", "TERM", "--pid", "0"]).contains("--pid"));
        assert!(e(&["--cgroup", "/x", "--period", "0"]).contains("--period"));
        assert!(e(&["--cgroup", "/x", "--debounce", "5"]).contains("--debounce"));
        assert!(e(&["--cgroup", "/x", "--debounce", "0s"]).contains("--debounce"));
        assert!(e(&["--cgroup", "/x", "--bogus"]).contains("--bogus"));
        assert!(e(&["--threshold", "1M"]).contains("--cgroup"));
        assert!(e(&["--cgroup"]).contains("--cgroup"));
        let ok = parse(&[
            "--cgroup",
            "/x",
            "--threshold",
            "1M",
            "--signal",
            "SIGUSR2",
            "--pid",
            "7",
            "--direction",
            "up",
        ])
        .expect("ok");
        assert_eq!(ok.signal, Some(Signal::USR2));
        assert_eq!(parse_signal("40").map(Signal::as_raw), Ok(40));
        let e = parse_signal("FOO").unwrap_err();
        assert_eq!(e.value, "FOO");
        assert_eq!(ok.pid, vec![7]);
        assert!(ok.wants(Direction::Up) && !ok.wants(Direction::Down));
        assert!(!ok.wants(Direction::Gone));
    }

    #[test]
    fn help_and_usage_errors_have_their_exit_codes() {
        assert_eq!(main(&["--help".to_string()]), 0);
        assert_eq!(main(&["-h".to_string()]), 0);
        assert_eq!(main(&["--bogus".to_string()]), 2);
        assert_eq!(main(&[]), 2);
    }

    #[test]
    fn size_flags_parse() {
        assert_eq!(parse_size("1.5K"), Ok(1536));
        assert_eq!(parse_period("0").unwrap_err().value, "0");
    }
}
