//! The command line: `run`, `plan --once`, `restore`, `check-config`. Exit 2 on a bad command
//! line or config (the message names the flag or key), 1 on a runtime failure.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::config::{parse_policy, Config};
use crate::daemon::Agent;
use crate::state::{State, StateLock};

const USAGE: &str = "usage:
  colosched-agent run          --config FILE [--be-cgroup PATH]... [--policy P] [--interval S]
                               [--dry-run] [--state-file F] [--decision-log F] [--metrics ADDR|PORT]
  colosched-agent plan --once  --config FILE [--be-cgroup PATH]... [--policy P] [--json]
  colosched-agent restore      (--config FILE | --state-file F)
  colosched-agent check-config --config FILE [--be-cgroup PATH]...
  colosched-agent memwatch     --cgroup PATH --threshold SIZE|PCT... (memwatch --help)
policies: coarse, fine, fine:mem, fine:cpu, fine:mai, fine:none (docs/agent.md)";

const ERRORS_LOGGED_EVERY: Duration = Duration::from_secs(10);

enum Failure {
    Usage(String),
    Runtime(String),
}

pub fn main(args: Vec<String>) -> i32 {
    match dispatch(args) {
        Ok(code) => code,
        Err(Failure::Usage(msg)) => {
            eprintln!("colosched-agent: error: {msg}");
            2
        }
        Err(Failure::Runtime(msg)) => {
            eprintln!("colosched-agent: error: {msg}");
            1
        }
    }
}

fn log(msg: &str) {
    eprintln!("colosched-agent: {msg}");
}

#[derive(Default)]
struct Args {
    config: Option<PathBuf>,
    be_cgroups: Vec<PathBuf>,
    policy: Option<String>,
    interval: Option<String>,
    state_file: Option<PathBuf>,
    decision_log: Option<PathBuf>,
    metrics: Option<String>,
    dry_run: bool,
    once: bool,
    json: bool,
    /// `-h` / `--help`: print the usage and exit 0.
    help: bool,
}

fn parse_args(args: &[String]) -> Result<Args, Failure> {
    let mut a = Args::default();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .ok_or_else(|| Failure::Usage(format!("{flag}: needs a value")))
        };
        match flag.as_str() {
            "--config" => a.config = Some(value()?.into()),
            "--be-cgroup" => a.be_cgroups.push(value()?.into()),
            "--policy" => a.policy = Some(value()?),
            "--interval" => a.interval = Some(value()?),
            "--state-file" => a.state_file = Some(value()?.into()),
            "--decision-log" => a.decision_log = Some(value()?.into()),
            "--metrics" => a.metrics = Some(value()?),
            "--dry-run" => a.dry_run = true,
            "--once" => a.once = true,
            "--json" => a.json = true,
            "-h" | "--help" => {
                a.help = true;
                return Ok(a);
            }
            other => {
                return Err(Failure::Usage(format!(
                    "unknown argument {other:?}\n{USAGE}"
                )))
            }
        }
    }
    Ok(a)
}

/// A config the system cannot honour (no NUMA nodes, no cpuset twin, a psi cgroup short) is a
/// config error: named with the config file.
fn in_config(a: &Args, e: String) -> Failure {
    match &a.config {
        Some(p) => Failure::Usage(format!("{}: {e}", p.display())),
        None => Failure::Usage(e),
    }
}

