//! `colosched-agent host …` (and `colosched host …`): run, plan --once, restore, check-config.
//! Exit 2 on a bad command line or config (the message names the flag or key), 1 on a runtime
//! failure.

use std::path::{Path, PathBuf};

use clap::Subcommand;
use colosched_host::agent::config::HostConfig;
use colosched_host::agent::{run, HostAgent};

use crate::error::Error;

pub const EXAMPLES: &str = "examples:
  colosched-agent host check-config --config host.toml
  colosched-agent host plan --once --config host.toml --json
  colosched-agent host run --config host.toml --decision-log /var/log/colosched-host.jsonl
  colosched-agent host restore --state-file /run/colosched-host/state.json

docs/host-agent.md lists every key of host.toml.";

#[derive(Subcommand)]
pub enum HostCmd {
    /// Run until SIGTERM, SIGINT or SIGHUP, then put back everything changed.
    Run {
        /// The host agent's TOML config.
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
        /// Classify, plan and log; change nothing.
        #[arg(long)]
        dry_run: bool,
        #[arg(long, value_name = "F")]
        state_file: Option<PathBuf>,
        /// JSON lines, one per window ("-" = stdout).
        #[arg(long, value_name = "F")]
        decision_log: Option<PathBuf>,
        /// Serve Prometheus metrics: HOST:PORT, or PORT for 127.0.0.1.
        #[arg(long, value_name = "ADDR|PORT")]
        metrics: Option<String>,
    },
    /// Watch one window and print what the agent would do (VMs, kinds, reasons, pools,
    /// slices); changes nothing.
    Plan {
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
        /// One window (the only kind of plan).
        #[arg(long, required = true)]
        once: bool,
        /// One JSON object on one line.
        #[arg(long)]
        json: bool,
    },
    /// Put back what a host agent that was killed changed, from its state file.
    Restore {
        /// Take the state file from this config.
        #[arg(long, value_name = "FILE", required_unless_present = "state_file")]
        config: Option<PathBuf>,
        #[arg(long, value_name = "F")]
        state_file: Option<PathBuf>,
    },
    /// Check a config against this host and print the VMs, taps and vCPU threads found.
    CheckConfig {
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
    },
}

fn agent(path: &Path, c: HostConfig) -> Result<HostAgent, Error> {
    HostAgent::new(c).map_err(|e| Error::in_file(path, e))
}

pub fn dispatch(cmd: HostCmd) -> Result<i32, Error> {
    match cmd {
        HostCmd::CheckConfig { config } => {
            let mut c = HostConfig::load(&config)?;
            if let Some(log) = c.decision_log.take() {
                // Checked, not made: a check writes nothing.
                crate::config::check_log_file(&log)
                    .map_err(|e| Error::in_file(&config, Error::config("decision_log", e)))?;
            }
            let a = agent(&config, c)?;
            println!(
                "ok: CPUs {} for the pools; slices {} ms (NSVM) / {} ms (NNVM; 0 = left); default slice {} ms",
                crate::cpuset::CpuSet::from_iter(a.cpus.iter().copied()),
                a.cfg.nsvm_slice_ms,
                a.cfg.nnvm_slice_ms,
                a.groups.default_slice_ns as f64 / 1e6
            );
            println!("pools: {}", a.pools_text());
            if let Some(lv) = &a.cfg.libvirt {
                println!(
                    "libvirt {}: domains, taps, vCPU threads and RX rings asked through {}",
                    lv.uri, lv.virsh
                );
            }
            if let Some(source) = a.classes_source() {
                println!("scheduler ia-rotate; core classes: {source}");
            }
            for t in &a.vms {
                println!(
                    "VM {} (pid {}): {} vCPU thread(s) {:?}, taps {:?} (read from {}), weight {}",
                    t.vm.name,
                    t.vm.pid,
                    t.vm.vcpus.len(),
                    t.vm.vcpus.iter().map(|v| v.tid).collect::<Vec<_>>(),
                    t.vm.taps,
                    t.sys_root.display(),
                    t.weight
                );
            }
            for name in a.absent() {
                println!("VM {name}: not running now (watched once it starts)");
            }
            Ok(0)
        }
        HostCmd::Plan { config, json, .. } => {
            let mut c = HostConfig::load(&config)?;
            (c.dry_run, c.decision_log) = (true, None);
            let mut a = agent(&config, c)?;
            let w = run::plan_once(&mut a)?;
            if json {
                println!("{}", w.json);
            } else {
                println!("{}", serde_json::to_string_pretty(&w.json).expect("json"));
            }
            Ok(0)
        }
        HostCmd::Restore { config, state_file } => {
            let c = match &config {
                Some(p) => HostConfig::load(p)?,
                None => HostConfig::default(),
            };
            let path = state_file.unwrap_or(c.state_file.clone());
            Ok(run::restore(&path, &c.proc_root)?)
        }
        HostCmd::Run {
            config,
            dry_run,
            state_file,
            decision_log,
            metrics,
        } => {
            let mut c = HostConfig::load(&config)?;
            c.dry_run |= dry_run;
            if let Some(s) = state_file {
                c.state_file = s;
            }
            if decision_log.is_some() {
                c.decision_log = decision_log;
            }
            if let Some(m) = metrics {
                c.metrics_listen = Some(
                    crate::config::parse_listen(&m).map_err(|e| Error::config("--metrics", e))?,
                );
            }
            Ok(run::run(agent(&config, c)?)?)
        }
    }
}
