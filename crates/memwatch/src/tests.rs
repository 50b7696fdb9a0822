//! Unit tests. The v2 memory files do not exist on this machine (the memory controller is bound
//! to cgroup v1), so the v2 logic runs on a fake tree in a tempdir (`open_fake` skips the check
//! that the directory is on a cgroup filesystem): there, regular files never signal POLLPRI, so
//! changes are picked up by the watcher's periodic re-read. PSI triggers are real: they run on
//! cgroup2 `cpu.pressure` in a test group created and removed here. The v2 backend on a real
//! kernel is tested in a qemu guest (tests/test_memwatch_guest.py).

use super::*;
use std::fs;
use std::path::Path;
use std::time::Instant;

use rustix::event::PollFlags;

#[test]
fn thresholds_parse_sizes_and_percentages() {
    assert_eq!(Threshold::parse("256M"), Ok(Threshold::Bytes(256 << 20)));
    assert_eq!(Threshold::parse("1G"), Ok(Threshold::Bytes(1 << 30)));
    assert_eq!(Threshold::parse("512k"), Ok(Threshold::Bytes(512 << 10)));
    assert_eq!(Threshold::parse("4096"), Ok(Threshold::Bytes(4096)));
    assert_eq!(Threshold::parse("80%"), Ok(Threshold::Percent(80.0)));
    assert_eq!(Threshold::parse("12.5%"), Ok(Threshold::Percent(12.5)));
    for bad in ["0", "-1M", "0%", "101%", "12Q", "", "M", "abc%"] {
        let e = Threshold::parse(bad).expect_err(bad);
        assert!(e.to_string().contains(&format!("{bad:?}")), "{bad}: {e}");
        assert_eq!(e.value, bad);
    }
    assert_eq!(Threshold::Percent(50.0).resolve(Some(1000)), Some(500));
    assert_eq!(Threshold::Percent(50.0).resolve(None), None);
    assert_eq!(format_size(256 << 20), "256M");
    assert_eq!(format_size(1000), "1000");
}

#[test]
fn one_crossing_each_is_one_sweep() {
    // Usage rose past thresholds 0 and 1 (both were below): up, ascending.
    assert_eq!(
        order_crossings(&[false, false, false], &[1, 1, 0]),
        vec![(0, true), (1, true)]
    );
    // Usage fell past 2 and 1: down, descending.
    assert_eq!(
        order_crossings(&[true, true, true], &[0, 1, 1]),
        vec![(2, false), (1, false)]
    );
    assert!(order_crossings(&[false], &[0]).is_empty());
}

#[test]
fn round_trips_are_ordered_as_the_fewest_sweeps() {
    // Thresholds 10, 20; usage 15 -> 25 -> 5: 20 up, 20 down, 10 down.
    assert_eq!(
        order_crossings(&[true, false], &[1, 2]),
        vec![(1, true), (1, false), (0, false)]
    );
    // Usage 15 -> 5 -> 25: 10 down, 10 up, 20 up.
    assert_eq!(
        order_crossings(&[true, false], &[2, 1]),
        vec![(0, false), (0, true), (1, true)]
    );
    // Usage 25 -> 5 -> 25: down both, then up both.
    assert_eq!(
        order_crossings(&[true, true], &[2, 2]),
        vec![(1, false), (0, false), (0, true), (1, true)]
    );
}

#[test]
fn polling_finds_crossings_both_ways() {
    let b = [100, 200, 300];
    assert_eq!(
        poll_crossings(&b, &[false, false, false], 250),
        vec![(0, true), (1, true)]
    );
    assert_eq!(
        poll_crossings(&b, &[true, true, true], 150),
        vec![(2, false), (1, false)]
    );
    assert!(poll_crossings(&b, &[true, false, false], 199).is_empty());
    // Exactly at a threshold counts as above (as the kernel's `threshold <= usage`).
    assert_eq!(
        poll_crossings(&b, &[true, false, false], 200),
        vec![(1, true)]
    );
}

