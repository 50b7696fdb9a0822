"""The thesis's §5.1 real-testbed experiment (Figs. 5-1..5-3), scaled down to one 2-CPU machine.

    sudo .venv/bin/python bench/agent_experiment.py [--rounds 5] [--duration 45] [--configs ...]

The two CPUs play the thesis's hosts ("pseudo-nodes" 0 and 1 of `colosched-agent`). The
latency-critical (LC) side is a memcached server plus an open-loop load generator that sends `set`
requests in batches with Gaussian gaps (bench/loadgen/loadgen.c), both pinned to CPU 0. The
best-effort (BE) side is two CPU hogs (bench/loadgen/behog.c) in the cgroup v1
/sys/fs/cgroup/cpu/colosched-exp-be, which is how the agent finds them. Configurations:

    lc-only          memcached + load generator alone (the thesis's "LC only")
    be-unmanaged     + 2 unpinned hogs, Linux places them (no thesis counterpart: there the BE VM
                     could not spread by itself)
    be-pin0          + 2 hogs pinned to CPU 0 (the thesis's "vanilla VM pinned to Host0")
    agent-coarse     + 2 unpinned hogs and `colosched-agent run` with policy "coarse" (thesis: GiantVM)
    agent-fine       the same with policy "fine"
    agent-P@S        policy P with a cycle interval of S seconds (e.g. agent-coarse@1)

The machine is shared, so configurations run interleaved (round-robin, order rotated each round)
and the summary gives the median and the min-max over rounds. Each round starts only when the
machine is quiet enough (other CPU use below --quiet-cpus, waiting at most --quiet-wait s).

Needs root (cgroups, memcached as root), gcc and memcached (apt-get install -y memcached gcc), and
for agent configurations the static agent (`make agent-static`). Writes runs.csv, runs.json,
summary.csv, summary.md, agent-decisions.csv, meta.json, agent-experiment.png and cpu-heatmap.png to
--out (default bench/results/agent-experiment/) and per-run raw files under
bench/.work/agent-experiment/. The command behind the committed results, and what they mean:
docs/agent-experiment.md.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import datetime
import hashlib
import json
import os
import platform
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchutil import remove_cgroups

REPO = Path(__file__).resolve().parent.parent
WORK = REPO / "bench" / ".work"
SRC = REPO / "bench" / "loadgen"
DEFAULT_OUT = REPO / "bench" / "results" / "agent-experiment"
DEFAULT_AGENT = REPO / "target" / "x86_64-unknown-linux-gnu" / "release" / "colosched-agent"
CGROUP = Path("/sys/fs/cgroup/cpu/colosched-exp-be")
# Its cpuacct twin: the agent's busy sensor reads the hogs' exact per-CPU time from it
# (cpuacct.usage_percpu) instead of charging each thread to the CPU it last ran on.
ACCT = Path("/sys/fs/cgroup/cpuacct/colosched-exp-be")
LC_CPU = 0  # pseudo-node 0: the "LC host"; pseudo-node 1 (CPU 1) is the spare host
CLK_TCK = os.sysconf("SC_CLK_TCK")
BASE_CONFIGS = ["lc-only", "be-unmanaged", "be-pin0", "agent-coarse", "agent-fine"]


class Interrupted(Exception):
    """SIGTERM/SIGHUP: unwind through the `finally` blocks exactly like Ctrl-C does."""


def _raise_interrupted(signum, _frame):
    raise Interrupted(f"signal {signum}")


# ---------------------------------------------------------------------------------------------
# /proc readers


def read_proc_stat() -> dict[int, list[int]]:
    """Per-CPU tick counters: {cpu: [user nice system idle iowait irq softirq steal]}."""
    cpus = {}
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu") and line[3].isdigit():
                name, *vals = line.split()
                cpus[int(name[3:])] = [int(v) for v in vals[:8]]
    return cpus


def cpu_util(a: dict[int, list[int]], b: dict[int, list[int]]) -> dict[int, dict[str, float]]:
    """Busy and steal fractions per CPU between two /proc/stat samples. Busy excludes idle,
    iowait and steal (steal is time the hypervisor took from this vCPU, not our work)."""
    out = {}
    for cpu in a:
        d = [y - x for x, y in zip(a[cpu], b[cpu])]
        total = sum(d) or 1
        busy = d[0] + d[1] + d[2] + d[5] + d[6]
        out[cpu] = {"busy": busy / total, "steal": d[7] / total, "busy_ticks": busy, "total_ticks": total}
    return out


def gini(values: list[float]) -> float:
    """Gini coefficient (mean absolute difference / twice the mean), as in the thesis's Fig. 5-3."""
    n, mean = len(values), sum(values) / len(values) if values else 0.0
    if not n or mean <= 0:
        return 0.0
    return sum(abs(x - y) for x in values for y in values) / (2 * n * n * mean)


