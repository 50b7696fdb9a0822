//! The host agent as a process: `run` holds the state file's lock, takes over what a killed
//! agent left, serves `/metrics` and ticks until SIGTERM, SIGINT or SIGHUP, then puts back
//! everything it changed; `plan_once` watches one window and changes nothing; `restore` puts
//! back what a killed agent changed, from its state file.

use std::path::Path;
use std::time::{Duration, Instant};

use colosched_sys::lock::{under_lock, StateLock};
use colosched_sys::signals::Signals;

use super::apply::summary;
use super::error::{Error, Result};
use super::{HostAgent, Window};
use crate::act::state::HostState;

/// A window that fails is logged at most this often (with how many failed since).
const ERRORS_LOGGED_EVERY: Duration = Duration::from_secs(10);

/// Ticks until one window ends (in a dry run: `plan --once`).
pub fn plan_once(a: &mut HostAgent) -> Result<Window> {
    let tick = Duration::from_millis(a.cfg.interval_ms as u64);
    let mut next = Instant::now();
    loop {
        next += tick;
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        if let Some(w) = a.tick()? {
            return Ok(w);
        }
    }
}

/// Puts back what the agent that wrote the state file `path` changed (`proc_root`: where its
/// threads are looked for), holding its lock; prints the summary. 0 when all was put back.
pub fn restore(path: &Path, proc_root: &Path) -> Result<i32> {
    under_lock(path, || {
        let state = HostState::load(path).map_err(|e| Error::state(path, e))?;
        let r = state.restore(proc_root);
        for e in &r.errors {
            tracing::warn!("{e}");
        }
        std::fs::remove_file(path).map_err(|e| Error::state(path, e))?;
        println!("{}", summary(&r));
        Ok(if r.errors.is_empty() { 0 } else { 1 })
    })
}

/// Runs until a signal, then puts everything back. 0 on a signal; a state file that cannot be
/// written stops it (the error).
pub fn run(mut a: HostAgent) -> Result<i32> {
    let signals = Signals::catch().map_err(|e| Error::Runtime(format!("signal pipe: {e}")))?;
    let _lock = StateLock::acquire(&a.cfg.state_file)?;
    if let Some(msg) = a.take_over_state()? {
        tracing::info!("{msg}");
    }
    tracing::info!(
        "starting: {} VM(s) [{}], CPUs {}; T_m {} ms, T_s {} ms, hold {}–{} window(s); slices {} / {} ms{}",
        a.vms.len(),
        a.vms.iter().map(|t| t.vm.name.as_str()).collect::<Vec<_>>().join(", "),
        colosched_core::cpuset::CpuSet::from_iter(a.cpus.iter().copied()),
        a.cfg.interval_ms,
        a.cfg.window_ms,
        a.cfg.hold_windows,
        a.cfg.hold_max_windows,
        a.cfg.nsvm_slice_ms,
        a.cfg.nnvm_slice_ms,
        if a.cfg.dry_run { "; DRY RUN: nothing will be changed" } else { "" }
    );
    tracing::info!("pools: {}", a.pools_text());
    for name in a.absent() {
        tracing::info!("VM {name} is not running: watched once it starts");
    }
    if let Some(addr) = a.cfg.metrics_listen {
        let bound =
            colosched_sys::metrics::serve(addr, a.metrics.clone()).map_err(Error::Runtime)?;
        tracing::info!("metrics at http://{bound}/metrics");
    }
    let tick = Duration::from_millis(a.cfg.interval_ms as u64);
    let mut next = Instant::now();
    let mut built = (Vec::new(), 0);
    let (mut failed, mut failed_logged) = (0u64, None::<Instant>);
    let result = loop {
        match a.tick() {
            Ok(Some(w)) if w.built != built => {
                tracing::info!(
                    "window {}: NSVM pool {} CPU(s) for [{}]; {} thread(s) changed{}",
                    a.windows,
                    w.built.1,
                    w.built.0.join(", "),
                    w.changes,
                    if a.cfg.dry_run { " (dry run)" } else { "" }
                );
                built = w.built;
            }
            Ok(_) => {}
            Err(e @ Error::State { .. }) => break Err(e), // cannot record: stop changing things
            Err(e) => {
                failed += 1;
                if failed_logged.is_none_or(|t: Instant| t.elapsed() >= ERRORS_LOGGED_EVERY) {
                    tracing::warn!("window failed ({failed} since the last such line): {e}");
                    (failed, failed_logged) = (0, Some(Instant::now()));
                }
            }
        }
        next += tick;
        let now = Instant::now();
        if next < now {
            next = now; // a late tick is not made up for by a burst of early ones
        }
        if let Some(sig) = signals.wait(next - now) {
            tracing::info!("signal {sig}: restoring and exiting");
            break Ok(0);
        }
    };
    let r = a.release()?;
    tracing::info!("{}", summary(&r));
    result
}