#[test]
fn memory_events_parse_and_diff() {
    let a = parse_memory_events("low 0\nhigh 3\nmax 1\noom 0\noom_kill 0\n").unwrap();
    let b = parse_memory_events("low 0\nhigh 7\nmax 1\noom 1\noom_kill 1\nnew_key 9\n").unwrap();
    assert_eq!(a.get("high"), 3);
    assert_eq!(b.diff(&a), vec![("high", 4), ("oom", 1), ("oom_kill", 1)]);
    assert!(a.diff(&a).is_empty());
    let e = parse_memory_events("low 0\nhigh x\n").unwrap_err();
    assert!(
        e.to_string().contains("line 2") && e.to_string().contains("high"),
        "{e}"
    );
    assert_eq!(e.value, "high x");
}

/// A flag named as the cause: the bad input of the command line (exit 2).
fn is_flag(e: &WatchError) -> bool {
    matches!(e, WatchError::Flag { .. })
}

/// A fake cgroup v2 memory group.
fn fake_v2(current: u64, max: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    fs::write(p.join("memory.current"), format!("{current}\n")).unwrap();
    fs::write(p.join("memory.max"), format!("{max}\n")).unwrap();
    fs::write(p.join("memory.high"), "max\n").unwrap();
    fs::write(
        p.join("memory.events"),
        "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n",
    )
    .unwrap();
    d
}

fn opts(th: &[&str]) -> WatchOptions {
    WatchOptions {
        thresholds: th.iter().map(|t| Threshold::parse(t).unwrap()).collect(),
        poll_period: Duration::from_millis(10),
        ..WatchOptions::default()
    }
}

/// Waits until at least one event arrives (or 2 s pass).
/// The next events' (threshold, direction) pairs.
fn crossings(w: &mut MemoryThresholdWatcher) -> Vec<(String, Direction)> {
    (next_events(w).iter())
        .map(|e| (e.threshold.clone(), e.direction))
        .collect()
}

fn next_events(w: &mut MemoryThresholdWatcher) -> Vec<Event> {
    let end = Instant::now() + Duration::from_secs(2);
    while Instant::now() < end {
        let e = w.wait(Some(Duration::from_millis(50))).unwrap();
        if !e.is_empty() {
            return e;
        }
    }
    Vec::new()
}

#[test]
fn v2_fake_tree_thresholds_events_and_gone() {
    let d = fake_v2(100 << 20, "1073741824");
    let p = d.path();
    let mut w = MemoryThresholdWatcher::open_fake(p, &opts(&["50%", "256M"])).unwrap();
    assert_eq!(w.backend(), Backend::V2);
    assert!(
        w.describe().contains("polling memory.current"),
        "{}",
        w.describe()
    );
    assert_eq!(
        w.thresholds(),
        vec![("256M".into(), 256 << 20), ("50%".into(), 512 << 20)]
    );

    fs::write(p.join("memory.current"), format!("{}\n", 600u64 << 20)).unwrap();
    let ev = next_events(&mut w);
    let got: Vec<_> = ev
        .iter()
        .map(|e| (e.threshold.as_str(), e.direction))
        .collect();
    assert_eq!(got, vec![("256M", Direction::Up), ("50%", Direction::Up)]);
    assert_eq!(ev[0].usage, Some(600 << 20));
    assert_eq!(ev[0].limit, Some(1 << 30));

    fs::write(p.join("memory.current"), "1000\n").unwrap();
    let got = crossings(&mut w);
    assert_eq!(
        got,
        vec![
            ("50%".into(), Direction::Down),
            ("256M".into(), Direction::Down)
        ]
    );

    fs::write(
        p.join("memory.events"),
        "low 0\nhigh 2\nmax 0\noom 1\noom_kill 1\n",
    )
    .unwrap();
    let ev = next_events(&mut w);
    let got: Vec<_> = ev
        .iter()
        .map(|e| (e.threshold.as_str(), e.direction, e.count))
        .collect();
    assert_eq!(
        got,
        vec![
            ("high", Direction::Event, 2),
            ("oom", Direction::Event, 1),
            ("oom_kill", Direction::Event, 1)
        ]
    );

    // The group removed while watched: one final `gone`, then nothing.
    let gone = p.to_path_buf();
    drop(d);
    let ev = next_events(&mut w);
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].direction, Direction::Gone);
    assert_eq!(ev[0].cgroup, gone);
    assert!(w.finished());
    assert!(w.wait(Some(Duration::from_millis(1))).unwrap().is_empty());
}

