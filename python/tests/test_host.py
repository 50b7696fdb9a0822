"""The host simulator from Python and from `colosched sim host` (crates/host, docs/host-sim.md)."""

from __future__ import annotations

import json

import polars as pl
import pytest

from colosched import cli, host

pytestmark = pytest.mark.parallel  # asserts no timing: may run beside other tests (pyproject.toml)


def test_the_preset_runs_under_every_scheduler_and_reports_each_vm():
    runs, vms = host.run("spec001-sketch", ["all"], seeds=[3, 4])
    assert set(host.SCHEDULERS) >= {"credit", "eevdf", "ia"}
    assert runs.height == len(host.SCHEDULERS) * 2 and set(runs["seed"]) == {3, 4}
    assert (runs["end_ms"] <= 20_000 + 1e-6).all() and (runs["events"] > 0).all()
    assert vms.height == 4 * runs.height
    assert vms.filter(pl.col("vm") == "p8")["workload"].unique().to_list() == ["parallel"]
    assert (vms["completions"] > 0).all(), "every VM completes programs in 20 s"
    rel = host.normalised(vms)
    credit = rel.filter(pl.col("scheduler") == "credit")["vs_credit"]
    assert credit.to_list() == pytest.approx([1.0] * credit.len())
    # IA shares the fast cores by weight (issue 26): the serial 6-vCPU VM gets its share and
    # every one of its vCPUs progresses, within 10 % of Credit's pace, which gives it more than
    # its share of the fast cores (25.5 s against IA's 8.9 s; docs/host-sim.md, spec 001). It
    # was 0.95 x Credit before only because two of its vCPUs starved and their unfinished
    # programs left the mean of completed ones.
    ia_s6 = rel.filter((pl.col("scheduler") == "ia") & (pl.col("vm") == "s6"))["vs_credit"]
    assert (ia_s6 < 1.1).all(), ia_s6


TWO_HOGS = """
horizon_ms = 2000
[[cores]]
count = 1
speed = 2
[[cores]]
count = 1
[[vms]]
name = "a"
vcpus = 1
repeat = true
workload = "serial"
work_ms = 50
work_cv = 0.3
[[vms]]
name = "b"
vcpus = 1
repeat = true
fast_priority = true
workload = "serial"
work_ms = 50
work_cv = 0.3
"""


def test_aash_gives_a_priority_vm_the_fast_core_and_work_cv_makes_seeds_differ(tmp_path):
    path = tmp_path / "two-hogs.toml"
    path.write_text(TWO_HOGS)
    assert "aash" in host.SCHEDULERS
    _, vms = host.run(str(path), ["credit", "aash"], seeds=[1, 2])

    def mean(scheduler: str, seed: int, vm: str) -> float:
        row = vms.filter((pl.col("scheduler") == scheduler) & (pl.col("seed") == seed) & (pl.col("vm") == vm))
        return row["mean_completion_ms"][0]

    # 50 ms programs: ~25 ms on the SF 2 core, ~50 ms on the slow one. Credit leaves "b" on the
    # slow core; AASH gives it the fast core (fast_priority).
    assert mean("aash", 1, "b") < 30 and mean("credit", 1, "b") > 40
    assert mean("credit", 1, "a") != mean("credit", 2, "a")


