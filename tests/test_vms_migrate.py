"""`colosched migrate vms` for real: a TCG guest live-migrated between two QEMU processes on this
machine (standing for two hypervisors), over loopback.

Each test that migrates boots its own source guest (256 MiB, 1 vCPU, no network, a QMP socket
in the test's tmp dir); the tests whose executor must start nothing share one (`untouched`). The
guest's /init prints `COUNT n` on the serial console five times a second; the tests run the
executor as a user does (`python -m colosched.cli migrate vms …`). Every QEMU a test starts, the
executor's destinations included (found by their run_dir on the command line), is killed in a
finalizer.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
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
            self.source = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT
            )
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

    def write(
        self, link_mbps: float = 1000, bw_cap: float = 0.4, timeout_s: float = 120, extra: str = ""
    ) -> None:
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
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(10)
        s.connect(str(path))
        f = s.makefile("rwb")
        json.loads(f.readline())
        for m in (
            {"execute": "qmp_capabilities"},
            {"execute": command, **({"arguments": arguments} if arguments else {})},
        ):
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


@pytest.fixture(scope="module")
def untouched(tmp_path_factory, images):
    """One source guest for the tests whose executor must start nothing (dry runs, bad input),
    booted once for all of them: each test writes its own config and plan, and checks that
    the source still runs and that no destination or run_dir appeared."""
    c = Cluster(tmp_path_factory.mktemp("untouched"), images)
    try:
        c.boot()
        yield c
    finally:
        c.close()


def reports(stdout: str) -> tuple[list[dict], dict]:
    """The executor's --json lines: one object per migration, then the summary."""
    lines = [json.loads(line) for line in stdout.splitlines()]
    assert lines and "summary" in lines[-1], stdout
    return lines[:-1], lines[-1]["summary"]


def left_in(run_dir: Path) -> list[str]:
    return sorted(p.name for p in run_dir.iterdir()) if run_dir.exists() else []


def test_dry_run_prints_the_migration_and_changes_nothing(untouched):
    untouched.write(link_mbps=1000, bw_cap=0.4)
    r = untouched.run()
    assert r.returncode == 0, r.stderr
    assert "dry run" in r.stdout and "nothing started" in r.stdout, r.stdout
    line = re.search(r"wave 1: zk1 h0 -> h1  uri tcp:127\.0\.0\.1:(\d+)  max-bandwidth (\d+) B/s", r.stdout)
    assert line, r.stdout
    assert int(line.group(2)) == 50_000_000, "0.4 × 1000 Mbit/s in bytes/s"
    r = untouched.run("--dry-run", "--json")
    assert r.returncode == 0, r.stderr
    moves, summary = reports(r.stdout)
    assert [(m["vm"], m["from"], m["to"], m["status"]) for m in moves] == [("zk1", "h0", "h1", "planned")]
    assert summary["dry_run"] and summary["migrations"] == 1 and summary["completed"] == 0
    # Nothing changed: the source runs on, no destination, not even the run_dir.
    assert untouched.source.poll() is None
    assert untouched.source_status() == "running"
    assert untouched.destinations() == []
    assert not untouched.run_dir.exists()


def test_execute_moves_the_vm_at_the_capped_bandwidth_and_back_uncapped(cluster):
    # Someone listens on port_base: the destination takes the next port.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cluster.write(link_mbps=400, bw_cap=0.4)  # 160 Mbit/s = 20 MB/s
        cluster.config.write_text(
            cluster.config.read_text().replace("port_base = 49152", f"port_base = {port}")
        )
        before = cluster.count(cluster.console)
        r = cluster.run("--execute", "--json")
    assert r.returncode == 0, r.stderr
    (m,), summary = reports(r.stdout)
    cap = 400e6 * 0.4 / 8
    assert m["status"] == "completed" and summary["completed"] == 1 and summary["exit"] == 0, m
    assert m["uri"].startswith("tcp:127.0.0.1:") and int(m["uri"].rsplit(":", 1)[1]) != port, m
    assert m["max_bandwidth"] == cap
    assert m["total_time_ms"] > 0 and m["downtime_ms"] >= 0 and m["bytes"] > 10e6, m
    rate = m["bytes"] / (m["total_time_ms"] / 1000)
    assert rate <= cap * 1.3, f"{rate / 1e6:.1f} MB/s sent, the cap is {cap / 1e6:.1f} MB/s"
    print(f"capped: {m}")
    # The VM runs on the destination, the source QEMU has exited, the guest's counter goes on.
    dest_qmp = cluster.run_dir / "zk1.h1.qmp"
    assert qmp(dest_qmp, "query-status")["status"] == "running"
    assert cluster.source.wait(timeout=10) == 0
    assert not cluster.qmp.exists(), "QEMU removed its socket on quit"
    (dest,) = cluster.destinations()
    assert int((cluster.run_dir / "zk1.h1.pid").read_text()) == dest
    log = cluster.run_dir / "zk1.h1.log"
    deadline = time.monotonic() + 10
    while cluster.count(log) <= max(before, cluster.count(cluster.console)):
        assert time.monotonic() < deadline, f"no COUNT past the source's on {log}: {log.read_text()[-500:]}"
        time.sleep(0.2)

    # Back to h0, uncapped, from the QEMU the executor started: its rewritten command line is
    # rewritten again. It takes a fraction of the capped time.
    cluster.write(link_mbps=100_000, bw_cap=1.0)
    cluster.config.write_text(
        cluster.config.read_text()
        .replace('host = "h0"', 'host = "h1"')
        .replace(str(cluster.qmp), str(dest_qmp))
    )
    cluster.plan.write_text(json.dumps({"moves": [[{"vm": "zk1", "from": "h1", "to": "h0"}]]}))
    r = cluster.run("--execute")
    assert r.returncode == 0, r.stderr
    row = re.search(r"zk1\s+h1 -> h0\s+completed\s+(\d+)\s+(\d+)", r.stdout)
    assert row, r.stdout
    print(f"uncapped:\n{r.stdout}")
    assert int(row.group(1)) < m["total_time_ms"] / 2, "the cap slowed the first one down"
    assert qmp(cluster.run_dir / "zk1.h0.qmp", "query-status")["status"] == "running"
    assert cluster.destinations() == [int((cluster.run_dir / "zk1.h0.pid").read_text())]
    assert left_in(cluster.run_dir) == ["zk1.h0.log", "zk1.h0.pid", "zk1.h0.qmp", "zk1.h1.log"]


