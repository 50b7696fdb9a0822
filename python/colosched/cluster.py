"""Cluster rebalancing simulator: the Python API over the Rust engine.

    from colosched import cluster
    result = cluster.run(trace="data/google-2011-sample", policy="all", machines=800, seeds=3)
    result.summary      # polars DataFrame, one row per (policy, seed)
    result.timeseries   # polars DataFrame, one row per (policy, seed, step)
    result.params       # every parameter the run used, resolved from its profile

A profile is a named set of defaults: "thesis" (the default; the thesis's own model) or "full"
(every run, 60 s steps, FIFO queues, to the end of the trace). Any parameter overrides it:
`cluster.run(trace, "all", profile="full", step_s=30)`. `cluster.defaults(profile)` lists them.

A policy is a built-in name (see `POLICIES`), "all" (the thesis's 8), or a Python callable
`policy(cell, cycle) -> [(task_id, from_node, to_node), ...]` where `cell` is a list of nodes,
each `{"load": float, "tasks": [{"id", "priority", "cpu_request", "cpu_usage", "max_cpu",
"mem_usage", "mai", "index"}, ...]}` listing the node's migratable tasks.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from colosched import _native

if TYPE_CHECKING:
    import polars as pl

POLICIES: list[str] = list(_native.policies())
THESIS_POLICIES: list[str] = POLICIES[:8]
PolicyArg = Union[str, Callable[..., Any]]

PROFILES: list[str] = list(_native.profiles())


def defaults(profile: str = "thesis") -> dict[str, Any]:
    """Every simulator parameter with its value under `profile` (Rust owns the defaults)."""
    return dict(_native.resolve_params(profile, {}))


def resolve(profile: str = "thesis", **params: Any) -> dict[str, Any]:
    """The parameters a run with `params` under `profile` uses; ValueError names a bad key."""
    return dict(_native.resolve_params(profile, params))


@dataclass
class Result:
    summary: pl.DataFrame
    timeseries: pl.DataFrame
    trace_stats: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)


def load(
    trace: str | os.PathLike,
    parts: str | None = None,
    use_cache: bool = True,
    cache_dir: str | os.PathLike | None = None,
) -> _native.Trace:
    """Ingests a trace root (official layout); raises colosched.TraceInputError on bad input."""
    return _native.load_trace(str(trace), parts, use_cache, None if cache_dir is None else str(cache_dir))


def auto_machines(
    trace: _native.Trace, spec: str, profile: str = "thesis", usage_seed: int = 0, **params: Any
) -> tuple[int, float]:
    """`machines = "auto"` or `"auto:LOAD"`: the fewest machines (a whole number of cells) whose
    capacity the replay's peak requested CPU fills to at most LOAD (default 1.0, 0.05–10), and
    that peak in machines. ValueError names `machines` on a bad spec."""
    word, _, load_text = spec.partition(":")
    try:
        load_frac = float(load_text) if load_text else 1.0
    except ValueError:
        load_frac = float("nan")
    if word != "auto" or not 0.05 <= load_frac <= 10:
        raise ValueError(f"machines: {spec!r} is not a count, 'auto' or 'auto:LOAD' with LOAD 0.05-10")
    cell = resolve(profile, **params)["cell_size"]
    peak = _native.peak_cpu_request(trace, profile, params, usage_seed)
    cells = max(1, math.ceil(peak / load_frac / cell - 1e-9))
    return cells * cell, peak


def expand_policies(policy: PolicyArg | Sequence[PolicyArg]) -> list[PolicyArg]:
    items = [policy] if isinstance(policy, str) or callable(policy) else list(policy)
    out: list[PolicyArg] = []
    for p in items:
        if isinstance(p, str) and p == "all":
            out.extend(THESIS_POLICIES)
        elif isinstance(p, str) and "," in p:
            out.extend(expand_policies(p.split(",")))
        else:
            out.append(p)
    return out


def run(
    trace: str | os.PathLike | _native.Trace,
    policy: PolicyArg | Sequence[PolicyArg] = "all",
    *,
    profile: str = "thesis",
    parts: str | None = None,
    seed: int = 1,
    seeds: int = 1,
    usage_seed: int = 0,
    threads: int = 0,
    progress: Callable[[int, int], None] | None = None,
    use_cache: bool = True,
    cache_dir: str | os.PathLike | None = None,
    keep_series: bool = True,
    **params: Any,
) -> Result:
    """Replays `trace` under each policy and each of `seeds` seeds (seed, seed+1, ...).

    `profile` names the set of defaults; `params` override them (see `defaults()`); an unknown
    name or a bad value raises ValueError naming it.
    """
    # Here, not at the top: the command line asks this module for its profiles and defaults
    # without waiting for polars to load.
    import polars as pl

    if seeds < 1:
        raise ValueError("seeds must be at least 1")
    loaded = trace if isinstance(trace, _native.Trace) else load(trace, parts, use_cache, cache_dir)
    auto = params.get("machines")
    if isinstance(auto, str):
        rest = {k: v for k, v in params.items() if k != "machines"}
        params["machines"], peak = auto_machines(loaded, auto, profile, usage_seed, **rest)
    resolved = resolve(profile, **params, seed=seed, keep_series=keep_series)
    if isinstance(auto, str):
        resolved.update(machines_auto=auto, peak_cpu_request=peak)
    policies = expand_policies(policy)
    seed_list = [seed + i for i in range(seeds)]
    native = {**params, "keep_series": keep_series}
    jobs = _native.simulate_jobs(loaded, policies, seed_list, profile, native, usage_seed, threads, progress)
    summary = pl.DataFrame([dict(sorted(j["summary"].items())) for j in jobs])  # columns by name
    frames = []
    for j in jobs:
        s = j["summary"]
        frames.append(
            pl.DataFrame(j["series"]).with_columns(
                pl.lit(s["policy"]).alias("policy"), pl.lit(s["seed"]).cast(pl.Int64).alias("seed")
            )
        )
    timeseries = pl.concat(frames) if frames else pl.DataFrame()
    if timeseries.width:
        timeseries = timeseries.select(
            ["policy", "seed", *[c for c in timeseries.columns if c not in ("policy", "seed")]]
        )
    resolved.pop("seed")
    resolved.update(seeds=seed_list, usage_seed=usage_seed)
    return Result(summary, timeseries, dict(loaded.stats()), resolved)


def bundled_sample() -> Path:
    """The real sample shipped with colosched (task_events parts 00000-00001)."""
    here = Path(__file__).resolve()
    for root in (here.parent / "data", *[p / "data" for p in here.parents]):
        sample = root / "google-2011-sample"
        if (sample / "task_events").is_dir():
            return sample
    raise FileNotFoundError(
        "bundled sample data/google-2011-sample not found (run from a colosched checkout)"
    )
