//! Issue 26: no scenario value may hang, panic or silently wrap the simulator. A corpus of
//! malformed scenarios, each refused with an error naming its key; and every key at each end of
//! its documented range (`scenario::RANGES`), run under every scheduler. Each case runs in a
//! thread with a deadline, so a hang fails the test instead of stalling it.

use std::sync::mpsc::{channel, RecvTimeoutError};
use std::time::Duration;

use super::scenario::{Scenario, MAX_CORES, MAX_VCPUS, MAX_VMS, RANGES};
use crate::run::{run, RunError, RunResult, SCHEDULERS};

/// One VM of each kind on 4 cores of SF 1.5 and 2 of SF 1; every key in `RANGES` appears
/// (first) as `key = value` on a line of its own.
const BASE: &str = r#"name = "bounds"
horizon_ms = 30
migration_warmup_ms = 0.5
[diff]
window_ms = 20
hold_windows = 2
hold_max_windows = 8
ql_max = 256
ql_th = 150
overflow_freq = 0.2
overload_freq = 0.6
tx_mean_nonzero = 45
tx_stall_freq = 0.5
nsvm_slice_ms = 1
nnvm_slice_ms = 30
credit_nsvm_slice_ms = 5
credit_nnvm_slice_ms = 30
nonempty_pool_floor = true
[[cores]]
count = 4
speed = 1.5
[[cores]]
count=2
[[vms]]
name = "ser"
vcpus = 2
weight = 256
slice_ms = 1
work_cv = 0.3
repeat = true
workload = "serial"
work_ms = 5
mem_intensity = 0.5
[[vms]]
name = "par"
vcpus = 2
repeat = true
workload = "parallel"
phases = 3
phase_ms = 2
spin_us = 20
[[vms]]
name = "udp"
vcpus = 1
workload = "network"
protocol = "udp"
rate_mbit_s = 100
delay_ms = 1
cap_mbit_s = 160
cpu_us_per_packet = 5
ring_slots = 64
ping_interval_ms = 10
ping_jitter = 0.5
[[vms]]
name = "tcp"
vcpus = 1
repeat = true
workload = "network"
protocol = "tcp"
delay_ms = 1
cap_mbit_s = 160
cpu_us_per_packet = 5
cpu_work_ms = 3
"#;

/// `BASE` with the first `key = …` line set to `key = value`.
fn with(key: &str, value: &str) -> String {
    with_in(BASE, key, value)
}

fn with_in(text: &str, key: &str, value: &str) -> String {
    let prefix = format!("{key} = ");
    let mut done = false;
    let lines: Vec<String> = (text.lines())
        .map(|line| {
            if !done && line.starts_with(&prefix) {
                done = true;
                format!("{key} = {value}")
            } else {
                line.to_string()
            }
        })
        .collect();
    assert!(done, "no {key} in the scenario");
    lines.join("\n") + "\n"
}

/// `f` in a thread; its answer, or a failure if it panics or takes more than `secs`.
fn within<T: Send + 'static>(secs: u64, what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(x) => x,
        Err(RecvTimeoutError::Timeout) => panic!("{what}: no answer within {secs} s (a hang)"),
        Err(RecvTimeoutError::Disconnected) => panic!("{what}: panicked"),
    }
}

/// Parse `text`; if it parses, run it under every scheduler (so a file that should have been
/// refused and hangs is caught by the deadline). The parse error, if any.
fn refusal(what: &str, text: String) -> Option<String> {
    within(20, what, move || match Scenario::parse(&text) {
        Err(e) => Some(e.to_string()),
        Ok(s) => {
            for name in SCHEDULERS {
                let _ = run(&s, name, 1);
            }
            None
        }
    })
}

fn many_vms(n: usize, vcpus: usize) -> String {
    let vm = format!("[[vms]]\nvcpus = {vcpus}\nworkload = \"serial\"\nwork_ms = 5\n");
    format!("horizon_ms = 10\n[[cores]]\ncount = 4\n{}", vm.repeat(n))
}

