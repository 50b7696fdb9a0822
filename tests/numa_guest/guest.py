"""Build and boot a 4-NUMA-node Linux guest under qemu TCG (see __init__.py).

Everything here needs only Debian packages: `qemu-system-x86`, `busybox-static` and the kernel package
this module downloads with `apt-get download` (cached under ~/.cache/colosched/numa-guest/). The
initramfs is written by hand in the kernel's `newc` cpio format, so no `cpio` binary is needed.
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
AGENT_BIN = REPO / "target" / "x86_64-unknown-linux-gnu" / "release" / "colosched-agent"
INIT_SCRIPT = HERE / "init.sh"
SMOKE_INIT_SCRIPT = HERE / "smoke_init.sh"
AGENT_CONFIG = HERE / "agent.toml"

# Guest shape: NODES NUMA nodes of CPUS_PER_NODE CPUs and NODE_MEM_MB each. One CPU per node keeps TCG
# fast on a 2-core host (every vCPU is a host thread, and the scenarios keep all of them busy).
NODES = 4
CPUS_PER_NODE = 1
NODE_MEM_MB = 256
# `panic=-1` reboots at once on a panic (e.g. /init dying) and `-no-reboot` turns that into a qemu
# exit, so a broken guest ends quickly instead of waiting for the timeout.
KERNEL_ARGS = "console=ttyS0 quiet panic=-1 oops=panic"
TERMINAL_ESCAPE = re.compile(r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|[@-~])")
KERNEL_PACKAGE = re.compile(r"^(linux-image-6\.1\.0-(\d+)-cloud-amd64)\s")


class GuestError(RuntimeError):
    """The guest cannot be built or booted on this machine (the message says what is missing)."""


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    path = Path(base) / "colosched" / "numa-guest"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _abi(path: Path) -> int:
    m = re.search(r"6\.1\.0-(\d+)-", path.name)
    return int(m.group(1)) if m else -1


def _run(cmd: list[str], cwd: Path | None = None) -> str:
    try:
        r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300)
    except FileNotFoundError as e:
        raise GuestError(f"{cmd[0]} not found (a Debian system is needed to fetch the guest kernel)") from e
    if r.returncode != 0:
        raise GuestError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()[-1000:]}")
    return r.stdout


def newest_kernel_package() -> str:
    """The newest `linux-image-6.1.0-N-cloud-amd64` the apt lists know (an `apt-get update` first if
    they know none, as on a fresh machine)."""
    for attempt in range(2):
        out = _run(["apt-cache", "search", "--names-only", r"^linux-image-6\.1\.0-[0-9]+-cloud-amd64$"])
        found = [(int(m.group(2)), m.group(1)) for m in map(KERNEL_PACKAGE.match, out.splitlines()) if m]
        if found:
            return max(found)[1]
        if attempt == 0:
            _run(["apt-get", "update", "-qq"])
    raise GuestError("apt-cache knows no linux-image-6.1.0-*-cloud-amd64 package")


def kernel() -> Path:
    """The guest kernel: the cached one if any (no network), else downloaded and extracted once."""
    cache = cache_dir()
    cached = sorted(cache.glob("vmlinuz-6.1.0-*-cloud-amd64"), key=_abi)
    if cached:
        return cached[-1]
    package = newest_kernel_package()
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        work = Path(tmp)
        # apt drops root to the `_apt` user for downloads; it must be able to write here.
        work.chmod(0o777)
        _run(["apt-get", "download", "-q", package], cwd=work)
        debs = list(work.glob(f"{package}_*.deb"))
        if len(debs) != 1:
            raise GuestError(f"apt-get download {package} left {debs!r}")
        _run(["dpkg-deb", "-x", str(debs[0]), str(work / "x")])
        images = list((work / "x" / "boot").glob("vmlinuz-*"))
        if len(images) != 1:
            raise GuestError(f"{debs[0].name} holds no single /boot/vmlinuz-*: {images!r}")
        target = cache / images[0].name
        # Copy, then rename: a run killed half-way never leaves a truncated kernel in the cache.
        shutil.copyfile(images[0], work / "vmlinuz.part")
        os.replace(work / "vmlinuz.part", target)
    return target


# The virtio-net driver and what it needs, in load order: the cloud kernel builds none of them in, and
# each needs symbols of the ones before it (`virtio` those of `virtio_ring`).
NET_MODULES = (
    "virtio_ring",
    "virtio",
    "virtio_pci_modern_dev",
    "virtio_pci_legacy_dev",
    "virtio_pci",
    "failover",
    "net_failover",
    "virtio_net",
)


def _extract_package(package: str, work: Path) -> Path:
    """Downloads `package` into `work` (a directory in the cache) and extracts it; returns its root."""
    work.mkdir(exist_ok=True)
    work.chmod(0o777)  # apt drops root to the `_apt` user for downloads
    _run(["apt-get", "download", "-q", package], cwd=work)
    debs = list(work.glob(f"{package}_*.deb"))
    if len(debs) != 1:
        raise GuestError(f"apt-get download {package} left {debs!r}")
    _run(["dpkg-deb", "-x", str(debs[0]), str(work / "x")])
    return work / "x"


def _cache_net_modules(root: Path, release: str) -> Path:
    """Copies NET_MODULES of the extracted package `root` to the cache as modules-RELEASE/."""
    cache = cache_dir()
    target = cache / f"modules-{release}"
    found = {p.name[: -len(".ko")]: p for p in (root / "lib" / "modules" / release).rglob("*.ko")}
    missing = [m for m in NET_MODULES if m not in found]
    if missing:
        raise GuestError(f"linux-image-{release} has no module {', '.join(missing)}")
    part = Path(tempfile.mkdtemp(dir=cache, prefix="modules.part-"))
    part.chmod(0o755)  # mkdtemp's 0700 would stay on the cached directory
    try:
        for m in NET_MODULES:
            shutil.copyfile(found[m], part / f"{m}.ko")
        # One rename of the whole directory: a run killed half-way never leaves some modules cached.
        try:
            os.rename(part, target)
        except OSError:
            if not target.is_dir():  # else another run cached them first: keep theirs
                raise
    finally:
        shutil.rmtree(part, ignore_errors=True)
    return target


def net_kernel() -> tuple[Path, list[Path]]:
    """A guest kernel and its virtio-net modules (NET_MODULES, in load order), cached together.

    The modules must come from the very package of the kernel (same release), so they are fetched
    for the kernel `kernel()` returns; if apt no longer offers that release (the cache outlived it),
    the newest package's kernel and modules are cached instead and returned."""
    image = kernel()
    release = image.name[len("vmlinuz-") :]
    target = cache_dir() / f"modules-{release}"
    if not target.is_dir():
        with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
            try:
                _cache_net_modules(_extract_package(f"linux-image-{release}", Path(tmp)), release)
            except GuestError:
                package = newest_kernel_package()
                newest = package[len("linux-image-") :]
                if newest == release:
                    raise
                root = _extract_package(package, Path(tmp) / "newest")
                _cache_net_modules(root, newest)
                shutil.copyfile(root / "boot" / f"vmlinuz-{newest}", Path(tmp) / "vmlinuz.part")
                image = cache_dir() / f"vmlinuz-{newest}"
                os.replace(Path(tmp) / "vmlinuz.part", image)
                release, target = newest, cache_dir() / f"modules-{newest}"
    return image, [target / f"{m}.ko" for m in NET_MODULES]


