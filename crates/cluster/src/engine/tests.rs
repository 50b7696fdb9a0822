use super::*;
use colosched_core::{Limits, Policy};
use colosched_trace::usage::{TaskUsage, UsageModel};
use colosched_trace::{END_NONE, NEVER};

const FINISH: u8 = 4;

/// A run of job `job` submitted and scheduled at `submit` on trace machine `machine`, needing
/// `service` seconds, with CPU request `request`.
fn run(job: u64, submit: u32, service: u32, request: f32, machine: u32) -> Run {
    Run {
        job,
        index: 0,
        submit,
        schedule: submit,
        end: submit + service,
        end_kind: FINISH,
        priority: 0,
        cpu_request: request,
        mem_request: 0.01,
        machine,
    }
}

fn runs(list: Vec<Run>, machines: usize) -> Runs {
    let trace_end = list.iter().map(|r| r.end).max().unwrap_or(0);
    Runs {
        runs: list,
        machine_ids: (0..machines as u64).collect(),
        trace_end,
        ..Runs::default()
    }
}

/// Usage fixed per job (real rows at window 0 hold for every later window).
fn usage(rows: &[(u64, f32, f32, f32)]) -> UsageSource {
    let real = TaskUsage::from_rows(rows.iter().map(|&(job, cpu, max_cpu, mem)| {
        (
            job,
            0,
            0,
            Usage {
                cpu,
                max_cpu,
                mem,
                mai: 0.0,
            },
        )
    }));
    UsageSource::new(Some(real), UsageModel::calibrated(0))
}

fn cfg(machines: usize) -> Config {
    Config {
        machines,
        placement: Placement::Trace,
        cell_size: 4,
        ..Config::default()
    }
}

fn sim(runs: &Runs, usage: &UsageSource, cfg: &Config, policy: &str) -> Outcome {
    let mut p = Policy::parse(policy).unwrap();
    simulate(runs, usage, cfg, &mut p, &mut |_, _| true).unwrap()
}

#[test]
fn admission_is_fifo_and_waits_for_capacity() {
    // Requests 0.3, 0.3, 0.1 on one machine of capacity 0.5: the second waits for the first;
    // the third fits but queues behind the second (FIFO), then both start when the first ends.
    let r = runs(
        vec![
            run(1, 0, 120, 0.3, 0),
            run(2, 0, 120, 0.3, 0),
            run(3, 0, 120, 0.1, 0),
        ],
        1,
    );
    let u = usage(&[(1, 0.1, 0.1, 0.0), (2, 0.1, 0.1, 0.0), (3, 0.1, 0.1, 0.0)]);
    let mut c = cfg(1);
    c.keep_series = true;
    let o = sim(&r, &u, &c, "no_migration");
    // Trace ends at 120 s: steps at 0, 60, 120. Run 1 finishes at 120; 2 and 3 start then.
    assert_eq!(o.summary.completed, 1);
    assert_eq!(o.summary.started, 3);
    assert_eq!(o.summary.duration, 120.0);
    let expect = [0.2, 0.2, 0.4];
    for (got, want) in o.series.mean_cpu.iter().zip(expect) {
        assert!((got - want).abs() < 1e-6, "{:?}", o.series.mean_cpu);
    }
}

#[test]
fn overcommit_ratio_scales_admission_load() {
    // Both runs outlast the replay (the trace ends at 3000 s), so a queued one stays queued.
    let r = Runs {
        trace_end: 3000,
        ..runs(vec![run(1, 0, 6000, 0.2, 0), run(2, 0, 6000, 0.2, 0)], 1)
    };
    let u = usage(&[(1, 0.1, 0.1, 0.0), (2, 0.1, 0.1, 0.0)]);
    assert_eq!(
        sim(
            &r,
            &u,
            &Config {
                overcommit_ratio: 1.0,
                ..cfg(1)
            },
            "no_migration"
        )
        .summary
        .pending_at_end,
        0
    );
    assert_eq!(
        sim(
            &r,
            &u,
            &Config {
                overcommit_ratio: 1.5,
                ..cfg(1)
            },
            "no_migration"
        )
        .summary
        .pending_at_end,
        1
    );
}