@pytest.mark.parametrize(
    "change, where, needle",
    [
        (("timeout_s", "timeout"), "config", "TOML parse error at line 4, column 1: unknown field `timeout`"),
        (('"zk1", "from"', '"zk9", "from"'), "plan", 'moves[0][0].vm: "zk9" has no [[vm]] in the config'),
        (('"to": "h1"', '"to": "h7"'), "plan", 'moves[0][0].to: "h7" has no [[host]] in the config'),
        (('host = "h0"', 'host = "h1"'), "plan", 'moves[0][0].from: "h0", but zk1 is on "h1"'),
        (("zk1.qmp", "zk2.qmp"), "config", "vm[0] (zk1).qmp: QMP socket"),
        (
            ('address = "127.0.0.1"\nport_base = 49152\n[[vm]]', 'address = "192.0.2.1"\n[[vm]]'),
            "config",
            "host[1].address",
        ),
    ],
)
def test_bad_config_or_plan_exits_2_naming_the_key_and_starts_nothing(untouched, change, where, needle):
    untouched.write()
    path = untouched.config if where == "config" or "host =" in change[0] else untouched.plan
    text = path.read_text()
    assert change[0] in text
    path.write_text(text.replace(change[0], change[1]))
    target = untouched.plan if where == "plan" else untouched.config
    r = untouched.run("--execute")
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert f"{target}: {needle}" in r.stderr, r.stderr
    assert r.stdout == ""
    assert untouched.destinations() == [] and not untouched.run_dir.exists()
    assert untouched.source_status() == "running"


