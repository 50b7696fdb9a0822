"""The `colosched` command.

    colosched sim cluster --trace DIR [--parts 0-9] --policy all --out out/
    colosched sim host --scenario spec001-sketch|FILE --scheduler all [--seeds K] --out out/host/
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

from colosched import TraceInputError, __version__, cluster, outputs, sweep

console = Console(stderr=True)
BAD_INPUT = 2


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def machines_arg(text: str) -> int | str:
    """A machine count, or `auto` / `auto:LOAD` (cluster.auto_machines sizes it to the trace)."""
    word, colon, load = text.partition(":")
    if word != "auto":
        return positive_int(text)
    try:
        ok = not colon or 0.05 <= float(load) <= 10
    except ValueError:
        ok = False
    if not ok:
        raise argparse.ArgumentTypeError(f"auto:LOAD takes LOAD from 0.05 to 10, got {text!r}")
    return text


def number_list(kind):
    def parse(text: str) -> list:
        try:
            return [kind(x) for x in text.split(",") if x.strip()]
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"expected a comma-separated list of numbers: {e}") from e

    return parse


def _defaults_help(key: str) -> str:
    """The default of `key` under each profile, for --help."""
    values = {name: cluster.defaults(name)[key] for name in cluster.PROFILES}
    return "default: " + ", ".join(f"{v} ({name})" for name, v in values.items())


MIGRATABLE_KEYS = ("migratable_priority_below", "migratable_cpu", "migratable_even_index")


def migratable(text: str) -> dict[str, Any]:
    """--migratable code|text: the rule of the thesis's simulator.py (the thesis profile's) or of
    its text (the full profile's)."""
    profile = {"code": "thesis", "text": "full"}.get(text)
    if profile is None:
        raise argparse.ArgumentTypeError(f"expected code or text, got {text}")
    return {k: cluster.defaults(profile)[k] for k in MIGRATABLE_KEYS}


# Simulator parameters on the command line: (flag, parameter, argparse options). Their defaults
# come from the profile (Rust owns them); a flag given overrides the profile's value.
SIM_PARAMS: list[tuple[str, str, dict[str, Any]]] = [
    ("--cell-size", "cell_size", {"type": positive_int}),
    ("--capacity", "capacity", {"type": float, "help": "machine capacity (cap)"}),
    ("--warning-threshold", "warning_threshold", {"type": float}),
    (
        "--admission",
        "admission",
        {
            "choices": ["request", "usage"],
            "help": "admission load: CPU request or current CPU usage, × ratio",
        },
    ),
    (
        "--queue",
        "queue",
        {
            "choices": ["backfill", "fifo"],
            "help": "backfill: every waiting task that fits starts when one leaves",
        },
    ),
    (
        "--runs",
        "runs",
        {
            "choices": ["thesis", "ended", "all"],
            "help": "replayed runs: the thesis's task set, every ended run, or all",
        },
    ),
    (
        "--usage-span-s",
        "usage_span_s",
        {"type": positive_int, "help": "thesis task set without task_usage: SCHEDULE within this span"},
    ),
    ("--until", "until", {"choices": ["last-submit", "trace-end", "drain"]}),
    (
        "--task-start",
        "task_start",
        {
            "choices": ["first-event", "last-submit"],
            "help": "thesis task set: placed at the task's first event (tasks dated before the "
            "window are not replayed) or at its last run's SUBMIT",
        },
    ),
    (
        "--duration-over",
        "duration_over",
        {"choices": ["completed", "started"], "help": "duration: mean over completed or all started tasks"},
    ),
    (
        "--usage-gaps",
        "usage_gaps",
        {
            "choices": ["zero", "fill"],
            "help": "a task with task_usage rows, in a window without one: uses nothing, or its "
            "nearest earlier row (else the usage model)",
        },
    ),
    ("--kbit-bits", "kbit_bits", {"type": int, "choices": [1024, 1000], "help": "bits per kbit"}),
    (
        "--receiver",
        "receiver",
        {
            "choices": ["live", "fixed"],
            "help": "coarse: each sender's receiver is the least loaded node at that moment, or "
            "the least loaded at the start of the cycle",
        },
    ),
    ("--step", "step_s", {"type": positive_int, "help": "seconds of trace time per step"}),
    (
        "--busy-interval",
        "busy_interval",
        {"type": positive_int, "help": "migration every N steps with submissions"},
    ),
    ("--idle-interval", "idle_interval", {"type": positive_int, "help": "migration every N steps without"}),
    ("--placement", "placement", {"choices": ["cells", "random", "trace"]}),
    (
        "--guards",
        "guards",
        {
            "choices": ["none", "agent"],
            "help": "agent: wrap the policy in the node agent's guards (hysteresis, no move onto a "
            "pressured node, minimum improvement, cool-down), the same code the agent runs",
        },
    ),
    (
        "--guard-hysteresis",
        "guard_hysteresis",
        {"type": positive_int, "help": "looks in a row over the line"},
    ),
    ("--guard-min-improvement", "guard_min_improvement", {"type": float, "help": "load a move must gain"}),
    ("--guard-cooldown-s", "guard_cooldown_s", {"type": int, "help": "seconds a moved task stays"}),
    (
        "--overload-penalty",
        "overload_penalty",
        {"help": "per overloaded step: 'excess' (min(1, excess/cap) of the step) or a fraction"},
    ),
    (
        "--penalty-max-priority",
        "penalty_max_priority",
        {"type": int, "help": "tasks up to this priority pay it"},
    ),
    (
        "--send-over-warning",
        "send_over_warning",
        {"action": argparse.BooleanOptionalAction, "help": "only nodes at the warning line send"},
    ),
    (
        "--cap-at-source-load",
        "cap_at_source_load",
        {"action": argparse.BooleanOptionalAction, "help": "receivers end at most at the sender's load"},
    ),
    ("--min-profit", "min_profit", {"type": float, "help": "is_useful_migrate: moved CPU ≥ this"}),
    ("--max-profit", "max_profit", {"type": float, "help": "is_useful_migrate: moved CPU ≤ this"}),
    (
        "--max-profit-share",
        "max_profit_share",
        {"type": float, "help": "is_useful_migrate: ≤ this × the sender's load"},
    ),
    ("--migratable-cpu-below", "migratable_cpu_below", {"type": float}),
    (
        "--migratable-even-index",
        "migratable_even_index",
        {"action": argparse.BooleanOptionalAction, "help": "only tasks with an even task index migrate"},
    ),
    ("--max-moves", "max_moves", {"type": positive_int, "help": "moves per cell per cycle at most"}),
    (
        "--keep-series",
        "keep_series",
        {"action": argparse.BooleanOptionalAction, "help": "keep the per-step series (report plots)"},
    ),
    (
        "--machine-mem-gib",
        "machine_mem_gib",
        {"type": float, "help": "GiB per unit of normalised memory (network cost)"},
    ),
    (
        "--bandwidth-mbit-s",
        "bandwidth_mbit_s",
        {"type": float, "help": "migrations take bytes/bandwidth on their source's link"},
    ),
]


def add_sweep_args(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--executor",
        default="local",
        help="local (processes on this machine, default), ray (a Ray started for the sweep) or "
        "ray:ADDRESS (an existing Ray cluster, e.g. ray:10.0.0.1:6379); docs/scale-out.md",
    )
    if what != "cluster":  # sweep cluster has its own --jobs and --out
        p.add_argument("--jobs", type=positive_int, default=None, help="local worker processes")
        p.add_argument("--out", type=Path, default=Path(f"out/sweep-{what}"))
    p.epilog = "Each point is kept under OUT/points/ as it ends: a rerun computes only the missing ones."


def add_scenario_args(
    p: argparse.ArgumentParser, presets, flag: str, known, seeds: int, repeatable: bool, baseline: str = ""
) -> None:
    """The options of `sim host|vms` and `sweep host|vms`: the scenario(s), the schedulers or
    policies (`flag`), the seeds, --json and --no-report."""
    p.add_argument(
        "--scenario",
        required=True,
        action="append" if repeatable else "store",
        help=f"a scenario TOML file, or a bundled one: {', '.join(presets)}"
        + ("; repeatable" if repeatable else ""),
    )
    p.add_argument(
        flag,
        action="append",
        help=f"name, comma list, or 'all' (default); repeatable. Known: {', '.join(known)}. {baseline}",
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--seeds", type=positive_int, default=seeds, help=f"run seeds seed..seed+K-1 ({seeds})")
    p.add_argument("--json", action="store_true", help="the table printed, as JSON lines on stdout")
    p.add_argument("--no-report", action="store_true", help="skip report.html and its figures")


def add_sim_args(p: argparse.ArgumentParser, sweep: bool = False) -> None:
    p.add_argument(
        "--trace",
        type=Path,
        default=None,
        help="trace root in the official layout (default: the bundled real sample)",
    )
    p.add_argument("--parts", help="task_events parts to load, e.g. 0-9 or 0,2,5-7 (default: all)")
    p.add_argument(
        "--profile",
        choices=cluster.PROFILES,
        default=cluster.PROFILES[0],
        help="named set of defaults: thesis (the thesis's model) or full (the full-trace study)",
    )
    p.add_argument(
        "--policy",
        action="append",
        help="policy name, comma list, or 'all' (the thesis's 8); repeatable. "
        f"Known: {', '.join(cluster.POLICIES)}, random:<cycles>",
    )
    if sweep:
        p.add_argument(
            "--machines",
            type=number_list(machines_arg),
            default=[700, 800, 900],
            help="machine counts, comma-separated; auto[:LOAD] = as many as the trace's peak requested "
            "CPU fills to LOAD (default 1.0) of their capacity",
        )
        p.add_argument("--overcommit-ratio", type=number_list(float), default=[0.5, 0.8, 1.1, 1.4])
        p.add_argument("--jobs", type=positive_int, default=None, help="local worker processes")
    else:
        p.add_argument(
            "--machines",
            type=machines_arg,
            help="a count, or auto[:LOAD]: as many machines (whole cells) as the trace's peak requested "
            "CPU fills to LOAD (default 1.0) of their capacity; " + _defaults_help("machines"),
        )
        p.add_argument("--overcommit-ratio", type=float, help=_defaults_help("overcommit_ratio"))
    for flag, key, options in SIM_PARAMS:
        help_text = options.get("help", "")
        p.add_argument(
            flag,
            dest=key,
            default=None,
            **{**options, "help": f"{help_text} ({_defaults_help(key)})".strip()},
        )
    p.add_argument("--migratable", type=migratable, default=None,
                   help="migratable rule: code (priority ≤ 2, even task index, request < 0.025, as "
                   "simulator.py; thesis) or text (priority < 2, max CPU < 0.025; full); the "
                   "flags of each part override it")  # fmt: skip
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
    """The simulator parameters given on the command line (the rest come from the profile)."""
    params = {key: getattr(args, key) for _, key, _ in SIM_PARAMS if getattr(args, key) is not None}
    return {**(args.migratable or {}), **params}


def progress_bar(description: str, sweep: bool = False):
    """A rich progress bar on a terminal; nothing when output is redirected. Its tick takes
    (done, total), or with `sweep` the state `sweep.run` reports (points done, running, failed)."""
    if not console.is_terminal:
        return None, None
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
    params = sim_params(args)
    for key in ("machines", "overcommit_ratio"):
        if getattr(args, key) is not None:
            params[key] = getattr(args, key)
    auto = params.get("machines") if isinstance(params.get("machines"), str) else None
    # A bad value fails before the trace is read.
    cluster.resolve(args.profile, **{k: v for k, v in params.items() if not (k == "machines" and auto)})
    root, trace = load_trace(args)
    policies = cluster.expand_policies(args.policy or ["all"])
    bar, tick = progress_bar(f"replaying {len(policies)} policies × {args.seeds} seeds")
    started = time.perf_counter()
    with bar or contextlib.nullcontext():
        result = cluster.run(
            trace,
            policies,
            profile=args.profile,
            seed=args.seed,
            seeds=args.seeds,
            usage_seed=args.usage_seed,
            threads=args.threads,
            progress=tick,
            **params,
        )
    wall = time.perf_counter() - started
    if auto:
        p = result.params
        console.print(
            f"machines {auto}: {p['machines']} (the replay's peak requested CPU is "
            f"{p['peak_cpu_request']:.1f} machines' worth, in cells of {p['cell_size']})",
            soft_wrap=True,
        )
    meta = run_meta(args, root, trace, wall, result.params)
    written = outputs.write_run(args.out, result, meta, report=not args.no_report)
    if args.json:
        for row in result.summary.iter_rows(named=True):
            print(json.dumps(row), flush=True)
    else:
        show_table(result, wall)
    console.print(f"[dim]wrote {', '.join(str(p) for p in written)}[/]")
    return 0


def run_sweep(args: argparse.Namespace, points: list[dict], what: str):
    """The points on `--executor`, resumable under `--out`; the combined table and the wall time."""
    bar, tick = progress_bar(f"sweep {what}: {len(points)} points on {args.executor}", sweep=True)
    counts: dict[str, int] = {}

    def progress(state: dict[str, int]) -> None:
        counts.update(state)
        if tick:
            tick(state)

    started = time.perf_counter()
    with bar or contextlib.nullcontext():
        table = sweep.run(points, args.out, executor=args.executor, jobs=args.jobs, progress=progress)
    wall = time.perf_counter() - started
    print(
        f"{counts['total']} points: {counts['computed']} computed on {args.executor}, "
        f"{counts['total'] - counts['computed']} already under {args.out / sweep.POINTS}, in {wall:.1f} s",
        file=sys.stderr,
    )
    return table, wall


def cmd_sweep_cluster(args: argparse.Namespace) -> int:
    params = sim_params(args)
    resolved = cluster.resolve(args.profile, **params)
    root, trace = load_trace(args)  # parsed once here: the points read the cache
    for i, m in enumerate(args.machines):
        if isinstance(m, str):
            n, peak = cluster.auto_machines(trace, m, args.profile, args.usage_seed, **params)
            console.print(
                f"machines {m}: {n} (peak requested CPU {peak:.1f} machines' worth)", soft_wrap=True
            )
            args.machines[i] = n
    seeds = [args.seed + i for i in range(args.seeds)]
    policies = args.policy or ["no_migration", "coarse", "fine:mem_usage"]
    cache = None if args.cache_dir is None else str(args.cache_dir)
    points = sweep.cluster_points(
        str(root), args.parts, policies, args.machines, args.overcommit_ratio, seeds,
        usage_seed=args.usage_seed, profile=args.profile, params=params, cache_dir=cache,
    )  # fmt: skip
    table, wall = run_sweep(args, points, "cluster")
    table = table.sort(sweep.GRID_KEYS["cluster"])
    resolved.update(machines=args.machines, overcommit_ratio=args.overcommit_ratio)
    resolved.pop("seed")
    resolved.update(seeds=seeds, usage_seed=args.usage_seed)
    meta = run_meta(args, root, trace, wall, resolved) | {"executor": args.executor}
    written = outputs.write_sweep(args.out, table, meta, report=not args.no_report)
    if args.json:
        for row in table.iter_rows(named=True):
            print(json.dumps(row), flush=True)
    console.print(f"[dim]wrote {', '.join(str(p) for p in written)}[/]")
    return 0


def cmd_sweep_vms(args: argparse.Namespace) -> int:
    import polars as pl

    from colosched import vms

    seeds = list(range(args.seed, args.seed + args.seeds))
    names = vms.expand_policies(args.policy or ["all"])
    baseline = "random" if "random" in names else names[0]
    table, wall = run_sweep(args, sweep.vms_points(args.scenario, names, seeds), "vms")
    head = pl.concat([vms.summarise(t, baseline) for _, t in table.group_by("scenario", maintain_order=True)])
    meta = {"command": "sweep vms", "version": __version__, "scenarios": args.scenario, "policies": names}
    meta |= {"baseline": baseline, "seeds": seeds, "executor": args.executor, "wall_s": wall}
    written = outputs.write_tables(args.out, meta, {"summary": head}, {"sweep": table})
    if not args.no_report:
        from colosched.report.vms import write_vms_sweep_report

        written.append(write_vms_sweep_report(args.out, table, meta, baseline))
    if args.json:
        for row in head.iter_rows(named=True):
            print(json.dumps(row), flush=True)
    else:
        for _, h in head.group_by("scenario", maintain_order=True):
            show_vms_table(h, baseline, len(seeds), wall)
    console.print(f"[dim]wrote {', '.join(str(p) for p in written)}[/]")
    return 0


def cmd_sweep_host(args: argparse.Namespace) -> int:
    import polars as pl

    from colosched import host

    seeds = list(range(args.seed, args.seed + args.seeds))
    names = host.expand_schedulers(args.scheduler or ["all"])
    table, wall = run_sweep(args, sweep.host_points(args.scenario, names, seeds), "host")
    head = pl.concat(
        [
            host.per_vm(t, names[0]).select(pl.lit(s).alias("scenario"), pl.all())
            for (s,), t in table.group_by("scenario", maintain_order=True)
        ]
    )
    meta = {"command": "sweep host", "version": __version__, "scenarios": args.scenario, "schedulers": names}
    meta |= {"seeds": seeds, "executor": args.executor, "wall_s": wall}
    written = outputs.write_tables(args.out, meta, {"summary": head}, {"sweep": table})
    if not args.no_report:
        from colosched.report.host import write_host_sweep_report

        written.append(write_host_sweep_report(args.out, table, meta, names[0]))
    if args.json:
        for row in head.iter_rows(named=True):
            print(json.dumps(row), flush=True)
    else:
        for (_,), t in table.group_by("scenario", maintain_order=True):
            show_host_table(t, names[0], wall)
    console.print(f"[dim]wrote {', '.join(str(p) for p in written)}[/]")
    return 0


def run_meta(args: argparse.Namespace, root: Path, trace, wall: float, params: dict) -> dict[str, Any]:
    """meta.json: the command, the trace, and every parameter the run used, resolved."""
    return {
        "colosched": __version__,
        "command": " ".join(["colosched", *sys.argv[1:]]),
        "trace": str(root),
        "parts": args.parts or "all",
        "params": params,
        "wall_s": round(wall, 2),
        "trace_stats": dict(trace.stats()),
    }


TABLE_COLUMNS = [
    ("mean_cpu", "mean CPU", ".3f"),
    ("gini", "Gini", ".3f"),
    ("overcommit", "overcommit", ".4f"),
    ("duration", "duration s", ",.0f"),
    ("net_kbit_s_per_machine", "net kbit/s per machine", ",.2f"),
    ("moves", "moves", ",.0f"),
]


def show_table(result: cluster.Result, wall: float) -> None:
    """Mean per policy (± the 95% CI half-width when there are several seeds)."""
    from colosched.report.cluster import summarize

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


def cmd_sim_host(args: argparse.Namespace) -> int:
    from colosched import host

    seeds = list(range(args.seed, args.seed + args.seeds))
    names = host.expand_schedulers(args.scheduler or ["all"])
    bar, tick = progress_bar(f"host: {len(names)} schedulers × {len(seeds)} seeds")
    started = time.perf_counter()
    with bar or contextlib.nullcontext():
        runs, vms = host.run(args.scenario, names, seeds, progress=tick)
    wall = time.perf_counter() - started
    vms = host.normalised(vms, baseline=names[0])
    pings = host.pings(vms)
    vms = vms.drop("ping_rtts_ms")
    meta = {
        "command": "sim host",
        "version": __version__,
        "scenario": args.scenario,
        "schedulers": names,
        "seeds": seeds,
        "wall_s": wall,
    }
    written = outputs.write_tables(args.out, meta, {"summary": runs}, {"vms": vms, "pings": pings})
    if not args.no_report:
        from colosched.report.host import write_host_report

        written.append(write_host_report(args.out, vms, meta, baseline=names[0], pings=pings))
    if args.json:
        for row in vms.iter_rows(named=True):
            print(json.dumps(row), flush=True)
    else:
        show_host_table(vms, names[0], wall)
    console.print(f"[dim]wrote {', '.join(str(p) for p in written)}[/]")
    return 0


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


def cmd_sim_vms(args: argparse.Namespace) -> int:
    from colosched import vms

    seeds = list(range(args.seed, args.seed + args.seeds))
    names = vms.expand_policies(args.policy or ["all"])
    baseline = "random" if "random" in names else names[0]
    bar, tick = progress_bar(f"vms: {len(names)} policies × {len(seeds)} seeds")
    started = time.perf_counter()
    with bar or contextlib.nullcontext():
        tables = vms.run(args.scenario, names, seeds, progress=tick)
    wall = time.perf_counter() - started
    head = vms.headline(tables, baseline)
    meta = {
        "command": "sim vms",
        "version": __version__,
        "scenario": args.scenario,
        "policies": names,
        "baseline": baseline,
        "seeds": seeds,
        "wall_s": wall,
    }
    parquet = {name: tables[name] for name in ("vms", "jobs", "apps", "migrations", "windows", "spread")}
    written = outputs.write_tables(args.out, meta, {"summary": head}, parquet)
    if not args.no_report:
        from colosched.report.vms import write_vms_report

        written.append(write_vms_report(args.out, tables, meta, baseline=baseline))
    if args.json:
        for row in head.iter_rows(named=True):
            print(json.dumps(row), flush=True)
    else:
        show_vms_table(head, baseline, len(seeds), wall)
    console.print(f"[dim]wrote {', '.join(str(p) for p in written)}[/]")
    return 0


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


DEMO = ["--machines", "auto:2", "--overcommit-ratio", "0.5"]


def cmd_demo(args: argparse.Namespace) -> int:
    """The main job on the bundled real sample: the 8 policies on a cluster where nodes cross the
    warning line (table + out/report.html), then what the thesis's scale gives, and why."""
    console.print(
        "[bold]The thesis's 8 policies on the bundled sample, on a cluster where nodes cross the warning "
        "line:[/] as many machines as half the sample's peak requested CPU (--machines auto:2), admission "
        "booking up to twice a machine (--overcommit-ratio 0.5).",
        soft_wrap=True,
    )
    rc = main(["sim", "cluster", "--policy", "all", *DEMO, "--out", str(args.out)])
    if rc:
        return rc
    thesis = cluster.run(cluster.bundled_sample(), ["no_migration", "coarse", "fine"], machines=800)
    s = thesis.summary
    moves = int(s["moves"].sum())
    same = all(s[c].n_unique() == 1 for c in ("mean_cpu", "gini", "overcommit", "duration"))
    if moves == 0 and same:
        verdict = (
            "no node reaches the warning line, so no policy moves a task and every row equals "
            f"no_migration's (mean CPU {s['mean_cpu'][0]:.3f}, Gini {s['gini'][0]:.3f}), as in the thesis's "
            "own simulator on the same input (docs/cluster-sim.md)"
        )
    else:
        verdict = f"the policies move {moves} tasks; the rows differ"
    console.print(f"At the thesis's scale (800 machines, admission at capacity): {verdict}.", soft_wrap=True)
    return 0


def cmd_plan_vms(args: argparse.Namespace) -> int:
    from colosched import _native

    plan = json.loads(_native.plan_vms(str(args.state), args.per_host, args.per_cluster, args.min_gain))
    if args.json:
        print(json.dumps(plan, indent=2))
        return 0
    print(
        f"{plan['moves_total']} move(s) in {len(plan['moves'])} wave(s)"
        + (f": {plan['reason']}" if plan["reason"] else "")
    )
    for i, wave in enumerate(plan["moves"], 1):
        print(f"  wave {i}: " + ", ".join(f"{m['vm']} {m['from']} -> {m['to']}" for m in wave))
    for host, (before, after) in plan["ssd_utilisation"].items():
        print(f"  SSD {host}: {before:.2f} -> {after:.2f}")
    for app, (before, after) in plan["logical_distance"].items():
        print(f"  {app}: logical distance {before} -> {after}")
    for v in plan["violations"]:
        print(f"  still broken: {v}")
    for t in plan["transient_violations"]:
        mb, room = t["mb"], t["capacity"]
        print(f"  during wave {t['wave'] + 1}: {t['host']} holds {mb:.0f} MB of cache slices on {room:.0f}")
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="colosched", description=__doc__.split("\n\n")[0])
    top.add_argument("--version", action="version", version=f"colosched {__version__}")
    sub = top.add_subparsers(dest="command", required=True)

    sim = sub.add_parser("sim", help="simulators").add_subparsers(dest="what", required=True)
    p = sim.add_parser("cluster", help="replay a Google 2011 trace under rebalancing policies")
    add_sim_args(p)
    p.set_defaults(func=cmd_sim_cluster)

    from colosched import host

    p = sim.add_parser("host", help="vCPU schedulers of one hypervisor host (docs/host-sim.md)")
    add_scenario_args(p, host.PRESETS, "--scheduler", host.SCHEDULERS, seeds=5, repeatable=False,
                      baseline="The first is the baseline the table compares with")  # fmt: skip
    p.add_argument("--out", type=Path, default=Path("out/host"))
    p.set_defaults(func=cmd_sim_host)

    from colosched import vms

    p = sim.add_parser("vms", help="VM placement over SSD-cached hypervisors, spec 003 (docs/vm-sim.md)")
    add_scenario_args(p, vms.PRESETS, "--policy", vms.POLICIES, seeds=5, repeatable=False,
                      baseline="Ratios are against random (else the first named)")  # fmt: skip
    p.add_argument("--out", type=Path, default=Path("out/vms"))
    p.set_defaults(func=cmd_sim_vms)

    pl = sub.add_parser("plan", help="planners").add_subparsers(dest="what", required=True)
    p = pl.add_parser("vms", help="SSD-cache-aware VM placement for a cluster state (docs/vm-placement.md)")
    p.add_argument("--state", type=Path, required=True, help="cluster state, .json or .toml")
    p.add_argument("--per-host", type=positive_int, default=1, help="migrations at once touching a host (1)")
    p.add_argument(
        "--per-cluster", type=positive_int, default=4, help="migrations at once in the cluster (4)"
    )
    p.add_argument("--min-gain", type=float, default=0.05, help="I/O a plan must add, in SSDs (0.05)")
    p.add_argument("--json", action="store_true", help="the whole plan as JSON")
    p.set_defaults(func=cmd_plan_vms)

    sw = sub.add_parser("sweep", help="parameter sweeps").add_subparsers(dest="what", required=True)
    p = sw.add_parser("cluster", help="grid over machines × overcommit ratio (thesis Figs. 5-7, 5-8)")
    add_sim_args(p, sweep=True)
    add_sweep_args(p, "cluster")
    p.set_defaults(func=cmd_sweep_cluster)
    for what, flag, presets, known, func in [
        ("host", "--scheduler", host.PRESETS, host.SCHEDULERS, cmd_sweep_host),
        ("vms", "--policy", vms.PRESETS, vms.POLICIES, cmd_sweep_vms),
    ]:
        p = sw.add_parser(what, help=f"{what} scenarios × {flag[2:]}s × seeds (docs/{what}-sim.md)")
        add_scenario_args(p, presets, flag, known, seeds=5, repeatable=True)
        add_sweep_args(p, what)
        p.set_defaults(func=func)

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
    sub.add_parser("host", help="host agent: vCPU pools and slices for QEMU/KVM VMs (docs/host-agent.md)")
    sub.add_parser("memwatch", help="memory-threshold notification for a cgroup (docs/memwatch.md)")
    sub.add_parser(
        "migrate", help="live-migrate the VMs of a plan over QMP or through libvirt (docs/vm-placement.md)"
    )
    p = sub.add_parser(
        "demo", help="the 8 policies on the bundled real sample where they act, then at the thesis's scale"
    )
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
    if argv[:1] == ["host"]:
        from colosched import _native

        # `colosched-agent host …`: the host agent lives in the agent's binary and parser.
        return _native.agent_main(argv)
    if argv[:1] == ["memwatch"]:
        from colosched import _native

        # Same command line as `colosched-agent memwatch`; it unregisters on SIGTERM/SIGINT itself.
        return _native.memwatch_main(argv[1:])
    if argv[:1] == ["migrate"]:
        from colosched import _native

        # The executor (Rust) parses its own flags and cancels running migrations on SIGTERM/SIGINT.
        return _native.migrate_main(argv[1:])
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except (TraceInputError, ValueError, FileNotFoundError) as e:
        # One plain line, never wrapped, so the file:line:column stays whole for scripts and grep.
        print(f"colosched: error: {e}", file=sys.stderr)
        return BAD_INPUT
    except sweep.PointsFailed as e:  # the other points are kept; a rerun computes only these
        print(f"colosched: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/]")
        return 130


if __name__ == "__main__":
    sys.exit(main())
