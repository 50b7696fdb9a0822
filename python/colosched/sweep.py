"""Parameter sweeps: a grid of points, each one run of a simulator (cluster, host or vms) with its
own seed, computed on local worker processes or on a Ray cluster (docs/scale-out.md).

- A point is a plain dict (JSON); `compute(point)` is a pure function of it, so the same point
  gives the same table bit for bit wherever it runs.
- Each point's table is written under `OUT/points/<id>.parquet` the moment it arrives, under a
  temporary name then renamed (`outputs.atomic_write`): a killed sweep leaves only whole points,
  and a rerun computes only the points that are missing.
- The executors only carry points out: `local` (processes on this machine, the default) and
  `ray[:ADDRESS]` (an existing Ray cluster; without an address, a Ray started for this sweep).
  Ray retries a point whose worker died (`max_retries`).

    from colosched import sweep
    points = sweep.vms_points(["spec003-fio-read"], ["random", "planner"], seeds=[1, 2, 3])
    table = sweep.run(points, "out/sweep", executor="local")
"""

from __future__ import annotations

import functools
import hashlib
import json
import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any

import polars as pl

from colosched.outputs import atomic_write

POINTS = "points"
# A point's keys, first in its table.
GRID_KEYS = {
    "cluster": ["machines", "overcommit_ratio", "policy", "seed"],
    "host": ["scenario", "scheduler", "seed"],
    "vms": ["scenario", "policy", "seed"],
}


class PointsFailed(RuntimeError):
    """Points of a sweep failed; the others are written, and a rerun computes only these."""


def point_id(point: dict[str, Any]) -> str:
    """A point's name on disk: a hash of its canonical JSON."""
    text = json.dumps(point, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def cluster_points(
    trace: str,
    parts: str | None,
    policies: Sequence[str],
    machines: Sequence[int],
    ratios: Sequence[float],
    seeds: Sequence[int],
    *,
    usage_seed: int = 0,
    profile: str = "thesis",
    params: dict[str, Any] | None = None,
    cache_dir: str | None = None,
) -> list[dict[str, Any]]:
    """One point per (machines, overcommit ratio, policy, seed) of a trace replay."""
    from colosched import _native, cluster

    cluster.resolve(profile, **(params or {}))  # a bad parameter or policy fails here, not in a worker
    names = cluster.expand_policies(list(policies))
    for p in names:
        if not isinstance(p, str):
            raise ValueError(f"sweeps take built-in policy names, not {p!r} (callables stay here)")
        _native.check_policy(p)
    common = {"kind": "cluster", "trace": str(trace), "parts": parts, "profile": profile}
    common |= {"usage_seed": usage_seed, "params": params or {}, "cache_dir": cache_dir}
    return [
        {**common, "machines": m, "overcommit_ratio": r, "policy": p, "seed": s}
        for m in machines
        for r in ratios
        for p in names
        for s in seeds
    ]


def host_points(scenarios: Sequence[str], schedulers: Sequence[str], seeds: Sequence[int]) -> list[dict]:
    """One point per (host scenario, scheduler, seed); scenarios checked here."""
    from colosched import _native, host

    names = host.expand_schedulers(schedulers)
    for s in scenarios:
        _native.HostScenario(str(s)).check(names)
    return [
        {"kind": "host", "scenario": str(s), "scheduler": n, "seed": seed}
        for s in scenarios
        for n in names
        for seed in seeds
    ]


def vms_points(scenarios: Sequence[str], policies: Sequence[str], seeds: Sequence[int]) -> list[dict]:
    """One point per (VM-level scenario, policy, seed); scenarios checked here."""
    from colosched import _native, vms

    names = vms.expand_policies(policies)
    for s in scenarios:
        _native.VmsScenario(str(s))
    return [
        {"kind": "vms", "scenario": str(s), "policy": p, "seed": seed}
        for s in scenarios
        for p in names
        for seed in seeds
    ]


# What a worker replaying a trace holds at its peak (while it ingests the trace): Python, polars
# and a Ray worker's own runtime (a fresh process that replays the 0.2 M-run bundled sample peaked
# at 131-137 MiB alone and at 437 MiB once inside the test suite), then 40 bytes per run plus the
# ingest's per-run state (bench/RESULTS.md's scaling table: 1.63 GiB for the full trace's 27.2 M
# runs, of which about 0.1 GiB is Python).
WORKER_BASE_BYTES = 768 * 2**20
BYTES_PER_RUN = 56


def cluster_point_memory(runs: int) -> int:
    """Bytes a worker needs at its peak to replay a trace of `runs` runs: Ray's `memory` for a
    `sweep cluster` point, so a node runs at most its memory ÷ this many at once."""
    return WORKER_BASE_BYTES + BYTES_PER_RUN * runs


@functools.lru_cache(maxsize=1)
def _trace(root: str, parts: str | None, cache_dir: str | None):
    """The trace a worker replays, read from the driver's cache once per worker process (a
    worker runs point after point of one trace; the Arrow cache holds it parsed)."""
    from colosched import cluster

    return cluster.load(root, parts, True, cache_dir)


def compute(point: dict[str, Any]) -> pl.DataFrame:
    """One point's table: cluster, a summary row (the run's metrics); host, a row per VM; vms,
    a row per headline metric (`vms.per_run`). Its grid keys come first."""
    kind = point["kind"]
    if kind == "cluster":
        from colosched import cluster

        result = cluster.run(
            _trace(point["trace"], point["parts"], point["cache_dir"]),
            point["policy"],
            profile=point["profile"],
            seed=point["seed"],
            usage_seed=point["usage_seed"],
            threads=1,
            keep_series=False,
            machines=point["machines"],
            overcommit_ratio=point["overcommit_ratio"],
            **point["params"],
        )
        table = result.summary.with_columns(
            pl.lit(point["machines"]).alias("machines"),
            pl.lit(point["overcommit_ratio"]).alias("overcommit_ratio"),
        )
    elif kind == "host":
        from colosched import host

        _, table = host.run(point["scenario"], [point["scheduler"]], [point["seed"]])
        table = table.drop("ping_rtts_ms").with_columns(pl.lit(point["scenario"]).alias("scenario"))
    elif kind == "vms":
        from colosched import vms

        table = vms.per_run(vms.run(point["scenario"], [point["policy"]], [point["seed"]]))
        table = table.with_columns(pl.lit(point["scenario"]).alias("scenario"))
    else:
        raise ValueError(f"unknown point kind {kind!r}")
    keys = GRID_KEYS[kind]
    return table.select(keys + [c for c in table.columns if c not in keys])


def _local(points: list[dict], jobs: int) -> Iterator[tuple[dict, pl.DataFrame | BaseException, int]]:
    """(point, table or error, points running) as each ends, on `jobs` processes."""
    # "spawn", not fork: the parent holds Rust and polars thread pools, and a forked child can
    # inherit one of their locks held and hang.
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=max(1, min(jobs, len(points))), mp_context=spawn) as pool:
        pending = {pool.submit(compute, p): p for p in points}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for f in done:
                p = pending.pop(f)
                yield p, f.exception() or f.result(), min(jobs, len(pending))


