use super::*;
use crate::MigratableCpu;
use crate::{Node, Rng, TaskId};
use proptest::prelude::*;

/// A migratable task (priority 0, max CPU 0.01) with the given CPU usage.
fn be(id: TaskId, cpu: f64) -> Task {
    Task {
        id,
        index: 0,
        priority: 0,
        cpu_request: cpu,
        cpu_usage: cpu,
        max_cpu: 0.01,
        mem_usage: 0.0,
        mai: 0.0,
    }
}

/// A node whose load is its tasks' usage plus `other` (non-migratable work).
fn node(other: f64, tasks: Vec<Task>) -> Node {
    let mut tasks = tasks;
    if other > 0.0 {
        let lc = Task {
            priority: 9,
            max_cpu: other,
            ..be(1_000_000 + tasks.len() as u64, other)
        };
        tasks.push(lc);
    }
    Node {
        load: tasks.iter().map(|t| t.cpu_usage).sum(),
        tasks,
    }
}

/// The thesis's limits without its sender trigger and `is_useful_migrate` bounds, so a test can
/// look at one rule at a time.
fn open() -> Limits {
    Limits {
        send_over_warning: false,
        min_profit: 0.0,
        max_profit: f64::INFINITY,
        max_profit_share: None,
        ..Limits::default()
    }
}

fn plan(policy: &str, cell: &Cell, limits: &Limits) -> Vec<Move> {
    Policy::parse(policy)
        .unwrap()
        .plan(cell, limits, &mut Rng::new(1), 0)
}

fn moved(moves: &[Move]) -> Vec<(TaskId, usize, usize)> {
    let mut v: Vec<_> = moves.iter().map(|m| (m.task, m.from, m.to)).collect();
    v.sort();
    v
}

#[test]
fn names_round_trip_and_bad_names_are_refused() {
    for name in THESIS_POLICIES.iter().chain(&["random", "random:3"]) {
        assert_eq!(Policy::parse(name).unwrap().to_string(), *name);
    }
    for bad in ["", "fine:", "fine:disk", "coarse:x", "random:0", "Coarse"] {
        let err = Policy::parse(bad).unwrap_err();
        assert!(err.contains(bad) || bad.is_empty(), "{err}");
    }
}

#[test]
fn coarse_sends_every_migratable_task_to_the_least_loaded_node() {
    let cell = Cell {
        nodes: vec![
            node(0.30, vec![be(1, 0.01)]),
            node(0.05, vec![]),
            node(0.30, vec![be(2, 0.02), be(3, 0.02)]),
            node(
                0.40,
                vec![
                    be(4, 0.01),
                    Task {
                        priority: 2,
                        ..be(5, 0.01)
                    },
                ],
            ),
        ],
    };
    let moves = plan("coarse", &cell, &open());
    assert_eq!(
        moved(&moves),
        vec![(1, 0, 1), (2, 2, 1), (3, 2, 1), (4, 3, 1)]
    );
    assert!(moves.iter().all(|m| m.rank == 0));
}

#[test]
fn a_live_receiver_is_the_least_loaded_node_when_each_sender_turns() {
    // Loads 0.20, 0.10, 0.20, 0.10. Node 0's set (0.06) goes to node 1 (the lower index of the
    // tie), which ends at 0.16. A fixed receiver (node 1) cannot take node 2's set too: 0.22 would
    // be above node 2's own 0.20. A live one gives it to node 3, the least loaded by then.
    let cell = Cell {
        nodes: vec![
            node(0.14, vec![be(1, 0.03), be(2, 0.03)]),
            node(0.10, vec![]),
            node(0.14, vec![be(3, 0.06)]),
            node(0.10, vec![]),
        ],
    };
    let fixed = Limits {
        warning_threshold: 0.3,
        ..open()
    };
    let live = Limits {
        receiver: Receiver::Live,
        ..fixed
    };
    assert_eq!(
        moved(&plan("coarse", &cell, &fixed)),
        vec![(1, 0, 1), (2, 0, 1)]
    );
    assert_eq!(
        moved(&plan("coarse", &cell, &live)),
        vec![(1, 0, 1), (2, 0, 1), (3, 2, 3)]
    );
}

