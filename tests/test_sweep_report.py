"""The report of `colosched sweep host` and `sweep vms`: one page, a section per scenario, each
section's figures in files of their own, written last and cleaned of an earlier report's."""

from __future__ import annotations

import base64
import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from colosched.report.host import write_host_sweep_report
from colosched.report.vms import write_vms_sweep_report

pytestmark = pytest.mark.parallel  # asserts no timing: may run beside other tests (pyproject.toml)

COLOSCHED = Path(sys.executable).parent / "colosched"
VMS = ["--scenario", "spec003-zookeeper", "--scenario", "spec003-fio-read", "--policy", "random,planner"]
HOST = ["--scenario", "spec001-sketch", "--scenario", "spec002-queue1", "--scheduler", "credit,ia"]


def sweep(what: str, args: list[str], out: Path, *extra: str) -> None:
    r = subprocess.run(
        [str(COLOSCHED), "sweep", what, *args, "--seeds", "2", "--jobs", "2", "--out", str(out), *extra],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr


def sections(out: Path) -> dict[str, list[tuple[str, bytes]]]:
    """Per h2 section of out/report.html: (linked file name, embedded PNG) of each figure."""
    page = (out / "report.html").read_text()
    found = {}
    for part in page.split("<h2>")[1:]:
        heading, _, body = part.partition("</h2>")
        figures = re.findall(r"<figure .*?</figure>", body, re.S)
        pairs = []
        for fig in figures:
            (png,) = re.findall(r'<img src="data:image/png;base64,([^"]+)"', fig)
            (name,) = re.findall(r'<a href="([^"]+)">', fig)
            pairs.append((name, base64.b64decode(png)))
        found[heading] = pairs
    assert page.count("<img ") == sum(len(p) for p in found.values()), "every image is in a figure"
    return found


def check_figures(out: Path, scenarios: list[str]) -> dict[str, list[str]]:
    """Each scenario has a section with figures; each figure's file is on disk, is the image the
    page shows (no other scenario overwrote it), and no two figures share a file. Returns each
    section's file names."""
    found = sections(out)
    assert [h for h in found if h in scenarios] == scenarios
    names = [name for s in scenarios for name, _ in found[s]]
    assert all(found[s] for s in scenarios) and len(set(names)) == len(names)
    for s in scenarios:
        for name, png in found[s]:
            assert (out / name).read_bytes() == png, f"{name} is not the figure of {s}"
    assert sorted(p.name for p in out.glob("*.png")) == sorted(names), "no other figure file"
    return {s: [name for name, _ in found[s]] for s in scenarios}


@pytest.fixture(scope="module")
def vms_out(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sweep-vms")
    sweep("vms", VMS, out)
    return out


@pytest.fixture(scope="module")
def host_out(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sweep-host")
    sweep("host", HOST, out)
    return out


def test_sweep_vms_report_has_a_section_per_scenario_with_its_own_figures(vms_out):
    files = check_figures(vms_out, ["spec003-zookeeper", "spec003-fio-read"])
    # Only the headline figure applies (no Hadoop jobs); the per-window figures need run tables.
    assert files == {"spec003-zookeeper": ["figvms-s1-1.png"], "spec003-fio-read": ["figvms-s2-1.png"]}
    page = (vms_out / "report.html").read_text()
    assert "colosched vms sweep report" in page and "Figures vms-2 and vms-3" in page
    assert page.count("ratio to random is taken per seed") == 2
    assert "IOPS per VM" in page.split("<h2>spec003-fio-read</h2>")[1]


def test_sweep_host_report_has_a_section_per_scenario_with_its_own_figures(host_out):
    files = check_figures(host_out, ["spec001-sketch", "spec002-queue1"])
    # The network figure only where there is a network VM; never the ping CDF (no samples kept).
    assert files == {
        "spec001-sketch": ["fighost-s1-1.png", "fighost-s1-2.png", "fighost-s1-5.png"],
        "spec002-queue1": ["fighost-s2-1.png", "fighost-s2-2.png", "fighost-s2-3.png", "fighost-s2-5.png"],
    }
    page = (host_out / "report.html").read_text()
    assert "colosched host sweep report" in page and "Figure host-4" in page
    assert page.count("Means over 2 seeds. The baseline is credit.") == 2


def test_no_report_writes_no_report_and_no_figure(tmp_path):
    sweep("vms", VMS, tmp_path / "vms", "--no-report")
    sweep("host", HOST[:2] + HOST[4:], tmp_path / "host", "--no-report")
    for out in (tmp_path / "vms", tmp_path / "host"):
        assert (out / "sweep.parquet").exists() and (out / "summary.csv").exists()
        assert not (out / "report.html").exists() and not list(out.glob("*.png"))


def test_a_rerun_with_fewer_scenarios_leaves_no_stale_figure(tmp_path):
    sweep("vms", VMS, tmp_path)
    assert (tmp_path / "figvms-s2-1.png").exists()
    (tmp_path / "figvms-3.png").write_bytes(b"from an earlier sim vms report")
    sweep("vms", VMS[2:], tmp_path)  # spec003-fio-read alone: now the first section
    assert check_figures(tmp_path, ["spec003-fio-read"]) == {"spec003-fio-read": ["figvms-s1-1.png"]}
    assert "spec003-zookeeper" not in (tmp_path / "report.html").read_text()


def test_a_baseline_that_did_not_run_is_refused_before_writing(vms_out, host_out, tmp_path):
    vms_rows = pl.read_parquet(vms_out / "sweep.parquet")
    host_rows = pl.read_parquet(host_out / "sweep.parquet")
    with pytest.raises(ValueError, match="baseline policy 'random' in scenario 'spec003-fio-read'"):
        keep = (pl.col("scenario") == "spec003-zookeeper") | (pl.col("policy") != "random")
        write_vms_sweep_report(tmp_path / "vms", vms_rows.filter(keep), None, "random")
    with pytest.raises(ValueError, match="baseline scheduler 'eevdf' in scenario 'spec001-sketch'"):
        write_host_sweep_report(tmp_path / "host", host_rows, None, "eevdf")
    assert not (tmp_path / "vms").exists() and not (tmp_path / "host").exists()