def test_sim_host_writes_its_tables_and_json_lines(tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["sim", "host", "--scenario", "spec001-sketch", "--scheduler", "credit,ia", "--seeds", "2"]
    assert cli.main([*argv, "--out", str(out), "--json"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert len(lines) == 2 * 2 * 4 and {x["scheduler"] for x in lines} == {"credit", "ia"}
    assert all("vs_credit" in x and "mean_completion_ms" in x for x in lines)
    summary = pl.read_csv(out / "summary.csv")
    assert summary.columns == ["scenario", "scheduler", "seed", "end_ms", "events"]
    assert pl.read_parquet(out / "vms.parquet").height == len(lines)
    assert "ping_rtts_ms" not in pl.read_parquet(out / "vms.parquet").columns
    assert pl.read_parquet(out / "pings.parquet").height == 0, "no network VM, no ping"
    assert json.loads((out / "meta.json").read_text())["schedulers"] == ["credit", "ia"]
    page = (out / "report.html").read_text()
    assert "colosched host report" in page and page.count("data:image/png;base64,") == 3
    assert 'id="fighost-5"' in page and 'id="fighost-4"' not in page, "fairness; no CDF without pings"
    assert (out / "fighost-1.png").stat().st_size > 1000
    assert cli.main([*argv, "--out", str(out), "--no-report"]) == 0
    assert not (out / "report.html").exists(), "an old report is not left beside new results"


@pytest.mark.parametrize(
    "text, message",
    [
        ("name = 'x'\nhorizon_ms = 100\nhorizonn = 2\n", "horizonn"),
        ("horizon_ms = -1\n[[cores]]\ncount = 2\n", "horizon_ms"),
        (
            "horizon_ms = 100\n[[cores]]\ncount = 2\n[[vms]]\nname = 'v'\nvcpus = 1\nworkload = 'gpu'\n",
            "vms[0].workload",
        ),
        (
            "horizon_ms = 100\n[[cores]]\ncount = 2\n[[vms]]\nname = 'w'\nvcpus = 3\nworkload = 'serial'\n"
            "work_ms = 5\n",
            "vms[0].vcpus: 3 vCPUs but 2 usable cores; the ia scheduler",
        ),
    ],
)
def test_a_bad_scenario_exits_2_naming_file_and_key_and_writes_nothing(tmp_path, capsys, text, message):
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    out = tmp_path / "out"
    assert cli.main(["sim", "host", "--scenario", str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and message in err, err
    assert not out.exists(), "nothing written for a scenario that was refused"


def test_unknown_scheduler_and_scenario_are_refused(capsys):
    assert cli.main(["sim", "host", "--scenario", "spec001-sketch", "--scheduler", "cfs"]) == 2
    assert "unknown scheduler 'cfs'" in capsys.readouterr().err
    assert cli.main(["sim", "host", "--scenario", "no-such-preset"]) == 2
    assert "neither a file nor a preset" in capsys.readouterr().err


def test_spec002_queue2_diff_serves_the_network_vm_better_and_the_report_shows_it(tmp_path):
    # The paper: VM1's TCP 37 -> 74 Mbit/s and ping 96 -> 37 ms from Credit to Diff (Queue-2).
    runs, vms = host.run("spec002-queue2", ["credit", "diff"])
    vm1 = {r["scheduler"]: r for r in vms.filter(pl.col("vm") == "vm1").iter_rows(named=True)}
    assert vm1["credit"]["workload"] == "network"
    assert vm1["diff"]["throughput_mbit_s"] > 1.5 * vm1["credit"]["throughput_mbit_s"], vm1
    assert vm1["diff"]["ping_p50_ms"] < vm1["credit"]["ping_p50_ms"], vm1
    assert vms.filter(pl.col("vm") != "vm1")["throughput_mbit_s"].is_null().all(), "only VM1 has a flow"
    out = tmp_path / "out"
    argv = ["sim", "host", "--scenario", "spec002-queue2", "--scheduler", "credit,diff", "--out", str(out)]
    assert cli.main(argv) == 0
    page = (out / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 5 and 'id="fighost-3"' in page and 'id="fighost-4"' in page
    pings = pl.read_parquet(out / "pings.parquet")
    assert pings.columns == ["scenario", "scheduler", "seed", "vm", "sample", "rtt_ms"]
    answered = dict(
        vms.filter(pl.col("vm") == "vm1").group_by("scheduler").agg(pl.sum("pings_answered")).iter_rows()
    )
    assert dict(pings.group_by("scheduler").len().iter_rows()) == answered, "one row per answered ping"
    assert set(pings["vm"]) == {"vm1"} and (pings["rtt_ms"] >= 30).all(), "2 × 15 ms of link at least"
    assert cli.main(["sim", "host", "--scenario", "spec001-sketch", "--out", str(out)]) == 0
    assert not (out / "fighost-3.png").exists(), "no network figure left from the earlier run"
    assert not (out / "fighost-4.png").exists() and (out / "fighost-5.png").exists()


def test_pings_are_one_row_per_sample_and_fairness_spread_is_spec001s_std():
    from colosched.report.host import _sct_spread

    vms = pl.DataFrame(
        {
            "scenario": ["s"] * 4,
            "scheduler": ["credit"] * 4,
            "seed": [1] * 4,
            "vm": ["a", "b", "c", "n"],
            "vcpus": [2, 2, 4, 1],
            "workload": ["serial", "serial", "serial", "network"],
            "mean_completion_ms": [100.0, 300.0, 50.0, None],
            "ping_rtts_ms": [[], [], [], [3.0, 1.0, 2.0]],
        }
    )
    p = host.pings(vms)
    assert p["rtt_ms"].to_list() == [3.0, 1.0, 2.0] and p["sample"].to_list() == [0, 1, 2]
    assert set(p["vm"]) == {"n"}
    # a and b are equal (2-vCPU serial): SCT = 0.5 and 1.5, std 0.5; c has no twin.
    spread = _sct_spread(vms)
    assert spread.height == 1 and spread["std"][0] == pytest.approx(0.5) and spread["vms"][0] == 2


def test_colosched_host_is_the_agents_host_command(tmp_path, capfd):
    # `colosched host …` runs the host agent of the static binary, in this process.
    assert cli.main(["host", "--help"]) == 0
    assert "check-config" in capfd.readouterr().out
    bad = tmp_path / "host.toml"
    bad.write_text('[[vm]]\nname = "web"\nweight = -1\n')
    assert cli.main(["host", "check-config", "--config", str(bad)]) == 2
    assert f"{bad}:3: vm[0].weight: must be positive" in capfd.readouterr().err


def test_comparisons_carry_the_spread_over_seeds_and_say_when_there_is_none(tmp_path):
    from colosched.report.host import write_host_report

    path = tmp_path / "two-hogs.toml"
    path.write_text(TWO_HOGS)
    _, drawn = host.run(str(path), ["credit", "aash"])  # the default: five seeds
    assert sorted(drawn["seed"].unique()) == [1, 2, 3, 4, 5]
    agg = host.per_vm(drawn, "credit")
    assert (agg["runs"] == 5).all() and (agg["completion_sd_ms"] > 0).all(), agg
    report = write_host_report(tmp_path / "drawn", drawn, None, "credit").read_text()
    assert "Means over 5 seeds ± one standard deviation" in report and " ± " in report
    assert "Every seed gave the same runs" not in report
    # Without work_cv every seed gives the same run: no spread, and the report says so.
    fixed = tmp_path / "fixed.toml"
    fixed.write_text(TWO_HOGS.replace("work_cv = 0.3", "work_cv = 0"))
    _, same = host.run(str(fixed), ["credit"], seeds=[1, 2])
    assert (host.per_vm(same, "credit")["completion_sd_ms"] == 0).all()
    report = write_host_report(tmp_path / "same", same, None, "credit").read_text()
    assert "Every seed gave the same runs" in report
    _, one = host.run(str(fixed), ["credit"], seeds=[1])
    assert "One seed: no spread" in write_host_report(tmp_path / "one", one, None, "credit").read_text()


@pytest.mark.parametrize(
    ("line", "key"),
    [
        ("horizon_ms = 1e300", "horizon_ms"),
        ("horizon_ms = 2000\nnet_quantum_ms = 7", "net_quantum_ms"),
        ("horizon_ms = 2000\nmigration_warmup_ms = 1e300", "migration_warmup_ms"),
    ],
)
def test_a_value_out_of_range_exits_2_naming_the_key_in_time(tmp_path, line, key):
    import subprocess
    import sys

    path = tmp_path / "bad.toml"
    text = TWO_HOGS.replace("horizon_ms = 2000", line)
    path.write_text(text)
    at = 1 + text[: text.index(f"{key} =")].count("\n")  # the key's line in the file
    out = str(tmp_path / "o")
    argv = [sys.executable, "-m", "colosched.cli", "sim", "host", "--scenario", str(path), "--out", out]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert f"{path}:{at}: {key}: " in done.stderr
    assert not (tmp_path / "o").exists()
