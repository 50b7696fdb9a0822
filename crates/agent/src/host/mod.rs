//! `colosched-agent host …`: the command line of the host agent, which lives in
//! `colosched_host::agent` (its loop, config, readers, writers and metrics). It is here so that
//! the static `colosched-agent` binary carries it, with the node agent's logging.

pub mod cli;
