//! The kernel calls the actuators make on single tasks (affinity, page migration) and the
//! count of the errors they give, by kind. Below both `actuator` (which changes) and `state`
//! (which puts back), so neither imports the other for them.

use std::collections::BTreeMap;
use std::io;

use rustix::thread::CpuSet as KernelCpuSet;

use crate::cpuset::CpuSet;
use crate::sense::kernel::pid_of;

pub fn set_affinity(tid: i32, cpus: &CpuSet) -> io::Result<()> {
    let mut set = KernelCpuSet::new();
    for c in cpus.iter().filter(|&c| c < KernelCpuSet::MAX_CPU) {
        set.set(c);
    }
    Ok(rustix::thread::sched_setaffinity(pid_of(tid)?, &set)?)
}

/// Moves the pages of `pid` from the `old` nodes to the `new` nodes (migrate_pages(2)).
/// Returns the number of pages that could not be moved.
pub fn migrate_pages(pid: i32, old: &CpuSet, new: &CpuSet) -> io::Result<u64> {
    // Both masks as long as the longer one, in whole words; maxnode counts their bits.
    let words = old.words().len().max(new.words().len()).max(1);
    let padded = |s: &CpuSet| {
        let mut w = s.words().to_vec();
        w.resize(words, 0);
        w
    };
    let (old, new) = (padded(old), padded(new));
    // SAFETY: both masks are `words` u64s that live across the call; maxnode = their bits.
    // (Neither rustix nor nix wraps migrate_pages.)
    let r = unsafe {
        libc::syscall(
            libc::SYS_migrate_pages,
            pid as libc::c_long,
            (words * 64) as libc::c_ulong,
            old.as_ptr(),
            new.as_ptr(),
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as u64)
    }
}

/// Errors by kind: esrch, einval, eperm, eio, other (and the last message of each, for the log).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ErrorCounts {
    pub by_kind: BTreeMap<&'static str, u64>,
    pub last: BTreeMap<&'static str, String>,
}

impl ErrorCounts {
    pub fn kind(e: &io::Error) -> &'static str {
        use rustix::io::Errno;
        match Errno::from_io_error(e) {
            Some(Errno::SRCH) => "esrch",
            Some(Errno::INVAL) => "einval",
            Some(Errno::PERM) | Some(Errno::ACCESS) => "eperm",
            Some(Errno::IO) => "eio",
            _ => "other",
        }
    }
    pub fn count(&mut self, e: &io::Error, what: &str) {
        self.add(Self::kind(e), format!("{what}: {e}"));
    }
    pub fn add(&mut self, kind: &'static str, message: String) {
        *self.by_kind.entry(kind).or_default() += 1;
        self.last.insert(kind, message);
    }
    pub fn total(&self) -> u64 {
        self.by_kind.values().sum()
    }

    /// One line per kind counted since `seen` (which it updates), with its last message: what
    /// the daemon logs.
    pub fn report_new(&self, seen: &mut BTreeMap<&'static str, u64>) -> Vec<String> {
        let mut out = Vec::new();
        for (&kind, &n) in &self.by_kind {
            let before = seen.insert(kind, n).unwrap_or(0);
            if n > before {
                let last = self.last.get(kind).map_or("", String::as_str);
                out.push(format!("{} {kind} error(s), the last: {last}", n - before));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_errors_are_reported_once_with_their_last_message() {
        let mut e = ErrorCounts::default();
        let mut seen = BTreeMap::new();
        e.count(&io::Error::from(rustix::io::Errno::SRCH), "tid 7");
        e.count(&io::Error::from(rustix::io::Errno::SRCH), "tid 8");
        let lines = e.report_new(&mut seen);
        assert_eq!(lines.len(), 1);
        assert!(
            lines[0].starts_with("2 esrch error(s), the last: tid 8: "),
            "{lines:?}"
        );
        assert!(e.report_new(&mut seen).is_empty(), "nothing new");
        e.add("selector", "/x/cgroup.procs: gone".into());
        assert_eq!(
            e.report_new(&mut seen),
            ["1 selector error(s), the last: /x/cgroup.procs: gone"]
        );
    }
}
