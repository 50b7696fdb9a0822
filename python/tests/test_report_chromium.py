"""The HTML report opened in a real browser: headless Chromium (Debian package `chromium`, installed
by `make sysdeps`) renders it, takes a screenshot and dumps the DOM; the page must load cleanly."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from matplotlib import image as mpimg

pytestmark = pytest.mark.parallel  # asserts no timing: may run beside other tests (pyproject.toml)

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",  # we run as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
]
# Messages from the page itself: console output, script errors, refused or failed loads.
PAGE_TROUBLE = re.compile(r":CONSOLE|Uncaught|Failed to load resource|Not allowed to load|Refused to")


def chromium(*args: str, profile: Path) -> subprocess.CompletedProcess:
    cmd = [str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def pixels_of(png: Path, rgb: int, tmp_path: Path, size: str) -> int:
    """Screenshots figure `png` alone in Chromium and counts its pixels of colour `rgb` (0xRRGGBB):
    what the browser drew, not what matplotlib wrote."""
    solo = tmp_path / f"solo-{png.stem}.html"
    solo.write_text(f'<!DOCTYPE html><html><body style="margin:0"><img src="{png.name}"></body></html>')
    (tmp_path / png.name).write_bytes(png.read_bytes())
    shot = tmp_path / f"shot-{png.stem}.png"
    r = chromium(
        f"--screenshot={shot}", f"--window-size={size}", solo.as_uri(), profile=tmp_path / f"q-{png.stem}"
    )
    assert r.returncode == 0 and [x for x in r.stderr.splitlines() if PAGE_TROUBLE.search(x)] == []
    pixels = (mpimg.imread(shot)[..., :3] * 255).round().astype(np.int64)
    return int((abs(pixels - np.array([rgb >> 16, rgb >> 8 & 255, rgb & 255])) < 8).all(axis=-1).sum())


@pytest.fixture
def report_page(report_module, report_inputs, tmp_path):
    if not CHROMIUM.exists():
        reason = f"{CHROMIUM} not found: install the Debian package `chromium` (make sysdeps)"
        print(reason)
        pytest.skip(reason)
    summary, timeseries, sweep, meta = report_inputs
    return report_module.write_report(tmp_path / "out", summary, timeseries, sweep, meta)


def test_report_renders_in_headless_chromium(report_page, tmp_path):
    shot = tmp_path / "shot.png"
    args = [f"--screenshot={shot}", "--window-size=1280,2000", report_page.as_uri()]
    r = chromium(*args, profile=tmp_path / "p1")
    assert r.returncode == 0, r.stderr[-2000:]
    trouble = [line for line in r.stderr.splitlines() if PAGE_TROUBLE.search(line)]
    assert trouble == [], "\n".join(trouble)

    assert shot.exists(), f"no screenshot; chromium said:\n{r.stderr[-2000:]}"
    pixels = (mpimg.imread(shot)[..., :3] * 255).round().astype(np.int64)
    assert pixels.shape == (2000, 1280, 3)
    assert float(np.var(pixels)) > 500, "screenshot is (nearly) blank"
    colours = np.unique(pixels[..., 0] << 16 | pixels[..., 1] << 8 | pixels[..., 2])
    assert len(colours) > 50
    # The embedded Fig. 5-4 is really drawn: its bars' policy colours fill large areas of the shot.
    bars = {"no_migration": (127, 127, 127), "coarse": (214, 39, 40), "fine:mem_usage": (44, 160, 44)}
    for name, rgb in bars.items():
        assert (pixels == rgb).all(axis=-1).sum() > 2000, f"no {name} bar in the screenshot"


def test_report_dom_in_headless_chromium(report_page, tmp_path):
    r = chromium("--dump-dom", report_page.as_uri(), profile=tmp_path / "p2")
    assert r.returncode == 0, r.stderr[-2000:]
    trouble = [line for line in r.stderr.splitlines() if PAGE_TROUBLE.search(line)]
    assert trouble == [], "\n".join(trouble)

    dom = r.stdout
    assert "<title>colosched cluster report</title>" in dom
    assert "<h1>colosched cluster report</h1>" in dom
    for key in ["5-4", "5-5", "5-6", "5-7", "5-8", "5-9"]:
        assert re.search(rf'<figure id="fig{key}">\s*<img src="data:image/png;base64,', dom), f"figure {key}"
    assert len(re.findall(r"<img ", dom)) == 6
    assert dom.count('<td class="num">') > 20  # the summary table was parsed as a table


def test_host_report_renders_in_headless_chromium(tmp_path):
    # The `colosched sim host` report: its table and both figures, drawn, with no page errors.
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} not found: install the Debian package `chromium` (make sysdeps)")
    from colosched import host
    from colosched.report.host import write_host_report

    _, vms = host.run("spec001-sketch", ["credit", "ia"], seeds=[1])
    page = write_host_report(tmp_path / "out", host.normalised(vms), {"scenario": "spec001-sketch"}, "credit")
    shot = tmp_path / "shot.png"
    r = chromium(f"--screenshot={shot}", "--window-size=1280,1800", page.as_uri(), profile=tmp_path / "p")
    assert r.returncode == 0, r.stderr[-2000:]
    assert [line for line in r.stderr.splitlines() if PAGE_TROUBLE.search(line)] == []
    pixels = (mpimg.imread(shot)[..., :3] * 255).round().astype(np.int64)
    # IA's red bars fill a real area of the shot: the figures are drawn, not broken images.
    red = (abs(pixels - np.array([0xD6, 0x27, 0x28])) < 8).all(axis=-1)
    assert red.sum() > 5000, red.sum()
    dom = chromium("--dump-dom", page.as_uri(), profile=tmp_path / "p2").stdout
    assert dom.count("<img ") == 3 and all(f'id="fighost-{i}"' in dom for i in (1, 2, 5))
    summary = re.search(r'<table class="summary">.*?</table>', dom, re.S).group(0)
    assert summary.count("<tr>") == 1 + 2 * 4, "a header and one row per scheduler and VM"


def test_host_report_latency_cdf_and_fairness_render_in_headless_chromium(tmp_path):
    # A network scenario: all five figures, the ping CDF (fighost-4) and fairness (fighost-5) among
    # them, load as images in the browser, with no page errors.
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} not found: install the Debian package `chromium` (make sysdeps)")
    from colosched import host
    from colosched.report.host import write_host_report

    _, vms = host.run("spec002-queue1", ["credit", "diff"], seeds=[1])
    page = write_host_report(tmp_path / "out", vms, {"scenario": "spec002-queue1"}, "credit")
    r = chromium("--dump-dom", page.as_uri(), profile=tmp_path / "p")
    assert r.returncode == 0, r.stderr[-2000:]
    assert [line for line in r.stderr.splitlines() if PAGE_TROUBLE.search(line)] == []
    for i in range(1, 6):
        assert re.search(rf'<figure id="fighost-{i}">\s*<img src="data:image/png;base64,', r.stdout), i
    # Only the CDF and fairness figures, screenshotted alone: their lines and bars are drawn.
    for i in (4, 5):
        green = pixels_of(tmp_path / "out" / f"fighost-{i}.png", 0x2CA02C, tmp_path, "1280,600")  # diff's
        assert green > 200, (i, green)


def test_vms_report_renders_in_headless_chromium(tmp_path):
    # The `colosched sim vms` report on the Hadoop preset: all four figures (headline, SSD
    # utilisation, migrations, job times) load as images and are drawn, with no page errors.
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} not found: install the Debian package `chromium` (make sysdeps)")
    from colosched import vms
    from colosched.report.vms import write_vms_report

    tables = vms.run("spec003-hadoop", ["random", "planner"], seeds=[1, 2])
    page = write_vms_report(tmp_path / "out", tables, {"scenario": "spec003-hadoop"}, "random")
    r = chromium("--dump-dom", page.as_uri(), profile=tmp_path / "p")
    assert r.returncode == 0, r.stderr[-2000:]
    assert [line for line in r.stderr.splitlines() if PAGE_TROUBLE.search(line)] == []
    for i in range(1, 5):
        assert re.search(rf'<figure id="figvms-{i}">\s*<img src="data:image/png;base64,', r.stdout), i
    summary = re.search(r'<table class="summary">.*?</table>', r.stdout, re.S).group(0)
    assert summary.count("<tr>") == 1 + vms.headline(tables).height, (
        "a header and one row per metric and policy"
    )
    # Each figure screenshotted alone: the planner's red bars and lines are drawn in it, and in
    # figure 2 (one line per host) host h0's blue.
    for i, rgb in {1: 0xD62728, 2: 0x1F77B4, 3: 0xD62728, 4: 0xD62728}.items():
        drawn = pixels_of(tmp_path / "out" / f"figvms-{i}.png", rgb, tmp_path, "1600,1300")
        assert drawn > 200, (i, drawn)


def test_the_finding_is_on_the_first_screen_and_the_parameters_are_folded(report_page, tmp_path):
    # Laid out by the browser: a probe script in a copy of the page reports where the finding
    # sits and whether the run parameters' <details> is closed (only its summary line shown).
    probe = tmp_path / "probe.html"
    script = (
        "<script>const f = document.querySelector('p.finding').getBoundingClientRect();"
        "const d = document.querySelector('details');"
        "document.title = [Math.round(f.top), window.innerHeight, d.open,"
        " Math.round(d.getBoundingClientRect().height)].join(' ');</script>"
    )
    probe.write_text(report_page.read_text().replace("</body>", script + "</body>"))
    r = chromium("--window-size=1280,800", "--dump-dom", probe.as_uri(), profile=tmp_path / "p3")
    assert r.returncode == 0, r.stderr[-2000:]
    top, height, is_open, folded = re.search(r"<title>(.*?)</title>", r.stdout).group(1).split()
    assert 0 < int(top) < int(height) <= 800, (top, height)
    assert is_open == "false" and int(folded) < 60, (is_open, folded)
