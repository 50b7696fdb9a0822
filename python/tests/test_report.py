"""The HTML report and its figures (thesis Figs. 5-4 .. 5-9), on small hand-made results."""

from __future__ import annotations

import base64
import math
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from matplotlib import image as mpimg

pytestmark = pytest.mark.parallel  # asserts no timing: may run beside other tests (pyproject.toml)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ALL_FIGURES = ["fig5-4.png", "fig5-5.png", "fig5-6.png", "fig5-7.png", "fig5-8.png", "fig5-9.png"]


def assert_real_png(path: Path) -> None:
    assert path.read_bytes()[:8] == PNG_MAGIC, f"{path.name} is not a PNG"
    pixels = mpimg.imread(path)
    assert pixels.ndim == 3 and pixels.shape[0] > 200 and pixels.shape[1] > 400, pixels.shape
    assert float(np.var(pixels[..., :3])) > 0, f"{path.name} is blank"
    rgb = (pixels[..., :3] * 255).astype(np.uint32)
    colours = np.unique(rgb[..., 0] << 16 | rgb[..., 1] << 8 | rgb[..., 2])
    assert len(colours) > 10, f"{path.name} has only {len(colours)} colours"


def summary_rows(page: str) -> list[list[str]]:
    """The cells of the summary table's body rows, tags stripped."""
    table = re.search(r'<table class="summary">(.*?)</table>', page, re.S).group(1)
    body = re.search(r"<tbody>(.*?)</tbody>", table, re.S).group(1)
    return [[re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
            for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)]  # fmt: skip


