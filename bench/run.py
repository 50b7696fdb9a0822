"""Benchmarks of the cluster simulator (issue: ingest, replay, full scale, linear cost).

    .venv/bin/python bench/run.py [ingest] [replay] [scale] [full]     (default: ingest replay scale)

Prints a Markdown table per section, ready for bench/RESULTS.md. Uses the real parts in
../shared/data (or $COLOSCHED_SHARED_DATA) and synthetic traces it writes under bench/.work/.
Timings are wall-clock on a shared, noisy machine: each is the best of a few repetitions.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

from benchutil import table

from colosched import cluster

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("COLOSCHED_SHARED_DATA", REPO.parent / "shared" / "data"))
REAL = SHARED / "google-clusterdata-2011-2"
WORK = REPO / "bench" / ".work"


def best_of(n: int, fn):
    times, value = [], None
    for _ in range(n):
        t0 = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - t0)
    return min(times), value


def bench_ingest() -> None:
    rows = []
    with tempfile.TemporaryDirectory() as cache:

        def cold():
            shutil.rmtree(cache, ignore_errors=True)
            return cluster.load(REAL, "0-9", cache_dir=cache)

        t_cold, trace = best_of(3, cold)
        t_warm, warm = best_of(5, lambda: cluster.load(REAL, "0-9", cache_dir=cache))
        stats = trace.stats()
        assert warm.stats()["parts_from_cache"] == 10
        rows.append(["cold (parse + cache write)", f"{stats['rows']:,}", f"{t_cold:.2f}", "≤ 2"])
        rows.append(["from cache", f"{stats['rows']:,}", f"{t_warm:.3f}", "≤ 0.3"])
        t_nocache, _ = best_of(3, lambda: cluster.load(REAL, "0-9", use_cache=False))
        rows.append(["--no-cache (parse only)", f"{stats['rows']:,}", f"{t_nocache:.2f}", ""])
    table("Ingest of task_events parts 00000–00009", ["load", "rows", "seconds", "target"], rows)


def bench_replay() -> None:
    trace = cluster.load(REAL, "0-9")
    targets = {"thesis": ("≤ 1", "≤ 5"), "full": ("≤ 2", "≤ 15")}
    for profile, (one, eight) in targets.items():
        run = partial(cluster.run, trace, profile=profile, machines=800)
        t_one, r = best_of(3, partial(run, "fine:mem_usage", threads=1))
        s = r.summary.row(0, named=True)
        rows = [["fine:mem_usage, 1 thread", f"{t_one:.2f}", one, s["steps"], f"{s['task_steps']:,}"]]
        t_all, _ = best_of(3, partial(run, "all", threads=0))
        rows.append([f"all 8 policies, {os.cpu_count()} threads", f"{t_all:.2f}", eight, s["steps"], ""])
        t_seq, _ = best_of(1, partial(run, "all", threads=1))
        rows.append(["all 8 policies, 1 thread", f"{t_seq:.2f}", "", s["steps"], ""])
        table(
            f"Replay of parts 00000–00009 on 800 machines, profile {profile} (after ingest)",
            ["run", "seconds", "target", "steps", "task-steps"],
            rows,
        )
    # Linear in machines × steps: the thesis model at 400–1600 machines, to the last submission
    # (about 5,000 steps) and to the end of the parts (about 50,000).
    rows = []
    for until in ("last-submit", "trace-end"):
        for machines in (400, 800, 1600):
            one = partial(cluster.run, trace, "fine:mem_usage", machines=machines, until=until, threads=1)
            t, r = best_of(2, one)
            s = r.summary.row(0, named=True)
            ms = machines * s["steps"]
            rows.append([until, machines, f"{s['steps']:,}", f"{ms:,}", f"{t:.2f}", f"{t / ms * 1e9:.1f}"])
    table(
        "Thesis profile: cost versus machines × steps (parts 00000–00009, fine:mem_usage, 1 thread)",
        ["until", "machines", "steps", "machine-steps", "seconds", "ns per machine-step"],
        rows,
    )


def synth(machines: int, days: float) -> Path:
    out = WORK / f"synth-{machines}x{days:g}d"
    if not (out / "README.md").exists():
        shutil.rmtree(out, ignore_errors=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "colosched.cli",
                "trace",
                "synth",
                "--machines",
                str(machines),
                "--days",
                str(days),
                "--out",
                str(out),
            ],
            check=True,
        )
    return out


def replay_in_child(root: Path, machines: int, policy: str = "fine:mem_usage", threads: int = 1) -> dict:
    """Replays in a fresh process (ingest from cache, then replay) on `threads` threads (0: one
    per core); returns times and peak RSS."""
    code = f"""
