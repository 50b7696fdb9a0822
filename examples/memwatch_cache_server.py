"""A small cache server whose cache only grows, for the memwatch demo (examples/memwatch_demo.py).

It answers `GET <key>` lines on a Unix socket with the length of the value, computing a 32 KiB value
on a miss and keeping it forever. In its memory cgroup, that ends with the kernel's OOM killer —
unless `--memwatch` is given: then `colosched.memwatch.on_threshold` tells it when the group's usage
crosses the first threshold (a light trim: it evicts the oldest quarter of the cache and runs gc;
the freed heap is reused for new entries, so usage grows more slowly but is not given back) and
the second (a hard trim: it keeps only the newest tenth, runs gc and `malloc_trim` to give the
memory back to the kernel). It writes its counters (requests, hits, trims, seconds
spent trimming) as JSON to `--stats` after each trim and at exit.

    python memwatch_cache_server.py --socket /tmp/s --stats /tmp/stats.json \
        [--memwatch --cgroup /sys/fs/cgroup/memory/demo --threshold 60% --threshold 85%]
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import signal
import socket
import threading
import time
from collections import OrderedDict

VALUE_BYTES = 32 << 10

try:
    _libc = ctypes.CDLL("libc.so.6")
except OSError:  # not glibc: no malloc_trim
    _libc = None


class Server:
    def __init__(self, stats_path: str):
        self.cache: OrderedDict[str, bytes] = OrderedDict()
        self.lock = threading.Lock()
        self.stats_path = stats_path
        self.stats = {"requests": 0, "hits": 0, "trims": 0, "hard_trims": 0, "trim_seconds": 0.0}

    def get(self, key: str) -> int:
        with self.lock:
            self.stats["requests"] += 1
            v = self.cache.get(key)
            if v is not None:
                self.cache.move_to_end(key)
                self.stats["hits"] += 1
                return len(v)
        # A miss: "compute" the value (distinct bytes, so nothing is shared).
        v = (key.encode() * (VALUE_BYTES // max(1, len(key)) + 1))[:VALUE_BYTES]
        with self.lock:
            self.cache[key] = v
        return len(v)

    def trim(self, keep: float, hard: bool) -> None:
        """Keeps the newest `keep` share of the cache; a hard trim also gives the freed memory
        back to the kernel."""
        t0 = time.perf_counter()
        with self.lock:
            drop = len(self.cache) - int(len(self.cache) * keep)
            for _ in range(drop):
                self.cache.popitem(last=False)
        gc.collect()
        if hard and _libc is not None:
            _libc.malloc_trim(0)
        self.stats["trims"] += 1
        self.stats["hard_trims"] += int(hard)
        self.stats["trim_seconds"] += time.perf_counter() - t0
        self.save()

    def save(self) -> None:
        tmp = self.stats_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({**self.stats, "cached": len(self.cache)}, f)
        os.replace(tmp, self.stats_path)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--stats", required=True)
    ap.add_argument("--memwatch", action="store_true")
    ap.add_argument("--cgroup")
    ap.add_argument("--threshold", action="append", default=[])
    a = ap.parse_args()
    server = Server(a.stats)
    handle = None
    if a.memwatch:
        from colosched import memwatch

        soft, hard = a.threshold  # two thresholds: trim, then trim harder

        def on_event(ev: memwatch.Event) -> None:
            if ev.direction == "up":
                is_hard = ev.threshold == hard
                server.trim(keep=0.1 if is_hard else 0.75, hard=is_hard)

        handle = memwatch.on_threshold(a.cgroup, [soft, hard], on_event)
    signal.signal(signal.SIGTERM, lambda *_: (server.save(), os._exit(0)))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(a.socket)
    listener.listen(1)
    print("ready", flush=True)
    conn, _ = listener.accept()
    reader = conn.makefile("rb")
    for line in reader:
        key = line.split()[1].decode()
        conn.sendall(b"%d\n" % server.get(key))
    server.save()
    if handle is not None:
        handle.stop()


if __name__ == "__main__":
    main()
