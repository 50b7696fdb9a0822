//! A trace root in the official ClusterData2011-2 layout: one directory per table, each table split
//! into parts named `part-NNNNN-of-MMMMM.csv.gz`. We also accept plain `.csv` parts (someone who
//! gunzipped them) and a tag between the name and the extension, as in the real head-of-file
//! samples (`part-00000-of-00500.head1015.csv`). Any `-of-MMMMM` total is accepted: a user may hold
//! only some of the 500 parts.
use std::path::{Path, PathBuf};

use crate::error::{Result, TraceError};

/// One part file of a table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    /// `NNNNN` in `part-NNNNN-of-MMMMM`.
    pub number: u32,
    /// `MMMMM`: how many parts the whole table has.
    pub of: u32,
    pub path: PathBuf,
    /// True for `.csv.gz`, false for plain `.csv`.
    pub gzip: bool,
}

/// A trace root: `task_events/` is required, the other tables are optional.
#[derive(Clone, Debug)]
pub struct TraceRoot {
    pub path: PathBuf,
    /// The `task_events` parts, sorted by part number (parts are consecutive in time).
    pub task_events: Vec<Part>,
    /// `task_usage/` if the directory exists (its parts are read by `usage`).
    pub task_usage: Option<PathBuf>,
    /// `machine_events/` if the directory exists.
    pub machine_events: Option<PathBuf>,
    /// `job_events/` if the directory exists.
    pub job_events: Option<PathBuf>,
}

impl TraceRoot {
    /// Opens a trace root. Fails with `TraceError::File` if `path/task_events/` does not exist or
    /// holds no part files.
    pub fn open(path: impl AsRef<Path>) -> Result<TraceRoot> {
        let path = path.as_ref().to_path_buf();
        if !path.is_dir() {
            return Err(TraceError::File {
                file: path,
                msg: "not a directory (expected a trace root holding task_events/)".into(),
            });
        }
        let events_dir = path.join("task_events");
        if !events_dir.is_dir() {
            return Err(TraceError::File {
                file: events_dir,
                msg: "no task_events/ directory in the trace root".into(),
            });
        }
        let task_events = list_parts(&events_dir)?;
        if task_events.is_empty() {
            return Err(TraceError::File {
                file: events_dir,
                msg: "no part files (expected part-NNNNN-of-MMMMM.csv.gz or .csv)".into(),
            });
        }
        let table = |name: &str| Some(path.join(name)).filter(|dir| dir.is_dir());
        Ok(TraceRoot {
            task_usage: table("task_usage"),
            machine_events: table("machine_events"),
            job_events: table("job_events"),
            task_events,
            path,
        })
    }

    /// The part numbers of `task_events`, ascending.
    pub fn part_numbers(&self) -> Vec<u32> {
        self.task_events.iter().map(|p| p.number).collect()
    }

    /// The `task_events` parts selected by `numbers` (all parts for `None`), in part order.
    /// Numbers without a file are skipped (a range like `0-499` is a natural way to say "all"), but
    /// a selection that matches no part at all is a `TraceError::Usage`.
    pub fn select_parts(&self, numbers: Option<&[u32]>) -> Result<Vec<&Part>> {
        let Some(numbers) = numbers else {
            return Ok(self.task_events.iter().collect());
        };
        let selected: Vec<&Part> = self
            .task_events
            .iter()
            .filter(|p| numbers.contains(&p.number))
            .collect();
        if selected.is_empty() {
            return Err(TraceError::Usage(format!(
                "--parts selects no task_events part of {} (it has parts {})",
                self.path.display(),
                describe_numbers(&self.part_numbers()),
            )));
        }
        Ok(selected)
    }

    /// Parses a `--parts` selection (see [`parse_parts`]) and checks that it matches at least one
    /// existing part of this root.
    pub fn parse_parts(&self, spec: &str) -> Result<Vec<u32>> {
        let numbers = parse_parts(spec)?;
        self.select_parts(Some(&numbers))?;
        Ok(numbers)
    }
}

