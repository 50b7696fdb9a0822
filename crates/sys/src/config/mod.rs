//! Reading a TOML config or scenario file into a `serde` type: the one way the colosched crates
//! read their files. Types declare `#[serde(deny_unknown_fields)]`, so a typo is refused; the
//! error carries toml's line and column and names the key, on one line for a terminal and a log.
//! Checks of values (ranges, keys that depend on each other) are the caller's, after this; `line`
//! finds the line of the key a check refused, for its error.

pub mod line;

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
    /// The dotted path of the key toml refused or whose value it refused (`sensor.hysteresis`),
    /// when it said where: its message names an unknown key but not its table, and a value of
    /// the wrong type not at all.
    pub key: Option<String>,
}

/// What is wrong with a file's text: toml's refusal, or a value the caller's checks refused.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// Not TOML, an unknown key, or a value of the wrong type (with its line and column).
    #[error(transparent)]
    Toml(#[from] TomlError),
    /// A value out of its range, missing, or at odds with another: the key's path
    /// (`vms[2].phase_ms`), what is wrong, and the key's line in the file when known
    /// (`at_line_in`). The line is not in this message: whoever names the file writes
    /// `file:line: key: problem`.
    #[error("{key}: {problem}")]
    Key {
        key: String,
        problem: String,
        line: Option<usize>,
    },
}

impl ConfigError {
    pub fn key(key: impl Into<String>, problem: impl Into<String>) -> ConfigError {
        ConfigError::Key {
            key: key.into(),
            problem: problem.into(),
            line: None,
        }
    }

    /// This error with its key's line in `text` (`line::line_of`), if it is about a key.
    pub fn at_line_in(self, text: &str) -> ConfigError {
        match self {
            ConfigError::Key { key, problem, .. } => ConfigError::Key {
                line: line::line_of(text, &key),
                key,
                problem,
            },
            toml => toml,
        }
    }

    /// `:LINE` for a key's error whose line is known, else nothing: an error about a file's text
    /// shows as `{file}{line_suffix}: {self}` (toml's own message already says where).
    pub fn line_suffix(&self) -> String {
        match self {
            ConfigError::Key {
                line: Some(line), ..
            } => format!(":{line}"),
            _ => String::new(),
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
            key: e.span().and_then(|span| line::key_at(text, span.start)),
        }
    })
}

/// A TOML integer, for a count. A float is refused, even a whole one (`1e300`, `2.0`): a count
/// written as a float is a mistake, and past 2^53 a float is not the integer it reads as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Integer(pub i64);

impl<'de> serde::Deserialize<'de> for Integer {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Integer, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Integer;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an integer")
            }
            fn visit_i64<E>(self, v: i64) -> Result<Integer, E> {
                Ok(Integer(v))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Integer, E> {
                Err(E::custom(format!(
                    "expected an integer, got the float {v:?}"
                )))
            }
        }
        d.deserialize_i64(Visitor)
    }
}

/// `x`, if given, checked to be an integer from `lo` to `hi`.
pub fn int_in(key: &str, x: Option<Integer>, lo: i64, hi: i64) -> Result<Option<i64>, ConfigError> {
    match x.map(|Integer(i)| i) {
        Some(i) if !(lo..=hi).contains(&i) => Err(ConfigError::key(
            key,
            format!("must be an integer from {lo} to {hi}, got {i}"),
        )),
        x => Ok(x),
    }
}

/// `x`, if given, checked to be a finite number that satisfies `ok`, which `what` describes.
pub fn number(
    key: &str,
    x: Option<f64>,
    what: &str,
    ok: impl Fn(f64) -> bool,
) -> Result<Option<f64>, ConfigError> {
    match x {
        Some(x) if !(x.is_finite() && ok(x)) => {
            Err(ConfigError::key(key, format!("must be {what}, got {x}")))
        }
        x => Ok(x),
    }
}

/// A list of paths, none of them empty.
pub fn paths(key: &str, list: Vec<String>) -> Result<Vec<PathBuf>, ConfigError> {
    if list.iter().any(|p| p.trim().is_empty()) {
        return Err(ConfigError::key(key, "an empty path"));
    }
    Ok(list.into_iter().map(PathBuf::from).collect())
}

/// The file at `path`, as text.
pub fn read(path: &Path) -> Result<String, ReadError> {
    std::fs::read_to_string(path).map_err(|source| ReadError {
        path: path.to_path_buf(),
        source,
    })
}

/// The 1-based line and column (in characters) of byte `at` of `text`.
pub(crate) fn line_column(text: &str, at: usize) -> (usize, usize) {
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
        assert_eq!(e.key.as_deref(), Some("sped"));
        let e = from_toml::<Keys>("speed = \"fast\"").unwrap_err();
        assert_eq!((e.line, e.column), (1, 9));
        assert!(e.message.contains("invalid type: string \"fast\""), "{e}");
        assert_eq!(
            e.key.as_deref(),
            Some("speed"),
            "the key of the value refused"
        );
        assert_eq!(from_toml::<Keys>("speed = [").unwrap_err().key, None);
        assert_eq!(from_toml::<Keys>("speed = 2").unwrap().speed, Some(2.0));
    }

    #[derive(Debug, serde::Deserialize)]
    struct Count {
        n: Integer,
    }

    #[test]
    fn an_integer_refuses_a_float_even_a_whole_one() {
        assert_eq!(from_toml::<Count>("n = -3").unwrap().n, Integer(-3));
        for (float, shown) in [("1e300", "1e300"), ("2.0", "2.0"), ("nan", "NaN")] {
            let e = from_toml::<Count>(&format!("n = {float}")).unwrap_err();
            assert_eq!((e.line, e.column, e.key.as_deref()), (1, 5, Some("n")));
            let want = format!("expected an integer, got the float {shown}");
            assert!(e.message.ends_with(&want), "{e}");
        }
        let e = from_toml::<Count>("n = \"3\"").unwrap_err();
        assert!(
            e.message
                .ends_with("invalid type: string \"3\", expected an integer"),
            "{e}"
        );
    }

    #[test]
    fn a_key_error_takes_its_line_from_the_text() {
        let e = ConfigError::key("limits.cooldown_s", "too long")
            .at_line_in("a = 1\n[limits]\ncooldown_s = 9\n");
        assert_eq!(
            e,
            ConfigError::Key {
                key: "limits.cooldown_s".into(),
                problem: "too long".into(),
                line: Some(3)
            }
        );
        assert_eq!(e.to_string(), "limits.cooldown_s: too long");
        assert_eq!(e.line_suffix(), ":3");
        assert_eq!(ConfigError::key("a", "b").line_suffix(), "");
    }

    #[test]
    fn value_checks_name_the_key() {
        assert_eq!(int_in("n", Some(Integer(3)), 1, 3), Ok(Some(3)));
        assert_eq!(
            int_in("n", Some(Integer(0)), 1, 3).unwrap_err().to_string(),
            "n: must be an integer from 1 to 3, got 0"
        );
        assert_eq!(number("x", None, "positive", |x| x > 0.0), Ok(None));
        assert_eq!(
            number("x", Some(f64::NAN), "positive", |x| x > 0.0)
                .unwrap_err()
                .to_string(),
            "x: must be positive, got NaN"
        );
        assert_eq!(
            paths("p", vec!["/a".into(), " ".into()])
                .unwrap_err()
                .to_string(),
            "p: an empty path"
        );
    }

    #[test]
    fn read_names_the_file() {
        let e = read(Path::new("/nonexistent/x.toml")).unwrap_err();
        assert!(e.to_string().starts_with("/nonexistent/x.toml: "), "{e}");
    }
}
