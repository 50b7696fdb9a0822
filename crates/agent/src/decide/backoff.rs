//! Per-task back-off for moves that do not take. A process whose move the kernel refuses (every
//! thread: EINVAL from a cpuset it cannot leave, say) is not offered to the policy again until
//! its back-off has passed: `first` cycles after its first failure in a row, twice that after
//! the second, and so on, at most `first · 2^MAX_DOUBLINGS`. A move that takes forgets it, and
//! so does its leaving the BE tasks. Pure: the caller passes the cycle number.

use std::collections::HashMap;
use std::hash::Hash;

/// The wait doubles this many times at most: the cap is `first · 32` cycles (32 intervals when
/// `first` is one interval: 64 s at the default `interval_s = 2`).
pub const MAX_DOUBLINGS: u32 = 5;

/// A task's failures in a row, and the first cycle it may be tried again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Held {
    pub failures: u32,
    pub until: u64,
}

#[derive(Debug)]
pub struct Backoff<K> {
    /// The wait after a first failure, in cycles (at least 1).
    pub first: u64,
    held: HashMap<K, Held>,
}

impl<K: Hash + Eq> Backoff<K> {
    pub fn new(first: u64) -> Backoff<K> {
        Backoff {
            first: first.max(1),
            held: HashMap::new(),
        }
    }

    /// The wait after the `failures`-th failure in a row (≥ 1): `first · 2^(failures − 1)`,
    /// at most `first · 2^MAX_DOUBLINGS`.
    pub fn delay(&self, failures: u32) -> u64 {
        let doublings = failures.saturating_sub(1).min(MAX_DOUBLINGS);
        self.first.saturating_mul(1 << doublings)
    }

    /// `task`'s move did not take at `cycle`.
    pub fn failed(&mut self, task: K, cycle: u64) {
        let failures = self
            .held
            .get(&task)
            .map_or(0, |h| h.failures)
            .saturating_add(1);
        let until = cycle.saturating_add(self.delay(failures));
        self.held.insert(task, Held { failures, until });
    }

    /// `task`'s move took: its back-off starts again from `first`.
    pub fn succeeded(&mut self, task: &K) {
        self.held.remove(task);
    }

    /// Whether `task` is held back at `cycle`.
    pub fn waiting(&self, task: &K, cycle: u64) -> bool {
        self.held.get(task).is_some_and(|h| cycle < h.until)
    }

    pub fn get(&self, task: &K) -> Option<Held> {
        self.held.get(task).copied()
    }

    /// Forgets the tasks `keep` says no to (those no longer BE, or gone).
    pub fn retain(&mut self, keep: impl Fn(&K) -> bool) {
        self.held.retain(|k, _| keep(k));
    }

    /// Tasks whose last move did not take (held back now, or until their next try).
    pub fn len(&self) -> usize {
        self.held.len()
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cycles at which a task whose move always fails is tried, over `cycles` cycles, when
    /// it is offered whenever it is not waiting (the worst case: a look every cycle).
    fn attempts(first: u64, cycles: u64) -> Vec<u64> {
        let mut b = Backoff::new(first);
        let mut at = Vec::new();
        for c in 0..cycles {
            if !b.waiting(&7, c) {
                at.push(c);
                b.failed(7, c);
            }
        }
        at
    }

    #[test]
    fn the_wait_doubles_up_to_the_cap() {
        assert_eq!(attempts(1, 100), [0, 1, 3, 7, 15, 31, 63, 95]);
        // Five cycles per interval: one interval, then 2, 4, 8, 16, then 32 each time.
        let five = attempts(5, 600);
        let gaps: Vec<u64> = five.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(gaps, [5, 10, 20, 40, 80, 160, 160]);
        let b = Backoff::<i32>::new(3);
        assert_eq!(b.delay(1), 3);
        assert_eq!(b.delay(u32::MAX), 3 << MAX_DOUBLINGS, "capped, no overflow");
        assert_eq!(Backoff::<i32>::new(u64::MAX).delay(9), u64::MAX);
        assert_eq!(
            Backoff::<i32>::new(0).first,
            1,
            "a wait of 0 would not back off"
        );
    }

    #[test]
    fn attempts_grow_logarithmically_not_linearly() {
        // For any length of a run of failures, tries ≤ log2(cycles / first) + 1 until the cap,
        // then one per capped wait: far below one per cycle.
        for first in [1, 2, 5, 50] {
            for cycles in [10, 1_000, 100_000] {
                let n = attempts(first, cycles).len() as u64;
                let cap = first << MAX_DOUBLINGS;
                let bound = u64::from(MAX_DOUBLINGS) + 2 + cycles / cap;
                assert!(
                    n <= bound,
                    "first {first}, {cycles} cycles: {n} tries > {bound}"
                );
                assert!(n >= 1 && n <= cycles.div_ceil(first));
            }
        }
    }

    #[test]
    fn a_move_that_takes_or_a_task_that_goes_resets_it() {
        let mut b = Backoff::new(2);
        for c in [0, 2, 6] {
            assert!(!b.waiting(&1, c));
            b.failed(1, c);
        }
        assert_eq!(
            b.get(&1),
            Some(Held {
                failures: 3,
                until: 14
            })
        );
        assert!(b.waiting(&1, 13) && !b.waiting(&1, 14));
        b.succeeded(&1);
        assert!(b.is_empty() && !b.waiting(&1, 14));
        b.failed(1, 20);
        assert_eq!(b.get(&1).unwrap().until, 22, "starts again from `first`");
        // Tasks that leave are dropped: the map holds only those still there.
        for pid in 2..1000 {
            b.failed(pid, 20);
        }
        assert_eq!(b.len(), 999);
        b.retain(|&pid| pid % 100 == 0);
        assert_eq!(b.len(), 9);
        assert!(!b.waiting(&1, 21) && b.waiting(&100, 21));
    }
}
