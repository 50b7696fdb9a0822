//! Where a key is in a TOML text, from `toml_edit`'s spans: the line of a dotted key path
//! (`be.cgroups`, `vm[1].name`) for an error about its value, and the key path a byte of the text
//! is in, for toml's own errors (a wrong type points at the value, not at its key).

use std::ops::Range;

use toml_edit::{ImDocument, Item, TableLike};

/// The 1-based line of `path` in `text`: of its key or, for a key that is not written, of the
/// nearest table above it that is (a missing key's section header). `None` if none of it is in
/// the text, or the text is not TOML.
pub fn line_of(text: &str, path: &str) -> Option<usize> {
    let doc = ImDocument::parse(text).ok()?;
    let mut table: &dyn TableLike = doc.as_table();
    let mut at = None;
    for step in path.split('.') {
        let (name, index) = match step.split_once('[') {
            Some((name, i)) => (name, i.trim_end_matches(']').parse::<usize>().ok()),
            None => (step, None),
        };
        let Some((key, item)) = table.get_key_value(name) else {
            break;
        };
        at = key.span().or_else(|| item.span()).or(at);
        let Some((span, inner)) = child(item, index) else {
            break;
        };
        at = span.or(at);
        table = inner;
    }
    let at = at?.start;
    Some(super::line_column(text, at).0)
}

/// A check's refusal of the value at `span` of `text` (a `toml::Spanned`'s span): `key` and
/// `problem`, with the value's line.
pub fn refused(
    text: &str,
    span: Range<usize>,
    key: impl Into<String>,
    problem: impl Into<String>,
) -> super::ConfigError {
    super::ConfigError::Key {
        key: key.into(),
        problem: problem.into(),
        line: Some(super::line_column(text, span.start).0),
    }
}

/// The dotted path of the key whose key or value holds byte `at` of `text` (`sensor.hysteresis`,
/// `vm[0].tap`); `None` if no key does, or the text is not TOML.
pub fn key_at(text: &str, at: usize) -> Option<String> {
    let doc = ImDocument::parse(text).ok()?;
    find(doc.as_table(), at)
}

fn find(table: &dyn TableLike, at: usize) -> Option<String> {
    let holds = |span: Option<Range<usize>>| span.is_some_and(|s| s.start <= at && at < s.end);
    for (name, item) in table.iter() {
        let list = item.as_array_of_tables().map_or(0, |a| a.len());
        if list > 0 {
            for i in 0..list {
                let (span, inner) = child(item, Some(i))?;
                if let Some(deeper) = find(inner, at) {
                    return Some(format!("{name}[{i}].{deeper}"));
                }
                if holds(span) {
                    return Some(format!("{name}[{i}]"));
                }
            }
        } else if let Some(deeper) = child(item, None).and_then(|(_, t)| find(t, at)) {
            return Some(format!("{name}.{deeper}"));
        }
        if holds(table.key(name).and_then(|k| k.span())) || holds(item.span()) {
            return Some(name.to_string());
        }
    }
    None
}

/// The table `item` is (the `index`th of an array of tables), and its span.
fn child(item: &Item, index: Option<usize>) -> Option<(Option<Range<usize>>, &dyn TableLike)> {
    match index {
        Some(i) => {
            let t = item.as_array_of_tables()?.get(i)?;
            Some((t.span(), t))
        }
        None => {
            let t = item.as_table_like()?;
            Some((item.span(), t))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "seed = 1\nvms.all = true\n\n[limits]\ncooldown_s = 1e300\n\
                        [[vm]]\nname = \"a\"\n[[vm]]\nweight = 2\ntaps = [\n  \"t\",\n]\n";

    #[test]
    fn line_of_a_key_or_of_the_table_above_a_missing_one() {
        assert_eq!(line_of(TEXT, "seed"), Some(1));
        assert_eq!(line_of(TEXT, "vms.all"), Some(2));
        assert_eq!(line_of(TEXT, "limits.cooldown_s"), Some(5));
        assert_eq!(line_of(TEXT, "vm[0].name"), Some(7));
        assert_eq!(line_of(TEXT, "vm[1].taps"), Some(10));
        assert_eq!(line_of(TEXT, "vm[1].name"), Some(8), "its [[vm]] header");
        assert_eq!(line_of(TEXT, "limits.min_task_age_s"), Some(4));
        assert_eq!(line_of(TEXT, "be"), None);
        assert_eq!(line_of("x = [", "x"), None);
    }

    #[test]
    fn key_at_a_key_or_its_value() {
        let at = |s: &str| key_at(TEXT, TEXT.find(s).unwrap());
        assert_eq!(at("seed").as_deref(), Some("seed"));
        assert_eq!(at("true").as_deref(), Some("vms.all"));
        assert_eq!(at("1e300").as_deref(), Some("limits.cooldown_s"));
        assert_eq!(at("name").as_deref(), Some("vm[0].name"));
        assert_eq!(at("\"t\"").as_deref(), Some("vm[1].taps"));
        assert_eq!(key_at(TEXT, TEXT.find("\n\n").unwrap() + 1), None);
    }
}
