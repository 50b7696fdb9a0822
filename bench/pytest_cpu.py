"""Where pytest's time goes (issue 28, item 8): a pytest plugin that reads the machine's busy CPU
time (/proc/stat) when each test starts and ends, then prints per module the wall seconds, the
CPUs busy on average and the CPU seconds left idle (of two CPUs), most wall time first.

    PYTHONPATH=bench .venv/bin/pytest -q -p pytest_cpu [pytest's own arguments]

Run it alone on the machine: busy time is the whole machine's, not only this pytest's.
"""

from __future__ import annotations

import collections
import os
import time

from benchutil import CLK_TCK, cpu_times

_started: dict[str, tuple[float, float]] = {}
_spent: dict[str, tuple[float, float]] = {}


def _busy_s() -> float:
    """Busy CPU seconds of this machine's CPUs since boot (benchutil.cpu_times: not idle, iowait
    or steal)."""
    return sum(cpu_times(c)[0] for c in os.sched_getaffinity(0)) / CLK_TCK


def pytest_runtest_logstart(nodeid, location):
    _started[nodeid] = (time.monotonic(), _busy_s())


def pytest_runtest_logfinish(nodeid, location):
    t0, b0 = _started.pop(nodeid)
    _spent[nodeid] = (time.monotonic() - t0, _busy_s() - b0)


def pytest_terminal_summary(terminalreporter):
    per_module = collections.defaultdict(lambda: [0.0, 0.0, 0])
    for nodeid, (wall, busy) in _spent.items():
        m = per_module[nodeid.split("::")[0]]
        m[0], m[1], m[2] = m[0] + wall, m[1] + busy, m[2] + 1
    tr = terminalreporter
    tr.section("wall and CPU per module (pytest_cpu)")
    tr.write_line(f"{'wall s':>8} {'CPUs':>5} {'idle CPU s':>10} {'tests':>5}  module")
    for module, (wall, busy, n) in sorted(per_module.items(), key=lambda kv: -kv[1][0]):
        tr.write_line(f"{wall:8.1f} {busy / max(wall, 1e-9):5.2f} {2 * wall - busy:10.1f} {n:5d}  {module}")
