//! A memory cgroup's limit files (v1 `memory.limit_in_bytes`, `memory.memsw.limit_in_bytes`;
//! v2 `memory.max`, `memory.high`), read through `Cgroupfs` like its other files.

use crate::error::{Error, Result};
use crate::Cgroupfs;

/// A v1 limit at or above this is "no limit" (the kernel reports PAGE_COUNTER_MAX pages).
const UNLIMITED: u64 = 1 << 62;

impl Cgroupfs {
    /// The limit in the root's `file`: bytes, or None for no limit (v2 `max`, or v1's huge
    /// "unlimited" value). The error names the file.
    pub fn limit(&self, file: &str) -> Result<Option<u64>> {
        let path = self.root.join(file);
        parse_limit(self.read(file)?.trim()).map_err(|e| Error::parse(&path, e))
    }
}

/// A limit file's text: a number of bytes, `max` (v2) or a huge v1 value → None (no limit).
pub fn parse_limit(text: &str) -> std::result::Result<Option<u64>, String> {
    if text == "max" {
        return Ok(None);
    }
    let v: u64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number of bytes or \"max\""))?;
    Ok((v < UNLIMITED).then_some(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_parse() {
        assert_eq!(parse_limit("max"), Ok(None));
        assert_eq!(parse_limit("9223372036854771712"), Ok(None));
        assert_eq!(parse_limit("536870912"), Ok(Some(512 << 20)));
        assert!(parse_limit("lots").is_err());
    }

    #[test]
    fn a_limit_file_is_read_and_its_errors_name_it() {
        let dir = tempfile::tempdir().unwrap();
        let cg = Cgroupfs::new(dir.path());
        std::fs::write(dir.path().join("memory.max"), "max\n").unwrap();
        std::fs::write(dir.path().join("memory.high"), "1048576\n").unwrap();
        std::fs::write(dir.path().join("memory.limit_in_bytes"), "lots\n").unwrap();
        assert_eq!(cg.limit("memory.max").unwrap(), None);
        assert_eq!(cg.limit("memory.high").unwrap(), Some(1 << 20));
        let e = cg.limit("memory.limit_in_bytes").unwrap_err();
        assert_eq!(e.path(), dir.path().join("memory.limit_in_bytes"));
        assert!(e.msg().contains("\"lots\" is not a number of bytes"), "{e}");
        let e = cg.limit("memory.memsw.limit_in_bytes").unwrap_err();
        assert!(matches!(e, Error::Io { .. }), "{e}");
    }
}
