"""The Python API over the engine, on the bundled real sample (task_events parts 00000-00001)."""

from __future__ import annotations

import polars as pl
import pytest

from colosched import cli, cluster
from colosched.cli.args import SIM_PARAMS, sim_params

pytestmark = pytest.mark.parallel  # asserts no timing: may run beside other tests (pyproject.toml)

SUMMARY_COLUMNS = {
    "policy",
    "seed",
    "mean_cpu",
    "gini",
    "overcommit",
    "duration",
    "net_kbit_s_per_machine",
    "net_mbit_s",
    "moves",
    "wall_s",
}


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    return cluster.load(cluster.bundled_sample(), cache_dir=tmp_path_factory.mktemp("cache"))


def test_the_thesis_profile_replays_the_real_sample(sample):
    result = cluster.run(sample, "all", machines=200)
    s = result.summary
    assert SUMMARY_COLUMNS <= set(s.columns)
    assert s["policy"].to_list() == cluster.THESIS_POLICIES
    assert result.params["profile"] == "thesis" and result.params["step_s"] == 1
    row = s.row(0, named=True)
    # The thesis's task set: each task's last run, SUBMIT after 0 ... SCHEDULE -> FINISH, scheduled
    # within the span of one task_usage part; the replay ends at the last submission.
    assert 0 < row["started"] + row["pending_at_end"] < 45_000 < row["skipped"]
    assert row["steps"] <= 5_011 + 1
    for r in s.iter_rows(named=True):
        assert 0 < r["mean_cpu"] <= 1 and 0 <= r["gini"] < 1 and r["completed"] > 0
    # On 200 machines no node reaches the warning line (docs/cluster-sim.md), so nothing moves.
    assert s["moves"].sum() == 0
    ts = result.timeseries
    assert ts.height == 8 * row["steps"]


def test_the_agents_guards_wrap_any_policy_in_the_simulator(sample):
    # The node agent's guards (colosched_core::guards, the code the agent runs) around fine: a
    # node must stay over the line 2 looks in a row, moves need a 0.1 gain, a moved task stays
    # 10 s. Same load as below, where fine moves; the guards hold some moves back.
    kw = {"machines": 100, "overcommit_ratio": 0.2}
    bare = cluster.run(sample, ["fine:mem_usage"], **kw).summary.row(0, named=True)
    result = cluster.run(sample, ["fine:mem_usage"], guards="agent", **kw)
    guarded = result.summary.row(0, named=True)
    assert guarded["policy"] == "fine:mem_usage+guards"
    assert result.params["guards"] == "agent" and result.params["guard_hysteresis"] == 2
    assert 0 < guarded["moves"] < bare["moves"], (guarded["moves"], bare["moves"])
    with pytest.raises(ValueError, match="guard_hysteresis: must be at least 1"):
        cluster.run(sample, ["fine"], guards="agent", guard_hysteresis=0, **kw)
    with pytest.raises(ValueError, match="guard_min_improvement: must be ≥ 0"):
        cluster.run(sample, ["fine"], guards="agent", guard_min_improvement=-0.1, **kw)
    with pytest.raises(ValueError, match="guards"):
        cluster.run(sample, ["fine"], guards="sometimes", **kw)


def test_policies_move_once_nodes_reach_the_warning_line(sample):
    # A higher load (Σ request up to 2.5 per machine): the thesis's policies now move tasks.
    result = cluster.run(
        sample, ["no_migration", "coarse", "fine:mem_usage"], machines=100, overcommit_ratio=0.2
    )
    rows = {r["policy"]: r for r in result.summary.iter_rows(named=True)}
    assert rows["no_migration"]["moves"] == 0 and rows["no_migration"]["net_mbit_s"] == 0
    assert rows["coarse"]["moves"] > 0 and rows["fine:mem_usage"]["moves"] > 0
    # The thesis's kbit is 1,024 bits (net_mbit_s counts 10^6).
    assert result.params["kbit_bits"] == 1024
    for r in rows.values():
        assert r["overcommit"] > 0
        per_machine = r["net_mbit_s"] * 1e6 / 1024 / r["machines"]
        assert r["net_kbit_s_per_machine"] == pytest.approx(per_machine)
    ts = result.timeseries
    assert ts.filter(pl.col("policy") == "coarse")["moves"].sum() == rows["coarse"]["moves"]


