"""Spec 002's Queue-1 set-up on this 2-CPU machine (issue 15's experiment; docs/host-experiment.md).

    make agent-static && .venv/bin/python bench/host_experiment.py [--reps 6] [--quick]

Three QEMU TCG guests of 2/1/1 vCPUs (tests/host_guest/) run a CPU hog on every vCPU (SCHED_IDLE in
the guest, so a guest's own network work comes first); guest 1 also receives a stream from the
scene's network namespace (TCP unpaced, or UDP paced at --udp-mbit, 600 Mbit/s: what guest 1
takes whole when alone) and answers pings. Each cell is one protocol under one variant of the
host agent (`colosched-agent host run`):

    alone    guest 1 streaming with no hog anywhere and no agent (the paper's Queue-0 reference)
    none     every guest hogging, no agent (Linux EEVDF as it is)
    slices   the agent with `[pools] cpusets = false`, `nnvm_slice_ms = 30`: the paper's short/long
             slices as EEVDF slices, no cpuset pools
    pools    the agent with both slices 0: the cpuset pools alone
    full     the agent as it ships: pools, the NSVMs' slice 1 ms, the NNVMs' left as they are
    full-r   full, also reading guest 1's virtio-net RX ring fill through QMP (`rx_ring`)
    full-n30 full with the NNVM pool's slice at the paper's 30 ms (`nnvm_slice_ms = 30`: what `full`
             was until 2026-11-28)
    *-f      (TCP) the same with guest 1 made NSVM for the whole cell: a 0.5 s UDP burst makes
             its tap drop, a hold of 1000 windows keeps it NSVM (what an agent that could see the
             ring's fill would do; a TCP stream alone never makes this tap drop)

A cell: start the agent, start the stream, wait --warmup s, then over --measure s read guest 1's
sink, every tap's counters, every guest's hog work (guestd's hog_work), every QEMU thread's
schedstat and the host's /proc/stat, with pings (--ping-interval) running; stop the agent
(SIGTERM: it puts everything back) and the stream. Cells run interleaved: repetition r runs every
protocol and variant, in an order rotated by r, so drift hits all alike. Before each cell the
script waits (at most --quiet-wait s) until processes other than its own use less than
--quiet-cpus CPUs; a cell during which they used more is marked noisy and run again (at most
--retries times; every attempt is kept in the raw data, summaries use the clean ones).

The simulator's prediction for the same set-up (`colosched sim host`, scenario files in
bench/host-experiment/) is run at the end. Everything, raw, goes to
bench/results/host-experiment/<UTC timestamp>.json (written under a temporary name, then renamed);
the summary tables are printed as Markdown. Needs root, qemu, the guest kernel (make sysdeps),
a v1 cpuset hierarchy and the static agent (make agent-static).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
from benchutil import foreign_cpu, proc_cpu  # noqa: E402
from host_guest.scene import Guest, HostScene  # noqa: E402

AGENT = REPO / "target" / "x86_64-unknown-linux-gnu" / "release" / "colosched-agent"
SCENARIOS = REPO / "bench" / "host-experiment"
OUT = REPO / "bench" / "results" / "host-experiment"
POOLS = [Path("/sys/fs/cgroup/cpuset/colosched-host-nsvm"), Path("/sys/fs/cgroup/cpuset/colosched-host-nnvm")]
# The guests' QEMU names (-name), which the agent's config names them by: not the tests' "hg",
# so that an agent here never takes another engineer's test guests for ours, nor theirs ours.
SCENE_NAME = "hx"
NAMES = [f"{SCENE_NAME}{i}" for i in range(3)]
VARIANTS = [
    "alone",
    "none",
    "slices",
    "pools",
    "full",
    "full-r",
    "slices-f",
    "pools-f",
    "full-f",
    "full-n30",
    "full-n30-f",
]
DEFAULT_VARIANTS = {"tcp": VARIANTS, "udp": VARIANTS[:6]}
AGENT_EXTRA = {  # the [pools] table of each agent variant
    "slices": "[pools]\ncpusets = false\nnnvm_slice_ms = 30\n",
    "pools": "[pools]\nnsvm_slice_ms = 0\nnnvm_slice_ms = 0\n",
    "full": "",
    # The agent in full with the NNVM pool's slice at the paper's 30 ms (its default until
    # 2026-11-28): which of 30 ms and the kernel's default serves guest 1?
    "full-n30": "[pools]\nnnvm_slice_ms = 30\n",
}
# "-f": guest 1 made NSVM for the whole cell. A TCP stream never makes the tap drop here (its window
# is smaller than the tap's queue), so the agent never acts on TCP by itself. In a "-f" cell a
# 0.5 s unpaced UDP burst into guest 1 before the stream makes its tap drop (rx overflow: NSVM by
# the paper's rule), and a hold of 1000 windows (100 s) keeps it NSVM; the other guests stay NNVM
# by their own rings. This stands for an agent that could see the ring's fill (spec 002's
# "overload", which the simulator's diff-eevdf sees).
FORCED = "hold_windows = 1000\n"
BURST_S = 0.5
AGENT_EXTRA |= {f"{v}-f": FORCED + AGENT_EXTRA[v] for v in list(AGENT_EXTRA)}
# "-r": the full agent also reading guest 1's virtio-net RX ring through its QMP socket (`rx_ring`):
# spec 002's request-queue length, so RX overload can be seen.
AGENT_EXTRA["full-r"] = ""
RING = {"full-r"}
# The simulator's stand-in for each variant: (scenario file suffix, scheduler). In `diff-eevdf`
# the NSVM pool's threads get 1 ms whatever the file says, the NNVM pool's keep the file's slice:
# with guest 1 alone in its pool its slice changes nothing, so "pools" = diff-eevdf on the plain file.
SIM = {
    "none": ("", "eevdf"),
    "slices": ("-slices", "eevdf"),
    "pools": ("", "diff-eevdf"),
    "full": ("", "diff-eevdf"),
    "full-n30": ("-slices", "diff-eevdf"),
}
# The traffic source and the pings play spec 002's peer machine T: they must offer the same load
# whatever the variant does to the host's CPUs, so they run at this nice (weight 9548 against a
# vCPU thread's 1024) and get the few tenths of a CPU they ask for whenever they ask.
PEER_NICE = -10


class Interrupted(Exception):
    pass


def _interrupt(signum, _frame):
    raise Interrupted(f"signal {signum}")


# --- what the host shows -------------------------------------------------------------------------


def cpu_ticks() -> dict[str, list[int]]:
    """/proc/stat per CPU: user nice system idle iowait irq softirq steal."""
    lines = Path("/proc/stat").read_text().splitlines()
    return {ln.split()[0]: [int(x) for x in ln.split()[1:9]] for ln in lines if ln.startswith("cpu")}


def threads(pid: int) -> dict[str, list[int]]:
    """Every thread of a process: 'tid comm' -> schedstat [run ns, wait ns, timeslices]."""
    out = {}
    for t in Path(f"/proc/{pid}/task").iterdir():
        try:
            comm = (t / "comm").read_text().strip()
            out[f"{t.name} {comm}"] = [int(x) for x in (t / "schedstat").read_text().split()]
        except OSError:
            pass
    return out


TAP_KEYS = ("tx_packets", "tx_bytes", "tx_dropped", "rx_packets", "rx_bytes")


def snapshot(s: HostScene) -> dict:
    """The host's counters, read within a millisecond (taps through each QEMU's own sysfs, which
    `ip netns exec` mounted for the scene's namespace), then guestd's counters, each with its own
    time: a control connection to a guest can take a second when its SYN meets a full tap."""
    snap = {"t": time.monotonic(), "cpu": cpu_ticks(), "guests": []}
    for g in s.guests:
        stats = Path(f"/proc/{g.pid}/root/sys/class/net/{g.tap}/statistics")
        tap = {k: int((stats / k).read_text()) for k in TAP_KEYS}
        snap["guests"].append({"tap": tap, "threads": threads(g.pid)})
    for i, x in enumerate(snap["guests"]):
        t0 = time.monotonic()
        x["stats"] = s.stats(i)
        x["t_stats"], x["stats_call_s"] = (t0 + time.monotonic()) / 2, time.monotonic() - t0
    return snap


def window(a: dict, b: dict, proto: str, size: int = 1400) -> dict:
    """What happened between two snapshots: the numbers every table is made of. Guest 1's UDP
    throughput is the datagrams its tap handed to QEMU (QEMU reads the tap only into free ring
    slots, and guestd's 8 MiB socket loses none: guest_dropped), times their payload."""
    dt = b["t"] - a["t"]
    out = {"seconds": dt, "guests": []}
    for ga, gb in zip(a["guests"], b["guests"]):
        dts = gb["t_stats"] - ga["t_stats"]
        d = {k: gb["stats"][k] - ga["stats"][k] for k in gb["stats"]}
        tap = {k: gb["tap"][k] - ga["tap"][k] for k in gb["tap"]}
        vcpu_run = vcpu_wait = other_run = 0
        for name, v in gb["threads"].items():
            run, wait = v[0] - ga["threads"].get(name, [0, 0])[0], v[1] - ga["threads"].get(name, [0, 0])[1]
            if "/TCG" in name:
                vcpu_run, vcpu_wait = vcpu_run + run, vcpu_wait + wait
            else:
                other_run += run
        out["guests"].append(
            {
                "seconds": dt,
                "stats_seconds": dts,
                "stats_call_s": [ga["stats_call_s"], gb["stats_call_s"]],
                "sink_mbit": (d["tcp_bytes"] if proto == "tcp" else d["udp_bytes"]) * 8 / dts / 1e6,
                "tap_payload_mbit": tap["tx_packets"] * size * 8 / dt / 1e6,
                "hog_work_per_s": d["hog_work"] / dts,
                "vcpu_cpus": vcpu_run / 1e9 / dt,  # CPUs the vCPU threads ran
                "vcpu_wait_cpus": vcpu_wait / 1e9 / dt,  # CPUs' worth of their waiting for one
                "qemu_other_cpus": other_run / 1e9 / dt,  # QEMU's main loop and I/O threads
                "tap": tap,
                "guest_dropped": d["udp_rcvbuf_errors"],
            }
        )
    cpus = {}
    for c in b["cpu"]:
        d = [y - x for x, y in zip(a["cpu"][c], b["cpu"][c])]
        total = sum(d) or 1
        cpus[c] = {"busy": (d[0] + d[1] + d[2] + d[5] + d[6]) / total, "steal": d[7] / total}
    out["host_cpu"] = cpus
    return out


# --- the agent -----------------------------------------------------------------------------------


def agent_config(tmp: Path, variant: str, s: HostScene) -> Path:
    path = tmp / f"host-{variant}.toml"
    vms = "".join(f'[[vm]]\nname = "{n}"\n' for n in NAMES)
    if variant in RING:
        vms = vms.replace(f'"{NAMES[1]}"\n', f'"{NAMES[1]}"\nqmp = "{s.guests[1].qmp}"\nrx_ring = true\n')
    path.write_text(f'state_file = "{tmp}/state.json"\n{AGENT_EXTRA[variant]}\n{vms}')
    return path


def stop_agent(proc: subprocess.Popen, tmp: Path) -> dict:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    if (tmp / "state.json").exists():  # it died without putting things back: do it now
        r = subprocess.run(
            [str(AGENT), "host", "restore", "--state-file", str(tmp / "state.json")],
            capture_output=True,
            text=True,
        )
        err += f"\n[restore] {r.stdout}{r.stderr}"
    if any(p.exists() for p in POOLS):
        raise RuntimeError(f"the agent left its pools behind: {err[-1000:]}")
    return {"returncode": proc.returncode, "stderr_tail": err[-600:]}


def decisions(log: Path, t_from: float, t_to: float) -> dict:
    """The decision log's windows: all, and those inside the measurement (by wall clock)."""
    rows = [json.loads(x) for x in log.read_text().splitlines() if x.strip()] if log.exists() else []

    def kind(w, name):
        return vm(w, name).get("kind")

    def vm(w, name):
        return next((v for v in w.get("vms", []) if v.get("name") == name), {})

    def summary(ws):
        return {
            "windows": len(ws),
            "g1_nsvm": sum(kind(w, NAMES[1]) == "nsvm" for w in ws),
            "g1_nsvm_by_rings": sum(vm(w, NAMES[1]).get("rings") == "nsvm" for w in ws),
            "g1_rq_sum": sum(vm(w, NAMES[1]).get("rx_rq_mean", 0.0) for w in ws),
            "others_nsvm": sum(kind(w, n) == "nsvm" for w in ws for n in (NAMES[0], NAMES[2])),
            "with_pools": sum(bool(w.get("pools")) for w in ws),
            "changes": sum(w.get("changes", 0) for w in ws),
            "rebuilds": sum(w.get("changes", 0) > 0 for w in ws),
        }

    inside = [w for w in rows if t_from <= w.get("t", 0) <= t_to]
    # Per window: time, guest 1's kind, by its rings alone, f_ro, f_se, its drops, the NSVM pool's
    # CPUs, threads changed, and each VM's load (its vCPU threads' run + wait, in CPUs).
    series = [
        [
            w.get("t"),
            kind(w, NAMES[1]),
            vm(w, NAMES[1]).get("rings"),
            vm(w, NAMES[1]).get("f_ro"),
            vm(w, NAMES[1]).get("f_se"),
            vm(w, NAMES[1]).get("to_guest_dropped"),
            w.get("plan", {}).get("ns_cpus"),
            w.get("changes"),
            [vm(w, n).get("load") for n in (NAMES)],
        ]
        for w in rows
    ]
    last = {k: rows[-1].get(k) for k in ("plan", "pools", "errors", "cpus")} if rows else None
    return {
        "all": summary(rows),
        "measured": summary(inside),
        "last": last,
        "series_columns": [
            "t",
            "g1_kind",
            "g1_rings",
            "f_ro",
            "f_se",
            "dropped",
            "ns_cpus",
            "changes",
            "loads",
        ],
        "series": series,
    }


# --- one cell ------------------------------------------------------------------------------------


def cell(
    s: HostScene, proto: str, variant: str, a: argparse.Namespace, tmp: Path, weights: list[int]
) -> dict:
    for i in range(3):
        s.hog(i, variant != "alone")
    ours = {os.getpid()} | {g.pid for g in s.guests}
    procs0, t0 = proc_cpu(), time.monotonic()
    agent = None
    log = tmp / f"log-{proto}-{variant}.jsonl"
    log.unlink(missing_ok=True)
    if variant in AGENT_EXTRA:
        cmd = [
            str(AGENT),
            "host",
            "run",
            "--config",
            str(agent_config(tmp, variant, s)),
            "--decision-log",
            str(log),
        ]
        agent = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        ours.add(agent.pid)
    stream: dict = {}
    if variant.endswith("-f"):
        time.sleep(0.5)  # the agent is reading its taps
        out_burst = s.stream(1, "udp", BURST_S, None)

    def send():
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), PEER_NICE)
        c0 = time.thread_time()
        try:
            stream.update(
                s.stream(1, proto, a.warmup + a.measure + 1.0, a.udp_mbit if proto == "udp" else None)
            )
        except Exception as e:  # reported in the cell, not fatal to the run
            stream["error"] = repr(e)
        stream["sender_cpu_s"] = time.thread_time() - c0

    sender = threading.Thread(target=send, daemon=True)
    out: dict = {"proto": proto, "variant": variant}
    if variant.endswith("-f"):
        out["burst"] = out_burst
    try:
        sender.start()
        time.sleep(a.warmup)
        wall_from = time.time()
        snap_a = snapshot(s)
        rtts: list[float] = []
        count = max(1, int(a.measure / a.ping_interval))

        def ping():  # busybox ping inherits this thread's nice
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), PEER_NICE)
            rtts.extend(s.ping(1, count, a.ping_interval))

        pinger = threading.Thread(target=ping, daemon=True)
        pinger.start()
        time.sleep(a.measure)
        snap_b = snapshot(s)
        wall_to = time.time()
        pinger.join(timeout=30)
        out.update(window(snap_a, snap_b, proto), pings_sent=count, rtts_ms=rtts)
    finally:
        if agent is not None:
            out["agent"] = stop_agent(agent, tmp)
        sender.join(timeout=a.warmup + a.measure + 60)
    out["stream"] = stream
    if agent is not None:
        out["decisions"] = decisions(log, wall_from, wall_to)
    out["cell_seconds"] = time.monotonic() - t0
    out["foreign_cpus"], out["foreign_top"] = foreign_cpu(procs0, proc_cpu(), ours, out["cell_seconds"])
    return out


