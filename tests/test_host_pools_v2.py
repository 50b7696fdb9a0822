"""The host agent's CPU pools on cgroup v2 (pools.cgroup = "v2"), on a real kernel: this host binds
the cpuset controller to cgroup v1, so the Debian cloud kernel boots under qemu TCG
(tests/numa_guest/, 4 CPUs) with cgroup2 mounted and cpuset listed, and the static
`colosched-agent host run` (scheduler = "ia-rotate", CPUs 0-1 called fast) pins the vCPU threads of
fake QEMUs (tests/numa_guest/fakeqemu.c: `CPU n/TCG` threads that spin) one CPU each. One boot runs
it all (tests/numa_guest/hostpools_init.sh):

1. SIGTERM: VM a in /vms/a (a systemd-style scope), VM r in the root cgroup, VM c in /vms/c, which
   exits mid-run; no group has cpuset enabled, so the agent enables it from the root down.
2. SIGKILL, then `host restore`: VM b as libvirt makes it (its vCPU threads in threaded
   /lv/b/vcpu<n>, cpuset already enabled down to them), beside VM a.

Each vCPU thread must sit in a threaded `colosched-host-cpu<N>` child of its own cgroup and run on
CPU N; the main (I/O) threads stay where they were; afterwards every thread, subtree_control and
cgroup type is as before and no colosched-host-* group is left. And on this host, pools.cgroup =
"v2" (cpuset is v1-bound here) is a config error naming the key, exit 2.

Needs the Debian packages `qemu-system-x86` and `busybox-static` (make sysdeps; without them the
guest tests skip, saying so), a C compiler with a static libc and the static agent (make
agent-static): those missing is a failure.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from numa_guest import guest
from test_agent_pseudo_nodes import config_line

BOOT_TIMEOUT_S = 300.0
BUILD_TIMEOUT_S = 3600
INIT_SCRIPT = guest.HERE / "hostpools_init.sh"
FAKEQEMU_SOURCE = guest.HERE / "fakeqemu.c"
UNIFIED = Path("/sys/fs/cgroup/unified")


class Run(guest.Console):
    """The guest's console: `HP` lines and blocks (`guest.Console`)."""

    def block(self, name: str) -> str:
        assert name in self.blocks, self.why(f"no block {name}")
        return self.blocks[name]

    def snapshot(self, name: str) -> list[str]:
        return self.block(name).splitlines()


@pytest.fixture(scope="module")
def agent_binary() -> Path:
    """The static agent (`make agent-static` builds it if missing; failing to is a failure)."""
    guest.static_binaries(guest.AGENT_BIN, timeout=BUILD_TIMEOUT_S)
    return guest.AGENT_BIN


