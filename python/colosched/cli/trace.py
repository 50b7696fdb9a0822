"""`colosched trace info|synth` and `colosched cache clear`: the trace, and the cache of parsed
trace parts."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from colosched.cli.args import load_trace, positive_int


def add_parsers(sub) -> None:
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
    from colosched.cli.show import console

    removed = _native.clear_cache(None if args.cache_dir is None else str(args.cache_dir))
    console.print(f"removed {removed} cached part(s)")
    return 0
