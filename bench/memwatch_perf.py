"""memwatch performance (issue 4), on a real cgroup v1 memory group (root).

latency: a C allocator (bench/memwatch/touch.c) in the group touches a fresh mmap page by page past
  a threshold, timing each page; `colosched.memwatch.on_threshold` callbacks in this process take
  CLOCK_MONOTONIC when called, and so does a Rust caller of the same watcher
  (crates/memwatch/examples/memwatch_latency.rs) when its `wait` returns the event. Latency =
  callback time - the touch that brought usage to the threshold; the "early" figure measures from
  64 pages before (the kernel charges in batches of up to 64 pages, so its counter may cross that
  much sooner): the true latency lies between the two. The v1 eventfd watcher and the
  memory.usage_in_bytes polling path at its default period (100 ms) watch the same crossings in
  the same run.
overhead: mmap + touch + munmap bandwidth of the same allocator, alternating runs without and with
  8 thresholds registered (a `colosched-agent memwatch` process consuming their events, all 8
  crossed up and down in every round); the median of the per-pair ratios.

With --keep-awake the latency runs are repeated with a SCHED_IDLE busy loop on every CPU, so no
vCPU of this VM halts while the watchers wait (bench/machine/vcpu_wake.c: waking a thread on a
halted vCPU here took 0.08-8.8 ms at p99, on one kept awake 0.04-1.1 ms). --pairs 0 skips the
overhead, --crossings 0 the latency.

    sudo .venv/bin/python bench/memwatch_perf.py [--crossings 1000] [--pairs 15] [--keep-awake]
        [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from benchutil import remove_cgroups, steal_fraction, steal_ticks, table, vcpus_kept_awake

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "bench/.work"
MEMCG = Path("/sys/fs/cgroup/memory")
AGENT = ROOT / "target/x86_64-unknown-linux-gnu/release/colosched-agent"
RUST_CALLER = ROOT / "target/release/examples/memwatch_latency"
M = 1 << 20


def build_touch() -> Path:
    WORK.mkdir(parents=True, exist_ok=True)
    exe = WORK / "touch"
    src = ROOT / "bench/memwatch/touch.c"
    subprocess.run(["cc", "-O2", "-Wall", "-o", str(exe), str(src)], check=True)
    cargo = ["cargo", "build", "--quiet", "--release", "-p", "colosched-memwatch"]
    subprocess.run([*cargo, "--example", RUST_CALLER.name], cwd=ROOT, check=True)
    return exe


def in_group(cg: Path, args: list[str], **kw) -> subprocess.Popen:
    """Starts `args` inside the group (the shell joins it before exec)."""
    return subprocess.Popen(["sh", "-c", f'echo $$ > {cg}/cgroup.procs && exec "$@"', "sh", *args], **kw)


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def median_ci95(xs: list[float]) -> tuple[float, float]:
    """A distribution-free 95 % confidence interval for the median: the order statistics
    n/2 -+ 0.98 sqrt(n) (normal approximation of the binomial)."""
    xs, n = sorted(xs), len(xs)
    k = max(1, math.floor(n / 2 - 0.98 * math.sqrt(n)))
    return xs[k - 1], xs[n - k]


def latency(touch: Path, crossings: int, rust: bool) -> dict:
    """One run of `crossings` crossings, watched by the Python v1 and polling callbacks, or (`rust`)
    by the Rust caller alone: three watchers waking at once would compete for the 2 CPUs."""
    from colosched import memwatch

    cg = MEMCG / f"colosched-bench-{uuid.uuid4().hex[:8]}"
    cg.mkdir()
    try:
        (cg / "memory.limit_in_bytes").write_text(str(1 << 30))
        threshold = 24 * M
        calls: dict[str, list[int]] = {"v1, Rust caller": []} if rust else {"v1": [], "poll": []}
        overshoot: dict[str, list[int]] = {k: [] for k in calls}
        woke: dict[str, list[int]] = {k: [] for k in calls}
        lock = threading.Lock()

        def recorder(name):
            def cb(ev):
                t = time.monotonic_ns()
                if ev.direction == "up":
                    with lock:
                        calls[name].append(t)
                        overshoot[name].append(ev.usage - threshold)
                        woke[name].append(ev.monotonic_ns)

            return cb

        def rust_lines(out):
            for line in out:
                direction, wake_ns, returned_ns, usage = line.split()
                if direction == "up":
                    calls["v1, Rust caller"].append(int(returned_ns))
                    woke["v1, Rust caller"].append(int(wake_ns))
                    overshoot["v1, Rust caller"].append(int(usage) - threshold)

        handles, caller, reader = [], None, None
        if rust:
            caller = subprocess.Popen([RUST_CALLER, cg, str(threshold)], stdout=subprocess.PIPE, text=True)
            assert caller.stdout.readline().strip() == "ready"
            reader = threading.Thread(target=rust_lines, args=(caller.stdout,))
            reader.start()
        else:
            handles = [
                memwatch.on_threshold(str(cg), [threshold], recorder("v1")),
                memwatch.on_threshold(str(cg), [threshold], recorder("poll"), backend="poll"),
            ]
            assert handles[0].watcher.backend == "v1" and handles[1].watcher.backend == "poll"
        # Hold 200 ms on each side so the 100 ms poller sees every crossing too.
        steal0 = steal_ticks()
        p = in_group(
            cg,
            [
                str(touch),
                "latency",
                str(crossings),
                str(threshold),
                str(cg / "memory.usage_in_bytes"),
                "32",
                "130",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        rounds = [tuple(float(x) for x in line.split()) for line in p.stdout]
        assert p.wait() == 0, "the allocator failed"
        steal = steal_fraction(steal0, steal_ticks())
        time.sleep(0.3)
        for h in handles:
            h.stop()
    finally:
        if caller:
            caller.terminate()
            caller.wait()
            reader.join()
        remove_cgroups([cg])
    out = {
        "crossings": len(rounds),
        "ns_per_page": statistics.median(r[3] for r in rounds),
        "loadavg_after": Path("/proc/loadavg").read_text().split()[:3],
        # The host's share: waking a watcher waits for its vCPU to be run again.
        "steal": steal,
    }
    # A crossing's window opens 64 pages before the touch that reaches the threshold (the counter
    # may get there that early) and closes where the next one opens.
    crossing_times = [r[2] for r in rounds]
    for name, ts in calls.items():
        # Each crossing's callback is the first one in its window; a crossing with none (the
        # poller slept through it) is counted as missed. A latency can be slightly negative when
        # the batched counter crossed before the touch of page k.
        lat, early, to_wake, own, missed, j = [], [], [], [], 0, 0
        for i, r in enumerate(rounds):
            nxt = crossing_times[i + 1] if i + 1 < len(rounds) else float("inf")
            while j < len(ts) and ts[j] < r[2]:
                j += 1
            if j >= len(ts) or ts[j] >= nxt:
                missed += 1
                continue
            lat.append((ts[j] - r[1]) / 1000)  # µs from the crossing touch
            early.append((ts[j] - r[2]) / 1000)  # µs from 64 pages earlier
            # Split at the watcher's wake-up (it reads usage right then): before it, the kernel's
            # check interval and the wake-up; after it, building the event and calling Python.
            to_wake.append((woke[name][j] - r[1]) / 1000)
            own.append((ts[j] - woke[name][j]) / 1000)
            j += 1
        out[name] = {
            "callbacks": len(ts),
            "missed": missed,
            "p50_us": pct(lat, 50),
            "p99_us": pct(lat, 99),
            "max_us": max(lat),
            "p50_us_early": pct(early, 50),
            "p99_us_early": pct(early, 99),
            # How far past the threshold usage was when the watcher read it, in 4 KiB pages.
            "overshoot_pages_p50": pct(overshoot[name], 50) / 4096,
            "crossing_to_wake_p50_us": pct(to_wake, 50),
            "crossing_to_wake_p99_us": pct(to_wake, 99),
            "wake_to_callback_p50_us": pct(own, 50),
            "wake_to_callback_p99_us": pct(own, 99),
            "steal": steal,
        }
    return out


def overhead(touch: Path, pairs: int) -> dict:
    cg = MEMCG / f"colosched-bench-{uuid.uuid4().hex[:8]}"
    cg.mkdir()
    watcher = None
    try:
        (cg / "memory.limit_in_bytes").write_text(str(2 << 30))
        base = int((cg / "memory.usage_in_bytes").read_text())
        region = 256  # MiB per round; the 8 thresholds are spread over it
        flags = [f for i in range(8) for f in ("--threshold", str(base + 8 * M + i * 28 * M))]

        def bw() -> float:
            p = in_group(cg, [str(touch), "bw", "4", str(region)], stdout=subprocess.PIPE, text=True)
            out = p.communicate()[0]
            assert p.returncode == 0
            return float(out)

        plain, watched = [], []
        bw()  # warm-up
        for _ in range(pairs):
            plain.append(bw())
            watcher = subprocess.Popen(
                [str(AGENT), "memwatch", "--cgroup", str(cg), "--json", *flags],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            assert "v1: 8 eventfd" in watcher.stderr.readline()
            watched.append(bw())
            watcher.terminate()
            assert watcher.wait(5) == 0
    finally:
        if watcher is not None and watcher.poll() is None:
            watcher.kill()
        remove_cgroups([cg])
    ratios = sorted(w / p for p, w in zip(plain, watched))
    return {
        "pairs": pairs,
        "region_mib": region,
        "plain_gb_s": statistics.median(plain) / 1e9,
        "watched_gb_s": statistics.median(watched) / 1e9,
        # Each pair ran back to back, so the median of the pair ratios cancels most of the
        # machine's drift; the quartiles say how noisy it was.
        "ratio": statistics.median(ratios),
        "ratio_q1": pct(ratios, 25),
        "ratio_q3": pct(ratios, 75),
        "ratio_ci95": median_ci95(ratios),
        "pair_ratios": ratios,
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--crossings", type=int, default=1000)
    ap.add_argument("--pairs", type=int, default=30)
    ap.add_argument("--keep-awake", action="store_true", help="repeat the latency runs with no vCPU halting")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    assert AGENT.exists(), f"{AGENT} is missing: make agent-static"
    touch = build_touch()
    lat = latency_report(touch, a.crossings, a.keep_awake) if a.crossings else None
    ov = overhead(touch, a.pairs) if a.pairs else None
    if ov:
        overhead_table(ov)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        cmd = "sudo .venv/bin/python bench/memwatch_perf.py " + " ".join(sys.argv[1:])
        a.out.write_text(
            json.dumps({"command": cmd.strip(), "latency": lat, "overhead": ov}, indent=2) + "\n"
        )
    return 0


def latency_report(touch: Path, crossings: int, keep_awake: bool) -> dict:
    """The latency runs (and with keep_awake the same again with no vCPU halting), as a table."""
    lat = latency_pair(touch, crossings)
    if keep_awake:
        with vcpus_kept_awake():
            lat["kept_awake"] = latency_pair(touch, crossings)
    rows = []
    for suffix, runs in [("", lat), (", vCPUs kept awake", lat.get("kept_awake"))]:
        for name in ("v1", "poll", "v1, Rust caller") if runs else ():
            r = runs[name]
            rows.append(
                [
                    name + suffix,
                    r["callbacks"],
                    r["missed"],
                    f"{r['p50_us']:.0f}",
                    f"{r['p99_us']:.0f}",
                    f"{r['max_us']:.0f}",
                    f"{r['p50_us_early']:.0f}",
                    f"{r['p99_us_early']:.0f}",
                    f"{r['overshoot_pages_p50']:.0f}",
                    f"{r['crossing_to_wake_p50_us']:.0f} / {r['crossing_to_wake_p99_us']:.0f}",
                    f"{r['wake_to_callback_p50_us']:.0f} / {r['wake_to_callback_p99_us']:.0f}",
                    f"{100 * r['steal']:.1f}",
                ]
            )
    table(
        f"Notification latency, threshold crossing to callback ({lat['crossings']} crossings, "
        f"{lat['ns_per_page']:.0f} ns per page touched)",
        [
            "path",
            "callbacks",
            "missed",
            "p50 µs",
            "p99 µs",
            "max µs",
            "p50 µs (from 64 pages earlier)",
            "p99 µs (idem)",
            "usage past threshold, pages p50",
            "crossing to wake-up p50 / p99 µs",
            "wake-up to callback p50 / p99 µs",
            "steal % during the run",
        ],
        rows,
    )
    print(f"\nload average after the latency run: {' '.join(lat['loadavg_after'])}")
    return lat


def latency_pair(touch: Path, crossings: int) -> dict:
    """The Python run, then the Rust caller's run; one dict as the JSON keeps it."""
    lat = latency(touch, crossings, rust=False)
    lat["rust"] = latency(touch, crossings, rust=True)
    lat["v1, Rust caller"] = lat["rust"]["v1, Rust caller"]
    return lat


def overhead_table(ov: dict) -> None:
    table(
        f"mmap + touch bandwidth with 8 thresholds registered ({ov['pairs']} alternating pairs)",
        [
            "without GB/s (median)",
            "with 8 thresholds GB/s (median)",
            "ratio (median of pairs)",
            "quartiles",
            "95 % CI of the median",
        ],
        [
            [
                f"{ov['plain_gb_s']:.3f}",
                f"{ov['watched_gb_s']:.3f}",
                f"{ov['ratio']:.3f}",
                f"{ov['ratio_q1']:.3f}-{ov['ratio_q3']:.3f}",
                f"{ov['ratio_ci95'][0]:.3f}-{ov['ratio_ci95'][1]:.3f}",
            ]
        ],
    )


if __name__ == "__main__":
    sys.exit(main())
