"""The node agent on a Kubernetes node, without a kubelet: the tests build the cgroup trees the
kubelet builds (its `cgroupfs` and `systemd` drivers' names, in the v1 `cpuacct` hierarchy,
under a directory of their own given as `kubernetes.kubepods`) and put real processes in them.
An LC hog of a Guaranteed pod is pinned to CPU 0; BestEffort pods' hogs may run anywhere; the
agent must move those off CPU 0 and never touch the Guaranteed or Burstable pods' processes,
including pods made and deleted while it runs, holding only the capability the DaemonSet gives
it (SYS_NICE). Needs root and 2 CPUs (skips otherwise).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from test_agent_pseudo_nodes import AGENT, BE_HIERARCHY, HOG, INTERVAL, mask


@pytest.fixture(scope="module")
def agent_bin() -> Path:
    assert AGENT.exists(), f"{AGENT} is missing: `make agent-static` builds it (make test does)"
    return AGENT


pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: cgroups and other processes' affinities"),
    pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs to make 2 pseudo-nodes"),
]


class Kubelet:
    """The pod cgroups a kubelet with `driver` makes, under `root`, with real processes."""

    def __init__(self, root: Path, driver: str):
        self.root, self.driver = root, driver
        self.kubepods = root / ("kubepods.slice" if driver == "systemd" else "kubepods")
        self.procs: dict[str, list[subprocess.Popen]] = {}
        self.kubepods.mkdir(parents=True)

    def pod_dir(self, qos: str, uid: str) -> Path:
        if self.driver == "cgroupfs":
            qos_dir = self.kubepods if qos == "guaranteed" else self.kubepods / qos
            return qos_dir / f"pod{uid}"
        u = uid.replace("-", "_")
        if qos == "guaranteed":
            return self.kubepods / f"kubepods-pod{u}.slice"
        return self.kubepods / f"kubepods-{qos}.slice" / f"kubepods-{qos}-pod{u}.slice"

    def container_dir(self, pod: Path, cid: str) -> Path:
        return pod / (cid if self.driver == "cgroupfs" else f"cri-containerd-{cid}.scope")

    def run(self, qos: str, uid: str, cid: str, cmd: list[str]) -> subprocess.Popen:
        """A container of the pod (made if new) running `cmd`."""
        d = self.container_dir(self.pod_dir(qos, uid), cid)
        d.mkdir(parents=True, exist_ok=True)
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        (d / "cgroup.procs").write_text(f"{p.pid}\n")
        self.procs.setdefault(uid, []).append(p)
        return p

    def delete(self, qos: str, uid: str) -> None:
        """As the kubelet deletes a pod: its processes killed, then its cgroups removed."""
        for p in self.procs.pop(uid, []):
            p.kill()
            p.wait()
        remove_tree(self.pod_dir(qos, uid))

    def close(self) -> None:
        for uid in list(self.procs):
            for p in self.procs.pop(uid):
                p.kill()
                p.wait()
        remove_tree(self.root)


def remove_tree(top: Path) -> None:
    """Removes a cgroup tree bottom-up, killing what is left in it (a forked child, say)."""
    dirs = sorted((Path(d) for d, _, _ in os.walk(top)), key=lambda d: len(d.parts), reverse=True)
    for d in dirs:
        for _ in range(100):
            try:
                for pid in (d / "cgroup.procs").read_text().split():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(pid), signal.SIGKILL)
                d.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.05)
        else:
            raise AssertionError(f"could not remove {d}")


@pytest.fixture(params=["cgroupfs", "systemd"])
def kubelet(request, agent_bin):
    k = Kubelet(BE_HIERARCHY / f"colosched-test-{uuid.uuid4().hex[:8]}", request.param)
    try:
        yield k
    finally:
        k.close()


def config(tmp: Path, kubepods: Path) -> Path:
    path = tmp / "agent.toml"
    path.write_text(
        f"interval_s = {INTERVAL}\n"
        f'state_file = "{tmp / "state.json"}"\n'
        f'decision_log = "{tmp / "decisions.jsonl"}"\n'
        '[topology]\npseudo_nodes = ["0", "1"]\n'
        '[sensor]\nkind = "busy"\nthreshold = 0.3\nhysteresis = 1\n'
        "[limits]\ncooldown_s = 0\n"
        f'[kubernetes]\nkubepods = "{kubepods}"\n'
    )
    return path


def wait_for(what, timeout: float, why) -> None:
    t0 = time.monotonic()
    while not what():
        if time.monotonic() - t0 > timeout:
            raise AssertionError(why())
        time.sleep(0.05)


def test_check_config_finds_the_pods_of_each_class(kubelet, agent_bin, tmp_path):
    kubelet.run("guaranteed", "g-1", "c1", ["sleep", "30"])
    kubelet.run("besteffort", "be-1", "c2", ["sleep", "30"])
    kubelet.run("besteffort", "be-2", "c3", ["sleep", "30"])
    kubelet.run("burstable", "bu-1", "c4", ["sleep", "30"])
    cfg = config(tmp_path, kubelet.kubepods)
    r = subprocess.run(
        [str(agent_bin), "check-config", "--config", str(cfg), "--be-from", "kubernetes"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    driver = "Systemd" if kubelet.driver == "systemd" else "Cgroupfs"
    assert (
        f"pods from {kubelet.kubepods} ({driver} driver): 2 BestEffort, 1 Burstable (LC), 1 Guaranteed"
        in r.stdout
    )
    # Without --be-from the [kubernetes] section selects nothing: refused, not ignored.
    r = subprocess.run([str(agent_bin), "check-config", "--config", str(cfg)], capture_output=True, text=True)
    assert r.returncode == 2 and "kubernetes: set, but be.kubernetes is off" in r.stderr, r.stderr
    # A pods directory that is not there.
    cfg.write_text(cfg.read_text().replace(str(kubelet.kubepods), str(kubelet.root / "nope")))
    r = subprocess.run(
        [str(agent_bin), "check-config", "--config", str(cfg), "--be-from", "kubernetes"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and f"kubernetes.kubepods: {kubelet.root}/nope: no such directory" in r.stderr


def test_besteffort_pods_move_off_the_lc_cpu_and_the_others_are_never_touched(kubelet, tmp_path):
    lc = kubelet.run("guaranteed", "g-1", "c1", ["taskset", "-c", "0", "sh", "-c", HOG])
    burstable = kubelet.run("burstable", "bu-1", "c2", ["sleep", "60"])
    be = [kubelet.run("besteffort", f"be-{i}", f"c{i}", ["sh", "-c", HOG]) for i in (1, 2)]
    # With the DaemonSet's one capability (deploy/kubernetes: SYS_NICE) and no other.
    only_sys_nice = ["setpriv", "--bounding-set", "-all,+sys_nice", "--"]
    agent = subprocess.Popen(
        [
            *only_sys_nice,
            str(AGENT),
            "run",
            "--config",
            str(config(tmp_path, kubelet.kubepods)),
            "--be-from",
            "kubernetes",
        ],
        stderr=open(tmp_path / "agent.err", "w"),  # noqa: SIM115 - closed with the process
    )

    def log() -> str:
        return (tmp_path / "agent.err").read_text()

    try:
        wait_for(
            lambda: all(mask(p.pid) == "1" for p in be), 3 * INTERVAL + 1, lambda: f"BE not moved; {log()}"
        )
        # A pod made while the agent runs is picked up at its next look; one deleted leaves
        # nothing behind (its processes are gone, so is their record).
        new = kubelet.run("besteffort", "be-3", "c3", ["sh", "-c", HOG])
        wait_for(lambda: mask(new.pid) == "1", 3 * INTERVAL + 1, lambda: f"new pod not moved; {log()}")
        kubelet.delete("besteffort", "be-1")
        state = tmp_path / "state.json"

        def recorded() -> set[int]:
            try:
                return {int(pid) for pid in json.loads(state.read_text())["tasks"]}
            except (FileNotFoundError, json.JSONDecodeError, KeyError):
                return set()

        wait_for(lambda: be[0].pid not in recorded(), 4 * INTERVAL + 1, lambda: f"{recorded()}; {log()}")
        assert mask(lc.pid) == "0" and mask(burstable.pid) == "0-1", "Guaranteed and Burstable untouched"
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(timeout=5) == 0, log()
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
    assert mask(be[1].pid) == "0-1" and mask(new.pid) == "0-1", "SIGTERM puts the BE masks back"
    assert not (tmp_path / "state.json").exists()
    moved = [
        m
        for line in (tmp_path / "decisions.jsonl").read_text().splitlines()
        for m in json.loads(line)["moved"]
    ]
    by_pid = {m["pid"]: (m.get("pod"), m.get("container")) for m in moved}
    assert by_pid[be[1].pid] == ("be-2", "c2") and by_pid[new.pid] == ("be-3", "c3"), by_pid
    assert lc.pid not in by_pid and burstable.pid not in by_pid
