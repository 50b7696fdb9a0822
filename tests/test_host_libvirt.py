"""The host agent under libvirt (issue 30), for real: three TCG domains (2/1/1 vCPUs) defined from
XML and started by a private libvirtd, on taps in the test's own network namespace
(tests/host_guest/libvirt.py). With `[libvirt]` the agent asks libvirt (one `virsh` session) which
domains run, their taps (`domiflist`) and their vCPU threads (`query-cpus-fast` through
`qemu-monitor-command`, never libvirt's monitor socket); it must classify the flooded domain as
NSVM, build the pools, and put back exactly what it changed (libvirt's `vcpuN` groups, slices, and
a pinning libvirt set meanwhile) on SIGTERM and after SIGKILL + `restore`.

Needs root, qemu, the guest kernel and libvirt (libvirtd, virsh: make sysdeps installs them), a v1
cpuset hierarchy (where libvirt puts its `vcpuN` groups on this machine) and the static agent.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest
from host_guest.libvirt import LibvirtScene, cgroup_roots, machine_cgroups
from host_guest.scene import Guest
from numa_guest import guest
from test_agent_pseudo_nodes import AGENT, config_line
from test_host_agent import (
    POOLS,
    cpuset_of,
    flood_once_watched,
    need_agent_host,
    rq,
    rx_ring_run,
    slice_ns,
    stop_hogs,
    wait_for,
    windows,
)

VCPUS = [2, 1, 1]


def state(s: LibvirtScene) -> dict[int, tuple[str, int, str]]:
    """Every vCPU thread's cpuset group, slice and allowed CPUs (libvirt's pinning)."""
    out = {}
    for g in s.guests:
        for t in g.vcpu_tids():
            status = Path(f"/proc/{g.pid}/task/{t}/status").read_text()
            allowed = next(x.split()[1] for x in status.splitlines() if x.startswith("Cpus_allowed_list"))
            out[t] = (cpuset_of(g.pid, t), slice_ns(t), allowed)
    return out


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    need_agent_host()
    made = [r for r in cgroup_roots() if not (r / "machine").exists()]
    s = LibvirtScene([Guest(vcpus=n) for n in VCPUS], tmp=tmp_path_factory.mktemp("scene"))
    guest.need(s.__enter__)
    try:
        yield s
    finally:
        s.__exit__(None, None, None)
    assert s.leftovers() == []
    assert machine_cgroups(f"qemu-*-{s.name}*") == [], "libvirt's cgroups of the domains are left"
    assert not any((r / "machine").exists() for r in made), "libvirt's partition is left"
    assert not any(p.exists() for p in POOLS)


def config(tmp: Path, s: LibvirtScene, vms: str | None = None, extra: str = "") -> Path:
    if vms is None:
        vms = "".join(f'[[vm]]\nname = "{s.domain(g.index)}"\n' for g in s.guests)
    path = tmp / "host.toml"
    path.write_text(
        f'state_file = "{tmp}/state.json"\nhold_windows = 30\n{extra}\n'
        f'[libvirt]\nuri = "{s.libvirtd.uri}"\n{vms}'
    )
    return path


def agent(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(AGENT), "host", *args], capture_output=True, text=True, timeout=60)


def test_check_config_asks_libvirt_for_the_domains_their_taps_and_vcpu_threads(scene, tmp_path):
    # A QEMU of our own beside libvirt's: with vms.all, only libvirt's domains are taken.
    intruder = subprocess.Popen(
        [str(guest.qemu()), "-S", "-nodefaults", "-display", "none", "-name", "intruder,debug-threads=on"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        r = agent("check-config", "--config", str(config(tmp_path, scene, vms="[vms]\nall = true\n")))
    finally:
        intruder.kill()
        intruder.wait()
    assert r.returncode == 0, r.stderr
    assert f"libvirt {scene.libvirtd.uri}:" in r.stdout, r.stdout
    found = [x for x in r.stdout.splitlines() if x.startswith("VM ")]
    assert len(found) == 3 and "intruder" not in r.stdout, r.stdout
    for g in scene.guests:
        line = next(x for x in found if x.startswith(f"VM {scene.domain(g.index)} "))
        assert f"pid {g.pid}" in line and str(g.vcpu_tids()) in line and f'["{g.tap}"]' in line, line
    # libvirt says where its QEMU is: the vCPU threads in its vcpuN groups.
    g0 = scene.guests[0]
    assert cpuset_of(g0.pid, g0.vcpu_tids()[1]).endswith(f"{scene.domain(0)}.libvirt-qemu/vcpu1")


def test_a_domain_libvirt_does_not_run_is_watched_once_it_starts(scene, tmp_path):
    vms = f'[[vm]]\nname = "{scene.domain(0)}"\n[[vm]]\nname = "not-defined"\n'
    r = agent("check-config", "--config", str(config(tmp_path, scene, vms=vms)))
    assert r.returncode == 0, r.stderr
    assert "VM not-defined: not running now" in r.stdout, r.stdout


def test_run_builds_the_pools_keeps_libvirts_pinning_and_sigterm_puts_everything_back(scene, tmp_path):
    d0 = scene.domain(0)
    scene.libvirtd.virsh("vcpupin", d0, "1", "1")  # libvirt pins domain 0's vCPU 1 to CPU 1
    before = state(scene)
    g0, g1 = scene.guests[0], scene.guests[1]
    assert before[g0.vcpu_tids()[1]][2] == "1", before
    log = tmp_path / "log.jsonl"
    cmd = [str(AGENT), "host", "run", "--config", str(config(tmp_path, scene)), "--decision-log", str(log)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    flood = None
    try:
        flood = flood_once_watched(scene, log)
        assert wait_for(lambda: cpuset_of(g1.pid, g1.vcpu_tids()[0]) == "/colosched-host-nsvm", 8.0), (
            "no pools"
        )
        for g in scene.guests:
            want = "/colosched-host-nsvm" if g.index == 1 else "/colosched-host-nnvm"
            assert all(cpuset_of(g.pid, t) == want for t in g.vcpu_tids()), g.index
        # While the agent holds a vCPU in a pool, libvirt can pin it within the pool's CPUs
        # (NNVM: CPU 1) but not outside them: the kernel refuses an affinity that misses the
        # thread's cpuset (EINVAL), and libvirt says so. The agent owns its VMs' placement.
        r = subprocess.run(
            ["virsh", "-c", scene.libvirtd.uri, "vcpupin", d0, "0", "0"], capture_output=True, text=True
        )
        assert r.returncode == 1 and "cannot set CPU affinity" in r.stderr, r
        scene.libvirtd.virsh("vcpupin", d0, "0", "1")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
        if flood:
            flood.join()
        stop_hogs(scene)
    assert proc.returncode == 0, err
    assert "put back 4 thread(s)" in err, err
    after = state(scene)
    t0 = g0.vcpu_tids()[0]
    assert after[t0][2] == "1", after  # the pinning libvirt gave during the run holds
    assert {t: v for t, v in after.items() if t != t0} == {t: v for t, v in before.items() if t != t0}
    assert after[t0][:2] == before[t0][:2]
    assert not any(p.exists() for p in POOLS)
    rows = windows(log)
    assert any(w["pools"] and w["pools"]["nsvm"]["vms"] == [scene.domain(1)] for w in rows), rows[-1]
    scene.libvirtd.virsh("vcpupin", d0, "0", "0-1")
    scene.libvirtd.virsh("vcpupin", d0, "1", "0-1")


def test_restore_after_sigkill_puts_back_libvirts_groups(scene, tmp_path):
    before = state(scene)
    g1 = scene.guests[1]
    log = tmp_path / "log.jsonl"
    cmd = [str(AGENT), "host", "run", "--config", str(config(tmp_path, scene)), "--decision-log", str(log)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    flood = None
    try:
        flood = flood_once_watched(scene, log)
        assert wait_for(lambda: cpuset_of(g1.pid, g1.vcpu_tids()[0]) == "/colosched-host-nsvm", 8.0), (
            "no pools"
        )
    finally:
        proc.kill()
        proc.communicate(timeout=20)
        if flood:
            flood.join()
        stop_hogs(scene)
    assert POOLS[0].exists() and state(scene) != before, "SIGKILL left the changes in place"
    r = agent("restore", "--state-file", str(tmp_path / "state.json"))
    assert r.returncode == 0, r.stderr
    assert "put back 4 thread(s), 0 gone, 2 pool(s) removed, 0 error(s)" in r.stdout, r.stdout
    assert state(scene) == before
    assert not any(p.exists() for p in POOLS)


def test_rx_ring_is_read_through_libvirt(scene, tmp_path):
    """`rx_ring` on domain 1 with no QMP socket: its RX ring is read through libvirt's monitor.
    Idle it reads nearly empty, flooded with every guest hogging, full."""
    d1 = scene.domain(1)
    vms = "".join(f'[[vm]]\nname = "{scene.domain(g.index)}"\n' for g in scene.guests)
    vms = vms.replace(f'"{d1}"\n', f'"{d1}"\nrx_ring = true\n')
    log = tmp_path / "log.jsonl"
    cfg = config(tmp_path, scene, vms=vms, extra=f'dry_run = true\ndecision_log = "{log}"')
    rows, idle = rx_ring_run(scene, cfg, log)
    assert all(0 < x < 150 for x in rq(d1, rows[:idle])), rq(d1, rows[:idle])
    flooded = sorted(rq(d1, rows[idle + 3 :]))
    assert flooded and flooded[len(flooded) // 2] >= 150, flooded


def test_a_libvirt_that_does_not_answer_is_a_config_error(scene, tmp_path):
    cfg = tmp_path / "bad.toml"
    for text, key in [
        (
            '[libvirt]\nuri = "qemu:///system?socket=/nonexistent/sock"\n',
            "libvirt.uri: libvirt qemu:///system",
        ),
        (f'[libvirt]\nuri = "{scene.libvirtd.uri}"\nvirsh = "/nonexistent/virsh"\n', "libvirt.virsh"),
        ('[libvirt]\nvirsh = "virsh"\n', "libvirt.virsh: given without libvirt.uri"),
    ]:
        cfg.write_text(f'state_file = "{tmp_path}/state.json"\n{text}[vms]\nall = true\n')
        r = agent("check-config", "--config", str(cfg))
        assert r.returncode == 2, (text, r.stderr)
        assert f"{cfg}:{config_line(cfg.read_text(), key)}: {key}" in r.stderr, (text, r.stderr)
