"""The VM-level simulator from Python (crates/vms, docs/vm-sim.md): its tables, the paper's
figures computed from them, and the report."""

from __future__ import annotations

import re

import polars as pl
import pytest

from colosched import vms
from colosched.report.vms import write_vms_report

pytestmark = pytest.mark.parallel  # asserts no timing: may run beside other tests (pyproject.toml)


@pytest.mark.parametrize("preset", vms.PRESETS)
def test_every_preset_runs_under_every_policy(preset):
    tables = vms.run(preset, ["all"], seeds=[1])
    assert set(vms.POLICIES) == {"none", "random", "cloudcache", "planner"}
    assert sorted(tables) == sorted(vms.TABLES)
    runs = tables["runs"]
    assert runs["policy"].to_list() == vms.POLICIES and (runs["scenario"] == preset).all()
    for name, df in tables.items():
        assert df.columns[:3] == ["scenario", "policy", "seed"], name
    for policy in vms.POLICIES:
        mine = {name: df.filter(pl.col("policy") == policy) for name, df in tables.items()}
        assert mine["vms"].height == mine["runs"]["vms"][0] > 0
        assert mine["migrations"].height == mine["runs"]["migrations"][0]
        assert mine["apps"].height >= 1 and mine["windows"].height > 0
        assert mine["windows"]["utilisation"].is_finite().all()
    none = tables["migrations"].filter(pl.col("policy") == "none")
    assert none.height == 0, "the `none` policy never migrates"
    assert tables["migrations"].filter(pl.col("policy") == "random").height > 0, "random moves a VM a window"


def test_the_same_seed_gives_identical_tables_and_another_seed_does_not():
    a = vms.run("spec003-fio-read", ["random", "planner"], seeds=[2])
    b = vms.run("spec003-fio-read", ["random", "planner"], seeds=[2])
    for name in vms.TABLES:
        assert a[name].equals(b[name]), name
    c = vms.run("spec003-fio-read", ["random"], seeds=[3])
    moved = [a["migrations"].filter(pl.col("policy") == "random"), c["migrations"]]
    assert moved[0].select("vm", "to").rows() != moved[1].select("vm", "to").rows()


def _tables(iops: dict[tuple[str, int], list[float]]) -> dict[str, pl.DataFrame]:
    """Tables of runs holding only fio VMs with the given IOPS, per (policy, seed)."""
    # The columns are those of a real run's tables (they come from the Rust result types).
    empty = {t: df.clear() for t, df in vms.run("spec003-fio-read", ["none"], seeds=[1]).items()}
    rows = [
        ("s", p, seed, f"v{i}", "fio", "io_benchmark", x, 0.0, 0.25, 0, "h0")
        for (p, seed), xs in iops.items()
        for i, x in enumerate(xs)
    ]
    runs = [("s", p, seed, len(xs), 0, 0, 0) for (p, seed), xs in iops.items()]
    empty["vms"] = pl.DataFrame(rows, schema=empty["vms"].schema, orient="row")
    empty["runs"] = pl.DataFrame(runs, schema=empty["runs"].schema, orient="row")
    return empty


def test_the_ratio_to_the_baseline_is_taken_per_seed_then_averaged():
    # random: 100 then 200 IOPS per VM; planner: 200 both times. Per seed 2.0 and 1.0 -> 1.5;
    # the ratio of the means would be 200 / 150.
    tables = _tables(
        {
            ("random", 1): [50, 150],
            ("random", 2): [200, 200],
            ("planner", 1): [200],
            ("planner", 2): [100, 300],
        }
    )
    head = vms.headline(tables, baseline="random")
    row = head.filter((pl.col("metric") == "iops_per_vm") & (pl.col("policy") == "planner")).row(
        0, named=True
    )
    assert row["mean"] == pytest.approx(200) and row["seeds"] == 2 and row["std"] == pytest.approx(0)
    assert row["vs_baseline"] == pytest.approx(1.5)
    assert (row["vs_baseline_min"], row["vs_baseline_max"]) == pytest.approx((1.0, 2.0))
    base = head.filter((pl.col("metric") == "iops_per_vm") & (pl.col("policy") == "random")).row(
        0, named=True
    )
    assert (base["mean"], base["min"], base["max"]) == pytest.approx((150, 100, 200))
    assert base["vs_baseline"] == pytest.approx(1.0) and "+15 %" in base["paper"]
    # No migrations: a count of 0, and their time is null rather than missing or 0.
    moved = head.filter(pl.col("metric") == "migration_time_s")
    assert moved.height == 2 and moved["mean"].is_null().all() and (moved["seeds"] == 0).all()
    assert vms.headline(tables, baseline="cloudcache")["vs_baseline"].is_null().all(), "no such run"


def test_headline_on_real_runs_matches_the_tables_it_comes_from():
    tables = vms.run("spec003-hadoop", ["random", "planner"], seeds=[1, 2])
    head = vms.headline(tables)
    jobs = tables["jobs"].filter(pl.col("measured"))
    assert set(head["metric"]) >= {"job_time_s:pi-10", "job_time_s:read", "io_job_time_s", "dfsio_mbps"}
    # Hadoop's preset has `other` VMs beside Hadoop's: their IOPS apply, fio's and ZooKeeper's not.
    assert "iops_per_vm:other" in set(head["metric"])
    assert not any(m in ("iops_per_vm",) or m.startswith(("ld_", "ops_s")) for m in head["metric"]), (
        "only what applies"
    )

    def io_time(policy: str, seed: int) -> float:
        rows = jobs.filter((pl.col("policy") == policy) & (pl.col("seed") == seed))
        return rows.filter(~pl.col("job").str.starts_with("pi"))["time_s"].mean()

    want = sum(io_time("planner", s) / io_time("random", s) for s in (1, 2)) / 2
    got = head.filter((pl.col("metric") == "io_job_time_s") & (pl.col("policy") == "planner"))
    assert got["vs_baseline"][0] == pytest.approx(want)
    count = head.filter((pl.col("metric") == "migrations") & (pl.col("policy") == "random"))["mean"][0]
    assert count == pytest.approx(tables["migrations"].filter(pl.col("policy") == "random").height / 2)
    # Metric by metric, each policy in run order.
    assert head["metric"].to_list()[:2] == [head["metric"][0]] * 2
    assert head["policy"].to_list()[:2] == ["random", "planner"]


