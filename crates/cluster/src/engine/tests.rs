use super::*;
use crate::{select, DurationOver, Profile, Replay, TaskStart};
use colosched_core::{Limits, Policy};
use colosched_trace::usage::{TaskUsage, UsageModel};
use colosched_trace::{Runs, END_NONE, NEVER};

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
        submitted_in_trace: true,
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

/// The `full` profile (60 s steps, FIFO, to the trace's end) on the trace's own machines.
fn cfg(machines: usize) -> Config {
    Config {
        machines,
        placement: Placement::Trace,
        cell_size: 4,
        ..Profile::Full.config()
    }
}

/// The `thesis` profile on the trace's own machines, replaying every ended run; a task's row at
/// window 0 stands for every window (as in `usage`).
fn thesis(machines: usize) -> Config {
    Config {
        machines,
        placement: Placement::Trace,
        replay: Replay::Ended,
        usage_gaps: UsageGaps::Fill,
        ..Profile::Thesis.config()
    }
}

fn sim(runs: &Runs, usage: &UsageSource, cfg: &Config, policy: &str) -> Outcome {
    let mut p = Policy::parse(policy).unwrap();
    simulate(
        &select(runs, usage, cfg),
        usage,
        cfg,
        &mut p,
        &mut |_, _| true,
    )
    .unwrap()
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
    // Run 1: no wait + 120 s; runs 2 and 3 waited 120 s, then 120 s: (120 + 240 + 240) / 3.
    assert_eq!(o.summary.duration, 200.0);
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
            penalty: Penalty::Fixed(0.0),
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
    // Still running at the end: waited 0, 120 s of service, 11 steps of 60 s lost so far.
    assert_eq!(late.duration, (600.0 + 120.0 + 11.0 * 60.0) / 2.0);
    // One machine of two at 0.6: 0.1 / 0.5 over capacity in every step.
    assert!((late.overcommit - 0.2).abs() < 1e-6, "{}", late.overcommit);
}

#[test]
fn coarse_moves_migratable_tasks_and_counts_their_memory() {
    // Machine 0 is empty; machines 1..3 each hold two migratable tasks (priority 0, max CPU
    // 0.015, usage 0.012) and a production task, 0.524 in all: over the warning line, so they
    // send. Coarse sends the six small ones (0.024 per sender ≥ min_profit) to machine 0.
    let mut list = Vec::new();
    for m in 1..4u32 {
        let m64 = u64::from(m);
        list.push(run(m64, 0, 600, 0.05, m));
        list.push(run(20 + m64, 0, 600, 0.05, m));
        list.push(Run {
            priority: 9,
            ..run(10 + m64, 0, 600, 0.2, m)
        });
    }
    let r = runs(list, 4);
    let mut rows: Vec<(u64, f32, f32, f32)> = (1..4).map(|j| (j, 0.012, 0.015, 0.05)).collect();
    rows.extend((21..24).map(|j| (j, 0.012, 0.015, 0.05)));
    rows.extend((11..14).map(|j| (j, 0.5, 0.6, 0.1)));
    let u = usage(&rows);
    let none = sim(&r, &u, &cfg(4), "no_migration").summary;
    let coarse = sim(&r, &u, &cfg(4), "coarse");
    assert_eq!(coarse.summary.moves, 6);
    assert_eq!(coarse.series.move_to_first[0], 6);
    let gib = 6.0 * 0.05 * 32.0;
    assert!(
        (coarse.summary.migrated_gib - gib).abs() < 1e-6,
        "{}",
        coarse.summary.migrated_gib
    );
    let mbit = gib * 8.0 * 1073741824.0 / 1e6;
    assert!((coarse.series.net_mbit[0] - mbit).abs() < 1e-6 * mbit);
    // The thesis's unit: kbit per simulated second per machine, over 11 steps of 60 s.
    let per_machine = mbit * 1e3 / (11.0 * 60.0 * 4.0);
    let got = coarse.summary.net_kbit_s_per_machine;
    assert!(
        (got - per_machine).abs() < 1e-6 * per_machine,
        "{got} vs {per_machine}"
    );
    assert!((coarse.summary.net_mbit_s * 1e3 / 4.0 - got).abs() < 1e-6 * got);
    // The thesis's code counts 1,024 bits to the kbit.
    let kibit = sim(
        &r,
        &u,
        &Config {
            kbit_bits: 1024,
            ..cfg(4)
        },
        "coarse",
    );
    let want = got * 1000.0 / 1024.0;
    let got_kibit = kibit.summary.net_kbit_s_per_machine;
    assert!(
        (got_kibit - want).abs() < 1e-9 * want,
        "{got_kibit} vs {want}"
    );
    // Loads are clipped at capacity for Gini: the senders stay at 0.5 after sending 0.024.
    assert!(
        coarse.summary.gini < none.gini,
        "{} !< {}",
        coarse.summary.gini,
        none.gini
    );
    // The senders are now under the line, so later cycles move nothing.
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
    let u = usage(&[(1, 0.024, 0.024, 0.05), (2, 0.49, 0.5, 0.1)]);
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
        "the task is still on its source during the copy: {} vs {}",
        instant.gini[0],
        fast.gini[0]
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
        ..cfg(40)
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
    let sel = select(&r, &u, &cfg(2));
    let err = simulate(&sel, &u, &cfg(2), &mut Liar, &mut |_, _| true).unwrap_err();
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
                penalty: Penalty::Fixed(2.0),
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
        let err = simulate(&select(&r, &u, &c), &u, &c, &mut p, &mut |_, _| true).unwrap_err();
        assert!(err.to_string().contains(key), "{err}");
    }
}

