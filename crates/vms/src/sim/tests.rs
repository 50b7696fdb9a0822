use super::*;

fn preset(name: &str) -> Scenario {
    Scenario::load(name).unwrap_or_else(|e| panic!("{e}"))
}

fn mean_iops(r: &RunResult) -> f64 {
    r.vms.iter().map(|v| v.iops).sum::<f64>() / r.vms.len() as f64
}

#[test]
fn every_preset_runs_under_every_policy_and_a_seed_gives_the_same_run() {
    for (name, _) in PRESETS {
        let s = preset(name);
        for policy in POLICIES {
            let a = run(&s, policy, 7).unwrap();
            let b = run(&s, policy, 7).unwrap();
            let json = |r: &RunResult| serde_json::to_string(r).unwrap();
            assert_eq!(json(&a), json(&b), "{name} {policy}");
            let vms: usize = s.apps.iter().map(|a| a.vms).sum();
            assert_eq!(a.vms.len(), vms, "no VM lost or added");
            assert_eq!(
                a.windows.len(),
                (s.duration_s / s.window_s) as usize * s.host_list().len()
            );
            // Every window, every VM is on exactly one host.
            for w in a.windows.chunks(s.host_list().len()) {
                assert_eq!(w.iter().map(|x| x.vms).sum::<usize>(), vms);
            }
            if *policy == "none" {
                assert!(a.migrations.is_empty());
            }
        }
    }
    assert!(run(&preset("spec003-fio-read"), "drs", 1)
        .unwrap_err()
        .contains("unknown policy"));
}

#[test]
fn random_moves_one_vm_a_window_and_a_migration_costs_what_the_paper_measured() {
    let s = preset("spec003-fio-read");
    let r = run(&s, "random", 1).unwrap();
    let windows = (s.duration_s / s.window_s) as usize;
    // One a window, but the last window's move has no time left to end.
    assert!(r.migrations.len() >= windows - 2 && r.migrations.len() < windows);
    for m in &r.migrations {
        assert_ne!(m.from, m.to);
        // 6 GB of memory and the 256 MB slice at 40 % of 10 Gbit/s, plus what is dirtied.
        assert!((12.0..=16.0).contains(&m.time_s), "{m:?}");
        assert!((m.link_share - 0.4).abs() < 1e-9);
        assert!(m.mb > 6144.0 + 256.0 && m.downtime_ms <= 300.0 + 1e-9);
        // Reads: the moved VM pays the dirty-page tracking's 5 % and more, as the copy takes
        // from its SSD; and less than half. (Where a shared limit binds, as the backend does
        // for writes, asking 5 % less loses less than 5 %: the others on it give way.)
        assert!(m.slowdown >= 0.05 - 1e-9 && m.slowdown < 0.5, "{m:?}");
    }
}

#[test]
fn fio_the_planner_balances_the_ssds_and_beats_random_more_on_reads_than_on_writes() {
    let gain = |name: &str| -> f64 {
        let s = preset(name);
        let (mut p, mut r) = (0.0, 0.0);
        for seed in 1..=3 {
            p += mean_iops(&run(&s, "planner", seed).unwrap());
            r += mean_iops(&run(&s, "random", seed).unwrap());
        }
        p / r
    };
    let (read, write) = (gain("spec003-fio-read"), gain("spec003-fio-write"));
    assert!(read > 1.05, "read {read}");
    assert!(write > 1.0, "write {write}");
    // Writes flush dirty blocks to the shared backend, which no placement relieves.
    assert!(read > write + 0.05, "read {read} write {write}");
    // After the planner's first moves, 12 VMs sit 3 to a host, and it stops moving them.
    let r = run(&preset("spec003-fio-read"), "planner", 2).unwrap();
    let last = &r.windows[r.windows.len() - 4..];
    assert!(last.iter().all(|w| w.vms == 3), "{last:?}");
    assert!(
        r.migrations.iter().all(|m| m.start_s < 600.0),
        "{:?}",
        r.migrations
    );
}

#[test]
fn zookeeper_the_planner_spreads_3_and_3_and_pays_a_little_speed_for_it() {
    let s = preset("spec003-zookeeper");
    for seed in 1..=3 {
        let p = run(&s, "planner", seed).unwrap();
        let r = run(&s, "random", seed).unwrap();
        let (pz, rz) = (&p.apps[0], &r.apps[0]);
        assert_eq!((pz.ld_mean, pz.ld_final, pz.ld_best), (9.0, 9, 9));
        assert!(rz.ld_mean < 9.0);
        // Spread, a write's quorum waits for a follower on the other host.
        let ratio = pz.ops_s.unwrap() / rz.ops_s.unwrap();
        assert!((0.85..1.0).contains(&ratio), "{ratio}");
    }
}