def test_zookeeper_logical_distance_each_window_ends_at_the_simulators():
    tables = vms.run("spec003-zookeeper", ["random", "planner"], seeds=[1, 2])
    ld = tables["spread"]
    assert ld.height == 2 * 2 * 60 and ld["app"].unique().to_list() == ["zk"]
    last = ld.group_by("policy", "seed", maintain_order=True).last()
    apps = tables["apps"].join(last, on=["policy", "seed"])
    assert apps["ld"].to_list() == apps["ld_final"].to_list()
    assert ld["ld"].max() <= 9
    head = vms.headline(tables)
    planner = head.filter((pl.col("metric") == "ld_final:zk") & (pl.col("policy") == "planner"))
    assert planner["mean"][0] == 9, "the planner spreads 6 VMs 3 + 3 over 2 hosts (spec 003: 9)"


@pytest.mark.parametrize(
    "change, where, message",
    [
        # A value a check refuses: the key's line; toml's own refusal says where in its message.
        (("vms = 6", "vms = 0"), ":27: ", "apps[0].vms: must be at least 1"),
        (("window_s = 60", "window_s = 60\nwindoww = 3"), ": ", "unknown field `windoww`"),
    ],
)
def test_a_bad_scenario_file_raises_valueerror_naming_file_and_key(tmp_path, change, where, message):
    from pathlib import Path

    preset = Path(__file__).resolve().parents[2] / "crates" / "vms" / "scenarios" / "spec003-zookeeper.toml"
    bad = tmp_path / "bad.toml"
    bad.write_text(preset.read_text().replace(*change))
    with pytest.raises(ValueError) as e:
        vms.run(str(bad), ["random"])
    assert str(e.value).startswith(f"{bad}{where}") and message in str(e.value), e.value


def test_unknown_policy_is_refused_and_all_expands():
    with pytest.raises(ValueError, match="unknown policy 'best'"):
        vms.expand_policies(["random,best"])
    assert vms.expand_policies(["planner", "all"]) == ["planner", "none", "random", "cloudcache"]


def test_report_draws_only_the_figures_that_apply(tmp_path):
    out = tmp_path / "out"
    hadoop = vms.run("spec003-hadoop", ["random", "planner"], seeds=[1, 2])
    page = write_vms_report(out, hadoop, {"scenario": "spec003-hadoop"}, "random").read_text()
    assert re.findall(r'<figure id="(figvms-\d)">', page) == [f"figvms-{i}" for i in (1, 2, 3, 4)]
    assert page.count("data:image/png;base64,") == 4 and "<b>Paper:</b>" in page
    assert page.count('<td class="num">') == 5 * vms.headline(hadoop).height, "5 numbers per headline row"
    # No migration and no spread application: neither figure 3 nor (no jobs) figure 4, and the
    # hadoop run's files are gone.
    still = vms.run("spec003-fio-read", ["none"], seeds=[1])
    page = write_vms_report(out, still, None, "none").read_text()
    assert re.findall(r'<figure id="(figvms-\d)">', page) == ["figvms-1", "figvms-2"]
    assert not (out / "figvms-3.png").exists() and not (out / "figvms-4.png").exists()
    with pytest.raises(ValueError, match="no run of the baseline policy 'random'"):
        write_vms_report(tmp_path / "other", still, None, "random")
    assert not (tmp_path / "other").exists()
    zk = vms.run("spec003-zookeeper", ["random", "planner"], seeds=[1])
    page = write_vms_report(out, zk, None, "random").read_text()
    assert "logical distance at the end: zk random" in page, "figure 3 shows the spread app"


@pytest.mark.parametrize(
    "write, message",
    [
        (lambda p: p.mkdir(), "Is a directory"),
        (lambda p: p.write_bytes(b'[[hosts]]\nid = "h\xff"\n'), "not UTF-8 text (byte 17)"),
        (lambda p: p.write_text(STATE.replace("iops = 500", "iops = inf")), "vms[0].iops: inf"),
        (lambda p: p.write_text(STATE.replace("iops = 500", "iops = 2e300")), "vms[0].iops: 2e300"),
        (
            lambda p: p.write_text(STATE.replace("ssd_iops", "link_gbps = 10\nssd_iops")),
            "unknown field `link_gbps`",
        ),
    ],
)
def test_plan_vms_bad_state_exits_2_naming_the_file(tmp_path, capsys, write, message):
    from colosched.cli import main

    path = tmp_path / "state.toml"
    write(path)
    assert main(["plan", "vms", "--state", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and message in err, err


STATE = """
[[hosts]]
id = "h0"
ssd_capacity_mb = 8192
ssd_iops = 40000
ssd_bw_mbps = 500
[[vms]]
id = "a"
host = "h0"
iops = 500
"""


def test_no_seeds_is_an_error_naming_them():
    with pytest.raises(ValueError, match="seeds"):
        vms.run("spec003-fio-read", ["none"], seeds=[])
