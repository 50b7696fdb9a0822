"""The host_guest harness for real: 3 qemu TCG guests (2/1/1 vCPUs) with virtio-net on taps in a
private network namespace, traffic from the host side of that namespace, CPU hogs in the guests, and
nothing left behind afterwards (tests/host_guest/).

Needs root, the Debian packages `qemu-system-x86` and `busybox-static` (make sysdeps) and the guest
kernel (fetched once with `apt-get download`, cached); without them every test skips, saying why. A C
compiler with a static libc (gcc, libc6-dev) builds guestd: its absence is a failure.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from pathlib import Path

import pytest
from host_guest.scene import Guest, HostScene, check_host, netns_list, sweep_stale
from numa_guest import guest

VCPUS = [2, 1, 1]


def started(scene: HostScene) -> HostScene:
    return guest.need(scene.__enter__)


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    s = HostScene([Guest(vcpus=n) for n in VCPUS], tmp=tmp_path_factory.mktemp("scene"))
    started(s)
    print(f"3 guests booted in {s.boot_seconds:.1f} s")
    try:
        yield s
    finally:
        s.__exit__(None, None, None)
    assert s.leftovers() == []


def run_ns(path: str) -> int:
    """Nanoseconds of CPU a thread has run (the first field of its schedstat)."""
    return int(Path(path).read_text().split()[0])


def cpu_seconds(g: Guest, over: float = 1.0) -> list[float]:
    """CPU seconds each vCPU thread of `g` ran during the next `over` seconds."""
    paths = [f"/proc/{g.pid}/task/{tid}/schedstat" for tid in g.vcpu_tids()]
    before = [run_ns(p) for p in paths]
    time.sleep(over)
    return [(run_ns(p) - b) / 1e9 for p, b in zip(paths, before)]


def deltas(scene: HostScene, before: list[dict[str, int]], key: str) -> list[int]:
    return [scene.tap_counters(i)[key] - before[i][key] for i in range(len(before))]


def test_guests_boot_with_their_vcpus_in_the_namespace(scene):
    assert scene.boot_seconds < 60
    host_ns = os.stat("/proc/self/ns/net").st_ino
    assert scene.netns_inode != host_ns
    for g, n in zip(scene.guests, VCPUS):
        assert Path(f"/proc/{g.pid}/comm").read_text().startswith("qemu-system-x86")
        assert f"ifname={g.tap}," in Path(f"/proc/{g.pid}/cmdline").read_text()
        assert os.stat(f"/proc/{g.pid}/ns/net").st_ino == scene.netns_inode
        tids = g.vcpu_tids()
        assert len(tids) == n, (g.index, tids)
        names = [Path(f"/proc/{g.pid}/task/{t}/comm").read_text().strip() for t in tids]
        assert names == [f"CPU {k}/TCG" for k in range(n)]
        # QMP tells the same threads (the future agent's other way to find them).
        cpus = g.qmp_command("query-cpus-fast")
        assert [c["thread-id"] for c in sorted(cpus, key=lambda c: c["cpu-index"])] == tids
    # No two guests share a vCPU thread.
    all_tids = [t for g in scene.guests for t in g.vcpu_tids()]
    assert len(set(all_tids)) == sum(VCPUS)


def test_taps_exist_only_inside_the_namespace(scene):
    host_links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    inside = subprocess.run(
        ["ip", "-n", scene.netns, "-o", "addr"], capture_output=True, text=True, check=True
    ).stdout
    for g in scene.guests:
        assert f" {g.tap}:" not in host_links
        assert f" {g.tap} " in inside and f"{g.host_ip}/24" in inside


def test_ping_every_guest(scene):
    for i in range(len(scene.guests)):
        rtts = scene.ping(i, count=10, interval=0.1)
        assert len(rtts) == 10, (i, rtts)
        assert all(0 < r < 500 for r in rtts), (i, rtts)
        print(f"guest {i}: ping median {statistics.median(rtts):.2f} ms, max {max(rtts):.2f} ms")


def test_tcp_stream_into_guest_1(scene):
    before = [scene.tap_counters(i) for i in range(3)]
    sink_before = scene.stats(1)["tcp_bytes"]
    r = scene.stream(1, "tcp", seconds=3.0)
    print(f"tcp into guest 1: {r['mbit']:.0f} Mbit/s, {r['received']} bytes in {r['seconds']:.2f} s")
    assert r["received"] == r["sent"] > 0  # the sink read every byte sent
    assert scene.stats(1)["tcp_bytes"] - sink_before == r["received"]
    assert r["mbit"] > 50
    tx_packets, tx_bytes = deltas(scene, before, "tx_packets"), deltas(scene, before, "tx_bytes")
    assert tx_packets[1] > 1000
    assert tx_bytes[1] >= r["received"]  # with headers on top
    assert tx_bytes[0] + tx_bytes[2] < tx_bytes[1] / 1000  # the other taps stayed quiet
    assert deltas(scene, before, "tx_dropped") == [0, 0, 0]


def test_tcp_stream_keeps_to_its_rate_limit(scene):
    r = scene.stream(1, "tcp", seconds=2.0, mbit=40)
    assert r["received"] == r["sent"]
    assert 25 < r["mbit"] < 44, r


def test_udp_within_the_guests_means_is_not_dropped(scene):
    before = [scene.tap_counters(i) for i in range(3)]
    r = scene.stream(1, "udp", seconds=2.0, mbit=10)
    print(f"udp 10 Mbit/s into idle guest 1: {r['received_packets']}/{r['packets']} datagrams")
    assert r["packets"] > 1500
    assert r["received_packets"] >= 0.98 * r["packets"], r
    assert deltas(scene, before, "tx_dropped") == [0, 0, 0]


def test_udp_flood_into_a_hogged_guest_drops_at_its_tap_only(scene):
    scene.hog(1, True)
    try:
        before = [scene.tap_counters(i) for i in range(3)]
        r = scene.stream(1, "udp", seconds=3.0)
        dropped = deltas(scene, before, "tx_dropped")
    finally:
        scene.hog(1, False)
    print(
        f"udp flood into hogged guest 1: sent {r['packets']} datagrams ({r['sent'] * 8 / 3e6:.0f} Mbit/s), "
        f"guest got {r['received_packets']}, tap tx_dropped +{dropped[1]}, guest dropped {r['guest_dropped']}"
    )
    assert r["received_packets"] < r["packets"] / 2, r
    assert dropped[1] > r["packets"] / 4, (dropped, r)
    # The losses are the tap's (the host sees them), not the guest's own socket's.
    lost = r["packets"] - r["received_packets"]
    assert dropped[1] <= lost and dropped[1] >= 0.95 * lost, (dropped, r)
    assert dropped[0] == dropped[2] == 0


def test_hogs_keep_every_vcpu_of_the_guest_busy(scene):
    g = scene.guests[0]
    idle = cpu_seconds(g)
    scene.hog(0, True)
    try:
        time.sleep(0.3)  # let the hogs start
        work_before = scene.stats(0)["hog_work"]
        busy = cpu_seconds(g)
        work = scene.stats(0)["hog_work"] - work_before
    finally:
        scene.hog(0, False)
    stopped = scene.stats(0)["hog_work"]
    print(f"guest 0 vCPU threads ran {idle} s idle, {busy} s hogged, per second; hog_work +{work}")
    assert len(busy) == 2
    assert all(b > 0.1 for b in busy), busy  # 0.2 s/s measured beside two host CPU hogs
    assert all(b > 3 * i for b, i in zip(busy, idle)), (idle, busy)
    assert scene.stats(0)["hogs"] == 0
    assert work > 1_000_000, work  # the hogs' work is counted while they run ...
    assert scene.stats(0)["hog_work"] == stopped  # ... and only then


def test_ping_answers_under_hogs(scene):
    for i in range(3):
        scene.hog(i, True)
    try:
        rtts = scene.ping(1, count=10, interval=0.1)
    finally:
        for i in range(3):
            scene.hog(i, False)
    print(f"ping guest 1 with every guest hogged: median {statistics.median(rtts):.1f} ms, {rtts}")
    assert len(rtts) == 10 and all(0 < r < 2000 for r in rtts), rtts


class Boom(Exception):
    pass


def test_nothing_is_left_after_an_exception(tmp_path):
    s = HostScene([Guest(vcpus=1)], tmp=tmp_path)
    try:
        with pytest.raises(Boom):
            with s:
                assert s.ping(0, count=1) != []
                pid, netns = s.guests[0].pid, s.netns
                # The check below sees a live scene: namespace, qemu in it, qemu, directory.
                assert len(s.leftovers()) == 4, s.leftovers()
                raise Boom()
    except guest.GuestError as e:  # raised by entering: this machine cannot run the scene
        pytest.skip(str(e))
    assert s.leftovers() == []
    assert netns not in netns_list()
    assert not Path(f"/proc/{pid}").exists()
    assert list(tmp_path.iterdir()) == []


def test_stale_namespaces_of_a_dead_test_run_are_swept():
    guest.need(check_host)
    dead = subprocess.Popen(["true"])
    dead.wait()
    name = f"hg-{dead.pid}-0"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        assert name in sweep_stale()
        assert name not in netns_list()
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)
