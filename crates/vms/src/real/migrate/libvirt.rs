//! The executor under libvirt: a config whose VMs are libvirt domains (`[[vm]] domain`, each
//! `[[host]]` with its `libvirt` URI) has each move made by libvirt's own live migration, with the
//! same dry-run default, waves, bandwidth cap, timeout and cancel as over QMP:
//!
//! `virsh -c SRC migrate --live --bandwidth MIB [--persistent --undefinesource] DOMAIN DST
//! --migrateuri tcp://ADDRESS`: libvirt starts the destination QEMU from the domain's XML on the
//! destination host (no command line to rewrite) and moves the RAM over `tcp://ADDRESS`, the
//! destination host's `address` (libvirt picks the port there). The cap is `bw_cap × link_mbps`
//! in whole MiB/s (virsh's unit), at least 1. A persistent domain takes its definition along
//! (`--persistent --undefinesource`); a transient one stays transient.
//!
//! The `virsh migrate` client runs as our child in a session of its own (a ^C to the executor
//! does not reach it) and dies with us (PR_SET_PDEATHSIG): libvirt aborts a migration whose
//! client went away, so a SIGKILLed executor leaves the domain running on its source and no
//! destination behind; there is nothing of ours to clean up (no files, no processes). On a
//! timeout, SIGINT or SIGTERM the job is aborted (`domjobabort` on the source) and the client
//! waited for; the source runs on. Afterwards the destination's `domjobinfo --completed` gives
//! the report's time, downtime, setup time and bytes, and the domain must run there.

use std::io::Read;
use std::net::IpAddr;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use colosched_qemu::libvirt::{find_program, Virsh, VirshError};
use colosched_sys::signals::Signals;

use super::{bad, check_plan, Bad, Config, Move, Report, Stop, POLL, SETTLE_TIMEOUT};

/// One virsh command (libvirt answers in milliseconds).
const VIRSH_TIMEOUT: Duration = Duration::from_secs(10);

/// Why libvirt could not be asked.
#[derive(Debug, thiserror::Error)]
pub enum LibvirtError {
    #[error("virsh not found (Debian: libvirt-clients)")]
    NoVirsh,
    #[error(transparent)]
    Virsh(#[from] VirshError),
    #[error("cannot run virsh migrate: {0}")]
    Migrate(std::io::Error),
}

fn virsh() -> Result<PathBuf, LibvirtError> {
    find_program("virsh").ok_or(LibvirtError::NoVirsh)
}

fn session(uri: &str) -> Result<Virsh, LibvirtError> {
    Ok(Virsh::start(&virsh()?, uri, VIRSH_TIMEOUT)?)
}

/// virsh's `--bandwidth`: the cap in whole MiB/s, at least 1.
pub fn bandwidth_mib(c: &Config) -> u64 {
    (c.max_bandwidth() >> 20).max(1)
}

/// Where the destination QEMU listens: the host's address, the port left to libvirt.
pub fn migrate_uri(addr: IpAddr) -> String {
    match addr {
        IpAddr::V4(a) => format!("tcp://{a}"),
        IpAddr::V6(a) => format!("tcp://[{a}]"),
    }
}

/// A domain's state on a libvirt (`running`, `paused`, `shut off`, …); `None` when it has none
/// of that name.
fn state(v: &mut Virsh, domain: &str) -> Result<Option<String>, VirshError> {
    match v.run(&["domstate", domain]) {
        Ok(out) => Ok(Some(out.trim().to_string())),
        Err(e) if e.said("failed to get domain") => Ok(None),
        Err(e) => Err(e),
    }
}

fn uri_of<'a>(c: &'a Config, host: &str) -> &'a str {
    let h = c.host(host).expect("check_plan found it");
    h.libvirt.as_deref().expect("parse_config checked")
}

