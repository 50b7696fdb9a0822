//! Ingest through the public entry points on small trace roots written to temp dirs: gzip and
//! plain parts, the cache, and every kind of bad input (which must name file, line and column and
//! must never leave a cache entry behind).
use std::io::Write;
use std::path::{Path, PathBuf};

use colosched_trace::{
    clear_cache, load_events, load_runs, IngestOptions, Runs, TraceError, TraceRoot, END_NONE,
};

const ROW_SUBMIT: &str =
    "0,,3418314,0,,0,70s3v5qRyCO/1PCdI6fVXnrW8FU/w+5CKRSa72xgcIo=,3,9,0.125,0.07446,0.0004244,0\n";
const ROW_SCHEDULE: &str = "0,,3418314,0,3938719206,1,70s3v5qRyCO/1PCdI6fVXnrW8FU/w+5CKRSa72xgcIo=,3,9,0.125,0.07446,0.0004244,0\n";
const ROW_FINISH: &str = "700000000,,3418314,0,3938719206,4,70s3v5qRyCO/1PCdI6fVXnrW8FU/w+5CKRSa72xgcIo=,3,9,0.125,0.07446,0.0004244,0\n";
const ROW_OTHER: &str = "650000000,,6590371,2,,0,u,1,0,1e-05,7.057e-05,,0\n";

fn gzip(text: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(text).unwrap();
    gz.finish().unwrap()
}

/// Writes `task_events/part-NNNNN-of-00500.csv[.gz]` under `root`.
fn write_part(root: &Path, number: u32, text: &str, gz: bool) -> PathBuf {
    let dir = root.join("task_events");
    std::fs::create_dir_all(&dir).unwrap();
    let ext = if gz { "csv.gz" } else { "csv" };
    let path = dir.join(format!("part-{number:05}-of-00500.{ext}"));
    let bytes = if gz {
        gzip(text.as_bytes())
    } else {
        text.as_bytes().to_vec()
    };
    std::fs::write(&path, bytes).unwrap();
    path
}

fn opts(cache: &Path) -> IngestOptions {
    IngestOptions {
        parts: None,
        use_cache: true,
        cache_dir: Some(cache.to_path_buf()),
    }
}

