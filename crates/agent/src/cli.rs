//! The command line (clap): `run`, `plan --once`, `restore`, `check-config`, `memwatch`. Exit 2
//! on a bad command line or config (the message names the flag or key), 1 on a runtime failure;
//! `-h`/`--help` on every command prints its usage and exits 0.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::act::state::{under_lock, State, StateLock};
use crate::config::{parse_policy, Config};
use crate::daemon::Agent;
use crate::error::Error;

const POLICIES: &str =
    "policies: coarse, fine, fine:mem, fine:cpu, fine:mai, fine:none (docs/agent.md)

examples:
  colosched-agent check-config --config agent.toml
  colosched-agent plan --once --config agent.toml --json
  colosched-agent run --config agent.toml --be-cgroup /sys/fs/cgroup/cpuacct/be
  colosched-agent restore --state-file /run/colosched-agent/state.json";

const ERRORS_LOGGED_EVERY: Duration = Duration::from_secs(10);

#[derive(Parser)]
#[command(
    name = "colosched-agent",
    version,
    about = "Moves best-effort tasks off NUMA nodes (or pseudo-nodes) where latency-critical work \
             is pressured, and puts back everything it changed on exit.",
    after_help = POLICIES
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
    /// The least severe log lines shown (stderr).
    #[arg(long, global = true, value_enum, default_value_t = LogLevel::Info)]
    log_level: LogLevel,
    /// Log lines as text, or as JSON objects, one per line.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// The log's subscriber: stderr, the chosen level and format, colour only on a terminal. Set
/// for this call only (the Python CLI runs the agent inside its own process).
fn subscriber(cli: &Cli) -> Box<dyn tracing::Subscriber + Send + Sync> {
    use std::io::IsTerminal;
    let level = match cli.log_level {
        LogLevel::Error => tracing::Level::ERROR,
        LogLevel::Warn => tracing::Level::WARN,
        LogLevel::Info => tracing::Level::INFO,
        LogLevel::Debug => tracing::Level::DEBUG,
    };
    let fmt = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(level)
        .with_target(false)
        .with_ansi(std::io::stderr().is_terminal());
    match cli.log_format {
        LogFormat::Text => Box::new(fmt.finish()),
        LogFormat::Json => Box::new(fmt.json().finish()),
    }
}

