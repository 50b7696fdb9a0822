"""Shared pytest set-up: the package is imported from this checkout's python/ directory."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

PYTHON_DIR = Path(__file__).resolve().parents[1]
if str(PYTHON_DIR) not in sys.path:
    sys.path.insert(0, str(PYTHON_DIR))


@pytest.fixture(scope="session")
def report_module():
    """colosched.report.cluster (a fixture so the report tests read as one family)."""
    return importlib.import_module("colosched.report.cluster")


def _report_inputs(policies=("fine:mem_usage", "no_migration", "coarse"), seeds=(1, 2), cycles=50):
    """Small deterministic inputs in the simulator's schemas (summary, timeseries, sweep, meta)."""
    import math

    import polars as pl

    level = {"no_migration": 0.30, "coarse": 0.36, "fine:mem_usage": 0.40}
    summary, series, sweep = [], [], []
    for i, policy in enumerate(policies):
        base = level.get(policy, 0.33)
        migrates = policy != "no_migration"
        for seed in seeds:
            for c in range(cycles):
                first = (c % 4) if migrates else 0
                second = (1 if c % 6 == 0 else 0) if migrates else 0
                series.append({
                    "policy": policy, "seed": seed, "cycle": c, "time_s": 60 * c,
                    "mean_cpu": base + 0.1 * math.sin(c / 8 + seed), "gini": 0.5 - base / 2 + 0.01 * (c % 3),
                    "overcommit": 0.02 * (c % 5) / (1 + i),
                    "net_mbit": float((c % 7) * (i + 1) + seed) if migrates else 0.0,
                    "moves": first + second, "move_to_first": first, "move_to_second": second,
                })  # fmt: skip
            net = (0.5 * (i + 1) + 0.1 * seed) if migrates else 0.0
            summary.append({
                "policy": policy, "seed": seed,
                "mean_cpu": base + 0.01 * seed, "gini": 0.5 - base / 2 - 0.005 * seed,
                "overcommit": 0.01 / (1 + i) + 0.001 * seed, "duration": 3600.0 - 100 * i + 10 * seed,
                "net_kbit_s_per_machine": net * 1000 / 800,
                "net_mbit_s": net, "net_peak_mbit_s": 4 * net, "moves": (100 * i + seed) * migrates,
                "migrated_gib": 0.3 * i * migrates, "completed": 1000 + seed, "wall_s": 1.5,
            })  # fmt: skip
            for machines in (700, 800, 900):
                for ratio in (0.5, 1.0, 1.4):
                    sweep.append({
                        "machines": machines, "overcommit_ratio": ratio, "policy": policy, "seed": seed,
                        "mean_cpu": base * 800 / machines / ratio + 0.01 * seed,
                        "gini": 0.2 + machines / 9000 + ratio / 20,
                        "overcommit": 0.02 / ratio * 800 / machines, "duration": 3000.0 * ratio + seed,
                        "net_kbit_s_per_machine": net * 1000 / machines,
                        "net_mbit_s": net * 800 / machines, "net_peak_mbit_s": 4 * net / ratio,
                        "moves": 100 * i + seed, "migrated_gib": 0.3 * i, "completed": 1000, "wall_s": 1.0,
                    })  # fmt: skip
    meta = {"trace": "data/google-2011-sample", "parts": "0-1", "machines": 800, "cell_size": 4,
            "overcommit_ratio": 1.0, "step_s": 60, "seeds": len(seeds), "colosched": "test",
            "command": "colosched sim cluster --policy all",
            "trace_stats": {"tasks": 1234, "parts": 2}}  # fmt: skip
    return pl.DataFrame(summary), pl.DataFrame(series), pl.DataFrame(sweep), meta


@pytest.fixture
def report_inputs():
    """(summary, timeseries, sweep, meta): 3 policies x 2 seeds x 50 cycles, and a 3 x 3 sweep grid."""
    return _report_inputs()
