//! SIGTERM, SIGINT and SIGHUP for the long-running loops (`agent run`, `host run`, `memwatch`,
//! `migrate vms --execute`): a handler that records the signal and writes a byte to a pipe, so a
//! loop can sleep in `poll(2)` on the pipe and wake at once, then put back what it changed.
//!
//! A handler rather than a blocked mask and `sigtimedwait`: these commands also run inside the
//! Python process (`colosched agent run`), whose other threads do not block the signals. A
//! process-directed signal may then be taken by one of them and never reach a `sigtimedwait`;
//! a handler runs whichever thread takes it. One `Signals` at a time per process.
//!
//! `sigaction` and the handler are raw libc: rustix leaves signal handlers out, and signal-hook,
//! which wraps them, never puts the previous disposition back (its handler stays installed for
//! the life of the process), while here the Python interpreter's own SIGINT handler must come
//! back when `agent run` or `memwatch` returns.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use rustix::event::PollFlags;
use rustix::pipe::{pipe_with, PipeFlags};

/// The last signal seen (0: none) and the pipe's write end (-1: no `Signals` alive).
static SIGNALLED: AtomicI32 = AtomicI32::new(0);
static WAKE_FD: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNALLED.store(sig, Ordering::SeqCst);
    let fd = WAKE_FD.load(Ordering::SeqCst);
    if fd >= 0 {
        // SAFETY: write(2) and errno access are async-signal-safe; the write end is non-blocking,
        // so a full pipe (signals already pending) just drops the byte. errno is put back for the
        // code the signal interrupted.
        unsafe {
            let errno = *libc::__errno_location();
            libc::write(fd, [1u8].as_ptr().cast(), 1);
            *libc::__errno_location() = errno;
        }
    }
}

pub struct Signals {
    old: Vec<(i32, libc::sigaction)>,
    read: OwnedFd,
    _write: OwnedFd,
}

impl Signals {
    /// Installs the handler for SIGTERM, SIGINT and SIGHUP; the previous handlers come back on drop.
    /// Fails only if the pipe cannot be made (the open-file limit).
    pub fn catch() -> std::io::Result<Signals> {
        let (read, write) = pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
        SIGNALLED.store(0, Ordering::SeqCst);
        WAKE_FD.store(write.as_raw_fd(), Ordering::SeqCst);
        let mut old = Vec::new();
        for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            // SAFETY: a zeroed sigaction with a handler that only stores to atomics and writes
            // one byte; SA_RESTART so reads of /proc in the loop are not cut short.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
                sa.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut sa.sa_mask);
                let mut prev: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, &sa, &mut prev) == 0 {
                    old.push((sig, prev));
                }
            }
        }
        Ok(Signals {
            old,
            read,
            _write: write,
        })
    }

    /// The signal seen since `catch`, if any.
    pub fn pending(&self) -> Option<i32> {
        let s = SIGNALLED.load(Ordering::SeqCst);
        (s != 0).then_some(s)
    }

    /// Sleeps up to `d`, or until a signal arrives in any thread; returns it if one did.
    pub fn wait(&self, d: Duration) -> Option<i32> {
        if self.pending().is_none() {
            // EINTR (the signal itself) just ends the sleep.
            let _ = crate::poll(&[(self.read.as_fd(), PollFlags::IN)], Some(d));
        }
        self.pending()
    }
}

impl Drop for Signals {
    fn drop(&mut self) {
        for (sig, prev) in &self.old {
            // SAFETY: puts back the handler saved in `catch`.
            unsafe { libc::sigaction(*sig, prev, std::ptr::null_mut()) };
        }
        WAKE_FD.store(-1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_signal_taken_by_another_thread_ends_the_wait_at_once() {
        let s = Signals::catch().unwrap();
        assert_eq!(s.wait(Duration::from_millis(20)), None, "no signal yet");
        // The other thread directs SIGHUP at itself: the handler runs there, not in this thread,
        // which is what happens in a Python process whose other threads take the signal.
        let t = std::thread::spawn(|| {
            std::thread::sleep(Duration::from_millis(50));
            // SAFETY: raise(3) on the calling thread, whose handler is ours.
            unsafe { libc::raise(libc::SIGHUP) };
        });
        let t0 = Instant::now();
        assert_eq!(s.wait(Duration::from_secs(10)), Some(libc::SIGHUP));
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "woken by the pipe, not the timeout"
        );
        t.join().unwrap();
        drop(s);
        // SAFETY: reading the disposition only.
        let now = unsafe {
            let mut cur: libc::sigaction = std::mem::zeroed();
            libc::sigaction(libc::SIGHUP, std::ptr::null(), &mut cur);
            cur.sa_sigaction
        };
        assert_ne!(
            now, on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
            "handler put back"
        );
    }
}
