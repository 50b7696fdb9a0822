//! The `task_events` table, parsed into columns.
//!
//! Schema (ClusterData2011-2, 13 columns, no header, empty field = missing value):
//!
//! | # | field | kept as |
//! |---|-------|---------|
//! | 1 | timestamp (µs, 0 = before the window, 2^63-1 = after) | `time_us`, mandatory |
//! | 2 | missing info | ignored |
//! | 3 | job ID | `job`, mandatory |
//! | 4 | task index | `index`, mandatory |
//! | 5 | machine ID | `machine`, 0 when missing |
//! | 6 | event type 0..=8 | `event`, mandatory |
//! | 7 | user (hashed) | ignored |
//! | 8 | scheduling class | ignored |
//! | 9 | priority 0..=11 | `priority`, mandatory |
//! | 10 | CPU request | `cpu_request`, NaN when missing |
//! | 11 | memory request | `mem_request`, NaN when missing |
//! | 12 | disk space request | ignored (must still be a number or empty) |
//! | 13 | different-machines restriction | ignored |
//!
//! Requests are normalised to the largest machine and may use e-notation (`1e-05`).
use std::io::Read;
use std::path::Path;

use crate::error::{Result, TraceError};

pub const SUBMIT: u8 = 0;
pub const SCHEDULE: u8 = 1;
pub const EVICT: u8 = 2;
pub const FAIL: u8 = 3;
pub const FINISH: u8 = 4;
pub const KILL: u8 = 5;
pub const LOST: u8 = 6;
pub const UPDATE_PENDING: u8 = 7;
pub const UPDATE_RUNNING: u8 = 8;

/// Highest priority in the official schema (11 = "monitoring").
pub const MAX_PRIORITY: u8 = 11;

/// Number of columns of a `task_events` row.
pub const COLUMNS: usize = 13;

/// Schema names of the 13 columns, as used in error messages.
pub const FIELD_NAMES: [&str; COLUMNS] = [
    "timestamp",
    "missing info",
    "job ID",
    "task index",
    "machine ID",
    "event type",
    "user",
    "scheduling class",
    "priority",
    "CPU request",
    "memory request",
    "disk space request",
    "different-machines restriction",
];

/// One `task_events` part in columns; row `i` of every column is row `i` of the file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Events {
    /// Raw trace timestamp, microseconds (see `crate::runs::to_seconds`).
    pub time_us: Vec<u64>,
    pub job: Vec<u64>,
    pub index: Vec<u32>,
    /// Trace machine ID, 0 when missing.
    pub machine: Vec<u64>,
    /// Event type 0..=8.
    pub event: Vec<u8>,
    /// Priority 0..=11.
    pub priority: Vec<u8>,
    /// NaN when missing.
    pub cpu_request: Vec<f32>,
    /// NaN when missing.
    pub mem_request: Vec<f32>,
}

impl Events {
    pub fn with_capacity(rows: usize) -> Events {
        Events {
            time_us: Vec::with_capacity(rows),
            job: Vec::with_capacity(rows),
            index: Vec::with_capacity(rows),
            machine: Vec::with_capacity(rows),
            event: Vec::with_capacity(rows),
            priority: Vec::with_capacity(rows),
            cpu_request: Vec::with_capacity(rows),
            mem_request: Vec::with_capacity(rows),
        }
    }

    pub fn len(&self) -> usize {
        self.time_us.len()
    }

    pub fn is_empty(&self) -> bool {
        self.time_us.is_empty()
    }

    /// True if every column has the same length (always so for parsed data; checked on cache reads).
    pub fn is_consistent(&self) -> bool {
        let n = self.len();
        [
            self.job.len(),
            self.index.len(),
            self.machine.len(),
            self.event.len(),
            self.priority.len(),
            self.cpu_request.len(),
            self.mem_request.len(),
        ]
        .iter()
        .all(|&len| len == n)
    }
}

/// Reads one part file (gzip-compressed if its name ends in `.gz`) and parses it.
/// A part with no rows is a `TraceError::File` ("empty part").
pub fn read_part(path: &Path, gzip: bool) -> Result<Events> {
    let bytes = read_bytes(path, gzip)?;
    parse_events(&bytes, path)
}