#[test]
fn coarse_skips_a_source_whose_tasks_would_cross_the_warning_line() {
    // Node 0 receives; node 1's set (0.02) fits exactly up to 0.5, node 2's (0.01) no longer does.
    let cell = Cell {
        nodes: vec![
            node(0.48, vec![]),
            node(0.49, vec![be(1, 0.01), be(2, 0.01)]),
            node(0.49, vec![be(3, 0.01)]),
        ],
    };
    let limits = Limits {
        warning_threshold: 0.5,
        ..open()
    };
    assert_eq!(
        moved(&plan("coarse", &cell, &limits)),
        vec![(1, 1, 0), (2, 1, 0)]
    );
    let tighter = Limits {
        warning_threshold: 0.499,
        ..limits
    };
    assert_eq!(moved(&plan("coarse", &cell, &tighter)), vec![(3, 2, 0)]);
}

#[test]
fn only_low_priority_small_tasks_are_migratable() {
    let l = Limits::default();
    assert!(l.is_migratable(&be(1, 0.01)));
    assert!(!l.is_migratable(&Task {
        priority: 2,
        ..be(1, 0.01)
    }));
    assert!(!l.is_migratable(&Task {
        max_cpu: 0.025,
        ..be(1, 0.01)
    }));
    assert!(l.is_migratable(&Task {
        priority: 1,
        max_cpu: 0.0249,
        ..be(1, 0.01)
    }));
}

#[test]
fn fine_fills_the_least_loaded_node_then_the_second() {
    // Loads node1 < node0 < node3 < node2: nodes 2 and 3 send to node 1 first, then node 0.
    let cell = Cell {
        nodes: vec![
            node(0.46, vec![]),
            node(0.45, vec![]),
            node(
                0.45,
                vec![be(1, 0.02), be(2, 0.02), be(3, 0.02), be(4, 0.02)],
            ),
            node(0.47, vec![be(5, 0.01)]),
        ],
    };
    let moves = plan("fine:cpu_usage", &cell, &open());
    // Node 1 (0.45) takes tasks 1, 2 (→ 0.49); task 3 would make 0.51 > 0.5, so it goes to
    // node 0 (0.46 → 0.48), then task 4 (→ 0.50). Node 3's task then fits nowhere.
    assert_eq!(
        moved(&moves),
        vec![(1, 2, 1), (2, 2, 1), (3, 2, 0), (4, 2, 0)]
    );
    let ranks: Vec<u8> = moves.iter().map(|m| m.rank).collect();
    assert_eq!(ranks, vec![0, 0, 1, 1]);
}

#[test]
fn fine_never_lifts_a_receiver_above_the_source() {
    // Receiver at 0.10, source at 0.14: moving 0.03 would leave the receiver at 0.13 ≤ 0.14,
    // the next 0.03 would make 0.16 > 0.14 and stops the batch.
    let cell = Cell {
        nodes: vec![
            node(0.10, vec![]),
            node(
                0.0,
                vec![be(1, 0.03), be(2, 0.03), be(3, 0.03), be(4, 0.05)],
            ),
        ],
    };
    assert_eq!(
        moved(&plan("fine:cpu_usage", &cell, &open())),
        vec![(1, 1, 0)]
    );
}

#[test]
fn sorted_orders_follow_the_thesis_knapsack_example() {
    // Free capacity 1.0; candidates 0.6, 0.45, 0.43 (thesis §4.3.2). Two nodes: one receiver.
    let limits = Limits {
        warning_threshold: 1.0,
        migratable_cpu_below: 1.0,
        ..open()
    };
    let cell = Cell {
        nodes: vec![
            node(0.0, vec![]),
            node(2.0, vec![be(1, 0.6), be(2, 0.45), be(3, 0.43)]),
        ],
    };
    assert_eq!(
        moved(&plan("fine:cpu_usage", &cell, &limits)),
        vec![(2, 1, 0), (3, 1, 0)]
    );
    assert_eq!(
        moved(&plan("fine:-cpu_usage", &cell, &limits)),
        vec![(1, 1, 0)]
    );
    // 1.1, 0.9, 0.1: largest-first moves nothing (stops at the first misfit, no skipping ahead).
    let cell = Cell {
        nodes: vec![
            node(0.0, vec![]),
            node(3.0, vec![be(1, 1.1), be(2, 0.9), be(3, 0.1)]),
        ],
    };
    assert_eq!(moved(&plan("fine:-cpu_usage", &cell, &limits)), vec![]);
    assert_eq!(
        moved(&plan("fine:cpu_usage", &cell, &limits)),
        vec![(2, 1, 0), (3, 1, 0)]
    );
}