#[test]
fn hadoop_io_jobs_run_faster_under_the_planner_and_cpu_jobs_the_same() {
    let s = preset("spec003-hadoop");
    let time = |policy: &str, io: bool| -> f64 {
        let mut t = Vec::new();
        for seed in 1..=3 {
            let r = run(&s, policy, seed).unwrap();
            t.extend(
                (r.jobs.iter())
                    .filter(|j| j.measured && j.throughput_mbps.is_some() == io)
                    .map(|j| j.time_s),
            );
        }
        assert!(!t.is_empty());
        t.iter().sum::<f64>() / t.len() as f64
    };
    assert!(time("planner", true) < 0.9 * time("random", true));
    let cpu = time("planner", false) / time("random", false);
    assert!((0.95..1.05).contains(&cpu), "{cpu}");
}

#[test]
fn cloudcache_moves_only_when_working_sets_overflow_an_ssd() {
    // The paper's SSDs hold every working set: CloudCache never moves a VM there.
    let r = run(&preset("spec003-fio-read"), "cloudcache", 1).unwrap();
    assert!(r.migrations.is_empty());
    // Small SSDs: 12 GB of working sets on 4 GB caches overflow, so it moves VMs.
    let text = crate::sim::scenario::PRESETS[0]
        .1
        .replace("ssd_capacity_mb = 240000", "ssd_capacity_mb = 4000");
    let r = run(&Scenario::parse(&text).unwrap(), "cloudcache", 1).unwrap();
    assert!(!r.migrations.is_empty());
}