#[test]
fn v2_high_is_set_and_put_back() {
    let d = fake_v2(0, "1073741824");
    let p = d.path();
    fs::write(p.join("memory.high"), "987654321\n").unwrap();
    let mut o = opts(&["256M"]);
    o.high = Some(Threshold::parse("75%").unwrap());
    let w = MemoryThresholdWatcher::open_fake(p, &o).unwrap();
    assert_eq!(
        fs::read_to_string(p.join("memory.high")).unwrap(),
        (768u64 << 20).to_string()
    );
    drop(w);
    assert_eq!(
        fs::read_to_string(p.join("memory.high")).unwrap().trim(),
        "987654321"
    );
}

#[test]
fn bad_input_is_refused_with_the_reason() {
    let err = |p: &Path, o: &WatchOptions| MemoryThresholdWatcher::open_fake(p, o).err().unwrap();
    let e = err(Path::new("/nonexistent/colosched"), &opts(&["1M"]));
    assert!(
        is_flag(&e) && e.to_string().contains("no such cgroup"),
        "{e}"
    );

    let empty = tempfile::tempdir().unwrap();
    let e = err(empty.path(), &opts(&["1M"]));
    assert!(e.to_string().contains("no memory controller"), "{e}");
    fs::write(empty.path().join("memory.pressure"), "").unwrap();
    assert!(err(empty.path(), &opts(&["1M"]))
        .to_string()
        .contains("only memory.pressure"));

    let d = fake_v2(0, "max");
    let e = err(d.path(), &opts(&["80%"]));
    assert!(
        e.to_string().starts_with("--threshold 80%") && e.to_string().contains("no"),
        "{e}"
    );
    let d = fake_v2(0, "1048576");
    let e = err(d.path(), &opts(&["2M"]));
    assert!(e.to_string().contains("above the group's limit"), "{e}");
    let e = err(
        d.path(),
        &WatchOptions {
            backend: BackendChoice::V1,
            ..opts(&["512K"])
        },
    );
    assert!(e.to_string().starts_with("--backend"), "{e}");
    let e = err(
        d.path(),
        &WatchOptions {
            memsw: true,
            ..opts(&["512K"])
        },
    );
    assert!(e.to_string().starts_with("--memsw"), "{e}");
    // Nothing was changed in the fake group.
    assert_eq!(
        fs::read_to_string(d.path().join("memory.high")).unwrap(),
        "max\n"
    );
}

#[test]
fn psi_specs_are_checked_before_the_kernel() {
    assert!(psi::check_spec("some 150000 2000000").is_ok());
    assert!(psi::check_spec("full 1 500000").is_ok());
    for bad in [
        "some 150000",
        "half 1 1000000",
        "some 0 1000000",
        "some 1 100",
        "some 2000000 1000000",
    ] {
        let e = psi::check_spec(bad).unwrap_err();
        assert!(
            matches!(&e, WatchError::Flag { flag: "--psi", value: Some(v), .. } if *v == format!("{bad:?}")),
            "{bad}: {e:?}"
        );
        assert!(
            e.to_string().starts_with(&format!("--psi {bad:?}: ")),
            "{e}"
        );
    }
}

