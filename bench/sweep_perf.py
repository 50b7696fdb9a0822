"""Sweep executors (issue 17): one trace-replay grid run by `colosched sweep cluster` on local
processes and on Ray, on this machine, and the time the same grid would take on N nodes.

    .venv/bin/python bench/sweep_perf.py [--parts 0-9] [--policy all] [--machines 700,800,900]
        [--overcommit-ratio 0.5,0.8,1.1,1.4] [--seeds 3] [--reps 2] [--nodes 1,2,4,8,16,32]
        [--cores 16] [--node-gib 64]

The grid is issue 17's: 8 policies × 3 machine counts × 4 overcommit ratios × 3 seeds = 288
points, on the real parts 00000–00009 in ../shared/data. The trace is parsed into a cache of the
bench's own (bench/.work/sweep/cache) before anything is timed; every sweep writes into a fresh
output directory, so every point is computed. Runs, each timed as the whole command (Python's
start-up, the driver reading the trace, the points, the tables; no report):

1. `local --jobs 1`: the points one after another, which gives the cost of one point;
2. `local --jobs 2`: the default on this 2-CPU machine;
3. `ray`: a Ray started by the sweep and stopped after (what `--executor ray` costs here);
4. `ray:ADDRESS`: a Ray cluster already running (one node, 2 CPUs), as on a real cluster.

Each is run --reps times, alternating, and the best is kept. Everything runs inside a network
namespace of this script's own with only loopback (Ray listens on 127.0.0.1 alone), with a HOME
of its own for Ray (benchutil.loopback_ray); the namespace and every process in it are removed
at the end. The tables of all runs must be equal but for `wall_s` (each point's own run time),
or the script exits 1.

Two projections, from what was measured. A grid on W workers (N nodes × CPUs, fewer when memory
bounds them) takes ceil(points ÷ W) rounds of one point, not less than its longest point, times
Ray's cost per point (run 4 against run 2), plus run 4's fixed start-up:
- these points, one costing what run 1 measured (its points' seconds ÷ points);
- the same grid at full scale (12,500 machines × 29 days), from bench/RESULTS.md "Full scale":
  373 s a replay, 23 s to read the cache once per worker, 5.6 GiB a worker (--full-point-s,
  --full-load-s, --full-gib; --node-gib per node).
Prints Markdown tables.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
from benchutil import loopback_netns, loopback_ray, table

REPO = Path(__file__).resolve().parent.parent
VENV = Path(sys.executable).parent
WORK = REPO / "bench" / ".work" / "sweep"
TRACE = REPO.parent / "shared" / "data" / "google-clusterdata-2011-2"
POINTS_LINE = re.compile(r"(\d+) points: (\d+) computed on \S+, \d+ already under .* in ([\d.]+) s")


def sweep(args: argparse.Namespace, ns: str, env: dict, executor: str, out: Path, jobs: int):
    """(wall of the whole command, seconds of its points as the command reports them)."""
    shutil.rmtree(out, ignore_errors=True)
    cmd = [str(VENV / "colosched"), "sweep", "cluster", "--trace", str(args.trace), "--parts", args.parts,
           "--policy", args.policy, "--machines", args.machines, "--overcommit-ratio", args.overcommit_ratio,
           "--seeds", str(args.seeds), "--cache-dir", str(WORK / "cache"), "--no-report",
           "--executor", executor, "--jobs", str(jobs), "--out", str(out)]  # fmt: skip
    started = time.perf_counter()
    cmd = ["ip", "netns", "exec", ns, *cmd]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    wall = time.perf_counter() - started
    found = POINTS_LINE.search(r.stderr)
    if r.returncode != 0 or not found or found[1] != found[2]:
        sys.exit(f"{executor}: exit {r.returncode}, every point must be computed:\n{r.stderr[-3000:]}")
    return wall, float(found[3])


def duration(seconds: float) -> str:
    return (
        f"{seconds:.1f} s"
        if seconds < 120
        else f"{seconds / 60:.1f} min"
        if seconds < 7200
        else f"{seconds / 3600:.1f} h"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", type=Path, default=TRACE)
    ap.add_argument("--parts", default="0-9")
    ap.add_argument("--policy", default="all")
    ap.add_argument("--machines", default="700,800,900")
    ap.add_argument("--overcommit-ratio", default="0.5,0.8,1.1,1.4")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--cores", type=int, default=16, help="CPUs per node in the projection")
    ap.add_argument("--nodes", default="1,2,4,8,16,32", help="node counts in the projection")
    ap.add_argument("--node-gib", type=float, default=64, help="memory per node in the projection")
    # A full-scale point, as bench/RESULTS.md "Full scale" measured it (12,500 machines × 29 days).
    ap.add_argument("--full-point-s", type=float, default=373.0, help="replay seconds of a full-scale point")
    ap.add_argument("--full-load-s", type=float, default=23.2, help="reading the full trace's cache")
    ap.add_argument("--full-gib", type=float, default=5.61, help="peak memory of a full-scale worker")
    args = ap.parse_args()
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return print("needs root and iproute2 (a private network namespace)", file=sys.stderr) or 2
    from colosched import cluster

    WORK.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    trace = cluster.load(args.trace, args.parts, True, WORK / "cache")
    print(f"trace cache ready ({trace.stats()['rows']:,} rows) in {time.perf_counter() - started:.1f} s",
          file=sys.stderr)  # fmt: skip
    # Ray's idle processes take CPU: the running Ray is started only for its own runs.
    here = {
        "local, 1 process": ("local", 1),
        "local, 2 processes": ("local", 2),
        "ray, started by the sweep": ("ray", 2),
    }
    running = "ray:ADDRESS, a running Ray (1 node, 2 CPUs)"
    best: dict[str, tuple[float, float]] = {}

    def measure(name: str, ns: str, env: dict, executor: str, jobs: int) -> None:
        out = WORK / "out" / name.split(",")[0].replace(":ADDRESS", "-address")
        wall, points = sweep(args, ns, env, executor, out, jobs)
        print(f"{name}: {wall:.1f} s (points {points:.1f} s)", file=sys.stderr)
        best[name] = min(best.get(name, (math.inf, 0.0)), (wall, points))

    with loopback_netns(f"cs-bench-{os.getpid()}") as ns:
        for rep in range(args.reps):
            home = WORK / "ray" / f"rep{rep}"
            env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "HOME": str(home / "home")}
            for name, (executor, jobs) in list(here.items())[:: 1 if rep % 2 == 0 else -1]:
                measure(name, ns, env, executor, jobs)
            with loopback_ray(ns, home, [2], 6391) as (address, env):
                measure(running, ns, env, f"ray:{address}", 2)
    tables = {d.name: pl.read_csv(d / "sweep.csv") for d in (WORK / "out").iterdir()}
    first = next(iter(tables.values()))
    for name, t in tables.items():
        if not t.drop("wall_s").equals(first.drop("wall_s")):
            return print(f"the {name} sweep's table differs from the others", file=sys.stderr) or 1
    n = first.height
    base = best["local, 2 processes"][0]
    rows = [[name, n, f"{w:.1f}", f"{p:.1f}", f"{w / base:.3f}", f"{(w / base - 1) * 100:+.1f} %"]
            for name, (w, p) in best.items()]  # fmt: skip
    table(f"{n} points, best of {args.reps}, this 2-CPU machine",
          ["executor", "points", "wall s", "points s", "÷ local 2", "overhead"], rows)  # fmt: skip

    # The projections, from what was measured.
    serial_wall, serial_points = best["local, 1 process"]
    per_point = (
        serial_points / n
    )  # CPU-seconds of one point, the worker's share of reading the trace included
    ray_wall, ray_points = best[running]
    factor = ray_points / best["local, 2 processes"][1]  # Ray's cost per point against local's
    fixed = ray_wall - ray_points  # start-up, the driver's trace read, the tables
    longest = first["wall_s"].max() * per_point / first["wall_s"].mean()
    nodes = [int(x) for x in args.nodes.split(",")]
    workers = min(args.cores, int(args.node_gib // args.full_gib))  # full scale: memory bounds them

    def rows(point_s: float, longest_s: float, load_s: float, per_node: int, serial_s: float) -> list[list]:
        out = []
        for k in nodes:
            t = fixed + load_s + max(math.ceil(n / (k * per_node)) * point_s, longest_s) * factor
            out.append([k, k * per_node, duration(t), f"{serial_s / t:.1f}"])
        return out

    table(f"projected: these {n} points on N nodes of {args.cores} CPUs (one point {per_point:.3f} "
          f"CPU-s, Ray ×{factor:.3f} per point, {fixed:.1f} s fixed)",
          ["nodes", "workers", "time", "speed-up on 1 process"],
          rows(per_point, longest, 0.0, args.cores, serial_wall))  # fmt: skip
    full = n * args.full_point_s
    table(f"projected: {n} full-scale points ({args.full_point_s:.0f} s a replay, {args.full_load_s:.0f} s "
          f"to read the cache, {args.full_gib} GiB a worker) on N nodes of {args.cores} CPUs and "
          f"{args.node_gib:.0f} GiB ({workers} workers a node)",
          ["nodes", "workers", "time", "speed-up on 1 process"],
          rows(args.full_point_s, args.full_point_s, args.full_load_s, workers, full))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