def wait_quiet(limit: float, max_wait: float, ours: set[int]) -> float:
    """Waits until other processes use < limit CPUs over 1 s and no other host agent's pools exist
    (at most max_wait s, then raises); returns the others' use."""
    deadline = time.monotonic() + max_wait
    while True:
        p0 = proc_cpu()
        time.sleep(1.0)
        used, top = foreign_cpu(p0, proc_cpu(), ours, 1.0)
        pools = [str(p) for p in POOLS if p.exists()]
        if used < limit and not pools:
            return used
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"no quiet machine in {max_wait:.0f} s: others use {used:.2f} CPUs {top}, pools {pools}"
            )
        print(
            f"  waiting for a quiet machine: others use {used:.2f} CPUs ({', '.join(top)})"
            + (f"; another agent's pools exist: {pools}" if pools else ""),
            flush=True,
        )


# --- the simulator's prediction ------------------------------------------------------------------


def simulate(proto: str, seeds: int) -> dict:
    """`colosched sim host` on bench/host-experiment/<proto>[-slices].toml, per variant."""
    import polars as pl

    cli = Path(sys.executable).parent / "colosched"
    out, done = {}, {}  # variants with the same stand-in (pools, full) share its run
    for variant, (suffix, sched) in SIM.items():
        if (suffix, sched) in done:
            out[variant] = done[suffix, sched]
            continue
        scenario = SCENARIOS / f"{proto}{suffix}.toml"
        with tempfile.TemporaryDirectory() as d:
            cmd = [
                str(cli),
                "sim",
                "host",
                "--scenario",
                str(scenario),
                "--scheduler",
                sched,
                "--seeds",
                str(seeds),
                "--out",
                d,
                "--json",
                "--no-report",
            ]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            if r.returncode != 0:
                raise RuntimeError(f"{shlex.join(cmd)}: {r.stderr[-1000:]}")
            vms = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
            pings = pl.read_parquet(Path(d) / "pings.parquet")
            rtts = pings.filter(pl.col("vm") == "vm1")["rtt_ms"].to_list() if len(pings) else []
        out[variant] = done[suffix, sched] = {
            "command": shlex.join(cmd),
            "scheduler": sched,
            "scenario": str(scenario.relative_to(REPO)),
            "vms": vms,
            "ping_pct": pct(rtts),
        }
    return out