/// Names of the files in the cache dir, sorted.
fn cache_files(cache: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(cache) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn assert_same_runs(a: &Runs, b: &Runs) {
    assert_eq!(a.runs, b.runs);
    assert_eq!(a.updates, b.updates);
    assert_eq!(a.machine_ids, b.machine_ids);
    assert_eq!(a.trace_end, b.trace_end);
}

#[test]
fn gzip_and_plain_parts_fold_across_parts_and_cache() {
    let dir = tempfile::tempdir().unwrap();
    let (root_dir, cache) = (dir.path().join("trace"), dir.path().join("cache"));
    // The task is submitted and scheduled in part 0 and finishes in part 1.
    write_part(
        &root_dir,
        0,
        &[ROW_SUBMIT, ROW_SCHEDULE, ROW_OTHER].concat(),
        true,
    );
    write_part(&root_dir, 1, ROW_FINISH, false);
    let root = TraceRoot::open(&root_dir).unwrap();

    let first = load_runs(&root, &opts(&cache)).unwrap();
    assert_eq!(first.stats.parts_from_cache, 0);
    assert_eq!(
        (first.stats.parts, first.stats.rows, first.stats.runs),
        (2, 4, 2)
    );
    assert_eq!(first.runs[0].job, 3418314);
    assert_eq!(
        (
            first.runs[0].schedule,
            first.runs[0].end,
            first.runs[0].end_kind
        ),
        (0, 100, 4)
    );
    assert_eq!(
        (
            first.runs[1].submit,
            first.runs[1].end,
            first.runs[1].end_kind
        ),
        (50, 100, END_NONE)
    );
    assert_eq!(first.runs[1].cpu_request, 1e-5);
    assert_eq!(first.machine_ids, vec![3938719206]);
    let entries = cache_files(&cache);
    assert_eq!(entries.len(), 2, "{entries:?}");
    assert!(entries[0].starts_with("task_events-00000-") && entries[0].ends_with(".arrow"));

    let second = load_runs(&root, &opts(&cache)).unwrap();
    assert_eq!(second.stats.parts_from_cache, 2);
    assert_same_runs(&first, &second);

    // A changed part is parsed again (its identity changed); the other still comes from the cache.
    write_part(&root_dir, 1, &[ROW_FINISH, ROW_FINISH].concat(), false);
    let third = load_runs(&root, &opts(&cache)).unwrap();
    assert_eq!(third.stats.parts_from_cache, 1);
    assert_eq!(
        third.stats.orphan_events, 1,
        "the second FINISH has no open run"
    );

    // Selecting parts, and --no-cache.
    let only0 = IngestOptions {
        parts: Some(vec![0]),
        use_cache: false,
        ..opts(&cache)
    };
    let part0 = load_events(&root, &only0).unwrap();
    assert_eq!(part0.len(), 1);
    assert_eq!(
        (
            part0[0].part.number,
            part0[0].events.len(),
            part0[0].from_cache
        ),
        (0, 3, false)
    );

    assert_eq!(
        clear_cache(Some(&cache)).unwrap(),
        3,
        "two entries for part 1 (old and new)"
    );
    assert!(cache_files(&cache).is_empty());
    let fresh = load_runs(
        &root,
        &IngestOptions {
            use_cache: false,
            ..opts(&cache)
        },
    )
    .unwrap();
    assert_eq!(fresh.stats.parts_from_cache, 0);
    assert!(cache_files(&cache).is_empty(), "--no-cache writes nothing");
    assert_same_runs(&third, &fresh);
}

#[test]
fn unwritable_cache_does_not_fail_the_load() {
    let dir = tempfile::tempdir().unwrap();
    write_part(dir.path(), 0, ROW_SUBMIT, true);
    let not_a_dir = dir.path().join("cache-is-a-file");
    std::fs::write(&not_a_dir, b"").unwrap();
    let runs = load_runs(&TraceRoot::open(dir.path()).unwrap(), &opts(&not_a_dir)).unwrap();
    assert_eq!(runs.stats.runs, 1);
    assert_eq!(runs.stats.cache_write_failures, 1);
}

#[test]
fn part_selection_that_matches_nothing_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    write_part(dir.path(), 0, ROW_SUBMIT, true);
    write_part(dir.path(), 1, ROW_FINISH, true);
    let root = TraceRoot::open(dir.path()).unwrap();
    let mut o = opts(&dir.path().join("cache"));
    o.parts = Some(vec![5, 6]);
    match load_runs(&root, &o) {
        Err(TraceError::Usage(msg)) => assert!(msg.contains("0-1"), "{msg}"),
        other => panic!("expected a usage error, got {other:?}"),
    }
    assert!(matches!(root.parse_parts("2-9"), Err(TraceError::Usage(_))));
    assert!(matches!(root.parse_parts("x"), Err(TraceError::Usage(_))));
    assert_eq!(
        root.parse_parts("1-9").unwrap(),
        (1..=9).collect::<Vec<_>>()
    );
}

/// Loads a root holding a good part 0 and the bad part 1; returns the error and checks that no
/// cache entry (or temp file) was written for part 1.
fn load_bad_part(bad: &[u8], gz_name: bool) -> (TraceError, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let (root_dir, cache) = (dir.path().join("trace"), dir.path().join("cache"));
    write_part(&root_dir, 0, &[ROW_SUBMIT, ROW_SCHEDULE].concat(), true);
    let ext = if gz_name { "csv.gz" } else { "csv" };
    let bad_path = root_dir.join(format!("task_events/part-00001-of-00500.{ext}"));
    std::fs::write(&bad_path, bad).unwrap();
    let root = TraceRoot::open(&root_dir).unwrap();
    let err = load_runs(&root, &opts(&cache)).expect_err("the bad part must fail the load");
    let leftovers: Vec<String> = cache_files(&cache)
        .into_iter()
        .filter(|name| name.starts_with("task_events-00001-") || name.contains(".tmp"))
        .collect();
    assert!(
        leftovers.is_empty(),
        "cache written for the failing part: {leftovers:?}"
    );
    (err, bad_path)
}

