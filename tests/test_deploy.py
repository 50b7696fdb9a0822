"""deploy/: the Kubernetes manifests validated against the Kubernetes API schemas (the
`kubernetes-validate` package, strict), the DaemonSet and its ConfigMap checked to agree, and the
OCI image `scripts/oci_image.py` writes unpacked by an independent tool (umoci) and its
entrypoint run, as a container runtime would, on the DaemonSet's own config over a kubelet
cgroup tree built here (a real cgroup, a pod inside)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.parallel  # asserts no timing: may run beside other tests (pyproject.toml)

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "deploy/kubernetes/colosched-agent.yaml"
AGENT = ROOT / "target/x86_64-unknown-linux-gnu/release/colosched-agent"
VALIDATE = Path(sys.executable).parent / "kubernetes-validate"


def docs() -> dict[str, dict]:
    return {d["kind"]: d for d in yaml.safe_load_all(MANIFEST.read_text())}


def test_the_manifests_pass_the_kubernetes_schemas_strictly(tmp_path):
    assert VALIDATE.exists(), "kubernetes-validate is missing: `make venv` installs it"
    r = subprocess.run([str(VALIDATE), "--strict", str(MANIFEST)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("passed") == 4, r.stdout
    # The validator does refuse: a misspelt field of the pod spec.
    bad = tmp_path / "bad.yaml"
    bad.write_text(MANIFEST.read_text().replace("hostPID: true", "hostPid: true"))
    r = subprocess.run([str(VALIDATE), "--strict", str(bad)], capture_output=True, text=True)
    assert r.returncode != 0 and "hostPid" in r.stdout + r.stderr, r.stdout + r.stderr


def test_the_daemonset_and_its_config_agree():
    tomllib = pytest.importorskip("tomllib", reason="reads TOML with Python 3.11's tomllib")
    d = docs()
    config = tomllib.loads(d["ConfigMap"]["data"]["agent.toml"])
    pod = d["DaemonSet"]["spec"]["template"]["spec"]
    (agent,) = pod["containers"]
    mounts = {m["name"]: m["mountPath"] for m in agent["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert pod["hostPID"], "the agent must see the node's processes"
    assert config["be"]["kubernetes"] and "cgroups" not in config["be"]
    # The config file is where the args say; the host's cgroups where the config reads them;
    # the state file on the host, so that a restarted pod puts back what a killed one changed.
    assert agent["args"][agent["args"].index("--config") + 1] == f"{mounts['config']}/agent.toml"
    assert config["topology"]["cgroup_root"] == mounts["cgroup"]
    assert volumes["cgroup"]["hostPath"]["path"] == "/sys/fs/cgroup"
    assert Path(config["state_file"]).parent == Path(mounts["state"])
    assert volumes["state"]["hostPath"]["path"] == mounts["state"]
    port = int(config["metrics"]["listen"].rsplit(":", 1)[1])
    assert agent["ports"][0]["containerPort"] == port
    assert agent["readinessProbe"]["httpGet"] == {"path": "/metrics", "port": "metrics"}
    service = d["Service"]["spec"]
    assert service["selector"] == d["DaemonSet"]["spec"]["selector"]["matchLabels"]
    assert service["ports"][0]["targetPort"] == "metrics"
    assert agent["securityContext"]["capabilities"]["add"] == ["SYS_NICE"]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a cgroup, mounts in a private namespace, chroot")
def test_the_image_unpacks_and_its_entrypoint_checks_the_shipped_config(tmp_path):
    assert AGENT.exists(), f"{AGENT} is missing: `make agent-static` builds it (make test does)"
    assert shutil.which("umoci"), "umoci is missing: `make sysdeps` installs it"
    layout = tmp_path / "image"
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts/oci_image.py"), "--binary", str(AGENT), "--out", str(layout)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    bundle = tmp_path / "bundle"
    r = subprocess.run(
        ["umoci", "unpack", "--image", f"{layout}:0.1.0", str(bundle)], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    args = json.loads((bundle / "config.json").read_text())["process"]["args"]
    assert args == ["/colosched-agent", "run", "--config", "/etc/colosched/agent.toml"]
    rootfs = bundle / "rootfs"
    # As the DaemonSet runs it: the node's /proc and /sys, the host's cgroups at
    # /host/sys/fs/cgroup (here a cgroup of our own holding a kubelet tree with one pod). This
    # machine has one NUMA node and the shipped config uses NUMA nodes: its /sys is a fake one
    # of 2 nodes of one CPU each (a fake only for the topology the agent reads at start).
    sysfs = tmp_path / "sys"
    for name, text in [
        ("node/node0/cpulist", "0"),
        ("node/node1/cpulist", "1"),
        ("cpu/possible", "0-1"),
        ("cpu/online", "0-1"),
    ]:
        (sysfs / "devices/system" / name).parent.mkdir(parents=True, exist_ok=True)
        (sysfs / "devices/system" / name).write_text(text + "\n")
    cgroups = Path("/sys/fs/cgroup/cpuacct") / f"colosched-test-{uuid.uuid4().hex[:8]}"
    pod = cgroups / "kubepods/besteffort/pod0b8c7f0e-1d2a/c1"
    pod.mkdir(parents=True)
    try:
        for d in ("proc", "sys", "host/sys/fs/cgroup"):
            (rootfs / d).mkdir(parents=True, exist_ok=True)
        check = ["check-config" if a == "run" else a for a in args]
        script = (
            f"mount --bind /proc {rootfs}/proc && mount --bind {sysfs} {rootfs}/sys && "
            f"mount --bind {cgroups} {rootfs}/host/sys/fs/cgroup && exec chroot {rootfs} " + " ".join(check)
        )
        r = subprocess.run(
            ["unshare", "--mount", "sh", "-c", script], capture_output=True, text=True, timeout=30
        )
    finally:
        for d in [pod, *pod.parents][:5]:  # c1, the pod, besteffort, kubepods, ours
            d.rmdir()
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ok: 2 node(s) from numa (0 | 1)"), r.stdout
    assert "pods from /host/sys/fs/cgroup/kubepods (Cgroupfs driver): 1 BestEffort" in r.stdout, r.stdout
    assert not (rootfs / "run").exists(), "check-config made nothing"


def test_the_systemd_units_verify(tmp_path):
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("no systemd-analyze (the systemd package) to verify the units")
    assert AGENT.exists(), f"{AGENT} is missing: `make agent-static` builds it (make test does)"
    units = sorted((ROOT / "deploy/systemd").glob("*.service"))
    assert [u.name for u in units] == ["colosched-agent.service", "colosched-host-agent.service"]
    for unit in units:
        # The binary where the unit expects it to be installed: here, where it was built.
        text = unit.read_text().replace("/usr/local/bin/colosched-agent", str(AGENT))
        (tmp_path / unit.name).write_text(text)
        r = subprocess.run([analyze, "verify", str(tmp_path / unit.name)], capture_output=True, text=True)
        assert r.returncode == 0 and r.stderr == "", (unit.name, r.stderr)
        # Each command line is one the agent accepts.
        for line in text.splitlines():
            if line.startswith(("ExecStart=", "ExecStopPost=")):
                argv = line.split("=", 1)[1].split()
                subcommand = argv[1:-2]  # without --config FILE
                r = subprocess.run([*argv[:1], *subcommand, "--help"], capture_output=True, text=True)
                assert r.returncode == 0 and "--config" in r.stdout, (line, r.stderr)
    # verify does refuse: a value systemd cannot parse.
    bad = tmp_path / "bad.service"
    bad.write_text((tmp_path / units[0].name).read_text().replace("Restart=on-failure", "Restart=sometimes"))
    r = subprocess.run([analyze, "verify", str(bad)], capture_output=True, text=True)
    assert "sometimes" in r.stderr, r.stderr


def exported_metrics() -> set[str]:
    """The series names the agents' registries export (from their source: each registry's
    prefix and registered names; a counter adds `_total`, a histogram `_bucket`)."""
    names = set()
    for path in ("crates/agent/src/metrics.rs", "crates/host/src/agent/metrics.rs"):
        text = (ROOT / path).read_text()
        (prefix,) = re.findall(r'Registry::with_prefix\("([a-z_]+)"\)', text)
        for name in re.findall(r'register\(\s*"([a-z_]+)"', text):
            names |= {f"{prefix}_{name}{s}" for s in ("", "_total", "_bucket")}
    return names


def test_the_dashboard_asks_only_for_series_the_agents_export():
    dash = json.loads((ROOT / "deploy/grafana/colosched-agents.json").read_text())
    exported = exported_metrics()
    assert "colosched_agent_pod_moves_total" in exported and "colosched_host_pool_cpus" in exported
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    used = {m for e in exprs for m in re.findall(r"colosched_[a-z_]+", e)}
    assert used and used <= exported, used - exported
    # Both agents are on it, each through several of its series.
    assert sum(u.startswith("colosched_agent_") for u in used) >= 6
    assert sum(u.startswith("colosched_host_") for u in used) >= 6


def test_the_image_script_refuses_a_missing_binary_or_a_used_directory(tmp_path):
    script = [sys.executable, str(ROOT / "scripts/oci_image.py")]
    r = subprocess.run(
        [*script, "--binary", str(tmp_path / "nope"), "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "--binary" in r.stderr and not (tmp_path / "o").exists(), r.stderr
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "x").write_text("")
    binary = tmp_path / "bin"
    binary.write_bytes(b"\x7fELF")
    r = subprocess.run(
        [*script, "--binary", str(binary), "--out", str(tmp_path / "used")], capture_output=True, text=True
    )
    assert r.returncode == 2 and "not empty" in r.stderr, r.stderr
    assert sorted(p.name for p in (tmp_path / "used").iterdir()) == ["x"], "nothing written"
