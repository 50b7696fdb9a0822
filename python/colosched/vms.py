"""The VM-level simulator (crates/vms, docs/vm-sim.md): hypervisors with an SSD cache in front of
shared storage, applications of VMs, and placement policies that live-migrate VMs (spec 003).
Rust runs the simulation; this module gathers the runs into tables and computes the paper's
figures from them.

    from colosched import vms
    tables = vms.run("spec003-fio-read", ["random", "planner"], seeds=[1, 2, 3])
    vms.headline(tables, baseline="random")
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Sequence

import polars as pl
import polars.selectors as cs

from colosched import _native
from colosched.host import expand_names

POLICIES: list[str] = list(_native.vms_policies())
PRESETS: list[str] = list(_native.vms_presets())
KEYS = ["scenario", "policy", "seed"]
# The tables of a run (`run`); their columns come from the Rust result types.
TABLES = ["runs", "vms", "jobs", "apps", "migrations", "windows", "spread"]

# The paper's figure for each headline metric (spec 003 §4); a metric "job_time_s:NAME" has
# its job's kind's.
PAPER = {
    "iops_per_vm": "ours/random +15 % (read), +6 % (write)",
    "job_time_s:pi": "≈ random",
    "io_job_time_s": "ours/random −25 %",
    "cpu_job_time_s": "≈ random",
    "dfsio_mbps": "ours/random +39 %",
    "ld_mean": "random 5, ours 9",
    "ld_final": "random 5, ours 9",
    "ops_s": "ours ≈ 5 % below random",
    "migration_time_s": "10–15 s",
    "migration_link_share": "0.40 of the link",
    "migration_slowdown": "0.07",
}


LABELS = {
    "iops_per_vm": "IOPS per VM",
    "job_time_s": "job time, s",
    "io_job_time_s": "I/O job time, s",
    "cpu_job_time_s": "CPU job time, s",
    "dfsio_mbps": "TestDFSIO MB/s",
    "ld_mean": "logical distance, mean",
    "ld_final": "logical distance, end",
    "ops_s": "ZooKeeper ops/s",
    "migrations": "migrations per run",
    "straight_back": "moves straight back",
    "straight_back_share": "share of moves straight back",
    "migration_time_s": "migration time, s",
    "migration_link_share": "migration's link share",
    "migration_slowdown": "slowdown while moving",
}


def label(metric: str) -> str:
    """A headline metric's name for people: "job_time_s:read" -> "job time, s (read)"."""
    base, _, name = metric.partition(":")
    return LABELS.get(base, base) + (f" ({name})" if name else "")


def number(x: float | None, digits: int = 4) -> str:
    """`x` to about `digits` significant digits, without an exponent: 45,632, 7.572, 0.05909;
    "0" below 1e-9 in size; "—" for None or NaN."""
    if x is None or x != x:
        return "—"
    if abs(x) < 1e-9:  # rounding noise, e.g. the std of equal values
        return "0"
    decimals = 0 if x == 0 else max(0, digits - 1 - math.floor(math.log10(abs(x))))
    return f"{x:,.{min(decimals, 6)}f}"


def expand_policies(names: Sequence[str]) -> list[str]:
    """`all` means every policy; an unknown name raises ValueError listing the known ones."""
    return expand_names(names, POLICIES, "policy")


def run(
    scenario: str,
    policies: Sequence[str] = ("all",),
    seeds: Sequence[int] = (1,),
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, pl.DataFrame]:
    """Runs `scenario` (a preset name or a TOML file) under each policy and seed.

    Returns one DataFrame per name in TABLES, each starting with scenario, policy, seed: `runs`
    (one row per run, with its counts of VMs, jobs and migrations), and one row per VM, Hadoop
    job, application, migration, (window, host) and (window, `spread` application: its logical
    distance at the window's end) of each run. The scenario is read and
    checked before the first run (ValueError naming the file and key)."""
    names = expand_policies(policies)
    if not seeds:
        raise ValueError("seeds: give at least one")
    loaded = _native.VmsScenario(str(scenario))
    frames: dict[str, list[pl.DataFrame]] = {t: [] for t in TABLES}
    total = len(names) * len(seeds)
    for policy in names:
        for seed in seeds:
            keys = [
                pl.lit(loaded.name).alias("scenario"),
                pl.lit(policy).alias("policy"),
                pl.lit(seed, pl.Int64).alias("seed"),
            ]
            tables = {t: pl.read_ipc_stream(io.BytesIO(b)) for t, b in loaded.run(policy, int(seed))}
            moves = tables["migrations"]
            tables["runs"] = pl.DataFrame(
                {
                    "vms": tables["vms"].height,
                    "jobs": tables["jobs"].height,
                    "migrations": moves.height,
                    "straight_back": int(moves["straight_back"].sum()),
                }
            )
            for t in TABLES:
                frames[t].append(tables[t].select(*keys, pl.all()))
            if progress:
                progress(len(frames["runs"]), total)
    # Rust's unsigned counts as Int64 (differences of them can go below zero), its enums as text.
    plain = [cs.unsigned_integer().cast(pl.Int64), cs.categorical().cast(pl.String)]
    return {t: pl.concat(frames[t]).with_columns(plain) for t in TABLES}


