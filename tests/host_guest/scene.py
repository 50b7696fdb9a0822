"""Boot QEMU TCG guests with virtio-net on taps in a private network namespace (see __init__.py).

Run by hand (as root): `python tests/host_guest/scene.py --smoke` boots 3 guests, prints what it
found, sends a little traffic and tears everything down; `--hold N` keeps the scene up N seconds.
"""

from __future__ import annotations

import argparse
import ctypes
import gzip
import itertools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as a script: numa_guest lives beside this package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from numa_guest import guest  # noqa: E402

HERE = Path(__file__).resolve().parent
INIT_SCRIPT = HERE / "init.sh"
GUESTD_SOURCE = HERE / "guestd.c"
CTL_PORT, TCP_PORT, UDP_PORT = 5000, 5001, 5002  # = guestd.c
NETNS_PREFIX = "hg-"  # namespaces are named hg-<pid of the test process>-<n>
KERNEL_ARGS = "console=ttyS0 quiet panic=-1 oops=panic"
BOOT_TIMEOUT_S = 120.0
VCPU_COMM = re.compile(r"CPU (\d+)/TCG")
CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
_scenes = itertools.count()
_libc = ctypes.CDLL(None, use_errno=True)


class Unavailable(guest.GuestError):
    """This machine cannot run the scene (not root, no qemu, no kernel): a reason to skip.
    A GuestError, so `guest.need` turns it into pytest.skip with the reason."""


class SceneError(RuntimeError):
    """The scene was set up but misbehaved (a guest did not boot, a command failed)."""


def _run(cmd: list[str], timeout: float = 30.0, check: bool = True) -> str:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if check and r.returncode != 0:
        raise SceneError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()[-500:]}")
    return r.stdout


def check_host() -> None:
    """Raises Unavailable naming what this machine lacks."""
    if os.geteuid() != 0:
        raise Unavailable("not root: network namespaces and taps need root")
    if not shutil.which("ip"):
        raise Unavailable("`ip` (iproute2) not found")
    if not Path("/dev/net/tun").exists():
        raise Unavailable("/dev/net/tun missing: no tap devices on this kernel")
    guest.qemu()
    guest.busybox()


def netns_list() -> list[str]:
    return [line.split()[0] for line in _run(["ip", "netns", "list"]).splitlines() if line.strip()]


