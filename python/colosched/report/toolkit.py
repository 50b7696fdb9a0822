"""What every report is made of: a figure drawn to PNG, the HTML page around it (tables, captions,
the run's parameters) and writing the page and its figures into place. The reports (`cluster`,
`host`, `vms`) import only these public names.

A page is one self-contained HTML5 file: the PNGs are embedded as base64, no scripts, no external
styles or fonts. `publish` renders everything into a staging directory first and then renames it
into place, report.html last, so a failure never leaves a report that looks complete.
"""

from __future__ import annotations

import base64
import html
import io
import itertools
import math
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

DPI = 110
# Spare colours of the host and vms reports, for a scheduler or policy without its own.
SPARE_COLOURS = ["#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#bcbd22"]


@dataclass
class ReportFigure:
    key: str  # "5-4", "host-1": the figure's number on the page and its file, fig<key>.png
    title: str
    source: str  # what the thesis or paper reported
    here: str  # what our numbers show, one sentence
    png: bytes
    size: tuple[int, int]  # pixels


def render_png(fig: Figure) -> tuple[bytes, tuple[int, int]]:
    """`fig` as PNG bytes, and its size in pixels."""
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    png = buf.getvalue()
    # The IHDR chunk right after the 8-byte signature holds width and height (big-endian).
    return png, (int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big"))


def colour_map(names: Sequence[str], fixed: dict[str, str], spare: Sequence[str]) -> dict:
    """A colour per name: its own in `fixed`, else the next of `spare` that `fixed` does not use
    (cycling), so every report draws one policy or scheduler in one colour."""
    free = itertools.cycle([c for c in spare if c not in fixed.values()])
    return {n: fixed.get(n) or next(free) for n in names}


def formatted(value: float | None, fmt: str) -> str:
    """`value` in format `fmt`; "–" for None, NaN or infinity."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    return format(value, fmt)


def escape(value: Any) -> str:
    return html.escape(str(value), quote=True)


CSS = """
body { font-family: sans-serif; margin: 1.5em auto; max-width: 1250px; padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; }
h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ccc; }
p.finding { font-size: 1.1em; font-weight: 600; }
summary h2 { display: inline; border: none; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; vertical-align: top; }
th { background: #f2f2f2; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
table.meta td:first-child { font-weight: bold; white-space: nowrap; }
figure { margin: 1.5em 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #ddd; }
figcaption { font-size: 0.9em; max-width: 1100px; line-height: 1.4; }
.note { color: #555; font-size: 0.9em; }
code { font-size: 0.95em; }
"""


def _meta_value(value: Any) -> str:
    if isinstance(value, dict):
        if not value:
            return ""
        rows = "".join(f"<tr><td>{escape(k)}</td><td>{_meta_value(v)}</td></tr>" for k, v in value.items())
        return f'<table class="meta">{rows}</table>'
    if isinstance(value, (list, tuple)):
        return escape(", ".join(str(v) for v in value))
    if isinstance(value, float):
        return escape(f"{value:g}")
    return escape(value)


def meta_html(meta: dict | None) -> str:
    """The run's parameters (meta.json) as a table, nested dicts as nested tables."""
    if not meta:
        return '<p class="note">No run parameters were given.</p>'
    rows = "".join(f"<tr><td>{escape(k)}</td><td>{_meta_value(v)}</td></tr>" for k, v in meta.items())
    return f'<table class="meta">{rows}</table>'


def table_html(head: str, rows: list[str]) -> str:
    """A results table: `head` (one <tr> of <th>) and `rows` (one <tr> each)."""
    return (
        f'<table class="summary">\n<thead>{head}</thead>\n<tbody>\n'
        + "\n".join(rows)
        + "\n</tbody>\n</table>"
    )


def figure_html(f: ReportFigure, source: str = "Thesis") -> str:
    """`f` embedded as PNG with its caption: title, link to its file, what `source` reported, what
    our numbers show."""
    data = base64.b64encode(f.png).decode("ascii")
    name = f"fig{f.key}.png"
    return (
        f'<figure id="fig{f.key}">\n'
        f'<img src="data:image/png;base64,{data}" width="{f.size[0]}" height="{f.size[1]}" '
        f'alt="Figure {f.key}: {escape(f.title)}">\n'
        f"<figcaption><b>Figure {f.key}.</b> {escape(f.title)}. "
        f'<a href="{name}">{name}</a><br>\n'
        f"<b>{escape(source)}:</b> {escape(f.source)}<br>\n"
        f"<b>Here:</b> {escape(f.here)}</figcaption>\n"
        f"</figure>"
    )


def html_page(title: str, body: list[str]) -> str:
    """A report page: `title` as its title and heading, then `body`'s HTML parts."""
    head = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">']
    head += ['<meta name="viewport" content="width=device-width, initial-scale=1">']
    head += [
        f"<title>{escape(title)}</title>",
        f"<style>{CSS}</style>",
        "</head>",
        "<body>",
        f"<h1>{escape(title)}</h1>",
    ]
    return "\n".join([*head, *body, "</body>", "</html>", ""])


def publish(out_dir: Path, page: str, figures: list[ReportFigure], known: Sequence[str]) -> Path:
    """Writes report.html and its figures into `out_dir`: staged there (same file system), then
    renamed into place, report.html last. Figure files matching a glob pattern in `known` that
    this report does not produce are removed, so none is left from an earlier report. Returns
    report.html's path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=".report-", dir=out_dir))
    try:
        for f in figures:
            (stage / f"fig{f.key}.png").write_bytes(f.png)
        (stage / "report.html").write_text(page, encoding="utf-8")
        produced = {f"fig{f.key}.png" for f in figures}
        # From here on the old report.html would no longer match the PNGs beside it.
        (out_dir / "report.html").unlink(missing_ok=True)
        for name in sorted(produced):
            os.replace(stage / name, out_dir / name)
        for pattern in known:
            for old in out_dir.glob(pattern):
                if old.name not in produced:
                    old.unlink(missing_ok=True)
        os.replace(stage / "report.html", out_dir / "report.html")
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return out_dir / "report.html"


def publish_sections(
    out_dir: Path,
    title: str,
    intro: list[str],
    sections: list[tuple[str, list[str], list[ReportFigure]]],
    known: Sequence[str],
    source: str = "Thesis",
) -> Path:
    """`publish` for a page of several sections (a sweep's scenarios): `intro`'s HTML parts, then
    per section (heading, HTML parts, figures) an h2, the parts and the figures. A figure's key,
    and so its file name, gets its section's number, so sections never share a file: "host-1"
    of the second section is "host-s2-1" (fighost-s2-1.png)."""
    parts, figures = list(intro), []
    for i, (heading, html_parts, section_figures) in enumerate(sections, 1):
        scoped = [replace(f, key=_in_section(f.key, i)) for f in section_figures]
        parts += [f"<h2>{escape(heading)}</h2>", *html_parts, *[figure_html(f, source) for f in scoped]]
        figures += scoped
    return publish(out_dir, html_page(title, parts), figures, known)


def _in_section(key: str, section: int) -> str:
    """A figure's key within section `section` of a page: "host-1" -> "host-s2-1"."""
    kind, _, number = key.rpartition("-")
    return f"{kind}-s{section}-{number}"
