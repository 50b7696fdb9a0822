"""What the node agent must never do, tried for real on this machine's 2 CPUs (pseudo-nodes "0"
and "1"; an LC hog pinned to CPU 0, in an LC cgroup2 the psi sensor reads; BE processes on CPU 0
in a v1 `cpuacct` cgroup; see PsiScene). The agent only ever changes a thread it selected and
recorded (tid + the thread's start time), and restore puts back exactly what it recorded:
- a BE thread that pinned itself before the move is left as it is, after SIGTERM and after
  SIGKILL + `restore`; a thread born after the move (it inherited the agent's mask) is restored;
- a pid the kernel gave to an LC process after the BE process that had it died is not the BE
  process: the LC process's children keep the mask their operator gave them;
- one agent per state file, from its first moment; `restore` refuses a live agent's state;
- a move the kernel refuses is not a move (log, metrics, cool-down);
- in cgroup v1 only the threads in the BE cgroup are BE, not the rest of their process;
- configs that would misbehave exit 2 naming the key.
Needs root and 2 CPUs (skips otherwise, saying so).
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
import test_agent_pseudo_nodes as pseudo
from test_agent_pseudo_nodes import HOG, INTERVAL, mask

pytestmark = pseudo.pytestmark
MOVE_TIMEOUT = 6.0  # PSI's avg10 is updated every 2 s


@pytest.fixture(scope="module")
def agent_bin() -> Path:
    assert pseudo.AGENT.exists(), f"{pseudo.AGENT} is missing: `make agent-static` builds it (make test does)"
    return pseudo.AGENT


UNIFIED = Path("/sys/fs/cgroup/unified")
PSI_THRESHOLD = 2  # % of avg10: the LC hog sharing CPU 0 with a BE hog stalls about half the time


class PsiScene(pseudo.Scene):
    """The pseudo-node scene with the psi sensor: one LC cgroup2 per node, the LC hog in node 0's.
    What these tests check is not the sensor, and PSI makes them deterministic on a busy machine:
    node 1's LC cgroup is empty, so node 1 is never pressured, whatever else runs on CPU 1 (the
    busy sensor would count it as LC). BE hogs start on CPU 0, so the LC hog stalls."""

    def __init__(self, tmp: Path):
        super().__init__(tmp)
        self.parent = UNIFIED / f"colosched-test-{uuid.uuid4().hex[:8]}"
        self.lcs = [self.parent / "lc0", self.parent / "lc1"]
        for d in [self.parent, *self.lcs]:
            d.mkdir()
        (self.lcs[0] / "cgroup.procs").write_text(f"{self.lc.pid}\n")

    def config(self, policy: str = "coarse", threshold: float = PSI_THRESHOLD, **extra: str) -> Path:
        path = super().config(policy, threshold, **extra)
        sensor = f'kind = "psi"\npsi_cgroups = ["{self.lcs[0]}", "{self.lcs[1]}"]'
        path.write_text(path.read_text().replace('kind = "busy"', sensor))
        return path

    def close(self) -> None:
        try:
            super().close()
        finally:
            for d in [*self.lcs, self.parent]:
                d.rmdir()


@pytest.fixture
def scene(tmp_path, agent_bin):
    if not (UNIFIED / "cpu.pressure").exists():
        pytest.skip(f"no {UNIFIED}/cpu.pressure (cgroup2 with PSI): the psi sensor cannot run")
    s = PsiScene(tmp_path)
    try:
        yield s
    finally:
        s.close()


def run_agent(agent_bin: Path, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    """One agent command run to its end, its output captured."""
    return subprocess.run([str(agent_bin), *args], capture_output=True, text=True, timeout=timeout)


def masks(pid: int) -> dict[int, str]:
    """Cpus_allowed_list of every thread of `pid`, by tid."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            status = task.joinpath("status").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue
        for line in status.splitlines():
            if line.startswith("Cpus_allowed_list:"):
                out[int(task.name)] = line.split()[1]
    return out