#[test]
fn bad_scenarios_name_the_key() {
    let good = crate::sim::scenario::PRESETS[0].1;
    for (from, to, says) in [
        ("vms = 12", "vms = 0", "apps[0].vms: must be at least 1"),
        ("ssd_iops = 20000", "ssd_iops = -1", "hosts[0].ssd_iops"),
        (
            "iodepth = 8",
            "iodepth = 8, typo = 1",
            "unknown field `typo`",
        ),
        ("window_s = 60", "window_s = 0", "window_s"),
        ("write_cost = 3", "write_cost = 0", "backend.write_cost"),
        (
            "rw = \"randread\"",
            "rw = \"randrw\"",
            "unknown variant `randrw`",
        ),
        ("name = ", "nom = 1\nname = ", "unknown field `nom`"),
    ] {
        let text = good.replacen(from, to, 1);
        assert_ne!(text, good, "{from}");
        let e = Scenario::parse(&text).unwrap_err().to_string();
        assert!(e.contains(says), "{from} -> {e}");
        assert!(!e.contains('\n'), "one line: {e}");
    }
    let e = Scenario::parse(&good.replace(
        "workload = { kind = \"io_benchmark\"",
        "initial = [0, 9]\nworkload = { kind = \"io_benchmark\"",
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("apps[0].initial"), "{e}");
    let hadoop = crate::sim::scenario::PRESETS[2]
        .1
        .replace("\"randr\"", "\"sort\"");
    let e = Scenario::parse(&hadoop).unwrap_err().to_string();
    assert!(e.contains("apps[0].workload.jobs[4]: \"sort\""), "{e}");
    for (key, says) in [
        ("ssd_limit = -1", "planner.ssd_limit"),
        ("min_gain = nan", "planner.min_gain"),
        ("stickiness = -0.1", "planner.stickiness"),
        ("k = 0", "planner.k"),
        ("history = 0", "planner.history"),
    ] {
        let e = Scenario::parse(&format!("{good}\n[planner]\n{key}\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains(says), "{key} -> {e}");
    }
    for (from, to, says) in [
        (
            "change_every_s = 600",
            "change_every_s = 0.7",
            "apps[1].workload.change_every_s: must be a whole",
        ),
        (
            "change_cv = 0.5",
            "change_cv = 1e200",
            "apps[1].workload.change_cv",
        ),
        (
            "id = \"other\"",
            "id = \"hadoop1\"",
            "apps[1].id: VM \"hadoop10\" would also be one of \"hadoop\"'s",
        ),
    ] {
        // 11 Hadoop VMs, so that "hadoop1"'s VM 0 and "hadoop"'s VM 10 have one id.
        let text = (crate::sim::scenario::PRESETS[2]
            .1
            .replacen("vms = 8", "vms = 11", 1))
        .replacen(from, to, 1);
        assert!(text.contains(to), "{from}");
        let e = Scenario::parse(&text).unwrap_err().to_string();
        assert!(e.contains(says), "{from} -> {e}");
    }
    let e = Scenario::load("/nonexistent.toml").unwrap_err().to_string();
    assert!(e.contains("spec003-fio-read"), "lists the presets: {e}");
}

/// A value a check refuses is shown as `file:line: key: problem`.
#[test]
fn a_file_error_names_the_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    let text = crate::sim::scenario::PRESETS[2]
        .1
        .replacen("vms = 8", "vms = 0", 1);
    let line = 1 + text[..text.find("vms = 0").unwrap()].matches('\n').count();
    std::fs::write(&path, &text).unwrap();
    let e = Scenario::load(path.to_str().unwrap())
        .unwrap_err()
        .to_string();
    let want = format!("{}:{line}: apps[0].vms: ", path.display());
    assert!(e.starts_with(&want), "{e} (wanted {want}…)");
}

const SHIFTING: &str = include_str!("../../scenarios/shifting-hot-set.toml");

/// The planner's moves and those of random on `s` over `seeds`: (planner moves, of them
/// straight back, random moves, planner's mean IOPS per VM ÷ random's, summed over the seeds).
fn chase(s: &Scenario, seeds: std::ops::RangeInclusive<u64>) -> (usize, usize, usize, f64) {
    let (mut moves, mut back, mut random_moves, mut p, mut r) = (0, 0, 0, 0.0, 0.0);
    for seed in seeds {
        let planner = run(s, "planner", seed).unwrap();
        let random = run(s, "random", seed).unwrap();
        moves += planner.migrations.len();
        back += (planner.migrations.iter())
            .filter(|m| m.straight_back)
            .count();
        random_moves += random.migrations.len();
        p += mean_iops(&planner);
        r += mean_iops(&random);
    }
    (moves, back, random_moves, p / r)
}

/// Issue 26: with a hot set that shifts every 300 s, the planner moves no more than random,
/// its VMs get no less, and at most 5 % of its moves go straight back.
#[test]
fn a_shifting_hot_set_is_not_chased() {
    let s = Scenario::parse(SHIFTING).unwrap();
    for seed in 1..=5 {
        let (n, back, random, iops) = chase(&s, seed..=seed);
        assert!(n <= random, "seed {seed}: {n} moves, random {random}");
        assert!(iops >= 1.0, "seed {seed}: {iops} of random's IOPS");
        assert!(back <= n, "seed {seed}");
    }
    // 1 of 66 here (docs/vm-placement.md).
    let (moves, back, _, _) = chase(&s, 1..=5);
    assert!(back * 20 <= moves, "{back} of {moves} back");
    // The metric itself: random moves straight back now and then.
    let backs: usize = (1..=3)
        .map(|seed| {
            let r = run(&s, "random", seed).unwrap();
            r.migrations.iter().filter(|m| m.straight_back).count()
        })
        .sum();
    assert!(backs > 0);
}

/// The same on seeds and scenarios the planner was not tuned on: seeds 6–15, the hot set
/// shifting every 120 s and every 600 s, and twice the hosts and VMs. Pooled over the seeds:
/// at most 5 % straight back, no more moves than random, no less I/O.
#[test]
fn a_shifting_hot_set_is_not_chased_on_other_seeds_and_scenarios() {
    let every = |s: u32| SHIFTING.replace("change_every_s = 300", &format!("change_every_s = {s}"));
    let bigger = SHIFTING
        .replace("count = 4", "count = 8")
        .replace("vms = 16", "vms = 32");
    for (name, text) in [
        ("300 s", SHIFTING.to_string()),
        ("120 s", every(120)),
        ("600 s", every(600)),
        ("8 hosts, 32 VMs", bigger),
    ] {
        assert!(name == "300 s" || text != SHIFTING, "{name}");
        let (moves, back, random, iops) = chase(&Scenario::parse(&text).unwrap(), 6..=15);
        assert!(back * 20 <= moves, "{name}: {back} of {moves} back");
        assert!(moves <= random, "{name}: {moves} moves, random {random}");
        assert!(iops >= 1.0, "{name}: {iops} of random's IOPS");
    }
}

#[test]
fn no_move_when_nothing_is_saturated_or_the_backend_is_the_limit() {
    // Light: the same VMs at a tenth of the load, no level changes.
    let light = Scenario::parse(
        &SHIFTING
            .replace("iops = 4000", "iops = 400")
            .replace("change_cv = 1.5", "change_cv = 0"),
    )
    .unwrap();
    // Every VM on h0 (h0 saturated), but the backend carries a tenth of what they miss.
    let bound = SHIFTING
        .replace("iops = 200000", "iops = 2000")
        .replace("change_cv = 1.5", "change_cv = 0")
        .replace(
            "initial = \"round-robin\"",
            "initial = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 3, 3]",
        );
    let bound = Scenario::parse(&bound).unwrap();
    for seed in 1..=2 {
        assert_eq!(run(&light, "planner", seed).unwrap().migrations.len(), 0);
        assert_eq!(run(&bound, "planner", seed).unwrap().migrations.len(), 0);
    }
    // The same placement with room on the backend: the planner does move.
    let free = Scenario::parse(
        &SHIFTING
            .replace("change_cv = 1.5", "change_cv = 0")
            .replace(
                "initial = \"round-robin\"",
                "initial = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 3, 3]",
            ),
    )
    .unwrap();
    assert!(!run(&free, "planner", 1).unwrap().migrations.is_empty());
}