/// The whole decompressed content of a part file.
pub fn read_bytes(path: &Path, gzip: bool) -> Result<Vec<u8>> {
    let file_error = |msg: String| TraceError::File {
        file: path.to_path_buf(),
        msg,
    };
    let mut file =
        std::fs::File::open(path).map_err(|e| file_error(format!("cannot open: {e}")))?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0) as usize;
    if !gzip {
        let mut bytes = Vec::with_capacity(size + 1);
        file.read_to_end(&mut bytes)
            .map_err(|e| file_error(format!("cannot read: {e}")))?;
        return Ok(bytes);
    }
    // task_events parts compress about 10:1.
    let mut bytes = Vec::with_capacity(size.saturating_mul(12).min(1 << 30));
    let mut decoder =
        flate2::read::MultiGzDecoder::new(std::io::BufReader::with_capacity(1 << 16, file));
    decoder.read_to_end(&mut bytes).map_err(|e| {
        let what = if e.kind() == std::io::ErrorKind::UnexpectedEof {
            "truncated gzip stream".to_string()
        } else {
            format!("corrupt gzip stream: {e}")
        };
        file_error(what)
    })?;
    Ok(bytes)
}

/// Parses the decompressed text of one `task_events` part. `file` is only used in errors.
///
/// Lines end with `\n` (a `\r` before it is dropped); the last line may lack it. Every line must
/// have exactly 13 columns; the mandatory fields (timestamp, job ID, task index, event type,
/// priority) must be present. Errors carry the 1-based line and column and the schema field name.
pub fn parse_events(bytes: &[u8], file: &Path) -> Result<Events> {
    // Rows are about 105 bytes long in the real trace.
    let mut events = Events::with_capacity(bytes.len() / 100 + 16);
    let mut line_no: u64 = 0;
    let mut start = 0;
    while start < bytes.len() {
        let end = memchr::memchr(b'\n', &bytes[start..]).map_or(bytes.len(), |i| start + i);
        line_no += 1;
        let mut line = &bytes[start..end];
        if let [rest @ .., b'\r'] = line {
            line = rest;
        }
        parse_line(line, &mut events).map_err(|e| e.into_trace_error(file, line_no))?;
        start = end + 1;
    }
    if events.is_empty() {
        return Err(TraceError::File {
            file: file.to_path_buf(),
            msg: "empty part (no rows)".into(),
        });
    }
    Ok(events)
}

/// What is wrong with a line, before we know the file and line number.
pub(crate) struct LineError {
    /// 0-based column.
    pub(crate) column: usize,
    pub(crate) msg: String,
}

/// The `(column, message)` form the task_usage reader reports.
impl From<LineError> for (usize, String) {
    fn from(e: LineError) -> Self {
        (e.column, e.msg)
    }
}

impl LineError {
    fn into_trace_error(self, file: &Path, line: u64) -> TraceError {
        TraceError::Parse {
            file: file.to_path_buf(),
            line,
            column: self.column + 1,
            field: FIELD_NAMES
                .get(self.column)
                .copied()
                .unwrap_or("end of row"),
            msg: self.msg,
        }
    }
}

/// Parses one row and pushes it onto `events` (all columns or none).
fn parse_line(line: &[u8], events: &mut Events) -> std::result::Result<(), LineError> {
    // Field i is line[starts[i] .. starts[i + 1] - 1].
    let mut starts = [0usize; COLUMNS + 1];
    let mut commas = 0;
    for at in memchr::memchr_iter(b',', line) {
        commas += 1;
        if commas >= COLUMNS {
            return Err(LineError {
                column: COLUMNS,
                msg: format!("expected {COLUMNS} columns, found {}", count_columns(line)),
            });
        }
        starts[commas] = at + 1;
    }
    if commas != COLUMNS - 1 {
        return Err(LineError {
            column: commas + 1,
            msg: format!("expected {COLUMNS} columns, found {}", commas + 1),
        });
    }
    starts[COLUMNS] = line.len() + 1;
    let field = |i: usize| &line[starts[i]..starts[i + 1] - 1];

    let time_us = mandatory_uint(field(0), 0, u64::MAX)?;
    let job = mandatory_uint(field(2), 2, u64::MAX)?;
    let index = mandatory_uint(field(3), 3, u32::MAX as u64)? as u32;
    let machine = optional_uint(field(4), 4, u64::MAX)?.unwrap_or(0);
    let event = mandatory_uint(field(5), 5, UPDATE_RUNNING as u64)? as u8;
    let priority = mandatory_uint(field(8), 8, MAX_PRIORITY as u64)? as u8;
    let cpu = optional_request(field(9), 9)?;
    let mem = optional_request(field(10), 10)?;
    optional_request(field(11), 11)?;

    events.time_us.push(time_us);
    events.job.push(job);
    events.index.push(index);
    events.machine.push(machine);
    events.event.push(event);
    events.priority.push(priority);
    events.cpu_request.push(cpu);
    events.mem_request.push(mem);
    Ok(())
}

fn count_columns(line: &[u8]) -> usize {
    memchr::memchr_iter(b',', line).count() + 1
}