#[test]
fn progress_can_stop_a_replay() {
    let r = runs(vec![run(1, 0, 60_000, 0.05, 0)], 1);
    let u = usage(&[]);
    let mut p = Policy::NoMigration;
    let mut calls = 0;
    let err = simulate(
        &select(&r, &u, &cfg(1)),
        &u,
        &cfg(1),
        &mut p,
        &mut |_, _| {
            calls += 1;
            calls < 3
        },
    );
    assert!(matches!(err, Err(SimError::Interrupted)));
}

#[test]
fn the_thesis_task_set_is_each_tasks_last_run_scheduled_then_finished() {
    const EVICT: u8 = 2;
    const KILL: u8 = 5;
    let task = |job: u64, r: Run| Run { job, ..r };
    let list = vec![
        task(
            2,
            Run {
                submitted_in_trace: false, // SUBMIT at timestamp 0: there before the trace
                ..run(2, 0, 50, 0.1, 0)
            },
        ),
        task(
            8,
            Run {
                submitted_in_trace: false, // there before the trace, evicted, then resubmitted
                end_kind: EVICT,
                ..run(8, 0, 5, 0.1, 0)
            },
        ),
        task(
            5,
            Run {
                end_kind: EVICT,
                ..run(5, 5, 10, 0.1, 0)
            },
        ),
        run(1, 10, 50, 0.1, 0),
        task(
            3,
            Run {
                end_kind: KILL,
                ..run(3, 10, 50, 0.1, 0)
            },
        ),
        run(6, 12, 20, 0.1, 0),
        run(5, 20, 30, 0.1, 0), // task 5 again: its last run, SCHEDULE → FINISH
        task(
            7,
            Run {
                schedule: NEVER,
                ..run(7, 30, 10, 0.1, 0)
            },
        ),
        run(8, 40, 10, 0.1, 0),
        task(
            6,
            Run {
                schedule: NEVER, // task 6 finished, then was submitted again: not replayed
                end_kind: END_NONE,
                ..run(6, 100, 0, 0.1, 0)
            },
        ),
        run(4, 6000, 50, 0.1, 0), // scheduled after the span of one task_usage part
    ];
    let r = runs(list, 1);
    let jobs = |u: &UsageSource, c: &Config| {
        let sel = select(&r, u, c);
        let jobs: Vec<(u64, u32)> = sel.replayed().map(|r| (r.job, r.submit)).collect();
        (jobs, sel.skipped)
    };
    let model_only = UsageSource::new(None, UsageModel::calibrated(0));
    let c = Config {
        replay: Replay::Thesis,
        task_start: TaskStart::LastSubmit,
        ..thesis(1)
    };
    assert_eq!(jobs(&model_only, &c), (vec![(1, 10), (5, 20), (8, 40)], 8));
    // The thesis's code places a task at its first event, and never a task from before the
    // window: task 5 at its first SUBMIT (5), task 8 not at all.
    let first = Config {
        task_start: TaskStart::FirstEvent,
        ..c.clone()
    };
    assert_eq!(jobs(&model_only, &first), (vec![(5, 5), (1, 10)], 9));
    let longer = Config {
        usage_span_s: 6001,
        ..c.clone()
    };
    assert_eq!(
        jobs(&model_only, &longer).0,
        vec![(1, 10), (5, 20), (8, 40), (4, 6000)]
    );
    // With real usage rows, having rows replaces the span: jobs 1 and 4 have some, job 5 none.
    let real = usage(&[(1, 0.1, 0.1, 0.0), (4, 0.1, 0.1, 0.0)]);
    assert_eq!(jobs(&real, &c).0, vec![(1, 10), (4, 6000)]);
    // `ended`: every scheduled run that ended; `all`: every scheduled run.
    let ended = Config {
        replay: Replay::Ended,
        ..c.clone()
    };
    assert_eq!(jobs(&model_only, &ended).0.len(), 9);
    let all = Config {
        replay: Replay::All,
        ..c
    };
    assert_eq!(
        jobs(&model_only, &all).0.len(),
        9,
        "the open run was never scheduled"
    );
}

