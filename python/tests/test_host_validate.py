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
SIM_PING_MS = (97.1, 100.0, 103.3, 106.7, 111.1)


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


def test_a_short_slice_cuts_the_echo_tail_beside_hogs_for_real_and_in_the_simulator(tools):
    # 4 hogs: the kernel's default slice leaves the woken server waiting for a hog's slice to end
    # in a good share of requests, a 0.5 ms slice preempts at once (PREEMPT_SHORT). The 90th
    # percentile, not the 99th: of 150 samples the 99th is the second worst, set on this shared
    # VM by the hypervisor's steal (bench/RESULTS.md: p99 11 ms with no hog at all).
    real = {s: hv.real_run(tools, hogs=4, slice_ms=s, requests=150, gap_ms=30.0) for s in (None, 0.5)}
    for r in real.values():
        assert r["lost"] == 0 and len(r["rtt_ms"]) == 150, r["lost"]
    assert real[0.5]["slice_ms"] == pytest.approx(0.5)
    p90 = {s: hv.stats(r["rtt_ms"])["p90"] for s, r in real.items()}
    assert p90[0.5] < 0.5 * p90[None], p90
    cpu_us, base = real[None]["cpu_us_per_request"], real[None]["default_slice_ms"]

    # The simulator's pings are periodic and its hogs' slices too, so one ping period samples one
    # phase of them: at some costs no ping ever meets a hog (p90 0.06 ms with either slice), at
    # others every one does. Five periods pooled sample the phases (a sweep of costs 30–160 µs
    # then always shows the short slice's gain; one period failed at 8 of 19 costs).
    def sim_p90(s):
        return hv.stats([x for ms in SIM_PING_MS for x in hv.sim_run(4, s, cpu_us, 20.0, base, ms)])["p90"]

    sim = {s: sim_p90(s) for s in (None, 0.5)}
    assert sim[0.5] < sim[None], sim


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
