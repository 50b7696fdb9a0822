//! The real host agent's writers: what it changes on a Linux/KVM host, each change put back by
//! the caller from what it read first.

pub mod cpuset;
pub mod slice;
pub mod state;

/// A thread of this process for the writers' real tests: it sleeps until dropped.
#[cfg(test)]
pub(crate) struct Parked {
    pub tid: i32,
    done: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

#[cfg(test)]
impl Parked {
    /// Starts it; pinned to `cpu` by its own `sched_setaffinity` when given.
    pub fn new(cpu: Option<usize>) -> Parked {
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let (done, done_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let tid = rustix::thread::gettid();
            if let Some(cpu) = cpu {
                let mut one = rustix::thread::CpuSet::new();
                one.set(cpu);
                rustix::thread::sched_setaffinity(Some(tid), &one).unwrap();
            }
            tid_tx.send(tid.as_raw_nonzero().get()).unwrap();
            let _ = done_rx.recv();
        });
        Parked {
            tid: tid_rx.recv().unwrap(),
            done: Some(done),
            thread: Some(thread),
        }
    }
}

#[cfg(test)]
impl Drop for Parked {
    fn drop(&mut self) {
        self.done.take();
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}
