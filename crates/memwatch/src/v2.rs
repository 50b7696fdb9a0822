//! cgroup v2 pieces: `memory.events` counters (read, diffed) and the optional `memory.high`
//! soft line (set while watching, the old value written back on drop).

use std::fs::{self, File};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

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
pub fn parse_memory_events(text: &str) -> Result<MemoryEvents, String> {
    let mut ev = MemoryEvents::default();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let mut f = line.split_ascii_whitespace();
        let (Some(key), Some(val), None) = (f.next(), f.next(), f.next()) else {
            return Err(format!(
                "line {}: expected \"name count\", got {line:?}",
                n + 1
            ));
        };
        let v: u64 = val
            .parse()
            .map_err(|_| format!("line {}: {key}: {val:?} is not a count", n + 1))?;
        if let Some(i) = EVENT_NAMES.iter().position(|k| *k == key) {
            ev.0[i] = v;
        }
    }
    Ok(ev)
}

/// An open `memory.events` and the counters last seen.
pub struct EventsWatch {
    file: File,
    path: PathBuf,
    last: MemoryEvents,
}

impl EventsWatch {
    pub fn open(cgroup: &Path) -> Result<EventsWatch, String> {
        let path = cgroup.join("memory.events");
        let file = File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut w = EventsWatch {
            file,
            path,
            last: MemoryEvents::default(),
        };
        w.last = w.read()?;
        Ok(w)
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }

    /// Reading the file also re-arms poll(POLLPRI) on it.
    fn read(&self) -> Result<MemoryEvents, String> {
        let mut buf = vec![0u8; 4096];
        let n = self
            .file
            .read_at(&mut buf, 0)
            .map_err(|e| format!("{}: {e}", self.path.display()))?;
        let text = String::from_utf8_lossy(&buf[..n]);
        parse_memory_events(&text).map_err(|e| format!("{}: {e}", self.path.display()))
    }

    /// True while the file can be read (false once its group is removed: ENODEV).
    pub fn readable(&self) -> bool {
        self.read().is_ok()
    }

    /// Counters that grew since the last call.
    pub fn changes(&mut self) -> Result<Vec<(&'static str, u64)>, String> {
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
    pub fn set(cgroup: &Path, bytes: u64) -> Result<HighGuard, String> {
        let path = cgroup.join("memory.high");
        let old = fs::read_to_string(&path)
            .map_err(|e| format!("--high: {}: {e}", path.display()))?
            .trim()
            .to_string();
        fs::write(&path, bytes.to_string())
            .map_err(|e| format!("--high: writing {bytes} to {}: {e}", path.display()))?;
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