def wait_for(what, timeout: float, why):
    """Polls `what` until true; fails with `why` (a string, or a function giving one)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if got := what():
            return got
        time.sleep(0.02)
    raise AssertionError(f"{why() if callable(why) else why} (waited {timeout} s)")


def python_be(scene, script: str) -> tuple[subprocess.Popen, list[int]]:
    """A BE Python process running `script`, which prints one tid per line it wants known;
    returns the process and those tids (read until a line 'ready')."""
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    scene.procs.append(p)
    (scene.cgroup / "cgroup.procs").write_text(f"{p.pid}\n")
    scene.be.append(p)
    tids = []
    for line in p.stdout:
        if line.strip() == "ready":
            return p, tids
        tids.append(int(line))
    raise AssertionError(f"BE script ended early: {p.wait()}")


SELF_PINNED = """
import os, signal, sys, threading, time
os.sched_setaffinity(0, {0})
def pinned():
    os.sched_setaffinity(0, {1})
    print(threading.get_native_id(), flush=True)
    time.sleep(600)
threading.Thread(target=pinned, daemon=True).start()
time.sleep(0.2)
def born(*_):
    t = threading.Thread(target=time.sleep, args=(600,), daemon=True)
    t.start()
    print(t.native_id, flush=True)
signal.signal(signal.SIGUSR1, born)
print("ready", flush=True)
while True:
    pass
