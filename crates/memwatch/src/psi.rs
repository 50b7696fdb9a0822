//! `--psi SPEC`: a PSI trigger on a group's `memory.pressure` (the trigger file itself is
//! colosched-sys's `psi::Trigger`). The spec is checked here first, so the error can say what is
//! wrong with it; the kernel takes windows of 500 ms to 10 s, and a process without
//! CAP_SYS_RESOURCE only windows that are multiples of 2 s.

use std::os::fd::BorrowedFd;
use std::path::Path;

use colosched_sys::psi::Trigger;

use crate::WatchError;

pub struct PsiTrigger {
    trigger: Trigger,
    spec: String,
}

/// Checks `some 150000 1000000` before the kernel sees it, so the error can say what is wrong.
pub fn check_spec(spec: &str) -> Result<(), WatchError> {
    let bad = |msg: String| WatchError::flag("--psi", format!("{spec:?}"), msg);
    let f: Vec<&str> = spec.split_ascii_whitespace().collect();
    let [kind, stall, window] = f[..] else {
        return Err(bad(
            "expected \"some|full STALL_US WINDOW_US\", e.g. \"some 150000 1000000\"".into(),
        ));
    };
    if kind != "some" && kind != "full" {
        return Err(bad(format!("{kind:?} is not some or full")));
    }
    let num = |s: &str| {
        s.parse::<u64>()
            .map_err(|_| bad(format!("{s:?} is not a number of microseconds")))
    };
    let (stall, window) = (num(stall)?, num(window)?);
    if !(500_000..=10_000_000).contains(&window) {
        return Err(bad(
            "the window must be 500000..10000000 µs (0.5 to 10 s)".into()
        ));
    }
    if stall == 0 || stall > window {
        return Err(bad(
            "the stall must be above 0 and at most the window".into()
        ));
    }
    Ok(())
}

impl PsiTrigger {
    pub fn open(path: &Path, spec: &str) -> Result<PsiTrigger, WatchError> {
        check_spec(spec)?;
        let mut trigger = Trigger::open(path).map_err(|source| WatchError::Read {
            flag: Some("--psi"),
            source,
        })?;
        trigger.arm(spec).map_err(|source| WatchError::Refused {
            flag: "--psi",
            path: path.to_path_buf(),
            what: format!(
                "the trigger {spec:?} (windows must be 0.5-10 s, and multiples of 2 s \
                     without CAP_SYS_RESOURCE)"
            ),
            source,
        })?;
        Ok(PsiTrigger {
            trigger,
            spec: spec.to_string(),
        })
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.trigger.fd()
    }

    pub fn spec(&self) -> &str {
        &self.spec
    }
}