#[test]
fn a_task_migrated_away_lets_a_waiting_one_start_at_once() {
    // Machine 1 holds a production task (request 0.3, usage 0.48) and two migratable ones
    // (request 0.05, usage 0.012 each): admitted 0.4, load 0.504 ≥ the warning line. A fourth
    // task (request 0.15) does not fit in the 0.1 left and waits. Coarse moves the two small
    // ones to machine 0; their requests leave with them, 0.2 > 0.15 is left, and the waiting
    // task starts in the same step. Without migration it is still waiting when the replay ends.
    let list = vec![
        Run {
            priority: 9,
            ..run(1, 0, 500, 0.3, 1)
        },
        run(2, 0, 500, 0.05, 1),
        run(3, 0, 500, 0.05, 1),
        Run {
            priority: 9,
            ..run(4, 0, 500, 0.15, 1)
        },
    ];
    let r = runs(list, 2);
    let u = usage(&[
        (1, 0.48, 0.5, 0.1),
        (2, 0.012, 0.015, 0.01),
        (3, 0.012, 0.015, 0.01),
        (4, 0.01, 0.01, 0.01),
    ]);
    // The text's migratable rule (the small tasks' requests, 0.05, are over the code's 0.025).
    let c = Config {
        cell_size: 2,
        limits: Limits::default(),
        duration_over: DurationOver::Started,
        ..thesis(2)
    };
    let none = sim(&r, &u, &c, "no_migration").summary;
    assert_eq!((none.started, none.pending_at_end), (3, 1));
    let coarse = sim(&r, &u, &c, "coarse").summary;
    assert_eq!(
        (coarse.moves, coarse.started, coarse.pending_at_end),
        (2, 4, 0)
    );
    assert_eq!(coarse.duration, 500.0, "nobody waited");
}

#[test]
fn backfill_starts_what_fits_where_fifo_waits_behind_the_head() {
    // Running: 0.3 of request. Waiting: 0.4 (does not fit). Arriving later: 0.1, which fits.
    let list = vec![
        run(1, 0, 500, 0.3, 0),
        run(2, 0, 500, 0.4, 0),
        run(3, 60, 500, 0.1, 0),
    ];
    let r = runs(list, 1);
    let u = usage(&[(1, 0.1, 0.1, 0.0), (2, 0.1, 0.1, 0.0), (3, 0.1, 0.1, 0.0)]);
    let c = Config {
        step_s: 60,
        ..thesis(1)
    };
    let backfill = sim(&r, &u, &c, "no_migration").summary;
    assert_eq!((backfill.started, backfill.pending_at_end), (2, 1));
    let fifo = sim(
        &r,
        &u,
        &Config {
            queue: Queue::Fifo,
            ..c
        },
        "no_migration",
    )
    .summary;
    assert_eq!((fifo.started, fifo.pending_at_end), (1, 2));
}