"""


@pytest.mark.parametrize("how", ["sigterm", "sigkill+restore"])
def test_restore_leaves_a_self_pinned_thread_alone_and_restores_one_born_after_the_move(
    scene, agent_bin, how
):
    be, [pinned] = python_be(scene, SELF_PINNED)
    assert masks(be.pid)[pinned] == "1" and masks(be.pid)[be.pid] == "0"
    agent = scene.start_agent()
    wait_for(
        lambda: masks(be.pid)[be.pid] == "1", MOVE_TIMEOUT, lambda: f"BE main thread not moved; {scene.log()}"
    )
    be.send_signal(signal.SIGUSR1)
    born = int(be.stdout.readline())
    assert masks(be.pid)[born] == "1", "a thread born after the move inherits the agent's mask"
    if how == "sigterm":
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(timeout=5) == 0, scene.log()
    else:
        agent.kill()
        agent.wait()
        r = run_agent(agent_bin, "restore", "--state-file", str(scene.tmp / "state.json"))
        assert r.returncode == 0, r.stderr
    now = masks(be.pid)
    assert now[be.pid] == "0", "the moved thread gets its original back"
    assert now[born] == "0", "the thread that inherited the agent's mask gets its process's original"
    assert now[pinned] == "1", "the thread that pinned itself before the move was never the agent's to change"


def test_a_reused_pid_is_not_the_be_process_that_had_it(scene, agent_bin):
    be = scene.add_be(["taskset", "-c", "0", "sh", "-c", HOG])
    agent = scene.start_agent()
    scene.wait_masks("1", timeout=MOVE_TIMEOUT)
    state = json.loads((scene.tmp / "state.json").read_text())
    assert str(be.pid) in state["tasks"], state
    be.kill()
    be.wait()
    scene.be.clear()
    # An LC supervisor gets the dead BE process's pid (the kernel hands out ns_last_pid + 1),
    # and starts a child its operator pins to CPU 1: the very mask the agent applied.
    lc = None
    for _ in range(50):
        Path("/proc/sys/kernel/ns_last_pid").write_text(str(be.pid - 1))
        lc_cmd = ["sh", "-c", "taskset -c 1 sleep 600 & echo $!; wait"]
        p = subprocess.Popen(lc_cmd, stdout=subprocess.PIPE, text=True)
        scene.procs.append(p)
        if p.pid == be.pid:
            lc = p
            break
        p.kill()
        p.wait()
    assert lc is not None, f"could not get pid {be.pid} again (other processes took it first)"
    child = int(lc.stdout.readline())
    wait_for(lambda: mask(child) == "1", 5, "the LC child's operator mask")
    agent.send_signal(signal.SIGTERM)
    assert agent.wait(timeout=5) == 0, scene.log()
    assert mask(child) == "1", "the LC child's mask is its operator's, not the agent's to restore"
    assert mask(lc.pid) == "0-1"
    assert mask(scene.lc.pid) == "0"


def test_one_agent_per_state_file_from_the_start_and_restore_refuses_a_live_one(scene, agent_bin):
    agent = scene.start_agent()  # nothing to move yet: no state file, but the lock is held
    lock = scene.tmp / "state.json.lock"
    wait_for(lambda: lock.exists() and lock.read_text().strip(), 5, lambda: f"no lock file; {scene.log()}")
    assert lock.read_text().strip() == str(agent.pid)
    second = run_agent(agent_bin, "run", "--config", str(scene.tmp / "agent.toml"))
    assert second.returncode == 1, second.stderr
    assert f"owned by a running agent (pid {agent.pid})" in second.stderr, second.stderr
    be = scene.add_be(["taskset", "-c", "0", "sh", "-c", HOG])
    scene.wait_masks("1", timeout=MOVE_TIMEOUT)
    r = run_agent(agent_bin, "restore", "--state-file", str(scene.tmp / "state.json"))
    assert r.returncode == 1 and "owned by a running agent" in r.stderr, r.stderr
    assert (scene.tmp / "state.json").exists(), "the live agent's state is kept"
    assert mask(be.pid) == "1", "and nothing was restored behind its back"
    agent.send_signal(signal.SIGTERM)
    assert agent.wait(timeout=5) == 0, scene.log()
    assert mask(be.pid) == "0"
    assert not lock.exists() and not (scene.tmp / "state.json").exists(), "nothing left after a clean exit"


CPUSETS = Path("/sys/fs/cgroup/cpuset")


@contextlib.contextmanager
def be_hog_held_on_cpu0(scene):
    """A BE hog in a v1 cpuset of CPU 0 only, so that pinning it to CPU 1 gets EINVAL; the
    agent started with metrics. Yields (hog, agent, metrics URL); the cpuset goes at the end."""
    cpuset = CPUSETS / f"colosched-test-{uuid.uuid4().hex[:8]}"
    cpuset.mkdir()
    try:
        (cpuset / "cpuset.mems").write_text("0")
        (cpuset / "cpuset.cpus").write_text("0")
        be = scene.add_be(["sh", "-c", HOG])
        (cpuset / "cgroup.procs").write_text(f"{be.pid}\n")
        agent = scene.start_agent("--metrics", "127.0.0.1:0")
        err = scene.tmp / "agent.err"
        wait_for(lambda: "metrics at" in err.read_text(), 5, lambda: f"no metrics address; {scene.log()}")
        at = next(line for line in err.read_text().splitlines() if "metrics at" in line)
        yield be, agent, f"http://127.0.0.1:{at.split(':')[-1].split('/')[0]}/metrics"
    finally:
        for p in scene.be:
            p.kill()
            p.wait()
        wait_for(lambda: not (cpuset / "cgroup.procs").read_text().split(), 5, "cpuset still has tasks")
        cpuset.rmdir()


def metrics(url: str) -> str:
    return urllib.request.urlopen(url, timeout=5).read().decode()


def metric(body: str, name: str) -> float:
    """The value of the sample `name` (with its labels) in an OpenMetrics text; 0 if absent."""
    found = [line.split()[-1] for line in body.splitlines() if line.split(" ")[0] == name]
    return float(found[0]) if found else 0.0


def test_a_move_the_kernel_refuses_is_not_a_move(scene, agent_bin):
    with be_hog_held_on_cpu0(scene) as (be, agent, url):
        err = scene.tmp / "agent.err"
        wait_for(
            lambda: "einval" in err.read_text(), 4 * MOVE_TIMEOUT, lambda: f"no EINVAL logged; {scene.log()}"
        )
        assert mask(be.pid) == "0"
        decisions = scene.decisions(wait=1)
        assert decisions and not [m for d in decisions for m in d["moved"]], "no move is logged"
        assert any("did not take" in d["reason"] for d in decisions), decisions[-3:]
        assert "moved" not in err.read_text()
        body = metrics(url)
        assert 'colosched_agent_errors_total{kind="einval"}' in body, body
        assert "colosched_agent_moves_total{" not in body, body
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(timeout=5) == 0, scene.log()


def test_a_move_that_keeps_failing_backs_off_until_it_takes(scene, agent_bin):
    """The BE hog is in a v1 cpuset of CPU 0 only, so every move to CPU 1 gets EINVAL. The agent
    tries again one interval later, then 2, 4, 8 intervals later (decide::backoff), not at
    every look; once the hog may leave, the next try moves it, nothing is held back, and restore
    puts back the mask it had before that move (not the one of the tries that failed)."""
    with be_hog_held_on_cpu0(scene) as (be, agent, url):
        err = scene.tmp / "agent.err"

        def tries() -> list[int]:
            return [d["cycle"] for d in scene.decisions() if "did not take" in d["reason"]]

        wait_for(tries, 4 * MOVE_TIMEOUT, lambda: f"no move tried; {scene.log()}")
        # The fourth try comes 1 + 2 + 4 = 7 intervals after the first (one try per look: 8 s).
        wait_for(lambda: len(tries()) >= 4, 10 * INTERVAL, lambda: f"{tries()} tries; {scene.log()}")
        body = metrics(url)
        cycles = tries()
        samples = int(err.read_text().split(" sample(s) per interval")[0].split()[-1])
        gaps = [b - a for a, b in zip(cycles, cycles[1:])]
        print(f"tries at cycles {cycles} ({samples} cycles an interval), gaps {gaps}")
        # Tries 1 interval apart, then 2, 4: each gap at least its back-off, and at most one
        # interval more (a look that moved nothing is retaken once an interval) plus a cycle.
        assert len(gaps) == 3, cycles
        for i, gap in enumerate(gaps):
            assert samples << i <= gap <= (samples << i) + samples + 1, (i, gaps)
        assert metric(body, 'colosched_agent_errors_total{kind="einval"}') == 4, body
        assert metric(body, "colosched_agent_backoff_tasks") == 1, body
        assert mask(be.pid) == "0"
        # Freed from the cpuset right after a try (the kernel gives it the root's CPUs back):
        # the next try, 8 intervals after the last, takes.
        (CPUSETS / "cgroup.procs").write_text(f"{be.pid}\n")
        assert mask(be.pid) == "0-1"
        wait_for(lambda: mask(be.pid) == "1", 10 * INTERVAL + 2, lambda: f"not moved; {scene.log()}")
        assert tries() == cycles, "no try failed since"
        moved = [(d["cycle"], m["pid"]) for d in scene.decisions(wait=1) for m in d["moved"]]
        assert [pid for _, pid in moved] == [be.pid], moved
        assert moved[0][0] - cycles[-1] >= samples << 3, "not before its back-off ended"
        assert metric(metrics(url), "colosched_agent_backoff_tasks") == 0
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(timeout=5) == 0, scene.log()
        assert mask(be.pid) == "0-1", f"restored to the mask it had before the move; {scene.log()}"


PARTIAL = """
import os, threading, time
os.sched_setaffinity(0, {0})
def spin():
    print(threading.get_native_id(), flush=True)
    while True:
        pass
