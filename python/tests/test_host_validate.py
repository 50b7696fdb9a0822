"""The simulator's `eevdf` against this machine's kernel, short (bench/host_validate.py is the full
run): a real UDP echo server beside a real CPU hog on one CPU, its slice the default or 0.5 ms by
`sched_setattr`, timed by a real client on loopback; and the same situation simulated."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _bench():
    sys.path.insert(0, str(BENCH))  # for its `benchutil` import
    spec = importlib.util.spec_from_file_location("host_validate", BENCH / "host_validate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hv = _bench()
RUNS = 5  # undisturbed real runs of 200 requests per slice, pooled (1,000 requests each)
ATTEMPTS = 24  # real runs at most before the test gives up on a busy machine
TOLERANCE = 1.8  # the simulator's p50 and mean round trip within this factor of the kernel's


@pytest.fixture(scope="module")
def tools(tmp_path_factory):
    if shutil.which("cc") is None:
        pytest.skip("no C compiler (cc) to build bench/loadgen/udpecho.c and behog.c")
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs: server and hog on one, client on the other")
    probe = subprocess.Popen(["sleep", "5"])
    try:
        hv.set_slice(probe.pid, 0.5)
        if abs(hv.get_slice_ms(probe.pid) - 0.5) > 1e-6:
            pytest.skip("sched_setattr accepted sched_runtime but the slice did not change (kernel < 6.12?)")
    except OSError as e:
        pytest.skip(f"sched_setattr with sched_runtime refused: {e}")
    finally:
        probe.kill()
        probe.wait()
    return hv.build(tmp_path_factory.mktemp("udpecho"))


def quiet_runs(tools, slices):
    """`RUNS` undisturbed real runs per slice, interleaved so that a slow hour of the machine
    falls on both. A run during which something else had the CPUs (the hypervisor's steal over
    0.5 %, other tasks over 2 %: `hv.DISTURBED`) is dropped: such a run says nothing of EEVDF
    (measured: with 1.4–3.3 % steal a run waits as much at 0.5 ms as at the default)."""
    runs, why = {s: [] for s in slices}, []
    for attempt in range(ATTEMPTS):
        s = min(slices, key=lambda s: len(runs[s]))
        if len(runs[s]) == RUNS:
            return runs
        if sum(RUNS - len(v) for v in runs.values()) > ATTEMPTS - attempt:
            break  # the attempts left cannot give the runs missing: the skip below, sooner
        r = hv.real_run(tools, hogs=4, slice_ms=s, requests=200, gap_ms=20.0, seed=attempt + 1)
        reason = hv.disturbed(r["disturbance"])
        if reason is None:
            runs[s].append(r)
        else:
            why.append(reason)
    if all(len(v) == RUNS for v in runs.values()):
        return runs
    tried = len(why) + sum(len(v) for v in runs.values())
    pytest.skip(f"the machine was busy in {len(why)} of {tried} real runs ({'; '.join(why[:4])}...)")


def quiet_path_us(tools) -> float:
    """`hv.path_run`'s round trip outside the server's work (µs) from an undisturbed run; the
    client's CPU is left to idle between requests as in `quiet_runs`' runs."""
    why = []
    for attempt in range(3):
        r = hv.path_run(tools, gap_ms=20.0, seed=100 + attempt, spinners={})
        reason = hv.disturbed(r["disturbance"])
        if reason is None:
            return r["path_us"]
        why.append(reason)
    pytest.skip(f"the machine was busy in 3 of 3 runs measuring the path ({'; '.join(why)})")


def test_a_short_slice_cuts_the_echo_waits_beside_hogs_for_real_and_the_simulator_agrees(tools):
    # 4 hogs: the kernel's default slice leaves the woken server waiting for a hog's tick in
    # about a sixth of the requests; a 0.5 ms slice preempts the running hog (PREEMPT_SHORT)
    # unless another hog's deadline is earlier, so fewer wait (10 % against 17 % undisturbed,
    # 2026-11-27). Compared: the share that waited (over 1 ms) and the mean, over 1,000 requests
    # a slice (at 200, the binomial noise alone fails the 0.75 bound one time in twenty). Not
    # p90: with ~10 % of requests waiting p90 flips between 0.2 and 3.5 ms with a few requests.
    runs = quiet_runs(tools, (None, 0.5))
    for r in (r for rs in runs.values() for r in rs):
        assert r["lost"] == 0 and len(r["rtt_ms"]) == 200, r["lost"]
    assert all(r["slice_ms"] == pytest.approx(0.5) for r in runs[0.5])
    kernel = {s: hv.stats([x for r in rs for x in r["rtt_ms"]]) for s, rs in runs.items()}
    assert kernel[None]["waited"] > 0.05, ("the hogs must make the server wait at the default slice", kernel)
    assert kernel[0.5]["waited"] < 0.75 * kernel[None]["waited"], kernel
    assert kernel[0.5]["mean"] < kernel[None]["mean"], kernel

    # The same set-up simulated, at the runs' mean cost per request, pinged at the client's
    # random gaps over a link with the measured round trip outside the server's work. The
    # direction first, then the numbers: the median (a request's own cost and that path) and
    # the mean (which moves with the share that waited) within TOLERANCE.
    cost = {s: sum(r["cpu_us_per_request"] for r in rs) / len(rs) for s, rs in runs.items()}
    base_ms = runs[None][0]["default_slice_ms"]
    path = quiet_path_us(tools)
    sim = {s: hv.stats(hv.sim_run(hv.scenario_toml(4, s, cost[s], 20.0, base_ms, 20.0, path))) for s in runs}
    # The model's gain is established for 30–160 µs a request (run.rs's sweep); above that it
    # fades (a fresh clone measured 190 µs: simulated p90 3.79 at 0.5 ms against 3.67), a known
    # gap of the model (issue 26 notes), so the direction is asked only in that range.
    if all(c <= 160 for c in cost.values()):
        assert sim[0.5]["p90"] < sim[None]["p90"] and sim[0.5]["waited"] < sim[None]["waited"], sim
    for s in runs:
        for x in ("p50", "mean"):
            ratio = sim[s][x] / kernel[s][x]
            assert 1 / TOLERANCE < ratio < TOLERANCE, (s, x, cost[s], path, kernel[s], sim[s])


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--requests", "0"], "--requests"),
        (["--gap-ms", "5000"], "--gap-ms"),
        (["--ks", "two"], "--ks"),
        (["--slices", "fast"], "--slices"),
        (["--slices", "0.01"], "--slices"),
        (["--ks", "-1"], "--ks"),
    ],
)
def test_bad_flags_exit_2_naming_them_before_anything_runs(flags, needle):
    r = subprocess.run(
        [sys.executable, str(BENCH / "host_validate.py"), *flags], capture_output=True, text=True, timeout=30
    )
    assert r.returncode == 2 and needle in r.stderr, r.stderr
    assert r.stdout == ""
