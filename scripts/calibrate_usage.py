#!/usr/bin/env python3
"""Calibrate colosched's per-task usage model on real Google ClusterData2011-2 data.

Run from the repository root:

    .venv/bin/python scripts/calibrate_usage.py --shared ../shared/data \
        --out crates/trace/src/usage_params.json

Inputs (all under --shared; nothing is extracted or copied into the repository):

* google-clusterdata-2011-2-head/task_usage/part-00000-of-00500.head676.csv: 676 real task_usage
  rows (first 300 s window) -> per-task mean CPU, max CPU, assigned memory, MAI.
* google-clusterdata-2011-2/task_events/part-00000-of-00500.csv.gz (or, if absent, the head file
  google-clusterdata-2011-2-head/task_events/part-00000-of-00500.head1015.csv): the CPU and memory
  requests of the same tasks, joined on (job ID, task index).
* google-2011-vm-series/GCD_VMs.tar.gz: 1,600 per-job 5-minute series (CPU %, memory %) -> the
  size and the autocorrelation of the window-to-window variation.

Output: a JSON file with the fitted parameters that crates/trace/src/usage.rs embeds (the product
ships these numbers, never the series). The model and its limits are explained in
docs/usage-model.md. numpy + the standard library only; the output is deterministic (no clock, no
random numbers, numbers rounded to 6 significant digits).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import io
import json
import math
import sys
import tarfile
from pathlib import Path
from statistics import NormalDist

import numpy as np

ATTRIBUTION = "Google cluster-usage traces, clusterdata-2011-2, J. Wilkes and C. Reiss, Google, CC-BY 4.0"
VM_SERIES_NOTE = (
    "google-2011-vm-series/GCD_VMs.tar.gz: 1,600 series (GCD_VMs/vm_<jobid>_<n>), 288 lines each "
    "(24 h at 5-minute steps; CPU utilisation %, memory utilisation %), made by summing task usage "
    "per job over the first days of May 2011 (values filtered to 5..90 %), from the public "
    "repository HiPro-IT/CPU-and-Memory-resource-usage-from-Google-Cluster-Data, which asks users "
    "to cite Google's trace. No licence file: used for calibration only; only the fitted numbers "
    "below are shipped, not the series."
)

USAGE_HEAD = "google-clusterdata-2011-2-head/task_usage/part-00000-of-00500.head676.csv"
EVENTS_FULL = "google-clusterdata-2011-2/task_events/part-00000-of-00500.csv.gz"
EVENTS_HEAD = "google-clusterdata-2011-2-head/task_events/part-00000-of-00500.head1015.csv"
VM_SERIES = "google-2011-vm-series/GCD_VMs.tar.gz"

# Quantile tables are stored on a uniform grid of standard-normal scores z = -3, -2.75, ..., 3
# (25 points): the model draws a (correlated) normal score per task and interpolates linearly in z.
# A uniform z grid gives O(1) lookups and denser coverage of the tails than a uniform p grid.
Z_MIN, Z_STEP, Z_N = -3.0, 0.25, 25
Z_GRID = [Z_MIN + Z_STEP * i for i in range(Z_N)]
NORMAL = NormalDist()
P_GRID = [NORMAL.cdf(z) for z in Z_GRID]

# Static per-task variables, in the order of the copula's correlation matrix.
STATIC_VARS = ["cpu_ratio", "max_mean", "mem_ratio", "mai"]
# Lags (5-minute steps) the temporal fit matches: up to 2 hours.
ACF_MAX_LAG = 24
SERIES_LEN = 288


def sig(x: float, digits: int = 6) -> float:
    """Round to `digits` significant digits so the JSON is stable and readable."""
    if x == 0 or not math.isfinite(x):
        return float(x)
    return float(f"{x:.{digits}g}")


def sig_list(xs) -> list[float]:
    return [sig(float(x)) for x in xs]


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def opt_float(s: str) -> float:
    return float(s) if s != "" else math.nan


# ----------------------------------------------------------------------------------------------
# Real rows: task_usage head joined with task_events requests
# ----------------------------------------------------------------------------------------------


def read_usage(path: Path) -> list[dict]:
    rows = []
    with open(path, newline="") as f:
        for line_no, r in enumerate(csv.reader(f), 1):
            if len(r) != 20:
                sys.exit(f"{path}:{line_no}: expected 20 columns, found {len(r)}")
            rows.append(
                {
                    "start": int(r[0]),
                    "job": int(r[2]),
                    "index": int(r[3]),
                    "cpu": opt_float(r[5]),
                    "mem": opt_float(r[7]),
                    "max_cpu": opt_float(r[13]),
                    "cpi": opt_float(r[15]),
                    "mai": opt_float(r[16]),
                }
            )
    return rows


def read_requests(path: Path, keys: set) -> tuple[dict, dict]:
    """(job, index) -> (cpu_request, mem_request, how) for the keys, from task_events.

    Rule: the first SUBMIT row's requests; when that SUBMIT has empty request fields (the trace's
    t=0 snapshot rows often do), the first later event of the same task with non-empty requests
    (in practice its SCHEDULE row). `how` is "submit" or "later_event".
    """
    opener = gzip.open if path.suffix == ".gz" else open
    submit: dict = {}
    later: dict = {}
    with opener(path, "rt", newline="") as f:
        for r in csv.reader(f):
            key = (int(r[2]), int(r[3]))
            if key not in keys:
                continue
            if r[5] == "0" and key not in submit:
                submit[key] = (opt_float(r[9]), opt_float(r[10]))
            elif key in submit and key not in later and r[9] != "" and r[10] != "":
                later[key] = (float(r[9]), float(r[10]))
    out = {}
    counts = {"submit": 0, "later_event": 0, "none": 0}
    for key in keys:
        s = submit.get(key)
        if s is not None and not math.isnan(s[0]) and not math.isnan(s[1]):
            out[key] = (s[0], s[1], "submit")
            counts["submit"] += 1
        elif key in later:
            out[key] = (*later[key], "later_event")
            counts["later_event"] += 1
        else:
            counts["none"] += 1
    return out, counts


def z_quantiles(values: np.ndarray) -> list[float]:
    """Empirical quantiles (numpy 'linear' interpolation) at the probabilities of the z grid."""
    return sig_list(np.quantile(values, P_GRID))


def normal_scores(a: np.ndarray) -> np.ndarray:
    """Rank-based normal scores, average ranks for ties: Phi^-1((rank + 0.5) / n)."""
    order = np.argsort(a, kind="stable")
    ranks = np.empty(len(a))
    ranks[order] = np.arange(len(a), dtype=float)
    _, inv, counts = np.unique(a, return_inverse=True, return_counts=True)
    sums = np.bincount(inv, weights=ranks)
    ranks = (sums / counts)[inv]
    return np.array([NORMAL.inv_cdf((r + 0.5) / len(a)) for r in ranks])


def icc_oneway(z: np.ndarray, groups: np.ndarray) -> float:
    """One-way ANOVA intraclass correlation of z between groups (jobs), clipped to [0, 1]."""
    labels, inv = np.unique(groups, return_inverse=True)
    k, n = len(labels), len(z)
    ni = np.bincount(inv).astype(float)
    mi = np.bincount(inv, weights=z) / ni
    ssb = float((ni * (mi - z.mean()) ** 2).sum())
    ssw = float(((z - mi[inv]) ** 2).sum())
    msb, msw = ssb / (k - 1), ssw / (n - k)
    n0 = (n - (ni**2).sum() / n) / (k - 1)
    icc = (msb - msw) / (msb + (n0 - 1) * msw)
    return min(max(icc, 0.0), 1.0)


def job_balanced_median(values: np.ndarray, jobs: np.ndarray) -> float:
    """Weighted median where every job has total weight 1 (diagnostic only)."""
    _, inv, counts = np.unique(jobs, return_inverse=True, return_counts=True)
    w = 1.0 / counts[inv]
    order = np.argsort(values, kind="stable")
    cw = np.cumsum(w[order])
    return float(values[order][np.searchsorted(cw, cw[-1] / 2)])


def fit_static(shared: Path) -> tuple[dict, dict, list[str]]:
    usage_path = shared / USAGE_HEAD
    rows = read_usage(usage_path)
    keys = {(r["job"], r["index"]) for r in rows}
    events_path = shared / EVENTS_FULL
    if not events_path.exists():
        events_path = shared / EVENTS_HEAD
    reqs, how = read_requests(events_path, keys)
    inputs = [usage_path, events_path]

    n = len(rows)
    job = np.array([r["job"] for r in rows])
    cpu = np.array([r["cpu"] for r in rows])
    max_cpu = np.array([r["max_cpu"] for r in rows])
    mem = np.array([r["mem"] for r in rows])
    mai = np.array([r["mai"] for r in rows])
    cpi = np.array([r["cpi"] for r in rows])
    cpu_req = np.array([reqs.get((r["job"], r["index"]), (math.nan,) * 2)[0] for r in rows])
    mem_req = np.array([reqs.get((r["job"], r["index"]), (math.nan,) * 2)[1] for r in rows])

    # Ratios only where the request is known and positive; usage fields are never empty here
    # except MAI/CPI (checked below).
    ok_cpu = np.isfinite(cpu_req) & (cpu_req > 0) & np.isfinite(cpu)
    ok_mem = np.isfinite(mem_req) & (mem_req > 0) & np.isfinite(mem)
    ok_mm = np.isfinite(cpu) & (cpu > 0) & np.isfinite(max_cpu)
    ok_mai = np.isfinite(mai)
    with np.errstate(divide="ignore", invalid="ignore"):
        v = {
            "cpu_ratio": np.where(ok_cpu, cpu / cpu_req, np.nan),
            "max_mean": np.where(ok_mm, max_cpu / cpu, np.nan),
            "mem_ratio": np.where(ok_mem, mem / mem_req, np.nan),
            "mai": np.where(ok_mai, mai, np.nan),
        }
    # max/mean < 1 would be a data glitch; the model multiplies, so keep the table >= 1.
    v["max_mean"] = np.where(ok_mm, np.maximum(v["max_mean"], 1.0), np.nan)

    tables = {name: z_quantiles(v[name][np.isfinite(v[name])]) for name in STATIC_VARS}
    # Absolute levels for tasks whose request is zero or missing (no such row in this sample has
    # a zero request, so these come from all rows: see docs/usage-model.md).
    tables["cpu_abs"] = z_quantiles(cpu[np.isfinite(cpu)])
    tables["mem_abs"] = z_quantiles(mem[np.isfinite(mem)])

    # Gaussian copula on rows where all four variables exist.
    complete = np.all([np.isfinite(v[name]) for name in STATIC_VARS], axis=0)
    z = np.stack([normal_scores(v[name][complete]) for name in STATIC_VARS], axis=1)
    corr = np.corrcoef(z.T)
    np.linalg.cholesky(corr)  # must be positive definite
    icc = [icc_oneway(z[:, i], job[complete]) for i in range(len(STATIC_VARS))]

    jobs_used = np.unique(job)
    top = np.unique(job, return_counts=True)
    top_counts = sorted(zip(top[1].tolist(), top[0].tolist()), reverse=True)[:3]
    diag = {
        "rows": n,
        "distinct_tasks": len(keys),
        "jobs": int(len(jobs_used)),
        "largest_jobs_rows": [{"job": int(j), "rows": int(c)} for c, j in top_counts],
        "request_from_submit": how["submit"],
        "request_from_later_event": how["later_event"],
        "request_missing": how["none"],
        "rows_cpu_ratio": int(ok_cpu.sum()),
        "rows_zero_cpu_request": int((np.isfinite(cpu_req) & (cpu_req == 0)).sum()),
        "rows_max_mean": int(ok_mm.sum()),
        "rows_zero_mean_cpu": int((cpu == 0).sum()),
        "rows_mem_ratio": int(ok_mem.sum()),
        "rows_mai": int(ok_mai.sum()),
        "rows_empty_mai": int((~ok_mai).sum()),
        "rows_copula": int(complete.sum()),
        "median": {name: sig(float(np.nanmedian(v[name]))) for name in STATIC_VARS},
        "mean": {name: sig(float(np.nanmean(v[name]))) for name in STATIC_VARS},
        "job_balanced_median": {
            name: sig(job_balanced_median(v[name][np.isfinite(v[name])], job[np.isfinite(v[name])]))
            for name in STATIC_VARS
        },
        "median_cpi": sig(float(np.nanmedian(cpi))),
        "median_mean_cpu": sig(float(np.nanmedian(cpu))),
        "median_assigned_mem": sig(float(np.nanmedian(mem))),
        "rows_cpu_ratio_above_1": int((v["cpu_ratio"] > 1).sum()),
        "rows_mem_ratio_above_1": int((v["mem_ratio"] > 1).sum()),
        "log_var_cpu_ratio": sig(float(np.var(np.log(v["cpu_ratio"][ok_cpu & (cpu > 0)])))),
        "log_var_mem_ratio": sig(float(np.var(np.log(v["mem_ratio"][ok_mem & (mem > 0)])))),
    }
    static = {
        "tables": tables,
        "copula": {
            "vars": STATIC_VARS,
            "corr": [sig_list(row) for row in corr],
            "job_icc": sig_list(icc),
        },
    }
    return static, diag, [str(p) for p in inputs]


# ----------------------------------------------------------------------------------------------
# Temporal variation: per-job 5-minute series
# ----------------------------------------------------------------------------------------------


def read_series(path: Path) -> tuple[np.ndarray, list[str]]:
    """All series of the tarball (streamed, nothing extracted), sorted by member name."""
    found = {}
    with tarfile.open(path, "r|gz") as tar:
        for m in tar:
            if not m.isfile():
                continue
            text = tar.extractfile(m).read().decode()
            a = np.loadtxt(io.StringIO(text), ndmin=2)
            if a.shape != (SERIES_LEN, 2):
                sys.exit(f"{path}!{m.name}: expected {SERIES_LEN}x2 values, found {a.shape}")
            found[m.name] = a
    names = sorted(found)
    return np.stack([found[n] for n in names]), names


def pooled_acf(dev: np.ndarray, max_lag: int) -> np.ndarray:
    """Pooled autocorrelation of mean-removed series: sum D_t D_t+L / sum D_t^2 over all series,
    each sum averaged over its available pairs. The Rust tests use the same estimator."""
    g0 = float((dev * dev).mean())
    return np.array([1.0] + [float((dev[:, :-k] * dev[:, k:]).mean()) / g0 for k in range(1, max_lag + 1)])


def value_noise_acf(k: float, max_lag: int, n_phase: int = 2000) -> np.ndarray:
    """Process autocorrelation c_K(L), L = 0..max_lag, of normalised linear value noise with anchor
    spacing K and a uniformly random phase: S(x) = ((1-t) A_i + t A_i+1) / sqrt((1-t)^2 + t^2),
    i = floor(x/K), t = x/K - i, A_i iid N(0,1). Midpoint rule over the phase."""
    x = (np.arange(n_phase) + 0.5) / n_phase * k
    i0 = np.floor(x / k)
    t0 = x / k - i0
    n0 = np.sqrt((1 - t0) ** 2 + t0**2)
    y = x[None, :] + np.arange(max_lag + 1)[:, None]
    i1 = np.floor(y / k)
    t1 = y / k - i1
    n1 = np.sqrt((1 - t1) ** 2 + t1**2)
    cov = np.where(i1 == i0, (1 - t0) * (1 - t1) + t0 * t1, 0.0)
    cov += np.where(i1 == i0 + 1, t0 * (1 - t1), 0.0)
    return (cov / (n0 * n1)).mean(axis=1)


_LAGS = np.abs(np.subtract.outer(np.arange(SERIES_LEN), np.arange(SERIES_LEN)))


def observed_autocov(proc_acf: np.ndarray) -> np.ndarray:
    """Expected pooled autocovariances, lags 0..ACF_MAX_LAG, of length-SERIES_LEN series of a unit-
    variance process with autocorrelation proc_acf (lags 0..SERIES_LEN-1) after each series' own
    mean is removed, averaged over the available pairs as `pooled_acf` does."""
    c = proc_acf[_LAGS]
    m = c - c.mean(axis=0)[None, :] - c.mean(axis=1)[:, None] + c.mean()  # H C H, H = I - 1/n
    return np.array([np.mean(np.diagonal(m, offset=k)) for k in range(ACF_MAX_LAG + 1)])


# Anchor spacings (in windows) the octave search tries.
SPACINGS = np.round(np.exp(np.linspace(np.log(1.5), np.log(1000.0), 80)), 3)
A1_GRID = np.linspace(0.0, 1.0, 401)
_SPACING_COV: list = []


def spacing_autocov() -> np.ndarray:
    """Observed autocovariances (lags 0..ACF_MAX_LAG) of each candidate octave, computed once."""
    if not _SPACING_COV:
        _SPACING_COV.append(
            np.stack([observed_autocov(value_noise_acf(float(k), SERIES_LEN - 1)) for k in SPACINGS])
        )
    return _SPACING_COV[0]


def series_stats(values: np.ndarray) -> dict:
    """Log deviations of each series from its own mean and their pooled statistics."""
    logs = np.log(values)
    dev = logs - logs.mean(axis=1, keepdims=True)
    per_series_r1 = np.array([np.corrcoef(d[:-1], d[1:])[0, 1] if d.std() > 0 else np.nan for d in dev])
    return {
        "dev": dev,
        "sd": dev.std(axis=1),
        "acf": pooled_acf(dev, ACF_MAX_LAG),
        "pooled_sd": float(np.sqrt((dev * dev).mean())),
        "per_series_r1": per_series_r1,
    }


def octave_fit(target: np.ndarray, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For octave 1 = SPACINGS[i] and every octave 2 = SPACINGS[j], j >= i: the least squared error
    over lags 2..24 (a1 on A1_GRID, a2 solved so that lag 1 is exact) and the best (a1, a2)."""
    white = np.zeros(SERIES_LEN)
    white[0] = 1.0
    gw = observed_autocov(white)
    gk = spacing_autocov()
    t1 = target[1]
    dw = gw[1] - t1 * gw[0]
    dk = gk[:, 1] - t1 * gk[:, 0]
    a1 = A1_GRID[None, :]  # (1, A)
    with np.errstate(divide="ignore", invalid="ignore"):
        a2 = -(dw + a1 * (dk[i] - dw)) / (dk[i:] - dw)[:, None]  # (J, A)
    valid = np.isfinite(a2) & (a2 >= 0) & (a1 + a2 <= 1)
    a2 = np.where(valid, a2, 0.0)
    g = (
        a1[..., None] * gk[i][None, None, :]
        + a2[..., None] * gk[i:][:, None, :]
        + (1 - a1 - a2)[..., None] * gw[None, None, :]
    )
    model = g / g[..., :1]
    sse = np.where(valid, ((model[..., 2:] - target[2:]) ** 2).sum(axis=-1), np.inf)
    best = np.argmin(sse, axis=1)
    rows = np.arange(sse.shape[0])
    return sse[rows, best], A1_GRID[best], a2[rows, best]


