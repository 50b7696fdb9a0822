"""The measuring tools the benchmarks rely on, run for real: if one of them broke, the figures in
bench/RESULTS.md would be wrong without any benchmark failing.

- bench/memwatch/touch.c (latency mode) must vary its page count per round, or the kernel's
  128-event threshold check falls at the same place in every round (the error found 2026-11-23);
- benchutil.vcpus_kept_awake must put one SCHED_IDLE busy loop on each CPU and leave none behind,
  also when the process holding them is killed with SIGKILL;
- bench/machine/vcpu_wake.c must report both kinds of wake-up, refuse bad arguments, and leave no
  spinner behind;
- bench/run.py's replay child must run from the repository root (issue 29).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from benchutil import (  # noqa: E402
    CLK_TCK,
    descendants,
    foreign_cpu,
    proc_cpu,
    remove_cgroups,
    steal_fraction,
    steal_ticks,
    vcpus_kept_awake,
)

pytestmark = pytest.mark.parallel  # asserts no timing: may run beside other tests (pyproject.toml)

MEMCG = Path("/sys/fs/cgroup/memory")
CC = shutil.which("cc")
needs_cc = pytest.mark.skipif(CC is None, reason="needs a C compiler (cc) to build the tool")


def build(src: str, out: Path, *flags: str) -> Path:
    subprocess.run([CC, "-O2", "-Wall", *flags, "-o", str(out), str(ROOT / src)], check=True)
    return out


def pids_running(needle: str) -> list[int]:
    out = subprocess.run(["pgrep", "-f", needle], capture_output=True, text=True).stdout
    return [int(x) for x in out.split() if int(x) != os.getpid()]


@needs_cc
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: creates a memory cgroup")
@pytest.mark.skipif(not (MEMCG / "cgroup.event_control").exists(), reason="needs the v1 memory controller")
def test_touch_varies_its_page_count_per_round(tmp_path):
    touch = build("bench/memwatch/touch.c", tmp_path / "touch")
    cg = MEMCG / f"colosched-test-{uuid.uuid4().hex[:8]}"
    cg.mkdir()
    try:
        args = [str(touch), "latency", "30", str(2 << 20), str(cg / "memory.usage_in_bytes"), "4", "1"]
        p = subprocess.run(
            ["sh", "-c", f'echo $$ > {cg}/cgroup.procs && exec "$@"', "sh", *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        remove_cgroups([cg])
    assert p.returncode == 0, p.stderr
    pages = [int(line.split()[4]) for line in p.stdout.splitlines()]
    assert len(pages) == 30
    assert all(1024 <= n <= 1024 + 127 for n in pages), pages
    # 30 draws of 128 values all equal has probability 128^-29: a fixed count is the bug.
    assert len(set(pages)) > 1, pages


def test_vcpus_kept_awake_puts_one_idle_spinner_per_cpu_and_removes_them():
    cpus = sorted(os.sched_getaffinity(0))
    with vcpus_kept_awake():
        spinners = pids_running("PR_SET_PDEATHSIG")
        assert len(spinners) == len(cpus)
        assert sorted(min(os.sched_getaffinity(p)) for p in spinners) == cpus
        assert all(os.sched_getscheduler(p) == os.SCHED_IDLE for p in spinners)
    assert pids_running("PR_SET_PDEATHSIG") == []
    with vcpus_kept_awake(enabled=False):
        assert pids_running("PR_SET_PDEATHSIG") == []


def test_spinners_die_with_a_killed_bench():
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import sys, time; sys.path.insert(0, {str(ROOT / 'bench')!r})\n"
            "from benchutil import vcpus_kept_awake\n"
            "with vcpus_kept_awake():\n    print('up', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "up"
    assert pids_running("PR_SET_PDEATHSIG")
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    deadline = time.monotonic() + 5
    while pids_running("PR_SET_PDEATHSIG") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pids_running("PR_SET_PDEATHSIG") == [], "a spinner outlived its bench"


def test_steal_fraction_is_a_share_of_the_ticks_between_two_readings():
    a = steal_ticks()
    time.sleep(0.05)
    b = steal_ticks()
    assert b[1] > a[1] and b[0] >= a[0]
    assert 0.0 <= steal_fraction(a, b) <= 1.0
    assert steal_fraction((10, 100), (15, 200)) == 0.05


def test_others_cpu_leaves_out_our_tree_and_kernel_threads_and_names_the_busiest():
    # (comm, ticks, ppid): 1 init, 2 kthreadd, 10 us (pytest), 11 our child, 12 its child,
    # 20 a kernel thread, 30 and 31 someone else's build.
    a = {1: ("init", 0, 0), 2: ("kthreadd", 0, 0), 10: ("pytest", 0, 1), 11: ("qemu", 0, 10)}
    a |= {12: ("sh", 0, 11), 20: ("kworker", 0, 2), 30: ("cargo", 0, 1), 31: ("rustc", 0, 30)}
    b = {pid: (comm, 3 * CLK_TCK, ppid) for pid, (comm, _, ppid) in a.items()}
    b[40] = ("ld", CLK_TCK, 31)  # born between the readings: all its time counts
    ours = descendants(b, 10)
    assert ours == {10, 11, 12}
    used, top = foreign_cpu(a, b, ours, 2.0)
    # init 3 s, cargo 3 s, rustc 3 s, ld 1 s over 2 s; not kthreadd, the kworker or our tree.
    assert used == 5.0
    assert top == ["rustc[31] 3.00s", "init[1] 3.00s", "cargo[30] 3.00s"]
    # On this machine: this process is in its own tree.
    assert os.getpid() in descendants(proc_cpu(), os.getpid())


@needs_cc
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="vcpu_wake pins to CPUs 0 and 1")
def test_vcpu_wake_reports_both_kinds_and_leaves_no_spinner(tmp_path):
    exe = build("bench/machine/vcpu_wake.c", tmp_path / "vcpu_wake", "-pthread")
    bad = subprocess.run([str(exe), "1", "10"], capture_output=True, text=True, timeout=10)
    assert bad.returncode == 2 and "usage" in bad.stderr
    p = subprocess.run([str(exe), "1", "100"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert [line.split("p50")[0].split(None, 2)[2].strip() for line in lines] == ["idle", "kept awake"]
    for line in lines:
        w = line.split()
        p50, p99, mx = (float(w[w.index(k) + 1]) for k in ("p50", "p99", "max"))
        assert 0 < p50 <= p99 <= mx, line
    assert pids_running(str(exe)) == [], "the spinner outlived the probe"


def test_replay_in_child_runs_from_the_repository_root():
    """bench/run.py's full and scale sections replay in a child process started from wherever
    the bench was (the repository root, as its docstring says); the child once imported
    `benchutil`, which only the parent could find (issue 29)."""
    code = (
        "import sys; sys.path.insert(0, 'bench'); from pathlib import Path; import run; "
        "r = run.replay_in_child(Path('data/google-2011-sample').resolve(), 200); "
        "assert r['steps'] > 0 and r['rss_gib'] > 0, r; print('ok')"
    )
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and p.stdout.strip().endswith("ok"), p.stderr[-2000:]