#[test]
fn each_sort_key_decides_which_task_goes_first() {
    let limits = Limits {
        warning_threshold: 0.51,
        ..open()
    };
    // Only one of the two tasks fits; the key decides which.
    let a = Task {
        cpu_request: 0.9,
        mem_usage: 0.1,
        mai: 0.9,
        ..be(1, 0.02)
    };
    let b = Task {
        cpu_request: 0.1,
        mem_usage: 0.9,
        mai: 0.1,
        ..be(2, 0.015)
    };
    let cell = Cell {
        nodes: vec![node(0.48, vec![]), node(0.6, vec![a, b])],
    };
    let first = |p: &str| plan(p, &cell, &limits).first().map(|m| m.task);
    assert_eq!(first("fine:cpu_request"), Some(2));
    assert_eq!(first("fine:mem_usage"), Some(1));
    assert_eq!(first("fine:cache_misses"), Some(2));
    assert_eq!(first("fine:cpu_usage"), Some(2));
    assert_eq!(first("fine:-cpu_usage"), Some(1));
}

#[test]
fn min_profit_and_max_moves_hold_back_moves() {
    let cell = Cell {
        nodes: vec![node(0.1, vec![]), node(0.4, vec![be(1, 0.01), be(2, 0.01)])],
    };
    let stingy = Limits {
        min_profit: 0.05,
        ..open()
    };
    assert!(plan("coarse", &cell, &stingy).is_empty());
    assert!(plan("fine:cpu_usage", &cell, &stingy).is_empty());
    let one = Limits {
        max_moves: 1,
        ..open()
    };
    assert!(
        plan("coarse", &cell, &one).is_empty(),
        "coarse moves a source's whole set or nothing"
    );
    assert!(plan("fine:cpu_usage", &cell, &one).is_empty());
    let two = Limits {
        max_moves: 2,
        ..open()
    };
    assert_eq!(plan("fine:cpu_usage", &cell, &two).len(), 2);
}

#[test]
fn random_moves_one_task_on_its_interval_only() {
    let cell = Cell {
        nodes: vec![
            node(0.1, vec![be(1, 0.01)]),
            node(0.1, vec![]),
            node(0.1, vec![]),
        ],
    };
    let mut p = Policy::parse("random:5").unwrap();
    let mut rng = Rng::new(3);
    assert!(p.plan(&cell, &Limits::default(), &mut rng, 4).is_empty());
    let moves = p.plan(&cell, &Limits::default(), &mut rng, 5);
    assert_eq!(moves.len(), 1);
    assert_eq!((moves[0].task, moves[0].from), (1, 0));
    assert_ne!(moves[0].to, 0);
}

#[test]
fn no_migration_and_degenerate_cells_move_nothing() {
    let cell = Cell {
        nodes: vec![node(0.3, vec![be(1, 0.01)])],
    };
    for p in THESIS_POLICIES.iter().chain(&["random:1"]) {
        assert!(plan(p, &cell, &Limits::default()).is_empty(), "{p}");
        assert!(
            plan(p, &Cell::default(), &Limits::default()).is_empty(),
            "{p}"
        );
    }
}

fn arb_task(id: TaskId) -> impl Strategy<Value = Task> {
    (
        0u8..12,
        0.0..0.05f64,
        0.0..0.05f64,
        0.0..0.1f64,
        0.0..0.05f64,
    )
        .prop_map(move |(priority, cpu, extra, mem, mai)| Task {
            id,
            index: id as u32,
            priority,
            cpu_request: cpu + extra,
            cpu_usage: cpu,
            max_cpu: cpu + extra,
            mem_usage: mem,
            mai,
        })
}

