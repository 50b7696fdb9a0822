//! The agents' errors (the node agent's and the host agent's), by what the caller does about
//! them: a config the agent cannot use is a usage error (exit 2); a state file it cannot write
//! stops it changing anything; anything else fails the cycle or window (the loop logs it,
//! rate-limited, and goes on).

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// A configuration key (or command-line flag) with a value the agent cannot use.
    #[error("{key}: {msg}")]
    Config { key: String, msg: String },
    /// The state file or its lock cannot be read or written.
    #[error("state file {}: {msg}", path.display())]
    State { path: PathBuf, msg: String },
    /// A system file that cannot be read or makes no sense.
    #[error("{}: {msg}", path.display())]
    Read { path: PathBuf, msg: String },
    /// A config file that cannot be read, or whose TOML does not parse (the message has the
    /// line and column).
    #[error("{0}")]
    Syntax(String),
    /// An error in a file: what the file said, named with it and, for a key's value, the key's
    /// line (`file:line: key: problem`).
    #[error("{}{}: {source}", path.display(), line.map(|n| format!(":{n}")).unwrap_or_default())]
    InFile {
        path: PathBuf,
        line: Option<usize>,
        source: Box<AgentError>,
    },
    /// Anything else at run time (the metrics listener, the signal pipe, the decision log, a
    /// group that cannot be made).
    #[error("{0}")]
    Runtime(String),
}

impl AgentError {
    pub fn config(key: impl Into<String>, msg: impl ToString) -> AgentError {
        AgentError::Config {
            key: key.into(),
            msg: msg.to_string(),
        }
    }

    pub fn state(path: impl Into<PathBuf>, msg: impl ToString) -> AgentError {
        AgentError::State {
            path: path.into(),
            msg: msg.to_string(),
        }
    }

    pub fn read(path: impl Into<PathBuf>, msg: impl ToString) -> AgentError {
        AgentError::Read {
            path: path.into(),
            msg: msg.to_string(),
        }
    }

    /// A usage error: the configuration or the command line is wrong (exit 2).
    pub fn is_usage(&self) -> bool {
        match self {
            AgentError::Config { .. } | AgentError::Syntax(_) => true,
            AgentError::InFile { source, .. } => source.is_usage(),
            _ => false,
        }
    }

    /// `e`, named with the file it is about (a config file, for a value the system cannot
    /// honour too). A key's error gets the key's line, from the file read again (`None` for a
    /// key the file does not write, such as a command-line flag's).
    pub fn in_file(path: &Path, e: AgentError) -> AgentError {
        let line = match &e {
            AgentError::Config { key, .. } => std::fs::read_to_string(path)
                .ok()
                .and_then(|text| crate::config::line::line_of(&text, key)),
            _ => None,
        };
        AgentError::InFile {
            path: path.to_path_buf(),
            line,
            source: Box::new(e),
        }
    }
}

/// toml's refusal (not TOML, an unknown key, a wrong type): a usage error that names the key
/// when toml said where, and has the line and column.
impl From<crate::config::TomlError> for AgentError {
    fn from(e: crate::config::TomlError) -> AgentError {
        match e.key {
            Some(key) => AgentError::Syntax(format!("{key}: {}", e.message)),
            None => AgentError::Syntax(e.message),
        }
    }
}

/// A config's value a check refused (`ConfigError::Key`), or toml's refusal.
impl From<crate::config::ConfigError> for AgentError {
    fn from(e: crate::config::ConfigError) -> AgentError {
        match e {
            crate::config::ConfigError::Key { key, problem, .. } => {
                AgentError::config(key, problem)
            }
            crate::config::ConfigError::Toml(t) => t.into(),
        }
    }
}

impl From<crate::lock::LockError> for AgentError {
    fn from(e: crate::lock::LockError) -> AgentError {
        AgentError::State {
            path: e.path,
            msg: e.msg,
        }
    }
}

/// A system file the shared readers (`Procfs`, `Cgroupfs`, …) could not read: a `Read` error.
impl From<crate::Error> for AgentError {
    fn from(e: crate::Error) -> AgentError {
        AgentError::read(e.path(), e.msg())
    }
}

pub type Result<T> = std::result::Result<T, AgentError>;
