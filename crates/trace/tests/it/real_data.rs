//! Ingest of the real ClusterData2011-2 parts: `$COLOSCHED_SHARED_DATA/google-clusterdata-2011-2`
//! if the variable is set, else `../shared/data/...` beside the repo, else the two parts bundled in
//! the repo's `data/google-2011-sample` (parts 00000 and 00001 only).
use std::path::PathBuf;
use std::time::Instant;

use colosched_trace::{events, load_events, load_runs, IngestOptions, Runs, TraceRoot};

fn shared_root() -> Option<PathBuf> {
    let data = std::env::var_os("COLOSCHED_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"));
    Some(data.join("google-clusterdata-2011-2")).filter(|p| p.join("task_events").is_dir())
}

fn root_with_parts_0_1() -> PathBuf {
    shared_root().unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/google-2011-sample")
    })
}

fn assert_same_runs(a: &Runs, b: &Runs) {
    assert_eq!(a.runs, b.runs);
    assert_eq!(a.updates, b.updates);
    assert_eq!(a.machine_ids, b.machine_ids);
    assert_eq!(a.trace_end, b.trace_end);
    let strip = |r: &Runs| {
        let mut s = r.stats.clone();
        s.parts_from_cache = 0;
        s.parse_seconds = 0.0;
        s
    };
    assert_eq!(strip(a), strip(b));
}

#[test]
fn real_parts_0_and_1_and_cache() {
    let root = TraceRoot::open(root_with_parts_0_1()).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let opts = IngestOptions {
        parts: Some(vec![0, 1]),
        use_cache: true,
        cache_dir: Some(cache.path().to_path_buf()),
    };
    let parts = load_events(&root, &opts).unwrap();
    assert_eq!(
        parts.iter().map(|p| p.part.number).collect::<Vec<_>>(),
        vec![0, 1]
    );
    assert_eq!(parts[0].events.len(), 450_146);
    assert_eq!(parts[1].events.len(), 77_776);
    assert!(parts.iter().all(|p| !p.from_cache));
    let count = |kind: u8| parts[0].events.event.iter().filter(|&&e| e == kind).count();
    assert_eq!(count(events::SUBMIT), 201_491);
    assert_eq!(count(events::SCHEDULE), 189_994);
    assert_eq!(count(events::FINISH), 43_237);

    // Cache entries now exist: the runs come from the cache and are identical to a fresh parse.
    let cached = load_runs(&root, &opts).unwrap();
    assert_eq!(cached.stats.parts_from_cache, 2);
    let fresh = load_runs(
        &root,
        &IngestOptions {
            use_cache: false,
            ..opts.clone()
        },
    )
    .unwrap();
    assert_eq!(fresh.stats.parts_from_cache, 0);
    assert_same_runs(&cached, &fresh);

    let s = &fresh.stats;
    assert_eq!((s.parts, s.rows), (2, 450_146 + 77_776));
    assert_eq!(s.runs, fresh.runs.len() as u64);
    assert!(fresh.runs.windows(2).all(|w| w[0].submit <= w[1].submit));
    assert!(fresh.updates.windows(2).all(|w| w[0].time <= w[1].time));
    assert!(fresh
        .runs
        .iter()
        .all(|r| r.end >= r.submit && r.end <= fresh.trace_end));
    assert!(fresh
        .runs
        .iter()
        .all(|r| r.schedule == colosched_trace::NEVER || r.schedule >= r.submit));
    // The last row of part 00001 is at 10,622,388,150 µs raw = 10,022 s after the window start.
    assert_eq!(fresh.trace_end, 10_022);
    eprintln!("parts 0-1: {s:?}, machines {}", fresh.machine_ids.len());
}

/// Release-mode timings of parts 0-9 (cold parse, then from the cache):
/// `cargo test --release -p colosched-trace --test it real_data:: -- --ignored --nocapture`
#[test]
#[ignore = "timing, not a test: cargo test --release -p colosched-trace --test it real_data:: -- --ignored --nocapture"]
fn timing_parts_0_to_9() {
    let Some(root) = shared_root() else {
        eprintln!("shared data not found: skipped");
        return;
    };
    let root = TraceRoot::open(root).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let opts = IngestOptions {
        parts: Some((0..=9).collect()),
        use_cache: true,
        cache_dir: Some(cache.path().to_path_buf()),
    };
    let started = Instant::now();
    let uncached = load_events(
        &root,
        &IngestOptions {
            use_cache: false,
            ..opts.clone()
        },
    )
    .unwrap();
    let parse_s = started.elapsed().as_secs_f64();
    let rows: usize = uncached.iter().map(|p| p.events.len()).sum();
    drop(uncached);

    let cold = load_runs(&root, &opts).unwrap();
    let warm = load_runs(&root, &opts).unwrap();
    assert_eq!(warm.stats.parts_from_cache, 10);
    assert_same_runs(&cold, &warm);
    let started = Instant::now();
    let cached_events = load_events(&root, &opts).unwrap();
    let cached_events_s = started.elapsed().as_secs_f64();
    let mut fold_s = f64::INFINITY;
    let mut folded = Runs::default();
    for _ in 0..3 {
        let started = Instant::now();
        folded = colosched_trace::fold_runs(cached_events.iter().map(|p| &p.events));
        fold_s = fold_s.min(started.elapsed().as_secs_f64());
    }
    eprintln!("fold only (best of 3): {fold_s:.3} s");
    assert_same_runs(&folded, &warm);
    drop(cached_events);
    eprintln!("rows {rows}");
    // Single-threaded split for part 00000 (best of 3): gunzip, then parse.
    let part0 = &root.task_events[0];
    let (mut gunzip_s, mut parse0_s) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..3 {
        let started = Instant::now();
        let bytes = events::read_bytes(&part0.path, part0.gzip).unwrap();
        gunzip_s = gunzip_s.min(started.elapsed().as_secs_f64());
        let started = Instant::now();
        let parsed = events::parse_events(&bytes, &part0.path).unwrap();
        parse0_s = parse0_s.min(started.elapsed().as_secs_f64());
        assert_eq!(parsed.len(), 450_146);
    }
    eprintln!("part 00000 alone, 1 thread: gunzip {gunzip_s:.3} s, parse {parse0_s:.3} s");
    eprintln!("parse only (no cache): {parse_s:.3} s");
    eprintln!(
        "load_runs cold (parse + write cache + fold): {:.3} s",
        cold.stats.parse_seconds
    );
    eprintln!("load_events from cache: {cached_events_s:.3} s");
    eprintln!(
        "load_runs from cache (+ fold): {:.3} s",
        warm.stats.parse_seconds
    );
    eprintln!("stats: {:?}", warm.stats);
    eprintln!(
        "machines {} trace_end {} updates {}",
        warm.machine_ids.len(),
        warm.trace_end,
        warm.updates.len()
    );
}
