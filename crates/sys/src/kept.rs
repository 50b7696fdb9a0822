//! One small file read again and again (a counter, a schedstat line, a process's stat line: the
//! host agent's sensors and `Procfs`'s kept files), kept open where that is safe: on the real
//! /proc and /sys a file of something gone fails to read, so a kept file is read again with one
//! `pread` at offset 0 (opening it by path each time costs about 13 times as much). On any other filesystem (a test's fake tree, whose files a test replaces) every read
//! opens the file anew. A file whose read fails is closed and opened by path at the next read.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

#[derive(Debug)]
pub struct KeptFile {
    path: PathBuf,
    file: Option<File>,
    keep: bool,
}

impl KeptFile {
    /// The file at `path`, kept open between reads if `keep` (the root is a proc or sysfs).
    pub fn new(path: PathBuf, keep: bool) -> KeptFile {
        KeptFile {
            path,
            file: None,
            keep,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's text (one `pread`, at most `buf.len() - 1` bytes), or `None`: unreadable, not
    /// UTF-8, or as long as `buf` (longer than any file of the kind read).
    pub fn read<'b>(&mut self, buf: &'b mut [u8]) -> Option<&'b str> {
        let n = match self.file.as_ref().map(|f| pread(f, buf)) {
            Some(Ok(n)) => n,
            _ => {
                self.file = None;
                let f = File::open(&self.path).ok()?;
                let n = pread(&f, buf).ok()?;
                if self.keep {
                    self.file = Some(f);
                }
                n
            }
        };
        if n == buf.len() {
            return None;
        }
        std::str::from_utf8(&buf[..n]).ok()
    }

    /// Closes the file (it is opened by path at the next read).
    pub fn close(&mut self) {
        self.file = None;
    }

    pub fn is_open(&self) -> bool {
        self.file.is_some()
    }
}

/// One `pread` at offset 0, EINTR retried.
pub(crate) fn pread(f: &File, buf: &mut [u8]) -> std::io::Result<usize> {
    loop {
        match f.read_at(buf, 0) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            r => return r,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fake_file_is_read_afresh_and_a_real_one_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c");
        std::fs::write(&path, "1\n").unwrap();
        let mut f = KeptFile::new(path.clone(), false);
        let mut buf = [0u8; 8];
        assert_eq!(f.read(&mut buf), Some("1\n"));
        assert!(!f.is_open());
        std::fs::write(&path, "22\n").unwrap();
        assert_eq!(f.read(&mut buf), Some("22\n"));
        std::fs::write(&path, "123456789\n").unwrap();
        assert_eq!(f.read(&mut buf), None, "as long as the buffer");
        std::fs::remove_file(&path).unwrap();
        assert_eq!(f.read(&mut buf), None, "gone");
        let mut real = KeptFile::new("/proc/self/stat".into(), true);
        let mut big = [0u8; 4096];
        assert!(real.read(&mut big).is_some() && real.is_open());
        real.close();
        assert!(!real.is_open());
        assert_eq!(real.path(), Path::new("/proc/self/stat"));
    }
}
