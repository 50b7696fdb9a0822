"""The memwatch demo: the same growing cache server (memwatch_cache_server.py) under the same request
load in a cgroup v1 memory group with a hard limit, once without memwatch and once with it.

For each run it reports OOM kills (memory.oom_control), requests served (counted by the client),
peak usage (memory.max_usage_in_bytes) and the server's seconds spent trimming. Needs root and the
v1 memory controller; it creates /sys/fs/cgroup/memory/colosched-demo-* and always removes it.

    sudo .venv/bin/python examples/memwatch_demo.py [--limit 256M] [--duration 20] [--rate 2000] \
        [--out bench/results/memwatch_demo.json]
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
MEMCG = Path("/sys/fs/cgroup/memory")


def oom_kills(cg: Path) -> int:
    for line in (cg / "memory.oom_control").read_text().splitlines():
        if line.startswith("oom_kill "):
            return int(line.split()[1])
    raise RuntimeError(f"{cg}/memory.oom_control has no oom_kill line (kernel too old)")


def remove(cg: Path) -> None:
    end = time.monotonic() + 10
    while cg.exists():
        for pid in (cg / "cgroup.procs").read_text().split():
            subprocess.run(["kill", "-9", pid], stderr=subprocess.DEVNULL)
        try:
            cg.rmdir()
        except OSError:
            if time.monotonic() > end:
                raise
            time.sleep(0.05)


def run(mode: str, limit: str, duration: float, rate: float, thresholds: list[str], seed: int) -> dict:
    cg = MEMCG / f"colosched-demo-{uuid.uuid4().hex[:8]}"
    cg.mkdir()
    try:
        (cg / "memory.limit_in_bytes").write_text(limit)
        tmp = Path(tempfile.mkdtemp(prefix="memwatch-demo-"))
        sock, stats = tmp / "s", tmp / "stats.json"
        args = [
            sys.executable,
            str(HERE / "memwatch_cache_server.py"),
            "--socket",
            str(sock),
            "--stats",
            str(stats),
        ]
        if mode == "memwatch":
            args += ["--memwatch", "--cgroup", str(cg)] + [f for t in thresholds for f in ("--threshold", t)]
        # The shell joins the group first, so everything the server allocates is charged to it.
        server = subprocess.Popen(
            ["sh", "-c", f'echo $$ > {cg}/cgroup.procs && exec "$@"', "sh", *args],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert server.stdout.readline().strip() == "ready", "server did not start"
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(str(sock))
        f = conn.makefile("rwb")
        rng = random.Random(seed)
        served, next_key, t0 = 0, 0, time.monotonic()
        while time.monotonic() - t0 < duration:
            # 70 % new keys (the cache grows), 30 % one of the last 2000 (hits if still cached).
            if next_key < 10 or rng.random() < 0.7:
                key, next_key = next_key, next_key + 1
            else:
                key = rng.randrange(max(0, next_key - 2000), next_key)
            try:
                f.write(b"GET k%d\n" % key)
                f.flush()
                if not f.readline():
                    break
            except OSError:  # the server was killed
                break
            served += 1
            lag = t0 + served / rate - time.monotonic()
            if lag > 0:
                time.sleep(lag)
        elapsed = time.monotonic() - t0
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)  # the server saves its counters and exits 0
        code = server.wait(10)
        conn.close()
        st = json.loads(stats.read_text()) if stats.exists() else {}
        return {
            "mode": mode,
            "limit": limit,
            "thresholds": thresholds if mode == "memwatch" else [],
            "oom_kills": oom_kills(cg),
            "server_survived": code == 0,
            "server_exit": code,
            "requests_served": served,
            "seconds": round(elapsed, 2),
            "peak_usage_mib": round(int((cg / "memory.max_usage_in_bytes").read_text()) / 2**20, 1),
            "trims": st.get("trims", 0),
            "hard_trims": st.get("hard_trims", 0),
            "trim_seconds": round(st.get("trim_seconds", 0.0), 4),
            "hits": st.get("hits"),
        }
    finally:
        remove(cg)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", default="256M")
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--rate", type=float, default=2000.0, help="requests per second")
    ap.add_argument("--threshold", action="append", default=None, help="two: trim, then trim harder")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    thresholds = a.threshold or ["60%", "85%"]
    rows = [run(m, a.limit, a.duration, a.rate, thresholds, a.seed) for m in ("plain", "memwatch")]
    cols = [
        "mode",
        "oom_kills",
        "requests_served",
        "seconds",
        "peak_usage_mib",
        "trims",
        "hard_trims",
        "trim_seconds",
    ]
    print("  ".join(f"{c:>15}" for c in cols))
    for r in rows:
        print("  ".join(f"{r[c]!s:>15}" for c in cols))
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        cmd = "sudo .venv/bin/python examples/memwatch_demo.py " + " ".join(sys.argv[1:])
        a.out.write_text(json.dumps({"command": cmd.strip(), "runs": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
