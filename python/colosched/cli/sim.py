"""`colosched sim cluster|host|vms`: one run of a simulator, its tables and report under --out.

Each command loads the engine's tables (polars), the report (matplotlib) and the printing (rich)
when it runs, not when the parser is built."""

from __future__ import annotations

import argparse
import contextlib
import time
from pathlib import Path

from colosched import __version__
from colosched.cli.args import add_scenario_args, add_sim_args, load_trace, run_meta, sim_params


def add_parsers(sub) -> None:
    sim = sub.add_parser("sim", help="simulators").add_subparsers(dest="what", required=True)
    p = sim.add_parser("cluster", help="replay a Google 2011 trace under rebalancing policies")
    add_sim_args(p)
    p.set_defaults(func=cmd_sim_cluster)

    p = sim.add_parser("host", help="vCPU schedulers of one hypervisor host (docs/host-sim.md)")
    add_scenario_args(p, "host", seeds=5, repeatable=False,
                      baseline="The first is the baseline the table compares with")  # fmt: skip
    p.add_argument("--out", type=Path, default=Path("out/host"))
    p.set_defaults(func=cmd_sim_host)

    p = sim.add_parser("vms", help="VM placement over SSD-cached hypervisors, spec 003 (docs/vm-sim.md)")
    add_scenario_args(p, "vms", seeds=5, repeatable=False,
                      baseline="Ratios are against random (else the first named)")  # fmt: skip
    p.add_argument("--out", type=Path, default=Path("out/vms"))
    p.set_defaults(func=cmd_sim_vms)


def cmd_sim_cluster(args: argparse.Namespace) -> int:
    from colosched import cluster, outputs
    from colosched.cli.show import console, json_lines, progress_bar, show_cluster_table, wrote

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
        json_lines(result.summary)
    else:
        show_cluster_table(result, wall)
    wrote(written)
    return 0


def cmd_sim_host(args: argparse.Namespace) -> int:
    from colosched import host  # not polars yet: `host.run` loads it while it simulates
    from colosched.cli.show import json_lines, progress_bar, show_host_table, wrote

    seeds = list(range(args.seed, args.seed + args.seeds))
    names = host.expand_schedulers(args.scheduler or ["all"])
    bar, tick = progress_bar(f"host: {len(names)} schedulers × {len(seeds)} seeds")
    started = time.perf_counter()
    with bar or contextlib.nullcontext():
        runs, vms = host.run(args.scenario, names, seeds, progress=tick)
    wall = time.perf_counter() - started
    from colosched import outputs

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
        json_lines(vms)
    else:
        show_host_table(vms, names[0], wall)
    wrote(written)
    return 0


def cmd_sim_vms(args: argparse.Namespace) -> int:
    from colosched import outputs, vms
    from colosched.cli.show import json_lines, progress_bar, show_vms_table, wrote

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
        json_lines(head)
    else:
        show_vms_table(head, baseline, len(seeds), wall)
    wrote(written)
    return 0