def is_static_elf(path: Path) -> bool:
    """True for an x86-64 ELF without a PT_INTERP program header (needs no dynamic loader: the
    initramfs has no libc)."""
    with open(path, "rb") as f:
        head = f.read(64)
        if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
            return False
        (phoff,) = struct.unpack_from("<Q", head, 32)
        phentsize, phnum = struct.unpack_from("<HH", head, 54)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    pt_interp = 3
    return all(struct.unpack_from("<I", table, i * phentsize)[0] != pt_interp for i in range(phnum))


def busybox() -> Path:
    found = shutil.which("busybox") or "/bin/busybox"
    path = Path(found)
    if not path.exists():
        raise GuestError("busybox not found: install the Debian package `busybox-static` (make sysdeps)")
    if not is_static_elf(path):
        raise GuestError(f"{path} is not statically linked: install `busybox-static`, not `busybox`")
    return path


def qemu() -> Path:
    found = shutil.which("qemu-system-x86_64")
    if not found:
        raise GuestError("qemu-system-x86_64 not found: install the Debian package `qemu-system-x86`")
    return Path(found)


# --- initramfs: the kernel's "newc" cpio format (Documentation/driver-api/early-userspace) --------


def _newc_entry(
    name: str, mode: int, data: bytes = b"", ino: int = 0, rdev: tuple[int, int] = (0, 0)
) -> bytes:
    name_bytes = name.encode() + b"\0"
    nlink = 2 if stat.S_ISDIR(mode) else 1
    fields = (ino, mode, 0, 0, nlink, 0, len(data), 0, 0, rdev[0], rdev[1], len(name_bytes), 0)
    header = b"070701" + b"".join(b"%08X" % v for v in fields)
    out = header + name_bytes
    out += b"\0" * (-len(out) % 4)  # the name is padded so the data starts on a 4-byte boundary
    out += data + b"\0" * (-len(data) % 4)
    return out