#[test]
fn the_thesis_penalty_and_clipped_metrics() {
    // Machine 0: a priority-0 and a priority-9 task, each using 0.3 (requests 0.2: both admitted)
    // for 10 s of service: load 0.6, over capacity 0.5 by 0.1 = 0.2 of capacity. For the 10 s the
    // priority-9 task runs, the priority-0 one loses 0.2 s per step (min(1, 0.1 / 0.5)), so it
    // needs 2 more steps: duration 12 s, the other 10 s. A task on machine 1 submitted at 100 s
    // keeps the replay going (1 s of service, no usage).
    let list = vec![
        run(1, 0, 10, 0.2, 0),
        Run {
            priority: 9,
            ..run(2, 0, 10, 0.2, 0)
        },
        run(3, 100, 1, 0.0, 1),
    ];
    let r = runs(list, 2);
    let u = usage(&[(1, 0.3, 0.3, 0.0), (2, 0.3, 0.3, 0.0), (3, 0.0, 0.0, 0.0)]);
    let o = sim(&r, &u, &thesis(2), "no_migration");
    let s = &o.summary;
    assert_eq!((s.steps, s.completed), (101, 3));
    assert!(
        (s.duration - (12.0 + 10.0 + 1.0) / 3.0).abs() < 1e-5,
        "{}",
        s.duration
    );
    // Clipped: machine 0 counts 0.5 of 0.5, machine 1 nothing: mean CPU 0.5 (unclipped: 0.6).
    assert!(
        (o.series.mean_cpu[0] - 0.5).abs() < 1e-6,
        "{}",
        o.series.mean_cpu[0]
    );
    // Gini of [0.5, 0]: 0.5. Overcommit: Σ max(0, load − cap) / cap = 0.1 / 0.5.
    assert!((o.series.gini[0] - 0.5).abs() < 1e-6);
    assert!((o.series.overcommit[0] - 0.2).abs() < 1e-6);
    assert!(
        (s.overcommit - 10.0 * 0.2 / 101.0).abs() < 1e-6,
        "{}",
        s.overcommit
    );
    // With every priority paying, the production task is late too.
    let all = sim(
        &r,
        &u,
        &Config {
            penalty_max_priority: 11,
            ..thesis(2)
        },
        "no_migration",
    )
    .summary;
    assert!(all.duration > s.duration);
}

#[test]
fn round_robin_placement_deals_tasks_over_cells() {
    // 8 machines in 2 cells; 9 migratable tasks submitted together: 5 go to the first cell,
    // 4 to the second, whatever the seed. A recording planner sees each cell's tasks.
    struct Count(Vec<usize>);
    impl Planner for Count {
        fn name(&self) -> String {
            "count".into()
        }
        fn plan(&mut self, cell: &Cell, _: &Limits, _: &mut Rng, _: u64) -> Vec<Move> {
            self.0.push(cell.nodes.iter().map(|n| n.tasks.len()).sum());
            Vec::new()
        }
    }
    let list: Vec<Run> = (0..9).map(|j| run(j, 0, 100, 0.01, 0)).collect();
    let rows: Vec<(u64, f32, f32, f32)> = (0..9).map(|j| (j, 0.01, 0.01, 0.0)).collect();
    let (r, u) = (runs(list, 1), usage(&rows));
    for seed in 1..6 {
        let c = Config {
            machines: 8,
            placement: Placement::Cells,
            seed,
            ..thesis(8)
        };
        let mut p = Count(Vec::new());
        simulate(&select(&r, &u, &c), &u, &c, &mut p, &mut |_, _| true).unwrap();
        assert_eq!(p.0, vec![5, 4], "seed {seed}");
    }
}