/// The config file with the command line's overrides applied, validated.
fn load_config(a: &Args) -> Result<Config, Failure> {
    let path = a
        .config
        .as_ref()
        .ok_or_else(|| Failure::Usage(format!("--config FILE is required\n{USAGE}")))?;
    let mut c = Config::load(path).map_err(Failure::Usage)?;
    if !a.be_cgroups.is_empty() {
        c.be_cgroups = a.be_cgroups.clone();
    }
    if let Some(p) = &a.policy {
        c.policy = parse_policy(p).map_err(|e| Failure::Usage(format!("--policy: {e}")))?;
    }
    if let Some(i) = &a.interval {
        c.interval_s = i
            .parse()
            .ok()
            .filter(|x: &f64| (0.05..=3600.0).contains(x))
            .ok_or_else(|| {
                Failure::Usage(format!(
                    "--interval: {i:?} is not a number of seconds from 0.05 to 3600"
                ))
            })?;
    }
    if let Some(s) = &a.state_file {
        c.state_file = s.clone();
    }
    if let Some(d) = &a.decision_log {
        c.decision_log = Some(d.clone());
    }
    if let Some(m) = &a.metrics {
        c.metrics_listen = Some(
            crate::config::parse_listen(m)
                .map_err(|e| Failure::Usage(format!("--metrics: {e}")))?,
        );
    }
    c.dry_run |= a.dry_run;
    c.validate()
        .map_err(|e| Failure::Usage(format!("{}: {e}", path.display())))?;
    Ok(c)
}

fn dispatch(args: Vec<String>) -> Result<i32, Failure> {
    let Some((cmd, rest)) = args.split_first() else {
        return Err(Failure::Usage(USAGE.into()));
    };
    if cmd == "memwatch" {
        // Its own flags and exit codes (docs/memwatch.md).
        return Ok(crate::memwatch::cli::main(rest));
    }
    if matches!(cmd.as_str(), "-h" | "--help" | "help") {
        println!("{USAGE}");
        return Ok(0);
    }
    let a = parse_args(rest)?;
    if a.help {
        println!("{USAGE}");
        return Ok(0);
    }
    match cmd.as_str() {
        "check-config" => {
            let agent = agent_for(&a, load_config(&a)?)?;
            println!(
                "ok: {} node(s) from {} ({}), sensor {} ({}), threshold {}, policy {}",
                agent.topo.nodes.len(),
                agent.topo.source,
                agent
                    .topo
                    .nodes
                    .iter()
                    .map(|n| crate::topology::format_cpulist(&n.cpus))
                    .collect::<Vec<_>>()
                    .join(" | "),
                agent.sensor_kind().name(),
                agent.sensor_reason,
                agent.threshold,
                agent.cfg.policy
            );
            Ok(0)
        }
        "plan" => {
            if !a.once {
                return Err(Failure::Usage(
                    "plan: only `plan --once` exists (it changes nothing)".into(),
                ));
            }
            let mut c = load_config(&a)?;
            c.decision_log = None;
            let mut agent = agent_for(&a, c)?;
            let cycle = agent.plan_once().map_err(Failure::Runtime)?;
            let out = agent.plan_json(&cycle);
            if a.json {
                println!("{out}");
            } else {
                println!("{}", serde_json::to_string_pretty(&out).expect("json"));
            }
            Ok(0)
        }
        "restore" => {
            let path = match (&a.state_file, &a.config) {
                (Some(p), _) => p.clone(),
                (None, Some(_)) => load_config(&a)?.state_file,
                (None, None) => {
                    return Err(Failure::Usage(
                        "restore: give --state-file F or --config FILE".into(),
                    ))
                }
            };
            // A live agent holds the lock: its state is its own to restore (SIGTERM it).
            let _lock = StateLock::acquire(&path).map_err(Failure::Runtime)?;
            if !path.exists() {
                println!("nothing to restore: {} does not exist", path.display());
                return Ok(0);
            }
            let state = State::load(&path).map_err(Failure::Runtime)?;
            let offline = crate::topology::offline_cpus(std::path::Path::new("/sys"));
            let r = state.restore(&crate::procfs::Procfs::new("/proc"), &offline);
            r.settle(&path).map_err(Failure::Runtime)?;
            println!("{}", r.summary());
            for msg in r.errors.last.values() {
                log(msg);
            }
            Ok(0)
        }
        "run" => {
            let agent = agent_for(&a, load_config(&a)?)?;
            run(agent).map_err(Failure::Runtime)
        }
        other => Err(Failure::Usage(format!(
            "unknown command {other:?}\n{USAGE}"
        ))),
    }
}

/// The agent for a config checked against this machine; errors name the config file and key.
fn agent_for(a: &Args, c: Config) -> Result<Agent, Failure> {
    c.check_system().map_err(|e| in_config(a, e))?;
    Agent::new(c).map_err(|e| in_config(a, e))
}

