"""Sweeps on local processes and on a real Ray cluster (issue 17).

The Ray cluster is a head and 2 worker nodes started by the test with `ray start --block`, 1 CPU
each, inside a network namespace of the test's own that has only loopback: Ray then listens on
127.0.0.1 alone, and nothing leaves the machine. The test stops what it started (every process
in its namespace) and removes the namespace.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl
import pytest

from colosched import sweep, vms

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from benchutil import loopback_netns, loopback_ray  # noqa: E402

pytestmark = pytest.mark.parallel  # asserts no timing: may run beside other tests (pyproject.toml)

VENV = Path(sys.executable).parent
PORT = 6390
PRESETS = Path(__file__).resolve().parents[1] / "crates" / "vms" / "scenarios"


def run(*cmd: str, ns: str | None = None, env=None, timeout: float = 300.0) -> subprocess.CompletedProcess:
    prefix = ["ip", "netns", "exec", ns] if ns else []
    return subprocess.run([*prefix, *cmd], capture_output=True, text=True, timeout=timeout, env=env)


def long_scenario(tmp_path: Path, hours: float) -> Path:
    """The fio-read preset run for `hours` simulated hours (about 4 ms of CPU per hour)."""
    text = (PRESETS / "spec003-fio-read.toml").read_text()
    path = tmp_path / "fio-long.toml"
    path.write_text(text.replace("duration_s = 3600", f"duration_s = {int(hours * 3600)}"))
    return path


def test_a_cluster_point_needs_no_more_memory_than_the_sweep_asks_for(tmp_path):
    """The estimate points are placed by covers a worker's real peak: a fresh process that
    parses the bundled sample (no cache yet: the costlier ingest) and replays it."""
    code = f"""
import json, resource
from colosched import cluster
trace = cluster.load(cluster.bundled_sample(), cache_dir={str(tmp_path)!r})
cluster.run(trace, "fine:mem_usage", threads=1, keep_series=False)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps(dict(runs=trace.stats()["runs"], peak=peak)))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.splitlines()[-1])
    asked = sweep.cluster_point_memory(got["runs"])
    assert got["peak"] <= asked <= got["peak"] + 2**30, (got, asked)


def test_local_sweep_keeps_each_point_and_a_rerun_computes_only_the_missing(tmp_path):
    points = sweep.vms_points(["spec003-zookeeper"], ["random", "planner"], seeds=[1, 2, 3])
    states: list[dict] = []
    first = sweep.run(points, tmp_path, executor="local", jobs=2, progress=states.append)
    assert states[-1] == {"total": 6, "done": 6, "running": 0, "failed": 0, "computed": 6}
    files = sorted((tmp_path / sweep.POINTS).iterdir())
    assert len(files) == 6 and all(f.suffix == ".parquet" for f in files)
    # The same as running the points here, one by one.
    direct = pl.concat([sweep.compute(p) for p in points], how="diagonal_relaxed")
    assert first.equals(direct)
    # Two points lost: a rerun computes those two and gives the same table.
    files[0].unlink()
    files[3].unlink()
    states.clear()
    again = sweep.run(points, tmp_path, executor="local", jobs=2, progress=states.append)
    assert states[0]["done"] == 4 and states[-1]["computed"] == 2
    assert again.equals(first)
    # The per-run headline of a sweep is vms.headline of the same runs.
    tables = vms.run("spec003-zookeeper", ["random", "planner"], [1, 2, 3])
    assert vms.summarise(first, "random").equals(vms.headline(tables, "random"))


def test_a_failing_point_is_not_written_and_the_others_are(tmp_path):
    points = sweep.vms_points(["spec003-zookeeper"], ["random"], seeds=[1, 2])
    bad = {**points[0], "scenario": str(tmp_path / "gone.toml")}
    with pytest.raises(sweep.PointsFailed, match="1 point"):
        sweep.run([bad, *points], tmp_path, executor="local", jobs=1)
    assert len(list((tmp_path / sweep.POINTS).iterdir())) == 2
    with pytest.raises(ValueError, match="expected local, ray or ray:ADDRESS"):
        sweep.run(points, tmp_path, executor="spark")


def test_sweep_cluster_refuses_bad_policies_before_any_work(tmp_path):
    r = run(str(VENV / "colosched"), "sweep", "cluster", "--policy", "coarse,bogus", "--machines", "300",
            "--out", str(tmp_path / "out"))  # fmt: skip
    assert r.returncode == 2 and 'unknown policy "bogus"' in r.stderr, r.stderr
    assert not (tmp_path / "out").exists(), "nothing written for a bad policy"
    with pytest.raises(ValueError, match="built-in policy names"):
        sweep.cluster_points("trace", None, [lambda cell, cycle: []], [300], [1.0], [1])


