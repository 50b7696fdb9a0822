"""Writing a run's results. Every file is written under a temporary name and renamed into place,
so an interrupted run never leaves a file that looks complete; report.html is written last."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
from pathlib import Path
from typing import Any

import polars as pl

from colosched.cluster import Result


def atomic_write(path: Path, write) -> Path:
    """Calls `write(tmp_path)` then renames tmp_path to `path`. A Ctrl-C (SIGINT) meanwhile
    takes effect once the file is in place: polars checks for it while it writes and, when
    interrupted, returns while its writer thread may still be creating the file, which would then
    outlive the cleanup below (a sweep interrupted so left a `.…parquet.tmp-PID` behind)."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with _sigint_held():
            write(tmp)
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


@contextlib.contextmanager
def _sigint_held():
    """SIGINT received in the block is delivered again when it ends, with the handler of before
    (Python's: KeyboardInterrupt). Only the main thread has signal handlers; elsewhere, a no-op."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is None:
        yield
        return
    held: list[int] = []
    before = signal.signal(signal.SIGINT, lambda signum, _frame: held.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)
        if held:
            signal.raise_signal(signal.SIGINT)


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