threading.Thread(target=spin, daemon=True).start()
time.sleep(0.2)
print("ready", flush=True)
time.sleep(600)
"""


def test_in_cgroup_v1_only_the_threads_in_the_be_cgroup_move(scene, agent_bin):
    """An LC process whose spinning worker thread (only) was written into the BE cgroup's
    `tasks`: the agent moves that thread and leaves the process's main thread alone."""
    p = subprocess.Popen([sys.executable, "-c", PARTIAL], stdout=subprocess.PIPE, text=True)
    scene.procs.append(p)
    worker = int(p.stdout.readline())
    assert p.stdout.readline().strip() == "ready"
    (scene.cgroup / "tasks").write_text(f"{worker}\n")
    assert (scene.cgroup / "cgroup.procs").read_text().split() == [str(p.pid)], "v1 lists the process"
    agent = scene.start_agent()
    wait_for(lambda: masks(p.pid)[worker] == "1", MOVE_TIMEOUT, lambda: f"BE thread not moved; {scene.log()}")
    time.sleep(2 * INTERVAL)
    assert masks(p.pid)[p.pid] == "0", "the LC main thread is not BE and is never touched"
    agent.send_signal(signal.SIGTERM)
    assert agent.wait(timeout=5) == 0, scene.log()
    assert masks(p.pid) == {p.pid: "0", worker: "0"}