/// Lists the part files of one table directory, sorted by part number. Files that are not parts
/// (e.g. `SHA256SUMS`) are ignored; two files for the same part number (e.g. both `.csv` and
/// `.csv.gz`) are an error, because we could not tell which one the user meant.
pub fn list_parts(dir: &Path) -> Result<Vec<Part>> {
    let entries = std::fs::read_dir(dir).map_err(|e| TraceError::File {
        file: dir.to_path_buf(),
        msg: format!("cannot list directory: {e}"),
    })?;
    let mut parts = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| TraceError::File {
            file: dir.to_path_buf(),
            msg: format!("cannot list directory: {e}"),
        })?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some((number, of, gzip)) = parse_part_name(name) else {
            continue;
        };
        let path = entry.path();
        if !path.is_file() {
            continue;
        }
        parts.push(Part {
            number,
            of,
            path,
            gzip,
        });
    }
    parts.sort_by(|a, b| a.number.cmp(&b.number).then_with(|| a.path.cmp(&b.path)));
    if let Some(pair) = parts.windows(2).find(|w| w[0].number == w[1].number) {
        return Err(TraceError::File {
            file: pair[1].path.clone(),
            msg: format!(
                "two files for part {} ({} and this one): remove one",
                pair[0].number,
                pair[0].path.display()
            ),
        });
    }
    Ok(parts)
}

/// `part-NNNNN-of-MMMMM[.tag].csv[.gz]` -> (NNNNN, MMMMM, gzip).
fn parse_part_name(name: &str) -> Option<(u32, u32, bool)> {
    let rest = name.strip_prefix("part-")?;
    let (number, rest) = split_digits(rest)?;
    let rest = rest.strip_prefix("-of-")?;
    let (of, rest) = split_digits(rest)?;
    let (gzip, middle) = if let Some(m) = rest.strip_suffix(".csv.gz") {
        (true, m)
    } else {
        (false, rest.strip_suffix(".csv")?)
    };
    // Between the total and the extension: nothing, or a `.tag` (head-of-file samples).
    if !(middle.is_empty() || (middle.starts_with('.') && !middle.contains('/'))) {
        return None;
    }
    Some((number, of, gzip))
}

fn split_digits(s: &str) -> Option<(u32, &str)> {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    if end == 0 {
        return None;
    }
    Some((s[..end].parse().ok()?, &s[end..]))
}

/// Parses a `--parts` selection: comma-separated part numbers and inclusive ranges, e.g. `3`,
/// `0-9`, `0,2,5-7`. Returns the numbers ascending, without duplicates. Bad syntax (empty items,
/// `7-5`, non-numbers) is a `TraceError::Usage`.
pub fn parse_parts(spec: &str) -> Result<Vec<u32>> {
    let bad = |why: &str| {
        TraceError::Usage(format!(
            "bad --parts `{spec}`: {why} (expected e.g. `3`, `0-9` or `0,2,5-7`)"
        ))
    };
    let number = |s: &str| -> Result<u32> {
        let s = s.trim();
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad(&format!("`{s}` is not a part number")));
        }
        s.parse().map_err(|_| bad(&format!("`{s}` is too large")))
    };
    if spec.trim().is_empty() {
        return Err(bad("empty selection"));
    }
    let mut numbers = Vec::new();
    for item in spec.split(',') {
        match item.split_once('-') {
            Some((lo, hi)) => {
                let (lo, hi) = (number(lo)?, number(hi)?);
                if lo > hi {
                    return Err(bad(&format!("range `{}` runs backwards", item.trim())));
                }
                if hi - lo > 1_000_000 {
                    return Err(bad(&format!("range `{}` is too large", item.trim())));
                }
                numbers.extend(lo..=hi);
            }
            None => numbers.push(number(item)?),
        }
    }
    numbers.sort_unstable();
    numbers.dedup();
    Ok(numbers)
}

