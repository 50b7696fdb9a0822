//! The watcher's errors. Every error from `MemoryThresholdWatcher::open` is the caller's to fix
//! (a flag, the cgroup given, a limit the kernel or `ulimit -n` sets): exit 2 on the command
//! line, `ValueError` in Python. An error from `wait` is a failure while watching: exit 1,
//! `RuntimeError`.

use std::io;
use std::path::PathBuf;

use rustix::io::Errno;

#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// A flag the watcher cannot use, with the value given when that is what is wrong
    /// (`--threshold 80%: …`, `--cgroup /x: …`, `--memsw: …`).
    #[error("{flag}{}: {msg}", .value.as_ref().map(|v| format!(" {v}")).unwrap_or_default())]
    Flag {
        flag: &'static str,
        value: Option<String>,
        msg: String,
    },
    /// A cgroup file that cannot be read or makes no sense (the reader's error names the file),
    /// with the flag that made the watcher read it, if one did.
    #[error("{}{source}", .flag.map(|f| format!("{f}: ")).unwrap_or_default())]
    Read {
        flag: Option<&'static str>,
        source: colosched_sys::Error,
    },
    /// A write into a cgroup file that the kernel refused: a v1 threshold registration, a PSI
    /// trigger, `memory.high`.
    #[error("{flag}: {} refused {what}: {}", .path.display(), explain(.source))]
    Refused {
        flag: &'static str,
        path: PathBuf,
        what: String,
        source: io::Error,
    },
    /// A system call that failed (an eventfd or the signal pipe: the open-file limit; poll), and
    /// what it was for.
    #[error("{what}: {call}: {}", explain(.source))]
    Call {
        what: String,
        call: &'static str,
        source: io::Error,
    },
}

impl WatchError {
    pub(crate) fn flag(flag: &'static str, value: impl ToString, msg: impl ToString) -> Self {
        WatchError::Flag {
            flag,
            value: Some(value.to_string()),
            msg: msg.to_string(),
        }
    }

    /// A flag wrong whatever its value (`--memsw` on cgroup v2).
    pub(crate) fn bare_flag(flag: &'static str, msg: impl ToString) -> Self {
        WatchError::Flag {
            flag,
            value: None,
            msg: msg.to_string(),
        }
    }
}

/// A cgroup file that could not be read, read for no flag in particular.
impl From<colosched_sys::Error> for WatchError {
    fn from(source: colosched_sys::Error) -> Self {
        WatchError::Read { flag: None, source }
    }
}

/// A value that does not parse (a size, a duration, a threshold, a backend, a signal): the text
/// given, and the message, which names it.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{msg}")]
pub struct ParseError {
    pub value: String,
    pub msg: String,
}

impl ParseError {
    pub(crate) fn new(value: &str, msg: impl ToString) -> Self {
        ParseError {
            value: value.to_string(),
            msg: msg.to_string(),
        }
    }
}

/// An error, with what to do about the ones a big watch runs into.
pub fn explain(e: &io::Error) -> String {
    match e.raw_os_error().map(Errno::from_raw_os_error) {
        Some(Errno::MFILE) => format!(
            "{e} (the open-file limit, `ulimit -n` = {}, is too low: each threshold needs one fd)",
            nofile_limit()
        ),
        Some(Errno::NOMEM) => format!("{e} (the kernel could not allocate the registration)"),
        _ => e.to_string(),
    }
}

fn nofile_limit() -> u64 {
    rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(u64::MAX)
}
