"""The hypervisor host simulator (crates/host, docs/host-sim.md): one host's cores running the
vCPUs of VMs under a vCPU scheduler. Rust runs the simulation; this module names things and
gathers the runs into tables.

    from colosched import host
    runs, vms = host.run("spec001-sketch", ["credit", "ia"], seeds=[1])
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from colosched import _native

if TYPE_CHECKING:
    import polars as pl

SCHEDULERS: list[str] = list(_native.host_schedulers())
PRESETS: list[str] = list(_native.host_presets())
# Per-VM network figures (null for VMs without a flow), averaged over seeds by `per_vm`.
NETWORK = ["throughput_mbit_s", "ping_p50_ms", "ping_p99_ms"]


def expand_names(names: Sequence[str], known: Sequence[str], what: str) -> list[str]:
    """Names or comma lists, in order and once each; `all` means every one of `known`; an unknown
    name raises ValueError listing the known ones (`what`: "scheduler", "policy")."""
    out: list[str] = []
    for name in names:
        for part in str(name).split(","):
            part = part.strip()
            for p in known if part == "all" else [part]:
                if p not in known:
                    raise ValueError(f"unknown {what} {p!r} (known: {', '.join(known)}, all)")
                if p not in out:
                    out.append(p)
    return out


def expand_schedulers(names: Sequence[str]) -> list[str]:
    return expand_names(names, SCHEDULERS, "scheduler")


def run(
    scenario: str,
    schedulers: Sequence[str] = ("all",),
    seeds: Sequence[int] = (1, 2, 3, 4, 5),
    progress: Callable[[int, int], None] | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Runs `scenario` (a preset name or a TOML file) under each scheduler and seed (five by
    default: a comparison needs the spread over seeds, issue 26; a scenario without `work_cv` or
    `shuffle_start` gives every seed the same run, and `per_vm` then shows no spread).

    Returns (runs, vms): one row per run (scenario, scheduler, seed, end_ms, events), and one
    row per VM and run; `vms.ping_rtts_ms` holds every answered ping's round trip (a list, empty
    for VMs without pings; `pings` makes it one row per sample). The whole scenario is checked
    for every scheduler before the first run, so bad input fails fast (ValueError naming the
    file and key)."""
    names = expand_schedulers(schedulers)
    loaded = _native.HostScenario(str(scenario))  # read and checked once, run many times
    loaded.check(names)
    jobs = [(name, int(seed)) for name in names for seed in seeds]
    # polars takes 0.15 s to load: on another thread while Rust runs the jobs (its threads do not
    # hold the GIL), so that a short `sim host` does not wait for both one after the other. The
    # import below waits for that one if it has not finished (Python's per-module import lock).
    if "polars" not in sys.modules:
        threading.Thread(target=__import__, args=("polars",), daemon=True).start()
    results = loaded.run_all(jobs, progress)
    import polars as pl
    import polars.selectors as cs

    runs, vms = [], []
    for (name, seed), r in zip(jobs, results):
        for v in r.pop("vms"):
            vms.append({"scenario": r["scenario"], "scheduler": name, "seed": seed, **v})
        runs.append(r)
    vms = pl.DataFrame(vms, infer_schema_length=None).with_columns(cs.float().fill_nan(None))
    return _keys_first(pl.DataFrame(runs), ["scenario", "scheduler", "seed"]), _keys_first(
        vms, ["scenario", "scheduler", "seed", "vm", "vcpus", "workload"]
    )


def pings(vms: pl.DataFrame) -> pl.DataFrame:
    """One row per answered ping: scenario, scheduler, seed, vm, sample (its order in the run)
    and rtt_ms, from the `ping_rtts_ms` lists of `run`'s vms."""
    import polars as pl

    keys = ["scenario", "scheduler", "seed", "vm"]
    return (
        vms.select(*keys, pl.col("ping_rtts_ms").cast(pl.List(pl.Float64)))
        .filter(pl.col("ping_rtts_ms").list.len() > 0)
        .with_columns(sample=pl.int_ranges(0, pl.col("ping_rtts_ms").list.len()))
        .explode("ping_rtts_ms", "sample")
        .select(*keys, pl.col("sample").cast(pl.UInt32), pl.col("ping_rtts_ms").alias("rtt_ms"))
    )


def _keys_first(df: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """`keys`, then the other columns by name."""
    return df.select(keys + sorted(c for c in df.columns if c not in keys))


def per_vm(vms: pl.DataFrame, baseline: str) -> pl.DataFrame:
    """Means over seeds per scheduler and VM, with the ratio to `baseline`'s mean completion,
    and the spread over seeds: the standard deviation of the mean completion time and of the time
    on a core (`*_sd_ms`, 0 for one seed or runs that do not differ)."""
    import polars as pl

    agg = vms.group_by("scheduler", "vm", maintain_order=True).agg(
        pl.col("vcpus").first(),
        pl.col("workload").first(),
        pl.col("seed").n_unique().alias("runs"),
        pl.col("completions").sum(),
        pl.col("mean_completion_ms").std(ddof=0).fill_null(0.0).alias("completion_sd_ms"),
        pl.col("run_ms").std(ddof=0).fill_null(0.0).alias("run_sd_ms"),
        pl.col("mean_completion_ms").mean(),
        pl.col("run_ms").mean(),
        pl.col("spin_ms").mean(),
        *[pl.col(c).mean() for c in NETWORK],
    )
    base = agg.filter(pl.col("scheduler") == baseline).select(
        "vm", pl.col("mean_completion_ms").alias("_base")
    )
    return (
        agg.join(base, on="vm", how="left", maintain_order="left")
        .with_columns((pl.col("mean_completion_ms") / pl.col("_base")).alias("vs_baseline"))
        .drop("_base")
    )


def normalised(vms: pl.DataFrame, baseline: str = "credit") -> pl.DataFrame:
    """Each VM's mean completion time over `baseline`'s for the same VM and seed (1 = the same;
    below 1 = faster). Rows whose baseline completed nothing get null."""
    import polars as pl

    base = vms.filter(pl.col("scheduler") == baseline).select(
        "scenario", "seed", "vm", pl.col("mean_completion_ms").alias("baseline_ms")
    )
    return vms.join(base, on=["scenario", "seed", "vm"], how="left").with_columns(
        (pl.col("mean_completion_ms") / pl.col("baseline_ms")).alias(f"vs_{baseline}")
    )
