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


Tables = dict[str, pl.DataFrame]


def write_tables(out: Path, meta: dict[str, Any], csv: Tables, parquet: Tables | None = None) -> list[Path]:
    """A run's tables, each `NAME.csv` or `NAME.parquet`, then meta.json, each atomically. An old
    report.html is removed first, so it never sits beside new results (the caller writes the
    new one last)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.html").unlink(missing_ok=True)
    written = [atomic_write(out / f"{name}.csv", t.write_csv) for name, t in csv.items()]
    written += [atomic_write(out / f"{name}.parquet", t.write_parquet) for name, t in (parquet or {}).items()]
    text = json.dumps(meta, indent=2, default=str)
    return [*written, atomic_write(out / "meta.json", lambda p: p.write_text(text))]


def write_run(out: Path, result: Result, meta: dict[str, Any], report: bool = True) -> list[Path]:
    written = write_tables(out, meta, {"summary": result.summary}, {"timeseries": result.timeseries})
    if report:
        from colosched.report.cluster import write_report

        written.append(write_report(out, result.summary, result.timeseries, None, meta))
    return written


def write_sweep(out: Path, table: pl.DataFrame, meta: dict[str, Any], report: bool = True) -> list[Path]:
    written = write_tables(out, meta, {"sweep": table})
    if report:
        from colosched.report.cluster import write_report

        # The bar charts show the grid's middle point; the sweep figures show the whole grid.
        machines = sorted(table["machines"].unique())[len(table["machines"].unique()) // 2]
        ratios = sorted(table["overcommit_ratio"].unique())
        ratio = ratios[len(ratios) // 2]
        point = table.filter((pl.col("machines") == machines) & (pl.col("overcommit_ratio") == ratio))
        written.append(write_report(out, point, pl.DataFrame(), table, meta))
    return written
