//! Simulated time: nanoseconds, and milliseconds as people write them. The bottom of the
//! simulator's modules (the model and the network both count in it).

/// Simulated time in nanoseconds.
pub type Nanos = u64;

pub const MS: Nanos = 1_000_000;

/// Milliseconds (fractional allowed) to nanoseconds.
pub fn ms(x: f64) -> Nanos {
    (x * 1e6).round().max(0.0) as Nanos
}
