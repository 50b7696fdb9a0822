"""`colosched trace synth`: a synthetic trace in the official layout, shaped like the real parts
(see docs/trace-synth.md). Used for full-scale runs the bundled sample cannot give."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from colosched import _native

console = Console(stderr=True)


def write(
    out: Path, machines: int = 12500, days: float = 29.0, seed: int = 1, parts: int | None = None
) -> dict:
    progress = None
    if console.is_terminal:
        from rich.progress import Progress

        bar = Progress(console=console, transient=True)
        bar.start()
        task = bar.add_task("writing parts", total=None)

        def progress(done, total):
            bar.update(task, completed=done, total=total or None)

    try:
        stats = dict(_native.synth_trace(str(out), machines, days, seed, parts, progress))
    finally:
        if progress:
            bar.stop()
    console.print(
        f"wrote {stats['parts']} parts, {stats['rows']:,} rows, {stats['tasks']:,} tasks, "
        f"{stats['bytes'] / 2**20:,.0f} MiB to {out}"
    )
    return stats
