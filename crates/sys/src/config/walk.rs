//! Config files walked by hand: TOML text parsed into a table whose every key is known
//! (`parse_table`), read through `Section`, which names `section.key` in every error. Both
//! agents' configs use it, until they are read with serde as the scenario files are (`super`).

use std::path::PathBuf;

/// A config the agent cannot use: a key with a value it cannot take, or TOML that does not
/// parse (the message has the line and column).
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum Error {
    #[error("{key}: {msg}")]
    Key { key: String, msg: String },
    #[error("{0}")]
    Syntax(String),
}

impl Error {
    pub fn key(key: impl Into<String>, msg: impl ToString) -> Error {
        Error::Key {
            key: key.into(),
            msg: msg.to_string(),
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// A typed view of one TOML table that names `section.key` in every error.
pub struct Section<'a> {
    pub name: String,
    pub table: Option<&'a toml::Table>,
}

impl<'a> Section<'a> {
    pub fn key(&self, k: &str) -> String {
        if self.name.is_empty() {
            k.to_string()
        } else {
            format!("{}.{k}", self.name)
        }
    }
    pub fn get(&self, k: &str) -> Option<&'a toml::Value> {
        self.table?.get(k)
    }
    pub fn num(&self, k: &str) -> Result<Option<f64>> {
        match self.get(k) {
            None => Ok(None),
            Some(toml::Value::Float(f)) => Ok(Some(*f)),
            Some(toml::Value::Integer(i)) => Ok(Some(*i as f64)),
            Some(v) => Err(Error::key(
                self.key(k),
                format!("expected a number, got {}", v.type_str()),
            )),
        }
    }
    pub fn str(&self, k: &str) -> Result<Option<&'a str>> {
        match self.get(k) {
            None => Ok(None),
            Some(toml::Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(Error::key(
                self.key(k),
                format!("expected a string, got {}", v.type_str()),
            )),
        }
    }
    pub fn bool(&self, k: &str) -> Result<Option<bool>> {
        match self.get(k) {
            None => Ok(None),
            Some(toml::Value::Boolean(b)) => Ok(Some(*b)),
            Some(v) => Err(Error::key(
                self.key(k),
                format!("expected true or false, got {}", v.type_str()),
            )),
        }
    }
    pub fn strings(&self, k: &str) -> Result<Option<Vec<String>>> {
        let Some(v) = self.get(k) else {
            return Ok(None);
        };
        let bad = || Error::key(self.key(k), "expected a list of strings");
        let arr = v.as_array().ok_or_else(bad)?;
        arr.iter()
            .map(|x| x.as_str().map(str::to_string).ok_or_else(bad))
            .collect::<Result<_>>()
            .map(Some)
    }
    pub fn paths(&self, k: &str) -> Result<Vec<PathBuf>> {
        let list = self.strings(k)?.unwrap_or_default();
        if list.iter().any(|p| p.trim().is_empty()) {
            return Err(Error::key(self.key(k), "an empty path"));
        }
        Ok(list.into_iter().map(PathBuf::from).collect())
    }
    /// A TOML integer from `lo` to `hi`. A float is refused, even a whole one (`1e300`, `2.0`):
    /// a count written as a float is a mistake, and past 2^53 a float is not the integer it
    /// reads as.
    pub fn int(&self, k: &str, lo: i64, hi: i64) -> Result<Option<i64>> {
        let what = || format!("an integer from {lo} to {hi}");
        match self.get(k) {
            None => Ok(None),
            Some(toml::Value::Integer(i)) if (lo..=hi).contains(i) => Ok(Some(*i)),
            Some(toml::Value::Integer(i)) => Err(Error::key(
                self.key(k),
                format!("must be {}, got {i}", what()),
            )),
            Some(toml::Value::Float(f)) => Err(Error::key(
                self.key(k),
                format!("must be {}, got the float {f:?}", what()),
            )),
            Some(v) => Err(Error::key(
                self.key(k),
                format!("must be {}, got {}", what(), v.type_str()),
            )),
        }
    }
    /// A number that must satisfy `ok`, described by `what` in the error.
    pub fn checked(&self, k: &str, what: &str, ok: impl Fn(f64) -> bool) -> Result<Option<f64>> {
        match self.num(k)? {
            Some(x) if !(x.is_finite() && ok(x)) => {
                Err(Error::key(self.key(k), format!("must be {what}, got {x}")))
            }
            x => Ok(x),
        }
    }
}

/// TOML text as a table whose keys are all in `known` (see `check_known`); a syntax error on one
/// line, with its line and column.
pub fn parse_table(text: &str, known: &[(&str, &[&str])]) -> Result<toml::Table> {
    let root: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| Error::Syntax(e.to_string().trim().replace('\n', " ")))?;
    check_known(&root, known)?;
    Ok(root)
}

/// Refuses a key `known` does not list (a typo must not fall back to a default silently) and a
/// section that is not a table. `known` maps each section ("" = the top level) to its keys.
fn check_known(root: &toml::Table, known: &[(&str, &[&str])]) -> Result<()> {
    for (section, keys) in known {
        let table = if section.is_empty() {
            Some(root)
        } else {
            match root.get(*section) {
                None => None,
                Some(toml::Value::Table(t)) => Some(t),
                Some(_) => {
                    return Err(Error::key(
                        *section,
                        format!("expected a table [{section}]"),
                    ))
                }
            }
        };
        for k in table.into_iter().flat_map(|t| t.keys()) {
            if !keys.contains(&k.as_str()) {
                let name = if section.is_empty() {
                    k.clone()
                } else {
                    format!("{section}.{k}")
                };
                return Err(Error::key(
                    name,
                    format!("unknown key (known: {})", keys.join(", ")),
                ));
            }
        }
    }
    Ok(())
}