#[test]
fn the_replay_ends_at_the_last_submission_unless_asked() {
    // A 1,000 s task submitted at 0 and a 10 s task at 100 s.
    let r = runs(vec![run(1, 0, 1000, 0.1, 0), run(2, 100, 10, 0.1, 0)], 1);
    let u = usage(&[(1, 0.1, 0.1, 0.0), (2, 0.1, 0.1, 0.0)]);
    let at = |until: Until| {
        let s = sim(&r, &u, &Config { until, ..thesis(1) }, "no_migration").summary;
        (s.steps, s.completed)
    };
    assert_eq!(at(Until::LastSubmit), (101, 0));
    assert_eq!(at(Until::TraceEnd), (1001, 2));
    assert_eq!(at(Until::Drain), (1000, 2), "stops once nothing runs");
}

#[test]
fn duration_counts_completed_tasks_unless_asked_for_every_started_one() {
    // A 10 s task ends; a 1,000 s one is still running when the replay ends at 100 s.
    let r = runs(vec![run(1, 0, 1000, 0.1, 0), run(2, 100, 10, 0.1, 0)], 1);
    let u = usage(&[(1, 0.1, 0.1, 0.0), (2, 0.1, 0.1, 0.0)]);
    let at = |duration_over| {
        let c = Config {
            duration_over,
            until: Until::TraceEnd,
            ..thesis(1)
        };
        let r = Runs {
            trace_end: 200,
            ..r.clone()
        };
        sim(&r, &u, &c, "no_migration").summary
    };
    let completed = at(DurationOver::Completed);
    assert_eq!((completed.completed, completed.duration), (1, 10.0));
    assert_eq!(at(DurationOver::Started).duration, (10.0 + 1000.0) / 2.0);
}

#[test]
fn a_window_without_a_usage_row_uses_nothing_in_the_thesis_code() {
    // Task 1 has a row for window 1 (300-599 s) only; it runs from 0 to 900 s. With the thesis's
    // code it loads its machine in window 1 only; filled, window 2 carries window 1's row and
    // window 0 takes the usage model.
    let r = runs(vec![run(1, 0, 900, 0.1, 0), run(2, 899, 1, 0.0, 0)], 1);
    let row = Usage {
        cpu: 0.2,
        max_cpu: 0.2,
        mem: 0.0,
        mai: 0.0,
    };
    let real = TaskUsage::from_rows([(1, 0, 1, row), (2, 0, 2, Usage::default())]);
    let u = UsageSource::new(Some(real), UsageModel::calibrated(0));
    let series = |usage_gaps| {
        let c = Config {
            usage_gaps,
            ..thesis(1)
        };
        sim(&r, &u, &c, "no_migration").series.mean_cpu
    };
    let zero = series(UsageGaps::Zero);
    let fill = series(UsageGaps::Fill);
    assert_eq!(zero.len(), 900);
    let load = |s: &[f64], t: usize| s[t] * 0.5;
    assert_eq!(
        (load(&zero, 299), load(&zero, 300), load(&zero, 600)),
        (0.0, f64::from(0.2_f32), 0.0)
    );
    assert!(load(&fill, 299) > 0.0, "the model before the first row");
    assert_eq!(load(&fill, 600), f64::from(0.2_f32));
}

#[test]
fn the_peak_request_counts_overlapping_runs_once_each() {
    // 0.5 over [0, 10), 0.25 over [5, 20), 0.5 over [10, 30): at most 0.75 at once (the first
    // ends at 10 as the third starts).
    let sel = crate::Selection::of(vec![
        run(1, 0, 10, 0.5, 0),
        run(2, 5, 15, 0.25, 0),
        run(3, 10, 20, 0.5, 0),
    ]);
    assert!(
        (sel.peak_cpu_request() - 0.75).abs() < 1e-9,
        "{}",
        sel.peak_cpu_request()
    );
    assert_eq!(crate::Selection::default().peak_cpu_request(), 0.0);
}

