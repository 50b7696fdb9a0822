"""`colosched plan vms`: the SSD-cache-aware placement plan for a cluster state (Rust plans it;
this prints it)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from colosched.cli.args import positive_int


def add_parsers(sub) -> None:
    pl = sub.add_parser("plan", help="planners").add_subparsers(dest="what", required=True)
    p = pl.add_parser("vms", help="SSD-cache-aware VM placement for a cluster state (docs/vm-placement.md)")
    p.add_argument("--state", type=Path, required=True, help="cluster state, .json or .toml")
    from colosched import _native  # 7 ms: the defaults are the planner's own

    host, cluster, gain = _native.plan_vms_defaults()
    p.add_argument(
        "--per-host", type=positive_int, default=host, help=f"migrations at once touching a host ({host})"
    )
    p.add_argument(
        "--per-cluster",
        type=positive_int,
        default=cluster,
        help=f"migrations at once in the cluster ({cluster})",
    )
    p.add_argument("--min-gain", type=float, default=gain, help=f"I/O a plan must add, in SSDs ({gain})")
    p.add_argument("--json", action="store_true", help="the whole plan as JSON")
    p.set_defaults(func=cmd_plan_vms)


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
