//! AASH's decision (Kazempour, Kamali, Fedorova, "AASH: an asymmetry-aware scheduler for
//! hypervisors", VEE 2010) as pure functions: which vCPUs hold the fast cores until the next
//! rotation.
//!
//! - **Fast cores shared fairly**: among the runnable vCPUs, those that have received the least
//!   fast-core time so far go first, so over time every vCPU gets an equal share of it (per vCPU,
//!   whatever the VM's weight: the paper assumes weights proportional to vCPU counts).
//! - **Fast-core priority per VM**: a vCPU of a VM marked as priority goes before any other; among
//!   priority vCPUs the fair rule applies. (The paper says AASH cannot give both at once: here a
//!   priority VM's gain is the other VMs' loss.)
//! - Ties go to the vCPU already on a fast core (no migration for nothing), then to the lower
//!   index.
//! - A vCPU that was blocked for a long time would own the fast cores until it caught up;
//!   `rebase` keeps every counter within `slack` of the least-served runnable vCPU, as Credit caps
//!   what a sleeping vCPU can save.

/// One vCPU as the rotation sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FastClaim {
    /// Time it has spent on fast cores so far (ns, after `rebase`).
    pub fast_ns: u64,
    /// Its VM has fast-core priority.
    pub priority: bool,
    /// It is on a fast core now.
    pub on_fast: bool,
    /// It can run (running or waiting for a core).
    pub runnable: bool,
}

/// The indices of the vCPUs that get the `fast_cores` fast cores, best first: runnable ones
/// only, priority VMs first, then least fast-core time, then already on a fast core, then lower
/// index.
pub fn designate(claims: &[FastClaim], fast_cores: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..claims.len()).filter(|&i| claims[i].runnable).collect();
    order.sort_by_key(|&i| {
        let c = claims[i];
        (!c.priority, c.fast_ns, !c.on_fast, i)
    });
    order.truncate(fast_cores);
    order
}

/// Raise every counter to at least (the smallest counter of a runnable vCPU) − `slack`, so that
/// a vCPU back from a long sleep is at most `slack` behind. Nothing changes when no vCPU is
/// runnable.
pub fn rebase(fast_ns: &mut [u64], runnable: &[bool], slack: u64) {
    let least = (0..fast_ns.len())
        .filter(|&i| runnable[i])
        .map(|i| fast_ns[i])
        .min();
    if let Some(least) = least {
        let floor = least.saturating_sub(slack);
        for x in fast_ns.iter_mut() {
            *x = (*x).max(floor);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(fast_ns: u64, priority: bool, on_fast: bool) -> FastClaim {
        FastClaim {
            fast_ns,
            priority,
            on_fast,
            runnable: true,
        }
    }

    #[test]
    fn least_served_first_ties_to_the_holder_then_the_lower_index() {
        let c = [
            claim(30, false, true),
            claim(0, false, false),
            claim(10, false, false),
        ];
        assert_eq!(designate(&c, 1), vec![1]);
        assert_eq!(designate(&c, 2), vec![1, 2]);
        assert_eq!(designate(&c, 5), vec![1, 2, 0]);
        // Equal time: the one on a fast core keeps it, else the lower index.
        let tie = [claim(30, false, false), claim(30, false, true)];
        assert_eq!(designate(&tie, 1), vec![1]);
        let tie = [claim(30, false, false), claim(30, false, false)];
        assert_eq!(designate(&tie, 1), vec![0]);
        assert!(designate(&c, 0).is_empty());
    }

    #[test]
    fn priority_vms_go_first_and_share_fairly_among_themselves() {
        let c = [
            claim(0, false, false),
            claim(90, true, true),
            claim(50, true, false),
        ];
        assert_eq!(designate(&c, 1), vec![2]);
        assert_eq!(designate(&c, 2), vec![2, 1]);
        assert_eq!(designate(&c, 3), vec![2, 1, 0]);
    }

    #[test]
    fn blocked_vcpus_are_not_designated() {
        let mut c = [claim(0, true, false), claim(40, false, false)];
        c[0].runnable = false;
        assert_eq!(designate(&c, 1), vec![1]);
        c[1].runnable = false;
        assert!(designate(&c, 1).is_empty());
    }

    #[test]
    fn rebase_keeps_sleepers_within_slack_of_the_least_served_runnable() {
        let mut ns = [0, 100, 250, 40];
        rebase(&mut ns, &[false, true, true, false], 30);
        assert_eq!(ns, [70, 100, 250, 70]);
        // Slack larger than the counter: no underflow, nothing lowered.
        let mut ns = [5, 10];
        rebase(&mut ns, &[false, true], 30);
        assert_eq!(ns, [5, 10]);
        // Nobody runnable: unchanged.
        let mut ns = [0, 100];
        rebase(&mut ns, &[false, false], 0);
        assert_eq!(ns, [0, 100]);
    }
}