/// A cluster of `machines` under `runs_n` random runs: mixed priorities (some in the migratable
/// band), requests, services from a minute to hours and some the trace never ends, usage from
/// the calibrated model (so it changes every window).
fn random_trace(seed: u64, machines: usize, runs_n: usize) -> (Runs, UsageSource) {
    let mut rng = colosched_core::Rng::new(seed);
    let mut list: Vec<Run> = (0..runs_n)
        .map(|i| {
            let submit = rng.below(20_000) as u32;
            let service = 30 + rng.below(if i % 3 == 0 { 600 } else { 9_000 }) as u32;
            // The last machine of each cell of 4 gets few runs: room to receive.
            let machine = loop {
                let m = rng.below(machines);
                if m % 4 != 3 || rng.below(8) == 0 {
                    break m;
                }
            };
            // Half small enough to migrate, half large.
            let request = if i % 2 == 0 {
                0.003 + rng.below(22) as f32 * 0.001
            } else {
                0.05 + rng.below(250) as f32 * 0.001
            };
            Run {
                index: i as u32,
                priority: [0, 0, 1, 2, 4, 9, 11][rng.below(7)],
                end_kind: if i % 17 == 0 { END_NONE } else { FINISH },
                ..run(i as u64, submit, service, request, machine as u32)
            }
        })
        .collect();
    list.sort_by_key(|r| r.submit);
    (
        runs(list, machines),
        UsageSource::new(None, UsageModel::calibrated(seed)),
    )
}

#[test]
fn skipping_quiet_machines_changes_no_result() {
    // The replay visits only machines where something happens and keeps the planner's view of
    // the others: every figure of every step must be what visiting everything gives, under both
    // profiles' rules (whole-step and fractional penalties, FIFO and backfill), migration copies,
    // draining, usage admission, every kind of policy and the agent's guards.
    // Admission counts a third of each request, so usage often crosses the line.
    let roomy = thesis(12);
    let thesis = Config {
        overcommit_ratio: 0.3,
        ..roomy.clone()
    };
    let full = Config {
        overcommit_ratio: 0.3,
        ..cfg(12)
    };
    let variants: Vec<(&str, Config)> = vec![
        ("thesis", thesis.clone()),
        ("full", full.clone()),
        (
            "full, 10 s steps, usage admission",
            Config {
                step_s: 10,
                admission: Admission::Usage,
                ..full.clone()
            },
        ),
        (
            "thesis, 7 s steps, fifo, drain",
            Config {
                step_s: 7,
                queue: Queue::Fifo,
                until: Until::Drain,
                ..thesis.clone()
            },
        ),
        (
            "full, copies at 5 Mbit/s",
            Config {
                bandwidth_mbit_s: Some(5.0),
                ..full.clone()
            },
        ),
        (
            "thesis, guards",
            Config {
                guards: true,
                ..thesis.clone()
            },
        ),
        (
            "full, random placement, cells of 3",
            Config {
                placement: Placement::Random,
                cell_size: 3,
                ..full
            },
        ),
        ("thesis, room for all", roomy),
    ];
    for seed in [1, 2] {
        let (r, u) = random_trace(seed, 12, 1500);
        for (name, c) in &variants {
            for policy in [
                "no_migration",
                "coarse",
                "fine",
                "fine:cpu_usage",
                "random:3",
            ] {
                let c = Config { seed, ..c.clone() };
                let selection = select(&r, &u, &c);
                let lazy = simulate(
                    &selection,
                    &u,
                    &c,
                    &mut Policy::parse(policy).unwrap(),
                    &mut |_, _| true,
                )
                .unwrap();
                let eager =
                    simulate_eagerly(&selection, &u, &c, &mut Policy::parse(policy).unwrap())
                        .unwrap();
                let what = format!("{name}, {policy}, seed {seed}");
                assert!(
                    lazy.summary.started > 100 && lazy.summary.completed > 50,
                    "{what}: too little happens: {:?}",
                    lazy.summary
                );
                let busy = *name != "thesis, room for all";
                assert!(
                    !busy || lazy.summary.overcommit > 0.0,
                    "{what}: never over the line"
                );
                assert!(
                    !busy
                        || policy == "no_migration"
                        || c.placement != Placement::Trace
                        || lazy.summary.moves > 0,
                    "{what}: no move"
                );
                // (Not assert_eq: the series are long.)
                assert!(
                    lazy.series == eager.series,
                    "{what}: the per-step series differ"
                );
                let strip = |s: &Summary| Summary {
                    wall_s: 0.0,
                    ..s.clone()
                };
                assert_eq!(strip(&lazy.summary), strip(&eager.summary), "{what}");
            }
        }
    }
}