/// A PSI trigger for real, on cgroup2 `cpu.pressure` (the v2 memory controller is not available
/// here, so `memory.pressure` would only see what v1 does). Root here lacks CAP_SYS_RESOURCE, so
/// the kernel takes only windows that are multiples of 2 s: 1 s is refused, 2 s accepted.
#[test]
fn psi_trigger_fires_for_real_on_cpu_pressure() {
    let unified = Path::new("/sys/fs/cgroup/unified");
    // The machines this project runs on have both (docs/memwatch.md): a missing one is a failure.
    assert_eq!(
        rustix::process::geteuid().as_raw(),
        0,
        "needs root: creates a cgroup2 group"
    );
    assert!(
        unified.join("cgroup.procs").exists(),
        "needs cgroup2 mounted at {} (with PSI)",
        unified.display()
    );
    let cg = unified.join(format!("colosched-test-psi-{}", std::process::id()));
    fs::create_dir(&cg).unwrap();
    struct Cleanup(PathBuf, Vec<std::process::Child>);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            for c in &mut self.1 {
                let _ = c.kill();
                let _ = c.wait();
            }
            let _ = fs::remove_dir(&self.0);
        }
    }
    let mut guard = Cleanup(cg.clone(), Vec::new());
    let pressure = cg.join("cpu.pressure");
    let one_second = PsiTrigger::open(&pressure, "some 100000 1000000");
    if let Err(e) = &one_second {
        assert!(
            matches!(e, WatchError::Refused { flag: "--psi", path, .. } if *path == pressure),
            "{e:?}"
        );
        let e = e.to_string();
        assert!(
            e.contains("refused the trigger") && e.contains("2 s"),
            "{e}"
        );
    }
    let t = PsiTrigger::open(&pressure, "some 100000 2000000").expect("a 2 s window is accepted");
    // Three busy loops on one CPU inside the group: each waits for the CPU, a `some` stall.
    for _ in 0..3 {
        let c = std::process::Command::new("taskset")
            .args(["-c", "0", "sh", "-c", "while :; do :; done"])
            .spawn()
            .unwrap();
        fs::write(cg.join("cgroup.procs"), c.id().to_string()).unwrap();
        guard.1.push(c);
    }
    let fired = sys::poll(&[(t.fd(), PollFlags::PRI)], Some(Duration::from_secs(6))).unwrap();
    assert_eq!(
        fired[0],
        PollFlags::PRI,
        "no PSI event in 6 s with 3 loops on one CPU"
    );
}

#[test]
fn v2_events_only_watch_notices_removal() {
    let d = fake_v2(0, "max");
    let mut w = MemoryThresholdWatcher::open_fake(d.path(), &opts(&[])).unwrap();
    assert!(!w.describe().contains("polling"), "{}", w.describe());
    drop(d);
    let ev = next_events(&mut w);
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].direction, Direction::Gone);
}

#[test]
fn a_v2_group_without_memory_controller_takes_a_psi_only_watch() {
    // A fake tree: on a regular file the "trigger" is just written, never fires; the real
    // trigger on memory.pressure is exercised end to end in tests/test_memwatch.py.
    let d = tempfile::tempdir().unwrap();
    fs::write(d.path().join("memory.pressure"), "").unwrap();
    let psi = |th: &[&str]| WatchOptions {
        psi: Some("some 20000 2000000".into()),
        ..opts(th)
    };
    let e = MemoryThresholdWatcher::open_fake(d.path(), &psi(&["1M"]))
        .err()
        .unwrap();
    assert!(
        e.to_string().contains("--psi SPEC without --threshold"),
        "{e}"
    );
    let mut w = MemoryThresholdWatcher::open_fake(d.path(), &psi(&[])).unwrap();
    assert_eq!(w.backend(), Backend::Psi);
    assert_eq!(w.limit(), None);
    assert!(
        w.describe().contains("memory.pressure only"),
        "{}",
        w.describe()
    );
    assert!(w.wait(Some(Duration::from_millis(20))).unwrap().is_empty());
    let gone = d.path().to_path_buf();
    drop(d);
    let ev = next_events(&mut w);
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!((ev[0].direction, &ev[0].cgroup), (Direction::Gone, &gone));
}