def fit_temporal(cpu: np.ndarray, mem: np.ndarray) -> dict:
    """Fit white noise + two value-noise octaves to the log-series deviations of CPU and memory.

    z(w) = sqrt(a1) S_K1(w) + sqrt(a2) S_K2(w) + sqrt(1 - a1 - a2) F(w), F white. The spacings
    K1 <= K2 are shared by CPU and memory (so the model draws one set of anchors for both); the
    fractions are per resource. The observed (mean-removed, 288-window) autocovariance is linear in
    (a1, a2): for every spacing pair and every a1 on a grid, a2 is solved so that the lag-1
    autocorrelation is reproduced exactly; the pair with the least total squared error over lags
    2..24 (CPU + memory) wins."""
    stats = {"cpu": series_stats(cpu), "mem": series_stats(mem)}
    best = None
    for i in range(len(SPACINGS)):
        fits = {name: octave_fit(st["acf"], i) for name, st in stats.items()}
        total = fits["cpu"][0] + fits["mem"][0]
        j = int(np.argmin(total))
        if np.isfinite(total[j]) and (best is None or total[j] < best[0]):
            best = (float(total[j]), i, i + j, {n: (f[1][j], f[2][j]) for n, f in fits.items()})
    if best is None:
        sys.exit("no octave pair reproduces the lag-1 autocorrelations")
    _, i, j, fractions = best
    spacings = [float(SPACINGS[i]), float(SPACINGS[j])]
    gk = spacing_autocov()
    white = np.zeros(SERIES_LEN)
    white[0] = 1.0
    gw = observed_autocov(white)
    out = {"spacings": sig_list(spacings)}
    for name, st in stats.items():
        a1, a2 = (float(x) for x in fractions[name])
        g = a1 * gk[i] + a2 * gk[j] + (1 - a1 - a2) * gw
        model = g / g[0]
        # The model's sigma is the process sd; a 288-window series shows only g[0] of its variance.
        inflation = 1.0 / float(g[0])
        sse = float(((model[2:] - st["acf"][2:]) ** 2).sum())
        out[name] = {
            "sigma": z_quantiles(st["sd"] * math.sqrt(inflation)),
            "fractions": sig_list([a1, a2]),
            "white_fraction": sig(1.0 - a1 - a2),
            "fit": {
                "series": int(st["dev"].shape[0]),
                "windows_per_series": int(st["dev"].shape[1]),
                "target_sd": sig(st["pooled_sd"]),
                "target_acf": sig_list(st["acf"]),
                "model_acf": sig_list(model),
                "rmse_acf_lags_2_24": sig(math.sqrt(sse / (ACF_MAX_LAG - 1))),
                "variance_inflation": sig(inflation),
                "per_series_sd_median": sig(float(np.median(st["sd"]))),
                "per_series_lag1_median": sig(float(np.nanmedian(st["per_series_r1"]))),
                "pooled_acf_lag_48_96": sig_list(pooled_acf(st["dev"], 96)[[48, 96]]),
            },
        }
    return out


