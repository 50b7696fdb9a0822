//! `colosched memwatch` / `colosched-agent memwatch`: print, exec or signal on threshold events.
//! Exit 2 on bad input (the message names the flag), 0 after a `gone` event or SIGTERM/SIGINT,
//! 1 on a failure while watching. It writes nothing but what the watcher registers, and the
//! watcher undoes that when it is dropped, on every path out of `run`.

use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::Duration;

use crate::{BackendChoice, Direction, Event, MemoryThresholdWatcher, Threshold};
use crate::{WatchError, WatchOptions};

pub const USAGE: &str =
    "usage: colosched memwatch --cgroup PATH --threshold SIZE|PCT [--threshold …]
         [--memsw] [--backend auto|v1|v2|poll] [--period MS] [--high SIZE|PCT] [--psi SPEC]
         [--debounce DURATION] [--direction up|down|both] [--exec CMD] [--signal SIG [--pid PID]…]
         [--json]
  PATH must be a directory on a cgroup filesystem (v1 or v2).
  SIZE is bytes or 512K, 256M, 1G; PCT is a percentage of the group's limit (80%), or, when the
  group has none (v1: unlimited; v2: memory.max is \"max\"), of its nearest ancestor's limit.
  --debounce 500ms|2s reports a crossing only once usage stayed on its new side that long (a
  crossing back within it cancels the report); memory.events and PSI are not debounced.
  --psi \"some 150000 2000000\" adds a PSI trigger on memory.pressure (cgroup v2); alone, without
  --threshold, it also works on a v2 group without the memory controller.
  --exec runs `sh -c CMD` per event with COLOSCHED_THRESHOLD, COLOSCHED_THRESHOLD_BYTES,
  COLOSCHED_DIRECTION, COLOSCHED_USAGE, COLOSCHED_LIMIT, COLOSCHED_CGROUP, COLOSCHED_BACKEND set.
  --signal sends SIG (USR1, USR2, HUP, TERM, INT or a number) to each --pid, or without --pid to
  every process in the cgroup at the time of the event. --direction filters --exec/--signal
  (default both); `gone` (the cgroup was removed) is printed and ends the watch with exit 0.";

struct Args {
    cgroup: Option<PathBuf>,
    opts: WatchOptions,
    direction: Option<Direction>,
    exec: Option<String>,
    signal: Option<i32>,
    pids: Vec<i32>,
    json: bool,
    /// `-h` / `--help`: print the usage and exit 0.
    help: bool,
}

fn parse_signal(s: &str) -> Result<i32, String> {
    let name = s.trim_start_matches("SIG");
    let sig = match name {
        "USR1" => libc::SIGUSR1,
        "USR2" => libc::SIGUSR2,
        "HUP" => libc::SIGHUP,
        "TERM" => libc::SIGTERM,
        "INT" => libc::SIGINT,
        "KILL" => libc::SIGKILL,
        _ => name
            .parse()
            .ok()
            .filter(|n| (1..=64).contains(n))
            .ok_or_else(|| {
                format!("--signal: {s:?} is not USR1, USR2, HUP, TERM, INT, KILL or 1-64")
            })?,
    };
    Ok(sig)
}

fn parse_args(args: &[String]) -> Result<Args, String> {
    let mut a = Args {
        cgroup: None,
        opts: WatchOptions::default(),
        direction: None,
        exec: None,
        signal: None,
        pids: Vec::new(),
        json: false,
        help: false,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{flag}: needs a value"))
        };
        match flag.as_str() {
            "--cgroup" => a.cgroup = Some(value()?.into()),
            "--threshold" => {
                let v = value()?;
                let t = Threshold::parse(&v).map_err(|e| format!("--threshold {e}"))?;
                a.opts.thresholds.push(t);
            }
            "--memsw" => a.opts.memsw = true,
            "--backend" => {
                a.opts.backend =
                    BackendChoice::parse(&value()?).map_err(|e| format!("--backend: {e}"))?
            }
            "--period" => {
                let v = value()?;
                let ms: f64 = v
                    .parse()
                    .ok()
                    .filter(|x| (1.0..=60_000.0).contains(x))
                    .ok_or_else(|| {
                        format!("--period: {v:?} is not milliseconds from 1 to 60000")
                    })?;
                a.opts.poll_period = Duration::from_secs_f64(ms / 1000.0);
            }
            "--high" => {
                let v = value()?;
                a.opts.high = Some(Threshold::parse(&v).map_err(|e| format!("--high {e}"))?);
            }
            "--psi" => a.opts.psi = Some(value()?),
            "--debounce" => {
                let v = value()?;
                a.opts.debounce =
                    Some(crate::parse_duration(&v).map_err(|e| format!("--debounce: {e}"))?);
            }
            "--direction" => {
                a.direction = match value()?.as_str() {
                    "up" => Some(Direction::Up),
                    "down" => Some(Direction::Down),
                    "both" => None,
                    other => return Err(format!("--direction: {other:?} is not up, down or both")),
                }
            }
            "--exec" => a.exec = Some(value()?),
            "--signal" => a.signal = Some(parse_signal(&value()?)?),
            "--pid" => {
                let v = value()?;
                let pid = v
                    .parse()
                    .ok()
                    .filter(|p: &i32| *p > 0)
                    .ok_or_else(|| format!("--pid: {v:?} is not a process id"))?;
                a.pids.push(pid);
            }
            "--json" => a.json = true,
            "-h" | "--help" => {
                a.help = true;
                return Ok(a);
            }
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    if !a.pids.is_empty() && a.signal.is_none() {
        return Err("--pid: only with --signal".into());
    }
    if a.cgroup.is_none() {
        return Err(format!("--cgroup PATH is required\n{USAGE}"));
    }
    Ok(a)
}

/// Entry point: returns the exit code.
pub fn main(args: &[String]) -> i32 {
    let a = match parse_args(args) {
        Ok(a) if a.help => {
            println!("{USAGE}");
            return 0;
        }
        Ok(a) => a,
        Err(msg) => return fail(&msg, 2),
    };
    let cgroup = a.cgroup.clone().expect("checked");
    let watcher = match MemoryThresholdWatcher::open(&cgroup, &a.opts) {
        Ok(w) => w,
        Err(WatchError { msg, bad_input }) => return fail(&msg, if bad_input { 2 } else { 1 }),
    };
    log(&format!(
        "watching {}: {}",
        cgroup.display(),
        watcher.describe()
    ));
    match run(watcher, &a) {
        Ok(code) => code,
        Err(msg) => fail(&msg, 1),
    }
}

fn fail(msg: &str, code: i32) -> i32 {
    eprintln!("colosched memwatch: error: {msg}");
    code
}

fn log(msg: &str) {
    eprintln!("colosched memwatch: {msg}");
}

fn run(mut w: MemoryThresholdWatcher, a: &Args) -> Result<i32, String> {
    let signals = crate::signals::Signals::catch()?;
    let mut children: Vec<Child> = Vec::new();
    let result = loop {
        // The wait wakes at once on an event; the timeout only bounds how late a signal is seen.
        let events = match w.wait(Some(Duration::from_millis(200))) {
            Ok(e) => e,
            Err(e) => break Err(e),
        };
        for e in &events {
            print_event(e, a.json);
            let wanted = match (e.direction, a.direction) {
                (Direction::Gone, _) => false,
                (Direction::Up | Direction::Down, Some(d)) => e.direction == d,
                _ => true,
            };
            if wanted {
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
        let pids = if a.pids.is_empty() {
            cgroup_pids(&e.cgroup)
        } else {
            a.pids.clone()
        };
        for pid in pids {
            // SAFETY: kill has no pointer arguments.
            if unsafe { libc::kill(pid, sig) } != 0 {
                log(&format!(
                    "--signal {sig} to {pid}: {}",
                    std::io::Error::last_os_error()
                ));
            }
        }
    }
}

/// The processes in the cgroup now (`cgroup.procs`).
fn cgroup_pids(cgroup: &std::path::Path) -> Vec<i32> {
    std::fs::read_to_string(cgroup.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_size;

    fn args(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn bad_flags_name_the_flag() {
        let e = |v: &[&str]| parse_args(&args(v)).err().expect("should fail");
        assert!(e(&["--cgroup", "/x", "--threshold", "0"]).starts_with("--threshold"));
        assert!(e(&["--cgroup", "/x", "--threshold", "12Q"]).contains("suffix"));
        assert!(e(&["--cgroup", "/x", "--signal", "FOO"]).starts_with("--signal"));
        assert!(e(&["--cgroup", "/x", "--pid", "12"]).starts_with("--pid"));
        assert!(e(&["--cgroup", "/x", "--period", "0"]).starts_with("--period"));
        assert!(e(&["--cgroup", "/x", "--debounce", "5"]).starts_with("--debounce"));
        assert!(e(&["--cgroup", "/x", "--debounce", "0s"]).starts_with("--debounce"));
        assert!(e(&["--threshold", "1M"]).starts_with("--cgroup"));
        assert!(e(&["--cgroup"]).contains("needs a value"));
        let ok = parse_args(&args(&[
            "--cgroup",
            "/x",
            "--threshold",
            "1M",
            "--signal",
            "SIGUSR2",
            "--pid",
            "7",
        ]))
        .expect("ok");
        assert_eq!(ok.signal, Some(libc::SIGUSR2));
        assert_eq!(ok.pids, vec![7]);
    }

    #[test]
    fn size_flags_parse() {
        assert_eq!(parse_size("1.5K"), Ok(1536));
    }
}
