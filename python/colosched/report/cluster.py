"""The HTML report of a cluster run or sweep: our versions of the GiantVM thesis's Figs. 5-4 .. 5-9.

    from colosched.report.cluster import write_report, summarize
    html = write_report(Path("out"), result.summary, result.timeseries)   # out/report.html + fig5-*.png
    summarize(result.summary)    # per policy: mean and 95 % CI half-width of every metric

Figures (spec 000 §4.2):
  fig5-4.png  mean CPU and Gini per policy               (summary)
  fig5-5.png  overcommit and QoS duration per policy     (summary)
  fig5-6.png  accumulated migration traffic per cycle    (timeseries; skipped when it is empty)
  fig5-9.png  tasks moved to the first / second receiver (timeseries; skipped when it is empty)
  fig5-7.png  CPU, Gini, overcommit, duration vs machines and vs overcommit ratio   (sweep only)
  fig5-8.png  migration network rate in the same two sweeps                          (sweep only)

Error bars are 95 % confidence intervals over seeds (Student's t), drawn when a policy has at least
two seeds. The page and its writing are the toolkit's (`colosched.report.toolkit`): one
self-contained HTML5 file, written into place report.html last.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator, StrMethodFormatter

from colosched import _native
from colosched.report.toolkit import (
    ReportFigure,
    colour_map,
    escape,
    figure_html,
    formatted,
    html_page,
    meta_html,
    publish,
    render_png,
    table_html,
)

__all__ = ["METRICS", "THESIS_ORDER", "accumulated_network", "summarize", "t_quantile_975", "write_report"]

# The x-axis order of the thesis's Figs. 5-4 and 5-5 (our names; see docs/cluster-sim.md): the
# engine's list of the thesis's policies, in its order (Rust owns it), without `random`.
THESIS_ORDER = [p for p in _native.policies() if p != "random"]
THESIS_NAMES = {
    "no_migration": "no_migration",
    "coarse": "coarse_grained",
    "fine": "fine_grained",
    "fine:cpu_request": "cpu_request",
    "fine:cpu_usage": "cpu_usage",
    "fine:mem_usage": "mem_usage",
    "fine:-cpu_usage": "1/cpu_usage",
    "fine:cache_misses": "cache_misses",
}

# Summary metrics: column -> (table heading, number format). The first ones are required.
METRICS: dict[str, tuple[str, str]] = {
    "mean_cpu": ("mean CPU", ".3f"),
    "gini": ("Gini", ".3f"),
    "overcommit": ("overcommit", ".4f"),
    "duration": ("duration (s)", ",.0f"),
    "net_kbit_s_per_machine": ("net (kbit/s per machine)", ".3f"),
    "net_mbit_s": ("net, cluster (Mbit/s)", ".3f"),
    "net_peak_mbit_s": ("net peak, cluster (Mbit/s)", ".3f"),
    "moves": ("moves", ",.0f"),
    "migrated_gib": ("migrated (GiB)", ".2f"),
    "completed": ("completed", ",.0f"),
    "wall_s": ("wall (s)", ".1f"),
}
SUMMARY_REQUIRED = [
    "policy",
    "seed",
    "mean_cpu",
    "gini",
    "overcommit",
    "duration",
    "net_kbit_s_per_machine",
    "moves",
]
TIMESERIES_REQUIRED = ["policy", "seed", "cycle", "net_mbit", "move_to_first", "move_to_second"]
SWEEP_REQUIRED = ["machines", "overcommit_ratio", *SUMMARY_REQUIRED]

# One fixed colour per known policy, so a policy looks the same in every figure and every report.
_COLOURS = {
    "no_migration": "#7f7f7f",
    "coarse": "#d62728",
    "fine": "#1f77b4",
    "fine:cpu_request": "#ff7f0e",
    "fine:cpu_usage": "#9467bd",
    "fine:mem_usage": "#2ca02c",
    "fine:-cpu_usage": "#8c564b",
    "fine:cache_misses": "#e377c2",
    "random": "#bcbd22",
}
OTHER_COLOURS = ["#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd", "#e6550d"]

MAX_POINTS = 1500  # per-cycle plots bin longer runs into at most this many points

# Student's t quantile t(0.975, df) for df = 1..30; larger df use a Cornish-Fisher expansion.
_T975 = [
    12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
    2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
    2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423,
]  # fmt: skip


def t_quantile_975(df: int) -> float:
    """The 97.5 % quantile of Student's t with `df` degrees of freedom (two-sided 95 % interval)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be at least 1, got {df}")
    if df <= len(_T975):
        return _T975[df - 1]
    z = 1.959963984540054
    return (
        z
        + (z**3 + z) / (4 * df)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3)
    )


