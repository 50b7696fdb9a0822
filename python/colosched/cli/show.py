"""What the commands print: the console (stderr) and its progress bars, the result tables, JSON
lines and the list of files written. Commands import it when they run (rich takes a while to load,
and `--help` needs none of it)."""

from __future__ import annotations

import json

from rich.console import Console
from rich.table import Table

console = Console(stderr=True)


def progress_bar(description: str, sweep: bool = False):
    """A rich progress bar on a terminal; nothing when output is redirected. Its tick takes
    (done, total), or with `sweep` the state `sweep.run` reports (points done, running, failed)."""
    if not console.is_terminal:
        return None, None
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    counts = (
        "{task.completed}/{task.total} done, {task.fields[running]} running, {task.fields[failed]} failed"
    )
    bar = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn(counts if sweep else "{task.percentage:>3.0f}%"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    )
    task = bar.add_task(description, total=None, running=0, failed=0)
    if sweep:
        return bar, lambda st: bar.update(
            task, completed=st["done"], total=st["total"], running=st["running"], failed=st["failed"]
        )
    return bar, lambda done, total: bar.update(task, completed=done, total=total)


def json_lines(table) -> None:
    """Each row of `table` (a polars DataFrame) as one JSON object on stdout."""
    for row in table.iter_rows(named=True):
        print(json.dumps(row), flush=True)


def wrote(paths) -> None:
    console.print(f"[dim]wrote {', '.join(str(p) for p in paths)}[/]")


CLUSTER_COLUMNS = [
    ("mean_cpu", "mean CPU", ".3f"),
    ("gini", "Gini", ".3f"),
    ("overcommit", "overcommit", ".4f"),
    ("duration", "duration s", ",.0f"),
    ("net_kbit_s_per_machine", "net kbit/s per machine", ",.2f"),
    ("moves", "moves", ",.0f"),
]


def show_cluster_table(result, wall: float) -> None:
    """Mean per policy (± the 95% CI half-width when there are several seeds)."""
    from colosched.report.cluster import summarize

    def cell(row: dict, col: str, fmt: str) -> str:
        ci = row.get(col + "_ci")
        return f"{row[col]:{fmt}} ±{ci:{fmt}}" if ci else f"{row[col]:{fmt}}"

    table = Table(title=f"colosched sim cluster — {result.summary.height} runs in {wall:.1f} s")
    table.add_column("policy")
    for _, head, _ in CLUSTER_COLUMNS:
        table.add_column(head, justify="right")
    for row in summarize(result.summary).iter_rows(named=True):
        table.add_row(row["policy"], *[cell(row, col, fmt) for col, _, fmt in CLUSTER_COLUMNS])
    Console(width=max(Console().width, 100)).print(table)


def show_host_table(vms, baseline: str, wall: float) -> None:
    """Per VM and scheduler, means over the seeds (`host.per_vm`), against `baseline`."""
    from colosched import host

    rows = list(host.per_vm(vms, baseline).iter_rows(named=True))
    network = any(r["throughput_mbit_s"] is not None for r in rows)
    table = Table(title=f"colosched sim host — {vms['seed'].n_unique()} seed(s), {wall:.2f} s")
    heads = ["scheduler", "vm", "vCPUs", "workload", "completed", "mean completion ms", f"vs {baseline}"]
    heads += ["Mbit/s", "ping p50 ms"] if network else []
    for head in heads:
        table.add_column(head, justify="left" if head in ("scheduler", "vm", "workload") else "right")

    def fmt(x, spec: str) -> str:
        return "—" if x is None else format(x, spec)

    for r in rows:
        table.add_row(
            r["scheduler"],
            r["vm"],
            str(r["vcpus"]),
            r["workload"],
            str(r["completions"]),
            fmt(r["mean_completion_ms"], ",.1f"),
            fmt(r["vs_baseline"], ".3f"),
            *([fmt(r["throughput_mbit_s"], ",.1f"), fmt(r["ping_p50_ms"], ",.1f")] if network else []),
        )
    Console(width=max(Console().width, 100)).print(table)


def show_vms_table(head, baseline: str, seeds: int, wall: float) -> None:
    """The paper's figures per policy (`vms.headline`): mean over seeds ± std, the ratio to
    `baseline` (per seed, then averaged), and what the paper reported beside them."""
    from colosched import vms

    table = Table(title=f"colosched sim vms — {head['scenario'][0]}, {seeds} seed(s), {wall:.2f} s")
    for h in ("metric", "policy", "mean ± std", f"vs {baseline}", "paper"):
        table.add_column(h, justify="right" if h in ("mean ± std", f"vs {baseline}") else "left")

    rows = list(head.iter_rows(named=True))
    for i, r in enumerate(rows):
        first = i == 0 or r["metric"] != rows[i - 1]["metric"]
        last = i + 1 == len(rows) or r["metric"] != rows[i + 1]["metric"]
        mean = vms.number(r["mean"]) + (f" ± {vms.number(r['std'], 2)}" if r["std"] is not None else "")
        table.add_row(
            vms.label(r["metric"]) if first else "",
            r["policy"],
            mean,
            "—" if r["vs_baseline"] is None else f"{r['vs_baseline']:.3f}",
            r["paper"] if first else "",
            end_section=last,
        )
    Console(width=max(Console().width, 110)).print(table)
