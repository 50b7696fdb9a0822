//! One decision: the agent's cell handed to the `colosched-core` policy, plus the agent's own
//! guards around it (trigger, minimum improvement, settling unpinned tasks on receivers).
//! Pure: no I/O, so every rule is unit-tested with made-up loads.

use colosched_core::{Cell, Limits, Node, Planner, Policy, Rng, Task};

use crate::cpuset::CpuSet;
use crate::sense::select::BeTask;

/// A BE process as the decision sees it.
#[derive(Clone, Debug)]
pub struct TaskView<'a> {
    pub task: &'a BeTask,
    /// The node it is on: the one its affinity is inside, else the one of its last CPU.
    pub node: usize,
    /// Its affinity is inside one node.
    pub pinned: bool,
    /// The nodes its affinity lets it run on.
    pub reach: CpuSet,
    /// CPU used over the last interval, as a fraction of a node.
    pub usage: f64,
    /// Page faults per CPU-second: the agent's stand-in for memory accesses per instruction.
    pub mai: f64,
    /// False while cooling down or too young: the policy sees it as not migratable.
    pub movable: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Planned {
    pub pid: i32,
    pub comm: String,
    pub from: usize,
    pub to: usize,
    pub reason: String,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Decision {
    /// Some pressured node (over threshold for `hysteresis` intervals) holds BE tasks, or BE
    /// tasks may run there (as in Algorithm 3-1, where the trigger is the node the guest is on).
    pub triggered: bool,
    pub hot: Vec<usize>,
    /// The receivers the policy chose.
    pub targets: Vec<usize>,
    pub moves: Vec<Planned>,
    /// Why nothing (more) happened, for the log.
    pub note: String,
}

pub struct Guards {
    pub limits: Limits,
    pub min_improvement: f64,
}

impl Guards {
    /// The core's limits for the agent: every BE task is migratable unless cooling down
    /// (priority 1), any batch may move (moving an idle task's mask costs nothing and keeps it off
    /// the LC node when it wakes), and `warning_threshold` caps a receiver's load (not the
    /// source's LC load too, as the thesis's fine does: BE usage is not part of these loads).
    pub fn new(warning_threshold: f64, max_moves: usize, min_improvement: f64) -> Guards {
        let limits = Limits {
            warning_threshold,
            // The agent's own trigger (pressure over threshold for `hysteresis` intervals)
            // decides when a node sends.
            send_over_warning: false,
            migratable_priority_below: 1,
            migratable_cpu_below: f64::INFINITY,
            min_profit: f64::NEG_INFINITY,
            max_profit: f64::INFINITY,
            max_profit_share: None,
            max_moves,
            cap_at_source_load: false,
            ..Limits::default()
        };
        Guards {
            limits,
            min_improvement,
        }
    }
}

pub fn decide(
    policy: Policy,
    loads: &[f64],
    over: &[bool],
    tasks: &[TaskView],
    guards: &Guards,
    rng: &mut Rng,
    cycle: u64,
) -> Decision {
    let holds = |n: usize| tasks.iter().any(|t| t.node == n || t.reach.contains(n));
    let hot: Vec<usize> = (0..loads.len()).filter(|&n| over[n] && holds(n)).collect();
    if hot.is_empty() {
        let note = if over.iter().any(|&o| o) {
            "no BE task can run on a pressured node"
        } else {
            "no node over threshold"
        };
        return Decision {
            note: note.into(),
            ..Decision::default()
        };
    }
    let mut cell = Cell {
        nodes: loads
            .iter()
            .map(|&load| Node {
                load,
                tasks: Vec::new(),
            })
            .collect(),
    };
    for (i, t) in tasks.iter().enumerate() {
        cell.nodes[t.node].tasks.push(Task {
            id: i as u64,
            index: 0,
            priority: if t.movable { 0 } else { 1 },
            cpu_request: t.usage,
            cpu_usage: t.usage,
            max_cpu: 0.0,
            mem_usage: t.task.rss_pages as f64,
            mai: t.mai,
        });
    }
    let mut d = Decision {
        triggered: true,
        hot,
        targets: policy.receivers(loads),
        ..Decision::default()
    };
    let mut p = policy;
    let planned = p.plan(&cell, &guards.limits, rng, cycle);
    // Never onto a pressured node; leaving one needs a clear improvement (the core's guards, the
    // very rules `sim cluster --guards agent` replays).
    let (kept, skipped) =
        colosched_core::guards::filter(planned, loads, over, guards.min_improvement);
    let mut moved = vec![false; tasks.len()];
    for m in kept {
        let t = &tasks[m.task as usize];
        moved[m.task as usize] = true;
        d.moves.push(Planned {
            pid: t.task.pid,
            comm: t.task.comm.clone(),
            from: m.from,
            to: m.to,
            reason: policy.to_string(),
        });
    }
    // Algorithm 3-1 pins every task: unpinned BE tasks the plan left where they are (on a
    // receiver, or on a calm node) are pinned there, so the scheduler cannot wander them onto
    // the pressured node — if that node is calm by the same margin a move would need.
    let hottest = d
        .hot
        .iter()
        .map(|&h| loads[h])
        .fold(f64::NEG_INFINITY, f64::max);
    for (i, t) in tasks.iter().enumerate() {
        if !moved[i]
            && !t.pinned
            && t.movable
            && !over[t.node]
            && hottest - loads[t.node] >= guards.min_improvement
            && d.moves.len() < guards.limits.max_moves
        {
            d.moves.push(Planned {
                pid: t.task.pid,
                comm: t.task.comm.clone(),
                from: t.node,
                to: t.node,
                reason: "settle".into(),
            });
        }
    }
    if skipped > 0 {
        d.note = format!(
            "{skipped} move(s) skipped: onto a pressured node, or improvement below min_improvement {}",
            guards.min_improvement
        );
    } else if d.moves.is_empty() && tasks.iter().any(|t| !t.movable) {
        d.note = "nothing movable now (cool-down, min_task_age_s or back-off)".into();
    } else if d.moves.is_empty() {
        d.note = "the policy found nothing that fits".into();
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use colosched_core::Order;

    fn be(pid: i32, rss: u64) -> BeTask {
        BeTask {
            pid,
            comm: format!("be{pid}"),
            ppid: 1,
            starttime: 1,
            cpu_ticks: 0,
            num_threads: 1,
            rss_pages: rss,
            faults: 0,
            processor: 0,
            threads: None,
        }
    }

    fn view(t: &BeTask, node: usize, pinned: bool, usage: f64) -> TaskView<'_> {
        TaskView {
            task: t,
            node,
            pinned,
            reach: if pinned {
                [node].into_iter().collect()
            } else {
                CpuSet::all(1024)
            },
            usage,
            mai: 0.0,
            movable: true,
        }
    }

    fn run(policy: Policy, loads: &[f64], over: &[bool], tasks: &[TaskView]) -> Decision {
        decide(
            policy,
            loads,
            over,
            tasks,
            &Guards::new(1.0, 100, 0.1),
            &mut Rng::new(1),
            0,
        )
    }

    #[test]
    fn coarse_moves_all_off_the_pressured_node_and_settles_the_rest() {
        let (a, b, c) = (be(1, 10), be(2, 10), be(3, 10));
        let tasks = [
            view(&a, 0, false, 0.3),
            view(&b, 0, false, 0.2),
            view(&c, 1, false, 0.5),
        ];
        let d = run(Policy::Coarse, &[0.6, 0.0], &[true, false], &tasks);
        assert!(d.triggered);
        assert_eq!(d.targets, vec![1]);
        let to: Vec<(i32, usize, &str)> = d
            .moves
            .iter()
            .map(|m| (m.pid, m.to, m.reason.as_str()))
            .collect();
        assert_eq!(
            to,
            vec![(1, 1, "coarse"), (2, 1, "coarse"), (3, 1, "settle")]
        );
    }

    #[test]
    fn nodes_past_63_are_told_apart() {
        // 70 nodes; a BE task runs on node 1 but may run on node 65 (only), which is pressured.
        let a = be(1, 10);
        let mut t = view(&a, 1, false, 0.2);
        t.reach = [1, 65].into_iter().collect();
        let mut loads = vec![0.1; 70];
        let mut over = vec![false; 70];
        (loads[65], over[65]) = (0.9, true);
        let d = run(Policy::Coarse, &loads, &over, std::slice::from_ref(&t));
        assert!(d.triggered && d.hot == [65], "{d:?}");
        // Reaching node 64 instead (a 64-bit mask folded 64 and 65 into one bit) is no trigger.
        t.reach = [1, 64].into_iter().collect();
        assert!(!run(Policy::Coarse, &loads, &over, &[t]).triggered);
    }

    #[test]
    fn no_trigger_without_pressure_or_without_be_on_the_hot_node() {
        let a = be(1, 10);
        let tasks = [view(&a, 1, true, 0.5)];
        assert!(!run(Policy::Coarse, &[0.2, 0.0], &[false, false], &tasks).triggered);
        let d = run(Policy::Coarse, &[0.9, 0.0], &[true, false], &tasks);
        assert!(!d.triggered, "BE already off the hot node");
        assert_eq!(d.note, "no BE task can run on a pressured node");
    }

    #[test]
    fn unpinned_be_that_may_run_on_the_hot_node_is_pinned_away() {
        // The scheduler has the BE task on node 1 right now, but its mask allows node 0.
        let a = be(1, 10);
        let d = run(
            Policy::Coarse,
            &[0.9, 0.0],
            &[true, false],
            &[view(&a, 1, false, 0.5)],
        );
        assert!(d.triggered);
        assert_eq!(
            d.moves
                .iter()
                .map(|m| (m.to, m.reason.as_str()))
                .collect::<Vec<_>>(),
            vec![(1, "settle")]
        );
    }

    #[test]
    fn min_improvement_stops_ping_pong_between_equal_nodes() {
        let a = be(1, 10);
        let tasks = [view(&a, 0, true, 0.3)];
        let d = run(Policy::Coarse, &[0.55, 0.5], &[true, true], &tasks);
        assert!(d.triggered && d.moves.is_empty(), "{d:?}");
        assert!(d.note.contains("min_improvement"));
    }

    #[test]
    fn never_onto_a_pressured_node_and_calm_nodes_are_settled_in_place() {
        // Node 2 is pressured; BE on node 1 (calm, not the receiver) may still run on node 2.
        let (a, b) = (be(1, 10), be(2, 10));
        let tasks = [view(&a, 1, false, 0.0), view(&b, 2, false, 0.4)];
        let d = run(
            Policy::Fine(Order::MemUsage),
            &[0.0, 0.0, 0.9, 0.0],
            &[false, false, true, false],
            &tasks,
        );
        assert!(d.moves.iter().all(|m| m.to != 2), "{d:?}");
        assert!(
            d.moves.iter().any(|m| m.pid == 1),
            "the calm node's task is pinned where it is: {d:?}"
        );
        assert!(d.moves.iter().any(|m| m.pid == 2 && m.from == 2), "{d:?}");
        // Both nodes pressured and the least loaded is pressured too: nothing moves onto it.
        let c = be(3, 10);
        let d = run(
            Policy::Coarse,
            &[0.9, 0.8],
            &[true, true],
            &[view(&c, 0, true, 0.1)],
        );
        assert!(d.moves.is_empty(), "{d:?}");
    }

    #[test]
    fn no_settle_on_a_node_barely_calmer_than_the_pressured_one() {
        // [0.09, 0.10] with threshold 0.1: node 1 is pressured, node 0 only 0.01 calmer.
        let a = be(1, 10);
        let d = run(
            Policy::Coarse,
            &[0.09, 0.10],
            &[false, true],
            &[view(&a, 0, false, 0.5)],
        );
        assert!(d.moves.is_empty(), "{d:?}");
    }

    #[test]
    fn fine_moves_a_be_task_bigger_than_the_source_lc_load() {
        // LC pressure 0.2 on node 0, a BE hog using 0.8 there: it must still be able to leave.
        let a = be(1, 10);
        let d = run(
            Policy::Fine(Order::CpuUsage),
            &[0.2, 0.0],
            &[true, false],
            &[view(&a, 0, true, 0.8)],
        );
        assert_eq!(
            d.moves.iter().map(|m| (m.from, m.to)).collect::<Vec<_>>(),
            vec![(0, 1)]
        );
    }

    #[test]
    fn cooling_tasks_stay() {
        let a = be(1, 10);
        let mut v = view(&a, 0, true, 0.3);
        v.movable = false;
        let d = run(Policy::Coarse, &[0.9, 0.0], &[true, false], &[v]);
        assert!(d.moves.is_empty());
        assert!(d.note.contains("cool-down"), "{d:?}");
    }

    #[test]
    fn fine_spreads_to_the_two_least_loaded_in_memory_order() {
        let ts: Vec<BeTask> = (1..=4).map(|i| be(i, 100 - i as u64)).collect();
        let tasks: Vec<TaskView> = ts.iter().map(|t| view(t, 2, true, 0.25)).collect();
        let d = run(
            Policy::Fine(Order::MemUsage),
            &[0.1, 0.5, 0.9, 0.3],
            &[false, false, true, false],
            &tasks,
        );
        assert_eq!(d.targets, vec![0, 3]);
        // Smallest memory first (pid 4); node 0 takes tasks up to load 0.9 (3 × 0.25), node 3 the rest.
        let to: Vec<(i32, usize)> = d.moves.iter().map(|m| (m.pid, m.to)).collect();
        assert_eq!(to, vec![(4, 0), (3, 0), (2, 0), (1, 3)]);
    }
}
