//! Real per-window usage read from the trace's `task_usage` parts.
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use rayon::prelude::*;

use super::{window_of_us, Usage, WINDOW_S};
use crate::error::{Result, TraceError};
use crate::events::{mandatory_uint, optional_request};

/// Number of columns of a `task_usage` row.
pub const COLUMNS: usize = 20;

/// Schema names of the 20 columns, as used in error messages.
pub const FIELD_NAMES: [&str; COLUMNS] = [
    "start time",
    "end time",
    "job ID",
    "task index",
    "machine ID",
    "mean CPU rate",
    "canonical memory usage",
    "assigned memory usage",
    "unmapped page cache",
    "total page cache",
    "maximum memory usage",
    "mean disk I/O time",
    "mean local disk space",
    "maximum CPU rate",
    "maximum disk I/O time",
    "cycles per instruction",
    "memory accesses per instruction",
    "sample portion",
    "aggregation type",
    "sampled CPU usage",
];

/// Real per-window usage from `task_usage` parts, indexed by task.
///
/// Columns read (1-based): 1 start time, 2 end time, 3 job ID, 4 task index, 6 mean CPU rate,
/// 8 assigned memory, 14 max CPU rate, 17 MAI. The other 12 columns are not parsed. Each row goes
/// to the window of its start time ([`window_of_us`]). Rows of one task that fall in the same
/// window (a task that moved or restarted mid-window) are merged: duration-weighted means of CPU,
/// memory and MAI, the max of max CPU.
#[derive(Clone, Debug, Default)]
pub struct TaskUsage {
    /// (job, index) -> (offset, len) into `windows`.
    tasks: HashMap<(u64, u32), (u32, u32)>,
    /// Per task, sorted by window, one entry per window.
    windows: Vec<(u32, Usage)>,
    rows_read: u64,
    parts: Vec<u32>,
}

/// One parsed row before merging.
struct RawRow {
    job: u64,
    index: u32,
    window: u32,
    duration_us: u64,
    usage: Usage,
}

impl TaskUsage {
    /// Reads `root/task_usage/part-NNNNN-of-MMMMM[.tag].csv[.gz]` (file naming as for task_events,
    /// see `crate::parts::list_parts`), the parts numbered in `parts` (all for `None`).
    ///
    /// `Ok(None)` if `root/task_usage/` does not exist or none of the requested parts is there
    /// (requested numbers without a file are skipped: a user may hold fewer usage parts than event
    /// parts). Errors: an unreadable directory, two files for one part, an unreadable or corrupt
    /// file, an empty part (`TraceError::File`); a malformed row (`TraceError::Parse` naming the
    /// file, 1-based line and column, and the field). Mandatory fields: start, end, job ID, task
    /// index (unsigned integers). Resource fields: a number >= 0 (e-notation allowed); an empty
    /// field means missing and reads as 0 (e.g. the MAI of idle tasks).
    pub fn load(root: &Path, parts: Option<&[u32]>) -> Result<Option<TaskUsage>> {
        let dir = root.join("task_usage");
        if !dir.is_dir() {
            return Ok(None);
        }
        let mut files = crate::parts::list_parts(&dir)?;
        if let Some(numbers) = parts {
            files.retain(|p| numbers.contains(&p.number));
        }
        if files.is_empty() {
            return Ok(None);
        }
        let parsed: Vec<Vec<RawRow>> = files
            .par_iter()
            .map(|p| read_usage_part(&p.path, p.gzip))
            .collect::<Result<_>>()?;
        let part_numbers = files.iter().map(|p| p.number).collect();
        Ok(Some(TaskUsage::from_raw(
            parsed.into_iter().flatten().collect(),
            part_numbers,
        )))
    }

    /// Builds a table from `(job, index, window, usage)` rows (tests, synthetic inputs). Rows of
    /// one (job, index, window) are merged as in [`TaskUsage::load`], with equal weights.
    pub fn from_rows(rows: impl IntoIterator<Item = (u64, u32, u32, Usage)>) -> TaskUsage {
        let rows = rows
            .into_iter()
            .map(|(job, index, window, usage)| RawRow {
                job,
                index,
                window,
                duration_us: WINDOW_S as u64 * 1_000_000,
                usage,
            })
            .collect();
        TaskUsage::from_raw(rows, Vec::new())
    }