def test_the_full_profile_is_a_named_set_of_defaults_that_parameters_override(sample):
    full = cluster.run(sample, "fine:mem_usage", profile="full", machines=200, admission="usage")
    p = full.params
    assert (p["profile"], p["step_s"], p["queue"], p["until"], p["admission"]) == (
        "full",
        60,
        "fifo",
        "trace-end",
        "usage",
    )
    s = full.summary.row(0, named=True)
    assert s["moves"] > 0 and s["pending_at_end"] > 0, "the 60 s model saturates 200 machines"
    assert cluster.defaults("full")["machine_mem_gib"] == 32.0
    assert cluster.defaults()["machine_mem_gib"] == 35.84
    assert set(cluster.defaults()) == set(cluster.defaults("full"))
    with pytest.raises(ValueError, match="profile"):
        cluster.run(sample, "coarse", profile="paper")


def test_the_same_seed_gives_an_identical_summary(sample):
    for profile in cluster.PROFILES:
        kw = dict(machines=100, overcommit_ratio=0.2, profile=profile)
        a = cluster.run(sample, ["fine", "random"], seed=5, **kw).summary.drop("wall_s")
        b = cluster.run(sample, ["fine", "random"], seed=5, **kw).summary.drop("wall_s")
        c = cluster.run(sample, ["fine", "random"], seed=6, **kw).summary.drop("wall_s")
        assert a.equals(b), profile
        assert not a.equals(c), profile


def test_several_seeds_give_one_row_each(sample):
    s = cluster.run(sample, "coarse", machines=100, seed=3, seeds=3).summary
    assert s["seed"].to_list() == [3, 4, 5]
    assert s["mean_cpu"].n_unique() == 3


def test_a_python_policy_plugs_into_the_engine(sample):
    calls = []

    def to_least_loaded(cell, cycle):
        """Moves the smallest migratable task of the busiest node to the least loaded node."""
        calls.append(cycle)
        loads = [n["load"] for n in cell]
        busiest, idlest = loads.index(max(loads)), loads.index(min(loads))
        tasks = sorted(cell[busiest]["tasks"], key=lambda t: t["cpu_usage"])
        if busiest == idlest or not tasks:
            return []
        return [(tasks[0]["id"], busiest, idlest)]

    result = cluster.run(sample, [to_least_loaded, "no_migration"], machines=40, profile="full")
    rows = {r["policy"]: r for r in result.summary.iter_rows(named=True)}
    assert calls and rows["to_least_loaded"]["moves"] > 0
    assert rows["to_least_loaded"]["gini"] != rows["no_migration"]["gini"]


def test_a_python_policy_error_reaches_the_caller(sample):
    def broken(cell, cycle):
        raise RuntimeError("boom in policy")

    with pytest.raises(RuntimeError, match="boom in policy"):
        cluster.run(sample, broken, machines=40)

    def liar(cell, cycle):
        return [(999_999_999, 0, 1)]

    with pytest.raises(ValueError, match="liar.*999999999"):
        cluster.run(sample, liar, machines=40)


def test_bad_parameters_are_refused(sample):
    with pytest.raises(ValueError, match="unknown simulator parameter.*cel_size"):
        cluster.run(sample, "coarse", cel_size=4)
    with pytest.raises(ValueError, match="unknown policy"):
        cluster.run(sample, "fine:disk")
    with pytest.raises(ValueError, match="cell_size"):
        cluster.run(sample, "coarse", cell_size=0)
    with pytest.raises(ValueError, match="overload_penalty"):
        cluster.run(sample, "coarse", overload_penalty="lots")
    with pytest.raises(ValueError, match=r"parameter value \[1, 2\] is not a number"):
        cluster.run(sample, "coarse", capacity=[1, 2])
    with pytest.raises(ValueError, match="send_over_warning: expected true or false"):
        cluster.run(sample, "coarse", send_over_warning="yes")
    for key in ("admission", "runs", "placement", "queue", "until"):
        with pytest.raises(ValueError, match=f'{key}: "bogus" is not one of'):
            cluster.run(sample, "coarse", **{key: "bogus"})


