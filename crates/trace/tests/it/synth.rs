//! The synthetic trace generator: official format, per-task validity, parts partitioning time,
//! calibration against `synth_params.json`, determinism, argument errors, and ingest through the
//! crate's own reader.
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use colosched_trace::synth::{format_g4, write_trace, SynthOptions, SynthStats, PARAMS_JSON};
use colosched_trace::{load_runs, IngestOptions, TraceError, TraceRoot};
use flate2::read::GzDecoder;

const WINDOW_START_US: u64 = 600_000_000;

fn opts(machines: u32, days: f64, seed: u64) -> SynthOptions {
    SynthOptions {
        machines,
        days,
        parts: None,
        seed,
    }
}

fn write(out: &Path, o: &SynthOptions) -> SynthStats {
    write_trace(out, o, &|_, _| {}).unwrap()
}

fn params() -> serde_json::Value {
    serde_json::from_str(PARAMS_JSON).unwrap()
}

/// One parsed `task_events` row.
#[derive(Clone, Debug)]
struct Row {
    ts: u64,
    job: u64,
    index: u32,
    machine: Option<u64>,
    kind: u8,
    priority: u8,
}

fn part_files(root: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join("task_events"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
}

fn gunzip(path: &Path) -> String {
    let mut text = String::new();
    GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_string(&mut text)
        .unwrap_or_else(|e| panic!("{}: not valid gzip: {e}", path.display()));
    text
}

fn opt<T: std::str::FromStr>(s: &str, what: &str, line: &str) -> Option<T> {
    if s.is_empty() {
        None
    } else {
        Some(
            s.parse()
                .unwrap_or_else(|_| panic!("{what} {s:?} is not a number in {line:?}")),
        )
    }
}

/// Parses a part, checking each row against the 13-column schema.
fn parse(text: &str) -> Vec<Row> {
    text.lines()
        .map(|line| {
            let f: Vec<&str> = line.split(',').collect();
            assert_eq!(f.len(), 13, "{line:?}");
            let missing: Option<u8> = opt(f[1], "missing info", line);
            assert!(missing.is_none() || missing == Some(2), "{line:?}");
            let kind: u8 = f[5].parse().unwrap();
            assert!(kind <= 8, "{line:?}");
            assert_eq!(f[6].len(), 44, "user hash in {line:?}");
            let class: u8 = f[7].parse().unwrap();
            assert!(class <= 3, "{line:?}");
            let priority: u8 = f[8].parse().unwrap();
            assert!(priority <= 11, "{line:?}");
            let cpu: Option<f64> = opt(f[9], "cpu", line);
            for (i, what) in [(9, "cpu"), (10, "memory"), (11, "disk")] {
                let v: Option<f64> = opt(f[i], what, line);
                assert!(v.is_none_or(|v| (0.0..=1.0).contains(&v)), "{line:?}");
                // Printed like C's "%.4g", as the real trace prints them.
                assert!(
                    v.is_none_or(|v| format_g4(v) == f[i]),
                    "{what} not %.4g in {line:?}"
                );
            }
            // Only "missing info" rows leave the requests empty.
            assert_eq!(missing.is_some(), cpu.is_none(), "{line:?}");
            let different: Option<u8> = opt(f[12], "different machines", line);
            assert!(different.is_none_or(|d| d <= 1), "{line:?}");
            Row {
                ts: f[0].parse().unwrap(),
                job: f[2].parse().unwrap(),
                index: f[3].parse().unwrap(),
                machine: opt(f[4], "machine", line),
                kind,
                priority,
            }
        })
        .collect()
}

/// Window time in seconds of a trace timestamp (0 stays 0).
fn seconds(ts: u64) -> f64 {
    ts.saturating_sub(WINDOW_START_US) as f64 / 1e6
}

fn band(priority: u8) -> usize {
    match priority {
        0..=1 => 0,
        2..=8 => 1,
        _ => 2,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A run as seen in the written rows.
struct SeenRun {
    submit: f64,
    schedule: Option<f64>,
    end: Option<(f64, u8)>,
    priority: u8,
}

/// Walks every task's events in time order and checks the life-cycle rules; returns its runs.
fn runs_of(rows: &[Row]) -> Vec<SeenRun> {
    #[derive(PartialEq)]
    enum State {
        Closed,
        Pending,
        Running,
    }
    let mut tasks: HashMap<(u64, u32), (State, Option<usize>, u64)> = HashMap::new();
    let mut runs: Vec<SeenRun> = Vec::new();
    for r in rows {
        let (state, run, last_ts) =
            tasks
                .entry((r.job, r.index))
                .or_insert((State::Closed, None, 0));
        assert!(
            r.ts >= *last_ts,
            "task {}/{} goes back in time",
            r.job,
            r.index
        );
        *last_ts = r.ts;
        if r.ts == 0 {
            assert!(
                r.kind <= 1,
                "only SUBMIT and SCHEDULE happen before the window"
            );
        }
        let t = seconds(r.ts);
        match r.kind {
            0 => {
                assert!(
                    *state == State::Closed,
                    "SUBMIT of {}/{} while a run is open",
                    r.job,
                    r.index
                );
                assert!(
                    r.ts == 0 || r.machine.is_none(),
                    "SUBMIT after t = 0 names a machine"
                );
                *state = State::Pending;
                *run = Some(runs.len());
                runs.push(SeenRun {
                    submit: t,
                    schedule: None,
                    end: None,
                    priority: r.priority,
                });
            }
            1 => {
                assert!(
                    *state == State::Pending,
                    "SCHEDULE of {}/{} without a pending run",
                    r.job,
                    r.index
                );
                assert!(r.machine.is_some(), "SCHEDULE without a machine");
                *state = State::Running;
                runs[run.unwrap()].schedule = Some(t);
            }
            2..=6 => {
                assert!(
                    *state != State::Closed,
                    "end of {}/{} without an open run",
                    r.job,
                    r.index
                );
                if *state == State::Running {
                    assert!(
                        r.machine.is_some(),
                        "end of a running task without a machine"
                    );
                }
                *state = State::Closed;
                runs[run.unwrap()].end = Some((t, r.kind));
            }
            7 => assert!(
                *state == State::Pending,
                "UPDATE_PENDING of a task not pending"
            ),
            8 => assert!(
                *state == State::Running,
                "UPDATE_RUNNING of a task not running"
            ),
            _ => unreachable!(),
        }
    }
    runs
}

/// The main check, on one trace big enough for the calibration tolerances.
#[test]
fn synth_trace_is_valid_and_calibrated() {
    let dir = tempfile::tempdir().unwrap();
    let (machines, days) = (500u32, 1.0);
    let calls = AtomicU32::new(0);
    let stats = write_trace(dir.path(), &opts(machines, days, 7), &|done, total| {
        assert!(done <= total);
        calls.fetch_add(1, Ordering::Relaxed);
    })
    .unwrap();
    let end_us = (days * 86_400e6) as u64;
    assert_eq!(stats.parts, 17, "500 × 1/29 parts, rounded");
    assert_eq!(calls.load(Ordering::Relaxed), stats.parts + 1);
    let readme = std::fs::read_to_string(dir.path().join("README.md")).unwrap();
    assert!(
        readme.contains("synthetic") && readme.contains("--seed 7"),
        "{readme}"
    );
    assert!(readme.contains("J. Wilkes and C. Reiss, Google, CC-BY 4.0"));

    // Format, and parts partitioning time: sorted within a part, each in its own time slice.
    let files = part_files(dir.path());
    assert_eq!(files.len(), stats.parts as usize);
    let mut rows = Vec::new();
    let mut bytes = 0;
    for (p, file) in files.iter().enumerate() {
        let name = file.file_name().unwrap().to_str().unwrap();
        assert_eq!(name, format!("part-{p:05}-of-{:05}.csv.gz", stats.parts));
        bytes += std::fs::metadata(file).unwrap().len();
        let part = parse(&gunzip(file));
        assert!(!part.is_empty(), "{name} is empty");
        let (lo, hi) = (p as u64 * end_us / 17, (p as u64 + 1) * end_us / 17);
        for w in part.windows(2) {
            assert!(w[0].ts <= w[1].ts, "{name} is not sorted by time");
        }
        for r in &part {
            let t = r.ts.saturating_sub(WINDOW_START_US);
            assert!(
                t >= lo && t < hi || r.ts == 0 && p == 0,
                "{name}: ts {} out of its slice",
                r.ts
            );
        }
        rows.extend(part);
    }
    assert_eq!(rows.len() as u64, stats.rows);
    assert_eq!(bytes, stats.bytes);
    assert!(
        rows[0].ts == 0,
        "tasks running at the window start appear at t = 0 in part 0"
    );

    // Per-task life cycles; tasks spanning parts are the norm for long runs.
    let runs = runs_of(&rows);
    let tasks: std::collections::HashSet<(u64, u32)> =
        rows.iter().map(|r| (r.job, r.index)).collect();
    assert_eq!(tasks.len() as u64, stats.tasks);
    let part_of = |t: f64| ((t * 1e6) as u64 * 17 / end_us).min(16);
    let spanning = runs
        .iter()
        .filter(|r| r.end.is_some_and(|(e, _)| part_of(e) > part_of(r.submit)))
        .count();
    assert!(
        spanning > 100,
        "only {spanning} runs end in a later part than they start"
    );
    let open = runs.iter().filter(|r| r.end.is_none()).count();
    assert!(open > 1000, "runs outliving the window stay open ({open})");

    // Calibration. Tolerances cover the sampling noise of a 500-machine day (heavy-tailed job
    // sizes make the SUBMIT rate the noisiest).
    let p = params();
    let hours = days * 24.0;
    let submits = runs.iter().filter(|r| r.submit > 0.0).count() as f64;
    let rate = submits / (f64::from(machines) * hours);
    let want = p["arrivals"]["submits_per_machine_hour"].as_f64().unwrap();
    println!("SUBMITs per machine-hour: {rate:.3} (real {want:.3})");
    assert!(
        (rate / want - 1.0).abs() < 0.25,
        "SUBMIT rate {rate:.3} vs {want:.3}"
    );

    let initial = runs.iter().filter(|r| r.submit == 0.0).count() as f64 / f64::from(machines);
    let want = p["initial"]["running_per_machine"].as_f64().unwrap()
        + p["initial"]["pending_per_machine"].as_f64().unwrap();
    assert!(
        (initial - want).abs() < 0.01,
        "t = 0 population {initial:.3} per machine vs {want:.3}"
    );

    // Median FINISH duration of middle-band runs (short: not censored by a one-day window).
    let durations: Vec<f64> = runs
        .iter()
        .filter(|r| r.submit > 0.0 && band(r.priority) == 1)
        .filter_map(|r| match (r.schedule, r.end) {
            (Some(s), Some((e, 4))) => Some(e - s),
            _ => None,
        })
        .collect();
    let q = &p["runs"][1]["duration_s"]["4"];
    let probs: Vec<f64> = q["p"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    let want = q["v"][probs.iter().position(|&x| x == 0.5).unwrap()]
        .as_f64()
        .unwrap();
    let got = median(durations);
    println!("median middle-band FINISH duration: {got:.0} s (real {want:.0} s)");
    assert!(
        (got / want - 1.0).abs() < 0.15,
        "median duration {got:.0} s vs {want:.0} s"
    );

    // Priority-band mix of the SUBMITs after t = 0 and of the tasks running at t = 0.
    for (key, after) in [("submits_after_t0", true), ("initial_running_tasks", false)] {
        let counts: Vec<f64> = p["priorities"][key]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        let total: f64 = counts.iter().sum();
        let mut want = [0.0; 3];
        for (prio, c) in counts.iter().enumerate() {
            want[band(prio as u8)] += c / total;
        }
        let sel: Vec<&SeenRun> = runs
            .iter()
            .filter(|r| {
                if after {
                    r.submit > 0.0
                } else {
                    r.submit == 0.0 && r.schedule == Some(0.0)
                }
            })
            .collect();
        let mut got = [0.0; 3];
        for r in &sel {
            got[band(r.priority)] += 1.0 / sel.len() as f64;
        }
        println!("{key}: band mix {got:.3?} (real {want:.3?})");
        for b in 0..3 {
            assert!(
                (got[b] - want[b]).abs() < 0.1,
                "{key}: band {b} share {:.3} vs {:.3}",
                got[b],
                want[b]
            );
        }
    }

    // Some requests are in e-notation, as in the real trace (below 1e-4).
    assert!(
        gunzip(&files[1]).contains("e-0"),
        "no request in e-notation"
    );

    // The crate's own reader folds the trace into exactly one run per SUBMIT.
    let root = TraceRoot::open(dir.path()).unwrap();
    let ingest = IngestOptions {
        parts: None,
        use_cache: false,
        cache_dir: None,
    };
    let loaded = load_runs(&root, &ingest).unwrap();
    assert_eq!(loaded.runs.len(), runs.len(), "one run per SUBMIT");
    assert_eq!(loaded.stats.rows, stats.rows);
    assert_eq!(loaded.stats.orphan_events, 0);
    assert_eq!(loaded.stats.superseded, 0);
    assert_eq!(loaded.stats.open_at_end as usize, open);
}

#[test]
fn synth_is_deterministic_per_seed() {
    let read_all = |root: &Path| -> Vec<(String, Vec<u8>)> {
        part_files(root)
            .iter()
            .map(|f| {
                (
                    f.file_name().unwrap().to_string_lossy().into_owned(),
                    std::fs::read(f).unwrap(),
                )
            })
            .collect()
    };
    let (a, b, c) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let sa = write(a.path(), &opts(200, 0.2, 1));
    let sb = write(b.path(), &opts(200, 0.2, 1));
    let sc = write(c.path(), &opts(200, 0.2, 2));
    assert_ne!(sc.rows, 0);
    assert_eq!(sa, sb);
    assert_eq!(
        read_all(a.path()),
        read_all(b.path()),
        "same seed, same bytes"
    );
    assert_ne!(
        read_all(a.path()),
        read_all(c.path()),
        "another seed, another trace"
    );
    assert_ne!(sa.rows, 0);
    for f in part_files(a.path()) {
        parse(&gunzip(&f));
    }
    assert_eq!(
        std::fs::read_to_string(a.path().join("README.md")).unwrap(),
        std::fs::read_to_string(b.path().join("README.md")).unwrap()
    );
}

#[test]
fn synth_content_does_not_depend_on_the_number_of_parts() {
    let all_rows = |root: &Path| -> String { part_files(root).iter().map(|f| gunzip(f)).collect() };
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let sa = write(
        a.path(),
        &SynthOptions {
            parts: Some(1),
            ..opts(100, 0.1, 3)
        },
    );
    let sb = write(
        b.path(),
        &SynthOptions {
            parts: Some(7),
            ..opts(100, 0.1, 3)
        },
    );
    assert_eq!((sa.parts, sb.parts), (1, 7));
    assert_eq!(part_files(b.path()).len(), 7);
    assert_eq!(all_rows(a.path()), all_rows(b.path()));
}

#[test]
fn synth_rejects_bad_arguments_and_non_empty_output() {
    let dir = tempfile::tempdir().unwrap();
    let usage = |r: colosched_trace::Result<SynthStats>| matches!(r, Err(TraceError::Usage(_)));
    let none = |_: u32, _: u32| {};
    assert!(usage(write_trace(dir.path(), &opts(0, 1.0, 1), &none)));
    assert!(usage(write_trace(dir.path(), &opts(10, 0.0, 1), &none)));
    assert!(usage(write_trace(dir.path(), &opts(10, -1.0, 1), &none)));
    assert!(usage(write_trace(dir.path(), &opts(10, 1e9, 1), &none)));
    assert!(usage(write_trace(
        dir.path(),
        &opts(10, f64::NAN, 1),
        &none
    )));
    assert!(usage(write_trace(
        dir.path(),
        &SynthOptions {
            parts: Some(0),
            ..opts(10, 0.1, 1)
        },
        &none
    )));
    write(dir.path(), &opts(10, 0.05, 1));
    let again = write_trace(dir.path(), &opts(10, 0.05, 1), &none);
    let Err(TraceError::Usage(msg)) = again else {
        panic!("wrote into a non-empty task_events/: {again:?}")
    };
    assert!(msg.contains("task_events"), "{msg}");
}

/// Writes the trace named by SYNTH_MACHINES / SYNTH_DAYS / SYNTH_SEED / SYNTH_PARTS into
/// SYNTH_OUT (default: 12,500 machines × 29 days into /tmp/colosched-synth-full) and prints time
/// and size; the output is left for inspection (delete it afterwards). For docs/trace-synth.md:
/// `cargo test --release -p colosched-trace --test it synth:: -- --ignored --nocapture`.
#[test]
#[ignore = "writes the 1.8 GB full-scale trace; run by hand for bench/RESULTS.md"]
fn synth_full_scale() {
    let env = |k: &str| std::env::var(k).ok();
    let out = PathBuf::from(env("SYNTH_OUT").unwrap_or_else(|| "/tmp/colosched-synth-full".into()));
    let o = SynthOptions {
        machines: env("SYNTH_MACHINES").map_or(12_500, |v| v.parse().unwrap()),
        days: env("SYNTH_DAYS").map_or(29.0, |v| v.parse().unwrap()),
        parts: env("SYNTH_PARTS").map(|v| v.parse().unwrap()),
        seed: env("SYNTH_SEED").map_or(1, |v| v.parse().unwrap()),
    };
    let started = Instant::now();
    let stats = write_trace(&out, &o, &|d, t| {
        if d % 50 == 0 || d == t {
            eprintln!("{d}/{t} parts, {:.1} s", started.elapsed().as_secs_f64());
        }
    })
    .unwrap();
    println!("{o:?}\n{stats:?}\n{:.1} s", started.elapsed().as_secs_f64());
}
