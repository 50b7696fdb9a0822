"""Writing a run's results. Every file is written under a temporary name and renamed into place,
so an interrupted run never leaves a file that looks complete; report.html is written last."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import polars as pl

from colosched.cluster import Result


def atomic_write(path: Path, write) -> Path:
    """Calls `write(tmp_path)` then renames tmp_path to `path`."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def write_run(out: Path, result: Result, meta: dict[str, Any], report: bool = True) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.html").unlink(missing_ok=True)  # an old report must not sit beside new results
    written = [
        atomic_write(out / "summary.csv", result.summary.write_csv),
        atomic_write(out / "timeseries.parquet", result.timeseries.write_parquet),
        atomic_write(out / "meta.json", lambda p: p.write_text(json.dumps(meta, indent=2, default=str))),
    ]
    if report:
        from colosched.report import write_report

        written.append(write_report(out, result.summary, result.timeseries, None, meta))
    return written


def write_sweep(out: Path, table: pl.DataFrame, meta: dict[str, Any], report: bool = True) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.html").unlink(missing_ok=True)
    written = [
        atomic_write(out / "sweep.csv", table.write_csv),
        atomic_write(out / "meta.json", lambda p: p.write_text(json.dumps(meta, indent=2, default=str))),
    ]
    if report:
        from colosched.report import write_report

        # The bar charts show the grid's middle point; the sweep figures show the whole grid.
        machines = sorted(table["machines"].unique())[len(table["machines"].unique()) // 2]
        ratios = sorted(table["overcommit_ratio"].unique())
        ratio = ratios[len(ratios) // 2]
        point = table.filter((pl.col("machines") == machines) & (pl.col("overcommit_ratio") == ratio))
        written.append(write_report(out, point, pl.DataFrame(), table, meta))
    return written
