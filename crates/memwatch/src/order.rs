//! Pure direction and ordering logic (no I/O): which thresholds were crossed, which way, and in
//! what order, from the kernel's eventfd counts (v1) or from a usage reading (polling).

/// v1: `above[i]` is the kernel's side of threshold `i` before the wake-up (thresholds sorted
/// ascending), `counts[i]` how many times its eventfd was signalled since. Each signal is one
/// crossing, so threshold `i`'s crossings alternate, starting away from its side. Returns
/// `(threshold, is_up)` in the order they most plausibly happened: the wake-up is read as the
/// fewest alternating sweeps (upward sweeps ascending, downward ones descending), upward first
/// on a tie. With one crossing per threshold that is exact: usage moved one way.
pub fn order_crossings(above: &[bool], counts: &[u64]) -> Vec<(usize, bool)> {
    let crossed: Vec<usize> = (0..counts.len()).filter(|&i| counts[i] > 0).collect();
    if crossed.is_empty() {
        return Vec::new();
    }
    // Sweep index of threshold i's first crossing when the first sweep goes `first_up`: its first
    // crossing is upward iff it was below, so it waits one sweep when it was above and the
    // first sweep goes up (or below and it goes down).
    let offset = |i: usize, first_up: bool| u64::from(above[i] == first_up);
    let sweeps = |first_up: bool| {
        crossed
            .iter()
            .map(|&i| offset(i, first_up) + counts[i])
            .max()
            .unwrap_or(0)
    };
    let first_up = sweeps(true) <= sweeps(false);
    let mut out = Vec::new();
    for s in 0..sweeps(first_up) {
        let up = (s % 2 == 0) == first_up;
        let mut this: Vec<usize> = crossed
            .iter()
            .copied()
            .filter(|&i| {
                let o = offset(i, first_up);
                s >= o && s < o + counts[i]
            })
            .collect();
        if !up {
            this.reverse();
        }
        out.extend(this.into_iter().map(|i| (i, up)));
    }
    out
}

/// Polling: the thresholds (`bytes` ascending) whose side differs from `above` at `usage`, as
/// `(threshold, is_up)`: upward ones ascending, downward ones descending.
pub fn poll_crossings(bytes: &[u64], above: &[bool], usage: u64) -> Vec<(usize, bool)> {
    let mut ups = Vec::new();
    let mut downs = Vec::new();
    for (i, &b) in bytes.iter().enumerate() {
        let now = usage >= b;
        match (above[i], now) {
            (false, true) => ups.push((i, true)),
            (true, false) => downs.push((i, false)),
            _ => {}
        }
    }
    downs.reverse();
    ups.extend(downs);
    ups
}
