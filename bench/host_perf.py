"""Benchmarks of the hypervisor host simulator (issue 14): the bundled presets per scheduler (and
spec 001's scenario set as a whole), and the cost's growth with simulated time and with host size.

    .venv/bin/python bench/host_perf.py [presets] [time] [size]     (default: all three)

Prints Markdown tables for bench/RESULTS.md. Scenario files for the size sweep are written under
bench/.work/host/. Wall-clock, best of 3, on a shared machine: read the ratios, not the digits.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

from benchutil import table

from colosched import _native, host

REPO = Path(__file__).resolve().parent.parent
WORK = REPO / "bench" / ".work" / "host"


def best_of(n: int, fn, *args) -> tuple[float, dict]:
    best, value = float("inf"), None
    for _ in range(n):
        t0 = time.perf_counter()
        value = fn(*args)
        best = min(best, time.perf_counter() - t0)
    return best, value


def one_run(scenario: str, scheduler: str) -> dict:
    return json.loads(_native.HostScenario(scenario).run(scheduler, 1))


def scenario_file(name: str, cores: int, vcpus: int, horizon_ms: float) -> str:
    """A host of `cores` equal cores and VMs of 4 vCPUs (`vcpus` in all): half run serial
    programs, half parallel ones with barriers, restarted as they end."""
    lines = [f'name = "{name}"', f"horizon_ms = {horizon_ms}", "migration_warmup_ms = 0.5", ""]
    lines += ["[[cores]]", f"count = {cores}", ""]
    for i in range(vcpus // 4):
        lines += ["[[vms]]", f'name = "vm{i}"', "vcpus = 4", "repeat = true"]
        if i % 2:
            lines += ['workload = "parallel"', "phases = 50", "phase_ms = 2", "spin_us = 50", ""]
        else:
            lines += ['workload = "serial"', "work_ms = 200", "mem_intensity = 0.3", ""]
    WORK.mkdir(parents=True, exist_ok=True)
    path = WORK / f"{name}.toml"
    path.write_text("\n".join(lines))
    return str(path)


def bench_presets() -> None:
    rows = []
    for preset in host.PRESETS:
        for name in host.SCHEDULERS:
            try:
                wall, r = best_of(3, one_run, preset, name)
            except ValueError as e:  # a scheduler that cannot run this preset (said why)
                rows.append([preset, name, "—", "—", "—", str(e).split(": ", 1)[-1]])
                continue
            rows.append([preset, name, f"{r['end_ms'] / 1e3:.0f}", f"{r['events']:,}", f"{wall:.3f}", ""])
    # The issue's target: one simulated minute of spec 002's Queue-2 scenario in at most 0.2 s.
    text = (REPO / "crates/host/scenarios/spec002-queue2.toml").read_text()
    minute = WORK / "spec002-queue2-60s.toml"
    WORK.mkdir(parents=True, exist_ok=True)
    minute.write_text(re.sub(r"(?m)^horizon_ms = .*$", "horizon_ms = 60000", text))
    for name in host.SCHEDULERS:
        wall, r = best_of(3, one_run, str(minute), name)
        note = "target ≤ 0.2 s" if name in ("credit", "diff") else ""
        sim_s, events = f"{r['end_ms'] / 1e3:.0f}", f"{r['events']:,}"
        rows.append(["spec002-queue2, 60 s", name, sim_s, events, f"{wall:.3f}", note])
    # The issue's target: spec 001's scenario set (the four test sets and the six fairness runs,
    # 20 simulated s each) in at most 1 s per scheduler.
    spec001 = [p for p in host.PRESETS if p.startswith("spec001-") and p != "spec001-sketch"]
    for name in host.SCHEDULERS:
        wall, rs = best_of(3, lambda n=name: [one_run(p, n) for p in spec001])
        sim_s = f"{sum(r['end_ms'] for r in rs) / 1e3:.0f}"
        events = f"{sum(r['events'] for r in rs):,}"
        label = f"spec001 set ({len(spec001)} scenarios)"
        rows.append([label, name, sim_s, events, f"{wall:.3f}", "target ≤ 1 s"])
    table("Bundled scenarios", ["scenario", "scheduler", "simulated s", "events", "seconds", "note"], rows)


def bench_time() -> None:
    rows = []
    for seconds in (5, 10, 20):
        path = scenario_file(f"time-{seconds}", 16, 64, seconds * 1e3)
        for name in host.SCHEDULERS:
            wall, r = best_of(3, one_run, path, name)
            ns = wall * 1e9 / r["events"]
            rows.append([str(seconds), name, f"{r['events']:,}", f"{wall:.3f}", f"{ns:.0f}"])
    table(
        "Cost against simulated time (16 cores, 64 vCPUs)",
        ["simulated s", "scheduler", "events", "seconds", "ns per event"],
        rows,
    )


def bench_size() -> None:
    rows = []
    for cores, vcpus in ((8, 32), (32, 128), (128, 512)):
        path = scenario_file(f"size-{cores}", cores, vcpus, 5e3)
        for name in host.SCHEDULERS:
            wall, r = best_of(3, one_run, path, name)
            ns = wall * 1e9 / r["events"]
            rows.append([f"{cores} × {vcpus}", name, f"{r['events']:,}", f"{wall:.3f}", f"{ns:.0f}"])
    table(
        "Cost against host size (5 simulated s)",
        ["cores × vCPUs", "scheduler", "events", "seconds", "ns per event"],
        rows,
    )


def main() -> None:
    sections = sys.argv[1:] or ["presets", "time", "size"]
    print(f"<!-- {time.strftime('%Y-%m-%d %H:%M')} -->")
    for s in sections:
        {"presets": bench_presets, "time": bench_time, "size": bench_size}[s]()


if __name__ == "__main__":
    main()
