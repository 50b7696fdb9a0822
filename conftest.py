"""For every test of both suites (python/tests, tests): a failure also says how busy the machine
was while the test ran. Many tests here check a real agent's decisions under a load they make
themselves (an agent correctly moves nothing when every CPU is pressured), so a build or another
suite running beside them makes them fail; the report names the processes outside this pytest
that used the CPUs, and the hypervisor's steal, so such a failure is told apart from a bug."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

sys.path.append(str(Path(__file__).resolve().parent / "bench"))
from benchutil import descendants, foreign_cpu, proc_cpu, steal_fraction, steal_ticks  # noqa: E402

_START = pytest.StashKey[tuple]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    item.stash[_START] = (proc_cpu(), steal_ticks(), time.monotonic())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    start = item.stash.get(_START, None)
    if report.failed and start is not None:
        procs0, steal0, t0 = start
        now = proc_cpu()
        seconds = time.monotonic() - t0
        used, top = foreign_cpu(procs0, now, descendants(now, os.getpid()), seconds)
        report.sections.append(
            (
                "machine while the test ran",
                f"processes outside this pytest (those still running) used {used:.2f} CPUs"
                f" over {seconds:.1f} s ({', '.join(top) or 'none'}); hypervisor steal"
                f" {100 * steal_fraction(steal0, steal_ticks()):.1f} %",
            )
        )
    return report
