//! poll(2), each call bounded by a `Duration`.

use std::os::fd::BorrowedFd;
use std::time::Duration;

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::io::Errno;

/// poll(2) on `(fd, events)`; returns each fd's `revents` (empty: not ready). EINTR counts as
/// "none ready".
pub fn poll(
    fds: &[(BorrowedFd, PollFlags)],
    timeout: Option<Duration>,
) -> std::io::Result<Vec<PollFlags>> {
    let mut p: Vec<PollFd> = fds.iter().map(|(fd, ev)| PollFd::new(fd, *ev)).collect();
    // Round up to whole milliseconds, as poll(2) would, so a 0.4 ms wait is not a busy loop.
    let ts = timeout.map(|t| {
        let ms = t.as_micros().div_ceil(1000).min(i32::MAX as u128) as i64;
        Timespec {
            tv_sec: ms / 1000,
            tv_nsec: (ms % 1000) * 1_000_000,
        }
    });
    match rustix::event::poll(&mut p, ts.as_ref()) {
        Ok(_) => Ok(p.iter().map(PollFd::revents).collect()),
        Err(Errno::INTR) => Ok(vec![PollFlags::empty(); fds.len()]),
        Err(e) => Err(e.into()),
    }
}