#[test]
fn an_overloaded_machine_delays_its_tasks() {
    // Usage 0.6 > capacity 0.5: with the default penalty (a whole step) the run makes no
    // progress; without a penalty it finishes after its 120 s.
    let mut list = vec![run(1, 0, 120, 0.1, 0)];
    list.push(Run {
        end: 600,
        ..run(9, 0, 600, 0.0, 1)
    }); // keeps the trace going to 600 s
    let r = runs(list, 2);
    let u = usage(&[(1, 0.6, 0.6, 0.0), (9, 0.0, 0.0, 0.0)]);
    let late = sim(&r, &u, &cfg(2), "no_migration").summary;
    let free = sim(
        &r,
        &u,
        &Config {
            overload_penalty: 0.0,
            ..cfg(2)
        },
        "no_migration",
    )
    .summary;
    assert_eq!(free.duration, (600.0 + 120.0) / 2.0); // runs 9 (600 s) and 1 (120 s)
    assert_eq!(
        late.completed, 1,
        "the overloaded run never finishes: {late:?}"
    );
    assert!(late.overcommit > 0.0);
}

#[test]
fn coarse_moves_migratable_tasks_and_counts_their_memory() {
    // Machine 0 is empty; machines 1..3 each hold one migratable task (priority 0, max CPU
    // 0.01) and one production task. Coarse sends the three small ones to machine 0.
    let mut list = Vec::new();
    for m in 1..4u32 {
        list.push(run(u64::from(m), 0, 600, 0.05, m));
        list.push(Run {
            priority: 9,
            ..run(10 + u64::from(m), 0, 600, 0.2, m)
        });
    }
    let r = runs(list, 4);
    let mut rows: Vec<(u64, f32, f32, f32)> = (1..4).map(|j| (j, 0.01, 0.01, 0.05)).collect();
    rows.extend((11..14).map(|j| (j, 0.2, 0.3, 0.1)));
    let u = usage(&rows);
    let none = sim(&r, &u, &cfg(4), "no_migration").summary;
    let coarse = sim(&r, &u, &cfg(4), "coarse");
    assert_eq!(coarse.summary.moves, 3);
    assert_eq!(coarse.series.move_to_first[0], 3);
    let gib = 3.0 * 0.05 * 32.0;
    assert!(
        (coarse.summary.migrated_gib - gib).abs() < 1e-6,
        "{}",
        coarse.summary.migrated_gib
    );
    assert!((coarse.series.net_mbit[0] - gib * 8.0 * 1073741824.0 / 1e6).abs() < 1e-3);
    assert!(
        coarse.summary.gini < none.gini,
        "{} !< {}",
        coarse.summary.gini,
        none.gini
    );
    // Nothing else is migratable, so later cycles move nothing.
    assert!(coarse.series.moves[1..].iter().all(|&m| m == 0));
}

#[test]
fn a_bandwidth_limit_makes_migration_take_time() {
    let list = vec![
        run(1, 0, 3000, 0.05, 1),
        Run {
            priority: 9,
            ..run(2, 0, 3000, 0.2, 1)
        },
    ];
    let r = runs(list, 2);
    let u = usage(&[(1, 0.01, 0.01, 0.05), (2, 0.2, 0.3, 0.1)]);
    let c = Config {
        cell_size: 2,
        ..cfg(2)
    };
    let instant = sim(&r, &u, &c, "coarse").series;
    // 0.05 × 32 GiB = 1.6 GiB ≈ 13,744 Mbit: 1000 Mbit/s takes about 14 s (lands at step 1),
    // 10 Mbit/s about 1374 s (step 23).
    let fast = sim(
        &r,
        &u,
        &Config {
            bandwidth_mbit_s: Some(1000.0),
            ..c.clone()
        },
        "coarse",
    )
    .series;
    let slow = sim(
        &r,
        &u,
        &Config {
            bandwidth_mbit_s: Some(10.0),
            ..c
        },
        "coarse",
    )
    .series;
    assert!(
        instant.gini[0] < fast.gini[0],
        "the task is still on its source during the copy"
    );
    assert_eq!(fast.gini[1], instant.gini[1]);
    assert!(
        slow.gini[22] > instant.gini[22] && slow.gini[23] == instant.gini[23],
        "{:?}",
        &slow.gini[20..25]
    );
    assert_eq!(
        slow.moves.iter().sum::<u32>(),
        1,
        "a task in flight is not offered again"
    );
}

#[test]
fn runs_never_scheduled_are_skipped_and_open_runs_only_replayed_on_request() {
    let never = Run {
        schedule: NEVER,
        ..run(1, 0, 60, 0.1, 0)
    };
    let open = Run {
        end_kind: END_NONE,
        ..run(2, 0, 60, 0.1, 0)
    };
    let r = runs(vec![never, open, run(3, 0, 300, 0.0, 0)], 1);
    let u = usage(&[(1, 0.1, 0.1, 0.0), (2, 0.1, 0.1, 0.0), (3, 0.0, 0.0, 0.0)]);
    let ended = sim(&r, &u, &cfg(1), "no_migration").summary;
    assert_eq!((ended.started, ended.completed, ended.skipped), (1, 1, 2));
    let all = sim(
        &r,
        &u,
        &Config {
            replay: Replay::All,
            ..cfg(1)
        },
        "no_migration",
    )
    .summary;
    assert_eq!(
        (all.started, all.completed, all.skipped),
        (2, 1, 1),
        "the open run never finishes"
    );
}