def test_full_report_writes_every_figure_as_a_real_png(report_module, report_inputs, tmp_path):
    summary, timeseries, sweep, meta = report_inputs
    html_path = report_module.write_report(tmp_path / "out", summary, timeseries, sweep, meta)

    assert html_path == tmp_path / "out" / "report.html"
    for name in ALL_FIGURES:
        assert_real_png(tmp_path / "out" / name)
    page = html_path.read_text(encoding="utf-8")
    for key in ["5-4", "5-5", "5-6", "5-7", "5-8", "5-9"]:
        block = re.search(rf'<figure id="fig{key}">(.*?)</figure>', page, re.S)
        assert block, f"figure {key} missing from the page"
        embedded = re.search(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', block.group(1))
        assert embedded, f"figure {key} is not embedded"
        assert base64.b64decode(embedded.group(1)) == (tmp_path / "out" / f"fig{key}.png").read_bytes()
        assert "Thesis:" in block.group(1) and "Here:" in block.group(1)
    # Nothing but the report and its figures is left in the directory (no staging leftovers).
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted([*ALL_FIGURES, "report.html"])


def test_summary_table_lists_policies_in_thesis_order_with_ci(report_module, report_inputs, tmp_path):
    summary, timeseries, _, meta = report_inputs
    extra = summary.filter(pl.col("policy") == "coarse").with_columns(pl.lit("my_policy").alias("policy"))
    page = report_module.write_report(
        tmp_path, pl.concat([extra, summary]), timeseries, None, meta
    ).read_text()

    rows = summary_rows(page)
    assert [r[0] for r in rows] == ["no_migration", "coarse", "fine:mem_usage", "my_policy"]
    assert [r[1] for r in rows] == ["no_migration", "coarse_grained", "mem_usage", ""]
    # mean CPU of coarse: seeds give 0.37 and 0.38 -> 0.375 ± t(1) * 0.00707 / sqrt(2) = ± 0.0635
    assert rows[1][3] == "0.375 ± 0.064"
    assert "<td>command</td><td>colosched sim cluster --policy all</td>" in page
    assert "<td>tasks</td><td>1234</td>" in page  # nested meta dict


def test_summarize_mean_and_ci_match_a_hand_computed_case(report_module):
    summary = pl.DataFrame({
        "policy": ["fine", "coarse", "fine", "fine", "no_migration"],
        "seed": [1, 1, 2, 3, 1],
        "mean_cpu": [1.0, 0.5, 2.0, 3.0, 0.25],
        "moves": [10, 4, 20, 30, 0],
    })  # fmt: skip
    agg = report_module.summarize(summary)

    assert agg["policy"].to_list() == ["no_migration", "coarse", "fine"]
    assert agg["runs"].to_list() == [1, 1, 3]
    fine = agg.row(2, named=True)
    assert fine["mean_cpu"] == pytest.approx(2.0)
    assert fine["mean_cpu_ci"] == pytest.approx(4.3027 * 1.0 / math.sqrt(3), rel=1e-6)
    assert fine["moves"] == pytest.approx(20.0)
    assert fine["moves_ci"] == pytest.approx(4.3027 * 10.0 / math.sqrt(3), rel=1e-6)
    # One seed: the mean is the value and there is no interval.
    assert agg.row(1, named=True)["mean_cpu"] == 0.5 and agg.row(1, named=True)["mean_cpu_ci"] is None
    assert "gini" not in agg.columns  # only the metrics present are summarised


def _t_cdf(t: float, df: int) -> float:
    """Student's t CDF by numerical integration of its density (Simpson's rule)."""
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    x = np.linspace(0.0, t, 200_001)
    pdf = np.exp(log_c - (df + 1) / 2 * np.log1p(x * x / df))
    h = x[1] - x[0]
    integral = h / 3 * (pdf[0] + pdf[-1] + 4 * pdf[1:-1:2].sum() + 2 * pdf[2:-1:2].sum())
    return 0.5 + integral


@pytest.mark.parametrize("df", [1, 2, 3, 5, 9, 10, 17, 29, 30, 31, 45, 100, 1000])
def test_t_quantile_is_the_975_percent_point(report_module, df):
    t = report_module.t_quantile_975(df)
    assert _t_cdf(t, df) == pytest.approx(0.975, abs=2e-5)


def test_accumulated_network_is_the_running_sum_of_the_mean_over_seeds(report_module):
    ts = pl.DataFrame({
        "policy": ["coarse"] * 6 + ["no_migration"] * 3,
        "seed": [1, 1, 1, 2, 2, 2, 1, 1, 1],
        "cycle": [0, 1, 2, 0, 1, 2, 0, 1, 2],
        "net_mbit": [1.0, 0.0, 4.0, 3.0, 2.0, 0.0, 0.0, 0.0, 0.0],
    })  # fmt: skip
    acc = report_module.accumulated_network(ts)
    assert acc.filter(pl.col("policy") == "coarse")["acc"].to_list() == [2.0, 3.0, 5.0]
    assert acc.filter(pl.col("policy") == "no_migration")["acc"].to_list() == [0.0, 0.0, 0.0]


def test_fig5_9_uses_mem_usage_else_the_first_fine_policy(report_module):
    ts = pl.DataFrame({"policy": ["coarse", "random"], "move_to_first": [0, 2], "move_to_second": [0, 0]})
    pick = report_module._pick_fine
    assert pick(ts, ["coarse", "fine", "fine:mem_usage"]) == "fine:mem_usage"
    assert pick(ts, ["coarse", "fine:cpu_usage", "fine"]) == "fine:cpu_usage"
    assert pick(ts, ["coarse", "random"]) == "random"  # no fine policy: the first one that moved tasks
    assert pick(ts.head(1), ["coarse"]) is None


@pytest.mark.parametrize(
    "which, column",
    [
        ("summary", "gini"),
        ("summary", "policy"),
        ("timeseries", "move_to_second"),
        ("sweep", "overcommit_ratio"),
    ],
)
def test_missing_column_is_a_clear_error_and_leaves_no_report(
    report_module, report_inputs, tmp_path, which, column
):
    summary, timeseries, sweep, meta = report_inputs
    inputs = {"summary": summary, "timeseries": timeseries, "sweep": sweep}
    inputs[which] = inputs[which].drop(column)
    out = tmp_path / "out"

    with pytest.raises(ValueError, match=rf"{which} is missing required column\(s\): {column}\b"):
        report_module.write_report(out, inputs["summary"], inputs["timeseries"], inputs["sweep"], meta)
    assert not (out / "report.html").exists()
    assert not out.exists() or list(out.iterdir()) == []


def test_non_numeric_metric_is_rejected(report_module, report_inputs, tmp_path):
    summary, timeseries, _, _ = report_inputs
    bad = summary.with_columns(pl.col("duration").cast(pl.String))
    with pytest.raises(ValueError, match="summary column 'duration' must be numeric"):
        report_module.write_report(tmp_path, bad, timeseries)
    assert not (tmp_path / "report.html").exists()


def test_failure_while_plotting_changes_nothing(report_module, report_inputs, tmp_path, monkeypatch):
    summary, timeseries, sweep, meta = report_inputs
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.html").write_text("earlier report")
    (out / "fig5-4.png").write_bytes(b"earlier figure")

    def broken(*args, **kwargs):
        raise RuntimeError("plotting failed")

    monkeypatch.setattr(report_module, "_fig_sweep", broken)  # after Figs. 5-4..5-9 are drawn
    with pytest.raises(RuntimeError, match="plotting failed"):
        report_module.write_report(out, summary, timeseries, sweep, meta)

    assert sorted(p.name for p in out.iterdir()) == ["fig5-4.png", "report.html"]
    assert (out / "report.html").read_text() == "earlier report"
    assert (out / "fig5-4.png").read_bytes() == b"earlier figure"


def test_sweep_report_without_timeseries(report_module, report_inputs, tmp_path):
    summary, _, sweep, meta = report_inputs
    (tmp_path / "fig5-6.png").write_bytes(b"stale figure from an earlier run")
    point = sweep.filter((pl.col("machines") == 800) & (pl.col("overcommit_ratio") == 1.0))

    page = report_module.write_report(tmp_path, point, pl.DataFrame(), sweep, meta).read_text()

    for name in ["fig5-4.png", "fig5-5.png", "fig5-7.png", "fig5-8.png"]:
        assert_real_png(tmp_path / name)
    assert not (tmp_path / "fig5-6.png").exists() and not (tmp_path / "fig5-9.png").exists()
    assert 'id="fig5-6"' not in page and 'id="fig5-9"' not in page
    assert "Figures 5-6 and 5-9 left out" in page
    assert "row 1 at overcommit ratio 1, row 2 at 800 machines" in page


def test_single_seed_run_without_sweep(report_module, report_inputs, tmp_path):
    summary, timeseries, _, _ = report_inputs
    one = summary.filter(pl.col("seed") == 1)
    page = report_module.write_report(tmp_path, one, timeseries.filter(pl.col("seed") == 1)).read_text()

    for name in ["fig5-4.png", "fig5-5.png", "fig5-6.png", "fig5-9.png"]:
        assert_real_png(tmp_path / name)
    assert not (tmp_path / "fig5-7.png").exists()
    assert "One run per policy, so no confidence intervals." in page
    assert "±" not in "".join(c for row in summary_rows(page) for c in row)
    assert "No run parameters were given." in page
    assert "Figures 5-7 and 5-8 left out" in page


VOID = {"meta", "img", "br", "hr", "link", "input", "col", "area", "base", "wbr", "source"}


class _Checker(HTMLParser):
    def __init__(self):
        super().__init__()
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.urls: list[str] = []
        self.tags: set[str] = set()
        self.doctype = None

    def handle_decl(self, decl):
        self.doctype = decl

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.urls += [v for k, v in attrs if k in ("src", "href") and v]
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1] if self.stack else 'nothing'}")
        else:
            self.stack.pop()


