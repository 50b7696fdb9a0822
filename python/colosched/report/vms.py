"""The HTML report of a `colosched sim vms` run or `sweep vms`: one page, figures embedded as
PNG, no scripts.

    from colosched.report.vms import write_vms_report, write_vms_sweep_report
    write_vms_report(Path("out/vms"), tables, meta, baseline="random")   # report.html + figvms-*.png
    write_vms_sweep_report(Path("out/sweep-vms"), sweep, meta, "random")  # + figvms-s1-1.png, …

Figures (only those that apply to the scenario):
  figvms-1.png  the headline metrics (spec 003 §4) per policy, means over seeds, error bars from
                the lowest to the highest seed, each other policy's ratio to the baseline above
                its bar
  figvms-2.png  each host's SSD utilisation over time for the first seed, one panel per policy
  figvms-3.png  migrations over time (cumulative, first seed) and, for applications that want
                their VMs spread (ZooKeeper), their logical distance over time — when a run
                migrated or the scenario has such an application
  figvms-4.png  Hadoop: mean time of each job per policy — when jobs were measured

A sweep's page has a section per scenario with the headline table, figvms-1 and figvms-4 (a sweep
keeps no per-window tables for 2 and 3); a figure's file name has its section's number:
figvms-s2-1.png.

Written like every report (`colosched.report.toolkit.publish`): staged, then renamed into place,
report.html last.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
from matplotlib.figure import Figure

from colosched import vms as vmsim
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

# Every figure file a vms report may write (a sweep's have the scenario's number: figvms-s2-1.png).
FIGURE_FILES = ["figvms-*.png"]
INTRO = (
    "Hypervisors with an SSD cache, simulated under VM placement policies (docs/vm-sim.md). Each "
    "caption says what spec 003's paper reported and what these numbers show."
)
COLOURS = {"none": "#7f7f7f", "random": "#ff7f0e", "cloudcache": "#1f77b4", "planner": "#d62728"}
PAPER = "Paper"  # the captions' source line: spec 003's surviving evaluation


def _bars(ax, rows: pl.DataFrame, policies, colours, baseline: str) -> None:
    """One bar per policy (mean), error bars min..max over seeds, ratio to baseline above."""
    by = {r["policy"]: r for r in rows.iter_rows(named=True)}
    xs = np.arange(len(policies))
    mean = np.array([_nan(by.get(p, {}).get("mean")) for p in policies])
    low, high = _spread(mean, [by.get(p, {}) for p in policies])
    ax.bar(xs, np.nan_to_num(mean), color=[colours[p] for p in policies], yerr=[low, high], capsize=3)
    for x, p, m, top in zip(xs, policies, mean, high):
        ratio = by.get(p, {}).get("vs_baseline")
        if p != baseline and ratio is not None and np.isfinite(m):
            ax.annotate(f"×{ratio:.2f}", (x, m + top), (0, 2), textcoords="offset points", ha="center",
                        va="bottom", fontsize=7)  # fmt: skip
    ax.set_xticks(xs, policies, fontsize=7, rotation=30)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)


def _nan(x) -> float:
    return np.nan if x is None else float(x)


def _spread(mean: np.ndarray, rows: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """Error bar lengths below and above `mean` down to each row's min and up to its max (0
    where absent; never negative from rounding)."""
    low = mean - np.array([_nan(r.get("min")) for r in rows])
    high = np.array([_nan(r.get("max")) for r in rows]) - mean
    return np.nan_to_num(low).clip(0), np.nan_to_num(high).clip(0)


def _fig_headline(head: pl.DataFrame, policies, colours, baseline: str) -> ReportFigure:
    metrics = list(dict.fromkeys(head["metric"].to_list()))
    cols = min(4, len(metrics))
    rows = -(-len(metrics) // cols)
    fig = Figure(figsize=(3.2 * cols, 2.8 * rows))
    for i, metric in enumerate(metrics):
        ax = fig.add_subplot(rows, cols, i + 1)
        _bars(ax, head.filter(pl.col("metric") == metric), policies, colours, baseline)
        ax.set_title(vmsim.label(metric), fontsize=9)
    fig.tight_layout()
    png, size = render_png(fig)
    papers = dict.fromkeys(
        f"{vmsim.label(m)}: {p}" for m, p in head.select("metric", "paper").iter_rows() if p
    )
    best = head.filter((pl.col("policy") != baseline) & pl.col("vs_baseline").is_not_null())
    here = f"No other policy has a ratio to {baseline}."
    if best.height:
        metric = best["metric"][0]
        rows = best.filter(pl.col("metric") == metric).iter_rows(named=True)
        ratios = ", ".join(f"{x['policy']} ×{x['vs_baseline']:.3f}" for x in rows)
        here = f"{vmsim.label(metric)}: {ratios} of {baseline}'s (per seed, then averaged)."
    return ReportFigure(
        "vms-1",
        f"The paper's figures per policy: means over seeds (error bars: lowest to highest seed), "
        f"×ratio to {baseline} above each bar",
        "; ".join(papers) + ".",
        here,
        png,
        size,
    )


def _fig_windows(windows: pl.DataFrame, policies, seed: int) -> ReportFigure:
    one = windows.filter(pl.col("seed") == seed)
    hosts = list(dict.fromkeys(one["host"].to_list()))
    fig = Figure(figsize=(min(4.2 * len(policies), 17), 3.6))
    busiest = []
    ax = None
    for i, p in enumerate(policies):
        ax = fig.add_subplot(1, len(policies), i + 1, sharey=ax)
        rows = one.filter(pl.col("policy") == p)
        for j, h in enumerate(hosts):
            line = rows.filter(pl.col("host") == h)
            ax.plot(line["t_s"].to_numpy() / 60, line["utilisation"].to_numpy(), label=h,
                    color=f"C{j % 10}", linewidth=1.2)  # fmt: skip
        ax.axhline(1.0, color="#444", linewidth=0.8, linestyle="--")
        ax.set_title(p)
        ax.set_xlabel("minutes")
        ax.grid(alpha=0.3)
        peak = rows.group_by("t_s").agg(pl.col("utilisation").max())["utilisation"].mean()
        busiest.append(f"{p} {formatted(peak, '.2f')}")
    fig.axes[0].set_ylabel("SSD utilisation (1 = saturated)")
    fig.axes[-1].legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    png, size = render_png(fig)
    return ReportFigure(
        "vms-2",
        f"SSD utilisation of each host over time, seed {seed}, one panel per policy",
        "spec 003 spreads I/O-heavy VMs over hypervisors so that no SSD cache is the bottleneck.",
        "The busiest SSD's utilisation, mean over windows: " + ", ".join(busiest) + ".",
        png,
        size,
    )


def _fig_migrations(tables, policies, colours, seed: int) -> ReportFigure | None:
    spread = tables["apps"].filter((pl.col("preference") == "spread") & (pl.col("seed") == seed))
    moves = tables["migrations"].filter(pl.col("seed") == seed)
    if moves.height == 0 and spread.height == 0:
        return None
    apps = list(dict.fromkeys(spread["app"].to_list()))
    end = tables["windows"]["t_s"].max() or 0
    fig = Figure(figsize=(11 if apps else 6, 3.8))
    ax = fig.add_subplot(1, 2 if apps else 1, 1)
    for p in policies:
        done = moves.filter(pl.col("policy") == p).select(pl.col("start_s") + pl.col("time_s"))
        t = np.sort(done.to_series().to_numpy())
        ax.step(np.r_[0, t, end] / 60, np.r_[0, np.arange(1, t.size + 1), t.size], where="post",
                color=colours[p], label=p)  # fmt: skip
    ax.set_xlabel("minutes")
    ax.set_ylabel("migrations done")
    ax.set_title("Migrations over time")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    here = "Migrations in this seed: " + ", ".join(
        f"{p} {moves.filter(pl.col('policy') == p).height}" for p in policies
    )
    if apps:
        ax = fig.add_subplot(1, 2, 2)
        ld = tables["spread"].filter(pl.col("seed") == seed)
        for a in apps:
            for p in policies:
                line = ld.filter((pl.col("app") == a) & (pl.col("policy") == p))
                if line.height:
                    t, y = line["t_s"].to_numpy(), line["ld"].to_numpy()
                    ax.step(t / 60, y, where="post", color=colours[p],
                            label=p if len(apps) == 1 else f"{a} {p}")  # fmt: skip
            best = spread.filter(pl.col("app") == a)["ld_best"].max()
            ax.axhline(best, color="#444", linewidth=0.8, linestyle="--")
        ax.set_xlabel("minutes")
        ax.set_ylabel("logical distance (pairs on different hosts)")
        ax.set_title("Logical distance of spread applications")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        finals = spread.select("policy", "app", "ld_final").iter_rows()
        here += "; logical distance at the end: " + ", ".join(f"{a} {p} {x}" for p, a, x in finals)
    fig.tight_layout()
    png, size = render_png(fig)
    return ReportFigure(
        "vms-3",
        f"Migrations over time{' and the logical distance of spread applications' if apps else ''}, "
        f"seed {seed} (dashed: the best distance possible)",
        "One live migration takes 10–15 s at about 40 % of the link; ZooKeeper's logical distance "
        "at steady state: random 5, ours 9 (6 VMs on 2 hosts).",
        here + ".",
        png,
        size,
    )


def _fig_jobs(head: pl.DataFrame, policies, colours, baseline: str) -> ReportFigure | None:
    jobs = head.filter(pl.col("metric").str.starts_with("job_time_s:")).with_columns(
        pl.col("metric").str.strip_prefix("job_time_s:").alias("job")
    )
    if jobs.height == 0:
        return None
    names = list(dict.fromkeys(jobs["job"].to_list()))
    fig = Figure(figsize=(max(6, 1.1 * len(names) * max(1, len(policies) / 3)), 4))
    ax = fig.add_subplot()
    width = 0.8 / len(policies)
    for i, p in enumerate(policies):
        rows = {r["job"]: r for r in jobs.filter(pl.col("policy") == p).iter_rows(named=True)}
        mean = np.array([_nan(rows.get(j, {}).get("mean")) for j in names])
        low, high = _spread(mean, [rows.get(j, {}) for j in names])
        xs = np.arange(len(names)) + (i - (len(policies) - 1) / 2) * width
        ax.bar(xs, np.nan_to_num(mean), width, yerr=[low, high], capsize=2, color=colours[p], label=p)
    ax.set_xticks(np.arange(len(names)), names)
    ax.set_ylabel("mean job time, s (submission to last task)")
    ax.set_title("Hadoop job times per policy")
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    ax.legend(fontsize=8)
    fig.tight_layout()
    png, size = render_png(fig)
    io = head.filter((pl.col("metric") == "io_job_time_s") & (pl.col("policy") != baseline))
    ratios = [f"{r['policy']} ×{formatted(r['vs_baseline'], '.3f')}" for r in io.iter_rows(named=True)]
    here = f"I/O jobs' time over {baseline}'s: {', '.join(ratios)}" if ratios else "Only the baseline ran"
    return ReportFigure(
        "vms-4",
        "Mean time of each Hadoop job, per policy (error bars: lowest to highest seed)",
        "PI-10 and PI-20 about equal to random; the TestDFSIO jobs (write, read, randr, backr) 25 % "
        "shorter on average; their throughput +39 %.",
        here + ".",
        png,
        size,
    )


def _table(head: pl.DataFrame, baseline: str) -> str:
    heads = ("metric", "policy", "seeds", "mean ± std", "min – max", f"vs {baseline}", "min – max", "paper")
    rows = []
    for r in head.iter_rows(named=True):
        mean = vmsim.number(r["mean"]) + (f" ± {vmsim.number(r['std'], 2)}" if r["std"] is not None else "")
        low, high = r["vs_baseline_min"], r["vs_baseline_max"]
        cells = [r["seeds"], escape(mean), escape(_range(vmsim.number(r["min"]), vmsim.number(r["max"])))]
        cells += [
            formatted(r["vs_baseline"], ".3f"),
            escape(_range(formatted(low, ".3f"), formatted(high, ".3f"))),
        ]
        text = [escape(vmsim.label(r["metric"])), escape(r["policy"])]
        rows.append(
            "<tr>"
            + "".join(f"<td>{c}</td>" for c in text)
            + "".join(f'<td class="num">{c}</td>' for c in cells)
            + f"<td>{escape(r['paper'])}</td></tr>"
        )
    head_row = "<tr>" + "".join(f"<th>{escape(h)}</th>" for h in heads) + "</tr>"
    return table_html(head_row, rows)


def _range(low: str, high: str) -> str:
    return "—" if low in ("—", "–") else f"{low} – {high}"


def _head_figures(head: pl.DataFrame, policies, colours, baseline: str) -> list[ReportFigure]:
    """The figures drawn from the headline table (`vms.summarise`) alone, all a sweep keeps:
    vms-1 and, when Hadoop jobs were measured, vms-4."""
    jobs = _fig_jobs(head, policies, colours, baseline)
    return [_fig_headline(head, policies, colours, baseline), *([jobs] if jobs else [])]


def _note(baseline: str) -> str:
    ratio = f"the ratio to {escape(baseline)} is taken per seed, then averaged"
    return f'<p class="note">Means over seeds; {ratio}.</p>'


def write_vms_report(
    out_dir: Path, tables: dict[str, pl.DataFrame], meta: dict | None, baseline: str = "random"
) -> Path:
    """Writes `out_dir/report.html` and its figures from `vms.run`'s tables; returns the path of
    report.html. Raises ValueError before writing anything when a table is missing or
    `baseline` did not run."""
    missing = [t for t in vmsim.TABLES if t not in tables]
    if missing:
        raise ValueError(f"tables: missing {', '.join(missing)}")
    policies = list(dict.fromkeys(tables["runs"]["policy"].to_list()))
    if baseline not in policies:
        raise ValueError(f"runs: no run of the baseline policy {baseline!r}")
    colours = colour_map(policies, COLOURS, SPARE_COLOURS)
    seed = int(tables["runs"]["seed"].min())
    head = vmsim.headline(tables, baseline)
    headline, *jobs = _head_figures(head, policies, colours, baseline)
    migrations = _fig_migrations(tables, policies, colours, seed)
    windows = _fig_windows(tables["windows"], policies, seed)
    figures = [headline, windows, *([migrations] if migrations else []), *jobs]
    scenario = tables["runs"]["scenario"][0]
    page = html_page(
        f"colosched vms report: {scenario}",
        [
            f'<p class="note">{INTRO}</p>',
            "<h2>Run</h2>",
            meta_html(meta),
            "<h2>The paper's figures</h2>",
            _note(baseline),
            _table(head, baseline),
            "<h2>Figures</h2>",
            *[figure_html(f, PAPER) for f in figures],
        ],
    )
    return publish(Path(out_dir), page, figures, FIGURE_FILES)


def write_vms_sweep_report(
    out_dir: Path, sweep: pl.DataFrame, meta: dict | None, baseline: str = "random"
) -> Path:
    """Writes `out_dir/report.html` of `colosched sweep vms` and its figures, one section per
    scenario of `sweep` (`vms.per_run`'s rows of every scenario), each with the headline table
    (`vms.summarise`) and vms-1 and vms-4; returns the path of report.html. A sweep keeps no
    per-window tables, so there is no vms-2 or vms-3. Raises ValueError before writing anything
    when `sweep` lacks a column or a scenario holds no run of `baseline`."""
    missing = [c for c in [*vmsim.KEYS, "metric", "value"] if c not in sweep.columns]
    if missing:
        raise ValueError(f"sweep: missing column(s) {', '.join(missing)}")
    scenarios = sweep.partition_by("scenario", maintain_order=True)
    for rows in scenarios:
        if baseline not in rows["policy"]:
            raise ValueError(
                f"sweep: no run of the baseline policy {baseline!r} in scenario {rows['scenario'][0]!r}"
            )
    colours = colour_map(list(dict.fromkeys(sweep["policy"].to_list())), COLOURS, SPARE_COLOURS)
    sections = []
    for rows in scenarios:
        policies = list(dict.fromkeys(rows["policy"].to_list()))
        head = vmsim.summarise(rows, baseline)
        figures = _head_figures(head, policies, colours, baseline)
        sections.append((rows["scenario"][0], [_note(baseline), _table(head, baseline)], figures))
    intro = [
        f'<p class="note">{INTRO} One section per scenario of the sweep. A sweep keeps only the '
        "headline metrics of each run, not its per-window tables, so the SSD utilisation over time "
        "and the migrations and logical distance over time (Figures vms-2 and vms-3 of "
        "<code>colosched sim vms</code>'s report, which draws them for one scenario) are left out.</p>",
        "<h2>Sweep</h2>",
        meta_html(meta),
    ]
    return publish_sections(Path(out_dir), "colosched vms sweep report", intro, sections, FIGURE_FILES, PAPER)