def _ci(std: float | None, n: int) -> float | None:
    """Half-width of the 95 % confidence interval of a mean of n values with sample std `std`."""
    if n < 2 or std is None or (isinstance(std, float) and math.isnan(std)):
        return None
    return t_quantile_975(n - 1) * std / math.sqrt(n)


# ---------------------------------------------------------------------------------------------
# Input checks


def _check(df: Any, name: str, required: Sequence[str]) -> pl.DataFrame:
    """Returns `df` with `policy` as a string; raises ValueError naming what is wrong."""
    if not isinstance(df, pl.DataFrame):
        raise ValueError(f"{name} must be a polars DataFrame, got {type(df).__name__}")
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise ValueError(
            f"{name} is missing required column(s): {', '.join(missing)} "
            f"(it has: {', '.join(df.columns) or 'none'})"
        )
    for col in [*required, *METRICS]:
        if col in df.columns and col != "policy" and not df.schema[col].is_numeric():
            raise ValueError(f"{name} column {col!r} must be numeric, got {df.schema[col]}")
    if df.height == 0:
        raise ValueError(f"{name} has no rows")
    if df["policy"].null_count():
        raise ValueError(f"{name} column 'policy' has {df['policy'].null_count()} empty value(s)")
    return df.with_columns(pl.col("policy").cast(pl.String))


def policy_order(*columns: pl.Series) -> list[str]:
    """Distinct policy names: the thesis's ones in its x-axis order, then the others as they appear."""
    seen: list[str] = []
    for col in columns:
        for p in col.unique(maintain_order=True).to_list():
            if p not in seen:
                seen.append(p)
    return [p for p in THESIS_ORDER if p in seen] + [p for p in seen if p not in THESIS_ORDER]


# ---------------------------------------------------------------------------------------------
# Summary table


def summarize(summary: pl.DataFrame) -> pl.DataFrame:
    """Per policy (thesis order): `runs`, and for each metric present its mean and `<metric>_ci`,
    the half-width of the 95 % confidence interval over seeds (null with fewer than 2 runs)."""
    summary = _check(summary, "summary", ["policy"])
    metrics = [m for m in METRICS if m in summary.columns]
    if not metrics:
        raise ValueError(f"summary has none of the metric columns: {', '.join(METRICS)}")
    agg = summary.group_by("policy", maintain_order=True).agg(
        pl.len().alias("runs"),
        *[pl.col(m).cast(pl.Float64).mean().alias(m) for m in metrics],
        *[pl.col(m).cast(pl.Float64).std(ddof=1).alias(f"{m}__std") for m in metrics],
        *[pl.col(m).is_not_null().sum().alias(f"{m}__n") for m in metrics],
    )
    order = {p: i for i, p in enumerate(policy_order(agg["policy"]))}
    agg = agg.sort(pl.col("policy").replace_strict(order, return_dtype=pl.Int64))
    cis = {
        f"{m}_ci": pl.Series(
            f"{m}_ci",
            [_ci(s, n) for s, n in zip(agg[f"{m}__std"].to_list(), agg[f"{m}__n"].to_list())],
            dtype=pl.Float64,
        )
        for m in metrics
    }
    return pl.DataFrame(
        [agg["policy"], agg["runs"].cast(pl.Int64), *[c for m in metrics for c in (agg[m], cis[f"{m}_ci"])]]
    )


# ---------------------------------------------------------------------------------------------
# Figures


def _bars(ax, agg: pl.DataFrame, metric: str, label: str, colours: dict[str, str]) -> None:
    policies = agg["policy"].to_list()
    x = np.arange(len(policies))
    means = np.array([np.nan if v is None else v for v in agg[metric].to_list()], dtype=float)
    cis = agg[f"{metric}_ci"].to_list()
    yerr = np.array([0.0 if c is None else c for c in cis]) if any(c is not None for c in cis) else None
    ax.bar(
        x, means, color=[colours[p] for p in policies], yerr=yerr, capsize=4, edgecolor="black", linewidth=0.4
    )
    ax.set_xticks(x, policies, rotation=35, ha="right", fontsize=8)
    ax.set_ylabel(label)
    ax.set_title(label)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)


