"""Golden outputs: every bundled preset and the sample give the same results, byte for byte.

Refactors (issue 28) and engine rewrites (issue 29) must not change a figure. Each case runs the
`colosched` command a user runs and compares, against tests/golden/<case>.json:
- every JSON line it prints (`--json`), without the wall-clock fields;
- a SHA-256 of every parquet file it writes (its rows as CSV, wall-clock columns dropped), so a
  timeseries that moves by one step fails too.

A figure that changes on purpose (a defect fixed) is re-recorded with
`COLOSCHED_GOLDEN_UPDATE=1 .venv/bin/pytest tests/test_golden.py` and the commit says why.
"""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

pytestmark = pytest.mark.parallel  # asserts no timing: may run beside other tests (pyproject.toml)

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests/golden"
SHARED_TRACE = ROOT.parent / "shared/data/google-clusterdata-2011-2"
UPDATE = os.environ.get("COLOSCHED_GOLDEN_UPDATE") == "1"
# Fields that measure this machine, not the simulation.
VOLATILE = {"wall_s"}

HOST = [p.stem for p in sorted((ROOT / "crates/host/scenarios").glob("*.toml"))]
VMS = sorted((ROOT / "crates/vms/scenarios").glob("*.toml"))
# The thesis's 800 machines never cross the warning line on the sample (no policy moves); the
# demo's cluster (`--machines auto:2`, half the sample's peak request) does.
ACT = ["--machines", "auto:2", "--overcommit-ratio", "0.5"]
CLUSTER = {
    "sample": [],
    "sample-demo": ACT,
    "sample-demo-full": [*ACT, "--profile", "full"],
    "sample-demo-guards-random": [*ACT, "--guards", "agent", "--placement", "random", "--seeds", "2"],
    "sample-demo-usage-fifo": ["--machines", "auto:2", "--admission", "usage", "--queue", "fifo"],
    "parts0-9-thesis": ["--trace", str(SHARED_TRACE), "--parts", "0-9", "--profile", "thesis"],
    "parts0-9-demo": ["--trace", str(SHARED_TRACE), "--parts", "0-9", *ACT],
}


def cases():
    yield from (pytest.param(f"host-{s}", ["sim", "host", "--scenario", s], id=f"host-{s}") for s in HOST)
    for s in VMS:
        args = ["sim", "vms", "--scenario", str(s.relative_to(ROOT))]
        yield pytest.param(f"vms-{s.stem}", args, id=f"vms-{s.stem}")
    for name, extra in CLUSTER.items():
        yield pytest.param(f"cluster-{name}", ["sim", "cluster", *extra], id=f"cluster-{name}")


def drop_volatile(row):
    if isinstance(row, dict):
        return {k: drop_volatile(v) for k, v in row.items() if k not in VOLATILE}
    return row


def parquet_digest(path):
    df = pl.read_parquet(path)
    df = df.drop([c for c in df.columns if c in VOLATILE])
    return hashlib.sha256(df.write_csv().encode()).hexdigest()


def run(args, out):
    cmd = [sys.executable, "-m", "colosched.cli", *args, "--json", "--no-report", "--out", str(out)]
    if args[:2] == ["sim", "cluster"]:
        cmd.append("--no-cache")
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert p.returncode == 0, f"{' '.join(cmd)} exited {p.returncode}:\n{p.stderr[-2000:]}"
    rows = [drop_volatile(json.loads(line)) for line in p.stdout.splitlines() if line.startswith("{")]
    assert rows, f"{' '.join(cmd)} printed no JSON line"
    files = {f.name: parquet_digest(f) for f in sorted(out.glob("*.parquet"))}
    return {"command": args, "rows": rows, "parquet_sha256": files}


def compare(name, got):
    """The golden file is JSON lines: the command and the parquet digests, then one line per row."""
    path = GOLDEN / f"{name}.jsonl"
    head = {"command": got["command"], "parquet_sha256": got["parquet_sha256"]}
    lines = [json.dumps(x, sort_keys=True) for x in [head, *got["rows"]]]
    if UPDATE:
        path.parent.mkdir(exist_ok=True)
        path.write_text("\n".join(lines) + "\n")
        return
    assert path.exists(), f"{path} is missing: record it with COLOSCHED_GOLDEN_UPDATE=1"
    head, *rows = [json.loads(line) for line in path.read_text().splitlines()]
    want = {**head, "rows": rows}
    assert got["parquet_sha256"] == want["parquet_sha256"], f"{name}: a written table changed"
    n, m = len(got["rows"]), len(want["rows"])
    assert n == m, f"{name}: {n} rows, golden {m}"
    for i, (g, w) in enumerate(zip(got["rows"], want["rows"])):
        assert g == w, f"{name}: row {i} differs"


@pytest.mark.parametrize(("name", "args"), list(cases()))
def test_golden(name, args, tmp_path):
    if "--trace" in args and not SHARED_TRACE.is_dir():
        pytest.skip(f"{SHARED_TRACE} is missing (../shared beside the clone holds it)")
    compare(name, run(args, tmp_path / "out"))


def test_golden_plan_vms():
    args = ["plan", "vms", "--state", "examples/cluster-state.toml", "--json"]
    cmd = [sys.executable, "-m", "colosched.cli", *args]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    plan = drop_volatile(json.loads(p.stdout))
    compare("plan-vms-cluster-state", {"command": args, "rows": [plan], "parquet_sha256": {}})
