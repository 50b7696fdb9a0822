//! The reader of a sysfs rooted at a path (tests pass a fake tree in a tempdir): the counters of
//! a network device, read as [`KeptFile`]s.

use std::path::PathBuf;

use crate::fs::{fs_type, SYSFS_MAGIC};
use crate::kept::KeptFile;

#[derive(Clone, Debug)]
pub struct Sysfs {
    pub root: PathBuf,
    /// The root is a sysfs: its files may be kept open (see `kept`).
    keep: bool,
}

impl Sysfs {
    pub fn new(root: impl Into<PathBuf>) -> Sysfs {
        let root = root.into();
        let keep = fs_type(&root).is_ok_and(|t| t == SYSFS_MAGIC);
        Sysfs { root, keep }
    }

    /// The directory of network device `dev`'s counters (`class/net/<dev>/statistics`).
    pub fn net_stats(&self, dev: &str) -> PathBuf {
        self.root.join("class/net").join(dev).join("statistics")
    }

    /// Counter `name` of network device `dev` (`tx_dropped`, `rx_packets`, …).
    pub fn net_counter(&self, dev: &str, name: &str) -> KeptFile {
        KeptFile::new(self.net_stats(dev).join(name), self.keep)
    }

    /// Whether the root shows network device `dev`.
    pub fn has_net_device(&self, dev: &str) -> bool {
        self.root.join("class/net").join(dev).exists()
    }
}
