"""Small helpers the bench scripts share (they run as `python bench/<script>.py`, so this is importable)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

# A busy loop pinned to one CPU (argv[1]) at SCHED_IDLE: it runs only when nothing else wants
# that CPU, and the scheduler preempts it at once for any normal task that wakes up there. It dies
# with the bench (argv[2]), even one killed with SIGKILL.
_SPIN = """import ctypes, os, sys
ctypes.CDLL(None).prctl(1, 9)  # PR_SET_PDEATHSIG = SIGKILL
if os.getppid() != int(sys.argv[2]):
    sys.exit()  # the bench died before the line above
os.sched_setaffinity(0, {int(sys.argv[1])})
os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
while True:
    pass
"""


def steal_ticks() -> tuple[int, int]:
    """(steal, all) ticks of the whole machine from /proc/stat: steal is time the host ran
    something else while one of this VM's vCPUs had work."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return v[7], sum(v)


def steal_fraction(before: tuple[int, int], after: tuple[int, int]) -> float:
    return (after[0] - before[0]) / max(1, after[1] - before[1])


@contextlib.contextmanager
def vcpus_kept_awake(enabled: bool = True):
    """While the block runs, a SCHED_IDLE busy loop on every CPU keeps this VM's vCPUs from
    halting, as `idle=poll` or the guest haltpoll cpuidle driver would: a thread that wakes on an
    idle CPU then needs no exit to the host (bench/machine/vcpu_wake.c measures what that costs)."""
    spinners = []
    try:
        if enabled:
            for cpu in sorted(os.sched_getaffinity(0)):
                spinners.append(subprocess.Popen([sys.executable, "-c", _SPIN, str(cpu), str(os.getpid())]))
            time.sleep(0.2)  # let them start
        yield
    finally:
        for p in spinners:
            p.kill()
            p.wait()


def table(title: str, header: list[str], rows: list[list]) -> None:
    """Prints a Markdown table under a ### title."""
    print(f"\n### {title}\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        print("| " + " | ".join(str(x) for x in r) + " |")


def remove_cgroups(cgroups: list[Path]) -> None:
    """rmdir each cgroup; killed tasks leave a cgroup only once reaped, hence the retries."""
    for cg in cgroups:
        for _ in range(50):
            try:
                cg.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.1)
        else:
            print(f"warning: could not remove cgroup {cg}", file=sys.stderr)
