//! Errors that name the file, line and column, so a user can open the file at the fault.
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// A malformed row: `line` and `column` are 1-based, `field` is the schema's column name.
    #[error("{}:{line}: column {column} ({field}): {msg}", file.display())]
    Parse {
        file: PathBuf,
        line: u64,
        column: usize,
        field: &'static str,
        msg: String,
    },
    /// A whole-file problem: unreadable, truncated gzip, empty part, missing table.
    #[error("{}: {msg}", file.display())]
    File { file: PathBuf, msg: String },
    /// A bad argument (e.g. a `--parts` range that selects nothing).
    #[error("{0}")]
    Usage(String),
}

pub type Result<T> = std::result::Result<T, TraceError>;
