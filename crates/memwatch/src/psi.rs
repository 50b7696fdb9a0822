//! A PSI trigger (Documentation/accounting/psi.rst): write `some|full <stall µs> <window µs>`
//! into a `*.pressure` file opened read-write and poll(POLLPRI) it; closing the file removes the
//! trigger. The kernel takes windows of 500 ms to 10 s; a process without CAP_SYS_RESOURCE only
//! windows that are multiples of 2 s.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use rustix::fs::OFlags;

pub struct PsiTrigger {
    file: File,
    spec: String,
}

/// Checks `some 150000 1000000` before the kernel sees it, so the error can say what is wrong.
pub fn check_spec(spec: &str) -> Result<(), String> {
    let f: Vec<&str> = spec.split_ascii_whitespace().collect();
    let [kind, stall, window] = f[..] else {
        return Err(format!(
            "--psi {spec:?}: expected \"some|full STALL_US WINDOW_US\", e.g. \"some 150000 1000000\""
        ));
    };
    if kind != "some" && kind != "full" {
        return Err(format!("--psi {spec:?}: {kind:?} is not some or full"));
    }
    let num = |s: &str| {
        s.parse::<u64>()
            .map_err(|_| format!("--psi {spec:?}: {s:?} is not a number of microseconds"))
    };
    let (stall, window) = (num(stall)?, num(window)?);
    if !(500_000..=10_000_000).contains(&window) {
        return Err(format!(
            "--psi {spec:?}: the window must be 500000..10000000 µs (0.5 to 10 s)"
        ));
    }
    if stall == 0 || stall > window {
        return Err(format!(
            "--psi {spec:?}: the stall must be above 0 and at most the window"
        ));
    }
    Ok(())
}

impl PsiTrigger {
    pub fn open(path: &Path, spec: &str) -> Result<PsiTrigger, String> {
        check_spec(spec)?;
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags((OFlags::NONBLOCK | OFlags::CLOEXEC).bits() as i32)
            .open(path)
            .map_err(|e| format!("--psi: {}: {e}", path.display()))?;
        file.write_all(spec.as_bytes()).map_err(|e| {
            format!(
                "--psi {spec:?}: {} refused the trigger: {e} (windows must be 0.5-10 s, and \
                 multiples of 2 s without CAP_SYS_RESOURCE)",
                path.display()
            )
        })?;
        Ok(PsiTrigger {
            file,
            spec: spec.to_string(),
        })
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }

    pub fn spec(&self) -> &str {
        &self.spec
    }
}