def test_failed_points_exit_1_keeping_the_others(tmp_path, monkeypatch, capsys):
    """The CLI over a real failing point: sweep.run is wrapped to add one whose scenario file does
    not exist (the CLI checks scenarios up front, so it cannot make one itself)."""
    from colosched import cli

    real_run = sweep.run
    bad = {"kind": "vms", "scenario": str(tmp_path / "gone.toml"), "policy": "random", "seed": 1}
    monkeypatch.setattr(sweep, "run", lambda points, *a, **kw: real_run([*points, bad], *a, **kw))
    out = tmp_path / "out"
    argv = ["sweep", "vms", "--scenario", "spec003-zookeeper", "--policy", "random", "--seeds", "2"]
    assert cli.main([*argv, "--jobs", "1", "--out", str(out)]) == 1
    assert "1 point(s) failed" in capsys.readouterr().err
    assert len(list((out / sweep.POINTS).iterdir())) == 2, "the good points are kept"
    assert not (out / "sweep.parquet").exists() and not (out / "report.html").exists()


def test_sweep_cli_help_and_bad_executor(tmp_path):
    r = run(str(VENV / "colosched"), "sweep", "vms", "--help")
    assert r.returncode == 0 and "--executor" in r.stdout and "rerun" in r.stdout
    r = run(str(VENV / "colosched"), "sweep", "vms", "--scenario", "spec003-zookeeper", "--executor", "yarn",
            "--out", str(tmp_path))  # fmt: skip
    assert r.returncode == 2 and "--executor 'yarn'" in r.stderr, r.stderr


