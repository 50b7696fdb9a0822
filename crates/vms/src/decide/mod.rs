//! Spec 003's decisions, as pure functions: the cluster model and logical distance (`model`),
//! when to plan again (`detect`),
//! the planner and the random baseline (`plan`).

pub mod detect;
pub mod model;
pub mod plan;

#[cfg(test)]
mod tests;
