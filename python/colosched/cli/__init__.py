"""The `colosched` command.

    colosched sim cluster --trace DIR [--parts 0-9] --policy all --out out/
    colosched sim host --scenario spec001-sketch|FILE --scheduler all [--seeds K] --out out/host/
    colosched sweep cluster --trace DIR --machines 700,800,900 --overcommit-ratio 0.5,0.8,1.1,1.4
    colosched trace info|synth ...   colosched cache clear   colosched demo

Exit codes: 0 ok, 1 unexpected failure, 2 bad input (trace file, argument, parameter), 130 Ctrl-C,
141 the reader of the output went away (`colosched … --json | head`), quietly, as a process that
SIGPIPE ends.

One module per command group, each with its parser (`add_parsers`) and its commands (`cmd_*`):
sim, sweep, plan, trace (and cache), demo, and rust (agent, host, memwatch, migrate, whose parsers
are Rust's). `args` holds the options several commands share, `show` what they print. A command
loads polars, matplotlib and rich when it runs, so the parser, and `colosched --help`, stay cheap.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

from colosched import TraceInputError, __version__
from colosched.cli import demo, plan, rust, sim, sweep, trace

BAD_INPUT = 2


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="colosched", description=__doc__.split("\n\n")[0])
    top.add_argument("--version", action="version", version=f"colosched {__version__}")
    sub = top.add_subparsers(dest="command", required=True)
    for group in (sim, plan, sweep, trace, rust, demo):  # in the order --help lists them
        group.add_parsers(sub)
    return top


def main(argv: list[str] | None = None) -> int:
    try:
        return run(sys.argv[1:] if argv is None else argv)
    except BrokenPipeError:
        # Python ignores SIGPIPE and raises this instead, and would report it again when it
        # flushes stdout at exit: point stdout at /dev/null and end as SIGPIPE would have.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE


def run(argv: list[str]) -> int:
    if argv[:1] and argv[0] in rust.HELP:
        return rust.run(argv)
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except (TraceInputError, ValueError, FileNotFoundError) as e:
        # One plain line, never wrapped, so the file:line:column stays whole for scripts and grep.
        print(f"colosched: error: {e}", file=sys.stderr)
        return BAD_INPUT
    except KeyboardInterrupt:
        from colosched.cli.show import console

        console.print("[yellow]interrupted[/]")
        return 130
