"""The node agent on this machine, for real: its 2 CPUs as pseudo-nodes, real CPU hogs, real
affinities, a real cgroup. The LC hog is pinned to CPU 0; BE hogs live in a cgroup of the v1
`cpuacct` hierarchy, which selects them and gives the busy sensor their exact per-CPU time, without
giving them a CPU weight of their own (in the `cpu` hierarchy the scheduler's group weights would
already keep them off CPU 0, and the test would not show what the agent does).

These tests need root (cgroups, sched_setaffinity on other processes) and 2 CPUs; they say so and
skip otherwise. A busy machine (another job hogging CPU 1) can make CPU 1 look pressured too; CI
runs them on a quiet machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
AGENT = ROOT / "target/x86_64-unknown-linux-gnu/release/colosched-agent"
BE_HIERARCHY = Path("/sys/fs/cgroup/cpuacct")
INTERVAL = 0.5
HOG = "while :; do :; done"

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: cgroups and other processes' affinities"),
    pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs to make 2 pseudo-nodes"),
]


@pytest.fixture(scope="module")
def agent_bin() -> Path:
    assert AGENT.exists(), f"{AGENT} is missing: `make agent-static` builds it (make test does)"
    return AGENT


def config_line(text: str, key: str) -> int:
    """The 1-based line where a config `text` writes `key` (`vm[0].qmp: …` is at its `qmp =`;
    a table's key, `classes: …`, at its `[classes]`), which the agent's error names."""
    leaf = key.split(":")[0].split(".")[-1]
    lines = text.splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.split("=")[0].strip() in (leaf, f"[{leaf}]"))


def mask(pid: int) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split()[1]
    raise AssertionError(f"no Cpus_allowed_list for {pid}")


def thread_masks(pid: int) -> set[str]:
    out = set()
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            status = Path(f"/proc/{pid}/task/{tid}/status").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue  # the thread ended meanwhile
        for line in status.splitlines():
            if line.startswith("Cpus_allowed_list:"):
                out.add(line.split()[1])
    return out


class Scene:
    """An LC hog on CPU 0 and BE processes in a fresh cgroup; everything removed afterwards."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.cgroup = BE_HIERARCHY / f"colosched-test-{uuid.uuid4().hex[:8]}"
        self.cgroup.mkdir()
        self.procs: list[subprocess.Popen] = []
        self.lc = self.spawn(["taskset", "-c", "0", "sh", "-c", HOG])
        self.be: list[subprocess.Popen] = []
        self.agent: subprocess.Popen | None = None

    def spawn(self, cmd: list[str]) -> subprocess.Popen:
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(p)
        return p

    def add_be(self, cmd: list[str]) -> subprocess.Popen:
        p = self.spawn(cmd)
        (self.cgroup / "cgroup.procs").write_text(f"{p.pid}\n")
        self.be.append(p)
        return p

    def config(self, policy: str = "coarse", threshold: float = 0.3, **extra: str) -> Path:
        lines = [
            f"interval_s = {INTERVAL}",
            f'policy = "{policy}"',
            f'state_file = "{self.tmp / "state.json"}"',
            f'decision_log = "{self.tmp / "decisions.jsonl"}"',
            "[topology]",
            'pseudo_nodes = ["0", "1"]',
            "[sensor]",
            'kind = "busy"',
            f"threshold = {threshold}",
            "hysteresis = 1",
            "[be]",
            f'cgroups = ["{self.cgroup}"]',
            "[limits]",
            "cooldown_s = 0",
            *[f"{k} = {v}" for k, v in extra.items()],
        ]
        path = self.tmp / "agent.toml"
        path.write_text("\n".join(lines) + "\n")
        return path

    def start_agent(self, *args: str) -> subprocess.Popen:
        self.agent = subprocess.Popen(
            [str(AGENT), "run", "--config", str(self.config()), *args],
            stderr=open(self.tmp / "agent.err", "w"),  # noqa: SIM115 - closed with the process
        )
        return self.agent

    def wait_masks(self, want: str, timeout: float) -> float:
        """Seconds until every BE process has affinity `want`; fails after `timeout`."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if all(mask(p.pid) == want for p in self.be):
                return time.monotonic() - t0
            time.sleep(0.02)
        raise AssertionError(
            f"BE masks {[mask(p.pid) for p in self.be]} != {want} after {timeout}s; {self.log()}"
        )

    def log(self) -> str:
        err = (self.tmp / "agent.err").read_text() if (self.tmp / "agent.err").exists() else ""
        return f"agent stderr:\n{err}"

    def decisions(self, wait: float = 0.0) -> list[dict]:
        """The decision log; with `wait`, polls that long for a first line (the agent logs a move
        just after making it, so a test that saw the masks change may be a moment early)."""
        path = self.tmp / "decisions.jsonl"
        t0 = time.monotonic()
        while not (path.exists() and path.read_text().endswith("\n")) and time.monotonic() - t0 < wait:
            time.sleep(0.02)
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def close(self) -> None:
        if self.agent and self.agent.poll() is None:
            self.agent.kill()
            self.agent.wait()
        for p in self.procs:
            p.kill()
            p.wait()
        # Forks of BE processes may still be dying; the cgroup can go once they are gone.
        for _ in range(100):
            leftover = (self.cgroup / "cgroup.procs").read_text().split()
            for pid in leftover:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                self.cgroup.rmdir()
                return
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"could not remove {self.cgroup}")


@pytest.fixture
def scene(tmp_path, agent_bin):
    s = Scene(tmp_path)
    try:
        yield s
    finally:
        s.close()


def test_coarse_moves_be_to_cpu1_within_two_intervals_and_sigterm_restores(scene):
    be = [scene.add_be(["sh", "-c", HOG]) for _ in range(3)]
    before = [mask(p.pid) for p in be]
    assert before == ["0-1"] * 3
    agent = scene.start_agent("--metrics", "127.0.0.1:0")
    took = scene.wait_masks("1", timeout=2 * INTERVAL + 0.3)
    assert mask(scene.lc.pid) == "0", "the LC task is never touched"
    assert json.loads((scene.tmp / "state.json").read_text())["tasks"], "originals recorded before the change"
    agent.send_signal(signal.SIGTERM)
    assert agent.wait(timeout=5) == 0, scene.log()
    assert [mask(p.pid) for p in be] == before, "SIGTERM puts the original masks back"
    assert not (scene.tmp / "state.json").exists(), "nothing left behind after a clean exit"
    moved = [m for d in scene.decisions() for m in d["moved"]]
    assert {m["pid"] for m in moved} == {p.pid for p in be}
    assert all(m["to_node"] == 1 for m in moved)
    print(f"BE moved {took:.2f} s after the agent started (interval {INTERVAL} s)")


def test_sigkill_then_restore_puts_masks_back(scene, agent_bin):
    be = [scene.add_be(["sh", "-c", HOG]) for _ in range(2)]
    agent = scene.start_agent()
    scene.wait_masks("1", timeout=2 * INTERVAL + 0.3)
    agent.kill()
    agent.wait()
    assert [mask(p.pid) for p in be] == ["1", "1"], "SIGKILL cannot restore: the masks stay"
    r = subprocess.run(
        [str(agent_bin), "restore", "--state-file", str(scene.tmp / "state.json")],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert "restored 2 thread(s)" in r.stdout
    assert [mask(p.pid) for p in be] == ["0-1", "0-1"]
    assert not (scene.tmp / "state.json").exists()


def test_fine_policy_threads_follow_and_dry_run_changes_nothing(scene, agent_bin):
    # A BE process that starts a new thread every 100 ms: threads born after the move follow it.
    threaded = scene.add_be(
        [
            sys.executable,
            "-c",
            "import threading, time\n"
            "def spin():\n"
            "    while True: pass\n"
            "while True:\n"
            "    threading.Thread(target=spin, daemon=True).start(); time.sleep(0.1)\n",
        ]
    )
    scene.add_be(["sh", "-c", HOG])
    dry = subprocess.Popen(
        [str(agent_bin), "run", "--config", str(scene.config("fine:mem")), "--dry-run"],
        stderr=subprocess.PIPE,
    )
    time.sleep(3 * INTERVAL)
    dry.send_signal(signal.SIGTERM)
    assert dry.wait(timeout=5) == 0
    assert all(mask(p.pid) == "0-1" for p in scene.be), "--dry-run changes nothing"
    assert not (scene.tmp / "state.json").exists()
    planned = [m for d in scene.decisions() for m in d["moved"]]
    assert planned and all(d["dry_run"] for d in scene.decisions()), "dry run still logs its plan"

    scene.config("fine:mem")
    agent = subprocess.Popen([str(agent_bin), "run", "--config", str(scene.tmp / "agent.toml")])
    scene.agent = agent
    scene.wait_masks("1", timeout=2 * INTERVAL + 0.3)
    time.sleep(3 * INTERVAL)  # more threads are born meanwhile
    assert thread_masks(threaded.pid) == {"1"}, "every thread, old and new, is on node 1"
    agent.send_signal(signal.SIGTERM)
    assert agent.wait(timeout=5) == 0
    assert thread_masks(threaded.pid) == {"0-1"}, "new threads are restored like their process"


def test_coarse_catches_threads_born_during_the_move(scene, agent_bin):
    # Coarse moves every BE process, so threads born meanwhile are found in the cgroup's thread
    # list (one read) rather than by listing each process again. A thread storm: a new spinning
    # thread every 2 ms, each living 50 ms, plus 8 long-lived ones.
    storm = scene.add_be(
        [
            sys.executable,
            "-c",
            "import threading, time\n"
            "def spin(t):\n"
            "    end = time.monotonic() + t\n"
            "    while time.monotonic() < end: pass\n"
            "for _ in range(8): threading.Thread(target=spin, args=(1e9,), daemon=True).start()\n"
            "while True:\n"
            "    threading.Thread(target=spin, args=(0.05,), daemon=True).start(); time.sleep(0.002)\n",
        ]
    )
    scene.add_be(["sh", "-c", HOG])
    scene.start_agent()
    scene.wait_masks("1", timeout=2 * INTERVAL + 0.3)
    time.sleep(2 * INTERVAL)
    assert thread_masks(storm.pid) == {"1"}, f"a thread kept the old mask; {scene.log()}"
    scene.agent.send_signal(signal.SIGTERM)
    assert scene.agent.wait(timeout=5) == 0, scene.log()
    assert thread_masks(storm.pid) == {"0-1"}, "threads born after the move are restored too"


def test_churn_of_forking_be_processes_leaves_nothing_behind(scene, agent_bin):
    # A BE process forking short-lived children as fast as it can: tasks vanish mid-cycle (ESRCH).
    forker = scene.add_be(
        ["sh", "-c", "while :; do sh -c 'i=0; while [ $i -lt 200 ]; do i=$((i+1)); done' & done"]
    )
    scene.add_be(["sh", "-c", HOG])
    # The LC hog shares CPU 0 with the fork storm: its usage drops to about 1 / (runnable tasks),
    # its wait makes up the rest, so node 0 reads near 1. Node 1 reads the wait of whatever else
    # runs there behind BE (kernel threads, the test itself): well under 0.5 on a quiet machine.
    agent = subprocess.Popen(
        [str(agent_bin), "run", "--config", str(scene.config(threshold=0.5)), "--interval", "0.1"],
        stderr=open(scene.tmp / "agent.err", "w"),  # noqa: SIM115
    )
    scene.agent = agent
    time.sleep(4)
    assert agent.poll() is None, f"the agent died during churn: {scene.log()}"
    cycles = scene.decisions()
    assert len(cycles) >= 10, f"only {len(cycles)} cycles in 4 s at 0.1 s"
    assert any(d["moved"] for d in cycles), [(d["loads"], d["reason"]) for d in cycles]
    agent.send_signal(signal.SIGTERM)
    assert agent.wait(timeout=5) == 0, scene.log()
    assert not (scene.tmp / "state.json").exists()
    assert mask(forker.pid) == "0-1"
    # Children forked after the move inherited node 1's mask; restore found them by that mask.
    kids = (scene.cgroup / "cgroup.procs").read_text().split()
    pinned = [pid for pid in kids if Path(f"/proc/{pid}").exists() and _mask_or_none(int(pid)) == "1"]
    assert not pinned, f"forks left pinned after restore: {pinned}"
    print(f"{len(cycles)} cycles, errors logged: {sum(d['errors'] for d in cycles)}")


def _mask_or_none(pid: int) -> str | None:
    try:
        return mask(pid)
    except (FileNotFoundError, ProcessLookupError):
        return None


def test_plan_once_json_and_metrics(scene, agent_bin):
    scene.add_be(["sh", "-c", HOG])
    r = subprocess.run(
        [str(agent_bin), "plan", "--once", "--json", "--config", str(scene.config())],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)
    assert plan["sensor"] == "busy"
    assert [(n["id"], n["cpus"]) for n in plan["nodes"]] == [(0, "0"), (1, "1")]
    assert plan["nodes"][0]["load"] > 0.3, "the LC hog loads node 0"
    assert plan["moves"], plan
    assert set(plan["moves"][0]) >= {"pid", "comm", "from_node", "to_node", "reason"}
    # LC demand, apart: plan --once measures the LC wait from its first sample.
    node0 = plan["nodes"][0]
    assert node0["wait"] is not None and abs(node0["load"] - node0["usage"] - node0["wait"]) < 1e-9, node0
    assert mask(scene.be[0].pid) == "0-1", "plan changes nothing"

    agent = scene.start_agent("--metrics", "127.0.0.1:19464")
    scene.wait_masks("1", timeout=2 * INTERVAL + 0.3)
    body = urllib.request.urlopen("http://127.0.0.1:19464/metrics", timeout=5).read().decode()
    assert 'colosched_agent_node_load{node="0",sensor="busy"}' in body
    assert 'colosched_agent_node_lc_usage{node="0"}' in body
    assert "colosched_agent_moves_total{reason=" in body
    assert "colosched_agent_cycle_duration_seconds_count" in body
    agent.send_signal(signal.SIGTERM)
    assert agent.wait(timeout=5) == 0


def test_a_second_agent_refuses_the_state_file_of_a_live_one(scene, agent_bin):
    scene.add_be(["sh", "-c", HOG])
    scene.start_agent()
    scene.wait_masks("1", timeout=2 * INTERVAL + 0.3)
    r = subprocess.run(
        [str(agent_bin), "run", "--config", str(scene.tmp / "agent.toml")],
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert r.returncode == 1
    assert "owned by a running agent" in r.stderr
    assert mask(scene.be[0].pid) == "1", "the refused agent changed nothing"


@pytest.mark.parametrize(
    "config, key",
    [
        (
            "[be]\ncomm = 'x'\n[sensor]\nhysterisis = 2\n",
            "sensor.hysterisis: TOML parse error at line 4, column 1: unknown field `hysterisis`",
        ),
        ("interval_s = -1\n[be]\ncomm = 'x'\n", "interval_s: must be"),
        ("[topology]\npseudo_nodes = ['0']\n", "be: no best-effort selector"),
        ("policy = 'fine:heat'\n[be]\ncomm = 'x'\n", "policy:"),
        (
            "[topology]\npseudo_nodes = ['0', '1']\n[sensor]\nkind = 'psi'\npsi_cgroups = ['/x']\n"
            "[be]\ncomm = 'x'\n",
            "sensor.psi_cgroups: 1 given for 2 node(s)",
        ),
    ],
)
def test_bad_config_exits_2_naming_the_key(tmp_path, agent_bin, config, key):
    path = tmp_path / "bad.toml"
    path.write_text(config)
    r = subprocess.run(
        [str(agent_bin), "check-config", "--config", str(path)], capture_output=True, text=True
    )
    assert r.returncode == 2
    assert key in r.stderr and str(path) in r.stderr, r.stderr


def test_check_config_checks_the_state_file_and_decision_log_but_makes_neither(tmp_path, agent_bin):
    state, log = tmp_path / "run/state.json", tmp_path / "decisions.jsonl"
    path = tmp_path / "agent.toml"
    path.write_text(
        f"state_file = '{state}'\ndecision_log = '{log}'\n"
        "[topology]\npseudo_nodes = ['0', '1']\n[be]\ncomm = '^colosched-never$'\n"
    )
    r = subprocess.run(
        [str(agent_bin), "check-config", "--config", str(path)], capture_output=True, text=True
    )
    assert r.returncode == 0 and r.stdout.startswith("ok:"), r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent.toml"]


def test_the_shipped_example_moves_the_be_cgroup_given_on_the_command_line(scene, agent_bin):
    """examples/agent-pseudo-nodes.toml as shipped (2 s interval, hysteresis 2), its BE cgroup
    replaced by --be-cgroup and its state file by --state-file: the BE hog of the given cgroup
    leaves the LC hog's CPU, and SIGTERM puts its mask back."""
    example = ROOT / "examples/agent-pseudo-nodes.toml"
    interval = 2.0
    assert f"interval_s = {interval}" in example.read_text()
    be = scene.add_be(["sh", "-c", HOG])
    state, log = scene.tmp / "state.json", scene.tmp / "decisions.jsonl"
    cmd = [str(agent_bin), "run", "--config", str(example), "--be-cgroup", str(scene.cgroup)]
    cmd += ["--state-file", str(state), "--decision-log", str(log)]
    scene.agent = subprocess.Popen(cmd, stderr=open(scene.tmp / "agent.err", "w"))  # noqa: SIM115
    # Pressure fills half an interval, is held one more (hysteresis 2), then one sample period.
    took = scene.wait_masks("1", timeout=2 * interval + 1)
    scene.agent.send_signal(signal.SIGTERM)
    assert scene.agent.wait(timeout=5) == 0, scene.log()
    assert mask(be.pid) == "0-1", "SIGTERM puts the original mask back"
    assert {m["pid"] for d in scene.decisions() for m in d["moved"]} == {be.pid}
    print(f"the example moved BE {took:.2f} s after the agent started")


def test_python_cli_runs_the_same_agent_and_restores_on_sigterm(scene):
    be = scene.add_be(["sh", "-c", HOG])
    cmd = [sys.executable, "-m", "colosched.cli", "agent", "run", "--config", str(scene.config())]
    agent = subprocess.Popen(cmd, stderr=open(scene.tmp / "agent.err", "w"))  # noqa: SIM115
    scene.agent = agent
    scene.wait_masks("1", timeout=2 * INTERVAL + 3)  # + the interpreter's start-up
    agent.send_signal(signal.SIGTERM)
    assert agent.wait(timeout=5) == 0, scene.log()
    assert mask(be.pid) == "0-1"


# A Python process with a thread of its own runs the agent; that thread takes the SIGTERM. It is
# sent to that thread on purpose (pthread_kill) so the test does not depend on which thread the
# kernel would pick for a plain `kill`: the agent must see a signal that another thread took.
OTHER_THREAD_TAKES_SIGTERM = """
import json, signal, sys, threading, time
from pathlib import Path
from colosched import cli

def shoot():
    state = Path(sys.argv[2])
    while not (state.exists() and json.loads(state.read_text())["tasks"]):
        time.sleep(0.02)
    signal.pthread_kill(threading.get_ident(), signal.SIGTERM)

threading.Thread(target=shoot, daemon=True).start()
sys.exit(cli.main(["agent", "run", "--config", sys.argv[1]]))
"""


def test_agent_in_a_threaded_python_process_restores_when_another_thread_takes_sigterm(scene):
    be = scene.add_be(["sh", "-c", HOG])
    cmd = [
        sys.executable,
        "-c",
        OTHER_THREAD_TAKES_SIGTERM,
        str(scene.config()),
        str(scene.tmp / "state.json"),
    ]
    agent = subprocess.Popen(cmd, stderr=open(scene.tmp / "agent.err", "w"))  # noqa: SIM115
    scene.agent = agent
    assert agent.wait(timeout=2 * INTERVAL + 10) == 0, "exits 0, not killed by SIGTERM; " + scene.log()
    assert "signal 15: restoring" in scene.log()
    assert mask(be.pid) == "0-1", "the mask the agent changed is put back"


def test_cpuset_mode_writes_the_be_cgroups_cpuset_and_restores_it(tmp_path, agent_bin):
    """cpuset mode: the BE cgroup's cpuset.cpus moves (new threads inherit it by construction).
    The BE hogs are also in a cpuacct cgroup of the same name, which the agent finds as the cpuset
    cgroup's twin and reads their exact per-CPU time from."""
    name = f"colosched-test-{uuid.uuid4().hex[:8]}"
    cpuset, acct = Path("/sys/fs/cgroup/cpuset") / name, Path("/sys/fs/cgroup/cpuacct") / name
    cpuset.mkdir()
    acct.mkdir()
    procs = []
    try:
        (cpuset / "cpuset.cpus").write_text("0-1")
        (cpuset / "cpuset.mems").write_text((cpuset.parent / "cpuset.mems").read_text())
        procs.append(subprocess.Popen(["taskset", "-c", "0", "sh", "-c", HOG]))
        for _ in range(2):
            procs.append(subprocess.Popen(["sh", "-c", HOG]))
            (cpuset / "cgroup.procs").write_text(f"{procs[-1].pid}\n")
            (acct / "cgroup.procs").write_text(f"{procs[-1].pid}\n")
        config = tmp_path / "agent.toml"
        config.write_text(
            f'interval_s = {INTERVAL}\nstate_file = "{tmp_path / "state.json"}"\n[topology]\n'
            'pseudo_nodes = ["0", "1"]\n[sensor]\nkind = "busy"\nthreshold = 0.3\nhysteresis = 1\n'
            f'[be]\ncgroups = ["{cpuset}"]\n[actuator]\nmode = "cpuset"\n'
        )
        err = tmp_path / "agent.err"
        agent = subprocess.Popen([str(agent_bin), "run", "--config", str(config)], stderr=open(err, "w"))  # noqa: SIM115
        procs.append(agent)
        # Wait for the agent's "moved" line, logged after its cpuset.cpus write returned: the
        # kernel shows the new cpuset.cpus before it has updated every task within that write.
        deadline = time.monotonic() + 2 * INTERVAL + 0.3
        while "→ moved" not in err.read_text() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert (cpuset / "cpuset.cpus").read_text().strip() == "1", err.read_text()
        assert "cpuacct.usage_percpu" in err.read_text(), "the cpuacct twin is used"
        assert [mask(p.pid) for p in procs[1:3]] == ["1", "1"], "the kernel applies the cpuset to its tasks"
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(timeout=5) == 0, err.read_text()
        assert (cpuset / "cpuset.cpus").read_text().strip() == "0-1"
        assert [mask(p.pid) for p in procs[1:3]] == ["0-1", "0-1"]
    finally:
        for p in procs:
            p.kill()
            p.wait()
        time.sleep(0.1)
        cpuset.rmdir()
        acct.rmdir()


def test_psi_sensor_reads_the_lc_cgroups_cpu_pressure(scene, agent_bin):
    """PSI for real: cgroup2 cpu.pressure of one LC cgroup per node. The LC hog shares CPU 0 with
    BE hogs pinned there, so it stalls; avg10 needs a couple of seconds to rise."""
    unified = Path("/sys/fs/cgroup/unified")
    if not (unified / "cpu.pressure").exists():
        pytest.skip("no cgroup2 cpu.pressure here (kernel without PSI): the psi sensor cannot be run")
    parent = unified / f"colosched-test-{uuid.uuid4().hex[:8]}"
    lcs = [parent / "lc0", parent / "lc1"]
    for d in [parent, *lcs]:
        d.mkdir()
    try:
        (lcs[0] / "cgroup.procs").write_text(f"{scene.lc.pid}\n")
        be = [scene.add_be(["taskset", "-c", "0", "sh", "-c", HOG]) for _ in range(2)]
        time.sleep(3)
        config = scene.config(threshold=5)
        text = config.read_text().replace(
            'kind = "busy"', f'kind = "psi"\npsi_cgroups = ["{lcs[0]}", "{lcs[1]}"]'
        )
        config.write_text(text)
        agent = subprocess.Popen([str(agent_bin), "run", "--config", str(config)])
        scene.agent = agent
        scene.wait_masks("1", timeout=2 * INTERVAL + 0.3)
        first = scene.decisions(wait=2)[0]
        assert first["raw"][0] >= 5, f"LC cgroup on node 0 should stall: {first}"
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(timeout=5) == 0
        assert [mask(p.pid) for p in be] == ["0", "0"], "restored to the masks they had"
    finally:
        (unified / "cgroup.procs").write_text(f"{scene.lc.pid}\n")
        for d in [*lcs, parent]:
            d.rmdir()


def test_per_thread_attribution_when_be_comes_from_a_pid_file(tmp_path, agent_bin):
    """Without a cgroup, the busy sensor reads each BE thread's CPU time and charges it to the
    node it runs on. With the hogs pinned (no hopping) the split is exact: on CPU 0 an LC hog and
    a BE hog share the CPU, so node 0's LC usage is about one half, and the LC hog waits the other
    half (its demand, the load, is about 1); CPU 1 runs only BE work."""
    procs = [subprocess.Popen(["taskset", "-c", "0", "sh", "-c", HOG])]
    try:
        procs += [subprocess.Popen(["taskset", "-c", c, "sh", "-c", HOG]) for c in ("0", "1")]
        # taskset pins itself before it execs the hog: wait for that, or the agent's first sample
        # may see a hog unpinned and its second pinned (a path switch that loses one interval).
        deadline = time.monotonic() + 5
        while [mask(p.pid) for p in procs] != ["0", "0", "1"] and time.monotonic() < deadline:
            time.sleep(0.01)
        pids = tmp_path / "be.pids"
        pids.write_text(f"{procs[1].pid}\n{procs[2].pid}\n")
        config = tmp_path / "agent.toml"
        config.write_text(
            f'interval_s = 1.0\nstate_file = "{tmp_path / "state.json"}"\n[topology]\n'
            f'pseudo_nodes = ["0", "1"]\n[sensor]\nkind = "busy"\n[be]\npid_files = ["{pids}"]\n'
        )
        r = subprocess.run(
            [str(agent_bin), "plan", "--once", "--json", "--config", str(config)],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert r.returncode == 0, r.stderr
        nodes = json.loads(r.stdout)["nodes"]
        usage, wait = [n["usage"] for n in nodes], [n["wait"] for n in nodes]
        assert 0.3 < usage[0] < 0.7, nodes
        assert 0.3 < wait[0] < 0.7 and abs(nodes[0]["load"] - usage[0] - wait[0]) < 1e-9, nodes
        assert usage[1] < 0.2, f"node 1 runs only BE work (and whatever else this machine runs): {nodes}"
    finally:
        for p in procs:
            p.kill()
            p.wait()


# --- LC demand: run time plus run-queue wait (issue 13, section 1) ---------------------------
#
# BE hogs pinned beside the LC hog on CPU 0 cap what the LC hog *gets* at its fair share (1/(n+1)
# in a flat cpuacct cgroup, 1/2 in a cpu cgroup with its own weight), so its CPU time alone stays
# under the example's 0.5 threshold; its run-queue wait makes up the rest of its demand.

SPIN_30 = (
    "import sys, time\n"
    "print('ready', flush=True)\n"
    "while True:\n"
    "    t = time.perf_counter()\n"
    "    while time.perf_counter() - t < 0.003: pass\n"
    "    time.sleep(0.007)\n"
)


def wait_mask(pid: int, want: str, timeout: float = 5.0) -> None:
    """taskset pins itself before it execs: wait for that, so the agent sees the mask asked for."""
    deadline = time.monotonic() + timeout
    while mask(pid) != want:
        assert time.monotonic() < deadline, f"pid {pid} never got mask {want}: {mask(pid)}"
        time.sleep(0.01)


def demand_config(tmp: Path, cgroup: Path, threshold: float = 0.5) -> Path:
    path = tmp / "agent.toml"
    path.write_text(
        f'interval_s = {INTERVAL}\nstate_file = "{tmp / "state.json"}"\n'
        f'decision_log = "{tmp / "decisions.jsonl"}"\n[topology]\npseudo_nodes = ["0", "1"]\n'
        f'[sensor]\nkind = "busy"\nthreshold = {threshold}\nhysteresis = 1\n'
        f'[be]\ncgroups = ["{cgroup}"]\n[limits]\ncooldown_s = 0\n'
    )
    return path


def read_decisions(path: Path) -> list[dict]:
    if not path.exists():
        return []
    text = path.read_text()
    return [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines()]


def remove_cgroup(cgroup: Path) -> None:
    for _ in range(100):
        with contextlib.suppress(FileNotFoundError):
            for pid in (cgroup / "cgroup.procs").read_text().split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
        try:
            cgroup.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"could not remove {cgroup}")


def stop(procs, cgroup) -> None:
    """Kills and reaps what a test started, then removes its cgroup."""
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()
    remove_cgroup(cgroup)


@pytest.mark.parametrize("hierarchy", ["cpuacct", "cpu"])
@pytest.mark.parametrize("n_be", [1, 3, 8])
def test_be_crowding_the_lc_hog_is_moved_within_two_intervals(tmp_path, agent_bin, hierarchy, n_be):
    """An LC hog and n BE hogs, all pinned to CPU 0. The agent must see LC's demand (run time +
    wait ~ 1.0 of node 0) whatever n and whatever the BE cgroup's hierarchy (cpuacct: exact BE
    time from cpuacct.usage_percpu; cpu: from the BE threads' stat files), and move BE to CPU 1."""
    cgroup = Path("/sys/fs/cgroup") / hierarchy / f"colosched-test-{uuid.uuid4().hex[:8]}"
    cgroup.mkdir()
    procs: list[subprocess.Popen] = []
    err = tmp_path / "agent.err"
    try:
        lc = subprocess.Popen(["taskset", "-c", "0", "sh", "-c", HOG])
        procs.append(lc)
        be = []
        for _ in range(n_be):
            p = subprocess.Popen(["taskset", "-c", "0", "sh", "-c", HOG])
            procs.append(p)
            (cgroup / "cgroup.procs").write_text(f"{p.pid}\n")
            be.append(p)
        for p in [lc, *be]:
            wait_mask(p.pid, "0")
        config = demand_config(tmp_path, cgroup)
        t0 = time.monotonic()
        agent = subprocess.Popen([str(agent_bin), "run", "--config", str(config)], stderr=open(err, "w"))  # noqa: SIM115
        procs.append(agent)
        timeout = 2 * INTERVAL + 0.3
        while not all(mask(p.pid) == "1" for p in be):
            assert agent.poll() is None, err.read_text()
            assert time.monotonic() - t0 < timeout, (
                f"BE not moved within {timeout} s: masks {[mask(p.pid) for p in be]}; "
                f"decisions {read_decisions(tmp_path / 'decisions.jsonl')}; {err.read_text()}"
            )
            time.sleep(0.01)
        took = time.monotonic() - t0
        assert mask(lc.pid) == "0", "the LC hog is never touched"
        deadline = time.monotonic() + 2
        while not any(d["moved"] for d in read_decisions(tmp_path / "decisions.jsonl")):
            assert time.monotonic() < deadline, "the move was not logged"
            time.sleep(0.02)
        move = next(d for d in read_decisions(tmp_path / "decisions.jsonl") if d["moved"])
        assert {m["pid"] for m in move["moved"]} == {p.pid for p in be}
        usage, wait = move["usage"][0], move["wait"][0]
        assert move["loads"][0] >= 0.5 and abs(move["loads"][0] - (usage + (wait or 0))) < 1e-9, move
        if wait is None:
            # Moved on usage alone before the wait was measured: LC's fair share beside one flat
            # BE hog, or beside a cpu cgroup of them, is about 0.5, the threshold.
            assert n_be == 1 or hierarchy == "cpu", move
        else:
            # The LC hog waits n/(n+1) of the time beside n flat BE hogs, half of it beside a
            # cpu cgroup of them.
            assert wait >= 0.3, move
        wait = wait or 0.0
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(timeout=5) == 0, err.read_text()
        assert [mask(p.pid) for p in be] == ["0"] * n_be, "restored to the masks they had"
        print(f"{hierarchy}, {n_be} BE: moved after {took:.2f} s; node 0 usage {usage:.2f} + wait {wait:.2f}")
    finally:
        stop(procs, cgroup)


def test_an_lc_process_using_30_percent_of_its_cpu_alone_is_no_pressure(tmp_path, agent_bin):
    """An LC process using about 30 % of CPU 0 with nothing beside it: not pressured, whatever
    its wait adds. A BE hog runs on CPU 1 (so LC wait is being measured) and a sleeping BE
    process may run anywhere: a node 0 taken for pressured would move it to node 1."""
    cgroup = BE_HIERARCHY / f"colosched-test-{uuid.uuid4().hex[:8]}"
    cgroup.mkdir()
    procs: list[subprocess.Popen] = []
    err, log = tmp_path / "agent.err", tmp_path / "decisions.jsonl"
    try:
        lc = subprocess.Popen(["taskset", "-c", "0", sys.executable, "-c", SPIN_30], stdout=subprocess.PIPE)
        procs.append(lc)
        assert lc.stdout.readline() == b"ready\n", "the LC process is past its start-up"
        hog = subprocess.Popen(["taskset", "-c", "1", "sh", "-c", HOG])
        sleeper = subprocess.Popen(["sleep", "600"])
        procs += [hog, sleeper]
        for p in (hog, sleeper):
            (cgroup / "cgroup.procs").write_text(f"{p.pid}\n")
        wait_mask(lc.pid, "0")
        wait_mask(hog.pid, "1")
        agent = subprocess.Popen(
            [str(agent_bin), "run", "--config", str(demand_config(tmp_path, cgroup))],
            stderr=open(err, "w"),  # noqa: SIM115
        )
        procs.append(agent)
        # Four intervals with the wait measured (five samples each), bounded in time.
        deadline = time.monotonic() + 4 * INTERVAL + 5
        while sum(d["wait"][0] is not None for d in read_decisions(log)) < 20:
            assert agent.poll() is None, err.read_text()
            assert time.monotonic() < deadline, f"no LC wait: {read_decisions(log)}; {err.read_text()}"
            time.sleep(0.2)  # the test's own polling runs on node 0 too: seldom
        cycles = [d for d in read_decisions(log) if d["wait"][0] is not None]
        usage = [d["usage"][0] for d in cycles]
        wait = [d["wait"][0] for d in cycles]
        moved = [d for d in read_decisions(log) if d["moved"]]
        assert not moved, f"nothing moves: {moved}"
        assert max(d["loads"][0] for d in cycles) < 0.5, cycles
        assert 0.15 < statistics.median(usage) < 0.45, f"the LC process uses about 30 %: {usage}"
        assert statistics.median(wait) < 0.05, f"alone on its CPU it hardly waits: {wait}"
        assert mask(sleeper.pid) == "0-1"
        print(f"node 0 usage median {statistics.median(usage):.2f}, wait {statistics.median(wait):.3f}")
    finally:
        stop(procs, cgroup)


@pytest.mark.parametrize(
    "args, code, text",
    [
        (["run", "--config", "x.toml", "--bogus"], 2, "unexpected argument '--bogus'"),
        (
            ["plan", "--config", str(ROOT / "examples/agent-pseudo-nodes.toml")],
            2,
            "required arguments were not provided:\n  --once",
        ),
        (["run"], 2, "--config <FILE>"),
        (["plan", "--once", "-h"], 0, "Usage: colosched-agent plan"),
        (["restore", "--help"], 0, "--state-file <F>"),
        (["frobnicate"], 2, "unrecognized subcommand 'frobnicate'"),
        (["check-config", "--config", "/nonexistent.toml"], 2, "/nonexistent.toml"),
        (
            ["run", "--config", str(ROOT / "examples/agent-pseudo-nodes.toml"), "--metrics", "x"],
            2,
            "--metrics:",
        ),
        (["restore", "--state-file", "/nonexistent/state.json"], 0, "nothing to restore"),
    ],
)
def test_bad_command_lines_and_a_missing_state_file(agent_bin, args, code, text):
    r = subprocess.run([str(agent_bin), *args], capture_output=True, text=True, timeout=10)
    assert r.returncode == code, r.stderr
    assert text in r.stdout + r.stderr