fn arb_cell() -> impl Strategy<Value = Cell> {
    prop::collection::vec((0.0..0.6f64, 0usize..10), 1..7).prop_flat_map(|spec| {
        let mut next_id = 0;
        let nodes: Vec<_> = spec
            .into_iter()
            .map(|(background, n)| {
                let ids = next_id..next_id + n as u64;
                next_id += n as u64;
                let tasks: Vec<_> = ids.map(arb_task).collect();
                (Just(background), tasks)
            })
            .collect();
        nodes.prop_map(|nodes| Cell {
            nodes: nodes
                .into_iter()
                .map(|(bg, tasks)| Node {
                    load: bg + tasks.iter().map(|t| t.cpu_usage).sum::<f64>(),
                    tasks,
                })
                .collect(),
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    #[test]
    fn policies_keep_every_invariant(cell in arb_cell(), seed in any::<u64>(), wt in 0.2..0.8f64) {
        // The text's limits, the open ones, and the open ones with the thesis code's rules.
        let code = Limits {
            warning_threshold: wt,
            migratable_priority_below: 3,
            migratable_cpu: MigratableCpu::Request,
            migratable_even_index: true,
            receiver: Receiver::Live,
            ..open()
        };
        let limits = match seed % 3 {
            0 => Limits { warning_threshold: wt, ..Limits::default() },
            1 => Limits { warning_threshold: wt, ..open() },
            _ => code,
        };
        for name in THESIS_POLICIES.iter().chain(&["random:1"]) {
            let moves = Policy::parse(name).unwrap().plan(&cell, &limits, &mut Rng::new(seed), 0);
            // Hiding the tasks of the nodes it says it does not read changes neither its plan
            // nor the random numbers it draws (the simulator relies on both).
            let policy = Policy::parse(name).unwrap();
            let mut hidden = cell.clone();
            for node in &mut hidden.nodes {
                if !policy.reads_tasks(node.load, &limits) {
                    node.tasks.clear();
                }
            }
            let (mut a, mut b) = (Rng::new(seed), Rng::new(seed));
            prop_assert_eq!(&moves, &policy.clone().plan(&hidden, &limits, &mut b, 0), "{}: hidden tasks", name);
            policy.clone().plan(&cell, &limits, &mut a, 0);
            prop_assert_eq!(a.below(1 << 30), b.below(1 << 30), "{}: draws", name);
            let mut seen = std::collections::HashSet::new();
            let mut loads: Vec<f64> = cell.nodes.iter().map(|n| n.load).collect();
            let mut count: Vec<usize> = cell.nodes.iter().map(|n| n.tasks.len()).collect();
            for m in &moves {
                prop_assert!(seen.insert(m.task), "{name}: task {} moved twice", m.task);
                prop_assert_ne!(m.from, m.to);
                let task = cell.nodes[m.from].tasks.iter().find(|t| t.id == m.task);
                prop_assert!(task.is_some(), "{name}: task {} is not on node {}", m.task, m.from);
                let task = task.unwrap();
                prop_assert!(limits.is_migratable(task), "{name} moved non-migratable {task:?}");
                loads[m.from] -= task.cpu_usage;
                loads[m.to] += task.cpu_usage;
                count[m.from] -= 1;
                count[m.to] += 1;
            }
            for m in &moves {
                prop_assert!(loads[m.to] <= wt + 1e-9, "{name}: node {} ends at {} > {wt}", m.to, loads[m.to]);
            }
            let before: f64 = cell.nodes.iter().map(|n| n.load).sum();
            prop_assert!((loads.iter().sum::<f64>() - before).abs() < 1e-9);
            prop_assert_eq!(count.iter().sum::<usize>(), cell.nodes.iter().map(|n| n.tasks.len()).sum::<usize>());
        }
    }
}

#[test]
fn fine_cap_at_source_load_can_be_turned_off() {
    // The node agent's cell: loads are LC pressure only, so a BE task's usage can exceed its
    // source's load; with the thesis's cap it never fits anywhere.
    let cell = Cell {
        nodes: vec![
            Node {
                load: 0.2,
                tasks: vec![be(1, 0.4)],
            },
            Node {
                load: 0.0,
                tasks: vec![],
            },
        ],
    };
    let thesis = Limits {
        warning_threshold: 1.0,
        ..open()
    };
    assert!(plan("fine", &cell, &thesis).is_empty());
    let agent = Limits {
        cap_at_source_load: false,
        ..thesis
    };
    assert_eq!(moved(&plan("fine", &cell, &agent)), vec![(1, 0, 1)]);
}

#[test]
fn only_a_node_at_or_above_the_warning_line_sends() {
    // Sources at 0.49 and 0.50 (the line): only the second gives its tasks away, in coarse and
    // in fine alike.
    let cell = Cell {
        nodes: vec![
            node(0.10, vec![]),
            node(0.20, vec![]),
            node(0.47, vec![be(1, 0.02)]),
            node(0.475, vec![be(2, 0.025)]),
        ],
    };
    let limits = Limits {
        migratable_cpu_below: 1.0,
        ..Limits::default()
    };
    assert_eq!(moved(&plan("coarse", &cell, &limits)), vec![(2, 3, 0)]);
    assert_eq!(
        moved(&plan("fine:cpu_usage", &cell, &limits)),
        vec![(2, 3, 0)]
    );
    let anyone = Limits {
        send_over_warning: false,
        ..limits
    };
    assert_eq!(
        moved(&plan("coarse", &cell, &anyone)),
        vec![(1, 2, 0), (2, 3, 0)]
    );
}

#[test]
fn coarse_never_lifts_its_receiver_above_the_sender() {
    // Receiver at 0.44, sender at 0.50 with 0.05 of migratable work: 0.49 ≤ 0.50, it moves.
    // With 0.07 the receiver would end at 0.51 > min(0.5, 0.5): nothing moves. With the cap
    // turned off (the node agent) only the warning line holds, which 0.51 also crosses; at a
    // warning line of 0.6 the uncapped move goes through while the capped one still does not.
    let cell = |work: f64| Cell {
        nodes: vec![
            node(0.44, vec![]),
            node(0.50 - work, vec![be(1, work / 2.0), be(2, work / 2.0)]),
        ],
    };
    let limits = Limits {
        migratable_cpu_below: 1.0,
        ..Limits::default()
    };
    assert_eq!(moved(&plan("coarse", &cell(0.05), &limits)).len(), 2);
    assert!(plan("coarse", &cell(0.07), &limits).is_empty());
    let higher = Limits {
        warning_threshold: 0.6,
        send_over_warning: false,
        ..limits
    };
    assert!(plan("coarse", &cell(0.07), &higher).is_empty());
    let uncapped = Limits {
        cap_at_source_load: false,
        ..higher
    };
    assert_eq!(moved(&plan("coarse", &cell(0.07), &uncapped)).len(), 2);
}

#[test]
fn is_useful_migrate_bounds_the_moved_cpu() {
    let l = Limits::default();
    assert!(!l.is_useful(0.0199, 0.6), "below min_profit 0.02");
    assert!(l.is_useful(0.02, 0.6), "at min_profit: moves (≥)");
    assert!(l.is_useful(0.48, 0.6), "exactly 0.8 of the sender's load");
    assert!(
        !l.is_useful(0.49, 0.6),
        "more than 0.8 of the sender's load"
    );
    assert!(
        l.is_useful(0.5, 1.0) && !l.is_useful(0.51, 1.0),
        "max_profit 0.5"
    );
    // In a plan: a sender at 0.5 whose migratable tasks sum to 0.015 moves nothing in either
    // policy; with 0.03 it does.
    let cell = |each: f64| Cell {
        nodes: vec![
            node(0.1, vec![]),
            node(0.3, vec![]),
            node(
                0.5 - 3.0 * each,
                vec![be(1, each), be(2, each), be(3, each)],
            ),
        ],
    };
    for p in ["coarse", "fine:cpu_usage"] {
        assert!(plan(p, &cell(0.005), &l).is_empty(), "{p}");
        assert_eq!(plan(p, &cell(0.01), &l).len(), 3, "{p}");
    }
}

#[test]
fn the_codes_migratable_rule_is_an_option() {
    // The text: priority < 2 and peak CPU < 0.025. simulator.py: priority ≤ 2 and request < 0.025.
    let text = Limits::default();
    let code = Limits {
        migratable_priority_below: 3,
        migratable_cpu: MigratableCpu::Request,
        ..text
    };
    let busy_small_request = Task {
        cpu_request: 0.02,
        max_cpu: 0.04,
        ..be(1, 0.01)
    };
    let calm_big_request = Task {
        cpu_request: 0.03,
        max_cpu: 0.01,
        ..be(2, 0.01)
    };
    let priority_2 = Task {
        priority: 2,
        cpu_request: 0.01,
        ..be(3, 0.01)
    };
    assert!(!text.is_migratable(&busy_small_request) && code.is_migratable(&busy_small_request));
    assert!(text.is_migratable(&calm_big_request) && !code.is_migratable(&calm_big_request));
    assert!(!text.is_migratable(&priority_2) && code.is_migratable(&priority_2));
    // The code also takes only even task indices.
    let even = Limits {
        migratable_even_index: true,
        ..code
    };
    let odd = Task {
        index: 7,
        ..priority_2
    };
    assert!(even.is_migratable(&priority_2) && !even.is_migratable(&odd));
    assert!(code.is_migratable(&odd));
}