fn assert_parse_error(
    err: TraceError,
    path: &Path,
    want_line: u64,
    want_column: usize,
    want_field: &str,
    msg_has: &str,
) {
    let text = err.to_string();
    match err {
        TraceError::Parse {
            file,
            line,
            column,
            field,
            msg,
        } => {
            assert_eq!(file, path);
            assert_eq!(
                (line, column, field),
                (want_line, want_column, want_field),
                "{msg}"
            );
            assert!(msg.contains(msg_has), "{msg}");
            let where_ = format!(
                "{}:{want_line}: column {want_column} ({want_field})",
                path.display()
            );
            assert!(text.starts_with(&where_), "{text}");
        }
        other => panic!("expected a parse error, got {other:?}"),
    }
}

#[test]
fn wrong_column_count() {
    let text = [ROW_SUBMIT, ROW_SUBMIT, "0,,1,0,,0,u,3,9,0.1,0.1\n"].concat();
    let (err, path) = load_bad_part(text.as_bytes(), false);
    assert_parse_error(
        err,
        &path,
        3,
        12,
        "disk space request",
        "expected 13 columns, found 11",
    );
}

#[test]
fn non_numeric_field_in_a_gzipped_part() {
    let text = [ROW_SUBMIT, "0,,1,0,,0,u,3,9,0.1,zero,0.1,0\n"].concat();
    let (err, path) = load_bad_part(&gzip(text.as_bytes()), true);
    assert_parse_error(err, &path, 2, 11, "memory request", "zero");
}

#[test]
fn unknown_event_type() {
    let text = [ROW_SUBMIT, "0,,1,0,,9,u,3,9,0.1,0.1,0.1,0\n"].concat();
    let (err, path) = load_bad_part(text.as_bytes(), false);
    assert_parse_error(err, &path, 2, 6, "event type", "out of range 0..=8");
}

#[test]
fn priority_out_of_range() {
    let text = "0,,1,0,,0,u,3,12,0.1,0.1,0.1,0\n";
    let (err, path) = load_bad_part(text.as_bytes(), false);
    assert_parse_error(err, &path, 1, 9, "priority", "out of range 0..=11");
}

fn assert_file_error(err: TraceError, path: &Path, msg_has: &str) {
    match err {
        TraceError::File { file, msg } => {
            assert_eq!(file, path);
            assert!(msg.contains(msg_has), "{msg}");
        }
        other => panic!("expected a file error, got {other:?}"),
    }
}

#[test]
fn empty_parts() {
    let (err, path) = load_bad_part(b"", false);
    assert_file_error(err, &path, "empty part");
    let (err, path) = load_bad_part(&gzip(b""), true);
    assert_file_error(err, &path, "empty part");
}

#[test]
fn truncated_gzip_of_a_real_part() {
    // The real part 00001 (bundled in the repo), cut in half.
    let real = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../data/google-2011-sample/task_events/part-00001-of-00500.csv.gz");
    let bytes = std::fs::read(&real).unwrap();
    let (err, path) = load_bad_part(&bytes[..bytes.len() / 2], true);
    assert_file_error(err, &path, "truncated gzip");
    // Cut inside the 8-byte gzip trailer: the data is whole but the stream is not.
    let (err, path) = load_bad_part(&bytes[..bytes.len() - 3], true);
    assert_file_error(err, &path, "gzip");
    // Not gzip at all.
    let (err, path) = load_bad_part(ROW_SUBMIT.as_bytes(), true);
    assert_file_error(err, &path, "gzip");
}

#[test]
fn root_without_task_events() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("task_usage")).unwrap();
    match TraceRoot::open(dir.path()) {
        Err(TraceError::File { file, msg }) => {
            assert_eq!(file, dir.path().join("task_events"));
            assert!(msg.contains("task_events"), "{msg}");
        }
        other => panic!("expected a file error, got {other:?}"),
    }
}