/// `0-9,12` style summary of a sorted list of numbers, for messages.
fn describe_numbers(numbers: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < numbers.len() {
        let mut j = i;
        while j + 1 < numbers.len() && numbers[j + 1] == numbers[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            numbers[i].to_string()
        } else {
            format!("{}-{}", numbers[i], numbers[j])
        });
        i = j + 1;
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, b"").unwrap();
    }

    #[test]
    fn part_names() {
        assert_eq!(
            parse_part_name("part-00000-of-00500.csv.gz"),
            Some((0, 500, true))
        );
        assert_eq!(
            parse_part_name("part-00042-of-00500.csv"),
            Some((42, 500, false))
        );
        assert_eq!(parse_part_name("part-3-of-7.csv.gz"), Some((3, 7, true)));
        assert_eq!(
            parse_part_name("part-00000-of-00500.head1015.csv"),
            Some((0, 500, false))
        );
        assert_eq!(parse_part_name("part-00000-of-00500.csv.gz.tmp"), None);
        assert_eq!(parse_part_name("part-00000-of-00500.txt"), None);
        assert_eq!(parse_part_name("part-00000-of-00500xcsv"), None);
        assert_eq!(parse_part_name("part--of-00500.csv"), None);
        assert_eq!(parse_part_name("SHA256SUMS"), None);
    }

    #[test]
    fn parse_parts_syntax() {
        assert_eq!(parse_parts("0-9").unwrap(), (0..=9).collect::<Vec<_>>());
        assert_eq!(parse_parts("3").unwrap(), vec![3]);
        assert_eq!(parse_parts("0,2,5-7").unwrap(), vec![0, 2, 5, 6, 7]);
        assert_eq!(parse_parts(" 5-7 , 0,2,6").unwrap(), vec![0, 2, 5, 6, 7]);
        for bad in [
            "",
            "a",
            "1-",
            "-3",
            "7-5",
            "1,,2",
            "1.5",
            "0-9-3",
            "99999999999",
        ] {
            match parse_parts(bad) {
                Err(TraceError::Usage(msg)) => assert!(msg.contains("--parts"), "{msg}"),
                other => panic!("{bad:?}: expected a usage error, got {other:?}"),
            }
        }
    }

    #[test]
    fn open_lists_parts_and_tables() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        touch(&root.join("task_events/part-00002-of-00500.csv"));
        touch(&root.join("task_events/part-00000-of-00500.csv.gz"));
        touch(&root.join("task_events/part-00001-of-00500.csv.gz"));
        touch(&root.join("task_events/SHA256SUMS"));
        std::fs::create_dir_all(root.join("task_usage")).unwrap();
        std::fs::create_dir_all(root.join("job_events")).unwrap();
        let trace = TraceRoot::open(root).unwrap();
        assert_eq!(trace.part_numbers(), vec![0, 1, 2]);
        assert!(trace.task_events[0].gzip && !trace.task_events[2].gzip);
        assert_eq!(trace.task_events[0].of, 500);
        assert_eq!(trace.task_usage, Some(root.join("task_usage")));
        assert_eq!(trace.job_events, Some(root.join("job_events")));
        assert_eq!(trace.machine_events, None);

        assert_eq!(trace.parse_parts("0,2").unwrap(), vec![0, 2]);
        assert_eq!(
            trace.parse_parts("1-9").unwrap(),
            (1..=9).collect::<Vec<_>>()
        );
        let selected = trace.select_parts(Some(&[1, 2, 7])).unwrap();
        assert_eq!(
            selected.iter().map(|p| p.number).collect::<Vec<_>>(),
            vec![1, 2]
        );
        match trace.parse_parts("5-9") {
            Err(TraceError::Usage(msg)) => assert!(msg.contains("0-2"), "{msg}"),
            other => panic!("expected a usage error, got {other:?}"),
        }
    }

    #[test]
    fn open_errors_name_the_path() {
        let dir = tempfile::tempdir().unwrap();
        match TraceRoot::open(dir.path()) {
            Err(TraceError::File { file, msg }) => {
                assert_eq!(file, dir.path().join("task_events"));
                assert!(msg.contains("task_events"), "{msg}");
            }
            other => panic!("expected a file error, got {other:?}"),
        }
        std::fs::create_dir_all(dir.path().join("task_events")).unwrap();
        touch(&dir.path().join("task_events/notes.txt"));
        match TraceRoot::open(dir.path()) {
            Err(TraceError::File { file, msg }) => {
                assert_eq!(file, dir.path().join("task_events"));
                assert!(msg.contains("no part files"), "{msg}");
            }
            other => panic!("expected a file error, got {other:?}"),
        }
        match TraceRoot::open(dir.path().join("missing")) {
            Err(TraceError::File { file, .. }) => assert_eq!(file, dir.path().join("missing")),
            other => panic!("expected a file error, got {other:?}"),
        }
    }

    #[test]
    fn duplicate_part_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        touch(&dir.path().join("task_events/part-00000-of-00500.csv"));
        touch(&dir.path().join("task_events/part-00000-of-00500.csv.gz"));
        match TraceRoot::open(dir.path()) {
            Err(TraceError::File { msg, .. }) => assert!(msg.contains("two files"), "{msg}"),
            other => panic!("expected a file error, got {other:?}"),
        }
    }

    #[test]
    fn describe() {
        assert_eq!(describe_numbers(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
    }
}
