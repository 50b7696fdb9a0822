"""The `colosched` command.

    colosched sim cluster --trace DIR [--parts 0-9] --policy all --out out/
    colosched sweep cluster --trace DIR --machines 700,800,900 --overcommit-ratio 0.5,0.8,1.1,1.4
    colosched trace info|synth ...   colosched cache clear   colosched demo

Exit codes: 0 ok, 1 unexpected failure, 2 bad input (trace file, argument, parameter), 130 Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from colosched import TraceInputError, __version__, cluster, outputs

console = Console(stderr=True)
BAD_INPUT = 2


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def number_list(kind):
    def parse(text: str) -> list:
        try:
            return [kind(x) for x in text.split(",") if x.strip()]
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"expected a comma-separated list of numbers: {e}") from e

    return parse


def add_sim_args(p: argparse.ArgumentParser, sweep: bool = False) -> None:
    d = cluster.DEFAULTS
    p.add_argument(
        "--trace",
        type=Path,
        default=None,
        help="trace root in the official layout (default: the bundled real sample)",
    )
    p.add_argument("--parts", help="task_events parts to load, e.g. 0-9 or 0,2,5-7 (default: all)")
    p.add_argument(
        "--policy",
        action="append",
        help="policy name, comma list, or 'all' (the thesis's 8); repeatable. "
        f"Known: {', '.join(cluster.POLICIES)}, random:<cycles>",
    )
    if sweep:
        p.add_argument("--machines", type=number_list(int), default=[700, 800, 900])
        p.add_argument("--overcommit-ratio", type=number_list(float), default=[0.5, 0.8, 1.1, 1.4])
        p.add_argument("--jobs", type=positive_int, default=None, help="local worker processes")
    else:
        p.add_argument("--machines", type=positive_int, default=d["machines"])
        p.add_argument("--overcommit-ratio", type=float, default=d["overcommit_ratio"])
    p.add_argument("--cell-size", type=positive_int, default=d["cell_size"])
    p.add_argument("--capacity", type=float, default=d["capacity"], help="machine capacity (cap)")
    p.add_argument("--warning-threshold", type=float, default=d["warning_threshold"])
    p.add_argument(
        "--admission",
        choices=["request", "usage"],
        default=d["admission"],
        help="admission load: CPU request or current CPU usage, × overcommit ratio",
    )
    p.add_argument(
        "--runs",
        choices=["ended", "all"],
        default=d["runs"],
        help="replay only runs that end inside the loaded parts, or also never-ending ones",
    )
    p.add_argument(
        "--step", type=positive_int, default=d["step_s"], dest="step_s", help="seconds of trace time per step"
    )
    p.add_argument("--placement", choices=["random", "trace"], default=d["placement"])
    p.add_argument(
        "--overload-penalty",
        type=float,
        default=d["overload_penalty"],
        help="fraction of a step of service lost per overloaded step",
    )
    p.add_argument(
        "--machine-mem-gib",
        type=float,
        default=d["machine_mem_gib"],
        help="memory of the largest machine (turns normalised memory into bytes)",
    )
    p.add_argument(
        "--bandwidth-mbit-s",
        type=float,
        default=None,
        help="migrations take bytes/bandwidth seconds on their source's link",
    )
    p.add_argument("--min-profit", type=float, default=d["min_profit"])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--seeds", type=positive_int, default=1, help="run seeds seed..seed+K-1")
    p.add_argument("--usage-seed", type=int, default=0, help="seed of the usage model")
    p.add_argument("--out", type=Path, default=Path("out"))
    p.add_argument("--json", action="store_true", help="print one JSON object per policy line")
    p.add_argument("--no-cache", action="store_true", help="parse the trace even if cached")
    p.add_argument("--cache-dir", type=Path, default=None)
    p.add_argument("--threads", type=int, default=0, help="worker threads (0 = one per core)")
    p.add_argument("--no-report", action="store_true", help="skip report.html and the PNGs")


def sim_params(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "cell_size": args.cell_size,
        "capacity": args.capacity,
        "warning_threshold": args.warning_threshold,
        "admission": args.admission,
        "runs": args.runs,
        "step_s": args.step_s,
        "placement": args.placement,
        "overload_penalty": args.overload_penalty,
        "machine_mem_gib": args.machine_mem_gib,
        "bandwidth_mbit_s": args.bandwidth_mbit_s,
        "min_profit": args.min_profit,
    }


def progress_bar(description: str):
    """A rich progress bar on a terminal; nothing when output is redirected."""
    if not console.is_terminal:
        return None, None
    bar = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    )
    task = bar.add_task(description, total=None)
    return bar, lambda done, total: bar.update(task, completed=done, total=total)


def load_trace(args: argparse.Namespace):
    root = args.trace or cluster.bundled_sample()
    started = time.perf_counter()
    trace = cluster.load(root, args.parts, not args.no_cache, args.cache_dir)
    stats = dict(trace.stats())
    console.print(
        f"[dim]trace {root}: {stats['parts']} parts, {stats['rows']:,} rows, {stats['runs']:,} runs "
        f"({stats['parts_from_cache']} parts from cache) in {time.perf_counter() - started:.2f} s[/]"
    )
    return root, trace


def cmd_sim_cluster(args: argparse.Namespace) -> int:
    root, trace = load_trace(args)
    policies = cluster.expand_policies(args.policy or ["all"])
    bar, tick = progress_bar(f"replaying {len(policies)} policies × {args.seeds} seeds")
    started = time.perf_counter()
    with bar or contextlib.nullcontext():
        result = cluster.run(
            trace,
            policies,
            seed=args.seed,
            seeds=args.seeds,
            usage_seed=args.usage_seed,
            threads=args.threads,
            progress=tick,
            machines=args.machines,
            overcommit_ratio=args.overcommit_ratio,
            **sim_params(args),
        )
    wall = time.perf_counter() - started
    meta = run_meta(args, root, trace, wall)
    written = outputs.write_run(args.out, result, meta, report=not args.no_report)
    if args.json:
        for row in result.summary.iter_rows(named=True):
            print(json.dumps(row), flush=True)
    else:
        show_table(result, wall)
    console.print(f"[dim]wrote {', '.join(str(p) for p in written)}[/]")
    return 0


def cmd_sweep_cluster(args: argparse.Namespace) -> int:
    from colosched import sweep

    root, trace = load_trace(args)
    policies = cluster.expand_policies(args.policy or ["no_migration", "coarse", "fine:mem_usage"])
    bar, tick = progress_bar(f"sweep: {len(args.machines)}×{len(args.overcommit_ratio)} points")
    started = time.perf_counter()
    with bar or contextlib.nullcontext():
        table = sweep.run_grid(
            root,
            args.parts,
            policies,
            args.machines,
            args.overcommit_ratio,
            seeds=[args.seed + i for i in range(args.seeds)],
            usage_seed=args.usage_seed,
            params=sim_params(args),
            jobs=args.jobs,
            cache_dir=args.cache_dir,
            progress=tick,
        )
    meta = run_meta(args, root, trace, time.perf_counter() - started)
    written = outputs.write_sweep(args.out, table, meta, report=not args.no_report)
    if args.json:
        for row in table.iter_rows(named=True):
            print(json.dumps(row), flush=True)
    console.print(f"[dim]wrote {', '.join(str(p) for p in written)}[/]")
    return 0


def run_meta(args: argparse.Namespace, root: Path, trace, wall: float) -> dict[str, Any]:
    return {
        "colosched": __version__,
        "command": " ".join(["colosched", *sys.argv[1:]]),
        "trace": str(root),
        "parts": args.parts or "all",
        "machines": args.machines,
        "cell_size": args.cell_size,
        "overcommit_ratio": args.overcommit_ratio,
        "admission": args.admission,
        "runs": args.runs,
        "step_s": args.step_s,
        "placement": args.placement,
        "seeds": args.seeds,
        "wall_s": round(wall, 2),
        "trace_stats": dict(trace.stats()),
    }


TABLE_COLUMNS = [
    ("mean_cpu", "mean CPU", ".3f"),
    ("gini", "Gini", ".3f"),
    ("overcommit", "overcommit", ".4f"),
    ("duration", "duration s", ",.0f"),
    ("net_mbit_s", "net Mbit/s", ",.1f"),
    ("moves", "moves", ",.0f"),
]


def show_table(result: cluster.Result, wall: float) -> None:
    """Mean per policy (± the 95% CI half-width when there are several seeds)."""
    from colosched.report import summarize

    def cell(row: dict, col: str, fmt: str) -> str:
        ci = row.get(col + "_ci")
        return f"{row[col]:{fmt}} ±{ci:{fmt}}" if ci else f"{row[col]:{fmt}}"

    table = Table(title=f"colosched sim cluster — {result.summary.height} runs in {wall:.1f} s")
    table.add_column("policy")
    for _, head, _ in TABLE_COLUMNS:
        table.add_column(head, justify="right")
    for row in summarize(result.summary).iter_rows(named=True):
        table.add_row(row["policy"], *[cell(row, col, fmt) for col, _, fmt in TABLE_COLUMNS])
    Console(width=max(Console().width, 100)).print(table)


def cmd_trace_info(args: argparse.Namespace) -> int:
    _, trace = load_trace(args)
    print(json.dumps(dict(trace.stats()), indent=2))
    return 0


def cmd_trace_synth(args: argparse.Namespace) -> int:
    from colosched import synth

    synth.write(args.out, machines=args.machines, days=args.days, seed=args.seed, parts=args.parts_out)
    return 0


def cmd_cache_clear(args: argparse.Namespace) -> int:
    from colosched import _native

    removed = _native.clear_cache(None if args.cache_dir is None else str(args.cache_dir))
    console.print(f"removed {removed} cached part(s)")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """The main job: all 8 policies on the bundled real sample, table + out/report.html."""
    argv = ["sim", "cluster", "--policy", "all", "--out", str(args.out)]
    return main(argv)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="colosched", description=__doc__.split("\n\n")[0])
    top.add_argument("--version", action="version", version=f"colosched {__version__}")
    sub = top.add_subparsers(dest="command", required=True)

    sim = sub.add_parser("sim", help="simulators").add_subparsers(dest="what", required=True)
    p = sim.add_parser("cluster", help="replay a Google 2011 trace under rebalancing policies")
    add_sim_args(p)
    p.set_defaults(func=cmd_sim_cluster)

    sw = sub.add_parser("sweep", help="parameter sweeps").add_subparsers(dest="what", required=True)
    p = sw.add_parser("cluster", help="grid over machines × overcommit ratio (thesis Figs. 5-7, 5-8)")
    add_sim_args(p, sweep=True)
    p.set_defaults(func=cmd_sweep_cluster)

    tr = sub.add_parser("trace", help="trace tools").add_subparsers(dest="what", required=True)
    p = tr.add_parser("info", help="ingest a trace and print what was read")
    p.add_argument("--trace", type=Path, default=None)
    p.add_argument("--parts")
    p.add_argument("--no-cache", action="store_true")
    p.add_argument("--cache-dir", type=Path, default=None)
    p.set_defaults(func=cmd_trace_info)
    p = tr.add_parser("synth", help="write a synthetic trace calibrated on the real parts")
    p.add_argument("--machines", type=positive_int, default=12500)
    p.add_argument("--days", type=float, default=29.0)
    p.add_argument(
        "--parts",
        dest="parts_out",
        type=positive_int,
        default=None,
        help="number of task_events parts to write (default: 500 per 29 days)",
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(func=cmd_trace_synth)

    ca = sub.add_parser("cache", help="the parsed-trace cache").add_subparsers(dest="what", required=True)
    p = ca.add_parser("clear", help="delete every cached part")
    p.add_argument("--cache-dir", type=Path, default=None)
    p.set_defaults(func=cmd_cache_clear)

    # Listed for --help only: `main` hands `colosched agent …` to the agent's own parser.
    sub.add_parser("agent", help="node agent: move best-effort tasks between NUMA nodes (docs/agent.md)")
    sub.add_parser("memwatch", help="memory-threshold notification for a cgroup (docs/memwatch.md)")
    p = sub.add_parser("demo", help="all 8 policies on the bundled real sample")
    p.add_argument("--out", type=Path, default=Path("out"))
    p.set_defaults(func=cmd_demo)
    return top


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["agent"]:
        from colosched import _native

        # The agent (Rust) parses its own flags and waits for SIGTERM/SIGINT itself, so it can
        # restore what it changed before exiting; same command line as the static binary.
        return _native.agent_main(argv[1:])
    if argv[:1] == ["memwatch"]:
        from colosched import _native

        # Same command line as `colosched-agent memwatch`; it unregisters on SIGTERM/SIGINT itself.
        return _native.memwatch_main(argv[1:])
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except (TraceInputError, ValueError, FileNotFoundError) as e:
        # One plain line, never wrapped, so the file:line:column stays whole for scripts and grep.
        print(f"colosched: error: {e}", file=sys.stderr)
        return BAD_INPUT
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/]")
        return 130


if __name__ == "__main__":
    sys.exit(main())