def newc_archive(
    dirs: list[str],
    files: dict[str, tuple[bytes, int]],
    links: dict[str, str],
    chardevs: dict[str, tuple[int, int]],
) -> bytes:
    """An uncompressed newc archive. `files` maps a path to (content, permission bits); `links` a
    path to its symlink target; `chardevs` a path to (major, minor). Paths have no leading '/'."""
    parts = []
    ino = 1
    for d in dirs:
        parts.append(_newc_entry(d, stat.S_IFDIR | 0o755, ino=ino))
        ino += 1
    for path, (data, perm) in files.items():
        parts.append(_newc_entry(path, stat.S_IFREG | perm, data, ino=ino))
        ino += 1
    for path, target in links.items():
        parts.append(_newc_entry(path, stat.S_IFLNK | 0o777, target.encode(), ino=ino))
        ino += 1
    for path, rdev in chardevs.items():
        parts.append(_newc_entry(path, stat.S_IFCHR | 0o600, ino=ino, rdev=rdev))
        ino += 1
    parts.append(_newc_entry("TRAILER!!!", 0))
    return b"".join(parts)


def build_initramfs(
    out: Path,
    init_script: Path,
    agent: Path | None = None,
    config: Path | None = None,
    programs: dict[str, Path] | None = None,
) -> Path:
    """Writes a gzip'd newc initramfs with busybox (and its applet links), /init, and optionally the
    agent binary (as /bin/colosched-agent), its config (as /etc/colosched/agent.toml) and more static
    `programs` (name -> host file, each as /bin/NAME)."""
    bb = busybox()
    applets = _run([str(bb), "--list"]).split()
    dirs = ["bin", "dev", "etc", "etc/colosched", "proc", "run", "sys", "tmp"]
    files = {
        "bin/busybox": (bb.read_bytes(), 0o755),
        "init": (init_script.read_bytes(), 0o755),
    }
    links = {f"bin/{a}": "busybox" for a in applets if a != "busybox" and "/" not in a}
    if agent is not None:
        if not is_static_elf(agent):
            raise GuestError(f"{agent} is not a static x86-64 ELF: the initramfs has no libc")
        files["bin/colosched-agent"] = (agent.read_bytes(), 0o755)
    if config is not None:
        files["etc/colosched/agent.toml"] = (config.read_bytes(), 0o644)
    for name, path in (programs or {}).items():
        if not is_static_elf(path):
            raise GuestError(f"{path} is not a static x86-64 ELF: the initramfs has no libc")
        files[f"bin/{name}"] = (path.read_bytes(), 0o755)
    # The kernel opens /dev/console for init's stdio before /init can mount devtmpfs.
    chardevs = {"dev/console": (5, 1), "dev/null": (1, 3)}
    archive = newc_archive(dirs, files, links, chardevs)
    out.write_bytes(gzip.compress(archive, compresslevel=1))
    return out


# --- boot ------------------------------------------------------------------------------------------


def qemu_command(kernel_image: Path, initrd: Path) -> list[str]:
    cmd = [str(qemu()), "-accel", "tcg", "-m", str(NODES * NODE_MEM_MB), "-smp", str(NODES * CPUS_PER_NODE)]
    cmd += ["-nographic", "-no-reboot", "-nic", "none", "-kernel", str(kernel_image), "-initrd", str(initrd)]
    cmd += ["-append", KERNEL_ARGS]
    for n in range(NODES):
        first, last = n * CPUS_PER_NODE, (n + 1) * CPUS_PER_NODE - 1
        cpus = str(first) if first == last else f"{first}-{last}"
        cmd += ["-object", f"memory-backend-ram,id=m{n},size={NODE_MEM_MB}M"]
        cmd += ["-numa", f"node,nodeid={n},cpus={cpus},memdev=m{n}"]
    return cmd


@dataclass
class Boot:
    console: str  # the serial console, '\r\n' normalised to '\n'
    seconds: float  # wall time from qemu start to its exit (or to the kill)
    returncode: int | None  # None when the timeout killed qemu
    log: Path

    def why(self, message: str, tail: int = 80) -> str:
        """`message` with how qemu ended and the console's last `tail` lines: a failure's story."""
        lines = self.console.splitlines()[-tail:]
        return (
            f"{message}\nqemu exit {self.returncode} after {self.seconds:.1f} s; "
            f"serial console kept in {self.log}; its last {len(lines)} lines:\n" + "\n".join(lines)
        )