#[test]
fn usage_admission_lets_runs_in_while_actual_load_leaves_room() {
    // Two runs requesting 0.4 each but using 0.1: by request only one fits in 0.5 at a time,
    // by usage both run together.
    let r = Runs {
        trace_end: 3000,
        ..runs(vec![run(1, 0, 6000, 0.4, 0), run(2, 0, 6000, 0.4, 0)], 1)
    };
    let u = usage(&[(1, 0.1, 0.1, 0.0), (2, 0.1, 0.1, 0.0)]);
    let by_request = sim(&r, &u, &cfg(1), "no_migration").summary;
    let by_usage = sim(
        &r,
        &u,
        &Config {
            admission: Admission::Usage,
            ..cfg(1)
        },
        "no_migration",
    )
    .summary;
    assert_eq!(by_request.pending_at_end, 1);
    assert_eq!(by_usage.pending_at_end, 0);
    assert!(by_usage.mean_cpu > by_request.mean_cpu);
}

#[test]
fn the_same_seed_gives_the_same_replay() {
    let list: Vec<Run> = (0..400)
        .map(|i| {
            run(
                i,
                (i as u32 % 40) * 30,
                200 + (i as u32 * 37) % 900,
                0.02 + (i % 7) as f32 * 0.01,
                0,
            )
        })
        .collect();
    let r = runs(list, 1);
    let u = UsageSource::new(None, UsageModel::calibrated(3));
    let c = Config {
        machines: 40,
        placement: Placement::Random,
        seed: 9,
        ..Config::default()
    };
    let mut a = sim(&r, &u, &c, "fine");
    let mut b = sim(&r, &u, &c, "fine");
    a.summary.wall_s = 0.0;
    b.summary.wall_s = 0.0;
    assert_eq!(a, b);
    let mut other = sim(&r, &u, &Config { seed: 10, ..c }, "fine");
    other.summary.wall_s = 0.0;
    assert_ne!(a, other);
}

#[test]
fn a_policy_that_invents_moves_is_stopped_with_its_name() {
    struct Liar;
    impl Planner for Liar {
        fn name(&self) -> String {
            "liar".into()
        }
        fn plan(&mut self, _: &Cell, _: &Limits, _: &mut Rng, _: u64) -> Vec<Move> {
            vec![Move {
                task: 12345,
                from: 0,
                to: 1,
                rank: 0,
            }]
        }
    }
    let r = runs(vec![run(1, 0, 60, 0.05, 0)], 2);
    let u = usage(&[(1, 0.01, 0.01, 0.01)]);
    let err = simulate(&r, &u, &cfg(2), &mut Liar, &mut |_, _| true).unwrap_err();
    assert!(
        err.to_string().contains("liar") && err.to_string().contains("12345"),
        "{err}"
    );
}

#[test]
fn bad_configurations_are_refused() {
    let r = runs(vec![run(1, 0, 60, 0.05, 0)], 1);
    let u = usage(&[]);
    for (c, key) in [
        (
            Config {
                cell_size: 0,
                ..cfg(1)
            },
            "cell_size",
        ),
        (
            Config {
                step_s: 0,
                ..cfg(1)
            },
            "step_s",
        ),
        (
            Config {
                capacity: -1.0,
                ..cfg(1)
            },
            "capacity",
        ),
        (
            Config {
                overload_penalty: 2.0,
                ..cfg(1)
            },
            "overload_penalty",
        ),
        (
            Config {
                machines: 0,
                placement: Placement::Random,
                ..cfg(1)
            },
            "machines",
        ),
        (
            Config {
                bandwidth_mbit_s: Some(0.0),
                ..cfg(1)
            },
            "bandwidth",
        ),
    ] {
        let mut p = Policy::NoMigration;
        let err = simulate(&r, &u, &c, &mut p, &mut |_, _| true).unwrap_err();
        assert!(err.to_string().contains(key), "{err}");
    }
}

#[test]
fn progress_can_stop_a_replay() {
    let r = runs(vec![run(1, 0, 60_000, 0.05, 0)], 1);
    let u = usage(&[]);
    let mut p = Policy::NoMigration;
    let mut calls = 0;
    let err = simulate(&r, &u, &cfg(1), &mut p, &mut |_, _| {
        calls += 1;
        calls < 3
    });
    assert!(matches!(err, Err(SimError::Interrupted)));
}
