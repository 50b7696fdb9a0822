//! The host agent (issue 15): spec 002's Diff-Scheduler on a real Linux/QEMU host, with the
//! simulator's decision code (`colosched_host::decide`) and the host crate's readers and writers
//! (`colosched_host::real`, `colosched_host::act`). It lives in this crate for the node agent's
//! command line, logging, metrics endpoint, state-file lock and config parsing, so that the
//! static `colosched-agent` binary carries it (`colosched-agent host …`).
//!
//! `config` parses host.toml; `daemon` is the loop; `metrics` its `/metrics`; `cli` the
//! subcommands.

pub mod cli;
pub mod config;
pub mod daemon;
pub mod metrics;
