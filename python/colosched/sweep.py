"""Parameter sweeps (thesis Figs. 5-7 and 5-8): every (machines, overcommit ratio) point of a grid
replayed for each policy and seed, on local worker processes."""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any, Callable

import polars as pl

from colosched import cluster


def _point(
    root: str,
    parts: str | None,
    policies: list[str],
    machines: int,
    ratio: float,
    seeds: list[int],
    usage_seed: int,
    profile: str,
    params: dict[str, Any],
    cache_dir: str | None,
) -> pl.DataFrame:
    result = cluster.run(
        root,
        policies,
        profile=profile,
        parts=parts,
        seed=seeds[0],
        seeds=len(seeds),
        usage_seed=usage_seed,
        threads=1,
        keep_series=False,
        cache_dir=cache_dir,
        machines=machines,
        overcommit_ratio=ratio,
        **params,
    )
    return result.summary.with_columns(
        pl.lit(machines).alias("machines"), pl.lit(ratio).alias("overcommit_ratio")
    )


def run_grid(
    root,
    parts: str | None,
    policies: list[str],
    machines: list[int],
    ratios: list[float],
    *,
    seeds: list[int],
    usage_seed: int = 0,
    profile: str = "thesis",
    params: dict[str, Any] | None = None,
    jobs: int | None = None,
    cache_dir=None,
    progress: Callable[[int, int], None] | None = None,
) -> pl.DataFrame:
    """Returns one row per (machines, overcommit_ratio, policy, seed) with the summary metrics."""
    if any(not isinstance(p, str) for p in policies):
        raise ValueError("sweeps take built-in policy names (custom callables cannot cross processes)")
    cluster.resolve(profile, **(params or {}))  # a bad parameter fails here, not in a worker
    grid = [(m, r) for m in machines for r in ratios]
    jobs = jobs or os.cpu_count() or 1
    cache = None if cache_dir is None else str(cache_dir)
    cluster.load(root, parts, cache_dir=cache)  # parse once, so the workers read the cache
    frames = []
    # "spawn", not fork: the parent holds Rust and polars thread pools, and a forked child can
    # inherit one of their locks held and hang.
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(jobs, len(grid)), mp_context=spawn) as pool:
        futures = [
            pool.submit(
                _point, str(root), parts, policies, m, r, seeds, usage_seed, profile, params or {}, cache
            )
            for m, r in grid
        ]
        for done, f in enumerate(as_completed(futures), 1):
            frames.append(f.result())
            if progress:
                progress(done, len(grid))
    cols = ["machines", "overcommit_ratio", "policy", "seed"]
    table = pl.concat(frames)
    return table.select(cols + [c for c in table.columns if c not in cols]).sort(cols)