/// What a new window's visit streams per task stays one cache line.
#[test]
fn the_part_of_a_task_every_visit_reads_is_64_bytes() {
    assert!(
        std::mem::size_of::<Live>() <= 64,
        "{}",
        std::mem::size_of::<Live>()
    );
}

#[test]
fn a_new_window_drawn_on_several_threads_changes_no_result() {
    // Enough machines that a new window's visits are split over the threads: one thread, three
    // threads and the plain loop must agree bit for bit (the tasks that end are summed in
    // machine order, the machines they free start their queues in that order).
    let machines = 2 * PARALLEL_MACHINES + 500;
    let (r, u) = random_trace(3, machines, 150_000);
    let c = Config {
        overcommit_ratio: 0.3,
        seed: 3,
        ..cfg(machines)
    };
    let selection = select(&r, &u, &c);
    let on = |threads: usize, eager: bool| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let mut p = Policy::parse("fine").unwrap();
            replay(&selection, &u, &c, &mut p, &mut |_, _| true, eager).unwrap()
        })
    };
    let one = on(1, false);
    let s = &one.summary;
    assert!(
        s.completed > 10_000 && s.pending_at_end > 0 && s.moves > 0 && s.overcommit > 0.0,
        "too little happens: {s:?}"
    );
    for (what, other) in [
        ("3 threads", on(3, false)),
        ("plain loop, 3 threads", on(3, true)),
    ] {
        assert!(one.series == other.series, "{what}: the series differ");
        let strip = |s: &Summary| Summary {
            wall_s: 0.0,
            ..s.clone()
        };
        assert_eq!(strip(&one.summary), strip(&other.summary), "{what}");
    }
}

#[test]
fn loads_merged_into_the_sorted_array_equal_a_sort() {
    // Values with ties, both zeros and machines set several times between two sorts.
    let mut rng = Rng::new(7);
    let values = [0.0, -0.0, 0.25, 0.5, 0.5, 1.0, 0.125, 0.75];
    let mut loads = Loads::default();
    for m in 0..40 {
        loads.set(m, values[rng.below(values.len())]);
    }
    for step in 0..300 {
        for _ in 0..rng.below(if step % 7 == 0 { 80 } else { 6 }) {
            let v = if rng.below(3) == 0 {
                rng.below(1000) as f64 / 997.0
            } else {
                values[rng.below(values.len())]
            };
            loads.set(rng.below(40), v);
        }
        let mut expected = loads.by_machine.clone();
        expected.sort_unstable_by(f64::total_cmp);
        let got: Vec<u64> = loads.sorted(false).iter().map(|x| x.to_bits()).collect();
        let expected: Vec<u64> = expected.iter().map(|x| x.to_bits()).collect();
        assert_eq!(got, expected, "step {step}");
    }
    // The full sort is a radix sort: the order of `total_cmp` on any value, not only on loads.
    let mut odd = vec![
        f64::NAN,
        -f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        -1.5,
        1.5,
        -0.0,
        0.0,
        f64::MIN_POSITIVE / 4.0,
        -f64::MIN_POSITIVE / 4.0,
        1e300,
        -1e-300,
    ];
    for i in 0..200 {
        odd.push((rng.below(2001) as f64 - 1000.0) / 7.0 * f64::from(i % 3));
    }
    let mut expected = odd.clone();
    expected.sort_unstable_by(f64::total_cmp);
    radsort::sort(&mut odd);
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&odd), bits(&expected));
}
