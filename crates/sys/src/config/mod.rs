//! Reading a TOML config or scenario file into a `serde` type: the one way the colosched crates
//! read their files. Types declare `#[serde(deny_unknown_fields)]`, so a typo is refused; the
//! error carries toml's line and column and names the key, on one line for a terminal and a log.
//! Checks of values (ranges, keys that depend on each other) are the caller's, after this.
//!
//! The agents' two configs are still walked by hand (`walk`: `parse_table`, `Section`), until
//! they are read this way too.

pub mod line;
pub mod walk;

pub use walk::{parse_table, Section};

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

/// Text that is not TOML, an unknown key, or a value of the wrong type.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct TomlError {
    /// 1-based; 0 when toml could not tell where.
    pub line: usize,
    pub column: usize,
    /// toml's message on one line (it starts with the line and column when it has them).
    pub message: String,
}

/// What is wrong with a file's text: toml's refusal, or a value the caller's checks refused.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// Not TOML, an unknown key, or a value of the wrong type (with its line and column).
    #[error(transparent)]
    Toml(#[from] TomlError),
    /// A value out of its range, missing, or at odds with another: the key's path
    /// (`vms[2].phase_ms`) and what is wrong.
    #[error("{key}: {problem}")]
    Key { key: String, problem: String },
}

impl ConfigError {
    pub fn key(key: impl Into<String>, problem: impl Into<String>) -> ConfigError {
        ConfigError::Key {
            key: key.into(),
            problem: problem.into(),
        }
    }
}

/// A file that could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub struct ReadError {
    pub path: PathBuf,
    pub source: std::io::Error,
}

/// `text` as a `T`.
pub fn from_toml<T: DeserializeOwned>(text: &str) -> Result<T, TomlError> {
    toml::from_str(text).map_err(|e| {
        let (line, column) = match e.span() {
            Some(span) => line_column(text, span.start),
            None => (0, 0),
        };
        TomlError {
            line,
            column,
            message: one_line(&e.to_string()),
        }
    })
}

/// The file at `path`, as text.
pub fn read(path: &Path) -> Result<String, ReadError> {
    std::fs::read_to_string(path).map_err(|source| ReadError {
        path: path.to_path_buf(),
        source,
    })
}

/// The 1-based line and column (in characters) of byte `at` of `text`.
fn line_column(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at.min(text.len())];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (
        before.matches('\n').count() + 1,
        before[line_start..].chars().count() + 1,
    )
}

/// toml's errors come on several lines (the line, a caret, the message): one line for a terminal
/// and a log, the line number kept.
pub fn one_line(e: &str) -> String {
    let mut parts = e
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('|'));
    let head = parts.next().unwrap_or_default().to_string();
    let rest: Vec<&str> = parts
        .filter(|l| !l.chars().next().is_some_and(|c| c.is_ascii_digit()))
        .collect();
    if rest.is_empty() {
        head
    } else {
        format!("{head}: {}", rest.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Keys {
        speed: Option<f64>,
    }

    #[test]
    fn an_unknown_key_is_refused_with_its_line_and_column_and_name() {
        let e = from_toml::<Keys>("speed = 1\n  sped = 2\n").unwrap_err();
        assert_eq!((e.line, e.column), (2, 3));
        assert!(
            e.message
                .starts_with("TOML parse error at line 2, column 3"),
            "{e}"
        );
        assert!(e.message.contains("unknown field `sped`"), "{e}");
        assert!(!e.message.contains('\n'), "{e}");
        let e = from_toml::<Keys>("speed = \"fast\"").unwrap_err();
        assert_eq!((e.line, e.column), (1, 9));
        assert!(e.message.contains("invalid type: string \"fast\""), "{e}");
        assert_eq!(from_toml::<Keys>("speed = 2").unwrap().speed, Some(2.0));
    }

    #[test]
    fn read_names_the_file() {
        let e = read(Path::new("/nonexistent/x.toml")).unwrap_err();
        assert!(e.to_string().starts_with("/nonexistent/x.toml: "), "{e}");
    }
}
