"""`colosched migrate vms` for real: a TCG guest live-migrated between two QEMU processes on this
machine (standing for two hypervisors), over loopback.

Each test boots a source guest (256 MiB, 1 vCPU, no network, a QMP socket in the test's tmp dir)
whose /init prints `COUNT n` on the serial console five times a second, then runs the executor
as a user does (`python -m colosched.cli migrate vms …`). Every QEMU a test starts, the
executor's destinations included (found by their run_dir on the command line), is killed in a
finalizer.
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

from numa_guest import guest

INIT = """#!/bin/sh
export PATH=/bin
echo
mount -t proc proc /proc
i=0
while :; do i=$((i+1)); echo "COUNT $i"; sleep 0.2; done
"""
MEM_MB = 256
BOOT_TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    guest.need(guest.qemu)
    kernel = guest.need(guest.kernel)
    work = tmp_path_factory.mktemp("migrate-guest")
    (work / "init.sh").write_text(INIT)
    initrd = guest.need(lambda: guest.build_initramfs(work / "initrd.gz", work / "init.sh"))
    return kernel, initrd


def qemu_procs(needle: str) -> list[int]:
    """Pids of the qemu processes whose command line holds `needle` (a test's tmp dir)."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().split(b"\0")
            state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if state != "Z" and cmd and b"qemu-system" in cmd[0] and any(needle.encode() in a for a in cmd):
            found.append(int(d.name))
    return found


class Cluster:
    """A source guest in `tmp`, and the executor's config and plan for moving it h0 -> h1."""

    def __init__(self, tmp: Path, images):
        self.tmp = tmp
        self.kernel, self.initrd = images
        self.qmp = tmp / "zk1.qmp"
        self.console = tmp / "zk1.console"
        self.run_dir = tmp / "run"
        self.config = tmp / "migrate.toml"
        self.plan = tmp / "plan.json"
        self.source: subprocess.Popen | None = None

    def boot(self) -> None:
        cmd = [str(guest.qemu()), "-accel", "tcg", "-m", str(MEM_MB), "-smp", "1", "-name", "zk1"]
        cmd += ["-display", "none", "-monitor", "none", "-serial", "stdio", "-nic", "none", "-no-reboot"]
        cmd += ["-kernel", str(self.kernel), "-initrd", str(self.initrd)]
        cmd += ["-append", "console=ttyS0 quiet panic=-1"]
        cmd += ["-qmp", f"unix:{self.qmp},server=on,wait=off"]
        with open(self.console, "wb") as out:
            self.source = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + BOOT_TIMEOUT_S
        while self.count(self.console) < 2:
            assert self.source.poll() is None, f"the source QEMU exited: {self.console.read_text()[-2000:]}"
            assert time.monotonic() < deadline, f"no COUNT on the console: {self.console.read_text()[-2000:]}"
            time.sleep(0.2)

    @staticmethod
    def count(log: Path) -> int:
        """The guest's last counter value on a console log (0 if none yet)."""
        found = re.findall(rb"COUNT (\d+)", log.read_bytes()) if log.exists() else []
        return int(found[-1]) if found else 0

    def write(self, link_mbps: float = 1000, bw_cap: float = 0.4, timeout_s: float = 120, extra: str = "") -> None:
        self.config.write_text(
            f"[migrate]\nlink_mbps = {link_mbps}\nbw_cap = {bw_cap}\ntimeout_s = {timeout_s}\n"
            f'run_dir = "{self.run_dir}"\n{extra}'
            '[[host]]\nid = "h0"\naddress = "127.0.0.1"\nport_base = 49152\n'
            '[[host]]\nid = "h1"\naddress = "127.0.0.1"\nport_base = 49152\n'
            f'[[vm]]\nid = "zk1"\nhost = "h0"\nqmp = "{self.qmp}"\n'
        )
        self.plan.write_text(json.dumps({"moves": [[{"vm": "zk1", "from": "h0", "to": "h1", "mb": 512}]]}))

    def command(self, *flags: str) -> list[str]:
        return [sys.executable, "-m", "colosched.cli", "migrate", "vms", "--plan", str(self.plan)] + [
            "--config",
            str(self.config),
            *flags,
        ]

    def run(self, *flags: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run(self.command(*flags), capture_output=True, text=True, timeout=timeout)

    def destinations(self) -> list[int]:
        return qemu_procs(str(self.run_dir))

    def source_status(self) -> str:
        return qmp(self.qmp, "query-status")["status"]

    def close(self) -> None:
        for pid in self.destinations():
            os.kill(pid, signal.SIGKILL)
        if self.source is not None:
            self.source.kill()
            self.source.wait()


def qmp(path: Path, command: str, arguments: dict | None = None):
    import socket

    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(10)
        s.connect(str(path))
        f = s.makefile("rwb")
        json.loads(f.readline())
        for m in ({"execute": "qmp_capabilities"}, {"execute": command, **({"arguments": arguments} if arguments else {})}):
            f.write(json.dumps(m).encode() + b"\n")
            f.flush()
            while True:
                reply = json.loads(f.readline())
                if "return" in reply or "error" in reply:
                    break
        assert "return" in reply, reply
        return reply["return"]


@pytest.fixture
def cluster(tmp_path, images):
    c = Cluster(tmp_path, images)
    try:
        c.boot()
        yield c
    finally:
        c.close()