def per_run(tables: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """The headline metrics of each run, long: scenario, policy, seed, metric, value (null where a
    run has nothing to measure, e.g. a migration's time in a run without migrations). Only the
    metrics that apply to the scenario: IOPS per VM with fio VMs; job times and TestDFSIO
    throughput with measured Hadoop jobs; logical distance and ops/s per ZooKeeper application;
    migrations always, with `straight_back` (moves that take a VM back to the host its previous
    move took it from, begun within 600 s of that move's end) and their share of the moves."""
    by = KEYS
    parts: list[pl.DataFrame] = []

    named: list[str] = []  # metrics that get a row per run even when no run measured them

    def add(df: pl.DataFrame, metric: pl.Expr | str, value: pl.Expr) -> None:
        if isinstance(metric, str):
            named.append(metric)
            metric = pl.lit(metric)
        parts.append(df.select(*by, metric.alias("metric"), value.cast(pl.Float64).alias("value")))

    fio = tables["vms"].filter(pl.col("kind") == "io_benchmark")
    if fio.height:
        add(fio.group_by(by, maintain_order=True).agg(v=pl.col("iops").mean()), "iops_per_vm", pl.col("v"))
    jobs = tables["jobs"].filter(pl.col("measured")).with_columns(cpu=pl.col("job").str.starts_with("pi"))
    if jobs.height:
        per_job = jobs.group_by(*by, "job", maintain_order=True).agg(v=pl.col("time_s").mean())
        add(per_job, pl.format("job_time_s:{}", "job"), pl.col("v"))
        io = jobs.group_by(by, maintain_order=True).agg(
            io=pl.col("time_s").filter(~pl.col("cpu")).mean(),
            cpu=pl.col("time_s").filter(pl.col("cpu")).mean(),
            dfsio=pl.col("throughput_mbps").filter(~pl.col("cpu")).mean(),
        )
        add(io, "io_job_time_s", pl.col("io"))
        add(io, "cpu_job_time_s", pl.col("cpu"))
        add(io, "dfsio_mbps", pl.col("dfsio"))
    zk = tables["apps"].filter(pl.col("kind") == "zookeeper")
    for column in ("ld_mean", "ld_final", "ops_s"):
        if zk.height:
            add(zk, pl.format(f"{column}:{{}}", "app"), pl.col(column))
    other = tables["vms"].filter(pl.col("kind") == "other")
    if other.height:
        per_vm = other.group_by(by, maintain_order=True).agg(v=pl.col("iops").mean())
        add(per_vm, "iops_per_vm:other", pl.col("v"))
    add(tables["runs"], "migrations", pl.col("migrations"))
    add(tables["runs"], "straight_back", pl.col("straight_back"))
    runs = tables["runs"].filter(pl.col("migrations") > 0)
    add(runs, "straight_back_share", pl.col("straight_back") / pl.col("migrations"))
    moved = (
        tables["migrations"]
        .group_by(by, maintain_order=True)
        .agg(pl.col("time_s", "link_share", "slowdown").mean())
    )
    for column in ("time_s", "link_share", "slowdown"):
        add(moved, f"migration_{column}", pl.col(column))
    long = pl.concat(parts)
    # Every (run, metric): a run without migrations still has a row for their time (null).
    metrics = pl.DataFrame({"metric": list(dict.fromkeys([*long["metric"], *named]))})
    grid = tables["runs"].select(by).join(metrics, how="cross")
    return grid.join(long, on=[*by, "metric"], how="left", maintain_order="left").select(
        *by, "metric", "value"
    )


def paper(metric: str) -> str:
    """The paper's figure for a headline metric ("" where the paper gives none)."""
    base, _, name = metric.partition(":")
    if base == "job_time_s":
        return PAPER["job_time_s:pi"] if name.startswith("pi") else "I/O jobs: −25 % on average"
    return PAPER.get(base, "")


def headline(tables: dict[str, pl.DataFrame], baseline: str = "random") -> pl.DataFrame:
    """`summarise(per_run(tables), baseline)`."""
    return summarise(per_run(tables), baseline)


def summarise(long: pl.DataFrame, baseline: str = "random") -> pl.DataFrame:
    """The paper's figures per policy: for each metric of `per_run`, the mean over seeds, its
    spread (std, min, max) and, against `baseline`, the ratio computed per seed then averaged
    (vs_baseline, with its min and max; null when `baseline` did not run or measured 0 or
    nothing). One row per (metric, policy), metric by metric: scenario, metric, policy, seeds
    (runs that measured it), mean, std, min, max, vs_baseline, vs_baseline_min, vs_baseline_max,
    paper. `long` is `per_run`'s table (or a sweep's, which is the same per run)."""
    base = long.filter(pl.col("policy") == baseline).select(
        "scenario", "seed", "metric", pl.col("value").alias("_base")
    )
    ratio = pl.when(pl.col("_base") != 0).then(pl.col("value") / pl.col("_base"))
    return (
        long.join(base, on=["scenario", "seed", "metric"], how="left", maintain_order="left")
        .with_columns(ratio.alias("_ratio"))
        .group_by("scenario", "metric", "policy", maintain_order=True)
        .agg(
            pl.col("value").count().alias("seeds"),
            pl.col("value").mean().alias("mean"),
            pl.col("value").std().alias("std"),
            pl.col("value").min().alias("min"),
            pl.col("value").max().alias("max"),
            pl.col("_ratio").mean().alias("vs_baseline"),
            pl.col("_ratio").min().alias("vs_baseline_min"),
            pl.col("_ratio").max().alias("vs_baseline_max"),
        )
        .with_columns(pl.col("metric").map_elements(paper, return_dtype=pl.String).alias("paper"))
        .sort(_order(long["metric"]), _order(long["policy"]), maintain_order=True)
    )


def _order(column: pl.Series) -> pl.Expr:
    """Sorts by first appearance in `column`."""
    first = list(dict.fromkeys(column.to_list()))
    return pl.col(column.name).replace_strict(first, list(range(len(first))), return_dtype=pl.Int64)