    fn from_raw(mut rows: Vec<RawRow>, parts: Vec<u32>) -> TaskUsage {
        let rows_read = rows.len() as u64;
        rows.sort_by_key(|r| (r.job, r.index, r.window));
        let mut out = TaskUsage {
            rows_read,
            parts,
            ..TaskUsage::default()
        };
        let mut i = 0;
        while i < rows.len() {
            let (job, index) = (rows[i].job, rows[i].index);
            let offset = out.windows.len() as u32;
            while i < rows.len() && (rows[i].job, rows[i].index) == (job, index) {
                let window = rows[i].window;
                let mut j = i;
                while j < rows.len()
                    && (rows[j].job, rows[j].index, rows[j].window) == (job, index, window)
                {
                    j += 1;
                }
                out.windows.push((window, merge(&rows[i..j])));
                i = j;
            }
            out.tasks
                .insert((job, index), (offset, out.windows.len() as u32 - offset));
        }
        out
    }

    /// All real windows of a task, sorted by window (empty if none).
    pub fn series(&self, job: u64, index: u32) -> &[(u32, Usage)] {
        match self.tasks.get(&(job, index)) {
            Some(&(offset, len)) => &self.windows[offset as usize..(offset + len) as usize],
            None => &[],
        }
    }

    /// The real usage of (job, index) in `window`, if a row started in that window.
    pub fn get(&self, job: u64, index: u32, window: u32) -> Option<Usage> {
        let s = self.series(job, index);
        s.binary_search_by_key(&window, |e| e.0)
            .ok()
            .map(|i| s[i].1)
    }

    /// The latest real window of (job, index) at or before `window`, with its usage.
    pub fn at_or_before(&self, job: u64, index: u32, window: u32) -> Option<(u32, Usage)> {
        let s = self.series(job, index);
        let after = s.partition_point(|e| e.0 <= window);
        after.checked_sub(1).map(|i| s[i])
    }

    pub fn has_task(&self, job: u64, index: u32) -> bool {
        self.tasks.contains_key(&(job, index))
    }

    /// Number of distinct (job, index, window) entries.
    pub fn len(&self) -> usize {
        self.windows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.windows.is_empty()
    }

    /// Number of distinct tasks.
    pub fn tasks(&self) -> usize {
        self.tasks.len()
    }

    /// CSV rows read (before merging rows of one window).
    pub fn rows_read(&self) -> u64 {
        self.rows_read
    }

    /// Part numbers loaded, ascending.
    pub fn parts(&self) -> &[u32] {
        &self.parts
    }
}

fn merge(rows: &[RawRow]) -> Usage {
    if let [only] = rows {
        return only.usage;
    }
    let total: f64 = rows.iter().map(|r| r.duration_us.max(1) as f64).sum();
    let mean = |f: fn(&Usage) -> f32| {
        (rows
            .iter()
            .map(|r| f(&r.usage) as f64 * r.duration_us.max(1) as f64)
            .sum::<f64>()
            / total) as f32
    };
    Usage {
        cpu: mean(|u| u.cpu),
        max_cpu: rows.iter().map(|r| r.usage.max_cpu).fold(0.0, f32::max),
        mem: mean(|u| u.mem),
        mai: mean(|u| u.mai),
    }
}

fn read_usage_part(path: &Path, gzip: bool) -> Result<Vec<RawRow>> {
    let file_error = |msg: String| TraceError::File {
        file: path.to_path_buf(),
        msg,
    };
    let file = std::fs::File::open(path).map_err(|e| file_error(format!("cannot open: {e}")))?;
    let reader: Box<dyn Read> = if gzip {
        Box::new(flate2::read::MultiGzDecoder::new(BufReader::with_capacity(
            1 << 16,
            file,
        )))
    } else {
        Box::new(file)
    };
    let mut reader = BufReader::with_capacity(1 << 16, reader);
    let mut rows = Vec::new();
    let mut line = Vec::with_capacity(256);
    let mut line_no: u64 = 0;
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line).map_err(|e| {
            file_error(if !gzip {
                format!("cannot read: {e}")
            } else if e.kind() == std::io::ErrorKind::UnexpectedEof {
                "truncated gzip stream".to_string()
            } else {
                format!("corrupt gzip stream: {e}")
            })
        })?;
        if n == 0 {
            break;
        }
        line_no += 1;
        let mut text = line.as_slice();
        if let [rest @ .., b'\n'] = text {
            text = rest;
        }
        if let [rest @ .., b'\r'] = text {
            text = rest;
        }
        let row = parse_usage_line(text).map_err(|(column, msg)| TraceError::Parse {
            file: path.to_path_buf(),
            line: line_no,
            column: column + 1,
            field: FIELD_NAMES.get(column).copied().unwrap_or("end of row"),
            msg,
        })?;
        rows.push(row);
    }
    if rows.is_empty() {
        return Err(file_error("empty part (no rows)".into()));
    }
    Ok(rows)
}

