//! Whether a cycle can skip the full look at the BE tasks (reading the selectors, every BE mask
//! and /proc stat: most of a cycle's CPU). Pure: times are seconds since the agent started.

use crate::sense::sensor::BE_IDLE;

/// How long a full look that found nothing to move stays good, in intervals.
pub const RECHECK_INTERVALS: f64 = 10.0;

/// A full look at the BE tasks that moved nothing.
#[derive(Clone, Debug, PartialEq)]
pub struct Look {
    pub over: Vec<bool>,
    /// When, in seconds since the agent started.
    pub at_s: f64,
    /// Some BE task could run on a pressured node (but the guards left it there).
    pub reachable: bool,
}

/// Whether this sample can skip the full look, and why. Always when every node is pressured;
/// else only while the same nodes are pressured as at the `last` look, which moved nothing:
/// - if it found no BE task able to run on them and BE used no CPU there since the previous
///   sample (`recent_be`, BE CPUs per node; a BE task that appeared there, or had its mask
///   widened, would have), until it is `RECHECK_INTERVALS` old; BE CPU time there means a look;
/// - else (BE tasks the guards kept in place, or no BE time to tell) until it is an interval
///   old: the decision is retaken once an interval, not at every sample.
pub fn steady(
    over: &[bool],
    last: Option<&Look>,
    recent_be: Option<&[f64]>,
    now_s: f64,
    interval_s: f64,
) -> Option<&'static str> {
    if !over.contains(&false) {
        // No move can help: none goes onto a pressured node.
        return Some("every node is pressured: nowhere to move BE tasks");
    }
    let look = last?;
    if look.over != over || !over.contains(&true) {
        return None;
    }
    let age = (now_s - look.at_s) / interval_s;
    let be_idle = recent_be.map(|be| over.iter().zip(be).all(|(&o, &b)| !o || b < BE_IDLE));
    match (look.reachable, be_idle) {
        (false, Some(true)) if age < RECHECK_INTERVALS => {
            Some("no BE CPU time on the pressured node(s) since the last look")
        }
        (false, Some(false)) => None,
        _ if age < 1.0 => Some("the last look, less than an interval ago, could move nothing"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gate_by_case() {
        let look = |reachable| Look {
            over: vec![true, false],
            at_s: 10.0,
            reachable,
        };
        let (hot, idle, busy) = ([true, false], [0.0, 0.0], [0.5, 0.0]);
        let gate = |l: Option<&Look>, be: Option<&[f64]>, now| steady(&hot, l, be, now, 1.0);
        assert!(steady(&[true, true], None, None, 0.0, 1.0).is_some());
        assert_eq!(gate(None, None, 10.5), None, "no look yet");
        let (unreachable, reachable) = (look(false), look(true));
        assert!(gate(Some(&unreachable), Some(&idle), 19.0).is_some());
        assert_eq!(gate(Some(&unreachable), Some(&idle), 20.5), None, "too old");
        assert_eq!(
            gate(Some(&unreachable), Some(&busy), 10.5),
            None,
            "BE ran there"
        );
        assert!(gate(Some(&reachable), Some(&busy), 10.5).is_some());
        assert_eq!(gate(Some(&reachable), None, 11.5), None, "an interval old");
        let other = [false, true];
        assert_eq!(steady(&other, Some(&reachable), None, 10.5, 1.0), None);
    }
}
