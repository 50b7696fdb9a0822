//! cgroup v2 pieces: `memory.events` counters (read through colosched-sys's `PolledFile`,
//! diffed) and the optional `memory.high` soft line (set while watching, the old value written
//! back on drop).

use std::fs;
use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};

use colosched_sys::polled::PolledFile;
use colosched_sys::Cgroupfs;

use crate::{ParseError, WatchError};

/// The `memory.events` counters the watcher reports, in file order.
pub const EVENT_NAMES: [&str; 6] = ["low", "high", "max", "oom", "oom_kill", "oom_group_kill"];

/// Counters from `memory.events` (missing keys are 0, unknown keys ignored).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemoryEvents(pub [u64; EVENT_NAMES.len()]);

impl MemoryEvents {
    pub fn get(&self, name: &str) -> u64 {
        EVENT_NAMES
            .iter()
            .position(|n| *n == name)
            .map_or(0, |i| self.0[i])
    }

    /// The counters that grew since `before`, with by how much.
    pub fn diff(&self, before: &MemoryEvents) -> Vec<(&'static str, u64)> {
        EVENT_NAMES
            .iter()
            .zip(self.0.iter().zip(before.0.iter()))
            .filter(|(_, (now, was))| now > was)
            .map(|(name, (now, was))| (*name, now - was))
            .collect()
    }
}

/// `low 0\nhigh 3\nmax 1\noom 0\noom_kill 0\n` → counters; errors name the line.
pub fn parse_memory_events(text: &str) -> Result<MemoryEvents, ParseError> {
    let mut ev = MemoryEvents::default();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let mut f = line.split_ascii_whitespace();
        let (Some(key), Some(val), None) = (f.next(), f.next(), f.next()) else {
            return Err(ParseError::new(
                line,
                format!("line {}: expected \"name count\", got {line:?}", n + 1),
            ));
        };
        let v: u64 = val.parse().map_err(|_| {
            ParseError::new(
                line,
                format!("line {}: {key}: {val:?} is not a count", n + 1),
            )
        })?;
        if let Some(i) = EVENT_NAMES.iter().position(|k| *k == key) {
            ev.0[i] = v;
        }
    }
    Ok(ev)
}

/// An open `memory.events` and the counters last seen.
pub struct EventsWatch {
    file: PolledFile,
    last: MemoryEvents,
}

impl EventsWatch {
    pub fn open(cgroup: &Path) -> Result<EventsWatch, WatchError> {
        let mut w = EventsWatch {
            file: PolledFile::open(cgroup.join("memory.events"))?,
            last: MemoryEvents::default(),
        };
        w.last = w.read()?;
        Ok(w)
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.file.fd()
    }

    /// Reading the file also re-arms poll(POLLPRI) on it.
    fn read(&self) -> Result<MemoryEvents, WatchError> {
        let text = self.file.read()?;
        parse_memory_events(&text)
            .map_err(|e| colosched_sys::Error::parse(self.file.path(), e).into())
    }

    /// True while the file can be read (false once its group is removed: ENODEV).
    pub fn readable(&self) -> bool {
        self.read().is_ok()
    }

    /// Counters that grew since the last call.
    pub fn changes(&mut self) -> Result<Vec<(&'static str, u64)>, WatchError> {
        let now = self.read()?;
        let d = now.diff(&self.last);
        self.last = now;
        Ok(d)
    }
}

/// `memory.high` set by the watcher; dropping it writes the old value back.
pub struct HighGuard {
    path: PathBuf,
    old: String,
}

impl HighGuard {
    pub fn set(cgroup: &Path, bytes: u64) -> Result<HighGuard, WatchError> {
        let old = Cgroupfs::new(cgroup)
            .read("memory.high")
            .map_err(|source| WatchError::Read {
                flag: Some("--high"),
                source,
            })?
            .trim()
            .to_string();
        let path = cgroup.join("memory.high");
        fs::write(&path, bytes.to_string()).map_err(|source| WatchError::Refused {
            flag: "--high",
            path: path.clone(),
            what: format!("{bytes} bytes"),
            source,
        })?;
        Ok(HighGuard { path, old })
    }
}

impl Drop for HighGuard {
    fn drop(&mut self) {
        // The group may be gone; then there is nothing to put back.
        if let Err(e) = fs::write(&self.path, &self.old) {
            if self.path.parent().is_some_and(|p| p.is_dir()) {
                eprintln!(
                    "colosched memwatch: could not put {} back to {}: {e}",
                    self.path.display(),
                    self.old
                );
            }
        }
    }
}