/// Parses one row; errors are (0-based column, message).
fn parse_usage_line(line: &[u8]) -> std::result::Result<RawRow, (usize, String)> {
    let mut starts = [0usize; COLUMNS + 1];
    let mut commas = 0;
    for at in memchr::memchr_iter(b',', line) {
        commas += 1;
        if commas >= COLUMNS {
            let found = memchr::memchr_iter(b',', line).count() + 1;
            return Err((
                COLUMNS,
                format!("expected {COLUMNS} columns, found {found}"),
            ));
        }
        starts[commas] = at + 1;
    }
    if commas != COLUMNS - 1 {
        return Err((
            commas + 1,
            format!("expected {COLUMNS} columns, found {}", commas + 1),
        ));
    }
    starts[COLUMNS] = line.len() + 1;
    let field = |i: usize| &line[starts[i]..starts[i + 1] - 1];

    let start = mandatory_uint(field(0), 0, u64::MAX)?;
    let end = mandatory_uint(field(1), 1, u64::MAX)?;
    let job = mandatory_uint(field(2), 2, u64::MAX)?;
    let index = mandatory_uint(field(3), 3, u32::MAX as u64)? as u32;
    let usage = Usage {
        cpu: resource(field(5), 5)?,
        mem: resource(field(7), 7)?,
        max_cpu: resource(field(13), 13)?,
        mai: resource(field(16), 16)?,
    };
    Ok(RawRow {
        job,
        index,
        window: window_of_us(start),
        duration_us: end.saturating_sub(start),
        usage,
    })
}

