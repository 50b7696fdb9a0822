"""`colosched sweep cluster|host|vms`: a grid of simulator runs on local processes or Ray
(colosched.sweep), resumable under --out, then the combined table and report."""

from __future__ import annotations

import argparse
import contextlib
import sys
import time

from colosched import __version__
from colosched.cli.args import (
    add_scenario_args,
    add_sim_args,
    add_sweep_args,
    load_trace,
    run_meta,
    sim_params,
)


def add_parsers(sub) -> None:
    sw = sub.add_parser("sweep", help="parameter sweeps").add_subparsers(dest="what", required=True)
    p = sw.add_parser("cluster", help="grid over machines × overcommit ratio (thesis Figs. 5-7, 5-8)")
    add_sim_args(p, sweep=True)
    add_sweep_args(p, "cluster")
    p.set_defaults(func=cmd_sweep_cluster)
    for what, flag, func in [("host", "--scheduler", cmd_sweep_host), ("vms", "--policy", cmd_sweep_vms)]:
        p = sw.add_parser(what, help=f"{what} scenarios × {flag[2:]}s × seeds (docs/{what}-sim.md)")
        add_scenario_args(p, what, seeds=5, repeatable=True)
        add_sweep_args(p, what)
        p.set_defaults(func=func)


def run_sweep(args: argparse.Namespace, points: list[dict], what: str, memory: int | None = None):
    """The points on `--executor`, resumable under `--out`; the combined table and the wall time.
    `memory`: bytes a point needs at its peak (`sweep.run`)."""
    from colosched import sweep
    from colosched.cli.show import progress_bar

    bar, tick = progress_bar(f"sweep {what}: {len(points)} points on {args.executor}", sweep=True)
    counts: dict[str, int] = {}

    def progress(state: dict[str, int]) -> None:
        counts.update(state)
        if tick:
            tick(state)

    started = time.perf_counter()
    with bar or contextlib.nullcontext():
        table = sweep.run(
            points, args.out, executor=args.executor, jobs=args.jobs, progress=progress, memory=memory
        )
    wall = time.perf_counter() - started
    print(
        f"{counts['total']} points: {counts['computed']} computed on {args.executor}, "
        f"{counts['total'] - counts['computed']} already under {args.out / sweep.POINTS}, in {wall:.1f} s",
        file=sys.stderr,
    )
    return table, wall


def exit_1_on_failed_points(cmd):
    """`cmd`, returning 1 when points failed (sweep.PointsFailed, which names them): the other
    points are kept, and a rerun computes only these."""

    def run(args: argparse.Namespace) -> int:
        from colosched import sweep

        try:
            return cmd(args)
        except sweep.PointsFailed as e:
            print(f"colosched: {e}", file=sys.stderr)
            return 1

    return run


@exit_1_on_failed_points
def cmd_sweep_cluster(args: argparse.Namespace) -> int:
    from colosched import cluster, outputs, sweep
    from colosched.cli.show import console, json_lines, wrote

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
    table, wall = run_sweep(args, points, "cluster", sweep.cluster_point_memory(trace.stats()["runs"]))
    table = table.sort(sweep.GRID_KEYS["cluster"])
    resolved.update(machines=args.machines, overcommit_ratio=args.overcommit_ratio)
    resolved.pop("seed")
    resolved.update(seeds=seeds, usage_seed=args.usage_seed)
    meta = run_meta(args, root, trace, wall, resolved) | {"executor": args.executor}
    written = outputs.write_sweep(args.out, table, meta, report=not args.no_report)
    if args.json:
        json_lines(table)
    wrote(written)
    return 0


@exit_1_on_failed_points
def cmd_sweep_vms(args: argparse.Namespace) -> int:
    import polars as pl

    from colosched import outputs, sweep, vms
    from colosched.cli.show import json_lines, show_vms_table, wrote

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
        json_lines(head)
    else:
        for _, h in head.group_by("scenario", maintain_order=True):
            show_vms_table(h, baseline, len(seeds), wall)
    wrote(written)
    return 0


@exit_1_on_failed_points
def cmd_sweep_host(args: argparse.Namespace) -> int:
    import polars as pl

    from colosched import host, outputs, sweep
    from colosched.cli.show import json_lines, show_host_table, wrote

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
        json_lines(head)
    else:
        for (_,), t in table.group_by("scenario", maintain_order=True):
            show_host_table(t, names[0], wall)
    wrote(written)
    return 0