import json, resource, time

from colosched import cluster
t0 = time.perf_counter(); trace = cluster.load({str(root)!r}); t1 = time.perf_counter()
r = cluster.run(trace, {policy!r}, profile="full", machines={machines}, threads={threads})
t2 = time.perf_counter()
s = r.summary.row(0, named=True)
rss_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
print(json.dumps(dict(ingest_s=t1 - t0, replay_s=t2 - t1, steps=s["steps"], started=s["started"],
    task_steps=s["task_steps"], rss_gib=rss_gib, stats=trace.stats())))
"""
    subprocess.run(
        [sys.executable, "-c", f"from colosched import cluster; cluster.load({str(root)!r})"], check=True
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.splitlines()[-1])


def bench_scale() -> None:
    """Issue 29's grid: each replay in a fresh process, its time and peak RSS, against events
    (runs) and machine-steps, and against task-steps: every new usage window (a fifth of the
    `full` profile's steps) draws every running task's usage again."""
    rows = []
    for machines in (1500, 3000, 6000, 12500):
        for days in (3, 7, 29):
            r = replay_in_child(synth(machines, days), machines)
            ms = machines * r["steps"]
            runs = r["stats"]["runs"]
            rows.append(
                [
                    f"{machines:,}",
                    days,
                    f"{runs:,}",
                    f"{ms:,}",
                    f"{r['task_steps']:,}",
                    f"{r['ingest_s']:.1f}",
                    f"{r['replay_s']:.1f}",
                    f"{r['replay_s'] / (runs + ms) * 1e9:.0f}",
                    f"{r['replay_s'] / r['task_steps'] * 1e9:.1f}",
                    f"{r['rss_gib']:.2f}",
                ]
            )
    table(
        "Cost versus machines × days (synthetic traces, profile full, fine:mem_usage, 1 thread)",
        [
            "machines",
            "days",
            "runs",
            "machine-steps",
            "task-steps",
            "ingest s (cache)",
            "replay s",
            "ns per (run + machine-step)",
            "ns per task-step",
            "peak RSS GiB",
        ],
        rows,
    )


def bench_full() -> None:
    """One replay on one thread (a sweep's worker) and one on every core (a replay alone: its new
    usage windows are split over the threads)."""
    t0 = time.perf_counter()
    root = synth(12500, 29.0)
    t_synth = time.perf_counter() - t0
    rows = []
    for threads in (1, 0):
        r = replay_in_child(root, 12500, threads=threads)
        mc = 12500 * r["steps"]
        rows.append(
            [
                f"{t_synth:.0f}",
                f"{r['stats']['rows']:,}",
                threads or f"{os.cpu_count()} (all)",
                f"{r['ingest_s']:.1f}",
                f"{r['replay_s']:.1f}",
                f"{mc / r['replay_s']:,.0f}",
                f"{r['task_steps'] / r['replay_s']:,.0f}",
                f"{r['rss_gib']:.2f}",
            ]
        )
    table(
        "Full scale: synthetic 12,500 machines × 29 days, fine:mem_usage",
        [
            "synth s",
            "rows",
            "threads",
            "ingest s (from cache)",
            "replay s",
            "machine-cycles/s",
            "task-cycles/s",
            "peak RSS GiB",
        ],
        rows,
    )


def main() -> None:
    sections = sys.argv[1:] or ["ingest", "replay", "scale"]
    print(
        f"<!-- {platform.node()} {os.cpu_count()} cores, python {platform.python_version()}, "
        f"{time.strftime('%Y-%m-%d %H:%M')} -->"
    )
    WORK.mkdir(parents=True, exist_ok=True)
    for s in sections:
        {"ingest": bench_ingest, "replay": bench_replay, "scale": bench_scale, "full": bench_full}[s]()
    print(f"\npeak RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB")


if __name__ == "__main__":
    main()