def test_real_task_usage_rows_drive_the_replay(tmp_path):
    """Real task_usage rows (the 676-row head of part 00000, for tasks SUBMITted at t = 0 and
    SCHEDULEd in part 00000) take over from the usage model when the trace root has them."""
    import os
    from pathlib import Path

    shared = Path(
        os.environ.get("COLOSCHED_SHARED_DATA", Path(__file__).resolve().parents[3] / "shared" / "data")
    )
    usage_head = shared / "google-clusterdata-2011-2-head" / "task_usage" / "part-00000-of-00500.head676.csv"
    if not usage_head.is_file():
        pytest.skip(f"the shared real data is not beside the checkout ({usage_head} missing)")
    part0 = cluster.bundled_sample() / "task_events" / "part-00000-of-00500.csv.gz"
    roots = {}
    for name, with_usage in [("events-only", False), ("with-usage", True)]:
        root = tmp_path / name
        (root / "task_events").mkdir(parents=True)
        (root / "task_events" / part0.name).symlink_to(part0)
        if with_usage:
            (root / "task_usage").mkdir()
            (root / "task_usage" / usage_head.name).symlink_to(usage_head)
        roots[name] = cluster.load(root, cache_dir=tmp_path / "cache")
    assert roots["with-usage"].stats()["usage_rows"] == 676
    assert roots["events-only"].stats()["usage_rows"] == 0
    common = dict(machines=100, runs="all", placement="trace", usage_seed=1, profile="full")
    model = cluster.run(roots["events-only"], "no_migration", **common).summary
    real = cluster.run(roots["with-usage"], "no_migration", **common).summary
    assert real["mean_cpu"][0] > 0 and model["mean_cpu"][0] > 0
    assert real["mean_cpu"][0] != model["mean_cpu"][0], "the real rows changed nothing"


def test_every_rust_parameter_has_a_command_line_flag():
    # Rust owns the parameters and their defaults; the CLI must reach each one. Exceptions have
    # their own flags: --profile, --seed(s), --machines, --overcommit-ratio, and --migratable
    # (code|text) for the migratable rule's priority and CPU figure.
    own_flags = {"profile", "seed", "machines", "overcommit_ratio"}
    own_flags |= {"migratable_cpu", "migratable_priority_below"}
    flags = {key for _, key, _ in SIM_PARAMS}
    missing = set(cluster.defaults()) - flags - own_flags
    assert not missing, f"parameters with no flag: {sorted(missing)}"
    args = cli.parser().parse_args(["sim", "cluster", "--max-moves", "3", "--no-keep-series"])
    assert sim_params(args) == {"max_moves": 3, "keep_series": False}
    resolved = cluster.resolve("thesis", **sim_params(args))
    assert (resolved["max_moves"], resolved["keep_series"]) == (3, False)


def test_machines_auto_sizes_the_cluster_to_the_traces_peak_request(sample, tmp_path, capsys):
    full = cluster.run(sample, "no_migration", machines="auto")
    p = full.params
    cell, peak, n = p["cell_size"], p["peak_cpu_request"], p["machines"]
    assert p["machines_auto"] == "auto" and full.summary["machines"].to_list() == [n]
    # The fewest whole cells whose capacity the peak request fits in.
    assert n % cell == 0 and n - cell < peak <= n, (n, peak)
    half, _ = cluster.auto_machines(sample, "auto:0.5")
    assert half - cell < 2 * peak <= half, (half, peak)
    # The same task set under any sizing: the peak does not depend on the machine count.
    assert cluster.auto_machines(sample, "auto", machines=7)[1] == pytest.approx(peak)
    for bad in ("auto:0", "auto:x", "autumn", "auto:11"):
        with pytest.raises(ValueError, match="machines:"):
            cluster.auto_machines(sample, bad)
    # The command line says what it picked.
    argv = ["sim", "cluster", "--machines", "auto:0.8", "--policy", "no_migration", "--no-report"]
    assert cli.main([*argv, "--out", str(tmp_path)]) == 0
    picked = cluster.auto_machines(sample, "auto:0.8")[0]
    assert f"machines auto:0.8: {picked} (" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["sim", "cluster", "--machines", "auto:0", "--out", str(tmp_path)])