def static_binaries(*bins: Path, timeout: float = 3600) -> None:
    """`make agent-static` when any of `bins` (static binaries it makes) is missing; a build that
    fails is a failure of this project, never a reason to skip."""
    if not all(b.exists() for b in bins):
        r = subprocess.run(
            ["make", "agent-static"], cwd=REPO, capture_output=True, text=True, timeout=timeout
        )
        assert r.returncode == 0, f"`make agent-static` failed: {r.stderr.strip()[-2000:]}"
    for b in bins:
        assert b.exists(), f"{b} is missing after `make agent-static`"
        assert is_static_elf(b), f"{b} is not statically linked"


def static_c(source: Path, out: Path, *flags: str) -> Path:
    """`source` compiled with `cc -static` into `out` (the initramfs has no libc)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "no C compiler: install gcc and libc6-dev (make sysdeps does)"
    r = subprocess.run(
        [cc, "-static", *flags, "-O2", "-o", str(out), str(source)], capture_output=True, text=True
    )
    assert r.returncode == 0, f"cc -static {source} failed (libc6-dev has the static libc): {r.stderr}"
    assert is_static_elf(out), f"{out} is not static"
    return out


@dataclass
class Console:
    """What an init script reported on the guest's console: `PREFIX` lines (words and key=value
    pairs) and `PREFIX-BEGIN name` ... `PREFIX-END name` blocks."""

    boot: Boot
    prefix: str
    lines: list[tuple[list[str], dict[str, str]]] = field(default_factory=list)
    blocks: dict[str, str] = field(default_factory=dict)
    tail: int = 60  # console lines shown with a failure

    @classmethod
    def parse(cls, boot: Boot, prefix: str, tail: int = 60):
        run = cls(boot, prefix, tail=tail)
        for line in boot.console.splitlines():
            if line.startswith(prefix + " "):
                tokens = line.split()[1:]
                words = [t for t in tokens if "=" not in t]
                run.lines.append((words, dict(t.split("=", 1) for t in tokens if "=" in t)))
        for m in re.finditer(rf"^{prefix}-BEGIN (\S+)\n(.*?)^{prefix}-END \1$", boot.console, re.M | re.S):
            run.blocks[m.group(1)] = m.group(2)
        return run

    def find(self, *words: str, **match: str) -> list[dict[str, str]]:
        """The key=value pairs of every line whose words are exactly `words` and whose pairs
        include `match`."""
        return [p for w, p in self.lines if w == list(words) and all(p.get(k) == v for k, v in match.items())]

    def one(self, *words: str, **match: str) -> dict[str, str]:
        found = self.find(*words, **match)
        assert len(found) == 1, self.why(
            f"expected one '{self.prefix} {' '.join(words)} {match}' line, got {len(found)}"
        )
        return found[0]

    def why(self, message: str) -> str:
        return self.boot.why(message, tail=self.tail)


def need(what):
    """Runs a guest builder step; a missing host tool (qemu, busybox) skips the test with the
    builder's reason, printed."""
    import pytest

    try:
        return what()
    except GuestError as e:
        print(f"SKIP: {e}")
        pytest.skip(str(e))


def boot(kernel_image: Path, initrd: Path, log: Path, timeout: float = 240.0) -> Boot:
    """Boots the guest with the serial console captured into `log`; qemu is killed after `timeout`
    seconds, so a hung guest cannot hang the test run."""
    cmd = qemu_command(kernel_image, initrd)
    start = time.monotonic()
    returncode: int | None
    with open(log, "wb") as out:
        try:
            r = subprocess.run(
                cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, timeout=timeout
            )
            returncode = r.returncode
        except subprocess.TimeoutExpired:  # subprocess.run has killed qemu already
            returncode = None
    seconds = time.monotonic() - start
    console = log.read_bytes().decode(errors="replace").replace("\r\n", "\n")
    # SeaBIOS resets and clears the terminal; its escape codes would glue onto the guest's first line.
    console = TERMINAL_ESCAPE.sub("", console)
    return Boot(console, seconds, returncode, log)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="boot smoke_init.sh (no agent needed)")
    parser.add_argument("--agent", type=Path, default=AGENT_BIN)
    parser.add_argument("--timeout", type=float, default=240.0)
    parser.add_argument("--workdir", type=Path, default=None, help="default: a new temporary directory")
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="numa-guest-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.smoke:
        initrd = build_initramfs(work / "initrd.gz", SMOKE_INIT_SCRIPT)
    else:
        initrd = build_initramfs(work / "initrd.gz", INIT_SCRIPT, args.agent, AGENT_CONFIG)
    result = boot(kernel(), initrd, work / "console.log", args.timeout)
    print(result.console)
    print(f"# qemu exit {result.returncode} after {result.seconds:.1f} s; console in {result.log}")
    return 0 if result.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
