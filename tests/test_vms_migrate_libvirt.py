"""`colosched migrate vms` under libvirt, for real (issue 30): two libvirtds of the test's own
(hosts h0 and h1, each with its configuration, run and state directories and its own host UUID,
tests/host_guest/libvirt.py) in a network namespace of the test's own, and one persistent TCG
domain `zk1` (128 MiB, 1 vCPU, no network) on h0 whose /init prints `COUNT n` five times a second
on its serial console (a file both hosts write: the count goes on where it stopped when the
domain moves). The executor runs as a user runs it, with `[[host]] libvirt` URIs and `[[vm]]
domain`; the RAM moves over the namespace's loopback. Two daemons on one machine would give a
domain's cgroups the same name, so these two make none (the host agent's test has them).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from host_guest import scene
from host_guest.libvirt import Libvirtd, check_libvirt, domain_xml
from host_guest.scene import Guest
from numa_guest import guest
from test_vms_migrate import INIT, reports

MEM_MB = 128
BOOT_TIMEOUT_S = 60.0


class Pair:
    """h0 and h1, and zk1 running on h0; `close` removes all of it whatever happened."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.netns = f"{scene.NETNS_PREFIX}{os.getpid()}-{next(scene._scenes)}"
        self.console = tmp / "zk1.console"
        self.config, self.plan = tmp / "migrate.toml", tmp / "plan.json"
        self.h: list[Libvirtd] = []
        self._netns_made = False

    def start(self) -> None:
        scene.check_host()
        check_libvirt()
        scene.sweep_stale()
        kernel = guest.kernel()
        (self.tmp / "init.sh").write_text(INIT)
        initrd = guest.build_initramfs(self.tmp / "initrd.gz", self.tmp / "init.sh")
        subprocess.run(["ip", "netns", "add", self.netns], check=True)
        self._netns_made = True
        subprocess.run(["ip", "-n", self.netns, "link", "set", "lo", "up"], check=True)
        self.h = [Libvirtd(self.tmp / f"h{i}", self.netns, host=i + 1, cgroups=False) for i in range(2)]
        for d in self.h:
            d.start()
        g = Guest(vcpus=1, mem_mb=MEM_MB)
        g.index, g.console = 0, self.console
        (self.tmp / "zk1.xml").write_text(domain_xml("zk1", g, kernel, initrd))
        self.h[0].virsh("define", str(self.tmp / "zk1.xml"))
        self.h[0].virsh("start", "zk1")
        deadline = time.monotonic() + BOOT_TIMEOUT_S
        while self.count() < 2:
            assert time.monotonic() < deadline, f"no COUNT on the console: {self.console.read_text()[-2000:]}"
            time.sleep(0.2)

    def count(self) -> int:
        found = re.findall(rb"COUNT (\d+)", self.console.read_bytes()) if self.console.exists() else []
        return int(found[-1]) if found else 0

    def state(self, i: int) -> str | None:
        """zk1's state on host i (`running`, `shut off`), None when that libvirt has no zk1."""
        r = subprocess.run(["virsh", "-c", self.h[i].uri, "domstate", "zk1"], capture_output=True, text=True)
        return r.stdout.strip() if r.returncode == 0 else None

    def persistent(self, i: int) -> bool:
        return "Persistent:     yes" in self.h[i].virsh("dominfo", "zk1")

    def write(self, frm: str = "h0", to: str = "h1", link_mbps=1000, bw_cap=0.4, timeout_s=120) -> None:
        hosts = "".join(
            f'[[host]]\nid = "h{i}"\naddress = "127.0.0.1"\nlibvirt = "{d.uri}"\n'
            for i, d in enumerate(self.h)
        )
        self.config.write_text(
            f"[migrate]\nlink_mbps = {link_mbps}\nbw_cap = {bw_cap}\ntimeout_s = {timeout_s}\n"
            f'{hosts}[[vm]]\nid = "zk1"\nhost = "{frm}"\ndomain = "zk1"\n'
        )
        self.plan.write_text(json.dumps({"moves": [[{"vm": "zk1", "from": frm, "to": to, "mb": 512}]]}))

    def command(self, *flags: str) -> list[str]:
        return [sys.executable, "-m", "colosched.cli", "migrate", "vms", "--plan", str(self.plan)] + [
            "--config",
            str(self.config),
            *flags,
        ]

    def run(self, *flags: str) -> subprocess.CompletedProcess:
        return subprocess.run(self.command(*flags), capture_output=True, text=True, timeout=300)

    def close(self) -> None:
        failed: list[str] = []
        for d in self.h:
            if d.proc is not None:
                d.virsh("destroy", "zk1", check=False)
                d.virsh("undefine", "zk1", check=False)
            d.stop(failed)
        if self._netns_made:
            for pid in subprocess.run(
                ["ip", "netns", "pids", self.netns], capture_output=True, text=True
            ).stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            subprocess.run(["ip", "netns", "del", self.netns], check=False)
        assert not failed, failed


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """One pair for the module: every test leaves zk1 running on h0, as it found it."""
    p = Pair(tmp_path_factory.mktemp("libvirt-pair"))
    try:
        guest.need(p.start)
        yield p
    finally:
        p.close()
    assert p.netns not in scene.netns_list()