# --- summaries -----------------------------------------------------------------------------------


def pct(xs: list[float]) -> dict:
    if not xs:
        return {"p50": None, "p90": None, "p99": None, "n": 0}
    xs = sorted(xs)
    q = lambda p: xs[min(len(xs) - 1, int(p * len(xs)))]  # noqa: E731
    return {"p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "n": len(xs)}


def figures(c: dict, weights: list[int]) -> dict:
    """One cell's headline figures."""
    g = c["guests"]
    g1, tap1 = g[1], g[1]["tap"]
    cpu_pw = [x["vcpu_cpus"] / w for x, w in zip(g, weights)]
    offered = tap1["tx_packets"] + tap1["tx_dropped"]
    p = pct(c["rtts_ms"])
    measured = c.get("decisions", {}).get("measured")
    mbit = g1["sink_mbit"] if c["proto"] == "tcp" else g1["tap_payload_mbit"]
    return {
        "mbit": mbit,
        "offered_kpps": offered / g1["seconds"] / 1e3,
        "drops_per_s": tap1["tx_dropped"] / g1["seconds"],
        "drop_pct": 100 * tap1["tx_dropped"] / offered if offered else 0.0,
        "ping_p50": p["p50"],
        "ping_p90": p["p90"],
        "ping_p99": p["p99"],
        "ping_loss_pct": 100 * (1 - len(c["rtts_ms"]) / c["pings_sent"]),
        **{f"work{i}": x["hog_work_per_s"] / 1e6 for i, x in enumerate(g)},
        **{f"cpu{i}": x["vcpu_cpus"] for i, x in enumerate(g)},
        "fair_cpu": min(cpu_pw) / max(cpu_pw) if max(cpu_pw) > 0 else None,
        "qemu_io": sum(x["qemu_other_cpus"] for x in g),
        "sender": c["stream"].get("sender_cpu_s", 0.0) / max(c["stream"].get("seconds", 1.0), 1e-9),
        "host_busy": 2 * c["host_cpu"]["cpu"]["busy"],
        # TCG's cost: guest 1's vCPU time per MB it took in, and the tap's mean frame (TCP: segments)
        "us_per_mb": g1["vcpu_cpus"] * 1e6 / (mbit / 8) if mbit > 0 else None,
        "frame_kb": tap1["tx_bytes"] / tap1["tx_packets"] / 1e3 if tap1["tx_packets"] else None,
        "nsvm_frac": measured["g1_nsvm"] / max(1, measured["windows"]) if measured else None,
        "rebuilds_per_s": measured["rebuilds"] / c["seconds"] if measured else None,
        # guest 1's mean request-queue length (of 256): its ring's fill with rx_ring, else 256 × f_ro
        "g1_rq": measured["g1_rq_sum"] / max(1, measured["windows"]) if measured else None,
    }


# (key, heading, decimals) of the tables
MAIN = [
    ("mbit", "g1 Mbit/s", 0),
    ("drop_pct", "drop %", 1),
    ("ping_p50", "ping p50 ms", 2),
    ("ping_p90", "p90", 2),
    ("ping_p99", "p99", 2),
    ("ping_loss_pct", "ping loss %", 0),
    ("work0", "g0 work", 0),
    ("work2", "g2 work", 0),
    ("work1", "g1 work", 0),
    ("fair_cpu", "CPU/weight min/max", 2),
    ("nsvm_frac", "g1 NSVM", 2),
]
HOST = [
    ("offered_kpps", "offered kpkt/s", 1),
    ("cpu0", "g0 vCPUs", 2),
    ("cpu1", "g1 vCPU", 2),
    ("cpu2", "g2 vCPU", 2),
    ("qemu_io", "QEMU other threads", 2),
    ("sender", "sender", 2),
    ("host_busy", "host busy", 2),
    ("rebuilds_per_s", "pool changes/s", 2),
    ("g1_rq", "g1 ring", 0),
    ("us_per_mb", "g1 vCPU µs/MB", 0),
    ("frame_kb", "tap frame KB", 1),
]


def summarise(cells: list[dict], weights: list[int], sim: dict) -> tuple[dict, str]:
    """Mean, min, max and sd over the clean repetitions of every figure; spec 002's fairness
    ratios against "none" (eq. 21: CPU under the variant over CPU under the baseline); Markdown."""
    summary, text = {}, []
    for proto in sorted({c["proto"] for c in cells}):
        rows = {}
        for v in VARIANTS:
            mine = [c for c in cells if c["proto"] == proto and c["variant"] == v and not c["noisy"]]
            if not mine:
                continue
            fs = [figures(c, weights) for c in mine]
            row = {
                "n": len(fs),
                "noisy_dropped": sum(c["proto"] == proto and c["variant"] == v and c["noisy"] for c in cells),
            }
            for k in fs[0]:
                xs = [f[k] for f in fs if f[k] is not None]
                row[k] = (
                    {
                        "mean": statistics.fmean(xs),
                        "min": min(xs),
                        "max": max(xs),
                        "sd": statistics.stdev(xs) if len(xs) > 1 else 0.0,
                    }
                    if xs
                    else None
                )
            row["ping_pooled"] = pct([r for c in mine for r in c["rtts_ms"]])
            rows[v] = row
        ref = rows.get("none")
        for v, row in rows.items():
            if v == "alone":  # one guest at work: no fairness to speak of
                row["fair_cpu"] = None
            elif ref:
                row["FR_ns"] = row["cpu1"]["mean"] / ref["cpu1"]["mean"]
                row["FR_nn"] = (row["cpu0"]["mean"] + row["cpu2"]["mean"]) / (
                    ref["cpu0"]["mean"] + ref["cpu2"]["mean"]
                )
        summary[proto] = rows
        for title, cols in (
            (f"{proto.upper()}: guest 1 and the others, mean (min-max) over repetitions", MAIN),
            (f"{proto.upper()}: where the host's CPUs went (CPUs), mean (min-max)", HOST),
        ):
            text += [
                f"\n### {title}\n",
                "| variant | n | "
                + " | ".join(h for _, h, _ in cols)
                + (" | FR_ns | FR_nn |" if cols is MAIN else " |"),
                "|---|---|" + "---|" * (len(cols) + (2 if cols is MAIN else 0)),
            ]
            for v, row in rows.items():
                cell = [
                    "-"
                    if row[k] is None
                    else f"{row[k]['mean']:.{d}f} ({row[k]['min']:.{d}f}-{row[k]['max']:.{d}f})"
                    for k, _, d in cols
                ]
                if cols is MAIN:
                    cell += [f"{row[k]:.2f}" if k in row else "-" for k in ("FR_ns", "FR_nn")]
                text.append(f"| {v} | {row['n']} | " + " | ".join(cell) + " |")
        if proto in sim:
            summary[proto + "_sim"] = sim_rows(sim[proto], weights, proto)
            text += [
                f"\n### {proto.upper()} simulated (`colosched sim host`, mean over seeds)\n",
                "| variant | scheduler, scenario | vm1 Mbit/s | ring drops % | ping p50 | p90 | p99 "
                "| vm0/vm1/vm2 CPUs | CPU/weight min/max | FR_ns | FR_nn |",
                "|---|---|---|---|---|---|---|---|---|---|---|",
            ]
            for v, r in summary[proto + "_sim"].items():
                text.append(
                    f"| {v} | {r['scheduler']}, {r['scenario']} | {r['mbit']:.0f} | {r['drop_pct']:.1f} "
                    f"| {r['ping']['p50']} | {r['ping']['p90']} | {r['ping']['p99']} "
                    f"| {'/'.join(f'{x:.2f}' for x in r['cpus'])} | "
                    f"{r['fair_cpu']:.2f} | {r['FR_ns']:.2f} | {r['FR_nn']:.2f} |"
                )
    return summary, "\n".join(text)


def sim_rows(sim: dict, weights: list[int], proto: str) -> dict:
    """The simulator's figures in the real run's units: payload Mbit/s (its packets are 1500 bytes:
    1400 of UDP payload, 1448 of TCP), CPUs (run time over the horizon)."""
    payload = {"udp": 1400 / 1500, "tcp": 1448 / 1500}[proto]
    out = {}
    for v, r in sim.items():

        def by(name: str, key: str, r: dict = r) -> float:
            return statistics.fmean(x[key] for x in r["vms"] if x["vm"] == name)

        horizon = tomllib.loads((REPO / r["scenario"]).read_text())["horizon_ms"]
        cpus = [by(f"vm{i}", "run_ms") / horizon for i in range(3)]
        delivered = by("vm1", "throughput_mbit_s") * 1e6 * horizon / 1e3 / 12000
        drops = by("vm1", "ring_drops") + by("vm1", "link_drops")
        out[v] = {
            "scheduler": r["scheduler"],
            "scenario": r["scenario"],
            "mbit": by("vm1", "throughput_mbit_s") * payload,
            "drop_pct": 100 * drops / max(1.0, drops + delivered),
            "ping": r["ping_pct"],
            "cpus": cpus,
            "fair_cpu": min(c / w for c, w in zip(cpus, weights)) / max(c / w for c, w in zip(cpus, weights)),
        }
    for row in out.values():
        row["FR_ns"] = row["cpus"][1] / out["none"]["cpus"][1]
        row["FR_nn"] = (row["cpus"][0] + row["cpus"][2]) / (out["none"]["cpus"][0] + out["none"]["cpus"][2])
    return out


# --- main ----------------------------------------------------------------------------------------


def machine() -> dict:
    def sh(cmd: str) -> str:
        r = subprocess.run(cmd, shell=True, capture_output=True, text=True)
        return (r.stdout + r.stderr).strip()

    return {
        "host": platform.node(),
        "kernel": platform.release(),
        "cpus": os.cpu_count(),
        "cpu_model": next(
            (
                ln.split(":", 1)[1].strip()
                for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")
            ),
            "",
        ),
        "qemu": sh("qemu-system-x86_64 --version | head -1"),
        "loadavg": Path("/proc/loadavg").read_text().strip(),
        "top": sh("top -bn1 | head -15"),
        "git": sh(f"git -C {REPO} rev-parse HEAD")
        + (" (dirty)" if sh(f"git -C {REPO} status --porcelain") else ""),
        "agent": {
            "path": str(AGENT),
            "sha256": hashlib.sha256(AGENT.read_bytes()).hexdigest(),
            "mtime": datetime.datetime.fromtimestamp(
                AGENT.stat().st_mtime, datetime.timezone.utc
            ).isoformat(),
        },
    }


def write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=6, help="repetitions of every cell (default 6)")
    ap.add_argument("--protocols", default="tcp,udp", help="tcp, udp or both (default tcp,udp)")
    ap.add_argument(
        "--variants",
        default="",
        help=f"some of {','.join(VARIANTS)} (default: all for tcp, "
        "the first six for udp; -f: guest 1 forced NSVM, see FORCED)",
    )
    ap.add_argument("--warmup", type=float, default=3.0, help="s of traffic before measuring (default 3)")
    ap.add_argument("--measure", type=float, default=10.0, help="s measured per cell (default 10)")
    ap.add_argument("--udp-mbit", type=float, default=600.0, help="UDP offered rate, Mbit/s (default 600)")
    ap.add_argument("--ping-interval", type=float, default=0.05, help="s between pings (default 0.05)")
    ap.add_argument("--vcpus", default="2,1,1", help="vCPUs of guests 0,1,2 (default 2,1,1; guest 1 streams)")
    ap.add_argument(
        "--quiet-cpus", type=float, default=0.3, help="others' CPU use that makes a cell noisy (default 0.3)"
    )
    ap.add_argument(
        "--quiet-wait",
        type=float,
        default=900.0,
        help="s to wait for quiet before a cell, then abort (default 900)",
    )
    ap.add_argument("--retries", type=int, default=2, help="re-runs of a noisy cell (default 2)")
    ap.add_argument("--sim-seeds", type=int, default=5, help="simulator seeds (default 5; 0: no simulation)")
    ap.add_argument(
        "--max-minutes", type=float, default=60.0, help="stop starting cells after this (default 60)"
    )
    ap.add_argument(
        "--quick", action="store_true", help="smoke run: 1 repetition, 2 s warm-up, 3 s measured, 1 sim seed"
    )
    ap.add_argument(
        "--sim-only",
        type=Path,
        metavar="JSON",
        help="run only the simulation and the summary again on a results file (rewritten in place)",
    )
    ap.add_argument(
        "--out", type=Path, default=OUT, help=f"directory of the JSON (default {OUT.relative_to(REPO)})"
    )
    a = ap.parse_args()
    if a.sim_only:
        data = json.loads(a.sim_only.read_text())
        data["sim"], protos = {}, sorted({c["proto"] for c in data["cells"]})
        data["sim_command"] = shlex.join([sys.executable, *sys.argv])
        for p in protos:
            data["sim"][p] = simulate(p, a.sim_seeds)
        data["summary"], text = summarise(data["cells"], data["weights"], data["sim"])
        write_json(a.sim_only, data)
        print(text)
        return 0
    if a.quick:
        a.reps, a.warmup, a.measure, a.sim_seeds, a.retries = 1, 2.0, 3.0, min(a.sim_seeds, 1), 0
    protos = [p for p in a.protocols.split(",") if p]
    chosen = [v for v in a.variants.split(",") if v]
    if not protos or not set(protos) <= {"tcp", "udp"} or not set(chosen) <= set(VARIANTS):
        ap.error(f"--protocols from tcp,udp and --variants from {','.join(VARIANTS)}")
    variants = {p: chosen or DEFAULT_VARIANTS[p] for p in protos}
    vcpus = [int(x) for x in a.vcpus.split(",")]
    if len(vcpus) != 3:
        ap.error("--vcpus: three counts")
    if not AGENT.exists():
        ap.error(f"{AGENT}: no static agent (make agent-static)")
    if any(p.exists() for p in POOLS):
        ap.error(f"{POOLS[0].parent}: colosched-host pools exist already (another agent running?)")
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGHUP, _interrupt)

    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    path = a.out / f"{stamp}{'-quick' if a.quick else ''}.json"
    data = {
        "command": shlex.join([sys.executable, *sys.argv]),
        "cwd": os.getcwd(),
        "args": vars(a) | {"out": str(a.out)},
        "started_utc": stamp,
        "machine": machine(),
        "weights": vcpus,
        "cells": [],
        "sim": {},
    }
    # Repetition r: the protocols, and each protocol's variants, in an order rotated by r.
    plan = [
        (r, p, v)
        for r in range(a.reps)
        for p in protos[r % len(protos) :] + protos[: r % len(protos)]
        for v in variants[p][r % len(variants[p]) :] + variants[p][: r % len(variants[p])]
    ]
    print(
        f"{len(plan)} cells of ~{a.warmup + a.measure + 3:.0f} s; machine: load {data['machine']['loadavg']}",
        flush=True,
    )
    start, status = time.monotonic(), "complete"
    try:
        with (
            tempfile.TemporaryDirectory(prefix="host-exp.") as tmpd,
            HostScene([Guest(vcpus=n) for n in vcpus], tmp=Path(tmpd), name=SCENE_NAME) as s,
        ):
            tmp = Path(tmpd)
            data["boot_seconds"] = s.boot_seconds
            data["tap_txqueuelen"] = (
                subprocess.run(
                    ["ip", "-n", s.netns, "-o", "link", "show", s.guests[1].tap],
                    capture_output=True,
                    text=True,
                )
                .stdout.split("qlen")[-1]
                .split()[0]
                .strip("\\")
            )
            print(f"3 guests ({a.vcpus} vCPUs) booted in {s.boot_seconds:.1f} s", flush=True)
            ours = {os.getpid()} | {g.pid for g in s.guests}
            for n, (rep, proto, variant) in enumerate(plan):
                if time.monotonic() - start > a.max_minutes * 60:
                    status = f"stopped after {a.max_minutes} min (--max-minutes)"
                    print(status, flush=True)
                    break
                for attempt in range(a.retries + 1):
                    quiet_before = wait_quiet(a.quiet_cpus, a.quiet_wait, ours)
                    c = cell(s, proto, variant, a, tmp, vcpus)
                    c.update(
                        rep=rep,
                        attempt=attempt,
                        quiet_before=quiet_before,
                        noisy=c["foreign_cpus"] > a.quiet_cpus,
                        at_s=time.monotonic() - start,
                        utc=datetime.datetime.now(datetime.timezone.utc).isoformat(),
                    )
                    data["cells"].append(c)
                    f = figures(c, vcpus)
                    elapsed = time.monotonic() - start
                    eta = elapsed / (n + 1) * (len(plan) - n - 1)
                    print(
                        f"[{n + 1}/{len(plan)}] rep {rep} {proto} {variant:6s}: {f['mbit']:7.1f} Mbit/s, "
                        f"drops {f['drops_per_s']:7.0f}/s, "
                        f"ping p50 {f['ping_p50'] or 0:.2f} p99 {f['ping_p99'] or 0:.2f} ms, "
                        f"work g0/g1/g2 {f['work0']:.0f}/{f['work1']:.0f}/{f['work2']:.0f} M/s, "
                        f"CPU {f['cpu0']:.2f}/{f['cpu1']:.2f}/{f['cpu2']:.2f}"
                        + (f", NSVM {f['nsvm_frac']:.2f}" if f["nsvm_frac"] is not None else "")
                        + (
                            f"  NOISY: others {c['foreign_cpus']:.2f} CPUs {c['foreign_top']}"
                            if c["noisy"]
                            else ""
                        )
                        + f"  (eta {eta / 60:.1f} min)",
                        flush=True,
                    )
                    write_json(path, data | {"status": "running"})
                    if not c["noisy"]:
                        break
            for i in range(3):
                s.hog(i, False)
    except (KeyboardInterrupt, Interrupted) as e:
        status = f"interrupted ({e or 'Ctrl-C'})"
        print(status, file=sys.stderr)
    except RuntimeError as e:  # no quiet machine, or an agent that left its pools
        status = f"aborted: {e}"
        print(status, file=sys.stderr)
    if a.sim_seeds > 0 and status == "complete":
        print("simulating ...", flush=True)
        for p in protos:
            try:
                data["sim"][p] = simulate(p, a.sim_seeds)
            except Exception as e:  # the measurements are kept whatever the simulator says
                data["sim_error"] = repr(e)
                print(f"simulation failed: {e}", file=sys.stderr)
    data["summary"], text = summarise(data["cells"], vcpus, data["sim"])
    data.update(
        status=status, seconds=time.monotonic() - start, loadavg_end=Path("/proc/loadavg").read_text().strip()
    )
    write_json(path, data)
    print(text)
    print(f"\n{status}; {data['seconds'] / 60:.1f} min; wrote {path}")
    return 0 if status == "complete" else 1


if __name__ == "__main__":
    sys.exit(main())
