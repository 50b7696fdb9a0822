"""The host agent's test bed under libvirt (issue 30): scene.py's guests, taps and namespace, but
each guest is a domain defined from XML and started by a libvirtd of the scene's own.

Run by hand (as root): `python tests/host_guest/libvirt.py --smoke` boots 3 domains, prints what
libvirt says of them and tears everything down.

This machine has no systemd as PID 1 and no `libvirt-daemon-system` (no `libvirt-qemu` user, no
/etc/libvirt/qemu.conf), and a test must not change the host's libvirt set-up. So `Libvirtd` runs
the daemon in a mount namespace of its own (`ip netns exec` makes one) where
- /etc/libvirt is the scene's directory `etc/` (libvirtd.conf: no TCP, a `host_uuid` of its own so
  two daemons are two hosts to live migration; qemu.conf: qemu runs as root, no security driver);
- /etc/passwd and /etc/group are copies that add `libvirt-qemu` (libvirt 9.0's QEMU driver looks
  that user up before it reads qemu.conf's `user`, and refuses to start without it);
- /run and /var are empty tmpfs, with /run/libvirt, /var/lib/libvirt, /var/cache/libvirt and
  /var/log/libvirt bound to the scene's `run/`, `lib/`, `cache/`, `log/`: nothing of the host's
  libvirt is read or written, and clients reach the daemon at `run/libvirt-sock`
  (`qemu:///system?socket=…`).
The daemon runs inside the scene's network namespace, so the QEMU processes it starts open the
scene's taps (`<interface type='ethernet'>` with `<target dev='hgtapI' managed='no'/>`: libvirt
uses the tap as it is). It dies with the thread that started it (PR_SET_PDEATHSIG); the QEMU
processes it daemonised are in the namespace, which `scene.sweep_stale` empties, and the cgroups
libvirt made for them (`machine/qemu-N-NAME.libvirt-qemu` on cgroup v1) are removed by
`sweep_cgroups` when a run was SIGKILLed before it could destroy its domains.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from xml.sax.saxutils import escape

if __package__ in (None, ""):  # run as a script
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from numa_guest import guest  # noqa: E402

from host_guest import scene  # noqa: E402
from host_guest.scene import KERNEL_ARGS, Guest, HostScene, SceneError, Unavailable, _run  # noqa: E402

CGROUP_V1 = Path("/sys/fs/cgroup")
CGROUP_V2 = Path("/sys/fs/cgroup/unified")
DOMAIN_PREFIX = "lv"  # domains are named lv<pid of the test process>-<n>-<i>: sweepable by pid

LIBVIRTD_CONF = """\
listen_tls = 0
listen_tcp = 0
unix_sock_dir = "/run/libvirt"
host_uuid = "{uuid}"
log_outputs = "3:file:/var/log/libvirt/libvirtd.log"
"""
QEMU_CONF = """\
user = "root"
group = "root"
dynamic_ownership = 0
remember_owner = 0
security_driver = "none"
stdio_handler = "file"
"""
# In the daemon's own mount namespace (`unshare -m`, inside the scene's network namespace): a sysfs
# that shows the namespace's devices (as `ip netns exec` mounts one) with the host's cgroup
# hierarchies kept under it (`ip netns exec` would lose them, and libvirt would make no cgroups),
# its /etc/libvirt, users, /run and /var.
START = """\
set -e
R="$1"
mount --make-rslave /
mkdir -p "$R/cgroup"
mount --rbind /sys/fs/cgroup "$R/cgroup"
umount -l /sys
mount -t sysfs colosched-lv-sys /sys
mount --move "$R/cgroup" /sys/fs/cgroup
mount --bind "$R/etc" /etc/libvirt
mount --bind "$R/passwd" /etc/passwd
mount --bind "$R/group" /etc/group
mount -t tmpfs -o mode=755 colosched-lv-run /run
mount -t tmpfs -o mode=755 colosched-lv-var /var
ln -s /run /var/run
for d in run:/run/libvirt lib:/var/lib/libvirt cache:/var/cache/libvirt log:/var/log/libvirt; do
  mkdir -p "${d#*:}"
  mount --bind "$R/${d%%:*}" "${d#*:}"
