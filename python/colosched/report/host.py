"""The HTML report of a `colosched sim host` run or `sweep host`: one page, figures embedded as
PNG, no scripts.

    from colosched.report.host import write_host_report, write_host_sweep_report
    write_host_report(Path("out/host"), vms, meta, baseline="credit")   # report.html + fighost-*.png
    write_host_sweep_report(Path("out/sweep-host"), sweep, meta, "credit")  # + fighost-s1-1.png, …

Figures:
  fighost-1.png  each VM's mean completion time over the baseline scheduler's (spec 001's
              normalised completion time; below 1 is faster)
  fighost-2.png  each VM's time on a core, computing and spinning at barriers, per scheduler
  fighost-3.png  network VMs (spec 002): throughput, and ping round trips (median, 99th
              percentile) — only when the scenario has a network VM
  fighost-4.png  the ping round trips' CDF per network VM, one line per scheduler (spec 002's
              Fig. 14) — only when some ping was answered
  fighost-5.png  fairness: each VM's CPU time over the baseline's (spec 002's fairness ratio,
              Fig. 15), and the spread of scaled completion times across equal VMs (spec 001's
              Fig. 6)

A sweep's page has a section per scenario, with the same table and figures but host-4 (a sweep
keeps no ping samples); a figure's file name has its section's number: fighost-s2-1.png.

Written like every report (`colosched.report.toolkit.publish`): staged, then renamed into place,
report.html last.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
from matplotlib.figure import Figure

from colosched.host import per_vm
from colosched.host import pings as ping_rows
from colosched.report.toolkit import (
    SPARE_COLOURS,
    ReportFigure,
    colour_map,
    escape,
    figure_html,
    formatted,
    html_page,
    meta_html,
    publish,
    publish_sections,
    render_png,
    table_html,
)

# Every figure file a host report may write (a sweep's have the scenario's number: fighost-s2-1.png).
FIGURE_FILES = ["fighost-*.png"]
PAPER = "Paper"  # the captions' source line: spec 001's and spec 002's papers
INTRO = (
    "One hypervisor host simulated under several vCPU schedulers (docs/host-sim.md). Each caption "
    "says what the paper reported and what these numbers show."
)
REQUIRED = ["scheduler", "seed", "vm", "vcpus", "workload", "completions", "mean_completion_ms"]
REQUIRED += ["run_ms", "spin_ms"]
COLOURS = {
    "credit": "#7f7f7f",
    "eevdf": "#1f77b4",
    "ia": "#d62728",
    "diff": "#2ca02c",
    "diff-eevdf": "#17becf",
}


def _groups(agg: pl.DataFrame, schedulers, vms_order):
    """For each scheduler: its bars' x positions (grouped by VM), bar width, and a function
    giving `column` per VM (NaN where absent)."""
    width = 0.8 / len(schedulers)
    for i, s in enumerate(schedulers):
        rows = {r["vm"]: r for r in agg.filter(pl.col("scheduler") == s).iter_rows(named=True)}

        def values(column: str, rows=rows) -> np.ndarray:
            ys = [rows.get(v, {}).get(column) for v in vms_order]
            return np.array([np.nan if y is None else y for y in ys], dtype=float)

        yield s, np.arange(len(vms_order)) + (i - (len(schedulers) - 1) / 2) * width, width, values


def _grouped(ax, agg: pl.DataFrame, column: str, schedulers, vms_order, colours):
    for s, xs, width, values in _groups(agg, schedulers, vms_order):
        ax.bar(xs, values(column), width, label=s, color=colours[s])
    ax.set_xticks(np.arange(len(vms_order)), vms_order)


def _fig_completion(agg: pl.DataFrame, schedulers, vms_order, colours, baseline: str) -> ReportFigure:
    fig = Figure(figsize=(9, 4))
    ax = fig.add_subplot()
    _grouped(ax, agg, "vs_baseline", schedulers, vms_order, colours)
    ax.axhline(1.0, color="#444", linewidth=0.8)
    ax.set_ylabel(f"mean completion time / {baseline}'s")
    ax.set_title("Completion time per VM, normalised")
    ax.legend()
    fig.tight_layout()
    png, size = render_png(fig)
    best = agg.filter(pl.col("scheduler") != baseline).sort("vs_baseline").head(1)
    here = "No VM completed a program under another scheduler."
    if best.height and best["vs_baseline"][0] is not None:
        r = best.row(0, named=True)
        ratio = formatted(r["vs_baseline"], ".2f")
        here = f"Largest gain: {r['vm']} under {r['scheduler']}, {ratio}× {baseline}'s time."
    return ReportFigure(
        "host-1",
        "Mean completion time of each VM's programs over the baseline scheduler's",
        "spec 001: IA 23–28 % shorter than Credit on average, 37–48 % on parallel programs, "
        "≥ 19 % on serial ones.",
        here,
        png,
        size,
    )


def _fig_cpu(agg: pl.DataFrame, schedulers, vms_order, colours) -> ReportFigure:
    fig = Figure(figsize=(9, 4))
    ax = fig.add_subplot()
    for s, xs, width, values in _groups(agg, schedulers, vms_order):
        run, spin = values("run_ms") / 1e3, values("spin_ms") / 1e3
        ax.bar(xs, run - spin, width, color=colours[s], label=f"{s} computing")
        ax.bar(xs, spin, width, bottom=run - spin, color=colours[s], alpha=0.4, hatch="//")
    ax.set_xticks(np.arange(len(vms_order)), vms_order)
    ax.set_ylabel("seconds on a core (hatched: spinning)")
    ax.set_title("CPU time per VM")
    ax.legend()
    fig.tight_layout()
    png, size = render_png(fig)
    spin_share = agg["spin_ms"].sum() / max(agg["run_ms"].sum(), 1e-9)
    return ReportFigure(
        "host-2",
        "Each VM's time on a core: computing, and spinning at barriers (hatched)",
        "spec 001 co-schedules the vCPUs of VMs running parallel programs to cut the time lost to spinning.",
        f"Spinning was {spin_share:.1%} of all the time VMs spent on cores.",
        png,
        size,
    )


def _fig_network(agg: pl.DataFrame, schedulers, colours) -> ReportFigure | None:
    net = agg.filter(pl.col("throughput_mbit_s").is_not_null())
    if net.height == 0:
        return None
    vms_order = list(dict.fromkeys(net["vm"].to_list()))
    fig = Figure(figsize=(11, 4))
    left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    _grouped(left, net, "throughput_mbit_s", schedulers, vms_order, colours)
    left.set_ylabel("Mbit/s into the guest")
    left.set_title("Throughput of network VMs")
    left.legend()
    _grouped(right, net, "ping_p50_ms", schedulers, vms_order, colours)
    right.set_ylabel("ping round trip, ms (bar: median, tick: 99th percentile)")
    for _, xs, _, values in _groups(net, schedulers, vms_order):
        right.scatter(xs, values("ping_p99_ms"), marker="_", s=200, color="#222")
    right.set_title("Ping latency of network VMs")
    fig.tight_layout()
    png, size = render_png(fig)
    best = net.sort("throughput_mbit_s", descending=True).row(0, named=True)
    return ReportFigure(
        "host-3",
        "Network VMs: throughput into the guest, and ping round trips",
        "spec 002 (Diff vs Credit): TCP 54→96 and 37→74 Mbit/s, UDP 66→118 and 45→95, "
        "ping 71→32 and 96→37 ms (Queue-1, Queue-2).",
        f"Highest throughput: {best['vm']} under {best['scheduler']}, "
        f"{formatted(best['throughput_mbit_s'], '.1f')} Mbit/s.",
        png,
        size,
    )


def _fig_latency_cdf(pings: pl.DataFrame, schedulers, colours) -> ReportFigure | None:
    if pings.height == 0:
        return None
    vms_order = list(dict.fromkeys(pings["vm"].to_list()))[:4]
    fig = Figure(figsize=(5.5 * len(vms_order), 4))
    lo, hi = pings["rtt_ms"].min(), pings["rtt_ms"].max()
    worst = []
    for i, vm in enumerate(vms_order):
        ax = fig.add_subplot(1, len(vms_order), i + 1)
        for s in schedulers:
            rtts = np.sort(
                pings.filter((pl.col("vm") == vm) & (pl.col("scheduler") == s))["rtt_ms"].to_numpy()
            )
            if rtts.size == 0:
                continue
            ax.step(rtts, np.arange(1, rtts.size + 1) / rtts.size, where="post", color=colours[s], label=s)
            worst.append((float(np.percentile(rtts, 99)), s, vm))
        if lo > 0 and hi / lo > 20:
            ax.set_xscale("log")
        ax.set_xlabel("ping round trip, ms")
        ax.set_ylabel("fraction of answered pings")
        ax.set_title(f"Ping latency CDF: {vm}")
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right")
    fig.tight_layout()
    png, size = render_png(fig)
    p99, s, vm = max(worst)
    return ReportFigure(
        "host-4",
        "Distribution of the ping round trips of each network VM, per scheduler (pooled over seeds)",
        "spec 002, Fig. 14: Diff moves the whole ping CDF left of Credit's (mean 71 → 32 ms and 96 → 37 ms).",
        f"Slowest tail: {vm} under {s}, 99th percentile {formatted(p99, '.2f')} ms.",
        png,
        size,
    )


def _sct_spread(vms: pl.DataFrame) -> pl.DataFrame:
    """spec 001's fairness: per scheduler, the standard deviation of the scaled completion time
    t_i / mean_j t_j across VMs of equal shape (vCPUs, workload; two or more), per seed, then
    averaged over seeds."""
    shape = ["vcpus", "workload"]
    done = vms.filter(pl.col("mean_completion_ms").is_not_null() & pl.col("mean_completion_ms").is_not_nan())
    by = ["scheduler", "seed", *shape]
    sct = done.with_columns(
        (pl.col("mean_completion_ms") / pl.col("mean_completion_ms").mean().over(by)).alias("sct"),
        pl.len().over(by).alias("equal"),
    ).filter(pl.col("equal") >= 2)
    return (
        sct.group_by(by, maintain_order=True)
        .agg(pl.col("sct").std(ddof=0).alias("std"), pl.col("vm").n_unique().alias("vms"))
        .group_by("scheduler", *shape, maintain_order=True)
        .agg(pl.col("std").mean(), pl.col("vms").first())
    )


def _fig_fairness(vms: pl.DataFrame, agg, schedulers, vms_order, colours, baseline: str) -> ReportFigure:
    base = agg.filter(pl.col("scheduler") == baseline).select("vm", pl.col("run_ms").alias("_base"))
    ratio = agg.join(base, on="vm", how="left").with_columns(
        (pl.col("run_ms") / pl.col("_base")).alias("cpu_vs")
    )
    fig = Figure(figsize=(11, 4))
    left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    _grouped(left, ratio, "cpu_vs", schedulers, vms_order, colours)
    left.axhline(1.0, color="#444", linewidth=0.8)
    left.set_ylabel(f"CPU time / {baseline}'s")
    left.set_title("CPU time per VM over the baseline's (spec 002)")
    left.legend()
    spread = _sct_spread(vms)
    if spread.height:
        named = spread.with_columns(
            pl.format("{}× {} vCPU {}", "vms", "vcpus", "workload").alias("vm")  # the bars' groups
        )
        groups = list(dict.fromkeys(named["vm"].to_list()))
        _grouped(right, named, "std", schedulers, groups, colours)
        right.set_ylabel("std of scaled completion time")
        right.legend()
    else:
        right.text(
            0.5, 0.5, "no two VMs of the same shape", ha="center", va="center", transform=right.transAxes
        )
    right.set_title("Spread across equal VMs (spec 001)")
    fig.tight_layout()
    png, size = render_png(fig)
    others = ratio.filter((pl.col("scheduler") != baseline) & pl.col("cpu_vs").is_not_null())
    here = "Only the baseline ran."
    if others.height:
        r = (
            others.with_columns((pl.col("cpu_vs") - 1).abs().alias("_d"))
            .sort("_d", descending=True)
            .row(0, named=True)
        )
        ratio = formatted(r["cpu_vs"], ".3f")
        here = f"Largest change of CPU time: {r['vm']} under {r['scheduler']}, {ratio}× {baseline}'s."
    if spread.height:
        worst = spread.sort("std", descending=True).row(0, named=True)
        std = formatted(worst["std"], ".3f")
        here += f" Widest spread of scaled completion time: {worst['scheduler']}, std {std}."
    return ReportFigure(
        "host-5",
        "Fairness: each VM's CPU time over the baseline's, and the spread of completion times "
        "across equal VMs",
        "spec 002, Fig. 15: the NSVMs' CPU under Diff over Credit's 1.008–1.034. spec 001, Fig. 6: "
        "std of the scaled completion time t_i / mean t across 5 equal VMs ≤ 0.02 under IA, "
        "Credit's the largest.",
        here,
        png,
        size,
    )


def _table(agg: pl.DataFrame, baseline: str) -> str:
    head = "<tr>" + "".join(
        f"<th>{escape(h)}</th>"
        for h in ("scheduler", "VM", "vCPUs", "workload", "runs", "completed", "mean completion ms",
                  f"vs {baseline}", "on a core s", "spinning s")
    ) + "</tr>"  # fmt: skip
    body = []
    for r in agg.iter_rows(named=True):
        cells = [
            escape(r["scheduler"]),
            escape(r["vm"]),
            r["vcpus"],
            escape(r["workload"]),
            r["runs"],
            r["completions"],
        ]
        spread = r["runs"] > 1
        completion = formatted(r["mean_completion_ms"], ",.1f")
        run = formatted(r["run_ms"] / 1e3, ",.2f")
        if spread:
            completion += " ± " + formatted(r["completion_sd_ms"], ",.1f")
            run += " ± " + formatted(r["run_sd_ms"] / 1e3, ",.2f")
        cells += [completion, formatted(r["vs_baseline"], ".3f"), run, formatted(r["spin_ms"] / 1e3, ",.2f")]
        body.append("<tr>" + "".join(f'<td class="num">{c}</td>' for c in cells) + "</tr>")
    return table_html(head, body)


def _seeds_note(vms: pl.DataFrame) -> str:
    """How many seeds the means are over, ± one standard deviation over them; a warning when
    there is one seed, or when the seeds gave identical runs (a deterministic scenario)."""
    seeds = vms["seed"].n_unique()
    if seeds == 1:
        return "One seed: no spread, so a difference between schedulers may be an accident of this run."
    keys = ["scheduler", "vm"]
    columns = ["mean_completion_ms", "run_ms"]
    varied = (
        vms.group_by(keys)
        .agg(pl.col(c).n_unique() > 1 for c in columns)
        .select(pl.any_horizontal(columns))
        .to_series()
        .any()
    )
    note = f"Means over {seeds} seeds ± one standard deviation over them."
    if not varied:
        note += (" Every seed gave the same runs (no work_cv or shuffle_start in the scenario): "
                 "a difference between schedulers may be an accident of this one start.")  # fmt: skip
    return note


def _check(vms: pl.DataFrame, baseline: str, where: str = "") -> None:
    missing = [c for c in REQUIRED if c not in vms.columns]
    if missing:
        raise ValueError(f"vms: missing column(s) {', '.join(missing)}")
    if vms.filter(pl.col("scheduler") == baseline).height == 0:
        raise ValueError(f"vms: no run of the baseline scheduler {baseline!r}{where}")


def _scenario(
    vms: pl.DataFrame, baseline: str, colours, pings: pl.DataFrame | None
) -> tuple[str, list[ReportFigure]]:
    """The per-VM table of one scenario's runs and the figures drawn from them: host-1, host-2,
    host-3 (when a VM has a network flow), host-4 (when `pings` has a sample), host-5."""
    schedulers = list(dict.fromkeys(vms["scheduler"].to_list()))
    vms_order = list(dict.fromkeys(vms["vm"].to_list()))
    agg = per_vm(vms, baseline)
    figures = [
        _fig_completion(agg, schedulers, vms_order, colours, baseline),
        _fig_cpu(agg, schedulers, vms_order, colours),
    ]
    network = _fig_network(agg, schedulers, colours)
    if network:
        figures.append(network)
    cdf = _fig_latency_cdf(pings, schedulers, colours) if pings is not None else None
    if cdf:
        figures.append(cdf)
    figures.append(_fig_fairness(vms, agg, schedulers, vms_order, colours, baseline))
    return _table(agg, baseline), figures


def write_host_report(
    out_dir: Path, vms: pl.DataFrame, meta: dict | None, baseline: str, pings: pl.DataFrame | None = None
) -> Path:
    """Writes `out_dir/report.html` and its figures; returns the path of report.html. `pings`
    (one row per answered ping, `host.pings`) defaults to the `ping_rtts_ms` lists in `vms`, if
    any. Raises ValueError before writing anything when `vms` lacks a column or holds no run of
    `baseline`."""
    _check(vms, baseline)
    if pings is None and "ping_rtts_ms" in vms.columns:
        pings = ping_rows(vms)
    colours = colour_map(list(dict.fromkeys(vms["scheduler"].to_list())), COLOURS, SPARE_COLOURS)
    table, figures = _scenario(vms, baseline, colours, pings)
    page = html_page(
        "colosched host report",
        [
            f'<p class="note">{INTRO}</p>',
            "<h2>Run</h2>",
            meta_html(meta),
            "<h2>Per VM</h2>",
            f'<p class="note">{_seeds_note(vms)} The baseline is {escape(baseline)}.</p>',
            table,
            "<h2>Figures</h2>",
            *[figure_html(f, PAPER) for f in figures],
        ],
    )
    return publish(Path(out_dir), page, figures, FIGURE_FILES)


def write_host_sweep_report(out_dir: Path, sweep: pl.DataFrame, meta: dict | None, baseline: str) -> Path:
    """Writes `out_dir/report.html` of `colosched sweep host` and its figures, one section per
    scenario of `sweep` (its rows: `host.run`'s vms table without the pings, of every
    scenario); returns the path of report.html. A sweep keeps no ping samples, so there is no
    host-4 (the ping CDF). Raises ValueError before writing anything when `sweep` lacks a column
    or a scenario holds no run of `baseline`."""
    if "scenario" not in sweep.columns:
        raise ValueError("sweep: missing column(s) scenario")
    scenarios = sweep.partition_by("scenario", maintain_order=True)
    for rows in scenarios:
        _check(rows, baseline, f" in scenario {rows['scenario'][0]!r}")
    colours = colour_map(list(dict.fromkeys(sweep["scheduler"].to_list())), COLOURS, SPARE_COLOURS)
    sections = []
    for rows in scenarios:
        table, figures = _scenario(rows, baseline, colours, None)
        seeds = rows["seed"].n_unique()
        note = f"Means over {seeds} seed{'s' if seeds > 1 else ''}. The baseline is {escape(baseline)}."
        sections.append((rows["scenario"][0], [f'<p class="note">{note}</p>', table], figures))
    intro = [
        f'<p class="note">{INTRO} One section per scenario of the sweep. A sweep keeps no ping '
        "samples, so the ping round trips' CDF (Figure host-4 of <code>colosched sim host</code>'s "
        "report, which draws it for one scenario) is left out.</p>",
        "<h2>Sweep</h2>",
        meta_html(meta),
    ]
    return publish_sections(
        Path(out_dir), "colosched host sweep report", intro, sections, FIGURE_FILES, PAPER
    )