def alive(pid: int) -> bool:
    """True while `pid` runs: a zombie (dead, its parent gone before reaping it) counts as ended."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # the state follows the parenthesised comm


def sweep_stale() -> list[str]:
    """Deletes what scenes of a test process that is gone left (it was SIGKILLed: no cleanup code
    ran): their namespaces, with any process still in them, and their directories in the default
    temporary directory. Returns what it deleted."""
    swept = []
    stale = re.compile(re.escape(NETNS_PREFIX) + r"(\d+)-\d+")
    for name in netns_list():
        m = stale.fullmatch(name)
        if not m or alive(int(m.group(1))):
            continue
        for pid in _run(["ip", "netns", "pids", name], check=False).split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        _run(["ip", "netns", "del", name], check=False)
        swept.append(name)
    for path in Path(tempfile.gettempdir()).glob(f"{NETNS_PREFIX}*"):
        m = stale.fullmatch(path.name.split(".")[0])
        if m and path.is_dir() and not alive(int(m.group(1))):
            shutil.rmtree(path, ignore_errors=True)
            swept.append(str(path))
    return swept


def _die_with_parent() -> None:
    # Runs in the child before exec: qemu gets SIGKILL when the thread that started it ends, so a
    # SIGKILLed test run (no cleanup code runs) leaves no guest behind.
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _module_archive(modules: list[Path]) -> bytes:
    """A gzip'd newc archive of the modules as lib/modules/NN-name.ko: NN makes the glob in init.sh
    load them in order. The kernel unpacks concatenated archives one after the other, so this one is
    simply appended to the initramfs guest.build_initramfs writes."""
    files = {f"lib/modules/{n:02d}-{p.name}": (p.read_bytes(), 0o644) for n, p in enumerate(modules)}
    return gzip.compress(guest.newc_archive(["lib", "lib/modules"], files, {}, {}), compresslevel=1)


@dataclass
class Guest:
    """One guest: what is asked (vcpus, mem_mb), then what the scene made of it."""

    vcpus: int = 1
    mem_mb: int = 160
    index: int = field(default=-1, init=False)
    tap: str = field(default="", init=False)  # inside the scene's namespace
    host_ip: str = field(default="", init=False)  # the tap's address
    ip: str = field(default="", init=False)  # eth0's address in the guest
    qmp: Path = field(default=Path(), init=False)  # QMP unix socket
    console: Path = field(default=Path(), init=False)  # serial console log
    proc: subprocess.Popen | None = field(default=None, init=False, repr=False)
    qemu_pid: int = field(default=0, init=False)  # set when qemu is not our child (libvirt's)

    @property
    def pid(self) -> int:
        if self.qemu_pid:
            return self.qemu_pid
        assert self.proc is not None, "the guest is not running"
        return self.proc.pid

    def vcpu_tids(self) -> list[int]:
        """Host thread ids of the vCPUs (threads named `CPU n/TCG`), in vCPU order."""
        found = []
        for task in Path(f"/proc/{self.pid}/task").iterdir():
            try:
                comm = (task / "comm").read_text().strip()
            except (FileNotFoundError, ProcessLookupError):  # the thread has just ended
                continue
            m = VCPU_COMM.fullmatch(comm)
            if m:
                found.append((int(m.group(1)), int(task.name)))
        return [tid for _, tid in sorted(found)]

    def qmp_command(self, command: str, arguments: dict | None = None, timeout: float = 5.0):
        """One QMP command on a fresh connection; returns its "return" value."""
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(timeout)
            s.connect(str(self.qmp))
            f = s.makefile("rwb")
            json.loads(f.readline())  # the greeting
            msg = {"execute": command, **({"arguments": arguments} if arguments else {})}
            for m in ({"execute": "qmp_capabilities"}, msg):
                f.write(json.dumps(m).encode() + b"\n")
                f.flush()
                for _ in range(100):  # asynchronous events may come before the reply
                    reply = json.loads(f.readline() or b"{}")
                    if "return" in reply or "error" in reply or not reply:
                        break
                if "return" not in reply:
                    raise SceneError(f"QMP {m['execute']} on {self.qmp}: {reply}")
            return reply["return"]

    def console_text(self) -> str:
        try:
            return self.console.read_bytes().decode(errors="replace").replace("\r\n", "\n")
        except FileNotFoundError:
            return ""


class HostScene:
    """Guests on taps in a private network namespace, torn down on exit whatever happened.

    `with HostScene([Guest(vcpus=2), Guest()], tmp=path) as s:` boots them (in parallel) and waits
    until each guest's guestd answers on its control port. Guest i is at 10.77.i.2, its tap `hgtapI`
    at 10.77.i.1. Every traffic and control socket is made inside the namespace; nothing is sent
    outside it. qemu dies with the thread that entered the scene (PR_SET_PDEATHSIG), so enter it
    from a thread that outlives it (the main thread, or a pytest fixture). Guest i's qemu is named
    `<name>i` (`-name`, what a host agent's config names it by): a scene run beside another one
    (another engineer's tests) should have a name of its own, or an agent finds both."""

    def __init__(
        self,
        guests: list[Guest],
        tmp: Path | None = None,
        boot_timeout: float = BOOT_TIMEOUT_S,
        name: str = "hg",
    ):
        self.guests = guests
        self.name = name
        self.netns = f"{NETNS_PREFIX}{os.getpid()}-{next(_scenes)}"
        self.netns_inode = 0
        self.boot_seconds = 0.0
        self._tmp = tmp
        self._boot_timeout = boot_timeout
        self.dir: Path | None = None
        self._netns_made = False

    # --- setup and teardown ---------------------------------------------------------------------

    def __enter__(self) -> HostScene:
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _start(self) -> None:
        check_host()
        sweep_stale()
        try:
            image, modules = guest.net_kernel()
        except guest.GuestError as e:
            raise Unavailable(f"guest kernel or its virtio modules cannot be fetched: {e}") from e
        self.dir = Path(tempfile.mkdtemp(prefix=f"{self.netns}.", dir=self._tmp))
        guestd = self.dir / "guestd"
        _run(["gcc", "-static", "-O2", "-o", str(guestd), str(GUESTD_SOURCE)], timeout=120)
        initrd = self.dir / "initrd.gz"
        guest.build_initramfs(initrd, INIT_SCRIPT, programs={"guestd": guestd})
        with open(initrd, "ab") as f:
            f.write(_module_archive(modules))

        _run(["ip", "netns", "add", self.netns])
        self._netns_made = True
        self.netns_inode = os.stat(f"/run/netns/{self.netns}").st_ino
        inside = ["ip", "netns", "exec", self.netns]
        # No IPv6 in the namespace: its neighbour and router chatter would move idle taps' counters.
        _run([*inside, str(guest.busybox()), "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"])
        _run([*inside, str(guest.busybox()), "sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"])
        _run(["ip", "-n", self.netns, "link", "set", "lo", "up"])
        self._before_boot()
        start = time.monotonic()
        for i, g in enumerate(self.guests):
            g.index, g.tap = i, f"hgtap{i}"
            g.host_ip, g.ip = f"10.77.{i}.1", f"10.77.{i}.2"
            g.qmp, g.console = self.dir / f"g{i}.qmp", self.dir / f"g{i}.console"
            _run(["ip", "-n", self.netns, "tuntap", "add", "dev", g.tap, "mode", "tap"])
            _run(["ip", "-n", self.netns, "addr", "add", f"{g.host_ip}/24", "dev", g.tap])
            _run(["ip", "-n", self.netns, "link", "set", g.tap, "up"])
            self._boot(g, image, initrd)
        self._wait_ready(start)
        self.boot_seconds = time.monotonic() - start

    def _boot(self, g: Guest, image: Path, initrd: Path) -> None:
        """Starts guest g's qemu on its tap (made by now) inside the namespace."""
        inside = ["ip", "netns", "exec", self.netns]
        i = g.index
        cmd = [str(guest.qemu()), "-accel", "tcg", "-smp", str(g.vcpus), "-m", str(g.mem_mb)]
        cmd += [
            "-nodefaults",
            "-display",
            "none",
            "-no-reboot",
            "-name",
            f"{self.name}{i},debug-threads=on",
        ]
        cmd += ["-kernel", str(image), "-initrd", str(initrd)]
        cmd += ["-append", f"{KERNEL_ARGS} HG_IP={g.ip}/24"]
        cmd += ["-serial", f"file:{g.console}", "-qmp", f"unix:{g.qmp},server=on,wait=off"]
        cmd += ["-netdev", f"tap,id=n0,ifname={g.tap},script=no,downscript=no"]
        cmd += ["-device", f"virtio-net-pci,netdev=n0,mac=52:54:00:77:00:{i:02x}"]
        # `ip netns exec` enters the namespace and execs qemu: the child's pid is qemu's.
        with open(self.dir / f"g{i}.qemu.log", "wb") as log:
            g.proc = subprocess.Popen(
                inside + cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
            )

    def _wait_ready(self, start: float) -> None:
        pending = list(self.guests)
        while pending:
            for g in list(pending):
                if not self._running(g):
                    raise SceneError(self.why(g, f"qemu of guest {g.index} exited"))
                if "HG READY" in g.console_text():
                    pending.remove(g)
            if time.monotonic() - start > self._boot_timeout:
                raise SceneError(self.why(pending[0], f"guest {pending[0].index} not ready in time"))
            time.sleep(0.1)
        for g in self.guests:  # the network path works (and neighbours are resolved) before traffic
            try:
                reply = self.stats(g.index)
            except OSError as e:
                raise SceneError(self.why(g, f"guest {g.index}'s guestd does not answer: {e}")) from e
            if reply.get("cpus") != g.vcpus:
                raise SceneError(self.why(g, f"guest {g.index} reports {reply}, want cpus={g.vcpus}"))

    def _before_boot(self) -> None:
        """Runs once the namespace is up, before any guest boots (a daemon to start)."""

    def _running(self, g: Guest) -> bool:
        return g.proc is not None and g.proc.poll() is None

    def _stop_guests(self, failed: list[str]) -> None:
        """Kills every guest's qemu; what could not be stopped goes into `failed`."""
        for g in self.guests:
            if g.proc is not None and g.proc.poll() is None:
                g.proc.kill()
                try:
                    g.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    failed.append(f"qemu {g.pid} survived SIGKILL")

    def close(self) -> None:
        """Kills qemu, deletes the taps and the namespace, removes the scene's files. Idempotent;
        raises SceneError after trying everything if something could not be removed."""
        failed: list[str] = []
        self._stop_guests(failed)
        if self._netns_made:
            # Anything else still in the namespace is the scene's too (a sender started by hand).
            for pid in _run(["ip", "netns", "pids", self.netns], check=False).split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            for g in self.guests:
                if g.tap:
                    _run(["ip", "-n", self.netns, "link", "del", g.tap], check=False)
            r = subprocess.run(["ip", "netns", "del", self.netns], capture_output=True, text=True)
            if r.returncode != 0:
                failed.append(f"ip netns del {self.netns}: {r.stderr.strip()}")
            self._netns_made = False
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
        if failed:
            raise SceneError("scene cleanup: " + "; ".join(failed))

    def leftovers(self) -> list[str]:
        """What of this scene still exists (empty after a clean exit): the namespace's name or any
        process in it, a qemu process, the scene's directory."""
        found = []
        if self.netns in netns_list() or Path(f"/run/netns/{self.netns}").exists():
            found.append(f"netns {self.netns}")
        # A process of the scene can hold the namespace after its name is gone. Its inode number
        # may be given to a new namespace once freed, so only processes that name the scene count.
        for ns in Path("/proc").glob("[0-9]*/ns/net"):
            try:
                if self.netns_inode and os.stat(ns).st_ino == self.netns_inode:
                    cmdline = (ns.parent.parent / "cmdline").read_bytes().decode(errors="replace")
                    if self.netns in cmdline or (self.dir and str(self.dir) in cmdline):
                        found.append(f"process {ns.parts[2]} in the scene's namespace: {cmdline!r}")
            except OSError:  # the process ended, or is a kernel thread
                pass
        for g in self.guests:
            if (g.proc is not None or g.qemu_pid) and alive(g.pid):
                found.append(f"qemu pid {g.pid} of guest {g.index}")
        if self.dir is not None and self.dir.exists():
            found.append(f"directory {self.dir}")
        return found

    def why(self, g: Guest, message: str, tail: int = 40) -> str:
        lines = g.console_text().splitlines()[-tail:]
        qemu_log = self.dir / f"g{g.index}.qemu.log" if self.dir else None
        qemu_out = qemu_log.read_text(errors="replace")[-2000:] if qemu_log and qemu_log.exists() else ""
        return f"{message}\nqemu said: {qemu_out.strip()}\nconsole's last lines:\n" + "\n".join(lines)

    # --- inside the namespace -------------------------------------------------------------------

    def netns_socket(self, family: int = socket.AF_INET, type_: int = socket.SOCK_STREAM) -> socket.socket:
        """A socket in the scene's namespace. A short-lived thread makes it after setns() (which
        switches only the calling thread), and a socket stays in the namespace it was made in."""
        made: list = []

        def make() -> None:
            try:
                fd = os.open(f"/run/netns/{self.netns}", os.O_RDONLY)
                try:
                    if _libc.setns(fd, CLONE_NEWNET) != 0:
                        raise OSError(ctypes.get_errno(), "setns")
                finally:
                    os.close(fd)
                made.append(socket.socket(family, type_))
            except BaseException as e:  # handed to the caller's thread
                made.append(e)

        t = threading.Thread(target=make)
        t.start()
        t.join()
        if isinstance(made[0], BaseException):
            raise made[0]
        return made[0]

    def control(self, i: int, command: str, timeout: float = 15.0) -> dict[str, int]:
        """Sends one command to guest i's guestd ("stats", "hog 1", "hog 0"); returns its reply."""
        with self.netns_socket() as s:
            s.settimeout(timeout)
            s.connect((self.guests[i].ip, CTL_PORT))
            s.sendall(command.encode() + b"\n")
            reply = _read_to_eof(s).decode()
        pairs = dict(w.split("=", 1) for w in reply.split() if "=" in w)
        if not pairs or "error" in pairs:
            raise SceneError(f"guest {i}: {command!r} -> {reply!r}")
        return {k: int(v) for k, v in pairs.items()}

    def stats(self, i: int) -> dict[str, int]:
        """guestd's counters: udp_bytes, udp_packets, tcp_bytes, tcp_streams, hogs, cpus, hog_work (the
        hogs' loop iterations since boot: the work they did), and the guest kernel's
        udp_rcvbuf_errors (datagrams it dropped because the sink's socket was full)."""
        return self.control(i, "stats")

    def hog(self, i: int, on: bool = True) -> None:
        """Starts (or stops) a busy loop pinned to each vCPU of guest i."""
        reply = self.control(i, f"hog {int(on)}")
        want = self.guests[i].vcpus if on else 0
        if reply["hogs"] != want:
            raise SceneError(f"guest {i}: hog {on} left {reply['hogs']} hogs, want {want}")

    def tap_counters(self, i: int) -> dict[str, int]:
        """/sys/class/net/<tap>/statistics of guest i's tap, read inside the namespace (sysfs shows
        the devices of the namespace it is mounted in; `ip netns exec` mounts the right one)."""
        path = f"/sys/class/net/{self.guests[i].tap}/statistics"
        out = _run(["ip", "netns", "exec", self.netns, "grep", "-r", ".", path])
        return {
            line.rsplit("/", 1)[1].split(":")[0]: int(line.rsplit(":", 1)[1]) for line in out.splitlines()
        }

    def ping(self, i: int, count: int = 10, interval: float = 0.2) -> list[float]:
        """Round-trip times (ms) of `count` pings to guest i; a lost ping is missing from the list."""
        cmd = ["ip", "netns", "exec", self.netns, str(guest.busybox()), "ping"]
        cmd += ["-c", str(count), "-i", str(interval), "-W", "2", self.guests[i].ip]
        out = _run(cmd, timeout=count * interval + 15, check=False)
        return [float(t) for t in re.findall(r"time=([0-9.]+) ms", out)]

    def stream(
        self, i: int, proto: str = "tcp", seconds: float = 3.0, mbit: float | None = None, size: int = 1400
    ) -> dict:
        """Sends to guest i's sink for `seconds` (at most `mbit` Mbit/s if given). Returns sent and
        received bytes (TCP: what the sink read, which it tells at the end; UDP: guestd's counter,
        read after a short pause for what is still queued), the received rate and the elapsed time.
        UDP datagrams carry `size` bytes of payload; UDP also returns packets (sent), received_packets,
        guest_dropped (by the guest kernel: socket full) and refused (sends that failed on the host)."""
        if proto == "tcp":
            return self._tcp(i, seconds, mbit)
        if proto == "udp":
            return self._udp(i, seconds, mbit, size)
        raise ValueError(f"proto must be 'tcp' or 'udp', not {proto!r}")

    def _tcp(self, i: int, seconds: float, mbit: float | None) -> dict:
        chunk = bytes(1 << 16)
        sent = 0
        with self.netns_socket() as s:
            s.settimeout(15.0)  # a guest that stops reading fails the call instead of hanging it
            s.connect((self.guests[i].ip, TCP_PORT))
            start = time.monotonic()
            while time.monotonic() < start + seconds:
                if not _paced(start, seconds, sent, mbit):
                    sent += s.send(chunk)
            s.shutdown(socket.SHUT_WR)
            received = int(_read_to_eof(s) or b"-1")
            elapsed = time.monotonic() - start
        return _result("tcp", sent, received, elapsed, seconds)

    def _udp(self, i: int, seconds: float, mbit: float | None, size: int) -> dict:
        before = self.stats(i)
        payload = bytes(size)
        sent = packets = refused = 0
        with self.netns_socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((self.guests[i].ip, UDP_PORT))
            start = time.monotonic()
            while time.monotonic() < start + seconds:
                if _paced(start, seconds, sent, mbit):
                    continue
                for _ in range(32):  # the clock is read once per batch: a flood is cheap to send
                    try:
                        s.send(payload)
                    except OSError:  # ENOBUFS, or ECONNREFUSED after an ICMP error: counted, not fatal
                        refused += 1
                        continue
                    sent += size
                    packets += 1
        elapsed = time.monotonic() - start
        time.sleep(0.5)  # let the guest drain what its ring and socket still hold
        after = self.stats(i)
        result = _result("udp", sent, after["udp_bytes"] - before["udp_bytes"], elapsed, seconds)
        result.update(packets=packets, received_packets=after["udp_packets"] - before["udp_packets"])
        result["guest_dropped"] = after["udp_rcvbuf_errors"] - before["udp_rcvbuf_errors"]
        result["refused"] = refused
        return result


def _read_to_eof(s: socket.socket, limit: int = 1 << 16) -> bytes:
    data = b""
    while len(data) < limit:
        got = s.recv(4096)
        if not got:
            break
        data += got
    return data


def _result(proto: str, sent: int, received: int, elapsed: float, seconds: float) -> dict:
    return {
        "proto": proto,
        "sent": sent,
        "received": received,
        "seconds": elapsed,
        "mbit": received * 8 / elapsed / 1e6 if elapsed > 0 else 0.0,
        "asked_seconds": seconds,
    }


def _paced(start: float, seconds: float, sent: int, mbit: float | None) -> bool:
    """Sleeps while `sent` bytes are ahead of `mbit` (until the stream's end at most); whether it
    slept, so the caller reads the clock again before sending."""
    now = time.monotonic()
    ahead = sent * 8 / (mbit * 1e6) - (now - start) if mbit else 0.0
    if ahead > 0:
        time.sleep(max(0.0, min(ahead, start + seconds - now)))
    return ahead > 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="boot, print, send a little traffic, exit")
    parser.add_argument("--vcpus", default="2,1,1", help="vCPUs of each guest (default 2,1,1)")
    parser.add_argument("--seconds", type=float, default=2.0, help="length of each stream (default 2)")
    parser.add_argument("--hold", type=float, default=0.0, help="keep the scene up this many seconds")
    args = parser.parse_args()
    if not args.smoke and not args.hold:
        parser.print_help()
        return 2
    # SIGTERM ends the with-block like Ctrl-C does, so the scene is torn down.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        guests = [Guest(vcpus=int(v)) for v in args.vcpus.split(",")]
    except ValueError:
        parser.error(f"--vcpus: a comma-separated list of integers, not {args.vcpus!r}")
    try:
        with HostScene(guests) as s:
            print(f"netns {s.netns}: {len(guests)} guests ready in {s.boot_seconds:.1f} s")
            for g in s.guests:
                print(
                    f"guest {g.index}: qemu pid {g.pid}, vcpus {g.vcpus}, vCPU threads {g.vcpu_tids()}, "
                    f"{g.tap} {g.host_ip} -> {g.ip}, qmp {g.qmp}"
                )
            if args.smoke:
                rtts = s.ping(0, count=5)
                print(f"ping guest 0: {len(rtts)}/5 replies, ms {rtts}")
                print(f"tcp into guest 0: {s.stream(0, 'tcp', args.seconds)}")
                s.hog(0, True)
                before = s.tap_counters(0)["tx_dropped"]
                print(f"udp flood into guest 0 with hogs: {s.stream(0, 'udp', args.seconds)}")
                print(f"tap {s.guests[0].tap} tx_dropped +{s.tap_counters(0)['tx_dropped'] - before}")
                s.hog(0, False)
            if args.hold:
                print(f"holding {args.hold:.0f} s; try: ip netns exec {s.netns} ping {s.guests[0].ip}")
                time.sleep(args.hold)
    except guest.GuestError as e:
        print(f"cannot run here: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # the scene is torn down by now
        print("interrupted", file=sys.stderr)
        return 130
    left = s.leftovers()
    print(f"after exit: {'nothing left' if not left else left}")
    return 0 if not left else 1


if __name__ == "__main__":
    sys.exit(main())