done
exec libvirtd -f /etc/libvirt/libvirtd.conf
"""


def check_libvirt() -> None:
    """Raises Unavailable naming what is missing for a private libvirtd."""
    for tool in ("libvirtd", "virsh"):
        if not shutil.which(tool):
            raise Unavailable(f"`{tool}` not found (Debian: libvirt-daemon-driver-qemu, libvirt-clients)")
    if not Path("/etc/libvirt").is_dir():
        raise Unavailable("/etc/libvirt missing: no libvirt installed to bind a private configuration over")


class Libvirtd:
    """One private libvirtd rooted at `root`, inside network namespace `netns`."""

    def __init__(self, root: Path, netns: str, host: int = 1, cgroups: bool = True):
        self.root = root
        self.cgroups = cgroups
        self.netns = netns
        self.host_uuid = f"6f1c1e5e-2b8f-4d3e-9a1a-{host:012x}"
        self.uri = f"qemu:///system?socket={root}/run/libvirt-sock"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60.0) -> None:
        for d in ("etc", "run", "lib", "cache", "log"):
            (self.root / d).mkdir(parents=True, exist_ok=True)
        (self.root / "etc" / "libvirtd.conf").write_text(LIBVIRTD_CONF.format(uuid=self.host_uuid))
        # Two daemons on one machine would both name a domain's group machine/qemu-1-NAME: one that
        # does not need cgroups (a migration's) makes none.
        (self.root / "etc" / "qemu.conf").write_text(
            QEMU_CONF + ("" if self.cgroups else "cgroup_controllers = []\n")
        )
        for name, line in (
            ("passwd", "libvirt-qemu:x:64055:64055::/var/lib/libvirt:/usr/sbin/nologin"),
            ("group", "libvirt-qemu:x:64055:"),
        ):
            text = Path(f"/etc/{name}").read_text()
            if not re.search(r"^libvirt-qemu:", text, re.M):
                text = text.rstrip("\n") + "\n" + line + "\n"
            (self.root / name).write_text(text)
        with open(self.root / "daemon.out", "wb") as out:
            self.proc = subprocess.Popen(
                [
                    "nsenter",
                    f"--net=/run/netns/{self.netns}",
                    "unshare",
                    "-m",
                    "sh",
                    "-c",
                    START,
                    "sh",
                    str(self.root),
                ],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=scene._die_with_parent,
            )
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise SceneError(f"libvirtd exited {self.proc.returncode}: {self.log_tail()}")
            if (self.root / "run" / "libvirt-sock").exists():
                r = subprocess.run(
                    ["virsh", "-c", self.uri, "version"], capture_output=True, text=True, timeout=30
                )
                if r.returncode == 0:
                    return
            if time.monotonic() > deadline:
                raise SceneError(f"libvirtd did not answer in {timeout:.0f} s: {self.log_tail()}")
            time.sleep(0.2)

    def virsh(self, *args: str, timeout: float = 60.0, check: bool = True) -> str:
        return _run(["virsh", "-q", "-c", self.uri, *args], timeout=timeout, check=check)

    def domains(self) -> list[str]:
        """Names of the running domains."""
        return [n for n in self.virsh("list", "--name").split() if n]

    def qemu_pid(self, name: str) -> int:
        return int((self.root / "run" / "qemu" / f"{name}.pid").read_text().strip())

    def log_tail(self, n: int = 2000) -> str:
        text = ""
        for f in (self.root / "daemon.out", self.root / "log" / "libvirtd.log"):
            if f.exists():
                text += f.read_text(errors="replace")[-n:]
        return text.strip()

    def stop(self, failed: list[str]) -> None:
        """Destroys every domain it runs, then ends the daemon."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                for name in self.domains():
                    self.virsh("destroy", name, check=False)
            except (SceneError, subprocess.TimeoutExpired) as e:
                failed.append(f"libvirtd {self.root}: {e}")
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None


def domain_xml(name: str, g: Guest, image: Path, initrd: Path) -> str:
    """A TCG domain booting the scene's kernel and initramfs, virtio-net on guest g's existing tap
    (none when g.tap is empty), its serial console into g.console."""
    e = escape
    nic = (
        f"""    <interface type='ethernet'>
      <mac address='52:54:00:77:00:{g.index:02x}'/>
      <target dev='{e(g.tap)}' managed='no'/>
      <model type='virtio'/>
    </interface>
"""
        if g.tap
        else ""
    )
    return f"""<domain type='qemu'>
  <name>{e(name)}</name>
  <memory unit='MiB'>{g.mem_mb}</memory>
  <vcpu>{g.vcpus}</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>{e(str(image))}</kernel>
    <initrd>{e(str(initrd))}</initrd>
    <cmdline>{e(f"{KERNEL_ARGS} HG_IP={g.ip}/24")}</cmdline>
  </os>
  <features><acpi/><apic/></features>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>destroy</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>{e(str(guest.qemu()))}</emulator>
{nic}    <serial type='file'>
      <source path='{e(str(g.console))}'/>
      <target port='0'/>
    </serial>
    <memballoon model='none'/>
  </devices>
</domain>
"""


