//! `colosched migrate vms --plan PLAN.json --config CONFIG.toml [--execute] [--json]`: the
//! live-migration executor's command line (clap). A dry run is the default. Exit 0 when every
//! migration completed (or the dry run found nothing wrong), 1 when one failed or timed out (the
//! rest were not started), 2 on bad input (the message names the file and key; nothing was
//! started), 128 + N after signal N (130 SIGINT, 143 SIGTERM: running migrations cancelled).

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand};
use colosched_sys::signals::Signals;

use colosched_sys::config::{self, ConfigError, ReadError};

use crate::real::migrate::{
    check, clean, execute, parse_config, parse_plan, plan_transient, Bad, Config, Move, Report,
};

const AFTER: &str = "examples:
  colosched plan vms --state cluster.toml --json > plan.json
  colosched migrate vms --plan plan.json --config examples/migrate.toml
  colosched migrate vms --plan plan.json --config examples/migrate.toml --execute --json

exit: 0 done (or dry run fine); 1 a migration failed or timed out (the source runs on, the rest
not started); 2 bad plan or config (nothing started); 130/143 interrupted by SIGINT/SIGTERM
(running migrations cancelled, nothing left behind). docs/vm-placement.md";

#[derive(Parser)]
#[command(
    name = "colosched migrate",
    about = "Carries out a VM placement plan with QEMU live migration over QMP, or through \
             libvirt (spec 003).",
    after_help = AFTER
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Migrate the VMs of a plan (`colosched plan vms --json`), wave by wave.
    #[command(after_help = AFTER)]
    Vms(VmsArgs),
}

#[derive(Args)]
struct VmsArgs {
    /// The plan: JSON of `colosched plan vms --json` (its `moves`, by wave).
    #[arg(long, value_name = "PLAN.json")]
    plan: PathBuf,
    /// The hosts' link, bandwidth cap, timeout, run_dir, the [[host]]s and each [[vm]]'s QMP
    /// socket (examples/migrate.toml), or the hosts' libvirt URIs and the VMs' domains
    /// (examples/migrate-libvirt.toml).
    #[arg(long, value_name = "CONFIG.toml")]
    config: PathBuf,
    /// Check the plan, the config and the VMs and print what would be done (the default).
    #[arg(long, conflicts_with = "execute")]
    dry_run: bool,
    /// Migrate for real.
    #[arg(long)]
    execute: bool,
    /// One JSON object per migration, then {"summary": …}, one per line.
    #[arg(long)]
    json: bool,
    /// Run a plan whose `transient_violations` say some cache will hold more than its room
    /// during a wave (refused otherwise).
    #[arg(long)]
    allow_transient: bool,
}