def slow_run(cluster, *flags: str) -> tuple[subprocess.Popen, Path]:
    """The executor started on a migration capped at 5 MB/s (~20 s for ~95 MB); returns once
    the destination QEMU runs and the migration has gone on for a second."""
    out = cluster.tmp / "executor.out"
    with open(out, "wb") as f:
        p = subprocess.Popen(cluster.command("--execute", *flags), stdout=f, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while not cluster.destinations() or not (cluster.run_dir / "zk1.h1.pid").exists():
        assert p.poll() is None, out.read_text()
        assert time.monotonic() < deadline, "no destination QEMU"
        time.sleep(0.1)
    time.sleep(1.5)
    assert p.poll() is None, out.read_text()
    return p, out


def assert_nothing_left(cluster) -> None:
    assert cluster.destinations() == []
    assert not cluster.run_dir.exists(), left_in(cluster.run_dir)  # the executor made it, and removed it
    assert cluster.source.poll() is None
    status = qmp(cluster.qmp, "query-status")
    assert status["status"] == "running", status
    # The source's bandwidth is what it was, and the guest still counts.
    assert qmp(cluster.qmp, "query-migrate-parameters")["max-bandwidth"] != 5_000_000
    seen = cluster.count(cluster.console)
    time.sleep(1)
    assert cluster.count(cluster.console) > seen


@pytest.mark.parametrize("how", ["destination killed", "timeout"])
def test_a_failed_migration_leaves_the_source_running_and_nothing_behind(cluster, how):
    cluster.write(link_mbps=100, bw_cap=0.4, timeout_s=3 if how == "timeout" else 120)
    p, out = slow_run(cluster, "--json")
    if how == "destination killed":
        (dest,) = cluster.destinations()
        os.kill(dest, signal.SIGKILL)
    assert p.wait(timeout=60) == 1, out.read_text()
    (m,), summary = reports(out.read_text())
    assert m["status"] == ("failed" if how == "destination killed" else "timed-out"), m
    assert m["error"] and summary["failed"] == 1 and summary["exit"] == 1, m
    print(m)
    assert_nothing_left(cluster)


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_mid_migration_cancels_it_and_leaves_nothing_behind(cluster, sig, code):
    cluster.write(link_mbps=100, bw_cap=0.4)
    p, out = slow_run(cluster)
    p.send_signal(sig)
    assert p.wait(timeout=30) == code, out.read_text()
    assert "interrupted" in out.read_text()
    assert_nothing_left(cluster)


def sigkilled_mid_migration(cluster) -> int:
    """The executor SIGKILLed a second and a half into a 5 MB/s migration; returns the pid of the
    destination QEMU it leaves (still `inmigrate`: the source goes on sending to it)."""
    cluster.write(link_mbps=100, bw_cap=0.4)
    p, out = slow_run(cluster)
    p.kill()
    p.wait(timeout=10)
    (dest,) = cluster.destinations()
    assert int((cluster.run_dir / "zk1.h1.pid").read_text()) == dest
    assert qmp(cluster.run_dir / "zk1.h1.qmp", "query-status")["status"] == "inmigrate"
    assert cluster.source_status() == "running"
    return dest


def test_a_destination_left_by_a_sigkilled_executor_is_killed_and_removed_by_the_next_run(cluster):
    dest = sigkilled_mid_migration(cluster)
    # A dry run says what --execute would do and does nothing.
    r = cluster.run()
    assert r.returncode == 0, r.stderr
    assert f"kill QEMU pid {dest} (it never received the VM)" in r.stderr, r.stderr
    assert cluster.destinations() == [dest]
    # --execute kills it and removes its files, then migrates (uncapped now: the first one's
    # 5 MB/s would still be running). The VM was still on its source: it is what migrates.
    cluster.write(link_mbps=100_000, bw_cap=1.0)
    before = cluster.count(cluster.console)
    t0 = time.monotonic()
    r = cluster.run("--execute", "--json")
    assert r.returncode == 0, r.stderr
    print(f"clean + migrate: {time.monotonic() - t0:.2f} s")
    said = [line for line in r.stderr.splitlines() if f"killed QEMU pid {dest}" in line]
    assert said, r.stderr
    for name in ("zk1.h1.qmp", "zk1.h1.pid", "zk1.h1.log"):
        assert str(cluster.run_dir / name) in said[0], said
    print(said[0])
    (m,), summary = reports(r.stdout)
    assert m["status"] == "completed" and summary["exit"] == 0, m
    assert dest not in qemu_procs(str(cluster.run_dir)), "the leftover QEMU is gone"
    (new,) = cluster.destinations()
    assert new != dest and int((cluster.run_dir / "zk1.h1.pid").read_text()) == new
    assert left_in(cluster.run_dir) == ["zk1.h1.log", "zk1.h1.pid", "zk1.h1.qmp"]
    assert qmp(cluster.run_dir / "zk1.h1.qmp", "query-status")["status"] == "running"
    log = cluster.run_dir / "zk1.h1.log"
    deadline = time.monotonic() + 10
    while cluster.count(log) <= before:
        assert time.monotonic() < deadline, f"no COUNT past {before} on {log}: {log.read_text()[-500:]}"
        time.sleep(0.2)


def test_a_leftover_destination_that_received_the_vm_is_left_alone_and_named(cluster):
    dest = sigkilled_mid_migration(cluster)
    # The source, left on its own, finishes the migration (sped up here): the leftover has the VM.
    qmp(cluster.qmp, "migrate-set-parameters", {"max-bandwidth": 10_000_000_000})
    dest_qmp = cluster.run_dir / "zk1.h1.qmp"
    deadline = time.monotonic() + 60
    while qmp(dest_qmp, "query-status")["status"] != "running":
        assert time.monotonic() < deadline, qmp(cluster.qmp, "query-migrate")
        time.sleep(0.2)
    for flags in ((), ("--execute",)):
        r = cluster.run(*flags)
        assert r.returncode == 2, (r.stdout, r.stderr)
        assert f"{cluster.config}: migrate.run_dir: {cluster.run_dir}: QEMU pid {dest}" in r.stderr, r.stderr
        assert "zk1 on h1" in r.stderr and "received the VM" in r.stderr, r.stderr
        assert r.stdout == ""
    print(r.stderr)
    assert cluster.destinations() == [dest]
    assert qmp(dest_qmp, "query-status")["status"] == "running"
    assert left_in(cluster.run_dir) == ["zk1.h1.log", "zk1.h1.pid", "zk1.h1.qmp"]


def test_per_cluster_in_the_executor_config_is_refused(untouched):
    untouched.write(extra="per_cluster = 2\n")
    r = untouched.run("--execute")
    assert r.returncode == 2, (r.stdout, r.stderr)
    line = untouched.config.read_text().splitlines().index("per_cluster = 2") + 1
    assert f"{untouched.config}:{line}: migrate.per_cluster: not an executor key" in r.stderr, r.stderr
    assert "plan vms --per-cluster" in r.stderr
    assert untouched.destinations() == [] and not untouched.run_dir.exists()