def test_page_is_simple_self_contained_html5(report_module, report_inputs, tmp_path):
    summary, timeseries, sweep, meta = report_inputs
    meta = {**meta, "command": "colosched sim cluster --policy 'a<b & c>d'"}
    page = report_module.write_report(tmp_path, summary, timeseries, sweep, meta).read_text(encoding="utf-8")

    checker = _Checker()
    checker.feed(page)
    checker.close()
    assert checker.doctype == "DOCTYPE html"
    assert checker.errors == [] and checker.stack == []
    assert '<html lang="en">' in page and '<meta charset="utf-8">' in page
    assert "<title>colosched cluster report</title>" in page
    assert "script" not in checker.tags and "link" not in checker.tags
    # Only embedded images and links to the PNGs beside the page: nothing from the network.
    assert all(
        u.startswith("data:image/png;base64,") or re.fullmatch(r"fig5-\d\.png", u) for u in checker.urls
    )
    assert "a&lt;b &amp; c&gt;d" in page  # meta is escaped


def test_captions_say_when_every_policy_is_equal(report_module, report_inputs, tmp_path):
    # As under the thesis profile on 800 machines: nothing moves, every metric ties.
    summary, timeseries, _, _ = report_inputs
    tied = summary.with_columns(pl.lit(0.1).alias("mean_cpu"), pl.lit(0.3).alias("gini"))
    page = report_module.write_report(tmp_path, tied, timeseries).read_text()
    assert "highest mean CPU: all policies equal (0.100)" in page
    assert "lowest Gini: all policies equal (0.300)" in page
    assert "lowest overcommit: all policies equal" not in page, "overcommit still differs"


def test_the_page_opens_with_the_finding_and_ends_with_the_parameters(report_module, report_inputs, tmp_path):
    summary, timeseries, _, _ = report_inputs
    meta = {"command": "colosched sim cluster", "params": {"warning_threshold": 0.5, "machines": 100}}
    page = report_module.write_report(tmp_path, summary, timeseries, meta=meta).read_text()
    headings = re.findall(r"<h2>(.*?)</h2>", page)
    assert headings[0] == "Finding" and headings[-1] == "Run parameters", headings
    assert page.index("<details>") > page.index('<figure id="fig5-4">'), "parameters last, collapsed"
    finding = re.search(r'<p class="finding">(.*?)</p>', page).group(1)
    moved = summary.filter(pl.col("moves") > 0)["policy"].unique()
    assert finding.startswith("Nodes crossed the warning line (0.5): ") and f"{moved.len()} of" in finding, (
        finding
    )
    rows = {r[0]: r for r in finding_rows(page)}
    assert rows["no_migration"][3:] == ["+0.000", "+0.000", "+0.0000", "+0"], rows["no_migration"]
    agg = report_module.summarize(summary)
    coarse, base = (agg.filter(pl.col("policy") == p).row(0, named=True) for p in ("coarse", "no_migration"))
    assert rows["coarse"][4] == format(coarse["gini"] - base["gini"], "+.3f")
    # Nothing moved: the sentence says why every row is no_migration's.
    still = summary.with_columns(pl.lit(0).alias("moves"))
    page = report_module.write_report(tmp_path, still, timeseries, meta=meta).read_text()
    assert "No node reached the warning line (0.5) at any step" in page


def finding_rows(page: str) -> list[list[str]]:
    table = re.search(r'<table class="summary finding">(.*?)</table>', page, re.S).group(1)
    body = re.search(r"<tbody>(.*?)</tbody>", table, re.S).group(1)
    return [re.findall(r"<td>(.*?)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", body)]
