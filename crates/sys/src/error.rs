//! The readers' error: what could not be read, or made no sense, and the file it was in.

use std::io;
use std::path::{Path, PathBuf};

use colosched_core::cpuset::CpuSet;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be read (a task that is gone: `NotFound` or `ESRCH`).
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    /// The file was read but its text is not what the kernel writes there.
    #[error("{}: {msg}", path.display())]
    Parse { path: PathBuf, msg: String },
}

impl Error {
    pub fn io(path: impl Into<PathBuf>, source: io::Error) -> Error {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    pub fn parse(path: impl Into<PathBuf>, msg: impl ToString) -> Error {
        Error::Parse {
            path: path.into(),
            msg: msg.to_string(),
        }
    }

    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            Error::Io { path, .. } | Error::Parse { path, .. } => path,
        }
    }

    /// What went wrong, without the path.
    pub fn msg(&self) -> String {
        match self {
            Error::Io { source, .. } => source.to_string(),
            Error::Parse { msg, .. } => msg.clone(),
        }
    }
}

/// For callers that return `io::Error`: the same kind (`InvalidData` for text that makes no
/// sense) and the same text, path first.
impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        let kind = match &e {
            Error::Io { source, .. } => source.kind(),
            Error::Parse { .. } => io::ErrorKind::InvalidData,
        };
        io::Error::new(kind, e.to_string())
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// `path`'s text, or an error naming it.
pub fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| Error::io(path, e))
}

/// `r`, with a file that does not exist as `None` (an optional kernel file).
pub fn if_exists<T>(r: Result<T>) -> Result<Option<T>> {
    match r {
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => Ok(None),
        r => r.map(Some),
    }
}

/// The CPU list in the file at `path` (`0-3,8`: cpuset.cpus, a node's cpulist, an IRQ's
/// smp_affinity_list).
pub fn read_cpus(path: &Path) -> Result<CpuSet> {
    read(path)?.parse().map_err(|e| Error::parse(path, e))
}

/// The entries of `dir` whose names are numbers (pids, tids, fds), sorted; none if `dir` cannot
/// be read (its process is gone).
pub fn numeric_entries(dir: &Path) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<i32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    out.sort_unstable();
    out
}