@pytest.fixture(scope="module")
def ray_cluster():
    """(namespace, address, env) of a head and 2 workers of 1 CPU on loopback (benchutil.loopback_ray);
    all stopped after, the namespace deleted."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and iproute2 for a private network namespace")
    if not (VENV / "ray").exists():
        pytest.fail("ray is not installed in the venv: `make venv` installs it")
    # Not under pytest's tmp_path: Ray's socket paths below it must fit AF_UNIX's 107 bytes, which
    # pytest-xdist's longer base (…/popen-gw0/…) exceeds.
    temp = Path(tempfile.mkdtemp(prefix="ray-"))
    try:
        with loopback_netns(f"cs-ray-{os.getpid()}") as ns:
            with loopback_ray(ns, temp, [1, 1, 1], PORT) as (address, env):
                yield ns, address, env
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def sweep_cmd(out: Path, scenario: str, executor: str, seeds: int = 2) -> list[str]:
    return [str(VENV / "colosched"), "sweep", "vms", "--scenario", scenario, "--seeds", str(seeds),
            "--executor", executor, "--out", str(out), "--json"]  # fmt: skip


def test_ray_sweep_equals_the_local_one(ray_cluster, tmp_path):
    """On the running cluster (ray:ADDRESS), and on a Ray the sweep starts for itself (ray)."""
    ns, address, env = ray_cluster
    local = run(*sweep_cmd(tmp_path / "local", "spec003-zookeeper", "local"))
    assert local.returncode == 0, local.stderr
    a = pl.read_parquet(tmp_path / "local" / "sweep.parquet")
    assert a.height == 8 * len(vms.per_run(vms.run("spec003-zookeeper", ["random"], [1])))

    def rows(r):
        return [line for line in r.stdout.splitlines() if line.startswith("{")]

    for i, executor in enumerate([f"ray:{address}", "ray"]):
        remote = run(*sweep_cmd(tmp_path / f"ray{i}", "spec003-zookeeper", executor), ns=ns, env=env)
        assert remote.returncode == 0, remote.stderr[-3000:]
        assert f"8 computed on {executor}," in remote.stderr
        b = pl.read_parquet(tmp_path / f"ray{i}" / "sweep.parquet")
        assert a.equals(b), "bit for bit, whichever executor ran the points"
        assert rows(local) == rows(remote) and rows(local)


def test_sweep_cluster_on_ray_equals_local_and_the_replays(ray_cluster, tmp_path):
    """Trace replays: the driver parses the bundled sample into a cache of the test's own, the
    workers read that cache; every column but wall_s (each point's own run time) is equal."""
    from colosched import cluster

    ns, address, env = ray_cluster
    grid = ["--machines", "300,400", "--overcommit-ratio", "1.1", "--policy", "coarse,no_migration"]
    grid += ["--seeds", "2"]
    cache = ["--cache-dir", str(tmp_path / "cache"), "--no-report"]
    out = {}
    for executor in ("local", f"ray:{address}"):
        out[executor] = tmp_path / executor.partition(":")[0]
        cmd = [str(VENV / "colosched"), "sweep", "cluster", *grid, *cache, "--executor", executor,
               "--out", str(out[executor])]  # fmt: skip
        r = run(*cmd, ns=ns, env=env)
        assert r.returncode == 0, r.stderr[-3000:]
        assert f"8 points: 8 computed on {executor}" in r.stderr
    local, remote = (pl.read_csv(out[e] / "sweep.csv").drop("wall_s") for e in out)
    assert local.height == 8 and local.equals(remote)
    for (m,), rows in local.group_by("machines"):
        runs = cluster.run(cluster.bundled_sample(), ["coarse", "no_migration"], seeds=2, machines=m,
                           overcommit_ratio=1.1, keep_series=False, cache_dir=tmp_path / "cache")  # fmt: skip
        want = runs.summary.drop("wall_s").sort("policy", "seed")
        assert rows.sort("policy", "seed").select(want.columns).equals(want)


def test_a_point_asking_more_memory_than_any_node_has_still_runs(ray_cluster, tmp_path):
    """Ray would wait forever for a node with that much memory: the sweep asks for at most the
    largest node's."""
    ns, address, env = ray_cluster
    code = (
        "from colosched import sweep; "
        "points = sweep.vms_points(['spec003-zookeeper'], ['random', 'planner'], [1]); "
        f"t = sweep.run(points, {str(tmp_path / 'out')!r}, executor='ray:{address}', memory=2**50); "
        "print(t.height)"
    )
    r = run(sys.executable, "-c", code, ns=ns, env=env, timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    points = sweep.vms_points(["spec003-zookeeper"], ["random", "planner"], [1])
    assert int(r.stdout.split()[-1]) == sum(sweep.compute(p).height for p in points)


def _points_written(out: Path) -> int:
    where = out / sweep.POINTS
    return len([f for f in where.iterdir() if f.suffix == ".parquet"]) if where.exists() else 0


def test_a_worker_killed_mid_sweep_is_retried_and_the_results_are_the_same(ray_cluster, tmp_path):
    ns, address, env = ray_cluster
    scenario = long_scenario(tmp_path, 200)  # about a second per point
    driver = subprocess.Popen(
        ["ip", "netns", "exec", ns, *sweep_cmd(tmp_path / "ray", str(scenario), f"ray:{address}")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    killed = None
    deadline = time.monotonic() + 120
    while killed is None and time.monotonic() < deadline and driver.poll() is None:
        for pid in run("ip", "netns", "pids", ns).stdout.split():
            try:
                name = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
            except OSError:
                continue
            if name.startswith(b"ray::compute"):  # a worker running a point
                os.kill(int(pid), signal.SIGKILL)
                killed = int(pid)
                break
        time.sleep(0.05)
    out, err = driver.communicate(timeout=600)
    assert killed, "no worker was seen running a point"
    assert driver.returncode == 0, err[-3000:]
    local = run(*sweep_cmd(tmp_path / "local", str(scenario), "local"))
    assert local.returncode == 0, local.stderr
    a, b = (pl.read_parquet(tmp_path / d / "sweep.parquet") for d in ("local", "ray"))
    assert a.equals(b)


def test_a_rerun_after_an_interrupted_ray_sweep_computes_only_the_missing_points(ray_cluster, tmp_path):
    ns, address, env = ray_cluster
    scenario = long_scenario(tmp_path, 200)
    out = tmp_path / "ray"
    driver = subprocess.Popen(
        ["ip", "netns", "exec", ns, *sweep_cmd(out, str(scenario), f"ray:{address}", seeds=3)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while _points_written(out) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    driver.send_signal(signal.SIGINT)  # `ip netns exec` passes it on to the sweep
    driver.communicate(timeout=120)
    done = _points_written(out)
    assert 2 <= done < 12, done
    # Whatever was written is whole; nothing else is in the way.
    for f in (out / sweep.POINTS).iterdir():
        assert f.suffix == ".parquet" and pl.read_parquet(f).height > 0, f
    again = run(*sweep_cmd(out, str(scenario), f"ray:{address}", seeds=3), ns=ns, env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"12 points: {12 - done} computed" in again.stderr + again.stdout


def test_sweep_host_equals_the_host_runs_and_bad_scenarios_write_nothing(tmp_path):
    from colosched import host

    args = [
        "--scenario",
        "spec001-sketch",
        "--scheduler",
        "credit,ia",
        "--seeds",
        "2",
        "--out",
        str(tmp_path / "h"),
    ]
    r = run(str(VENV / "colosched"), "sweep", "host", *args)
    assert r.returncode == 0, r.stderr
    swept = pl.read_parquet(tmp_path / "h" / "sweep.parquet")
    _, vms_rows = host.run("spec001-sketch", ["credit", "ia"], seeds=[1, 2])
    assert swept.drop("scenario").equals(vms_rows.drop("ping_rtts_ms", "scenario"))
    for kind in ("host", "vms"):
        out = tmp_path / f"bad-{kind}"
        r = run(
            str(VENV / "colosched"),
            "sweep",
            kind,
            "--scenario",
            str(tmp_path / "nope.toml"),
            "--out",
            str(out),
        )
        assert r.returncode == 2 and "nope.toml" in r.stderr, r.stderr
        assert not out.exists(), "nothing written for a scenario that does not check"
