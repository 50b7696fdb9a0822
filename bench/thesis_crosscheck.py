"""The thesis profile against the GiantVM thesis's own simulator (issue 27), on the input the
thesis's `simulator.py` was run on: task_events parts 0-9 of the 2011 trace and ONE synthetic
task_usage part written by ../shared/tools/thesis_usage_part.py (gzipped beside the parts).

    .venv/bin/python bench/thesis_crosscheck.py [--shared ../shared] [--work bench/.work/thesis]

Builds that trace root under --work (once; the script's output is kept), replays it under
`--profile thesis` on 800 machines in cells of 4 (the thesis's figures' set-up), seed 1:
no_migration and coarse at the default warning line, and coarse at `--warning-threshold 0.15`;
prints a Markdown table of the thesis's figures (issue 27), ours, and whether each is within its
bound (python/tests/test_cluster_thesis.py asserts the same bounds). Exits 1 if one is not.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import subprocess
import sys
from pathlib import Path

PARTS = "0-9"
THRESHOLD = 0.15
USAGE_PART = "part-00000-of-00500.csv"
# The thesis's simulator on this input (issue 27's table): (low, high) of its runs, and our bound
# as a relative distance from that range.
THESIS = {
    "default": {
        "mean_cpu": ((0.1099, 0.1100), 0.02),
        "gini": ((0.280, 0.280), 0.03),
        "duration": ((559.0, 560.0), 0.02),
        "moves": ((0, 0), 0.0),
    },
    "line 0.15": {
        "moves": ((1643, 1643), 0.15),
        "net_kbit_s_per_machine": ((2355.5, 2355.5), 0.15),
        "gini": ((0.273, 0.273), 0.03),
    },
}
RUNS = {
    "default": (["no_migration", "coarse"], {}),
    "line 0.15": (["coarse"], {"warning_threshold": THRESHOLD}),
}
SETUP = {"machines": 800, "cell_size": 4, "seed": 1}


def shared_dir() -> Path:
    """../shared beside the checkout ($COLOSCHED_SHARED_DATA names its data/ directory)."""
    data = os.environ.get("COLOSCHED_SHARED_DATA")
    return Path(data).parent if data else Path(__file__).resolve().parents[2] / "shared"


def missing(shared: Path) -> str | None:
    """Why the input cannot be built here, or None."""
    events = shared / "data" / "google-clusterdata-2011-2" / "task_events"
    need = [shared / "tools" / "thesis_usage_part.py"]
    need += [events / f"part-{i:05d}-of-00500.csv.gz" for i in range(10)]
    gone = [str(p) for p in need if not p.is_file()]
    return f"not found: {', '.join(gone)}" if gone else None


def build_input(shared: Path, work: Path) -> Path:
    """The trace root: the 10 task_events parts (links) and the synthetic usage part, gzipped.
    The script also copies the parts as plain CSV into its output; those copies are removed."""
    root = work / "root"
    usage = root / "task_usage" / (USAGE_PART + ".gz")
    if usage.is_file():
        return root
    events = shared / "data" / "google-clusterdata-2011-2" / "task_events"
    raw = work / "raw"
    script = shared / "tools" / "thesis_usage_part.py"
    argv = [sys.executable, str(script), str(events.parent), str(raw)]
    subprocess.run(argv, check=True, capture_output=True)
    (root / "task_events").mkdir(parents=True, exist_ok=True)
    for i in range(10):
        name = f"part-{i:05d}-of-00500.csv.gz"
        link = root / "task_events" / name
        if not link.exists():
            link.symlink_to(events / name)
    usage.parent.mkdir(parents=True, exist_ok=True)
    partial = usage.with_suffix(".partial")
    with open(raw / "task_usage" / USAGE_PART, "rb") as src, gzip.open(partial, "wb", compresslevel=1) as dst:
        shutil.copyfileobj(src, dst)
    partial.rename(usage)
    shutil.rmtree(raw)
    return root


def measure(root: Path, cache_dir: Path, seeds: int = 1) -> dict[str, dict[str, dict]]:
    """{run: {policy: summary row}} under the thesis profile, for seeds 1..seeds ("policy" for
    seed 1, "policy seed N" for the others)."""
    from colosched import cluster

    trace = cluster.load(root, PARTS, cache_dir=cache_dir)
    out = {}
    for name, (policies, extra) in RUNS.items():
        summary = cluster.run(
            trace, policies, profile="thesis", keep_series=False, seeds=seeds, **SETUP, **extra
        ).summary
        out[name] = {
            r["policy"] + (f" seed {r['seed']}" if r["seed"] != 1 else ""): r
            for r in summary.iter_rows(named=True)
        }
    return out


def show(x: float) -> str:
    return f"{x:,}" if isinstance(x, int) else f"{x:,.1f}" if x >= 100 else f"{x:.4f}"


def within(value: float, low_high: tuple[float, float], bound: float) -> bool:
    low, high = low_high
    return low * (1 - bound) <= value <= high * (1 + bound)


def table(ours: dict[str, dict[str, dict]]) -> tuple[str, bool]:
    """The Markdown table and whether every figure is within its bound."""
    lines = [
        "| run | figure | thesis | ours | bound | within |",
        "|---|---|---|---|---|---|",
    ]
    ok = True
    for name, figures in THESIS.items():
        for policy, row in ours[name].items():
            for key, (low_high, bound) in figures.items():
                good = within(row[key], low_high, bound)
                ok &= good
                low, high = low_high
                thesis = show(low) if low == high else f"{show(low)}–{show(high)}"
                value = show(row[key])
                verdict = "yes" if good else "NO"
                lines.append(f"| {name}, {policy} | {key} | {thesis} | {value} | ± {bound:.0%} | {verdict} |")
    return "\n".join(lines), ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared", type=Path, default=shared_dir())
    ap.add_argument("--work", type=Path, default=Path(__file__).resolve().parent / ".work" / "thesis")
    ap.add_argument("--seeds", type=int, default=1, help="also seeds 2..N (the table shows each)")
    args = ap.parse_args()
    why = missing(args.shared)
    if why:
        print(f"thesis_crosscheck: {why}", file=sys.stderr)
        return 2
    root = build_input(args.shared, args.work)
    ours = measure(root, args.work / "cache", args.seeds)
    text, ok = table(ours)
    print(text)
    print(
        "\ncommand: colosched sim cluster --trace ROOT --parts 0-9 --machines 800 --cell-size 4 "
        f"--policy no_migration,coarse --seeds {args.seeds} [--warning-threshold 0.15]"
    )
    for name, rows in ours.items():
        for policy, r in rows.items():
            print(
                f"{name}, {policy}: started {r['started']:,}, completed {r['completed']:,}, "
                f"migrated {r['migrated_gib']:.1f} GiB, {r['wall_s']:.2f} s"
            )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