/// Collects every event for `d`.
fn events_for(w: &mut MemoryThresholdWatcher, d: Duration) -> Vec<Event> {
    let end = Instant::now() + d;
    let mut out = Vec::new();
    while let Some(left) = end.checked_duration_since(Instant::now()) {
        out.extend(w.wait(Some(left)).unwrap());
    }
    out
}

fn set_current(dir: &Path, bytes: u64) {
    fs::write(dir.join("memory.current"), format!("{bytes}\n")).unwrap();
}

#[test]
fn durations_parse() {
    assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
    assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
    assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
    assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
    for bad in ["5", "0s", "-1s", "ms", "2h", "7200s", "nans"] {
        let e = parse_duration(bad).expect_err(bad);
        assert!(e.to_string().contains(&format!("{bad:?}")), "{bad}: {e}");
    }
}

#[test]
fn debounce_reports_a_crossing_only_once_it_held() {
    let d = fake_v2(0, "1073741824");
    let p = d.path();
    let mut o = opts(&["256M", "512M"]);
    o.debounce = Some(Duration::from_millis(300));
    let mut w = MemoryThresholdWatcher::open_fake(p, &o).unwrap();
    assert!(w.describe().contains("debounce 300 ms"), "{}", w.describe());

    // An excursion above both lines for 100 ms (about 10 polls), then back: never reported.
    set_current(p, 600 << 20);
    let mut ev = events_for(&mut w, Duration::from_millis(100));
    set_current(p, 0);
    ev.extend(events_for(&mut w, Duration::from_millis(600)));
    assert!(
        ev.is_empty(),
        "an excursion shorter than the debounce: {ev:?}"
    );

    // Above 256M and held: reported once, after the debounce, with usage read then.
    set_current(p, 300 << 20);
    let t0 = Instant::now();
    let ev = next_events(&mut w);
    let held = t0.elapsed();
    let got: Vec<_> = ev
        .iter()
        .map(|e| (e.threshold.as_str(), e.direction))
        .collect();
    assert_eq!(got, vec![("256M", Direction::Up)]);
    assert_eq!(ev[0].usage, Some(300 << 20));
    assert!(
        held >= Duration::from_millis(300) && held < Duration::from_millis(1500),
        "reported after {held:?}, debounce 300 ms"
    );
    // A dip below and back within the debounce restarts nothing that was reported: no event.
    set_current(p, 100 << 20);
    let mut ev = events_for(&mut w, Duration::from_millis(100));
    set_current(p, 300 << 20);
    ev.extend(events_for(&mut w, Duration::from_millis(600)));
    assert!(ev.is_empty(), "a dip shorter than the debounce: {ev:?}");

    // Up past 512M then down below 256M, each held: reported in that order.
    set_current(p, 700 << 20);
    let got = crossings(&mut w);
    assert_eq!(got, vec![("512M".to_string(), Direction::Up)]);
    set_current(p, 0);
    let got = crossings(&mut w);
    assert_eq!(
        got,
        vec![
            ("512M".to_string(), Direction::Down),
            ("256M".to_string(), Direction::Down)
        ]
    );
}

#[test]
fn debounce_bad_input() {
    let d = fake_v2(0, "1073741824");
    let with = |th: &[&str], ms: u64| WatchOptions {
        debounce: Some(Duration::from_millis(ms)),
        ..opts(th)
    };
    let e = MemoryThresholdWatcher::open_fake(d.path(), &with(&["1M"], 0))
        .err()
        .unwrap();
    assert!(
        is_flag(&e) && e.to_string().starts_with("--debounce"),
        "{e}"
    );
    let e = MemoryThresholdWatcher::open_fake(d.path(), &with(&[], 100))
        .err()
        .unwrap();
    assert!(e.to_string().contains("only with --threshold"), "{e}");
}

