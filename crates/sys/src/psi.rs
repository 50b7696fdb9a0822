//! A PSI trigger (Documentation/accounting/psi.rst): a `*.pressure` file (`memory.pressure`,
//! `cpu.pressure`, `io.pressure`, of a cgroup2 group or /proc/pressure) opened read-write and
//! non-blocking; writing `some|full <stall µs> <window µs>` into it arms the trigger, which the
//! kernel signals with POLLPRI (POLLERR once the group is removed). Closing the file removes it.
//! The kernel takes windows of 500 ms to 10 s; a process without CAP_SYS_RESOURCE only windows
//! that are multiples of 2 s.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use rustix::fs::OFlags;

use crate::error::{Error, Result};

#[derive(Debug)]
pub struct Trigger {
    path: PathBuf,
    file: File,
}

impl Trigger {
    /// Opens the pressure file at `path` for a trigger (the error names it).
    pub fn open(path: impl Into<PathBuf>) -> Result<Trigger> {
        let path = path.into();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags((OFlags::NONBLOCK | OFlags::CLOEXEC).bits() as i32)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        Ok(Trigger { path, file })
    }

    /// Writes `spec` (`some 150000 2000000`): the kernel's refusal is returned as it came.
    pub fn arm(&mut self, spec: &str) -> std::io::Result<()> {
        self.file.write_all(spec.as_bytes())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The fd to poll for POLLPRI.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel's own check: /proc/pressure/memory refuses a window it does not take. The
    /// machines this project runs on have PSI (docs/memwatch.md): a missing one is a failure.
    #[test]
    fn the_kernel_refuses_a_window_out_of_range() {
        let p = Path::new("/proc/pressure/memory");
        assert!(
            p.exists(),
            "{} is missing: a kernel without PSI",
            p.display()
        );
        let mut t = Trigger::open(p).unwrap();
        assert_eq!(t.path(), p);
        let e = t.arm("some 1 100").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{e}");
        let e = Trigger::open("/nonexistent/memory.pressure").unwrap_err();
        assert!(
            e.to_string().starts_with("/nonexistent/memory.pressure: "),
            "{e}"
        );
    }
}
