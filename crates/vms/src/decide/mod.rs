//! Spec 003's decisions, as pure functions.
