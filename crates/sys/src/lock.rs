//! One agent per state file: `StateLock` is an flock on `<state file>.lock`, held by an agent's
//! `run` for its whole life and taken by `restore` (`under_lock`); the kernel drops it when the
//! holder dies (SIGKILL too). Both agents (node and host) use it.

use std::fs;
use std::io::{Read, Seek, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The state file's lock cannot be taken: another agent holds it, or the lock file cannot be
/// made (the message says which).
#[derive(Debug, thiserror::Error)]
#[error("state file {}: {msg}", path.display())]
pub struct LockError {
    pub path: PathBuf,
    pub msg: String,
}

impl LockError {
    fn new(path: &Path, msg: String) -> LockError {
        LockError {
            path: path.to_path_buf(),
            msg,
        }
    }
}

/// `restore`'s frame, for both agents: nothing to do when the state file `path` does not exist;
/// else `restore` runs holding its lock, so never while a live agent owns it (SIGTERM that one),
/// and not at all if that agent put everything back while we waited.
pub fn under_lock<E: From<LockError>>(
    path: &Path,
    restore: impl FnOnce() -> Result<i32, E>,
) -> Result<i32, E> {
    let nothing = || {
        println!("nothing to restore: {} does not exist", path.display());
        Ok(0)
    };
    if !path.exists() {
        return nothing();
    }
    let _lock = StateLock::acquire(path).map_err(E::from)?;
    if !path.exists() {
        return nothing(); // its agent put everything back meanwhile
    }
    restore()
}

/// The lock that makes one agent per state file: an flock on `<state file>.lock`, which holds
/// the holder's pid. Dropping it removes the file.
#[derive(Debug)]
pub struct StateLock {
    /// Holds the flock; closed (and so released) after the file is removed.
    _file: fs::File,
    path: PathBuf,
}

impl StateLock {
    pub fn path_for(state: &Path) -> PathBuf {
        let mut p = state.as_os_str().to_owned();
        p.push(".lock");
        PathBuf::from(p)
    }

    /// Takes the lock without waiting; if another process holds it, the error names its pid.
    pub fn acquire(state: &Path) -> Result<StateLock, LockError> {
        let path = Self::path_for(state);
        let err =
            |e: std::io::Error| LockError::new(state, format!("lock {}: {e}", path.display()));
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir).map_err(err)?;
        }
        // A holder that is exiting removes the file after we opened it: then the lock we got
        // is on a file nobody else will open, and we try again with the new one.
        for _ in 0..10 {
            let mut file = fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(err)?;
            if let Err(e) =
                rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive)
            {
                if e != rustix::io::Errno::WOULDBLOCK {
                    return Err(err(e.into()));
                }
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                return Err(LockError::new(
                    state,
                    format!("owned by a running agent (pid {})", holder.trim()),
                ));
            }
            let same = match (file.metadata(), fs::metadata(&path)) {
                (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
                _ => false,
            };
            if !same {
                continue;
            }
            file.set_len(0).map_err(err)?;
            file.rewind().map_err(err)?;
            file.write_all(format!("{}\n", std::process::id()).as_bytes())
                .map_err(err)?;
            return Ok(StateLock { _file: file, path });
        }
        Err(err(std::io::Error::other(
            "the lock file kept being replaced",
        )))
    }
}

impl Drop for StateLock {
    fn drop(&mut self) {
        // Removed while still held, so nobody locks a file that is about to vanish unawares.
        let _ = fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_per_state_file_for_real() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state.json");
        let lock = StateLock::acquire(&state).unwrap();
        let lock_path = StateLock::path_for(&state);
        assert_eq!(
            fs::read_to_string(&lock_path).unwrap().trim(),
            std::process::id().to_string()
        );
        // flock is per open file description: a second open in this process is refused too.
        let e = StateLock::acquire(&state).unwrap_err();
        assert!(e.path == state, "{e:?}");
        let e = e.to_string();
        assert!(
            e.contains(&format!(
                "owned by a running agent (pid {})",
                std::process::id()
            )),
            "{e}"
        );
        drop(lock);
        assert!(!lock_path.exists(), "removed on release");
        let again = StateLock::acquire(&state).unwrap();
        drop(again);
    }
}
