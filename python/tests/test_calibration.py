"""The usage-model parameters are committed together with the script that produced them: check that
the committed file carries its provenance and that re-running the script reproduces it exactly."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.parallel  # asserts no timing: may run beside other tests (pyproject.toml)

REPO = Path(__file__).resolve().parents[2]
PARAMS = REPO / "crates" / "trace" / "src" / "usage_params.json"
SCRIPT = REPO / "scripts" / "calibrate_usage.py"
SHARED = Path(os.environ.get("COLOSCHED_SHARED_DATA", REPO.parent / "shared" / "data"))
HEAD676 = "google-clusterdata-2011-2-head/task_usage/part-00000-of-00500.head676.csv"


def test_committed_parameters_carry_provenance():
    params = json.loads(PARAMS.read_text())
    prov = params["provenance"]
    assert prov["attribution"] == (
        "Google cluster-usage traces, clusterdata-2011-2, J. Wilkes and C. Reiss, Google, CC-BY 4.0"
    )
    assert "HiPro-IT" in prov["vm_series"]
    assert {i["file"] for i in prov["inputs"]} >= {HEAD676, "google-2011-vm-series/GCD_VMs.tar.gz"}
    n = params["z_grid"]["n"]
    for table in ("cpu_ratio", "max_mean", "mem_ratio", "mai", "cpu_abs", "mem_abs"):
        assert len(params[table]) == n
        assert params[table] == sorted(params[table])
    assert params["static_fit"]["rows"] == 676


@pytest.mark.skipif(not (SHARED / HEAD676).is_file(), reason="shared real data not available")
def test_script_reproduces_committed_parameters(tmp_path):
    out = tmp_path / "usage_params.json"
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--shared", str(SHARED), "--out", str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "task_usage rows: 676" in run.stdout
    assert out.read_text() == PARAMS.read_text()