/// A fake v2 hierarchy `root/parent/child`, each with its own memory.max.
fn fake_v2_tree(parent_max: &str, child_max: &str) -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let parent = d.path().join("parent");
    fs::create_dir(&parent).unwrap();
    fs::write(parent.join("memory.max"), format!("{parent_max}\n")).unwrap();
    let child = parent.join("child");
    fs::create_dir(&child).unwrap();
    for (f, v) in [
        ("memory.current", "0"),
        ("memory.max", child_max),
        ("memory.high", "max"),
        ("memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0"),
    ] {
        fs::write(child.join(f), format!("{v}\n")).unwrap();
    }
    (d, child)
}

#[test]
fn a_percentage_without_a_limit_is_of_the_nearest_ancestors() {
    let (_d, child) = fake_v2_tree("1073741824", "max");
    let w = MemoryThresholdWatcher::open_fake(&child, &opts(&["50%", "25%"])).unwrap();
    assert_eq!(w.limit(), Some(1 << 30));
    assert_eq!(
        w.thresholds(),
        vec![("25%".into(), 256 << 20), ("50%".into(), 512 << 20)]
    );
    let parent_max = child.parent().unwrap().join("memory.max");
    assert!(
        w.describe().contains("nearest ancestor's")
            && w.describe().contains(&parent_max.display().to_string()),
        "{}",
        w.describe()
    );
    // The group's own limit wins over its ancestor's.
    let (_d, child) = fake_v2_tree("1073741824", "268435456");
    let w = MemoryThresholdWatcher::open_fake(&child, &opts(&["50%"])).unwrap();
    assert_eq!(w.thresholds(), vec![("50%".into(), 128 << 20)]);
    assert!(!w.describe().contains("ancestor"), "{}", w.describe());
    // The nearest ancestor with a limit: here the grandparent (the parent has none).
    let (_d, child) = fake_v2_tree("max", "max");
    let grand = child.parent().unwrap().parent().unwrap();
    fs::write(grand.join("memory.max"), "2147483648\n").unwrap();
    let w = MemoryThresholdWatcher::open_fake(&child, &opts(&["10%"])).unwrap();
    assert_eq!(w.limit(), Some(2 << 30));
    assert_eq!(w.thresholds()[0].1, (2u64 << 30) / 10);
    // No limit anywhere: refused, saying where it looked. Above the ancestor's limit: refused,
    // naming the ancestor's file.
    let (_d, child) = fake_v2_tree("max", "max");
    let e = MemoryThresholdWatcher::open_fake(&child, &opts(&["80%"]))
        .err()
        .unwrap();
    assert!(
        is_flag(&e)
            && e.to_string().starts_with("--threshold 80%")
            && e.to_string().contains("any ancestor"),
        "{e}"
    );
    let (_d, child) = fake_v2_tree("1048576", "max");
    let e = MemoryThresholdWatcher::open_fake(&child, &opts(&["2M"]))
        .err()
        .unwrap();
    assert!(
        e.to_string().contains("above the group's limit")
            && e.to_string()
                .contains(&parent_max_of(&child).display().to_string()),
        "{e}"
    );
    // --high as a percentage uses the same limit.
    let (_d, child) = fake_v2_tree("1073741824", "max");
    let mut o = opts(&[]);
    o.high = Some(Threshold::parse("75%").unwrap());
    let w = MemoryThresholdWatcher::open_fake(&child, &o).unwrap();
    assert_eq!(
        fs::read_to_string(child.join("memory.high")).unwrap(),
        (768u64 << 20).to_string()
    );
    drop(w);
}

fn parent_max_of(child: &Path) -> PathBuf {
    child.parent().unwrap().join("memory.max")
}

#[test]
fn a_v1_percentage_without_a_limit_is_of_the_nearest_ancestors() {
    // v1 reports "no limit" as a huge number (PAGE_COUNTER_MAX pages).
    let d = tempfile::tempdir().unwrap();
    let parent = d.path().join("parent");
    let child = parent.join("child");
    fs::create_dir_all(&child).unwrap();
    fs::write(parent.join("memory.limit_in_bytes"), "536870912\n").unwrap();
    for (f, v) in [
        ("memory.limit_in_bytes", "9223372036854771712"),
        ("memory.usage_in_bytes", "0"),
        ("cgroup.event_control", ""),
    ] {
        fs::write(child.join(f), format!("{v}\n")).unwrap();
    }
    let o = WatchOptions {
        backend: BackendChoice::Poll,
        ..opts(&["80%"])
    };
    let w = MemoryThresholdWatcher::open_fake(&child, &o).unwrap();
    assert_eq!(w.limit(), Some(512 << 20));
    assert_eq!(w.thresholds(), vec![("80%".into(), (512u64 << 20) * 4 / 5)]);
}

