"""The options several commands share (`sim cluster` and `sweep cluster`; `sim host|vms` and
`sweep host|vms`; the sweeps' executor), and what they become: simulator parameters, the trace,
meta.json.

The names and defaults the parsers list come from Rust (`_native`, `cluster.defaults`), never
from colosched.host or colosched.vms, which load polars: building the parser stays cheap.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from colosched import __version__, _native, cluster


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


# What a kind of parameter (Rust's `params::Kind`) becomes as an argparse option.
_KIND_OPTIONS: dict[str, dict[str, Any]] = {
    "int": {"type": int},
    "positive_int": {"type": positive_int},
    "float": {"type": float},
    "bool": {"action": argparse.BooleanOptionalAction},
    "choice": {},
    "int_choice": {"type": int},
    "text": {},
}


def _sim_params() -> list[tuple[str, str, dict[str, Any]]]:
    """Simulator parameters on the command line: (flag, parameter, argparse options), asked of
    Rust, which owns their names, kinds and defaults (the profile's); a flag given overrides the
    profile's value."""
    params = []
    for key, flag, kind, choices, help_text in _native.sim_flags():
        options = {**_KIND_OPTIONS[kind], **({"choices": choices} if choices else {})}
        params.append((flag, key, {**options, **({"help": help_text} if help_text else {})}))
    return params


SIM_PARAMS = _sim_params()


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


# What `sim host|vms` and `sweep host|vms` choose among: (flag, presets, names), asked of Rust.
SCENARIO_KINDS = {
    "host": ("--scheduler", _native.host_presets, _native.host_schedulers),
    "vms": ("--policy", _native.vms_presets, _native.vms_policies),
}


def add_scenario_args(
    p: argparse.ArgumentParser, kind: str, seeds: int, repeatable: bool, baseline: str = ""
) -> None:
    """The options of `sim host|vms` and `sweep host|vms` (`kind`: host or vms): the scenario(s),
    the schedulers or policies, the seeds, --json and --no-report."""
    flag, presets, known = SCENARIO_KINDS[kind]
    presets, known = presets(), known()
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
    p.add_argument(
        "--threads",
        type=int,
        default=0,
        help="worker threads (0 = one per core); a replay alone also splits its new usage windows over them",
    )
    p.add_argument("--no-report", action="store_true", help="skip report.html and the PNGs")


def sim_params(args: argparse.Namespace) -> dict[str, Any]:
    """The simulator parameters given on the command line (the rest come from the profile)."""
    params = {key: getattr(args, key) for _, key, _ in SIM_PARAMS if getattr(args, key) is not None}
    return {**(args.migratable or {}), **params}


def load_trace(args: argparse.Namespace):
    from colosched.cli import show

    root = args.trace or cluster.bundled_sample()
    started = time.perf_counter()
    trace = cluster.load(root, args.parts, not args.no_cache, args.cache_dir)
    stats = dict(trace.stats())
    show.console.print(
        f"[dim]trace {root}: {stats['parts']} parts, {stats['rows']:,} rows, {stats['runs']:,} runs "
        f"({stats['parts_from_cache']} parts from cache) in {time.perf_counter() - started:.2f} s[/]"
    )
    return root, trace


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
