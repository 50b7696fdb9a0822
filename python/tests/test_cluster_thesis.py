"""The thesis profile cross-checked against the GiantVM thesis's own simulator (issue 27) on the
input that simulator was run on: task_events parts 0-9 of ../shared/data/google-clusterdata-2011-2
and one synthetic task_usage part from ../shared/tools/thesis_usage_part.py. The figures and
bounds are bench/thesis_crosscheck.py's (it prints the same comparison as a table)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import thesis_crosscheck as xc  # noqa: E402

pytestmark = pytest.mark.parallel  # asserts no timing: may run beside other tests (pyproject.toml)


@pytest.fixture(scope="module")
def ours(tmp_path_factory):
    shared = xc.shared_dir()
    why = xc.missing(shared)
    if why:
        pytest.skip(f"the thesis's input cannot be built: {why}")
    work = tmp_path_factory.mktemp("thesis")
    # Seed 1 is the figure the docs quote; seeds 2 and 3 check it is no lucky draw.
    return xc.measure(xc.build_input(shared, work), work / "cache", seeds=3)


def test_the_input_is_the_one_the_thesis_simulator_ran_on(ours):
    row = ours["default"]["no_migration"]
    assert len(ours["default"]) == 2 * 3 and len(ours["line 0.15"]) == 3
    # 40,228 tasks pass the thesis's filter; the 315 whose first event is before the window
    # are never placed (the thesis's loop starts at 0).
    assert row["started"] + row["pending_at_end"] == 40_228 - 315


@pytest.mark.parametrize("run", list(xc.THESIS))
def test_the_thesis_profile_gives_the_thesis_simulators_figures(ours, run):
    for policy, row in ours[run].items():
        for key, (low_high, bound) in xc.THESIS[run].items():
            assert xc.within(row[key], low_high, bound), (run, policy, key, row[key], low_high, bound)


def test_at_the_default_line_coarse_is_no_migration(ours):
    rows = ours["default"]
    keys = ("mean_cpu", "gini", "duration", "moves", "net_kbit_s_per_machine")
    for seed in ("", " seed 2", " seed 3"):
        coarse, none = rows["coarse" + seed], rows["no_migration" + seed]
        assert {k: coarse[k] for k in keys} == {k: none[k] for k in keys}, seed


def test_the_table_flags_a_figure_out_of_its_bound(ours):
    text, ok = xc.table(ours)
    assert ok and "NO" not in text.split("\n", 2)[2]
    moved = {**ours["line 0.15"]["coarse"], "moves": 2_000}
    text, ok = xc.table({**ours, "line 0.15": {"coarse": moved}})
    assert not ok and "| 2,000 | ± 15% | NO |" in text
