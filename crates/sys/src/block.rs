//! Attributes under a sysfs root read as text, for the readers of block devices' caches
//! (colosched-vms reads bcache's: a backing device's `block/<dev>/bcache/` and, through its
//! `cache` link, its cache set's `fs/bcache/<uuid>/`). What the text means is the caller's.

use std::path::Path;

use crate::error::{if_exists, read, Result};
use crate::Sysfs;

impl Sysfs {
    /// Attribute `rel` of the root (`cache_mode`, `stats_total/cache_hits`): its text, without
    /// the newline(s) it ends with.
    pub fn attr(&self, rel: impl AsRef<Path>) -> Result<String> {
        let text = read(&self.root.join(rel))?;
        Ok(text.trim_end_matches('\n').to_string())
    }

    /// Attribute `rel`, or `None` when the root has no such file (one some kernels lack).
    pub fn attr_if_any(&self, rel: impl AsRef<Path>) -> Result<Option<String>> {
        if_exists(self.attr(rel))
    }

    /// Whether the root has `rel` (a file, a directory, or a link that leads somewhere).
    pub fn has(&self, rel: impl AsRef<Path>) -> bool {
        self.root.join(rel).exists()
    }

    /// The name of the directory link `rel` leads to (a bcache device's `cache` link: its
    /// cache set's UUID); `None` when it leads nowhere.
    pub fn link_name(&self, rel: impl AsRef<Path>) -> Option<String> {
        let target = std::fs::canonicalize(self.root.join(rel)).ok()?;
        Some(target.file_name()?.to_string_lossy().into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_are_read_under_the_root_without_their_newline() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("fs/bcache/f8c3/stats")).unwrap();
        std::fs::write(d.path().join("fs/bcache/f8c3/stats/hits"), "42\n").unwrap();
        std::fs::create_dir_all(d.path().join("block/bcache0/bcache")).unwrap();
        std::os::unix::fs::symlink(
            "../../../fs/bcache/f8c3",
            d.path().join("block/bcache0/bcache/cache"),
        )
        .unwrap();
        let sys = Sysfs::new(d.path().join("block/bcache0/bcache"));
        assert_eq!(sys.attr("cache/stats/hits").unwrap(), "42");
        assert_eq!(
            sys.attr_if_any("cache/stats/hits").unwrap().as_deref(),
            Some("42")
        );
        assert_eq!(sys.attr_if_any("cache/stats/misses").unwrap(), None);
        assert!(sys.has("cache") && !sys.has("cache/misses"));
        assert_eq!(sys.link_name("cache").as_deref(), Some("f8c3"));
        assert_eq!(sys.link_name("nowhere"), None);
        let e = sys.attr("state").unwrap_err();
        assert_eq!(e.path(), d.path().join("block/bcache0/bcache/state"));
        // A directory is not an attribute: an error, not "none".
        assert!(sys.attr_if_any("cache").is_err());
    }
}