pub(crate) fn mandatory_uint(
    text: &[u8],
    column: usize,
    max: u64,
) -> std::result::Result<u64, LineError> {
    optional_uint(text, column, max)?.ok_or_else(|| LineError {
        column,
        msg: "missing value (this field is mandatory)".into(),
    })
}

/// An unsigned decimal integer no larger than `max`; `None` for an empty field.
fn optional_uint(
    text: &[u8],
    column: usize,
    max: u64,
) -> std::result::Result<Option<u64>, LineError> {
    if text.is_empty() {
        return Ok(None);
    }
    let mut value: u64 = 0;
    for &byte in text {
        let digit = byte.wrapping_sub(b'0');
        if digit > 9 {
            return Err(LineError {
                column,
                msg: format!("`{}` is not an unsigned integer", show(text)),
            });
        }
        value = match value
            .checked_mul(10)
            .and_then(|v| v.checked_add(digit as u64))
        {
            Some(v) => v,
            None => return Err(out_of_range(text, column, max)),
        };
    }
    if value > max {
        return Err(out_of_range(text, column, max));
    }
    Ok(Some(value))
}

fn out_of_range(text: &[u8], column: usize, max: u64) -> LineError {
    LineError {
        column,
        msg: format!("`{}` is out of range 0..={max}", show(text)),
    }
}

/// A resource request: a finite number >= 0 (decimal or e-notation); NaN for an empty field.
pub(crate) fn optional_request(text: &[u8], column: usize) -> std::result::Result<f32, LineError> {
    if text.is_empty() {
        return Ok(f32::NAN);
    }
    let bad = || LineError {
        column,
        msg: format!("`{}` is not a number >= 0", show(text)),
    };
    // Only digits, '.', 'e'/'E' and signs may appear: this rejects "inf", "nan" and the like,
    // which Rust's float parser would accept.
    if !text
        .iter()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'-' | b'+'))
    {
        return Err(bad());
    }
    let value: f32 = std::str::from_utf8(text)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(bad)?;
    if !(value.is_finite() && value >= 0.0) {
        return Err(bad());
    }
    Ok(value)
}