def wait_for(what, timeout: float):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not what():
        time.sleep(0.2)
    return what()


def test_dry_run_checks_both_libvirts_and_changes_nothing(pair):
    pair.write(link_mbps=1000, bw_cap=0.4)
    r = pair.run("--json")
    assert r.returncode == 0, r.stderr
    moves, summary = reports(r.stdout)
    assert [(m["status"], m["uri"], m["max_bandwidth"]) for m in moves] == [
        ("planned", "tcp://127.0.0.1", 47 << 20)  # 0.4 × 1000 Mbit/s in whole MiB/s
    ]
    assert summary["dry_run"] and summary["completed"] == 0
    assert (pair.state(0), pair.state(1)) == ("running", None)
    # A plan whose VM is not where the config says is refused before anything starts.
    pair.write(frm="h1", to="h0")
    r = pair.run()
    assert r.returncode == 2 and 'vm[0] (zk1).domain: h1 has no domain "zk1"' in r.stderr, r.stderr
    # A domain of that name already running on the destination (moved by an earlier run?).
    pair.write()
    pair.h[1].virsh("create", str(pair.tmp / "zk1.xml"))
    try:
        r = pair.run()
        assert r.returncode == 2 and '"zk1" already runs on h1' in r.stderr, r.stderr
    finally:
        pair.h[1].virsh("destroy", "zk1")
    # A defined domain that does not run is not migrated.
    pair.h[0].virsh("destroy", "zk1")
    try:
        r = pair.run()
        assert r.returncode == 2 and '"zk1" is "shut off" on h0' in r.stderr, r.stderr
    finally:
        pair.h[0].virsh("start", "zk1")
    before = pair.count()
    assert wait_for(lambda: pair.count() > before, 60), "zk1 did not boot again"


def test_libvirt_moves_the_domain_capped_and_back_uncapped(pair):
    pair.write(link_mbps=1000, bw_cap=0.2)  # 25 MB/s: 23 MiB/s
    r = pair.run("--execute", "--json")
    assert r.returncode == 0, r.stderr
    (m,), summary = reports(r.stdout)
    assert m["status"] == "completed" and summary["completed"] == 1, m
    assert (pair.state(0), pair.state(1)) == (None, "running")
    assert pair.persistent(1), "a persistent domain takes its definition along"
    # What libvirt moved stays under the cap (plus a little: libvirt's MiB of RAM pages).
    assert m["bytes"] > 20 << 20 and m["mbps"] <= 23 * 1.048576 * 8 * 1.1, m
    before = pair.count()
    assert wait_for(lambda: pair.count() > before + 3, 10), "the guest does not count on after the move"
    capped_ms = m["total_time_ms"]

    pair.write(frm="h1", to="h0", link_mbps=100_000, bw_cap=1.0)
    r = pair.run("--execute", "--json")
    assert r.returncode == 0, r.stderr
    (m,), _ = reports(r.stdout)
    assert m["status"] == "completed" and m["total_time_ms"] < capped_ms, (m, capped_ms)
    assert (pair.state(0), pair.state(1)) == ("running", None)


@pytest.mark.parametrize("stop", ["sigterm", "timeout", "sigkill"])
def test_a_stopped_migration_leaves_the_domain_running_on_its_source(pair, stop):
    pair.write(link_mbps=8, bw_cap=1.0, timeout_s=2 if stop == "timeout" else 120)  # 1 MiB/s: minutes
    proc = subprocess.Popen(
        pair.command("--execute", "--json"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    if stop != "timeout":
        # The destination domain exists while the RAM moves.
        assert wait_for(lambda: pair.state(1) is not None, 20), "no incoming domain on h1"
        proc.send_signal(signal.SIGTERM if stop == "sigterm" else signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    want = {"sigterm": (143, "interrupted"), "timeout": (1, "timed-out"), "sigkill": (-9, None)}[stop]
    assert proc.returncode == want[0], err
    if want[1]:
        (m,), _ = reports(out)
        assert m["status"] == want[1], m
    # libvirt aborted the job (the client's death aborts it too): zk1 runs on h0, h1 has none.
    assert wait_for(lambda: pair.state(1) is None, 20), pair.state(1)
    assert pair.state(0) == "running"
    before = pair.count()
    assert wait_for(lambda: pair.count() > before + 3, 10), "the guest does not count on"
    # Nothing is left to clean: a new dry run is fine.
    pair.write(link_mbps=1000)
    assert pair.run().returncode == 0
