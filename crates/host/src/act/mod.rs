//! The real host agent's writers: what it changes on a Linux/KVM host, each change put back by
//! the caller from what it read first.

pub mod cpuset;
pub mod slice;
pub mod state;