/// A usage value: a finite number >= 0 (decimal or e-notation); 0 for an empty field.
fn resource(text: &[u8], column: usize) -> std::result::Result<f32, (usize, String)> {
    let value = optional_request(text, column)?;
    Ok(if value.is_nan() { 0.0 } else { value })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::usage::test_data::{head_root, root_with, ROW1};
    use crate::usage::window_of;
    use std::io::Write;
    use std::path::PathBuf;

    fn parse_error(content: &str) -> (PathBuf, u64, usize, &'static str, String) {
        let root = root_with("part-00003-of-00500.csv", content.as_bytes());
        match TaskUsage::load(root.path(), None) {
            Err(TraceError::Parse {
                file,
                line,
                column,
                field,
                msg,
            }) => {
                assert_eq!(file, root.path().join("task_usage/part-00003-of-00500.csv"));
                (file, line, column, field, msg)
            }
            other => panic!("expected a parse error, got {other:?}"),
        }
    }

    #[test]
    fn usage_real_head676_loads() {
        let root = head_root();
        let real = TaskUsage::load(root.path(), None).unwrap().unwrap();
        assert_eq!(real.rows_read(), 676);
        assert_eq!(real.len(), 676, "676 distinct (job, index, window) keys");
        assert_eq!(real.tasks(), 676);
        assert_eq!(real.parts(), &[0]);
        assert!(
            real.series(3418309, 0).iter().all(|(w, _)| *w == 0),
            "all rows are window 0"
        );
        // Line 1: 600000000,900000000,3418309,0,...,0.001562,0.06787,0.07568,...,0.03967,...,0.007243
        let u = real.get(3418309, 0, 0).unwrap();
        assert_eq!(
            u,
            Usage {
                cpu: 0.001562,
                max_cpu: 0.03967,
                mem: 0.07568,
                mai: 0.007243
            }
        );
        assert_eq!(real.get(3418309, 0, 1), None);
        // Line 24: empty CPI and MAI -> MAI 0.
        let u = real.get(3418339, 10, 0).unwrap();
        assert_eq!(
            u,
            Usage {
                cpu: 0.039,
                max_cpu: 0.176,
                mem: 0.09924,
                mai: 0.0
            }
        );
        // Line 651: idle task, empty max disk I/O, CPI and MAI.
        assert_eq!(real.get(259659137, 2, 0).unwrap(), Usage::default());
        // The parts filter.
        assert!(TaskUsage::load(root.path(), Some(&[0, 1]))
            .unwrap()
            .is_some());
        assert!(TaskUsage::load(root.path(), Some(&[1])).unwrap().is_none());
    }

    #[test]
    fn usage_real_gzip_and_absent_directory() {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        writeln!(gz, "{ROW1}").unwrap();
        let bytes = gz.finish().unwrap();
        let root = root_with("part-00007-of-00500.csv.gz", &bytes);
        let real = TaskUsage::load(root.path(), None).unwrap().unwrap();
        assert_eq!((real.len(), real.parts()), (1, &[7][..]));
        assert_eq!(real.get(3418309, 0, 0).unwrap().cpu, 0.001562);
        // Truncated gzip: a file error, not a panic.
        let root = root_with("part-00007-of-00500.csv.gz", &bytes[..bytes.len() / 2]);
        assert!(matches!(
            TaskUsage::load(root.path(), None),
            Err(TraceError::File { .. })
        ));
        // No task_usage/ directory.
        let empty = tempfile::tempdir().unwrap();
        assert!(TaskUsage::load(empty.path(), None).unwrap().is_none());
        // An empty part.
        let root = root_with("part-00000-of-00500.csv", b"");
        assert!(matches!(
            TaskUsage::load(root.path(), None),
            Err(TraceError::File { .. })
        ));
    }

    #[test]
    fn usage_real_windows_and_merging() {
        // Start 1200 s (window (1200-600)/300 = 2), two rows of one window merged by duration,
        // e-notation accepted, CRLF accepted.
        let row = |start: u64, end: u64, cpu: &str, max: &str| {
            format!("{start},{end},5,1,9,{cpu},0.1,0.2,0,0,0.1,0,0,{max},0,1.5,1e-2,0,1,0\r\n")
        };
        let text = row(1_200_000_000, 1_400_000_000, "3e-1", "0.5")
            + &row(1_400_000_000, 1_500_000_000, "0.6", "0.9")
            + &row(0, 900_000_000, "0.1", "0.2");
        let root = root_with("part-00001-of-00500.csv", text.as_bytes());
        let real = TaskUsage::load(root.path(), None).unwrap().unwrap();
        assert_eq!((real.rows_read(), real.len(), real.tasks()), (3, 2, 1));
        let u = real.get(5, 1, 2).unwrap();
        assert!(
            (u.cpu - 0.4).abs() < 1e-6 && u.max_cpu == 0.9 && (u.mai - 0.01).abs() < 1e-7,
            "{u:?}"
        );
        assert_eq!(real.get(5, 1, 0).unwrap().cpu, 0.1);
        let merged =
            TaskUsage::from_rows([(1, 2, 3, u), (1, 2, 3, Usage::default()), (1, 2, 4, u)]);
        assert_eq!(
            (merged.len(), merged.tasks(), merged.rows_read()),
            (2, 1, 3)
        );
        assert_eq!(merged.get(1, 2, 3).unwrap().cpu, u.cpu / 2.0);
        assert_eq!(merged.get(1, 2, 3).unwrap().max_cpu, u.max_cpu);
        assert_eq!(merged.at_or_before(1, 2, 100), Some((4, u)));
        assert_eq!(merged.at_or_before(1, 2, 2), None);
        assert_eq!(window_of_us(0), 0);
        assert_eq!(window_of_us(899_999_999), 0);
        assert_eq!(window_of_us(900_000_000), 1);
        assert_eq!(window_of(299), 0);
        assert_eq!(window_of(300), 1);
    }

    #[test]
    fn usage_real_bad_input_names_file_line_column() {
        let bad_cpu = ROW1.replacen("0.001562", "abc", 1);
        let (_, line, column, field, msg) = parse_error(&format!("{ROW1}\n{bad_cpu}\n"));
        assert_eq!((line, column, field), (2, 6, "mean CPU rate"));
        assert!(msg.contains("abc"), "{msg}");

        let short = ROW1.rsplit_once(',').unwrap().0;
        let (_, line, column, _, msg) = parse_error(&format!("{ROW1}\n{ROW1}\n{short}\n"));
        assert_eq!((line, column), (3, 20));
        assert!(msg.contains("expected 20 columns, found 19"), "{msg}");

        let (_, line, column, field, _) = parse_error(&format!("{ROW1},7\n"));
        assert_eq!((line, column, field), (1, 21, "end of row"));

        let no_job = ROW1.replacen("3418309", "", 1);
        let (_, _, column, field, msg) = parse_error(&no_job);
        assert_eq!((column, field), (3, "job ID"));
        assert!(msg.contains("missing"), "{msg}");

        for (text, col) in [("-0.5", 8), ("inf", 8), ("NaN", 8)] {
            let row = ROW1.replacen("0.07568", text, 1);
            let (_, _, column, field, _) = parse_error(&row);
            assert_eq!((column, field), (col, "assigned memory usage"), "{text}");
        }
        let (_, _, column, _, _) =
            parse_error(&ROW1.replacen("3418309,0,", "3418309,4294967296,", 1));
        assert_eq!(column, 4);
    }
}