/// A field's text for an error message (shortened if long).
pub(crate) fn show(text: &[u8]) -> String {
    let s = String::from_utf8_lossy(text);
    if s.chars().count() > 40 {
        format!("{}...", s.chars().take(40).collect::<String>())
    } else {
        s.into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    const ROW: &str = "0,,3418314,0,3938719206,0,70s3v5qRyCO/1PCdI6fVXnrW8FU/w+5CKRSa72xgcIo=,3,9,0.125,0.07446,0.0004244,0";

    fn parse(text: &str) -> Result<Events> {
        parse_events(text.as_bytes(), Path::new("t/part-00000-of-00500.csv"))
    }

    fn parse_error(text: &str) -> (u64, usize, &'static str, String) {
        match parse(text) {
            Err(TraceError::Parse {
                file,
                line,
                column,
                field,
                msg,
            }) => {
                assert_eq!(file, Path::new("t/part-00000-of-00500.csv"));
                (line, column, field, msg)
            }
            other => panic!("expected a parse error, got {other:?}"),
        }
    }

    fn at(text: &str) -> (u64, usize, &'static str) {
        let (line, column, field, _) = parse_error(text);
        (line, column, field)
    }

    #[test]
    fn parses_real_rows() {
        let text = format!(
            "{ROW}\n0,2,3418309,0,4155527081,0,70s3v5qRyCO/1PCdI6fVXnrW8FU/w+5CKRSa72xgcIo=,3,9,,,,\n\
             5612000000,,6590371,12,,5,u,1,0,0.1875,7.057e-05,1e-05,1\r\n\
             9223372036854775807,,1,4294967295,18446744073709551615,8,,,11,1E-3,0,,"
        );
        let e = parse(&text).unwrap();
        assert_eq!(e.len(), 4);
        assert!(e.is_consistent());
        assert_eq!(
            e.time_us,
            vec![0, 0, 5_612_000_000, 9_223_372_036_854_775_807]
        );
        assert_eq!(e.job, vec![3418314, 3418309, 6590371, 1]);
        assert_eq!(e.index, vec![0, 0, 12, u32::MAX]);
        assert_eq!(e.machine, vec![3938719206, 4155527081, 0, u64::MAX]);
        assert_eq!(e.event, vec![SUBMIT, SUBMIT, KILL, UPDATE_RUNNING]);
        assert_eq!(e.priority, vec![9, 9, 0, 11]);
        assert_eq!(e.cpu_request[0], 0.125);
        assert!(e.cpu_request[1].is_nan() && e.mem_request[1].is_nan());
        assert_eq!(e.mem_request[2], 7.057e-05);
        assert_eq!(e.cpu_request[3], 1e-3);
        assert_eq!(e.mem_request[3], 0.0);
    }

    #[test]
    fn trailing_newline_is_not_a_row() {
        assert_eq!(parse(&format!("{ROW}\n")).unwrap().len(), 1);
        assert_eq!(parse(&format!("{ROW}\n{ROW}")).unwrap().len(), 2);
    }

    #[test]
    fn empty_part_is_a_file_error() {
        for text in ["", "\n\n"] {
            match parse(text) {
                Err(TraceError::File { msg, .. }) if text.is_empty() => {
                    assert!(msg.contains("empty part"), "{msg}")
                }
                // A blank line is a row with one column.
                Err(TraceError::Parse {
                    line: 1, column: 2, ..
                }) if !text.is_empty() => {}
                other => panic!("{text:?}: got {other:?}"),
            }
        }
    }

    #[test]
    fn wrong_column_count() {
        let short = ROW.rsplit_once(',').unwrap().0; // 12 columns
        let (line, column, field, msg) = parse_error(&format!("{ROW}\n{short}\n"));
        assert_eq!(
            (line, column, field),
            (2, 13, "different-machines restriction")
        );
        assert!(msg.contains("expected 13 columns, found 12"), "{msg}");

        let (line, column, field, msg) = parse_error(&format!("{ROW}\n{ROW}\n{ROW},1,2\n"));
        assert_eq!((line, column, field), (3, 14, "end of row"));
        assert!(msg.contains("found 15"), "{msg}");
    }

    #[test]
    fn non_numeric_fields() {
        let row = ROW.replacen("3418314", "34x8314", 1);
        let (line, column, field, msg) = parse_error(&row);
        assert_eq!((line, column, field), (1, 3, "job ID"));
        assert!(msg.contains("34x8314"), "{msg}");

        let row = ROW.replacen("0.07446", "abc", 1);
        assert_eq!(at(&row), (1, 11, "memory request"));
        for bad in ["inf", "NaN", "-0.5", "1e99", "."] {
            let row = ROW.replacen("0.125", bad, 1);
            let (_, column, field, _) = parse_error(&row);
            assert_eq!((column, field), (10, "CPU request"), "{bad}");
        }
        let row = ROW.replacen("0.0004244", "x", 1);
        assert_eq!(at(&row), (1, 12, "disk space request"));
        let row = ROW.replacen(",0,3938719206,", ",-1,3938719206,", 1);
        assert_eq!(at(&row), (1, 4, "task index"));
        let row = ROW.replacen(",0,3938719206,", ",4294967296,3938719206,", 1);
        assert_eq!(at(&row), (1, 4, "task index"));
        let row = format!("18446744073709551616{}", &ROW[1..]);
        assert_eq!(at(&row), (1, 1, "timestamp"));
    }

    #[test]
    fn event_type_and_priority_ranges() {
        let row = ROW.replacen(",3938719206,0,", ",3938719206,9,", 1);
        let (line, column, field, msg) = parse_error(&format!("{ROW}\n{row}"));
        assert_eq!((line, column, field), (2, 6, "event type"));
        assert!(msg.contains("0..=8"), "{msg}");
        let row = ROW.replacen(",3,9,", ",3,12,", 1);
        assert_eq!(at(&row), (1, 9, "priority"));
    }

    #[test]
    fn mandatory_fields() {
        let row = ROW.replacen(",3,9,", ",3,,", 1);
        let (_, column, field, msg) = parse_error(&row);
        assert_eq!((column, field), (9, "priority"));
        assert!(msg.contains("missing"), "{msg}");
        let row = &ROW[1..]; // empty timestamp
        assert_eq!(at(row), (1, 1, "timestamp"));
    }

    #[test]
    fn gzip_and_truncated_gzip() {
        let dir = tempfile::tempdir().unwrap();
        let text = format!("{ROW}\n").repeat(2000);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(text.as_bytes()).unwrap();
        let gz = gz.finish().unwrap();
        let good = dir.path().join("part-00000-of-00001.csv.gz");
        std::fs::write(&good, &gz).unwrap();
        assert_eq!(read_part(&good, true).unwrap().len(), 2000);

        let cut = dir.path().join("part-00001-of-00001.csv.gz");
        std::fs::write(&cut, &gz[..gz.len() / 2]).unwrap();
        match read_part(&cut, true) {
            Err(TraceError::File { file, msg }) => {
                assert_eq!(file, cut);
                assert!(msg.contains("gzip"), "{msg}");
            }
            other => panic!("expected a file error, got {other:?}"),
        }
        let not_gzip = dir.path().join("part-00002-of-00001.csv.gz");
        std::fs::write(&not_gzip, text.as_bytes()).unwrap();
        assert!(matches!(
            read_part(&not_gzip, true),
            Err(TraceError::File { .. })
        ));
    }
}