/// The flags every command that reads a config shares.
#[derive(clap::Args)]
struct Common {
    /// The agent's TOML config (docs/agent.md lists every key).
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// A BE cgroup; given once or more, replaces the config's be.cgroups.
    #[arg(long = "be-cgroup", value_name = "PATH")]
    be_cgroups: Vec<PathBuf>,
    /// `kubernetes`: the processes of the BestEffort pods are BE too (be.kubernetes = true; the
    /// [kubernetes] section says where the kubelet's cgroups are and what Burstable is).
    #[arg(long = "be-from", value_name = "SOURCE", value_parser = ["kubernetes"])]
    be_from: Option<String>,
    /// Replaces the config's policy.
    #[arg(long, value_name = "P")]
    policy: Option<String>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run until SIGTERM, SIGINT or SIGHUP, then put back everything changed.
    Run {
        #[command(flatten)]
        common: Common,
        /// Seconds per cycle (0.05 to 3600).
        #[arg(long, value_name = "S")]
        interval: Option<f64>,
        /// Plan and log, change nothing.
        #[arg(long)]
        dry_run: bool,
        #[arg(long, value_name = "F")]
        state_file: Option<PathBuf>,
        /// JSON lines, one per cycle ("-" = stdout).
        #[arg(long, value_name = "F")]
        decision_log: Option<PathBuf>,
        /// Serve Prometheus metrics: HOST:PORT, or PORT for 127.0.0.1.
        #[arg(long, value_name = "ADDR|PORT")]
        metrics: Option<String>,
    },
    /// Sample one interval and print the decision it would take; changes nothing.
    Plan {
        #[command(flatten)]
        common: Common,
        /// One look (the only kind of plan).
        #[arg(long, required = true)]
        once: bool,
        /// One JSON object on one line.
        #[arg(long)]
        json: bool,
    },
    /// Put back what an agent that was killed changed, from its state file.
    Restore {
        /// Take the state file from this config.
        #[arg(long, value_name = "FILE", required_unless_present = "state_file")]
        config: Option<PathBuf>,
        #[arg(long, value_name = "F")]
        state_file: Option<PathBuf>,
    },
    /// Check a config against this machine and print what the agent would see.
    CheckConfig {
        #[command(flatten)]
        common: Common,
    },
    /// The host agent: spec 002's NSVM/NNVM pools and slices for QEMU/KVM VMs (docs/host-agent.md).
    #[command(subcommand, after_help = crate::host::cli::EXAMPLES)]
    Host(crate::host::cli::HostCmd),
    /// The memory-threshold watcher (its own flags: `memwatch --help`; docs/memwatch.md).
    #[command(disable_help_flag = true)]
    Memwatch {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

/// Runs the command line `args` (without the program name); returns the exit code.
pub fn main(args: Vec<String>) -> i32 {
    let cli = match Cli::try_parse_from(std::iter::once("colosched-agent".to_string()).chain(args))
    {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout with 0; errors to stderr with 2.
            let _ = e.print();
            return e.exit_code();
        }
    };
    let sub = subscriber(&cli);
    tracing::subscriber::with_default(sub, || match dispatch(cli.cmd) {
        Ok(code) => code,
        Err(e) => {
            tracing::error!("{e}");
            if e.is_usage() {
                2
            } else {
                1
            }
        }
    })
}

fn log(msg: &str) {
    tracing::info!("{msg}");
}

fn warn(msg: &str) {
    tracing::warn!("{msg}");
}

/// What `run` may override besides the common flags.
#[derive(Default)]
struct Overrides {
    interval: Option<f64>,
    dry_run: bool,
    state_file: Option<PathBuf>,
    decision_log: Option<PathBuf>,
    metrics: Option<String>,
}

/// The config file with the command line's overrides applied, validated.
fn load_config(a: &Common, o: &Overrides) -> Result<Config, Error> {
    let path = &a.config;
    let mut c = Config::load(path)?;
    if !a.be_cgroups.is_empty() {
        c.be_cgroups = a.be_cgroups.clone();
    }
    c.be_kubernetes |= a.be_from.is_some();
    if let Some(p) = &a.policy {
        c.policy = parse_policy(p).map_err(|e| Error::config("--policy", e))?;
    }
    if let Some(i) = o.interval {
        if !(0.05..=3600.0).contains(&i) {
            return Err(Error::config(
                "--interval",
                format!("{i} is not a number of seconds from 0.05 to 3600"),
            ));
        }
        c.interval_s = i;
    }
    if let Some(s) = &o.state_file {
        c.state_file = s.clone();
    }
    if let Some(d) = &o.decision_log {
        c.decision_log = Some(d.clone());
    }
    if let Some(m) = &o.metrics {
        c.metrics_listen =
            Some(crate::config::parse_listen(m).map_err(|e| Error::config("--metrics", e))?);
    }
    c.dry_run |= o.dry_run;
    c.validate().map_err(|e| Error::in_file(path, e))?;
    Ok(c)
}

/// The agent `c` describes, once checked against the machine; errors name the config file and
/// key (a config the system cannot honour, such as no NUMA nodes or no cpuset twin, is a config
/// error). `log`: open its decision log (`run`), else the log is checked but not made (`plan`,
/// `check-config` leave no file behind).
fn agent_for(a: &Common, mut c: Config, log: bool) -> Result<Agent, Error> {
    c.check_system().map_err(|e| Error::in_file(&a.config, e))?;
    if !log {
        c.decision_log = None;
    }
    Agent::new(c).map_err(|e| Error::in_file(&a.config, e))
}

fn dispatch(cmd: Cmd) -> Result<i32, Error> {
    match cmd {
        // Its own flags and exit codes (docs/memwatch.md).
        Cmd::Memwatch { args } => Ok(crate::memwatch::cli::main(&args)),
        Cmd::Host(cmd) => crate::host::cli::dispatch(cmd),
        Cmd::CheckConfig { common: a } => {
            let agent = agent_for(&a, load_config(&a, &Overrides::default())?, false)?;
            println!(
                "ok: {} node(s) from {} ({}), sensor {} ({}), threshold {}, policy {}",
                agent.topo.nodes.len(),
                agent.topo.source,
                agent
                    .topo
                    .nodes
                    .iter()
                    .map(|n| n.cpus.to_string())
                    .collect::<Vec<_>>()
                    .join(" | "),
                agent.sensor_kind().name(),
                agent.sensor_reason,
                agent.threshold,
                agent.cfg.policy
            );
            if let Some(pods) = agent.selector.pods_summary() {
                println!("{pods}");
            }
            Ok(0)
        }
        Cmd::Plan {
            common: a, json, ..
        } => {
            let mut agent = agent_for(&a, load_config(&a, &Overrides::default())?, false)?;
            let cycle = agent.plan_once()?;
            let out = agent.plan_json(&cycle);
            if json {
                println!("{out}");
            } else {
                println!("{}", serde_json::to_string_pretty(&out).expect("json"));
            }
            Ok(0)
        }
        Cmd::Restore { config, state_file } => {
            // The roots and the state file from the config if one is given; --state-file wins.
            let c = match config {
                Some(config) => {
                    let common = Common {
                        config,
                        be_cgroups: Vec::new(),
                        be_from: None,
                        policy: None,
                    };
                    load_config(&common, &Overrides::default())?
                }
                None => Config::default(),
            };
            let path = state_file.unwrap_or(c.state_file.clone());
            under_lock(&path, || {
                let state = State::load(&path)?;
                let offline = crate::sense::topology::offline_cpus(&c.sysfs_root);
                let procfs = colosched_sys::Procfs::new(&c.procfs_root);
                let r = state.restore(&procfs, &offline);
                r.settle(&path)?;
                println!("{}", r.summary());
                for msg in r.errors.last.values() {
                    warn(msg);
                }
                Ok(0)
            })
        }
        Cmd::Run {
            common: a,
            interval,
            dry_run,
            state_file,
            decision_log,
            metrics,
        } => {
            let o = Overrides {
                interval,
                dry_run,
                state_file,
                decision_log,
                metrics,
            };
            let agent = agent_for(&a, load_config(&a, &o)?, true)?;
            run(agent)
        }
    }
}

fn run(mut agent: Agent) -> Result<i32, Error> {
    let signals = crate::signals::Signals::catch()
        .map_err(|e| Error::Runtime(format!("signal pipe: {e}")))?;
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
        let bound = crate::metrics::serve(addr, agent.metrics.clone()).map_err(Error::Runtime)?;
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
                crate::report::node_ids(&agent.topo, &c.decision.targets),
                if agent.cfg.dry_run { " (dry run)" } else { "" }
            )),
            Ok(_) => {}
            Err(e @ Error::State { .. }) => break Err(e), // cannot record: stop changing things
            Err(e) => {
                // Logged at most once per ERRORS_LOGGED_EVERY, with how many failed meanwhile.
                failed += 1;
                if failed_logged
                    .is_none_or(|t: std::time::Instant| t.elapsed() >= ERRORS_LOGGED_EVERY)
                {
                    warn(&format!(
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
                warn(&line);
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
