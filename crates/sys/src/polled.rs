//! A kernfs file that says when it changed (`memory.events`, `cgroup.events`): kept open, waited
//! on with poll(POLLPRI) (POLLERR | POLLPRI on kernfs), and read again with one `pread` at
//! offset 0, which also re-arms the poll. Once its cgroup is removed a read fails (ENODEV).

use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::kept::pread;

#[derive(Debug)]
pub struct PolledFile {
    path: PathBuf,
    file: File,
}

impl PolledFile {
    /// Opens the file at `path` (the error names it).
    pub fn open(path: impl Into<PathBuf>) -> Result<PolledFile> {
        let path = path.into();
        let file = File::open(&path).map_err(|e| Error::io(&path, e))?;
        Ok(PolledFile { path, file })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The fd to poll for POLLPRI.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }

    /// The file's text now (at most 4 KiB, more than such a file holds).
    pub fn read(&self) -> Result<String> {
        let mut buf = vec![0u8; 4096];
        let n = pread(&self.file, &mut buf).map_err(|e| Error::io(&self.path, e))?;
        Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_read_again_from_the_start_and_errors_name_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("memory.events");
        std::fs::write(&path, "high 1\n").unwrap();
        let f = PolledFile::open(&path).unwrap();
        assert_eq!(f.read().unwrap(), "high 1\n");
        std::fs::write(&path, "high 22\n").unwrap();
        assert_eq!(
            f.read().unwrap(),
            "high 22\n",
            "the same open file, read again"
        );
        assert_eq!(f.path(), path);
        let e = PolledFile::open(dir.path().join("none")).unwrap_err();
        assert_eq!(e.path(), dir.path().join("none"));
    }
}
