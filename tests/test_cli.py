"""The `colosched` command end to end, as a user runs it: real files, real exit codes."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from colosched import cluster

pytestmark = pytest.mark.parallel  # asserts no timing: may run beside other tests (pyproject.toml)

SAMPLE = cluster.bundled_sample()
PART0 = SAMPLE / "task_events" / "part-00000-of-00500.csv.gz"


def colosched(*args: str, cache: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "colosched.cli", *args]
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)


def test_sim_cluster_writes_every_output_and_json_lines(tmp_path):
    out = tmp_path / "out"
    r = colosched(
        "sim",
        "cluster",
        "--trace",
        str(SAMPLE),
        "--parts",
        "0-1",
        "--machines",
        "200",
        "--policy",
        "coarse,fine:mem_usage",
        "--seeds",
        "2",
        "--out",
        str(out),
        "--json",
        cache=tmp_path / "cache",
    )
    assert r.returncode == 0, r.stderr
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    assert [(x["policy"], x["seed"]) for x in lines] == [
        ("coarse", 1),
        ("coarse", 2),
        ("fine:mem_usage", 1),
        ("fine:mem_usage", 2),
    ]
    for x in lines:
        assert {
            "policy",
            "mean_cpu",
            "gini",
            "overcommit",
            "duration",
            "net_kbit_s_per_machine",
            "net_mbit_s",
            "moves",
            "wall_s",
        } <= set(x)
    for name in ["summary.csv", "timeseries.parquet", "report.html", "meta.json", "fig5-4.png"]:
        assert (out / name).stat().st_size > 0, name
    ts = pl.read_parquet(out / "timeseries.parquet")
    assert {
        "cycle",
        "mean_cpu",
        "gini",
        "overcommit",
        "net_mbit",
        "moves",
        "move_to_first",
        "move_to_second",
    } <= set(ts.columns)
    assert pl.read_csv(out / "summary.csv").height == 4
    assert not list(out.glob(".*tmp*")), "no temporary files left behind"


def test_second_run_reads_the_cache(tmp_path):
    args = ("trace", "info", "--trace", str(SAMPLE), "--parts", "1")
    first = colosched(*args, cache=tmp_path / "cache")
    second = colosched(*args, cache=tmp_path / "cache")
    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    assert json.loads(first.stdout)["parts_from_cache"] == 0
    assert json.loads(second.stdout)["parts_from_cache"] == 1
    cleared = colosched("cache", "clear", cache=tmp_path / "cache")
    assert cleared.returncode == 0 and "removed 1" in cleared.stderr


def make_root(tmp_path: Path, name: str, content: bytes | None, gz: bool = True) -> Path:
    """A trace root whose only task_events part holds `content` (gzipped unless gz=False)."""
    root = tmp_path / name
    (root / "task_events").mkdir(parents=True)
    if content is not None:
        suffix = ".csv.gz" if gz else ".csv"
        data = gzip.compress(content) if gz else content
        (root / "task_events" / f"part-00000-of-00500{suffix}").write_bytes(data)
    return root


GOOD_ROW = (
    b"0,,3418309,0,4155527081,0,70s3v5qRyCO/1PCdI6fVXnrW8FU/w+5CKRSa72xgcIo=,3,9,0.125,0.07446,0.0004244,0\n"
)


@pytest.mark.parametrize(
    "name, content, needle",
    [
        ("columns", GOOD_ROW + b"1,2,3\n", ":2: column"),
        ("non_numeric", GOOD_ROW + GOOD_ROW.replace(b"0.125", b"abc"), ":2: column 10"),
        ("event_type", GOOD_ROW.replace(b",0,70s3", b",9,70s3"), ":1: column 6"),
        ("empty", b"", "empty"),
    ],
)
def test_bad_parts_exit_2_naming_file_line_and_column(tmp_path, name, content, needle):
    root = make_root(tmp_path, name, content)
    r = colosched("trace", "info", "--trace", str(root), cache=tmp_path / "cache")
    assert r.returncode == 2, r.stderr
    assert "part-00000-of-00500.csv.gz" in r.stderr and needle in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    cached = list((tmp_path / "cache").rglob("*")) if (tmp_path / "cache").exists() else []
    assert not [p for p in cached if p.is_file()], f"cache entry written for a bad part: {cached}"


def test_truncated_gzip_and_missing_task_events_exit_2(tmp_path):
    root = make_root(tmp_path, "truncated", None)
    data = PART0.read_bytes()
    (root / "task_events" / PART0.name).write_bytes(data[: len(data) // 2])
    r = colosched("trace", "info", "--trace", str(root), cache=tmp_path / "cache")
    assert r.returncode == 2 and PART0.name in r.stderr, r.stderr
    empty = tmp_path / "no_events"
    empty.mkdir()
    r = colosched(
        "sim", "cluster", "--trace", str(empty), "--out", str(tmp_path / "o"), cache=tmp_path / "cache"
    )
    assert r.returncode == 2 and "task_events" in r.stderr, r.stderr
    assert not (tmp_path / "o").exists()


def test_bad_arguments_exit_2(tmp_path):
    r = colosched(
        "sim",
        "cluster",
        "--trace",
        str(SAMPLE),
        "--policy",
        "fine:disk",
        "--out",
        str(tmp_path / "o"),
        cache=tmp_path / "cache",
    )
    assert r.returncode == 2 and "unknown policy" in r.stderr, r.stderr
    r = colosched("sim", "cluster", "--trace", str(SAMPLE), "--parts", "7-9", cache=tmp_path / "cache")
    assert r.returncode == 2 and "parts" in r.stderr, r.stderr


def test_sweep_runs_the_grid_on_worker_processes(tmp_path):
    out = tmp_path / "sweep"
    r = colosched(
        "sweep",
        "cluster",
        "--trace",
        str(SAMPLE),
        "--parts",
        "1",
        "--machines",
        "40,80",
        "--overcommit-ratio",
        "0.8,1.2",
        "--policy",
        "no_migration,fine:mem_usage",
        "--jobs",
        "2",
        "--out",
        str(out),
        cache=tmp_path / "cache",
    )
    assert r.returncode == 0, r.stderr
    table = pl.read_csv(out / "sweep.csv")
    assert table.height == 2 * 2 * 2
    assert sorted(set(zip(table["machines"], table["overcommit_ratio"]))) == [
        (40, 0.8),
        (40, 1.2),
        (80, 0.8),
        (80, 1.2),
    ]
    for name in ["report.html", "fig5-7.png", "fig5-8.png"]:
        assert (out / name).stat().st_size > 0, name


@pytest.mark.parametrize("profile, step", [("thesis", 1), ("full", 60)])
def test_both_profiles_from_the_cli_record_every_resolved_parameter(tmp_path, profile, step):
    out = tmp_path / profile
    r = colosched(
        "sim",
        "cluster",
        "--trace",
        str(SAMPLE),
        "--profile",
        profile,
        "--machines",
        "100",
        "--overcommit-ratio",
        "0.2",
        "--policy",
        "coarse",
        "--migratable",
        "code",
        "--no-report",
        "--out",
        str(out),
        cache=tmp_path / "cache",
    )
    assert r.returncode == 0, r.stderr
    assert "kbit/s per" in r.stdout, "the table shows the thesis's network unit"
    params = json.loads((out / "meta.json").read_text())["params"]
    assert params["profile"] == profile and params["step_s"] == step
    assert (params["machines"], params["overcommit_ratio"]) == (100, 0.2)
    code = {"migratable_priority_below": 3, "migratable_cpu": "request", "migratable_even_index": True}
    assert {k: params[k] for k in code} == code, "--migratable code is simulator.py's rule"
    expected = cluster.resolve(profile, machines=100, overcommit_ratio=0.2, **code)
    del expected["seed"]
    assert params == {**expected, "seeds": [1], "usage_seed": 0}
    summary = pl.read_csv(out / "summary.csv")
    assert summary["steps"][0] == pl.read_parquet(out / "timeseries.parquet").height


def test_a_bad_parameter_exits_2_naming_it_before_reading_the_trace(tmp_path):
    for flag, value, needle in [
        ("--overload-penalty", "lots", "overload_penalty"),
        ("--capacity", "0", "capacity: must be positive"),
        ("--migratable", "paper", "expected code or text"),
        ("--profile", "paper", "invalid choice: 'paper'"),
    ]:
        r = colosched(
            "sim", "cluster", "--trace", str(tmp_path / "nowhere"), flag, value, cache=tmp_path / "c"
        )
        assert r.returncode == 2 and needle in r.stderr, r.stderr
        assert "nowhere" not in r.stderr


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--help"], "sim"),
        (["sim", "cluster", "--help"], "--profile"),
        (["sim", "vms", "--help"], "spec003-hadoop"),
        (["sweep", "host", "--help"], "--executor"),
        (["sweep", "cluster", "--help"], "--profile"),
        (["agent", "--help"], "colosched-agent run"),
        (["agent", "run", "--help"], "colosched-agent run"),
        (["agent", "restore", "-h"], "colosched-agent restore"),
        (["memwatch", "--help"], "--cgroup <PATH>"),
        (["agent", "memwatch", "--help"], "--cgroup <PATH>"),
        (["--help"], "migrate"),
        (["migrate", "--help"], "colosched migrate vms"),
        (["migrate", "vms", "--help"], "--execute"),
    ],
)
def test_every_command_answers_help_with_exit_0(tmp_path, args, needle):
    r = colosched(*args, cache=tmp_path / "cache")
    assert r.returncode == 0, r.stderr
    assert needle in r.stdout and not r.stderr


EXAMPLE_STATE = Path(__file__).resolve().parent.parent / "examples" / "cluster-state.toml"


def test_plan_vms_spreads_zookeeper_and_deals_the_fio_vms(tmp_path):
    r = colosched("plan", "vms", "--state", str(EXAMPLE_STATE), "--json", cache=tmp_path)
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)
    assert plan["logical_distance"]["zk"] == [0, 9]
    # Three ZooKeeper VMs leaving h0 take its SSD below 1: the fio VMs then get all they ask,
    # and moving them would deliver nothing more (issue 26).
    before, after = plan["ssd_utilisation"]["h0"]
    assert before > 1.0 >= after, plan["ssd_utilisation"]
    assert all(plan["target"][f"fio{i}"] == "h0" for i in range(1, 4)), plan["target"]
    assert plan["delivered"]["iops"][1] > plan["delivered"]["iops"][0]
    assert plan["violations"] == [] and plan["moves_total"] == sum(map(len, plan["moves"]))
    assert all(len(w) == 1 for w in plan["moves"]), "one migration per host at a time"
    r = colosched("plan", "vms", "--state", str(EXAMPLE_STATE), cache=tmp_path)
    assert r.returncode == 0 and "zk: logical distance 0 -> 9" in r.stdout, r.stdout


def test_plan_vms_bad_state_names_the_file_and_field(tmp_path):
    bad = tmp_path / "state.toml"
    bad.write_text(EXAMPLE_STATE.read_text().replace('host = "h1"', 'host = "h7"'))
    r = colosched("plan", "vms", "--state", str(bad), cache=tmp_path)
    assert r.returncode == 2, r.stderr
    assert f'{bad}: vms[9].host: "h7" is not a host' in r.stderr, r.stderr
    assert r.stdout == ""


VMS_FILES = ["summary.csv", "vms.parquet", "jobs.parquet", "apps.parquet", "migrations.parquet"]
VMS_FILES += ["windows.parquet", "spread.parquet", "meta.json", "report.html"]


def test_sim_vms_writes_every_output_and_prints_the_papers_figures_beside_ours(tmp_path):
    out = tmp_path / "out"
    r = colosched(
        "sim", "vms", "--scenario", "spec003-zookeeper", "--seeds", "2", "--out", str(out), cache=tmp_path
    )
    assert r.returncode == 0, r.stderr
    assert all((out / name).stat().st_size > 0 for name in VMS_FILES)
    assert "colosched sim vms — spec003-zookeeper, 2 seed(s)" in r.stdout
    assert "vs random" in r.stdout and "random 5, ours 9" in r.stdout, "the paper's figure beside ours"
    assert "logical distance, end (zk)" in r.stdout
    summary = pl.read_csv(out / "summary.csv")
    assert summary.columns[:3] == ["scenario", "metric", "policy"] and "vs_baseline" in summary.columns
    assert set(summary["policy"]) == {"none", "random", "cloudcache", "planner"}
    assert (summary.filter(pl.col("policy") == "random")["vs_baseline"].drop_nulls() == 1.0).all()
    apps = pl.read_parquet(out / "apps.parquet")
    assert apps.height == 4 * 2 and apps.columns[:3] == ["scenario", "policy", "seed"]
    meta = json.loads((out / "meta.json").read_text())
    assert meta["seeds"] == [1, 2] and meta["baseline"] == "random"
    assert 'id="figvms-3"' in (out / "report.html").read_text()
    assert not list(out.glob(".*")), "no temporary file left"


def test_sim_vms_json_lines_and_no_report(tmp_path):
    out = tmp_path / "out"
    args = ["sim", "vms", "--scenario", "spec003-fio-read", "--policy", "planner,random", "--seeds", "1"]
    assert colosched(*args, "--out", str(out), cache=tmp_path).returncode == 0
    assert (out / "report.html").exists()
    r = colosched(*args, "--out", str(out), "--json", "--no-report", cache=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    summary = pl.read_csv(out / "summary.csv")
    assert [(x["metric"], x["policy"]) for x in lines] == summary.select("metric", "policy").rows()
    planner = [x for x in lines if x["metric"] == "iops_per_vm" and x["policy"] == "planner"]
    assert len(planner) == 1 and planner[0]["seeds"] == 1 and planner[0]["vs_baseline"] is not None
    assert {x["policy"] for x in lines} == {"planner", "random"}
    assert not (out / "report.html").exists(), "an old report is not left beside new results"


@pytest.mark.parametrize(
    "change, where, needle",
    [
        # A value a check refuses: the file's line of the key; toml's own refusal says its line.
        (("vms = 12", "vms = 0"), ":28: ", "apps[0].vms: must be at least 1"),
        (("[backend]", "[backend]\nlatencyy_ms = 2"), ": ", "line 21, column 1"),
    ],
)
def test_sim_vms_bad_scenario_exits_2_naming_the_file_and_key(tmp_path, change, where, needle):
    preset = Path(__file__).resolve().parent.parent / "crates" / "vms" / "scenarios" / "spec003-fio-read.toml"
    bad = tmp_path / "bad.toml"
    bad.write_text(preset.read_text().replace(*change, 1))
    out = tmp_path / "out"
    r = colosched("sim", "vms", "--scenario", str(bad), "--out", str(out), cache=tmp_path)
    assert r.returncode == 2, r.stderr
    line = r.stderr.strip()
    assert "\n" not in line and line.startswith(f"colosched: error: {bad}{where}") and needle in line, line
    assert r.stdout == "" and not out.exists(), "nothing written for a refused scenario"
    r = colosched("sim", "vms", "--scenario", "spec003-fio-read", "--policy", "best", cache=tmp_path)
    assert r.returncode == 2 and "unknown policy 'best'" in r.stderr


def imported(*args: str, cache: Path) -> set[str]:
    """Every module a `colosched ARGS` process imports, as `python -X importtime` lists them."""
    cmd = [sys.executable, "-X", "importtime", "-m", "colosched.cli", *args]
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return {
        line.rsplit("|", 1)[1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")
    }


BIG = {"polars", "matplotlib", "rich"}


@pytest.mark.parametrize(
    "args, needs, not_loaded",
    [
        (["--help"], set(), BIG),
        (["plan", "vms", "--state", str(EXAMPLE_STATE)], {"colosched._native"}, BIG),
        (["sim", "host", "--scenario", "spec001-sketch", "--seeds", "1", "--no-report"], {"polars", "rich"},
         {"matplotlib"}),
    ],
)  # fmt: skip
def test_a_command_loads_polars_matplotlib_and_rich_only_if_it_uses_them(tmp_path, args, needs, not_loaded):
    """Start-up (issue 28): the parser and the commands that do not need them must not load the
    big libraries (bench/startup.py times what that saves). `needs` shows the check sees imports."""
    if args[0] == "sim":
        args = [*args, "--out", str(tmp_path / "out")]
    modules = imported(*args, cache=tmp_path / "cache")
    assert needs <= modules, sorted(needs - modules)
    assert not modules & not_loaded, f"{args}: loads {sorted(modules & not_loaded)}"


def test_output_closed_early_ends_quietly_as_sigpipe_would(tmp_path):
    """`colosched sim host … --json | head -3`: when the reader goes away the command stops
    without a BrokenPipeError traceback and exits 141 (128 + SIGPIPE), its files written. The
    pipe's reading end is closed before the command starts, so the first line already meets it."""
    out = tmp_path / "out"
    read, write = os.pipe()
    os.close(read)
    try:
        cmd = [sys.executable, "-m", "colosched.cli", "sim", "host", "--scenario", "spec001-sketch"]
        cmd += ["--seeds", "1", "--json", "--no-report", "--out", str(out)]
        r = subprocess.run(cmd, stdout=write, stderr=subprocess.PIPE, text=True, timeout=300)
    finally:
        os.close(write)
    assert r.returncode == 141 and r.stderr == "", r.stderr
    assert (out / "vms.parquet").exists()


def test_a_ctrl_c_during_a_write_takes_effect_once_the_file_is_whole(tmp_path):
    """`outputs.atomic_write` holds SIGINT while it writes and renames (polars, interrupted
    mid-write, returns while its writer thread may still create the temporary file)."""
    import signal

    from colosched.outputs import atomic_write

    frame = pl.DataFrame({"x": list(range(1000))})

    def write(tmp: Path) -> None:
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C half-way through
        frame.write_parquet(tmp)

    target = tmp_path / "t.parquet"
    with pytest.raises(KeyboardInterrupt):
        atomic_write(target, write)
    assert pl.read_parquet(target).equals(frame), "the interrupted write was completed first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.parquet"], "no temporary file left"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler, "the handler is put back"

    def half(tmp: Path) -> None:
        tmp.write_text("half")
        raise OSError("disk full")

    # An error in the write leaves nothing behind, and no signal is made up.
    with pytest.raises(OSError, match="disk full"):
        atomic_write(tmp_path / "u.parquet", half)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.parquet"]
