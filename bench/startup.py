"""Start-up of the `colosched` command (issue 28): three short commands timed as whole processes.

    .venv/bin/python bench/startup.py [--runs N] [--before DIR]

`--help`, `sim host` on a preset without the report, and `plan vms` on the example state, each run
N times (default 7) after one warm-up, as `python -m colosched.cli` with this checkout's python/
first on PYTHONPATH. With `--before DIR` (the python/ directory of another checkout, e.g. a
`git worktree` of an older commit) the same commands from DIR run in turn with these, A B A B, so
both see the same machine. Prints a Markdown table: the median (min–max) wall and CPU seconds of
the process, and for `sim host` the seconds each spent simulating (meta.json's wall_s) - the rest
is start-up, imports and writing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchutil import table

REPO = Path(__file__).resolve().parent.parent
COMMANDS = {
    "colosched --help": ["--help"],
    "colosched sim host --scenario spec002-queue2 --no-report": [
        "sim", "host", "--scenario", "spec002-queue2", "--no-report", "--out", "{out}",
    ],
    "colosched plan vms --state examples/cluster-state.toml": [
        "plan", "vms", "--state", str(REPO / "examples" / "cluster-state.toml"),
    ],
}  # fmt: skip


def run_once(python_dir: Path, args: list[str], out: Path) -> tuple[float, float, float | None]:
    """(wall s, CPU s, simulated s or None) of one `python -m colosched.cli ARGS` process."""
    env = {**os.environ, "PYTHONPATH": str(python_dir)}
    argv = [sys.executable, "-m", "colosched.cli", *[a.replace("{out}", str(out)) for a in args]]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    meta = out / "meta.json"
    simulated = json.loads(meta.read_text())["wall_s"] if meta.exists() else None
    return wall, cpu, simulated


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}–{max(values):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--before", type=Path, help="python/ directory of the checkout to compare with")
    opts = parser.parse_args()
    trees = {"": REPO / "python"} | ({"before ": opts.before.resolve()} if opts.before else {})
    print(
        f"<!-- {platform.node()} {os.cpu_count()} cores, python {platform.python_version()}, "
        f"{time.strftime('%Y-%m-%d %H:%M')}, {opts.runs} runs each -->"
    )
    header = ["command"]
    for label in trees:
        header += [f"{label}wall s", f"{label}CPU s"]
    header += [f"{label}of which simulating, s" for label in trees]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, args in COMMANDS.items():
            times: dict[str, list[tuple[float, float, float | None]]] = {label: [] for label in trees}
            for i in range(opts.runs + 1):  # the first round warms the page cache and is dropped
                for label, python_dir in trees.items():
                    out = Path(tmp) / f"{len(rows)}-{label.strip() or 'this'}-{i}"
                    result = run_once(python_dir, args, out)
                    if i:
                        times[label].append(result)
            row = [name]
            for runs in times.values():
                row += [spread([w for w, _, _ in runs]), spread([c for _, c, _ in runs])]
            for runs in times.values():
                simulated = [s for _, _, s in runs if s is not None]
                row.append(spread(simulated) if simulated else "")
            rows.append(row)
    table("Start-up of short commands, whole processes: median (min–max)", header, rows)


if __name__ == "__main__":
    main()