/// The dry run: the plan fits the config; every host's libvirt answers; each VM's domain runs on
/// the libvirt of the host the config puts it on, and no destination runs a domain of its name.
pub fn check(c: &Config, waves: &[Vec<Move>]) -> Result<Vec<Report>, Bad> {
    check_plan(c, waves)?;
    let mut sessions: Vec<Option<Virsh>> = Vec::new();
    for (i, h) in c.hosts.iter().enumerate() {
        let used = waves
            .iter()
            .flatten()
            .any(|m| m.from == h.id || m.to == h.id);
        let s = match (used, h.libvirt.as_deref()) {
            (true, Some(uri)) => {
                Some(session(uri).map_err(|e| bad(format!("host[{i}].libvirt"), e))?)
            }
            _ => None,
        };
        sessions.push(s);
    }
    let at_host = |id: &str| c.hosts.iter().position(|h| h.id == id).expect("checked");
    let mut out = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for (w, wave) in waves.iter().enumerate() {
        for m in wave {
            let (i, vm) = c.vm(&m.vm).expect("check_plan found it");
            let domain = vm.domain.as_deref().expect("a libvirt config");
            let at = format!("vm[{i}] ({}).domain", vm.id);
            if !seen.contains(&vm.id.as_str()) {
                seen.push(&vm.id);
                let hi = at_host(&m.from);
                let s = sessions[hi].as_mut().expect("a used host");
                match state(s, domain).map_err(|e| bad(format!("host[{hi}].libvirt"), e))? {
                    Some(st) if st == "running" => {}
                    Some(st) => {
                        return Err(bad(
                            &at,
                            format!(
                                "{domain:?} is {st:?} on {}, not running: only a running VM is \
                                 migrated",
                                m.from
                            ),
                        ))
                    }
                    None => {
                        return Err(bad(
                            &at,
                            format!(
                                "{} has no domain {domain:?} (moved by an earlier run?)",
                                m.from
                            ),
                        ))
                    }
                }
            }
            let hi = at_host(&m.to);
            let s = sessions[hi].as_mut().expect("a used host");
            let there = state(s, domain).map_err(|e| bad(format!("host[{hi}].libvirt"), e))?;
            if there.as_deref() == Some("running") {
                return Err(bad(
                    &at,
                    format!(
                        "{domain:?} already runs on {} (moved by an earlier run?)",
                        m.to
                    ),
                ));
            }
            let mut r = Report::new(w + 1, m, c);
            r.status = "planned".into();
            r.uri = Some(migrate_uri(c.host(&m.to).expect("checked").address));
            r.max_bandwidth = bandwidth_mib(c) << 20;
            out.push(r);
        }
    }
    Ok(out)
}

/// One migration through libvirt; the report gets its figures.
pub fn migrate_one(c: &Config, r: &mut Report, m: &Move, signals: &Signals) -> Result<(), Stop> {
    let (_, vm) = c.vm(&m.vm).expect("checked");
    let domain = vm.domain.as_deref().expect("a libvirt config");
    let (src_uri, dst_uri) = (uri_of(c, &m.from), uri_of(c, &m.to));
    let mut src = session(src_uri)?;
    let info = src.run(&["dominfo", domain])?;
    let persistent = info
        .lines()
        .any(|l| l.starts_with("Persistent:") && l.trim_end().ends_with("yes"));
    let uri = migrate_uri(c.host(&m.to).expect("checked").address);
    let mib = bandwidth_mib(c);
    (r.uri, r.max_bandwidth) = (Some(uri.clone()), mib << 20);
    let mut cmd = Command::new(virsh()?);
    cmd.args([
        "-q",
        "-c",
        src_uri,
        "migrate",
        "--live",
        "--bandwidth",
        &mib.to_string(),
    ]);
    if persistent {
        cmd.args(["--persistent", "--undefinesource"]);
    }
    cmd.args([domain, dst_uri, "--migrateuri", &uri])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: setsid(2) and prctl(2) are async-signal-safe. Our ^C never reaches the client (we
    // abort the job ourselves), and the client dies with us (then libvirt aborts the job).
    unsafe {
        cmd.pre_exec(|| {
            rustix::process::setsid()?;
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
            Ok(())
        });
    }
    let started = Instant::now();
    let mut child = cmd.spawn().map_err(LibvirtError::Migrate)?;
    let stopped = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) => {}
            Err(e) => break Err(Stop::Failed(format!("waiting for virsh migrate: {e}"))),
        }
        if started.elapsed() > c.timeout {
            break Err(Stop::TimedOut(format!(
                "not completed within {:?}: aborted (domjobabort), {domain} runs on {}",
                c.timeout, m.from
            )));
        }
        if let Some(sig) = signals.wait(POLL) {
            break Err(Stop::Signal(sig));
        }
    };
    let status = match stopped {
        Ok(s) => s,
        Err(stop) => {
            let _ = src.run(&["domjobabort", domain]);
            let deadline = Instant::now() + SETTLE_TIMEOUT;
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(POLL);
            }
            let _ = child.kill();
            let _ = child.wait();
            return Err(stop);
        }
    };
    let mut said = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut said);
    }
    if !status.success() {
        let why: Vec<&str> = (said.lines())
            .filter_map(|l| l.strip_prefix("error: "))
            .collect();
        let runs = match state(&mut src, domain) {
            Ok(Some(st)) => format!("; {domain} is {st} on {}", m.from),
            _ => String::new(),
        };
        return Err(Stop::Failed(format!(
            "virsh migrate ({status}): {}{runs}",
            why.join("; ")
        )));
    }
    let mut dst = session(dst_uri)?;
    match state(&mut dst, domain)? {
        Some(st) if st == "running" => {}
        st => {
            return Err(Stop::Failed(format!(
                "libvirt said the migration completed, but {domain} is {st:?} on {}",
                m.to
            )))
        }
    }
    if let Ok(info) = dst.run(&["domjobinfo", domain, "--completed"]) {
        fill(r, &info);
    }
    if r.total_time_ms.is_none() {
        r.total_time_ms = Some(started.elapsed().as_millis() as u64);
    }
    Ok(())
}