@pytest.fixture(scope="module")
def fakeqemu(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("fakeqemu") / "qemu-system-x86_64"
    return guest.static_c(FAKEQEMU_SOURCE, out, "-pthread")


@pytest.fixture(scope="module")
def hp(agent_binary, fakeqemu, tmp_path_factory) -> Run:
    guest.need(guest.qemu)
    guest.need(guest.busybox)
    kernel_image = guest.kernel()  # with the tools present, a kernel that cannot be had is an error
    work = tmp_path_factory.mktemp("hostpools-guest")
    initrd = guest.build_initramfs(
        work / "initrd.gz", INIT_SCRIPT, agent_binary, programs={"qemu-system-x86_64": fakeqemu}
    )
    boot = guest.boot(kernel_image, initrd, work / "console.log", BOOT_TIMEOUT_S)
    print(f"host pools v2: guest ran {boot.seconds:.1f} s, console in {boot.log}")
    run = Run.parse(boot, "HP")
    assert boot.returncode is not None, run.why(f"guest killed after the {BOOT_TIMEOUT_S:.0f} s timeout")
    assert run.find("DONE"), run.why("init script did not finish (no 'HP DONE')")
    assert not run.find("FATAL"), run.why("cgroup2 could not be mounted")
    assert "cpuset" in run.one("kernel")["controllers"].split(","), run.why(
        "no cpuset on the guest's cgroup2"
    )
    return run


def threads(snapshot: list[str]) -> dict[str, dict[str, str]]:
    """`thread VM/COMM tid=T cg=G allowed=L` lines, by tid."""
    out = {}
    for line in snapshot:
        if line.startswith("thread "):
            name, *pairs = line.split()[1:]
            kv = dict(p.split("=", 1) for p in pairs)
            out[kv["tid"]] = {"name": name, **kv}
    return out


def pool_of(parent: str, cpu: str) -> str:
    return f"{parent.rstrip('/')}/colosched-host-cpu{cpu}"


@pytest.mark.parametrize("scene", ["term", "kill"])
def test_vcpu_threads_sit_in_threaded_pools_in_their_own_cgroup_and_run_there(hp, scene):
    """Each vCPU thread is in `<its cgroup>/colosched-host-cpu<N>` (its cgroup: a scope, the root, or
    libvirt's threaded vcpu<n>), whose effective CPUs are N, and the thread is allowed and has run
    on CPU N only (read with the agent stopped, after 1 s of spinning there)."""
    before = threads(hp.snapshot(f"before-{scene}"))
    vcpus = [v for v in hp.find("vcpu") if v["scene"] == scene]
    want = {"term": 5, "kill": 4}[scene]  # a, r, c (1 vCPU) / a, b
    assert len(vcpus) == want, hp.why(f"{scene}: {len(vcpus)} vCPU threads reported, want {want}")
    for v in vcpus:
        assert v["tid"] in before, hp.why(f"{scene}: a vCPU thread not in the snapshot before: {v}")
        parent = before[v["tid"]]["cg"]
        assert "colosched-host" not in parent, hp.why(f"{scene}: a thread started in a pool: {v}")
        assert v["cg"] == pool_of(parent, v["eff"]), hp.why(
            f"{scene}: vCPU not in its pool beside {parent}: {v}"
        )
        assert v["allowed"] == v["eff"] == v["ran"], hp.why(f"{scene}: vCPU not on its pool's CPU: {v}")
    print(f"{scene}: " + "; ".join(f"{v['vm']} {v['tid']} in {v['cg']} ran on {v['ran']}" for v in vcpus))
    # ia-rotate: a VM's vCPUs on distinct CPUs.
    for vm in {v["vm"] for v in vcpus}:
        cpus = [v["eff"] for v in vcpus if v["vm"] == vm]
        assert len(set(cpus)) == len(cpus), hp.why(f"{scene}: VM {vm}'s vCPUs share a CPU: {cpus}")
    # The libvirt-style VM's pools are children of its threaded vcpu<n> groups.
    if scene == "kill":
        b = sorted(v["cg"] for v in vcpus if v["vm"] == "b")
        assert [c.rsplit("/", 1)[0] for c in b] == ["/lv/b/vcpu0", "/lv/b/vcpu1"], hp.why(f"VM b: {b}")


def test_main_threads_stay_in_their_cgroup_on_every_cpu(hp):
    mains = hp.find("main")
    assert len(mains) == 3 + 2, hp.why("main threads reported")  # a, r, c; a, b
    for scene in ("term", "kill"):
        before = threads(hp.snapshot(f"before-{scene}"))
        for m in (m for m in mains if m["scene"] == scene):
            assert m["cg"] == before[m["tid"]]["cg"] and m["allowed"] == "0-3", hp.why(
                f"main thread moved: {m}"
            )


def test_sigterm_puts_every_thread_subtree_control_and_group_back(hp):
    r = hp.one("result", name="term")
    assert r["signal"] == "TERM" and r["agent_rc"] == "0", hp.why(f"agent did not exit 0 on SIGTERM: {r}")
    assert r["state_left"] == "no", hp.why("state file left after SIGTERM")
    # VM c exited mid-run and its group /vms/c was removed then: compare without them.
    before = [x for x in hp.snapshot("before-term") if not x.startswith(("thread c/", "group /vms/c "))]
    after = hp.snapshot("after-term")
    assert after == before, hp.why(f"not as before:\n{after}\nwas\n{before}")
    assert "sc=[]" in next(x for x in before if x.startswith("group / ")), hp.why(
        "the root had cpuset before"
    )
    # What the agent did and undid: cpuset on /, /vms and /vms/a (VM c's /vms/c was gone by then).
    summary = hp.block("agent-term")
    assert "cpuset taken out of 3 cgroup.subtree_control(s), 0 error(s)" in summary, hp.why(summary)


def test_sigkill_then_restore_puts_everything_back_and_keeps_libvirts_cpuset(hp):
    r = hp.one("result", name="kill")
    assert r["signal"] == "KILL" and r["agent_rc"] == "137", hp.why(f"agent was not SIGKILLed: {r}")
    assert r["restore_rc"] == "0" and r["state_left"] == "no", hp.why(f"`host restore` failed: {r}")
    before, after = hp.snapshot("before-kill"), hp.snapshot("after-kill")
    assert after == before, hp.why(f"not as before:\n{after}\nwas\n{before}")
    # Enabled by the agent: /vms, /vms/a, /lv/b/vcpu0 and vcpu1; /, /lv and /lv/b had it (libvirt's).
    restore = hp.block("restore-kill")
    assert "cpuset taken out of 4 cgroup.subtree_control(s), 0 error(s)" in restore, hp.why(restore)
    assert "group /lv/b sc=[cpuset] type=domain_threaded" in after, hp.why("libvirt's group changed")


def test_a_vm_that_exits_leaves_no_group_in_its_cgroup(hp):
    """Its manager must be able to remove its cgroup: the agent removes its pools there."""
    gone = hp.one("gone", vm="c")
    assert gone["pools_left"] == "0" and gone["rmdir_rc"] == "0", hp.why(f"VM c's cgroup kept a pool: {gone}")


def test_start_line_and_decision_log_name_v2_and_the_agent_never_crashed(hp):
    for scene in ("term", "kill"):
        r = hp.one("result", name=scene)
        assert r["alive_before_signal"] == "yes", hp.why(f"{scene}: the agent exited by itself")
        log = hp.block(f"agent-{scene}")
        assert "panicked" not in log, hp.why(f"{scene}: the agent panicked")
        assert "pools: cgroup v2: a threaded cpuset group" in log, hp.why(f"{scene}: no start line: {log}")
        first = json.loads(hp.block(f"first-window-{scene}"))
        assert first["cgroup"] == "v2" and first["scheduler"] == "ia-rotate", hp.why(str(first))
        print(f"{scene}: placed in {int(r['placed_cs']) / 100:.1f} s, {r['windows']} windows")


def test_pools_cgroup_v2_where_cpuset_is_bound_to_v1_exits_2_naming_the_key(agent_binary, tmp_path):
    """On this host (no guest): cgroup2 is at /sys/fs/cgroup/unified and lists no cpuset."""
    controllers = UNIFIED / "cgroup.controllers"
    if not controllers.exists():
        pytest.skip(f"no cgroup2 at {UNIFIED} on this machine")
    if "cpuset" in controllers.read_text().split():
        pytest.skip(f"{controllers} lists cpuset here: the v1-bound case cannot be made")
    cfg = tmp_path / "host.toml"
    base = (
        f'state_file = "{tmp_path}/state.json"\n[[vm]]\nname = "nope"\n[paths]\ncgroup2_root = "{UNIFIED}"\n'
    )
    pools = "[pools]\nnsvm_slice_ms = 0\nnnvm_slice_ms = 0\n"
    cfg.write_text(base + pools + 'cgroup = "v2"\n')
    r = subprocess.run(
        [str(agent_binary), "host", "check-config", "--config", str(cfg)], capture_output=True, text=True
    )
    assert r.returncode == 2, r
    line = config_line(cfg.read_text(), "cgroup")
    assert f'{cfg}:{line}: pools.cgroup: "v2" needs the cpuset controller on cgroup2' in r.stderr, r.stderr
    # auto takes the v1 hierarchy here (when it is mounted).
    if not Path("/sys/fs/cgroup/cpuset/cpuset.cpus").exists():
        return
    cfg.write_text(base + pools)
    r = subprocess.run(
        [str(agent_binary), "host", "check-config", "--config", str(cfg)], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    assert "pools: cgroup v1: cpuset groups in /sys/fs/cgroup/cpuset" in r.stdout, r.stdout
