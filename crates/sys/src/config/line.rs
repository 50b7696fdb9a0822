//! Where a value is in a config file's text, for the checks made after `from_toml`: a value
//! read as a `toml::Spanned` knows its bytes, and an error about it names its line.

use std::ops::Range;

use super::ConfigError;

/// The 1-based line of byte `at` of `text`.
pub fn line_of(text: &str, at: usize) -> usize {
    super::line_column(text, at).0
}

/// `key: problem (line N)`, N the line of the value at `span` of `text` (a `Spanned`'s span).
pub fn key_at(
    text: &str,
    span: Range<usize>,
    key: impl Into<String>,
    problem: impl Into<String>,
) -> ConfigError {
    let problem = problem.into();
    ConfigError::key(
        key,
        format!("{problem} (line {})", line_of(text, span.start)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize)]
    struct Keys {
        speed: toml::Spanned<f64>,
    }

    #[test]
    fn a_spanned_value_is_named_with_its_line() {
        let text = "# speed\n\nspeed = -1\n";
        let k: Keys = super::super::from_toml(text).unwrap();
        assert_eq!(line_of(text, k.speed.span().start), 3);
        let e = key_at(text, k.speed.span(), "speed", "must be positive, got -1");
        assert_eq!(e.to_string(), "speed: must be positive, got -1 (line 3)");
        assert_eq!(line_of(text, 0), 1);
        assert_eq!(line_of(text, 999), 4, "past the end: the last line");
    }
}