fn run(mut agent: Agent) -> Result<i32, String> {
    let signals = crate::signals::Signals::catch()?;
    // One agent per state file, until this one has put everything back.
    let _lock = StateLock::acquire(&agent.cfg.state_file)?;
    let c = &agent.cfg;
    log(&format!(
        "starting: {} node(s) from {}; sensor {} ({}{}); threshold {}, hysteresis {}; policy {}; interval {} s, {} sample(s) per interval; actuator {:?}{}",
        agent.topo.nodes.len(),
        agent.topo.source,
        agent.sensor_kind().name(),
        agent.sensor_reason,
        if agent.sensor_kind() == crate::config::SensorKind::Busy { format!("; BE time from {}", agent.be_time_source()) } else { String::new() },
        agent.threshold,
        c.hysteresis,
        c.policy,
        c.interval_s,
        agent.samples_per_interval(),
        c.mode,
        if c.dry_run { "; DRY RUN: nothing will be changed" } else { "" }
    ));
    if let Some(msg) = agent.take_over_state()? {
        log(&msg);
    }
    if let Some(addr) = agent.cfg.metrics_listen {
        let bound = crate::metrics::serve(addr, agent.metrics.clone())?;
        log(&format!("metrics at http://{bound}/metrics"));
    }
    if agent.cfg.all_os_activities {
        let n = agent.pin_all_to_first_node()?;
        log(&format!(
            "all-OS mode: {n} thread(s) and file(s) pinned to node {} at start",
            agent.topo.nodes[0].id
        ));
    }
    // One cycle per sample: the sensor keeps the last interval's samples and judges that window.
    let interval =
        Duration::from_secs_f64(agent.cfg.interval_s / agent.samples_per_interval() as f64);
    let mut next = std::time::Instant::now();
    // Errors are counted every cycle and logged at most every ERRORS_LOGGED_EVERY (a churning
    // BE job can make every cycle meet a few vanished threads).
    let (mut errors_seen, mut errors_logged) = (BTreeMap::new(), None::<std::time::Instant>);
    let (mut failed, mut failed_logged) = (0u64, None::<std::time::Instant>);
    let result = loop {
        match agent.step(true) {
            Ok(c) if !c.decision.moves.is_empty() => log(&format!(
                "cycle: loads [{}] → moved {} task(s) to node(s) {:?}{}",
                c.readings
                    .iter()
                    .map(|r| format!("{:.2}", r.load))
                    .collect::<Vec<_>>()
                    .join(", "),
                c.decision.moves.len(),
                agent.node_ids(&c.decision.targets),
                if agent.cfg.dry_run { " (dry run)" } else { "" }
            )),
            Ok(_) => {}
            Err(e) if e.starts_with("state file") => break Err(e), // cannot record: stop changing things
            Err(e) => {
                // Logged at most once per ERRORS_LOGGED_EVERY, with how many failed meanwhile.
                failed += 1;
                if failed_logged
                    .is_none_or(|t: std::time::Instant| t.elapsed() >= ERRORS_LOGGED_EVERY)
                {
                    log(&format!(
                        "cycle failed ({failed} since the last such line): {e}"
                    ));
                    (failed, failed_logged) = (0, Some(std::time::Instant::now()));
                }
            }
        }
        if errors_logged.is_none_or(|t| t.elapsed() >= ERRORS_LOGGED_EVERY) {
            let lines = agent.actuator.errors.report_new(&mut errors_seen);
            if !lines.is_empty() {
                errors_logged = Some(std::time::Instant::now());
            }
            for line in lines {
                log(&line);
            }
        }
        next += interval;
        let wait = next.saturating_duration_since(std::time::Instant::now());
        if let Some(sig) = signals.wait(wait) {
            log(&format!("signal {sig}: restoring and exiting"));
            break Ok(0);
        }
    };
    let r = agent.actuator.restore_all(&agent.offline_cpus())?;
    log(&r.summary());
    result
}