def _ray(
    points: list[dict], address: str | None, memory: int | None
) -> Iterator[tuple[dict, pl.DataFrame | BaseException, int]]:
    try:
        import ray
    except ImportError as e:  # pragma: no cover - the Makefile installs it
        raise ValueError("--executor ray needs the `ray` package (pip install ray)") from e
    started_here = not ray.is_initialized()
    if started_here:
        # "local" starts a Ray of the sweep's own even when one runs on this machine (without
        # an address, ray.init would attach to the last `ray start`ed one).
        ray.init(address=address or "local", log_to_driver=False, configure_logging=False)
    try:
        # A worker that dies (killed, its node lost) has its point run again elsewhere. A point
        # asks for its memory, capped at the largest node's (Ray would wait forever for more).
        nodes = [n["Resources"].get("memory", 0) for n in ray.nodes() if n["Alive"]]
        ask = {"memory": min(memory, max(nodes))} if memory and nodes and max(nodes) > 0 else {}
        remote = ray.remote(max_retries=3, num_cpus=1, **ask)(compute)
        refs = {remote.remote(p): p for p in points}
        cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        while refs:
            done, _ = ray.wait(list(refs), num_returns=1, timeout=1.0)
            for ref in done:
                p = refs.pop(ref)
                try:
                    out: pl.DataFrame | BaseException = ray.get(ref)
                except Exception as e:  # the point's own error, after Ray's retries
                    out = e
                yield p, out, min(cpus, len(refs))
    finally:
        if started_here:
            ray.shutdown()


def parse_executor(spec: str) -> tuple[str, str | None]:
    """`local`, `ray` or `ray:ADDRESS` → (kind, address); ValueError otherwise."""
    kind, _, address = spec.partition(":")
    if kind == "local" and not address:
        return "local", None
    if kind == "ray":
        return "ray", address or None
    raise ValueError(f"--executor {spec!r}: expected local, ray or ray:ADDRESS")


def run(
    points: list[dict[str, Any]],
    out: str | os.PathLike,
    executor: str = "local",
    jobs: int | None = None,
    progress: Callable[[dict[str, int]], None] | None = None,
    memory: int | None = None,
) -> pl.DataFrame:
    """Computes the points not yet under `out/points/` and returns every point's table, in the
    grid's order. `progress` gets {done, running, failed, total, computed} after each point. A
    point that fails is not written, the others go on; then PointsFailed names the failures
    (a rerun computes only them). `memory` is the bytes a point's worker needs at its peak
    (`cluster_point_memory`): Ray places points by it, and the local executor runs at most this
    machine's memory ÷ `memory` processes."""
    kind, address = parse_executor(executor)
    where = Path(out) / POINTS
    where.mkdir(parents=True, exist_ok=True)
    ids = [point_id(p) for p in points]
    missing = [p for p, i in zip(points, ids) if not (where / f"{i}.parquet").exists()]
    state = {"total": len(points), "done": len(points) - len(missing), "running": 0, "failed": 0}
    state["computed"] = 0
    failures: list[str] = []
    if progress:
        progress(dict(state))
    if missing:
        if kind == "local":
            jobs = jobs or os.cpu_count() or 1
            if memory:
                jobs = max(1, min(jobs, os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // memory))
            carried = _local(missing, jobs)
        else:
            carried = _ray(missing, address, memory)
        for point, table, running in carried:
            if isinstance(table, BaseException):
                state["failed"] += 1
                failures.append(f"{json.dumps(point)}: {table}")
            else:
                atomic_write(where / f"{point_id(point)}.parquet", table.write_parquet)
                (state["done"], state["computed"]) = (state["done"] + 1, state["computed"] + 1)
            state["running"] = running
            if progress:
                progress(dict(state))
    if failures:
        raise PointsFailed(
            f"{len(failures)} point(s) failed (rerun to retry them): " + "; ".join(failures[:3])
        )
    return pl.concat([pl.read_parquet(where / f"{i}.parquet") for i in ids], how="diagonal_relaxed")
