//! The trace crate's integration tests, as one test binary (one link instead of four: CI time,
//! issue 28). Each module is one concern; `cargo test -p colosched-trace --test it MODULE::`
//! runs one.

mod ingest;
mod real_data;
mod synth;
mod usage_tail;