def _best(agg: pl.DataFrame, metric: str, fmt: str, lowest: bool) -> str:
    rows = agg.filter(pl.col(metric).is_not_nan() & pl.col(metric).is_not_null())
    if rows.height == 0:
        return "–"
    row = rows.sort(metric, descending=not lowest).row(0, named=True)
    if rows.height > 1 and rows[metric].n_unique() == 1:
        return f"all policies equal ({format(row[metric], fmt)})"
    return f"{row['policy']} ({format(row[metric], fmt)})"


def _fig_bars(agg: pl.DataFrame, colours: dict[str, str], key: str) -> ReportFigure:
    fig = Figure(figsize=(11, 4.3))
    axes = fig.subplots(1, 2)
    seeds_note = "95 % CI over seeds" if agg["runs"].max() >= 2 else "one seed: no error bars"
    if key == "5-4":
        _bars(axes[0], agg, "mean_cpu", "mean CPU utilisation", colours)
        _bars(axes[1], agg, "gini", "Gini coefficient", colours)
        title = "Mean CPU utilisation and Gini coefficient per policy"
        thesis = (
            "no_migration worst, coarse second worst; unsorted fine not clearly worse than the sorted "
            "variants (put down to randomness); 1/cpu_usage (our fine:-cpu_usage) worst of the fine "
            "variants; memory-sorted generally better than CPU-sorted; Gini moves opposite to mean CPU."
        )
        here = (
            f"highest mean CPU: {_best(agg, 'mean_cpu', '.3f', False)}; "
            f"lowest Gini: {_best(agg, 'gini', '.3f', True)}."
        )
    else:
        _bars(axes[0], agg, "overcommit", "overcommit (load above capacity)", colours)
        _bars(axes[1], agg, "duration", "QoS duration (s)", colours)
        title = "Overcommit and QoS duration per policy (lower is better)"
        thesis = (
            "both fluctuate but rise overall along the x-axis, roughly consistent with Fig. 5-4; "
            "lower is better."
        )
        here = (
            f"lowest overcommit: {_best(agg, 'overcommit', '.4f', True)}; "
            f"shortest duration: {_best(agg, 'duration', ',.0f', True)}."
        )
    fig.suptitle(f"Fig. {key}: {title} ({seeds_note})", fontsize=11)
    fig.tight_layout()
    png, size = render_png(fig)
    return ReportFigure(key, title, thesis, here, png, size)