/// Defect 8: a directory of regular files that look like a v1 group is refused (exit 2 on the
/// command line), before anything is written into its `cgroup.event_control`.
#[test]
fn a_directory_outside_cgroupfs_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    for (f, v) in [
        ("cgroup.event_control", ""),
        ("memory.usage_in_bytes", "0\n"),
        ("memory.limit_in_bytes", "1073741824\n"),
    ] {
        fs::write(p.join(f), v).unwrap();
    }
    let e = MemoryThresholdWatcher::open(p, &opts(&["1M"]))
        .err()
        .unwrap();
    assert!(is_flag(&e), "{e}");
    assert!(
        e.to_string()
            .starts_with(&format!("--cgroup {}", p.display()))
            && e.to_string().contains("not on a cgroup filesystem"),
        "{e}"
    );
    assert_eq!(
        fs::read_to_string(p.join("cgroup.event_control")).unwrap(),
        "",
        "nothing written"
    );
    // The same tree passes with the check off: the check is what refused it.
    let w = MemoryThresholdWatcher::open_fake(
        p,
        &WatchOptions {
            backend: BackendChoice::Poll,
            ..opts(&["1M"])
        },
    );
    assert!(w.is_ok());
}

/// Every cgroup filesystem mounted here passes the check (this machine mounts v1 and v2).
#[test]
fn cgroup_mounts_pass_the_filesystem_check() {
    let mounts = fs::read_to_string("/proc/self/mounts").unwrap();
    let found: Vec<(&str, &str)> = mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            matches!(f.get(2), Some(&"cgroup") | Some(&"cgroup2")).then(|| (f[1], f[2]))
        })
        .collect();
    assert!(
        found.iter().any(|(_, t)| *t == "cgroup2") && found.iter().any(|(_, t)| *t == "cgroup"),
        "this machine mounts cgroup v1 and cgroup2 (DESIGN.md); /proc/self/mounts lists {found:?}"
    );
    for (dir, kind) in found {
        let t = sys::fs_type(Path::new(dir)).unwrap();
        let want = if kind == "cgroup2" {
            sys::CGROUP2_SUPER_MAGIC
        } else {
            sys::CGROUP_SUPER_MAGIC
        };
        assert_eq!(t, want, "{dir} ({kind})");
        sys::check_cgroup_fs(Path::new(dir)).unwrap();
    }
}

/// A cgroup file the watcher cannot use is named in the error (read through colosched-sys), and
/// a write the kernel refuses names the file and the flag.
#[test]
fn file_errors_name_the_file() {
    let d = fake_v2(0, "lots");
    let e = MemoryThresholdWatcher::open_fake(d.path(), &opts(&["1M"]))
        .err()
        .unwrap();
    let max = d.path().join("memory.max");
    assert!(
        matches!(&e, WatchError::Read { flag: None, source } if source.path() == max),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        format!(
            "{}: \"lots\" is not a number of bytes or \"max\"",
            max.display()
        )
    );
    let d = fake_v2(0, "max");
    fs::remove_file(d.path().join("memory.high")).unwrap();
    let mut o = opts(&[]);
    o.high = Some(Threshold::parse("1M").unwrap());
    let e = MemoryThresholdWatcher::open_fake(d.path(), &o)
        .err()
        .unwrap();
    assert!(
        e.to_string().starts_with(&format!(
            "--high: {}: ",
            d.path().join("memory.high").display()
        )),
        "{e}"
    );
}