def proc_cpu_ticks(pid: int) -> int:
    """utime + stime of a whole process (all threads), 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # fields 14 and 15 of proc(5)
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return 0


def proc_last_cpu(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[36])  # field 39 "processor"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


def thread_affinities(pid: int) -> set[str]:
    """Distinct Cpus_allowed_list values over all threads of a process."""
    out = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(FileNotFoundError):
            for line in (task / "status").read_text().splitlines():
                if line.startswith("Cpus_allowed_list:"):
                    out.add(line.split(":", 1)[1].strip())
    return out


def loadavg() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


# ---------------------------------------------------------------------------------------------
# processes we start (and only those are ever signalled)


class Procs:
    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []

    def start(self, argv: list[str], **kw) -> subprocess.Popen:
        p = subprocess.Popen(argv, **kw)
        self.procs.append(p)
        return p

    def stop(self, p: subprocess.Popen, timeout: float = 5.0) -> None:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if p in self.procs:
            self.procs.remove(p)

    def stop_all(self) -> None:
        # newest first: the agent stops before the hogs it may be moving
        for p in reversed(list(self.procs)):
            self.stop(p)


def remove_cgroup() -> None:
    """rmdir our BE cgroup; its tasks are ours and already stopped (a dying task may linger
    a moment, hence the retries)."""
    remove_cgroups([CGROUP, ACCT])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"memcached did not listen on {port}") from None
            time.sleep(0.05)


def build_tools() -> tuple[Path, Path]:
    """Compile the load generator and the hog into bench/.work/ (rebuilt when the source is newer)."""
    WORK.mkdir(parents=True, exist_ok=True)
    out = []
    for name, libs in (("loadgen", ["-lm"]), ("behog", [])):
        src, exe = SRC / f"{name}.c", WORK / name
        if not exe.exists() or exe.stat().st_mtime < src.stat().st_mtime:
            subprocess.run(["cc", "-O2", "-Wall", "-o", str(exe), str(src), *libs], check=True)
        out.append(exe)
    return out[0], out[1]


# ---------------------------------------------------------------------------------------------
# one run


def parse_config(name: str, default_interval: float, threshold: float) -> dict:
    if name in ("lc-only", "be-unmanaged", "be-pin0"):
        return {"name": name, "be": name != "lc-only", "pin0": name == "be-pin0", "policy": None}
    if name.startswith("agent-"):
        policy, _, interval = name[len("agent-") :].partition("@")
        return {
            "name": name,
            "be": True,
            "pin0": False,
            "policy": policy,
            "interval": float(interval) if interval else default_interval,
            "threshold": threshold,
        }
    raise SystemExit(f"unknown configuration {name!r} (known: {', '.join(BASE_CONFIGS)}, agent-P@S)")


def agent_toml(cfg: dict, run_dir: Path, be_selector: str) -> str:
    """The agent's configuration (docs/agent.md). Only what differs from the defaults, plus the
    pseudo-nodes and an explicit busy sensor: this machine is a small VM whose steal counter
    reflects its host, not the LC load that runs inside it, so `auto` would pick the wrong one."""
    be = f'cgroups = ["{CGROUP}"]' if be_selector == "cgroup" else f'pid_files = ["{run_dir / "be.pid"}"]'
    return (
        f"interval_s = {cfg['interval']}\n"
        f'policy = "{cfg["policy"]}"\n'
        f'state_file = "{run_dir / "agent-state.json"}"\n'
        f'decision_log = "{run_dir / "decisions.jsonl"}"\n'
        "\n[topology]\n"
        'pseudo_nodes = ["0", "1"]\n'
        "\n[sensor]\n"
        'kind = "busy"\n'
        f"threshold = {cfg['threshold']}\n"
        "\n[be]\n"
        f"{be}\n"
    )


def hog_counters(hogs: list[subprocess.Popen]) -> list[tuple[int, int]]:
    """(iterations, monotonic ns) of every hog, via SIGUSR1 (they print one line each)."""
    for h in hogs:
        h.send_signal(signal.SIGUSR1)
    out = []
    for h in hogs:
        line = h.stdout.readline().split()
        out.append((int(line[0]), int(line[1])))
    return out


def summarise_decisions(path: Path, win_start: float, win_end: float) -> dict:
    moves = moves_win = cycles = 0
    cpu_ms, errors, reasons = [], 0, {}
    if path.exists():
        for line in path.read_text().splitlines():
            with contextlib.suppress(json.JSONDecodeError):
                d = json.loads(line)
                cycles += 1
                n = len(d.get("moved", []))
                moves += n
                if win_start <= d.get("time", 0) < win_end:
                    moves_win += n
                cpu_ms.append(d.get("cycle_cpu_ms", 0.0))
                errors += len(d.get("errors") or {})
                reasons[d.get("reason", "")] = reasons.get(d.get("reason", ""), 0) + 1
    return {
        "agent_logged_cycles": cycles,
        "agent_moves": moves,
        "agent_moves_window": moves_win,
        "agent_errors": errors,
        "agent_cycle_cpu_ms": round(statistics.mean(cpu_ms), 3) if cpu_ms else None,
        "agent_reasons": reasons,
    }


def run_one(cfg: dict, rnd: int, args, tools: tuple[Path, Path], run_dir: Path) -> dict:
    loadgen, behog = tools
    run_dir.mkdir(parents=True, exist_ok=True)
    procs = Procs()
    row: dict = {
        "config": cfg["name"],
        "round": rnd,
        "start": datetime.datetime.now().isoformat("T", "seconds"),
    }
    row["loadavg1"], row["loadavg5"], row["loadavg15"] = loadavg()
    agent = None
    try:
        port = free_port()
        # memcached is the LC service: pinned to pseudo-node 0, as the thesis's servers ran natively
        # on their hosts and were never moved.
        mc = procs.start(
            [
                "taskset",
                "-c",
                str(LC_CPU),
                "memcached",
                "-l",
                "127.0.0.1",
                "-p",
                str(port),
                "-U",
                "0",
                "-t",
                str(args.mc_threads),
                "-m",
                "64",
                "-u",
                "root",
            ],
            stdout=subprocess.DEVNULL,
            stderr=open(run_dir / "memcached.log", "w"),
        )
        wait_port(port)
        hogs: list[subprocess.Popen] = []
        if cfg["be"]:
            CGROUP.mkdir(exist_ok=True)
            ACCT.mkdir(exist_ok=True)

            def enter_be(pin0: bool = cfg["pin0"]) -> None:
                # in the child before exec: join the BE cgroup (so the agent selects it) and,
                # for be-pin0, pin to CPU 0
                if args.be_selector == "cgroup":
                    (CGROUP / "cgroup.procs").write_text(str(os.getpid()))
                    (ACCT / "cgroup.procs").write_text(str(os.getpid()))
                if pin0:
                    os.sched_setaffinity(0, {LC_CPU})

            for _ in range(args.hogs):
                hogs.append(procs.start([str(behog)], stdout=subprocess.PIPE, text=True, preexec_fn=enter_be))
            (run_dir / "be.pid").write_text("".join(f"{h.pid}\n" for h in hogs))
        if cfg["policy"]:
            toml = run_dir / "agent.toml"
            toml.write_text(agent_toml(cfg, run_dir, args.be_selector))
            agent = procs.start(
                [str(args.agent), "run", "--config", str(toml)],
                stdout=open(run_dir / "agent.out", "w"),
                stderr=open(run_dir / "agent.err", "w"),
            )
        # The generator is part of the LC side and shares CPU 0 with memcached: on the thesis's
        # testbed the clients had their own machines, here unpinned it would compete with the BE
        # hogs on CPU 1 and blur what the agent does; pinned, its few per cent count as node-0 LC load.
        lg = procs.start(
            [
                "taskset",
                "-c",
                str(LC_CPU),
                str(loadgen),
                "--port",
                str(port),
                "--rate",
                str(args.rate),
                "--batch",
                str(args.batch),
                "--gap-sd",
                str(args.gap_sd),
                "--conns",
                str(args.conns),
                "--warmup",
                str(args.warmup),
                "--duration",
                str(args.duration),
                "--seed",
                str(rnd + 1),
                "--out",
                str(run_dir / "loadgen.json"),
            ],
        )
        t_lg = time.monotonic()
        # Warm-up: memcached fills its slabs and the agent gets hysteresis x interval to act.
        time.sleep(max(0.0, t_lg + args.warmup - time.monotonic()))
        ours = [mc.pid, lg.pid, *(h.pid for h in hogs)] + ([agent.pid] if agent else [])
        win_start_wall = time.time()
        stat0, ticks0 = read_proc_stat(), {p: proc_cpu_ticks(p) for p in ours}
        be0 = hog_counters(hogs) if hogs else []
        series, on_cpu0, prev = [], [], stat0
        t_next = time.monotonic()
        while True:
            t_next += 1.0
            rest = t_lg + args.warmup + args.duration - time.monotonic()
            if rest <= 0:
                break
            time.sleep(max(0.0, min(t_next - time.monotonic(), rest)))
            cur = read_proc_stat()
            u = cpu_util(prev, cur)
            series.append([round(u[c]["busy"], 4) for c in sorted(u)])
            prev = cur
            on_cpu0 += [proc_last_cpu(h.pid) == LC_CPU for h in hogs]
        stat1, ticks1 = read_proc_stat(), {p: proc_cpu_ticks(p) for p in ours}
        be1 = hog_counters(hogs) if hogs else []
        win_end_wall = time.time()
        row["mc_affinity"] = ";".join(sorted(thread_affinities(mc.pid)))
        row["be_affinity"] = ";".join(sorted({a for h in hogs for a in thread_affinities(h.pid)}))
        lg.wait(timeout=args.warmup + args.duration + 30)
        if lg.returncode != 0:
            raise RuntimeError(f"load generator failed ({lg.returncode})")
        if agent is not None:
            if agent.poll() is not None:
                row["agent_exit"] = agent.returncode  # it should still be running
            procs.stop(agent)
            row.setdefault("agent_exit", agent.returncode)
            # put back any affinity the agent changed before the hogs go; harmless if none
            r = subprocess.run(
                [str(args.agent), "restore", "--state-file", str(run_dir / "agent-state.json")],
                capture_output=True,
                text=True,
            )
            row["agent_restore_rc"] = r.returncode
            row.update(summarise_decisions(run_dir / "decisions.jsonl", win_start_wall, win_end_wall))
    finally:
        procs.stop_all()
        if cfg["be"]:
            remove_cgroup()

    lgres = json.loads((run_dir / "loadgen.json").read_text())
    u = cpu_util(stat0, stat1)
    cpus = sorted(u)
    busy = [u[c]["busy"] for c in cpus]
    total_busy = sum(u[c]["busy_ticks"] for c in cpus)
    window_ticks = statistics.mean(u[c]["total_ticks"] for c in cpus)  # ticks of one CPU
    ours_ticks = {p: ticks1[p] - ticks0[p] for p in ticks0}
    be_rate = sum((b1[0] - b0[0]) / ((b1[1] - b0[1]) / 1e9) for b0, b1 in zip(be0, be1)) if hogs else 0.0
    lat = lgres["lat_us"] or {}
    row.update(
        {
            "lat_mean_us": lat.get("mean"),
            "lat_p50_us": lat.get("p50"),
            "lat_p95_us": lat.get("p95"),
            "lat_p99_us": lat.get("p99"),
            "lat_p999_us": lat.get("p999"),
            "lat_sent_p99_us": (lgres["lat_sent_us"] or {}).get("p99"),
            "qps": lgres["qps"],
            "lost": lgres["lost"],
            "req_errors": lgres["errors"],
            "loadgen_cpu": round(ours_ticks[lg.pid] / window_ticks, 4),
            "mc_cpu": round(ours_ticks[mc.pid] / window_ticks, 4),
            "be_cpu": round(sum(ours_ticks[h.pid] for h in hogs) / window_ticks, 4),
            "agent_cpu": round(ours_ticks[agent.pid] / window_ticks, 4) if agent else None,
            # CPU used by anything we did not start (other engineers' builds, a qemu guest, ...),
            # in CPUs: the noise this run saw
            "foreign_cpu": round((total_busy - sum(ours_ticks.values())) / window_ticks, 4),
            **{f"cpu{c}_util": round(u[c]["busy"], 4) for c in cpus},
            "cpu_mean": round(statistics.mean(busy), 4),
            "gini": round(gini(busy), 4),
            "gini_ts": round(statistics.mean(gini(s) for s in series), 4) if series else None,
            "steal": round(statistics.mean(u[c]["steal"] for c in cpus), 4),
            "be_iters_per_s": round(be_rate),
            "be_on_cpu0": round(sum(on_cpu0) / len(on_cpu0), 3) if on_cpu0 else None,
            "per_second_util": series,
            "per_second_qps": lgres["per_second"],
        }
    )
    return row


# ---------------------------------------------------------------------------------------------
# quiet gate, summary, plot


def foreign_busy(seconds: float) -> float:
    """Busy CPUs over `seconds` while none of our processes run: how loaded others keep the box."""
    a = read_proc_stat()
    time.sleep(seconds)
    u = cpu_util(a, read_proc_stat())
    return sum(v["busy"] for v in u.values())


def wait_quiet(args) -> float:
    waited, busy = 0.0, foreign_busy(5)
    while busy > args.quiet_cpus and waited < args.quiet_wait:
        print(f"  machine busy ({busy:.2f} CPUs used by others, loadavg {loadavg()[0]}): waiting", flush=True)
        time.sleep(25)
        waited += 30
        busy = foreign_busy(5)
    return busy


METRICS = [
    ("lat_mean_us", "mean (µs)", 0),
    ("lat_p95_us", "p95 (µs)", 0),
    ("lat_p99_us", "p99 (µs)", 0),
    ("qps", "QPS", 0),
    ("cpu0_util", "CPU0", 2),
    ("cpu1_util", "CPU1", 2),
    ("cpu_mean", "CPU mean", 2),
    ("gini", "Gini", 3),
    ("be_iters_per_s", "BE kiter/s", -3),
    ("be_on_cpu0", "BE on CPU0", 2),
    ("foreign_cpu", "others (CPUs)", 2),
]


def summarise(rows: list[dict], configs: list[str]) -> list[dict]:
    out = []
    for name in configs:
        rs = [r for r in rows if r["config"] == name]
        s: dict = {"config": name, "runs": len(rs)}
        for key, *_ in METRICS + [("agent_moves", "", 0), ("loadavg1", "", 2)]:
            vals = [r[key] for r in rs if r.get(key) is not None]
            if vals:
                s[key] = statistics.median(vals)
                s[key + "_min"], s[key + "_max"] = min(vals), max(vals)
        out.append(s)
    return out


def fmt(v: float, digits: int) -> str:
    if digits < 0:
        return f"{v / 10 ** (-digits):.0f}"
    return f"{v:.{digits}f}"


def markdown(summary: list[dict]) -> str:
    """Median over rounds, [min-max] below it."""
    head = ["config", "runs"] + [label for _, label, _ in METRICS] + ["agent moves"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in summary:
        cells = [s["config"], str(s["runs"])]
        for key, _, digits in METRICS + [("agent_moves", "", 0)]:
            if key not in s:
                cells.append("–")
                continue
            lo, hi = fmt(s[key + "_min"], digits), fmt(s[key + "_max"], digits)
            cells.append(f"{fmt(s[key], digits)} [{lo}–{hi}]")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(rows: list[dict], configs: list[str], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not available: no plot", file=sys.stderr)
        return
    panels = [
        (["lat_mean_us", "lat_p95_us", "lat_p99_us"], "memcached set latency (µs, log)", True),
        (["qps"], "achieved QPS", False),
        (["cpu0_util", "cpu1_util", "cpu_mean"], "CPU utilisation", False),
        (["gini"], "Gini over the 2 CPUs", False),
        (["be_iters_per_s"], "BE work (iterations/s)", False),
    ]
    fig, axes = plt.subplots(2, 3, figsize=(13, 6.5))
    # last panel: every run's p99 against the CPU others used meanwhile, so noise is visible
    ax = axes.flat[5]
    for name in configs:
        rs = [r for r in rows if r["config"] == name and r.get("lat_p99_us") is not None]
        ax.scatter([r["foreign_cpu"] for r in rs], [r["lat_p99_us"] for r in rs], s=14, label=name)
    ax.set_yscale("log")
    ax.set_xlabel("CPU used by others during the run (CPUs)", fontsize=8)
    ax.set_title("p99 (µs, log) per run vs noise", fontsize=10)
    ax.legend(fontsize=6)
    for ax, (keys, title, log) in zip(axes.flat, panels):
        width = 0.8 / len(keys)
        for k, key in enumerate(keys):
            xs, meds, los, his = [], [], [], []
            for i, name in enumerate(configs):
                vals = [r[key] for r in rows if r["config"] == name and r.get(key) is not None]
                if not vals:
                    continue
                m = statistics.median(vals)
                xs.append(i + (k - (len(keys) - 1) / 2) * width)
                meds.append(m)
                los.append(m - min(vals))
                his.append(max(vals) - m)
            ax.bar(xs, meds, width, yerr=[los, his], capsize=2, label=key if len(keys) > 1 else None)
        ax.set_title(title, fontsize=10)
        ax.set_xticks(range(len(configs)))
        ax.set_xticklabels(configs, rotation=25, ha="right", fontsize=8)
        if log:
            ax.set_yscale("log")
        if len(keys) > 1:
            ax.legend(fontsize=7)
    fig.suptitle("memcached + BE hogs on 2 CPUs: median over rounds, bars = min–max", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=70)
    plt.close(fig)


def plot_heatmap(rows: list[dict], configs: list[str], path: Path) -> None:
    """Per-second busy fraction of each CPU, one strip per configuration (the thesis's Fig. 5-1
    shows the same for its 4 hosts): from the round whose foreign load was lowest."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    picks = []
    for name in configs:
        rs = [r for r in rows if r["config"] == name and r.get("per_second_util")]
        if rs:
            picks.append(min(rs, key=lambda r: r["foreign_cpu"]))
    if not picks:
        return
    fig, axes = plt.subplots(
        len(picks), 1, figsize=(9, 1.0 * len(picks) + 0.8), squeeze=False, sharex=True, layout="constrained"
    )
    for ax, r in zip(axes[:, 0], picks):
        grid = list(zip(*r["per_second_util"]))  # CPUs x seconds
        im = ax.imshow(grid, aspect="auto", vmin=0, vmax=1, cmap="viridis", interpolation="nearest")
        ax.set_yticks(range(len(grid)))
        ax.set_yticklabels([f"CPU{c}" for c in range(len(grid))], fontsize=7)
        ax.set_title(
            f"{r['config']} (round {r['round'] + 1}, others {r['foreign_cpu']:.2f} CPUs)",
            fontsize=8,
            loc="left",
        )
        ax.tick_params(axis="x", labelsize=7)
    axes[-1, 0].set_xlabel("second of the measurement window", fontsize=8)
    fig.colorbar(im, ax=axes[:, 0].tolist(), shrink=0.8, label="busy fraction")
    fig.savefig(path, dpi=70)
    plt.close(fig)