/// The report's figures from `virsh domjobinfo --completed`.
fn fill(r: &mut Report, info: &str) {
    for line in info.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let mut words = value.split_whitespace();
        let (Some(n), unit) = (
            words.next().and_then(|w| w.parse::<f64>().ok()),
            words.next(),
        ) else {
            continue;
        };
        let bytes = |n: f64| {
            let scale = match unit {
                Some("KiB") => 1u64 << 10,
                Some("MiB") => 1 << 20,
                Some("GiB") => 1 << 30,
                _ => 1,
            };
            (n * scale as f64).round() as u64
        };
        match key.trim() {
            "Time elapsed" => r.total_time_ms = Some(n as u64),
            "Total downtime" => r.downtime_ms = Some(n as u64),
            "Setup time" => r.setup_time_ms = Some(n as u64),
            "Data processed" => r.bytes = Some(bytes(n)),
            _ => {}
        }
    }
    if let (Some(b), Some(t)) = (r.bytes, r.total_time_ms.filter(|&t| t > 0)) {
        r.mbps = Some(b as f64 * 8.0 / (t as f64 / 1e3) / 1e6);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domjobinfo_gives_the_reports_figures() {
        // `virsh domjobinfo mig0 --completed` on the destination, libvirt 9.0 (this machine).
        let info = "Job type:         Completed   \nOperation:        Incoming migration\n\
            Time elapsed:     2712         ms\nTime elapsed w/o network: 2707         ms\n\
            Data processed:   96.898 MiB\nData remaining:   0.000 B\n\
            Total downtime:   37           ms\nSetup time:       1            ms\n";
        let m = Move {
            vm: "a".into(),
            from: "h0".into(),
            to: "h1".into(),
        };
        let c = super::super::parse_config(
            "[migrate]\nlink_mbps = 1000\n[[host]]\nid = \"h0\"\naddress = \"127.0.0.1\"\nlibvirt = \"x\"\n\
             [[host]]\nid = \"h1\"\naddress = \"::1\"\nlibvirt = \"y\"\n[[vm]]\nid = \"a\"\nhost = \"h0\"\ndomain = \"a\"\n",
            std::path::Path::new("/"),
        )
        .unwrap();
        let mut r = Report::new(1, &m, &c);
        fill(&mut r, info);
        assert_eq!(
            (r.total_time_ms, r.downtime_ms, r.setup_time_ms),
            (Some(2712), Some(37), Some(1))
        );
        assert_eq!(r.bytes, Some(101_604_917)); // 96.898 MiB
        assert!((r.mbps.unwrap() - 299.7).abs() < 0.1, "{:?}", r.mbps);
        // 0.4 × 1000 Mbit/s = 50 MB/s = 47.68 MiB/s → 47.
        assert_eq!(bandwidth_mib(&c), 47);
        assert_eq!(migrate_uri(c.hosts[1].address), "tcp://[::1]");
    }
}