/// Bad input, found before anything started (exit 2): a file that cannot be read, or what is
/// wrong in the config or the plan, named with its file.
#[derive(Debug, thiserror::Error)]
enum InputError {
    #[error(transparent)]
    Read(#[from] ReadError),
    /// `file:line: key: problem`, the line that of a value a check refused.
    #[error("{}{}: {source}", file.display(), source.line().map(|n| format!(":{n}")).unwrap_or_default())]
    In { file: PathBuf, source: Bad },
}

impl InputError {
    /// `source`, named with the file it is in.
    fn of(a: &VmsArgs, source: Bad) -> InputError {
        let file = match source {
            Bad::Config(_) => &a.config,
            Bad::Plan(_) | Bad::PlanJson(_) => &a.plan,
        };
        InputError::In {
            file: file.clone(),
            source,
        }
    }
}

/// The config and the plan's waves, read and checked against each other (not yet against the
/// running VMs: `check`).
fn inputs(a: &VmsArgs) -> Result<(Config, Vec<Vec<Move>>), InputError> {
    let of = |e: Bad| InputError::of(a, e);
    let text = config::read(&a.config)?;
    let base = a.config.parent().unwrap_or(Path::new("."));
    let c = parse_config(&text, &std::path::absolute(base).unwrap_or_default())
        .map_err(|e| of(e.into()))?;
    let text = config::read(&a.plan)?;
    let waves = parse_plan(&text).map_err(of)?;
    let transient = plan_transient(&text).map_err(of)?;
    if !transient.is_empty() && !a.allow_transient {
        return Err(of(Bad::Plan(ConfigError::key(
            "transient_violations",
            format!(
                "{} (no order of the moves avoids it; --allow-transient to run it anyway)",
                transient.join("; ")
            ),
        ))));
    }
    Ok((c, waves))
}

fn row(r: &Report) -> String {
    let n = |v: Option<u64>| v.map_or("-".into(), |v| v.to_string());
    format!(
        "{:<4} {:<12} {:>6} -> {:<6} {:<11} {:>9} {:>9} {:>6} {:>8} {:>7} {:>7.0}{}",
        r.wave,
        r.vm,
        r.from,
        r.to,
        r.status,
        n(r.total_time_ms),
        n(r.downtime_ms),
        n(r.setup_time_ms),
        r.bytes
            .map_or("-".into(), |b| format!("{:.1}", b as f64 / 1e6)),
        r.mbps.map_or("-".into(), |m| format!("{m:.0}")),
        r.max_bandwidth as f64 * 8.0 / 1e6,
        r.error
            .as_ref()
            .map_or(String::new(), |e| format!("\n     error: {e}")),
    )
}

fn print(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn vms(a: &VmsArgs) -> i32 {
    let bad = |e: InputError| {
        eprintln!("colosched migrate vms: error: {e}");
        2
    };
    let (c, waves) = match inputs(a) {
        Ok(x) => x,
        Err(e) => return bad(e),
    };
    // Caught before the checks, so a signal during them stops the run before it starts.
    let signals = if a.execute {
        match Signals::catch() {
            Ok(s) => Some(s),
            Err(e) => {
                eprintln!("colosched migrate vms: error: signal pipe: {e}");
                return 1;
            }
        }
    } else {
        None
    };
    let (planned, leftovers) = match check(&c, &waves) {
        Ok(p) => p,
        Err(e) => return bad(InputError::of(a, e)),
    };
    let cap = format!(
        "max-bandwidth {} B/s = {} × {} Mbit/s link",
        c.max_bandwidth(),
        c.bw_cap,
        c.link_mbps
    );
    let summary = |reports: &[Report], code: i32, dry: bool| {
        let count = |s: &str| reports.iter().filter(|r| r.status == s).count();
        serde_json::json!({"summary": {
            "dry_run": dry, "migrations": reports.len(), "waves": waves.len(),
            "completed": count("completed"), "failed": count("failed") + count("timed-out"),
            "interrupted": count("interrupted"), "not_started": count("not-started"),
            "max_bandwidth": c.max_bandwidth(), "exit": code,
        }})
    };
    let Some(signals) = signals else {
        for l in &leftovers {
            eprintln!(
                "colosched migrate vms: --execute would remove a destination of {} on {} left by \
                 an earlier run: {}{}",
                l.vm,
                l.host,
                l.pid.map_or(String::new(), |p| format!(
                    "kill QEMU pid {p} (it never received the VM), "
                )),
                l.files
                    .iter()
                    .map(|f| f.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        if a.json {
            for r in &planned {
                print(&serde_json::to_string(r).expect("serializes"));
            }
            print(&summary(&planned, 0, true).to_string());
        } else {
            print(&format!(
                "dry run: {} migration(s) in {} wave(s), one at a time, {cap}; nothing started \
                 (--execute to migrate)",
                planned.len(),
                waves.len()
            ));
            for r in &planned {
                print(&format!(
                    "wave {}: {} {} -> {}  uri {}  max-bandwidth {} B/s",
                    r.wave,
                    r.vm,
                    r.from,
                    r.to,
                    r.uri.as_deref().unwrap_or("-"),
                    r.max_bandwidth
                ));
            }
        }
        return 0;
    };
    if let Some(sig) = signals.pending() {
        return 128 + sig;
    }
    for l in &leftovers {
        match clean(&c, l) {
            Ok(said) => eprintln!("colosched migrate vms: {said}"),
            Err(e) => {
                eprintln!("colosched migrate vms: error: {e}; nothing migrated");
                return 1;
            }
        }
    }
    if !a.json {
        print(&format!(
            "migrating {} VM(s) in {} wave(s), one at a time, {cap}",
            planned.len(),
            waves.len()
        ));
        print(&format!(
            "{:<4} {:<12} {:>6}    {:<6} {:<11} {:>9} {:>9} {:>6} {:>8} {:>7} {:>7}",
            "wave",
            "vm",
            "from",
            "to",
            "status",
            "total ms",
            "down ms",
            "setup",
            "MB sent",
            "Mbit/s",
            "cap"
        ));
    }
    let mut reports = Vec::new();
    let code = execute(&c, &waves, &signals, &mut |r| {
        if a.json {
            print(&serde_json::to_string(r).expect("serializes"));
        } else {
            print(&row(r));
        }
        reports.push(r.clone());
    });
    if a.json {
        print(&summary(&reports, code, false).to_string());
    } else if code != 0 {
        eprintln!(
            "colosched migrate vms: stopped (exit {code}): the failed VM runs on its source; \
             the moves after it were not started"
        );
    }
    code
}

/// The command line after `colosched migrate` (`vms --plan … --config …`); returns the exit code.
pub fn main(argv: Vec<String>) -> i32 {
    let cli = match Cli::try_parse_from(std::iter::once("colosched migrate".into()).chain(argv)) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    match cli.cmd {
        Cmd::Vms(a) => vms(&a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    #[test]
    fn help_and_bad_flags() {
        assert_eq!(main(vec!["--help".into()]), 0);
        assert_eq!(main(vec!["vms".into(), "--help".into()]), 0);
        assert_eq!(main(vec!["vms".into()]), 2, "--plan and --config required");
        let a = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        assert_eq!(main(a("vms --plan p --config c --execute --dry-run")), 2);
    }

    #[test]
    fn bad_files_exit_2_before_anything() {
        let d = dir();
        let cfg = d.path().join("m.toml");
        let plan = d.path().join("p.json");
        std::fs::write(
            &cfg,
            "[migrate]\nlink_mbps = 100\nrun_dir = \"run\"\n[[host]]\nid = \"h0\"\naddress = \"127.0.0.1\"\n\
             [[host]]\nid = \"h1\"\naddress = \"127.0.0.1\"\n[[vm]]\nid = \"a\"\nhost = \"h0\"\nqmp = \"a.qmp\"\n",
        )
        .unwrap();
        std::fs::write(
            &plan,
            r#"{"moves": [[{"vm": "a", "from": "h0", "to": "h1"}]]}"#,
        )
        .unwrap();
        let args = |x: &[&str]| -> Vec<String> {
            let mut v = vec![
                "vms".to_string(),
                "--plan".into(),
                plan.display().to_string(),
                "--config".into(),
                cfg.display().to_string(),
            ];
            v.extend(x.iter().map(|s| s.to_string()));
            v
        };
        // No QEMU behind a.qmp: the dry run and --execute both stop before starting anything.
        assert_eq!(main(args(&[])), 2);
        assert_eq!(main(args(&["--execute"])), 2);
        assert!(!d.path().join("run").exists(), "run_dir not even created");
        std::fs::write(
            &plan,
            r#"{"moves": [[{"vm": "b", "from": "h0", "to": "h1"}]]}"#,
        )
        .unwrap();
        assert_eq!(main(args(&["--execute"])), 2);
        // A plan whose waves overflow a cache is refused unless allowed (then it fails later,
        // on the missing QEMU, still before anything started).
        std::fs::write(
            &plan,
            r#"{"moves": [[{"vm": "a", "from": "h0", "to": "h1"}]], "transient_violations":
                [{"wave": 0, "host": "h1", "mb": 900, "capacity": 600}]}"#,
        )
        .unwrap();
        assert_eq!(main(args(&["--execute"])), 2);
        assert_eq!(main(args(&["--execute", "--allow-transient"])), 2);
        assert_eq!(
            plan_transient(&std::fs::read_to_string(&plan).unwrap()).unwrap(),
            ["wave 1: h1 holds 900 MB of cache slices on 600 MB"]
        );
        // An empty plan is fine: nothing to do.
        std::fs::write(&plan, r#"{"moves": []}"#).unwrap();
        assert_eq!(main(args(&["--execute", "--json"])), 0);
    }
}