def _bin_cycles(df: pl.DataFrame, columns: list[str], how: str) -> tuple[pl.DataFrame, int]:
    """Groups consecutive cycles so a plot has at most MAX_POINTS points; returns (df, cycles per bin)."""
    span = int(df["cycle"].max() - df["cycle"].min() + 1) if df.height else 1
    width = max(1, math.ceil(span / MAX_POINTS))
    if width == 1:
        return df, 1
    agg = [pl.col(c).sum() if how == "sum" else pl.col(c).last() for c in columns]
    binned = df.group_by((pl.col("cycle") // width * width).alias("cycle")).agg(agg).sort("cycle")
    return binned, width


def accumulated_network(timeseries: pl.DataFrame) -> pl.DataFrame:
    """Fig. 5-6's curves: per policy and cycle, `net_mbit` (mean over seeds) and `acc`, its running sum."""
    return (
        timeseries.group_by(["policy", "cycle"])
        .agg(pl.col("net_mbit").cast(pl.Float64).mean())
        .sort(["policy", "cycle"])
        .with_columns(pl.col("net_mbit").cum_sum().over("policy").alias("acc"))
    )


def _fig_network(ts: pl.DataFrame, policies: list[str], colours: dict[str, str]) -> ReportFigure:
    acc = accumulated_network(ts)
    fig = Figure(figsize=(11, 4.8))
    ax = fig.subplots()
    totals = {}
    for p in policies:
        rows = acc.filter(pl.col("policy") == p)
        if rows.height == 0:
            continue
        rows, _ = _bin_cycles(rows, ["acc"], "last")
        ax.plot(rows["cycle"], rows["acc"], label=p, color=colours[p], linewidth=1.4)
        totals[p] = float(rows["acc"][-1])
    ax.set_xlabel("cycle (simulation step)")
    ax.set_ylabel("accumulated migration traffic (Mbit)")
    ax.yaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    n_seeds = ts["seed"].n_unique()
    title = "Accumulated network overhead of migration"
    fig.suptitle(f"Fig. 5-6: {title} (mean over {n_seeds} seed{'s' if n_seeds > 1 else ''})", fontsize=11)
    fig.tight_layout()
    moving = {p: v for p, v in totals.items() if v > 0}
    if moving:
        hi = max(moving, key=moving.get)
        lo = min(moving, key=moving.get)
        here = (
            f"most traffic: {hi} ({moving[hi]:,.0f} Mbit); "
            f"least among migrating policies: {lo} ({moving[lo]:,.0f} Mbit)."
        )
    else:
        here = "no policy migrated anything."
    thesis = (
        "small at first (cluster not yet full), grows from about cycle 397, load falls again at about "
        "cycle 837; coarse highest, no_migration 0; cache_misses lowest in the Chinese text, "
        "1/cpu_usage lowest in the English summary; mem_usage cuts network cost a lot."
    )
    png, size = render_png(fig)
    return ReportFigure("5-6", title, thesis, here, png, size)


def _pick_fine(ts: pl.DataFrame, policies: list[str]) -> str | None:
    """fine:mem_usage if present, else the first fine policy, else the first one that moved tasks."""
    if "fine:mem_usage" in policies:
        return "fine:mem_usage"
    for p in policies:
        if p == "fine" or p.startswith("fine:"):
            return p
    moved = ts.group_by("policy").agg((pl.col("move_to_first") + pl.col("move_to_second")).sum().alias("n"))
    moved_set = set(moved.filter(pl.col("n") > 0)["policy"].to_list())
    return next((p for p in policies if p in moved_set), None)


def _fig_receivers(ts: pl.DataFrame, policy: str) -> ReportFigure:
    seed = ts.filter(pl.col("policy") == policy)["seed"].min()
    rows = (
        ts.filter((pl.col("policy") == policy) & (pl.col("seed") == seed))
        .select("cycle", pl.col("move_to_first").cast(pl.Int64), pl.col("move_to_second").cast(pl.Int64))
        .sort("cycle")
        .with_columns((pl.col("move_to_first") + pl.col("move_to_second")).alias("total"))
    )
    first, second = int(rows["move_to_first"].sum()), int(rows["move_to_second"].sum())
    to_second = rows.filter(pl.col("move_to_second") > 0)["move_to_second"]
    binned, width = _bin_cycles(rows, ["move_to_first", "move_to_second", "total"], "sum")
    unit = "per cycle" if width == 1 else f"per {width} cycles"

    fig = Figure(figsize=(11, 5.6))
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=[2, 1])
    top.fill_between(binned["cycle"], binned["total"], step="mid", color="#cccccc", label="total_tasks")
    top.step(binned["cycle"], binned["move_to_first"], where="mid", color="#1f77b4", linewidth=1.0,
             label="move_to_first (least loaded node)")  # fmt: skip
    top.set_ylabel(f"tasks moved {unit}")
    bottom.step(binned["cycle"], binned["move_to_second"], where="mid", color="#ff7f0e", linewidth=1.0,
                label="move_to_second (second least loaded node)")  # fmt: skip
    bottom.set_ylabel(f"tasks {unit}")
    bottom.set_xlabel("cycle (simulation step)")
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    handles = [*top.get_legend_handles_labels()[0], *bottom.get_legend_handles_labels()[0]]
    fig.legend(handles, [h.get_label() for h in handles], loc="upper center", bbox_to_anchor=(0.5, 0.95),
               ncol=3, fontsize=8, frameon=False)  # fmt: skip
    title = f"Tasks moved to the first and second receiver, {policy}"
    fig.suptitle(f"Fig. 5-9: {title} (seed {seed})", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    total = first + second
    if total:
        here = (
            f"{policy}, seed {seed}: {total:,} tasks moved, "
            f"{100 * first / total:.1f} % to the least loaded node; "
            f"{to_second.len():,} cycles sent tasks to the second node"
            + (f", a median of {float(to_second.median()):g} each." if to_second.len() else ".")
        )
    else:
        here = f"{policy}, seed {seed}: no task was moved."
    thesis = (
        "move_to_first takes almost all; usually only 1 task goes to the second-lowest node, so a third "
        "target is not needed with cells of 4; workload-pattern boundaries near cycles 48, 83, 145, 242."
    )
    png, size = render_png(fig)
    return ReportFigure("5-9", title, thesis, here, png, size)


def _most_common(col: pl.Series, default: float) -> Any:
    """The most frequent value; on a tie the thesis default if tied, else the middle tied value."""
    counts = col.value_counts()
    top = counts["count"].max()
    tied = sorted(counts.filter(pl.col("count") == top)[col.name].to_list())
    return default if default in tied else tied[len(tied) // 2]


def _sweep_lines(
    ax, sweep: pl.DataFrame, x: str, metric: str, policies: list[str], colours: dict[str, str]
) -> None:
    points = (
        sweep.group_by(["policy", x])
        .agg(
            pl.col(metric).cast(pl.Float64).mean().alias("mean"),
            pl.col(metric).cast(pl.Float64).std(ddof=1).alias("std"),
            pl.col(metric).is_not_null().sum().alias("n"),
        )
        .sort(x)
    )
    for p in policies:
        rows = points.filter(pl.col("policy") == p)
        if rows.height == 0:
            continue
        cis = [_ci(s, n) for s, n in zip(rows["std"].to_list(), rows["n"].to_list())]
        yerr = [0.0 if c is None else c for c in cis] if any(c is not None for c in cis) else None
        ax.errorbar(rows[x].to_list(), rows["mean"].to_list(), yerr=yerr, label=p, color=colours[p],
                    marker="o", markersize=4, linewidth=1.3, capsize=3)  # fmt: skip
    ax.grid(alpha=0.3)


_SWEEP_METRICS = [
    ("mean_cpu", "mean CPU"),
    ("gini", "Gini"),
    ("overcommit", "overcommit"),
    ("duration", "duration (s)"),
]


def _fig_sweep(
    sweep: pl.DataFrame, policies: list[str], colours: dict[str, str], network: bool
) -> ReportFigure:
    machines = _most_common(sweep["machines"], 800)
    ratio = _most_common(sweep["overcommit_ratio"], 1.0)
    by_machines = sweep.filter(pl.col("overcommit_ratio") == ratio)
    by_ratio = sweep.filter(pl.col("machines") == machines)
    rows = [("machines", "machines", by_machines, f"overcommit ratio {ratio:g}"),
            ("overcommit_ratio", "overcommit ratio", by_ratio, f"{machines} machines")]  # fmt: skip
    metrics = [("net_kbit_s_per_machine", "net (kbit/s per machine)")] if network else _SWEEP_METRICS
    if network and "net_peak_mbit_s" in sweep.columns:
        metrics = [*metrics, ("net_peak_mbit_s", "net peak, cluster (Mbit/s)")]
    fig = Figure(figsize=(3.2 * len(metrics) + 1.6, 6.4))
    axes = np.atleast_2d(fig.subplots(2, len(metrics), squeeze=False))
    for r, (x, xlabel, data, fixed) in enumerate(rows):
        for c, (metric, label) in enumerate(metrics):
            ax = axes[r][c]
            _sweep_lines(ax, data, x, metric, policies, colours)
            ax.set_xlabel(f"{xlabel} ({fixed})", fontsize=8)
            ax.set_ylabel(label, fontsize=9)
            ax.tick_params(labelsize=8)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 5) or 1, fontsize=8)
    fixed_note = f"row 1 at overcommit ratio {ratio:g}, row 2 at {machines} machines"
    if network:
        key, title = "5-8", "Migration network rate in the sweeps"
        thesis = (
            "coarse always highest (it moves 3 removed sets); memory-sorted lower, CPU-sorted higher, "
            "unsorted in between; cost falls with more machines and with a higher ratio. Peak at most "
            "7 Mbit/s, against 694 Mbit/s for a VM live migration."
        )
        col = "net_kbit_s_per_machine"
        ranked = sweep.with_columns(pl.col(col).cast(pl.Float64).fill_nan(None))
        peak = ranked.sort(col, descending=True, nulls_last=True).row(0, named=True)
        here = (
            f"{fixed_note}; highest rate per machine: {peak['policy']} "
            f"{formatted(peak[col], '.3f')} kbit/s at {peak['machines']} machines, "
            f"ratio {peak['overcommit_ratio']:g} (the thesis's bound: 7 Mbit/s = 7,000 kbit/s)."
        )
    else:
        key, title = "5-7", "Mean CPU, Gini, overcommit and duration vs machines and overcommit ratio"
        thesis = (
            "no_migration worst everywhere; coarse about equal to fine(mem_usage); fine better when varying "
            "machines, coarse better when varying the ratio. More machines: CPU down, Gini up, overcommit "
            "down, duration down. Higher ratio: CPU down, Gini up, overcommit down, duration up."
        )
        here = f"{fixed_note}; {sweep['seed'].n_unique()} seed(s) per point, error bars are 95 % CIs."
    fig.suptitle(f"Fig. {key}: {title}", fontsize=11)
    legend_rows = math.ceil(len(policies) / 5)
    fig.tight_layout(rect=(0, 0.035 + 0.03 * legend_rows, 1, 1))
    png, size = render_png(fig)
    return ReportFigure(key, title, thesis, here, png, size)


# ---------------------------------------------------------------------------------------------
# HTML


def _summary_html(agg: pl.DataFrame) -> str:
    metrics = [m for m in METRICS if m in agg.columns]
    head = "<tr><th>policy</th><th>thesis name</th><th>runs</th>"
    head += "".join(f"<th>{escape(METRICS[m][0])}</th>" for m in metrics) + "</tr>"
    body = []
    for row in agg.iter_rows(named=True):
        policy = row["policy"]
        cells = [f"<td>{escape(policy)}</td>", f"<td>{escape(THESIS_NAMES.get(policy, ''))}</td>",
                 f'<td class="num">{row["runs"]}</td>']  # fmt: skip
        for m in metrics:
            fmt = METRICS[m][1]
            text = formatted(row[m], fmt)
            if row[f"{m}_ci"] is not None and text != "–":
                text += f" ± {formatted(row[f'{m}_ci'], fmt)}"
            cells.append(f'<td class="num">{escape(text)}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    return table_html(head, body)


# What the finding compares, against no_migration: (column, label, format of the difference).
_FINDING = [
    ("mean_cpu", "mean CPU", "+.3f"),
    ("gini", "Gini", "+.3f"),
    ("overcommit", "overcommit", "+.4f"),
    ("duration", "duration (s)", "+,.0f"),
]


def finding(agg: pl.DataFrame, warning: float | None) -> tuple[str, list[list[str]]]:
    """The report's first words: one sentence on what the policies did and why, and per policy
    its moves, network and differences from no_migration (rows of text cells)."""
    line = f"the warning line ({warning:g})" if warning is not None else "the warning line"
    moved = agg.filter(pl.col("moves") > 0)
    base = agg.filter(pl.col("policy") == "no_migration")
    if moved.height == 0:
        sentence = (
            f"No node reached {line} at any step, so no policy had a task to move: every policy's "
            "figures equal no_migration's. Size the cluster to the trace (--machines auto:LOAD) or "
            "overbook admission (--overcommit-ratio below 1) to see them act."
        )
    else:
        best = moved.sort("gini").row(0, named=True)
        sentence = (
            f"Nodes crossed {line}: {moved.height} of {agg.height} policies moved tasks; "
            f"{best['policy']} balanced best (Gini {best['gini']:.3f}"
            + (f" against no_migration's {base['gini'][0]:.3f}" if base.height else "")
            + f") with {best['moves']:,.0f} moves."
        )
    rows = []
    for r in agg.iter_rows(named=True):
        cells = [r["policy"], f"{r['moves']:,.0f}", f"{r['net_kbit_s_per_machine']:,.1f}"]
        for col, _, fmt in _FINDING:
            cells.append(format(r[col] - base[col][0], fmt) if base.height else "–")
        rows.append(cells)
    return sentence, rows


def _finding_html(agg: pl.DataFrame, meta: dict | None) -> str:
    warning = ((meta or {}).get("params") or {}).get("warning_threshold")
    sentence, rows = finding(agg, warning)
    head = ["policy", "moves", "net (kbit/s per machine)", *[f"Δ {label}" for _, label, _ in _FINDING]]
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    return (
        f'<p class="finding">{escape(sentence)}</p>\n'
        f'<table class="summary finding">\n<thead><tr>{th}</tr></thead>\n<tbody>{body}</tbody>\n</table>\n'
        "<p class=\"note\">Δ: the policy's figure minus no_migration's (means over seeds).</p>"
    )


def _page(meta: dict | None, agg: pl.DataFrame, figures: list[ReportFigure], notes: list[str]) -> str:
    multi = agg["runs"].max() >= 2
    ci_note = (
        "Values are means over seeds ± the half-width of the 95 % confidence interval (Student's t)."
        if multi
        else "One run per policy, so no confidence intervals."
    )
    parts = [
        "<h2>Finding</h2>",
        _finding_html(agg, meta),
        '<p class="note">Rebalancing policies replayed on the Google ClusterData2011-2 trace, plotted as the '
        "GiantVM thesis's Figs. 5-4 to 5-9 (spec 000 §4.2). Each caption says what the thesis reported and "
        "what these numbers show.</p>",
        "<h2>Summary</h2>",
        f'<p class="note">{escape(ci_note)} As the thesis defines them: mean CPU is the mean utilisation '
        "of machine capacity, loads clipped at capacity (Gini too); overcommit the mean over steps of the "
        "summed load above capacity, in capacities; duration the mean of waiting + service + overload "
        "penalties over started tasks; network in kbit/s per machine (and Mbit/s for the cluster).</p>",
        _summary_html(agg),
        "<h2>Figures</h2>",
        *[figure_html(f) for f in sorted(figures, key=lambda f: int(f.key.split("-")[1]))],
    ]
    if notes:
        parts += ["<h2>Notes</h2>", "<ul>", *[f"<li>{escape(n)}</li>" for n in notes], "</ul>"]
    parts += ["<details>", "<summary><h2>Run parameters</h2></summary>", meta_html(meta), "</details>"]
    return html_page("colosched cluster report", parts)


# ---------------------------------------------------------------------------------------------
# Entry point

FIGURE_FILES = [f"fig5-{n}.png" for n in (4, 5, 6, 7, 8, 9)]


def write_report(
    out_dir: Path,
    summary: pl.DataFrame,
    timeseries: pl.DataFrame,
    sweep: pl.DataFrame | None = None,
    meta: dict | None = None,
) -> Path:
    """Writes `out_dir/report.html` and one PNG per figure; returns the path of report.html.

    `timeseries` may be empty (a sweep keeps no per-cycle series): Figs. 5-6 and 5-9 are then left
    out and the page says so. Raises ValueError, before writing anything, when an input lacks a
    column. Figure files of an earlier report that this one does not produce are removed.
    """
    out_dir = Path(out_dir)
    summary = _check(summary, "summary", SUMMARY_REQUIRED)
    has_series = isinstance(timeseries, pl.DataFrame) and timeseries.height > 0
    if has_series:
        timeseries = _check(timeseries, "timeseries", TIMESERIES_REQUIRED)
    elif timeseries is not None and not isinstance(timeseries, pl.DataFrame):
        raise ValueError(f"timeseries must be a polars DataFrame, got {type(timeseries).__name__}")
    if sweep is not None:
        sweep = _check(sweep, "sweep", SWEEP_REQUIRED)

    agg = summarize(summary)
    columns = [summary["policy"]]
    if has_series:
        columns.append(timeseries["policy"])
    if sweep is not None:
        columns.append(sweep["policy"])
    colours = colour_map(policy_order(*columns), _COLOURS, OTHER_COLOURS)

    figures = [_fig_bars(agg, colours, "5-4"), _fig_bars(agg, colours, "5-5")]
    notes = []
    if has_series:
        ts_policies = policy_order(timeseries["policy"])
        figures.append(_fig_network(timeseries, ts_policies, colours))
        chosen = _pick_fine(timeseries, ts_policies)
        if chosen is None:
            notes.append("Figure 5-9 left out: no policy in the time series moved any task.")
        else:
            figures.append(_fig_receivers(timeseries, chosen))
    else:
        notes.append("Figures 5-6 and 5-9 left out: no per-cycle time series was given (sweeps keep none).")
    if sweep is not None:
        sweep_policies = policy_order(sweep["policy"])
        figures.append(_fig_sweep(sweep, sweep_policies, colours, network=False))
        figures.append(_fig_sweep(sweep, sweep_policies, colours, network=True))
    else:
        notes.append("Figures 5-7 and 5-8 left out: they need a sweep (colosched sweep cluster).")

    page = _page(meta, agg, figures, notes)

    return publish(out_dir, page, figures, FIGURE_FILES)
