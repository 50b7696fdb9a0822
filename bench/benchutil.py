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


CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_cpu() -> dict[int, tuple[str, int, int]]:
    """Every process: (comm, utime+stime ticks, ppid)."""
    out = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                text = (d / "stat").read_text()
            except OSError:
                continue
            comm = text[text.index("(") + 1 : text.rindex(")")]
            f = text.rsplit(")", 1)[1].split()
            out[int(d.name)] = (comm, int(f[11]) + int(f[12]), int(f[1]))
    return out


def foreign_cpu(a: dict, b: dict, ours: set[int], seconds: float) -> tuple[float, list[str]]:
    """CPUs used between two proc_cpu() readings by user processes not ours (kernel threads,
    which do the taps' work, count as ours); the three busiest, named. A process counts as ours
    if it or its parent is in `ours`."""
    used = []
    for pid, (comm, ticks, ppid) in b.items():
        if pid in ours or ppid in ours or ppid == 2 or pid == 2:
            continue
        d = ticks - a.get(pid, (comm, 0, ppid))[1]
        if d > 0:
            used.append((d / CLK_TCK, f"{comm}[{pid}]"))
    used.sort(reverse=True)
    return sum(u for u, _ in used) / max(seconds, 1e-9), [f"{n} {u:.2f}s" for u, n in used[:3]]


def descendants(procs: dict[int, tuple[str, int, int]], root: int) -> set[int]:
    """`root` and every process below it in a proc_cpu() reading."""
    children: dict[int, list[int]] = {}
    for pid, (_, _, ppid) in procs.items():
        children.setdefault(ppid, []).append(pid)
    ours, todo = set(), [root]
    while todo:
        pid = todo.pop()
        ours.add(pid)
        todo.extend(children.get(pid, []))
    return ours


def cpu_times(cpu: int) -> tuple[int, int]:
    """(busy, steal) jiffies of `cpu` from /proc/stat (busy: everything but idle, iowait, steal)."""
    with open("/proc/stat") as f:
        lines = f.read().splitlines()
    for line in lines:
        f = line.split()
        if f[0] == f"cpu{cpu}":
            user, nice, system, idle, iowait, irq, softirq, steal = (int(x) for x in f[1:9])
            return user + nice + system + irq + softirq, steal
    raise RuntimeError(f"/proc/stat has no cpu{cpu}")


@contextlib.contextmanager
def vcpus_kept_awake(enabled: bool = True, cpus: set[int] | None = None):
    """While the block runs, a SCHED_IDLE busy loop on every CPU (or on `cpus`) keeps this VM's
    vCPUs from halting, as `idle=poll` or the guest haltpoll cpuidle driver would: a thread that
    wakes on an idle CPU then needs no exit to the host (bench/machine/vcpu_wake.c measures what
    that costs). Yields {cpu: the spinner's pid} (empty when not `enabled` or `cpus` is empty)."""
    spinners = {}
    try:
        if enabled:
            for cpu in sorted(os.sched_getaffinity(0) if cpus is None else cpus):
                argv = [sys.executable, "-c", _SPIN, str(cpu), str(os.getpid())]
                spinners[cpu] = subprocess.Popen(argv)
        if spinners:
            time.sleep(0.2)  # let them start
        yield {cpu: p.pid for cpu, p in spinners.items()}
    finally:
        for p in spinners.values():
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


def _run(cmd: list[str], ns: str | None = None, env=None, timeout: float = 120):
    prefix = ["ip", "netns", "exec", ns] if ns else []
    return subprocess.run([*prefix, *cmd], capture_output=True, text=True, timeout=timeout, env=env)


@contextlib.contextmanager
def loopback_netns(name: str):
    """A network namespace with only loopback, up; on exit every process left in it is killed
    and it is deleted. Needs root and iproute2."""
    if _run(["ip", "netns", "add", name]).returncode != 0:
        raise RuntimeError(f"ip netns add {name} failed (root and iproute2 needed)")
    try:
        _run(["ip", "link", "set", "lo", "up"], ns=name)
        yield name
    finally:
        for pid in _run(["ip", "netns", "pids", name]).stdout.split():  # only our namespace's
            try:
                os.kill(int(pid), 9)
            except ProcessLookupError:
                pass
        _run(["ip", "netns", "del", name])


@contextlib.contextmanager
def loopback_ray(ns: str, temp: Path, cpus: list[int], port: int = 6390):
    """A Ray cluster inside namespace `ns` (see loopback_netns): a head and a worker node per
    further entry of `cpus` (CPUs each), started with `ray start --block` one after another (two
    raylets starting together on one address can pick the same port, and one never joins).
    Yields (address, env); stops every node it started. Every Ray process, nodes and drivers,
    must get `env`: a HOME under `temp`, so the user's ~/.ray is neither read nor written (Ray
    turns token authentication on when ~/.ray/auth_token exists), and authentication off on
    this loopback-only cluster."""
    ray = str(Path(sys.executable).parent / "ray")
    (temp / "home").mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
    env["HOME"] = str(temp / "home")
    address = f"127.0.0.1:{port}"
    probe = f"import ray; ray.init(address='{address}'); print(sum(n['Alive'] for n in ray.nodes()))"
    nodes: list[subprocess.Popen] = []
    try:
        for i, n in enumerate(cpus):
            common = ["--num-cpus", str(n), "--block", "--disable-usage-stats", "--temp-dir", str(temp)]
            head = ["--head", "--port", str(port), "--include-dashboard=false"]
            where = head if i == 0 else ["--address", address]
            log = open(temp / f"node{i}.log", "w")
            cmd = ["ip", "netns", "exec", ns, ray, "start", *where, *common]
            nodes.append(subprocess.Popen(cmd, stdout=log, stderr=log, env=env, start_new_session=True))
            deadline = time.monotonic() + 60
            while (r := _run([sys.executable, "-c", probe], ns=ns, env=env)).stdout.strip() != str(i + 1):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"Ray node {i} did not join: {r.stderr[-1500:]} "
                                       f"{(temp / f'node{i}.log').read_text()[-1500:]}")  # fmt: skip
                time.sleep(0.5)
        yield address, env
    finally:
        # The workers first, then the head. Stopped together, the workers wait 20–30 s for the
        # gone head before they end; stopped first, they end in about a second. The head, alone,
        # then lingers 20 s on SIGTERM with nothing left to serve: killed after 5 (measured).
        for group, grace_s in ((nodes[1:], 20), (nodes[:1], 5)):
            for p in group:
                if p.poll() is None:
                    os.killpg(p.pid, 15)
            for p in group:
                try:
                    p.wait(timeout=grace_s)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, 9)
                    p.wait()