/// The malformed scenarios: (what, text, the start of the error).
fn corpus() -> Vec<(String, String, String)> {
    let mut cases: Vec<(String, String, String)> = Vec::new();
    let mut edit = |key: &str, value: &str, error: &str| {
        cases.push((
            format!("{key} = {value}"),
            with(key, value),
            error.to_string(),
        ));
    };
    // The cases issue 26 names: 8 hangs, 1 panic, 2 silently wrong outputs, 1 time overflow.
    edit("horizon_ms", "1e300", "horizon_ms: must be from");
    edit("work_ms", "1e300", "vms[0].work_ms: must be from");
    edit("speed", "1e300", "cores[0].speed: must be from");
    edit("work_cv", "1e300", "vms[0].work_cv: must be from");
    edit(
        "migration_warmup_ms",
        "1e300",
        "migration_warmup_ms: must be from",
    );
    edit("spin_us", "1e300", "vms[1].spin_us: must be from");
    edit("speed", "1e-300", "cores[0].speed: must be from");
    edit("delay_ms", "1e300", "vms[2].delay_ms: must be from");
    edit("rate_mbit_s", "1e300", "vms[2].rate_mbit_s: must be from");
    // Below every floor and above every ceiling.
    for (key, value, error) in [
        ("horizon_ms", "0", "horizon_ms: must be from"),
        ("horizon_ms", "-1", "horizon_ms: must be from"),
        (
            "horizon_ms",
            "nan",
            "horizon_ms: expected a number, got NaN",
        ),
        (
            "horizon_ms",
            "inf",
            "horizon_ms: expected a number, got inf",
        ),
        (
            "horizon_ms",
            "\"long\"",
            "TOML parse error at line 2, column 14: invalid type: string \"long\", expected f64",
        ),
        (
            "migration_warmup_ms",
            "-1",
            "migration_warmup_ms: must be from",
        ),
        ("count", "0", "cores[0].count: must be a whole number"),
        ("count", "2.5", "cores[0].count: must be a whole number"),
        ("count", "1025", "cores[0].count: must be a whole number"),
        ("speed", "0", "cores[0].speed: must be from"),
        ("vcpus", "0", "vms[0].vcpus: must be a whole number"),
        ("vcpus", "1e300", "vms[0].vcpus: must be a whole number"),
        ("weight", "0", "vms[0].weight: must be from"),
        ("weight", "1e300", "vms[0].weight: must be from"),
        ("slice_ms", "1e-300", "vms[0].slice_ms: must be from"),
        ("slice_ms", "1e300", "vms[0].slice_ms: must be from"),
        ("work_cv", "-1", "vms[0].work_cv: must be from"),
        ("work_ms", "1e-300", "vms[0].work_ms: must be from"),
        ("work_ms", "0", "vms[0].work_ms: must be from"),
        ("mem_intensity", "2", "vms[0].mem_intensity: must be from"),
        ("phases", "0", "vms[1].phases: must be a whole number"),
        ("phases", "1e300", "vms[1].phases: must be a whole number"),
        ("phase_ms", "1e300", "vms[1].phase_ms: must be from"),
        ("spin_us", "-5", "vms[1].spin_us: must be from"),
        ("rate_mbit_s", "1e-300", "vms[2].rate_mbit_s: must be from"),
        ("delay_ms", "-1", "vms[2].delay_ms: must be from"),
        ("cap_mbit_s", "0", "vms[2].cap_mbit_s: must be from"),
        ("cap_mbit_s", "1e300", "vms[2].cap_mbit_s: must be from"),
        (
            "cpu_us_per_packet",
            "1e-300",
            "vms[2].cpu_us_per_packet: must be from",
        ),
        (
            "cpu_us_per_packet",
            "1e300",
            "vms[2].cpu_us_per_packet: must be from",
        ),
        (
            "ring_slots",
            "0",
            "vms[2].ring_slots: must be a whole number",
        ),
        (
            "ring_slots",
            "1e300",
            "vms[2].ring_slots: must be a whole number",
        ),
        (
            "ping_interval_ms",
            "1e-300",
            "vms[2].ping_interval_ms: must be from",
        ),
        (
            "ping_interval_ms",
            "1e300",
            "vms[2].ping_interval_ms: must be from",
        ),
        ("cpu_work_ms", "1e300", "vms[3].cpu_work_ms: must be from"),
        ("cpu_work_ms", "1e-300", "vms[3].cpu_work_ms: must be from"),
    ] {
        edit(key, value, error);
    }
    // Spec 002's parameters (issue 28): each refused naming its key.
    for (key, value, error) in [
        (
            "window_ms",
            "0",
            "diff.window_ms: must be a whole number from 10 to 60000, got 0",
        ),
        (
            "window_ms",
            "25",
            "diff.window_ms: 25 is not a multiple of the monitor's 10 ms",
        ),
        (
            "hold_windows",
            "-1",
            "diff.hold_windows: must be a whole number from 0",
        ),
        (
            "hold_windows",
            "2.5",
            "diff.hold_windows: must be a whole number from 0",
        ),
        (
            "hold_max_windows",
            "1e300",
            "diff.hold_max_windows: must be a whole number",
        ),
        (
            "ql_max",
            "0",
            "diff.ql_max: must be a whole number from 1 to 65536, got 0",
        ),
        (
            "ql_th",
            "70000",
            "diff.ql_th: must be a whole number from 1 to 65536",
        ),
        (
            "overflow_freq",
            "1.5",
            "diff.overflow_freq: must be from 0 to 1, got 1.5",
        ),
        (
            "overload_freq",
            "-0.1",
            "diff.overload_freq: must be from 0 to 1",
        ),
        (
            "tx_mean_nonzero",
            "-1",
            "diff.tx_mean_nonzero: must be from 0 to 65536",
        ),
        (
            "tx_stall_freq",
            "nan",
            "diff.tx_stall_freq: expected a number, got NaN",
        ),
        (
            "nsvm_slice_ms",
            "0.05",
            "diff.nsvm_slice_ms: must be 0 or from 0.1 to 100",
        ),
        (
            "nnvm_slice_ms",
            "101",
            "diff.nnvm_slice_ms: must be 0 or from 0.1 to 100",
        ),
        (
            "credit_nsvm_slice_ms",
            "0.5",
            "diff.credit_nsvm_slice_ms: must be from 1 to 1000",
        ),
        (
            "credit_nnvm_slice_ms",
            "0",
            "diff.credit_nnvm_slice_ms: must be from 1 to 1000",
        ),
        (
            "nonempty_pool_floor",
            "1",
            "TOML parse error at line 18, column 23: invalid type: integer `1`, expected a boolean",
        ),
    ] {
        edit(key, value, error);
    }
    // The panic: a million phases of no work ("credit: kicks did not settle").
    cases.push((
        "phases = 1e6, phase_ms = 1e-300".into(),
        with_in(&with("phases", "1000000"), "phase_ms", "1e-300"),
        "vms[1].phase_ms: must be from".into(),
    ));
    // 10^6 cores and a 10^6-vCPU VM.
    cases.push((
        "10^6 cores, a 10^6-vCPU VM".into(),
        with_in(&with("count", "1000000"), "vcpus", "1000000"),
        "cores[0].count: must be a whole number".into(),
    ));
    cases.push((
        "net_quantum_ms = 1e300".into(),
        BASE.replacen(
            "horizon_ms = 30",
            "horizon_ms = 30\nnet_quantum_ms = 1e300",
            1,
        ),
        "net_quantum_ms: must be whole microseconds".into(),
    ));
    // The totals: cores, VMs, vCPUs.
    cases.push((
        "two groups of 1000 cores".into(),
        with("count", "1000").replace("count=2", "count = 1000"),
        format!("cores: more than {MAX_CORES} cores"),
    ));
    cases.push((
        "too many VMs".into(),
        many_vms(MAX_VMS + 1, 1),
        format!("vms: more than {MAX_VMS} VMs"),
    ));
    cases.push((
        "too many vCPUs".into(),
        many_vms(MAX_VCPUS / 1024 + 1, 1024),
        format!("vms: more than {MAX_VCPUS} vCPUs"),
    ));
    // Each key within its range, together too costly: the event budget names the horizon.
    cases.push((
        "a long horizon of 1 µs phases".into(),
        with_in(&with("horizon_ms", "1000000"), "phase_ms", "0.001"),
        "horizon_ms: 1000000 ms of this scenario calls for about".into(),
    ));
    cases.push((
        "a long horizon of 1 µs network quanta".into(),
        BASE.replacen(
            "horizon_ms = 30",
            "horizon_ms = 1000000\nnet_quantum_ms = 0.001",
            1,
        ),
        "horizon_ms: 1000000 ms of this scenario calls for about".into(),
    ));
    cases
}