class LibvirtScene(HostScene):
    """HostScene whose guests are libvirt domains of a private daemon (`self.libvirtd`): domain i
    is named `self.domain(i)`; its QEMU pid, vCPU threads, tap and console are as in HostScene
    (QMP is libvirt's: ask `self.libvirtd.virsh("qemu-monitor-command", …)`)."""

    def __init__(self, guests: list[Guest], **kw):
        kw.setdefault("name", f"{DOMAIN_PREFIX}{os.getpid()}-{next(scene._scenes)}-")
        super().__init__(guests, **kw)
        self.libvirtd: Libvirtd | None = None
        self._partitions: list[Path] = []  # libvirt's `machine` groups this scene caused

    def domain(self, i: int) -> str:
        return f"{self.name}{i}"

    def _before_boot(self) -> None:
        check_libvirt()
        sweep_cgroups()
        self._partitions = [r / "machine" for r in cgroup_roots() if not (r / "machine").exists()]
        self.libvirtd = Libvirtd(self.dir / "libvirt", self.netns)
        self.libvirtd.start()

    def _boot(self, g: Guest, image: Path, initrd: Path) -> None:
        xml = self.dir / f"g{g.index}.xml"
        xml.write_text(domain_xml(self.domain(g.index), g, image, initrd))
        self.libvirtd.virsh("create", str(xml))
        g.qemu_pid = self.libvirtd.qemu_pid(self.domain(g.index))

    def _running(self, g: Guest) -> bool:
        return bool(g.qemu_pid) and scene.alive(g.qemu_pid)

    def _stop_guests(self, failed: list[str]) -> None:
        if self.libvirtd is not None:
            self.libvirtd.stop(failed)
        super()._stop_guests(failed)
        # libvirt makes its partition (`machine`) and never removes it: the scene does, if it
        # was not there before and nothing else is in it.
        for group in self._partitions:
            try:
                group.rmdir()
            except FileNotFoundError:
                pass
            except OSError as e:
                failed.append(f"libvirt's partition {group}: {e}")
        self._partitions = []

    def why(self, g: Guest, message: str, tail: int = 40) -> str:
        text = super().why(g, message, tail)
        if self.libvirtd is not None:
            qemu_log = self.libvirtd.root / "log" / "qemu" / f"{self.domain(g.index)}.log"
            if qemu_log.exists():
                text += "\nlibvirt's qemu log: " + qemu_log.read_text(errors="replace")[-2000:]
            text += "\nlibvirtd: " + self.libvirtd.log_tail()
        return text


def cgroup_roots() -> list[Path]:
    """The v1 hierarchies under /sys/fs/cgroup and cgroup2 (where libvirt makes groups)."""
    v1 = [p for p in CGROUP_V1.iterdir() if p.is_dir() and not p.is_symlink() and p != CGROUP_V2]
    return v1 + ([CGROUP_V2] if CGROUP_V2.is_dir() else [])


def machine_cgroups(pattern: str = "qemu-*") -> list[Path]:
    """libvirt's per-domain cgroups (`machine/qemu-N-NAME.libvirt-qemu` in each v1 hierarchy and in
    cgroup2) whose name matches `pattern`."""
    return [d for root in cgroup_roots() for d in sorted((root / "machine").glob(f"{pattern}.libvirt-qemu"))]


def sweep_cgroups() -> list[str]:
    """Removes the domain cgroups of libvirt scenes whose test process is gone (a SIGKILLed run:
    its QEMU processes were killed with its namespace, but no libvirtd was left to remove their
    groups). Empty groups only; children (vcpuN, emulator) first."""
    swept = []
    stale = re.compile(r"qemu-\d+-" + DOMAIN_PREFIX + r"(\d+)-\d+-\d+\.libvirt-qemu")
    for group in machine_cgroups():
        m = stale.fullmatch(group.name)
        if not m or scene.alive(int(m.group(1))):
            continue
        for d in sorted((p for p in group.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)) + [group]:
            try:
                d.rmdir()
                swept.append(str(d))
            except OSError:
                pass
    return swept


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="boot 3 domains, print what libvirt says, exit")
    args = parser.parse_args()
    if not args.smoke:
        parser.print_help()
        return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        with LibvirtScene([Guest(vcpus=2), Guest(), Guest()]) as s:
            print(f"netns {s.netns}: 3 domains ready in {s.boot_seconds:.1f} s, {s.libvirtd.uri}")
            for g in s.guests:
                name = s.domain(g.index)
                print(f"{name}: qemu pid {g.pid}, vCPU threads {g.vcpu_tids()}, {g.tap} -> {g.ip}")
                print(s.libvirtd.virsh("domiflist", name).strip())
            print("cgroups:", [str(p) for p in machine_cgroups(f"qemu-*-{s.name}*")])
            print(f"ping guest 0: {s.ping(0, count=3)}")
    except guest.GuestError as e:
        print(f"cannot run here: {e}", file=sys.stderr)
        return 1
    left = s.leftovers() + [str(p) for p in machine_cgroups(f"qemu-*-{s.name}*")]
    print(f"after exit: {'nothing left' if not left else left}")
    return 0 if not left else 1


if __name__ == "__main__":
    sys.exit(main())