# ----------------------------------------------------------------------------------------------


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared", type=Path, default=Path("../shared/data"), help="shared data root")
    ap.add_argument("--out", type=Path, default=Path("crates/trace/src/usage_params.json"))
    args = ap.parse_args(argv)
    shared = args.shared

    static, diag, inputs = fit_static(shared)
    vm_path = shared / VM_SERIES
    series, names = read_series(vm_path)
    temporal = fit_temporal(series[:, :, 0], series[:, :, 1])
    # The model multiplies each task's static level by the temporal factor, which widens the
    # cross-section of log usage in any one window by this factor (the tables are not deconvolved).
    for name, ratio in (("cpu", "log_var_cpu_ratio"), ("mem", "log_var_mem_ratio")):
        f = temporal[name]["fit"]
        process_var = f["target_sd"] ** 2 * f["variance_inflation"]
        diag[f"cross_section_log_sd_widening_{name}"] = sig(math.sqrt(1 + process_var / diag[ratio]))
    inputs.append(str(vm_path))

    def rel(p: str) -> str:
        return str(Path(p).relative_to(shared))

    params = {
        "format": 1,
        "provenance": {
            "attribution": ATTRIBUTION,
            "vm_series": VM_SERIES_NOTE,
            "inputs": [{"file": rel(p), "sha256": sha256(Path(p))} for p in inputs],
            "script": "scripts/calibrate_usage.py",
            "command": "python scripts/calibrate_usage.py --shared ../shared/data "
            "--out crates/trace/src/usage_params.json",
            "docs": "docs/usage-model.md",
        },
        "z_grid": {"min": Z_MIN, "step": Z_STEP, "n": Z_N, "probs": sig_list(P_GRID)},
        **static["tables"],
        "copula": static["copula"],
        "temporal": temporal,
        "static_fit": diag,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(params, indent=1) + "\n")

    # ---- summary ----
    mid = Z_N // 2
    p = {name: params[name] for name in ["cpu_ratio", "max_mean", "mem_ratio", "mai"]}
    print(
        f"task_usage rows: {diag['rows']} ({diag['jobs']} jobs; largest jobs "
        + ", ".join(f"{d['job']}: {d['rows']}" for d in diag["largest_jobs_rows"])
        + ")"
    )
    print(
        f"requests from {rel(inputs[1])}: SUBMIT {diag['request_from_submit']}, later event "
        f"{diag['request_from_later_event']}, missing {diag['request_missing']}"
    )
    print(
        f"rows used: cpu/request {diag['rows_cpu_ratio']}, max/mean {diag['rows_max_mean']} "
        f"({diag['rows_zero_mean_cpu']} with mean CPU 0 skipped), mem/request "
        f"{diag['rows_mem_ratio']}, MAI {diag['rows_mai']} ({diag['rows_empty_mai']} empty), "
        f"copula {diag['rows_copula']}, zero CPU request {diag['rows_zero_cpu_request']}"
    )
    for name, t in p.items():
        print(
            f"  {name:9s} p2.3 {t[4]:.4g}  p16 {t[8]:.4g}  p50 {t[mid]:.4g}  p84 {t[16]:.4g}  "
            f"p97.7 {t[20]:.4g}  (job-balanced median {diag['job_balanced_median'][name]:.4g})"
        )
    corr = static["copula"]["corr"]
    print(
        "copula (normal-score) correlations: "
        + ", ".join(
            f"{STATIC_VARS[i]}~{STATIC_VARS[j]} {corr[i][j]:+.2f}" for i in range(4) for j in range(i + 1, 4)
        )
    )
    print(
        "  job intraclass correlation: "
        + ", ".join(f"{n} {c:.2f}" for n, c in zip(STATIC_VARS, static["copula"]["job_icc"]))
    )
    print(
        "temporal octave spacings (windows, shared by CPU and memory): "
        + ", ".join(f"{k:.1f}" for k in temporal["spacings"])
    )
    for label in ("cpu", "mem"):
        t = temporal[label]
        f = t["fit"]
        print(
            f"{label} series ({f['series']} x {f['windows_per_series']}): log-dev sd "
            f"{f['target_sd']:.3f}, acf lag 1/12/24 {f['target_acf'][1]:.3f}/"
            f"{f['target_acf'][12]:.3f}/{f['target_acf'][24]:.3f} -> white "
            f"{t['white_fraction']:.3f}, octave fractions "
            + "/".join(f"{a:.3f}" for a in t["fractions"])
            + f", model lag 12/24 {f['model_acf'][12]:.3f}/{f['model_acf'][24]:.3f} "
            f"(rmse {f['rmse_acf_lags_2_24']:.3f}), variance inflation "
            f"{f['variance_inflation']:.3f}"
        )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