CSV_SKIP = {"per_second_util", "per_second_qps", "agent_reasons"}


def dump_rows(rows: list[dict]) -> str:
    """One run per line: diffs of a re-run stay readable and the file small."""
    return "[\n" + ",\n".join(json.dumps(r, separators=(",", ":")) for r in rows) + "\n]\n"


def decisions_table(rows: list[dict], work: Path) -> list[dict]:
    """Every agent cycle that changed an affinity, from the raw decision logs: what the sensor
    read and what the agent did about it (the part of the story the medians hide)."""
    out = []
    for r in rows:
        log = work / f"r{r['round']}-{r['config']}" / "decisions.jsonl"
        if not log.exists():
            continue
        for line in log.read_text().splitlines():
            d = json.loads(line)
            for m in d.get("moved", []):
                out.append(
                    {
                        "config": r["config"],
                        "round": r["round"],
                        "cycle": d["cycle"],
                        "loads": " ".join(f"{x:.2f}" for x in d["loads"]),
                        "pid": m["pid"],
                        "from_node": m["from_node"],
                        "to_node": m["to_node"],
                        "kind": m.get("reason", d.get("reason")),
                    }
                )
    return out


def write_reports(
    rows: list[dict], names: list[str], out: Path, command: str, work: Path, quiet_cpus: float
) -> str:
    """runs.csv, summary.csv/.md (all runs, then only the runs others left quiet),
    agent-decisions.csv and the two figures, all from `rows`."""
    fields = [k for k in rows[0] if k not in CSV_SKIP]
    for r in rows:
        fields += [k for k in r if k not in fields and k not in CSV_SKIP]
    with open(out / "runs.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    summary = summarise(rows, names)
    with open(out / "summary.csv", "w", newline="") as f:
        keys = list(dict.fromkeys(k for s in summary for k in s))
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(summary)
    table = markdown(summary)
    quiet_rows = [r for r in rows if r["foreign_cpu"] < quiet_cpus]
    quiet = markdown(summarise(quiet_rows, names)) if quiet_rows else "(none)\n"
    (out / "summary.md").write_text(
        f"Command: `{command}`\n\nAll runs: median [min–max] over rounds.\n\n{table}\n"
        f"Only runs in which others used < {quiet_cpus} CPUs:\n\n{quiet}"
    )
    dec = decisions_table(rows, work)
    if dec:
        with open(out / "agent-decisions.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(dec[0]))
            w.writeheader()
            w.writerows(dec)
    plot(rows, names, out / "agent-experiment.png")
    plot_heatmap(rows, names, out / "cpu-heatmap.png")
    return f"{table}\nquiet runs only (others < {quiet_cpus} CPUs):\n\n{quiet}"


def report_only(out: Path) -> int:
    """Rewrite the reports from a finished experiment's runs.json and meta.json."""
    meta = json.loads((out / "meta.json").read_text())
    rows = json.loads((out / "runs.json").read_text())
    names = meta.get("configs") or list(dict.fromkeys(r["config"] for r in rows))
    quiet = float(meta["args"].get("quiet_cpus", 0.3))
    (out / "runs.json").write_text(dump_rows(rows))
    print(write_reports(rows, names, out, meta["command"], Path(meta["raw_runs"]), quiet))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=float, default=45, help="measurement window per run (s)")
    ap.add_argument("--warmup", type=float, default=12, help="load + agent running before the window (s)")
    ap.add_argument("--configs", nargs="+", default=BASE_CONFIGS)
    ap.add_argument("--interval", type=float, default=2.0, help="agent cycle (s); thesis: 2")
    ap.add_argument(
        "--threshold",
        type=float,
        default=0.1,
        help="agent busy threshold, fraction of a node (thesis: 50 steal ticks per 2 s over 8 vCPUs ~ 0.03)",
    )
    # memcached is cheap: 3000 sets/s cost ~0.1 CPU with the generator, under the agent's
    # min_improvement (0.1 of a node), so the agent could never act; 20000/s cost ~0.2.
    ap.add_argument("--rate", type=float, default=20000, help="offered memcached sets/s")
    ap.add_argument("--batch", type=int, default=20, help="requests per batch (mean gap = batch/rate)")
    ap.add_argument("--gap-sd", type=float, default=0.3, help="batch gap sd as a fraction of its mean")
    ap.add_argument("--conns", type=int, default=4)
    ap.add_argument("--mc-threads", type=int, default=2, help="memcached -t")
    ap.add_argument("--hogs", type=int, default=2)
    ap.add_argument("--be-selector", choices=["cgroup", "pidfile"], default="cgroup")
    ap.add_argument("--agent", type=Path, default=DEFAULT_AGENT)
    ap.add_argument("--quiet-cpus", type=float, default=0.3, help="start a round below this foreign load")
    ap.add_argument("--quiet-wait", type=float, default=300, help="wait at most this long per round (s)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument(
        "--report-only", action="store_true", help="only rewrite the reports from --out/runs.json + meta.json"
    )
    args = ap.parse_args()
    if args.report_only:
        return report_only(args.out)

    command = "sudo .venv/bin/python bench/agent_experiment.py " + shlex.join(sys.argv[1:])
    print(f"command: {command}", flush=True)
    if os.geteuid() != 0:
        raise SystemExit("needs root: cgroups, taskset of other tasks and memcached -u root")
    configs = [parse_config(c, args.interval, args.threshold) for c in args.configs]
    if any(c["policy"] for c in configs):
        if not os.access(args.agent, os.X_OK):
            raise SystemExit(f"{args.agent} missing: build it with `make agent-static`")
    for tool in ("memcached", "taskset", "cc"):
        if subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True).returncode:
            raise SystemExit(f"{tool} not found (apt-get install -y memcached gcc util-linux)")
    if CGROUP.exists() and (CGROUP / "cgroup.procs").read_text().strip():
        raise SystemExit(f"{CGROUP} has tasks: another experiment is running or was killed; check it")
    tools = build_tools()
    if any(c["policy"] for c in configs):
        # fail before any run if the agent rejects the generated configuration
        probe = WORK / "agent-experiment" / "check"
        probe.mkdir(parents=True, exist_ok=True)
        (probe / "agent.toml").write_text(
            agent_toml(next(c for c in configs if c["policy"]), probe, "cgroup")
        )
        # the agent refuses a BE cgroup that does not exist: make it for the check if need be
        made = not CGROUP.exists()
        CGROUP.mkdir(exist_ok=True)
        try:
            r = subprocess.run(
                [str(args.agent), "check-config", "--config", str(probe / "agent.toml")],
                capture_output=True,
                text=True,
            )
        finally:
            if made:
                CGROUP.rmdir()
        if r.returncode:
            raise SystemExit(f"agent check-config failed ({r.returncode}): {r.stderr.strip()}")

    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    work = WORK / "agent-experiment" / stamp
    work.mkdir(parents=True, exist_ok=True)
    agent_sha = None
    if any(c["policy"] for c in configs):
        # run a private copy: a rebuild during the experiment must not mix agent versions
        agent_sha = hashlib.sha256(args.agent.read_bytes()).hexdigest()[:16]
        shutil.copy2(args.agent, work / "colosched-agent")
        args.agent = work / "colosched-agent"
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _raise_interrupted)
    rows: list[dict] = []
    n = len(configs)
    try:
        for rnd in range(args.rounds):
            quiet = wait_quiet(args)
            print(f"round {rnd + 1}/{args.rounds} (others use {quiet:.2f} CPUs, loadavg {loadavg()})")
            # rotate the order so no configuration always follows the same one
            for cfg in configs[rnd % n :] + configs[: rnd % n]:
                row = run_one(cfg, rnd, args, tools, work / f"r{rnd}-{cfg['name']}")
                row["quiet_before_round"] = round(quiet, 3)
                rows.append(row)
                print(
                    f"  {cfg['name']:<16} mean {row['lat_mean_us']:>8.0f} p99 {row['lat_p99_us']:>8.0f} µs "
                    f"qps {row['qps']:>6.0f}  cpu {row['cpu0_util']:.2f}/{row['cpu1_util']:.2f} "
                    f"gini {row['gini']:.3f}  be {row['be_iters_per_s']:>7}/s  "
                    f"others {row['foreign_cpu']:.2f}  moves {row.get('agent_moves', '-')}",
                    flush=True,
                )
    except (KeyboardInterrupt, Interrupted) as e:
        print(f"interrupted ({e!r}): processes stopped, cgroup removed; writing what ran", file=sys.stderr)
    if not rows:
        return 1

    names = [c["name"] for c in configs]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "runs.json").write_text(dump_rows(rows))
    meta = {
        "command": command,
        "started": stamp,
        "kernel": platform.release(),
        "cpus": os.cpu_count(),
        "cpu_model": next(
            (ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), ""
        ),
        "hypervisor_flag": " hypervisor" in Path("/proc/cpuinfo").read_text(),
        "memcached": subprocess.run(["memcached", "-V"], capture_output=True, text=True).stdout.strip(),
        "git": subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip(),
        "agent_sha256_16": agent_sha,
        "configs": names,
        "args": {k: str(v) for k, v in vars(args).items()},
        "raw_runs": str(work),
    }
    (args.out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    table = write_reports(rows, names, args.out, command, work, args.quiet_cpus)
    print(f"\n{table}\ncommand: {command}\nresults: {args.out}  raw: {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