#[test]
fn every_malformed_scenario_is_refused_naming_its_key_in_time() {
    let cases = corpus();
    assert!(cases.len() >= 40, "{} cases", cases.len());
    for (what, text, error) in cases {
        let e = refusal(&what, text).unwrap_or_else(|| panic!("{what}: accepted"));
        assert!(e.starts_with(&error), "{what}: {e}");
    }
}

/// Every scheduler's run of `text`, or the error of those that refuse it (ia's one core per
/// vCPU), within a deadline.
fn run_all(what: &str, text: String) -> Vec<Result<RunResult, RunError>> {
    within(60, what, move || {
        let s = Scenario::parse(&text).expect("in range");
        SCHEDULERS.iter().map(|name| run(&s, name, 1)).collect()
    })
}

#[test]
fn every_key_at_either_end_of_its_range_runs_under_every_scheduler_in_time() {
    assert!(Scenario::parse(BASE).is_ok());
    for &(key, lo, hi) in RANGES {
        for value in [lo, hi] {
            let what = format!("{key} = {value}");
            let text = with(key, &format!("{value:?}"));
            if key == "count" && value == hi {
                // With the second group, more cores than a host may have.
                let e = Scenario::parse(&text).unwrap_err().to_string();
                assert!(e.starts_with("cores: more than"), "{what}: {e}");
                continue;
            }
            // Keys that must agree with another key of BASE's [diff] at this end.
            let at_odds = match (key, value == hi) {
                ("hold_windows", true) => Some("diff.hold_max_windows: 8 is less than"),
                ("hold_max_windows", false) => Some("diff.hold_max_windows: 0 is less than"),
                ("ql_th", true) => Some("diff.ql_th: 65536 is above diff.ql_max (256)"),
                ("ql_max", false) => Some("diff.ql_th: 150 is above diff.ql_max (1)"),
                _ => None,
            };
            if let Some(error) = at_odds {
                let e = Scenario::parse(&text).unwrap_err().to_string();
                assert!(e.starts_with(error), "{what}: {e}");
                continue;
            }
            if key == "horizon_ms" && value == hi {
                // Allowed, and within the event budget: only checked, not run (minutes).
                let s = Scenario::parse(&text).unwrap();
                assert!(s.events_estimate() <= super::scenario::MAX_EVENTS);
                continue;
            }
            for r in run_all(&what, text) {
                match r {
                    Ok(r) => {
                        assert!(r.end_ms <= 30.0 + 1e-9, "{what}: {}", r.end_ms);
                        for vm in &r.vms {
                            // No VM runs longer than its vCPUs had time, nor negatively.
                            let limit = vm.vcpus as f64 * r.end_ms + 1e-6;
                            assert!((0.0..=limit).contains(&vm.run_ms), "{what}: {vm:?}");
                            assert!(vm.link_drops < 1 << 40, "{what}: {vm:?}");
                        }
                    }
                    Err(e) => assert!(
                        e.to_string().contains("one core per vCPU")
                            || e.to_string().contains("puts each vCPU"),
                        "{what}: {e}"
                    ),
                }
            }
        }
    }
}