@pytest.mark.parametrize(
    "args, text",
    [
        (
            ["--log-level", "loud", "check-config", "--config", "x.toml"],
            "invalid value 'loud' for '--log-level",
        ),
        (
            ["--log-format", "xml", "check-config", "--config", "x.toml"],
            "invalid value 'xml' for '--log-format",
        ),
        (["run", "--config", "x.toml", "--interval", "0"], "--interval: 0 is not a number of seconds"),
        (["run", "--config", "x.toml", "--interval", "soon"], "invalid value 'soon' for '--interval"),
        (["check-config", "--config", "missing.toml"], "missing.toml: No such file"),
        (["plan", "--once", "--config", "x.toml", "--policy", "heat"], "--policy: "),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(tmp_path, agent_bin, args, text):
    (tmp_path / "x.toml").write_text("[be]\ncomm = '^never$'\n")
    r = subprocess.run([str(agent_bin), *args], capture_output=True, text=True, timeout=30, cwd=tmp_path)
    assert r.returncode == 2 and text in r.stderr, r.stderr


@pytest.mark.parametrize(
    "lines, key",
    [
        (["[limits]", "cooldown_s = 1e300"], "limits.cooldown_s: must be between 0 and 604800"),
        (["[sensor]", "kind = 'busy'", "threshold = 1.5"], "sensor.threshold: the busy sensor"),
        (["[be]", "comm = ''"], 'be.comm: "" matches every process name'),
        (["[be]", "comm = '.'"], 'be.comm: "." matches "systemd"'),
        (["[be]", "cgroups = ['']"], "be.cgroups: an empty path"),
        (["[be]", "cgroups = ['{tmp}']"], "be.cgroups: {tmp}: not a cgroup"),
        (
            ["[be]", "cgroups = ['/sys/fs/cgroup/cpuacct/nope']"],
            "be.cgroups: /sys/fs/cgroup/cpuacct/nope: No such",
        ),
        (["[topology]", "pseudo_nodes = ['0', '4000']"], "topology.pseudo_nodes: CPU 4000 does not exist"),
        (["[be]", "cgroups = ['/sys/fs/cgroup/cpuacct']"], "be.cgroups: /sys/fs/cgroup/cpuacct is the root"),
        (["state_file = ''"], "state_file: an empty path"),
        (
            ["state_file = '/proc/colosched/state.json'"],
            "state_file: /proc/colosched/state.json cannot be made",
        ),
        (
            ["state_file = '{tmp}/agent.toml/run/state.json'"],
            "state_file: {tmp}/agent.toml/run/state.json cannot be made: {tmp}/agent.toml is not a directory",
        ),
        (
            ["[limits]", "max_moves_per_cycle = 1e300"],
            "limits.max_moves_per_cycle: TOML parse error at line {line}, column 23: expected an integer, "
            "got the float 1e300",
        ),
        (["[limits]", "max_moves_per_cycle = 0"], "limits.max_moves_per_cycle: must be an integer from 1"),
        (
            ["[sensor]", "hysteresis = 2.0"],
            "sensor.hysteresis: TOML parse error at line {line}, column 14: expected an integer, got the "
            "float 2.0",
        ),
        (
            ["[sensor]", "samples_per_interval = 51"],
            "sensor.samples_per_interval: must be an integer from 1 to 50",
        ),
        (["seed = -1"], "seed: must be an integer from 0 to 9223372036854775807, got -1"),
        (["[topology]", "procfs_root = '{tmp}/proc'"], "topology.procfs_root: {tmp}/proc/stat"),
        (
            ["decision_log = '{tmp}/logs/decisions.jsonl'"],
            "decision_log: {tmp}/logs/decisions.jsonl cannot be made: {tmp}/logs is not a directory",
        ),
        (["decision_log = '{tmp}'"], "decision_log: {tmp} is a directory"),
    ],
)
@pytest.mark.parametrize("command", ["run", "plan --once", "check-config"])
def test_configs_that_would_misbehave_exit_2_naming_the_key(tmp_path, agent_bin, lines, key, command):
    base = {
        "": ["interval_s = 0.5", f"state_file = '{tmp_path}/state.json'"],
        "[topology]": ["pseudo_nodes = ['0', '1']"],
        "[be]": ["comm = '^colosched-never$'"],
    }
    section = ""
    for line in lines:
        line = line.replace("{tmp}", str(tmp_path))
        if line.startswith("["):
            section = line
            base.setdefault(section, [])
            continue
        k = line.split("=")[0].strip()
        base[section] = [x for x in base.get(section, []) if x.split("=")[0].strip() != k] + [line]
    text = "\n".join(base[""]) + "\n" + "".join(f"{s}\n" + "\n".join(v) + "\n" for s, v in base.items() if s)
    config = tmp_path / "agent.toml"
    config.write_text(text)
    r = run_agent(agent_bin, *command.split(), "--config", str(config))
    assert r.returncode == 2, (r.returncode, r.stderr, text)
    line = text.splitlines().index(lines[-1].replace("{tmp}", str(tmp_path))) + 1
    key = key.replace("{tmp}", str(tmp_path)).replace("{line}", str(line))
    # toml's own refusal has the line (and column) in its message; a check's error names the line.
    where = f"{config}: " if "TOML parse error" in key else f"{config}:{line}: "
    assert where + key in r.stderr, (r.stderr, text)
    assert not (tmp_path / "state.json").exists() and not (tmp_path / "state.json.lock").exists()


def test_the_state_is_bounded_by_the_live_threads_under_churn(scene, agent_bin):
    """A BE launcher starts a short-lived child pinned to CPU 0 every 20 ms (600 in all); the agent
    moves and records each. The state file must drop the dead ones: it stays near the live count
    (at most the 256 the state is checked at, plus one cycle's worth), not the hundreds moved."""
    # Something other than BE on CPU 0, so the LC hog keeps stalling once BE has left it.
    scene.spawn(["taskset", "-c", "0", "sh", "-c", HOG])
    launcher = scene.add_be(
        ["sh", "-c", "for i in $(seq 600); do taskset -c 0 sleep 1 & sleep 0.02; done; wait"]
    )
    scene.start_agent()
    state = scene.tmp / "state.json"
    biggest = 0
    t0 = time.monotonic()
    while launcher.poll() is None and time.monotonic() - t0 < 60:
        try:
            biggest = max(biggest, len(json.loads(state.read_text())["tasks"]))
        except (FileNotFoundError, json.JSONDecodeError):
            pass  # not written yet (the agent renames a complete file into place)
        time.sleep(0.1)
    assert launcher.poll() == 0, "the launcher ran to its end"
    moved = {m["pid"] for d in scene.decisions() for m in d["moved"]}
    print(f"{len(moved)} processes moved, the state held at most {biggest} threads")
    assert len(moved) > 300, f"too few moves to show the bound ({len(moved)}); {scene.log()}"
    assert biggest <= 256 + 64, f"the state kept dead threads: {biggest} entries"
