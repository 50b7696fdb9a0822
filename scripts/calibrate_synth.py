#!/usr/bin/env python3
"""Fits the synthetic-trace generator (crates/trace/src/synth.rs) on the real task_events parts.

    .venv/bin/python scripts/calibrate_synth.py --shared /work/shared/data \
        --out crates/trace/src/synth_params.json

Reads the ten real ClusterData2011-2 task_events parts (about the first 14 hours of the 12.5k-machine
cell), folds them into runs (one run per SUBMIT, ended by EVICT/FAIL/FINISH/KILL/LOST, exactly as
crates/trace/src/runs.rs does) and runs into lives (runs joined by EVICT -> SUBMIT: an evicted task
carries on elsewhere), and measures what the generator needs: the population already there at the
window start, the arrival rate of new jobs and their sizes, per priority band the eviction rate,
queueing delays, life outcomes and durations, resubmissions, requests, users and the text format.
Everything is normalised per machine (the cell has 12,500 machines) so the generator can scale it.

Deterministic: no sampling; the same inputs give a byte-identical JSON. Needs numpy only.

Censoring. 14 hours cannot show a life that lasts days. Lives and runs SUBMITted in the first 7 hours
are followed for a horizon H = window - 7 h (about 6.9 h): outcomes and durations shorter than H are
measured directly; the fraction still going after H is a "long" life, whose extra length beyond H
the generator draws from an exponential whose mean is solved so that each band's running population
stays at its measured level (the real cell's population is stationary; see docs/trace-synth.md).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np

ATTRIBUTION = "Google cluster-usage traces, clusterdata-2011-2, J. Wilkes and C. Reiss, Google, CC-BY 4.0"
CELL_MACHINES = 12_500
WINDOW_START_US = 600_000_000  # trace timestamps count from 600 s before the window
SUBMIT, SCHEDULE, EVICT, FAIL, FINISH, KILL, LOST, UPDATE_PENDING, UPDATE_RUNNING = range(9)
END_KINDS = (EVICT, FAIL, FINISH, KILL, LOST)
KIND_NAMES = {EVICT: "evict", FAIL: "fail", FINISH: "finish", KILL: "kill", LOST: "lost"}
BANDS = ("free", "middle", "production")  # priorities 0-1, 2-8, 9-11 (spec §3.1)
FOLLOW_S = 7 * 3600  # lives and runs SUBMITted in (0, FOLLOW_S] are followed for the horizon
MIN_SAMPLES = 30  # below this a per-band distribution falls back to all bands pooled

# Quantile grid: dense in the tails, where durations are heavy.
PROBS = sorted({0.0, 0.001, 0.005, 0.995, 0.999, 1.0} | {round(i / 100, 2) for i in range(1, 100)})


def band_of(priority: np.ndarray) -> np.ndarray:
    return np.where(priority <= 1, 0, np.where(priority >= 9, 2, 1))


def quantiles(values: np.ndarray, digits: int = 6) -> dict:
    """Empirical quantiles the generator samples by inverse CDF (linear between grid points)."""
    v = np.percentile(np.asarray(values, dtype=np.float64), [p * 100 for p in PROBS])
    return {"p": PROBS, "v": [round(float(x), digits) for x in v], "n": int(len(values))}


def mix(kinds: np.ndarray) -> dict:
    """Probability of each terminal event kind (keys are event type codes)."""
    n = len(kinds)
    return {str(k): round(float((kinds == k).sum()) / n, 6) for k in END_KINDS if n and (kinds == k).any()}


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# ---------------------------------------------------------------------------------------------
# Reading


class Table:
    """The task_events rows of all parts as numpy columns (file order = time order)."""

    def __init__(self, files: list[Path]):
        cols: dict[str, list] = {k: [] for k in "ts miss job idx mach ev user sc pr cpu mem disk dm".split()}
        self.format_checked = 0
        self.format_mismatch = 0
        self.e_notation = 0
        users: dict[str, int] = {}
        for path in files:
            with gzip.open(path, "rt", newline="") as fh:
                for r in csv.reader(fh):
                    cols["ts"].append(int(r[0]))
                    cols["miss"].append(int(r[1]) if r[1] else -1)
                    cols["job"].append(int(r[2]))
                    cols["idx"].append(int(r[3]))
                    cols["mach"].append(int(r[4]) if r[4] else -1)
                    cols["ev"].append(int(r[5]))
                    cols["user"].append(users.setdefault(r[6], len(users)))
                    cols["sc"].append(int(r[7]) if r[7] else -1)
                    cols["pr"].append(int(r[8]) if r[8] else -1)
                    for k, s in (("cpu", r[9]), ("mem", r[10]), ("disk", r[11])):
                        cols[k].append(float(s) if s else np.nan)
                        if s:
                            # The requests are printed like C's "%.4g" (e-notation below 1e-4).
                            self.format_checked += 1
                            self.format_mismatch += s != format(float(s), ".4g")
                            self.e_notation += "e" in s
                    cols["dm"].append(int(r[12]) if r[12] else -1)
        self.n_users = len(users)
        self.ts = np.array(cols["ts"], np.int64)
        self.miss = np.array(cols["miss"], np.int8)
        self.job = np.array(cols["job"], np.int64)
        self.idx = np.array(cols["idx"], np.int64)
        self.mach = np.array(cols["mach"], np.int64)
        self.ev = np.array(cols["ev"], np.int8)
        self.user = np.array(cols["user"], np.int32)
        self.sc = np.array(cols["sc"], np.int8)
        self.pr = np.array(cols["pr"], np.int8)
        self.cpu = np.array(cols["cpu"])
        self.mem = np.array(cols["mem"])
        self.disk = np.array(cols["disk"])
        self.dm = np.array(cols["dm"], np.int8)
        # Seconds since the window start; timestamp 0 ("before the window") stays 0.
        self.t = np.maximum(0, self.ts - WINDOW_START_US) / 1e6


class Runs:
    """One run per SUBMIT, as crates/trace/src/runs.rs folds them (times in seconds, -1 = none)."""

    def __init__(self, tb: Table):
        order = np.lexsort((np.arange(len(tb.ts)), tb.ts, tb.idx, tb.job))
        rows = []  # submit row, schedule time, end time, end kind, run number, prev kind, updates, end row
        update_pairs = []  # (row of the update, row of the event before it in the task)
        last_key = None
        cur = None
        run_no = 0
        prev_kind = -1
        prev_row = -1
        for r in order.tolist():
            key = (tb.job[r], tb.idx[r])
            e = tb.ev[r]
            if key != last_key:
                if cur is not None:
                    rows.append(cur)
                cur, last_key, run_no, prev_kind = None, key, 0, -1
            if e == SUBMIT:
                if cur is not None:  # re-SUBMIT without an end: the old run is superseded
                    rows.append(cur)
                cur = [r, -1.0, -1.0, -1, run_no, prev_kind, 0, -1]
                run_no += 1
            elif cur is None:
                pass  # orphan (none in the ten parts)
            elif e == SCHEDULE:
                if cur[1] < 0:
                    cur[1] = tb.t[r]
            elif e in END_KINDS:
                cur[2], cur[3], cur[7] = tb.t[r], int(e), r
                rows.append(cur)
                prev_kind, cur = int(e), None
            else:
                cur[6] += 1
                update_pairs.append((r, prev_row))
            prev_row = r
        if cur is not None:
            rows.append(cur)
        a = np.array(rows, dtype=np.float64)
        self.row = a[:, 0].astype(np.int64)
        self.sched = a[:, 1]
        self.end = a[:, 2]
        self.kind = a[:, 3].astype(np.int64)
        self.run_no = a[:, 4].astype(np.int64)
        self.prev_kind = a[:, 5].astype(np.int64)
        self.updates = a[:, 6].astype(np.int64)
        self.end_row = a[:, 7].astype(np.int64)
        self.update_pairs = update_pairs
        self.submit = tb.t[self.row]
        self.job = tb.job[self.row]
        self.idx = tb.idx[self.row]
        self.pr = tb.pr[self.row].astype(np.int64)
        self.band = band_of(self.pr)
        # Next run of the same task (for resubmissions), -1 if none.
        o = np.lexsort((self.run_no, self.idx, self.job))
        same = (self.job[o][1:] == self.job[o][:-1]) & (self.idx[o][1:] == self.idx[o][:-1])
        self.next = np.full(len(self.row), -1)
        self.next[o[:-1][same]] = o[1:][same]


class Lives:
    """A task's *life*: its runs from one non-EVICT end to the next. An EVICT (the cell taking the
    machine back) is followed within microseconds by a new SUBMIT of the same task, which carries
    on the same work elsewhere; so runs joined by EVICT -> SUBMIT are one life, and a life ends
    with FAIL, FINISH, KILL or LOST (or is still going at the window end)."""

    def __init__(self, ru: Runs):
        order = np.lexsort((ru.run_no, ru.idx, ru.job))
        rows = []  # first run, first SCHEDULE, end, end kind, previous life's end kind, evictions
        cur = None
        last_key = None
        prev_kind = -1
        for r in order.tolist():
            key = (ru.job[r], ru.idx[r])
            if key != last_key:
                cur, last_key, prev_kind = None, key, -1
            if cur is None:
                cur = [r, ru.sched[r], -1.0, -1, prev_kind, 0]
            elif cur[1] < 0 <= ru.sched[r]:
                cur[1] = ru.sched[r]
            if ru.kind[r] == EVICT and ru.next[r] >= 0:
                cur[5] += 1  # evicted and SUBMITted again: the life goes on
                continue
            cur[2], cur[3] = ru.end[r], int(ru.kind[r])
            rows.append(cur)
            prev_kind, cur = int(ru.kind[r]), None
        a = np.array(rows, dtype=np.float64)
        self.first = a[:, 0].astype(np.int64)
        self.sched = a[:, 1]
        self.end = a[:, 2]
        self.kind = a[:, 3].astype(np.int64)
        self.prev_kind = a[:, 4].astype(np.int64)
        self.evictions = a[:, 5].astype(np.int64)
        self.submit = ru.submit[self.first]
        self.band = ru.band[self.first]


# ---------------------------------------------------------------------------------------------
# Measurements


def job_templates(tb: Table, job_rows: list[int], size: Counter) -> dict:
    """Distinct (priority, scheduling class, tasks per job) with their job counts."""
    c = Counter((int(tb.pr[r]), int(tb.sc[r]), size[int(tb.job[r])]) for r in job_rows)
    keys = sorted(c)
    return {
        "priority": [k[0] for k in keys],
        "sched_class": [k[1] for k in keys],
        "size": [k[2] for k in keys],
        "count": [c[k] for k in keys],
        "jobs": len(job_rows),
        "mean_size": round(sum(k[2] * c[k] for k in keys) / max(1, len(job_rows)), 4),
    }


def measure(files: list[Path]) -> dict:
    tb = Table(files)
    ru = Runs(tb)
    li = Lives(ru)
    window = float(tb.t.max())
    hours = window / 3600
    mh = CELL_MACHINES * hours  # machine-hours covered
    sub_rows = np.where(tb.ev == SUBMIT)[0]

    # --- jobs: first SUBMIT row of each job, tasks per job (distinct task indices ever SUBMITted)
    tasks_of: Counter = Counter()
    for j in set(zip(tb.job[sub_rows].tolist(), tb.idx[sub_rows].tolist())):
        tasks_of[j[0]] += 1
    o = sub_rows[np.lexsort((sub_rows, tb.ts[sub_rows], tb.job[sub_rows]))]
    first = np.r_[True, tb.job[o][1:] != tb.job[o][:-1]]
    job_first = o[first]
    t0_jobs = [int(r) for r in job_first if tb.ts[r] == 0]
    new_jobs = [int(r) for r in job_first if tb.ts[r] > 0]

    # --- the population at the window start (events at timestamp 0)
    t0 = ru.submit == 0
    run0 = t0 & (ru.sched == 0)
    pend0 = t0 & (ru.sched != 0)
    t0_submit = (tb.ts == 0) & (tb.ev == SUBMIT)
    sched0_keys = set(
        zip(
            tb.job[(tb.ts == 0) & (tb.ev == SCHEDULE)].tolist(),
            tb.idx[(tb.ts == 0) & (tb.ev == SCHEDULE)].tolist(),
        )
    )
    with_machine = int(((tb.mach >= 0) & t0_submit).sum())
    missing_jobs = len(set(tb.job[t0_submit & (tb.miss >= 0)].tolist()))
    initial = {
        "running_per_machine": round(float(run0.sum()) / CELL_MACHINES, 6),
        "pending_per_machine": round(float(pend0.sum()) / CELL_MACHINES, 6),
        "tasks": int(t0.sum()),
        "jobs": job_templates(tb, t0_jobs, tasks_of),
        # The SUBMIT row of a task already running at t=0 sometimes names its machine.
        "submit_names_machine": round(with_machine / max(1, len(sched0_keys)), 6),
        # Jobs whose t=0 SUBMIT rows have "missing info" = 2 and empty requests (SCHEDULE has them).
        "missing_info_job_frac": round(missing_jobs / max(1, len(t0_jobs)), 6),
        "bands": [],
    }
    # Pending at t=0 and ended while still pending (mostly KILL): when and how, all bands pooled.
    e_pend0 = pend0 & (ru.sched < 0) & (ru.end >= 0)
    initial["pending_end_s"] = quantiles(ru.end[e_pend0])
    initial["pending_end_kinds"] = mix(ru.kind[e_pend0])
    # Lives of the tasks running at t=0 (their first life): when and how they end, evictions aside.
    life0 = (li.submit == 0) & (li.sched == 0) & (li.prev_kind == -1)
    life_final = (li.end >= 0) & (li.kind != EVICT)
    for b in range(3):
        rb, pb = run0 & (ru.band == b), pend0 & (ru.band == b)
        lb = life0 & (li.band == b)
        ended = lb & life_final
        s_pend = pb & (ru.sched > 0)
        e_pend = pb & (ru.sched < 0) & (ru.end >= 0)
        initial["bands"].append(
            {
                "band": BANDS[b],
                "pending_frac": round(float(pb.sum()) / max(1, (rb | pb).sum()), 6),
                # Running at t=0: P(the life ends inside the real window), when, and how.
                "p_end_in_window": round(float(ended.sum()) / max(1, lb.sum()), 6),
                "end_s": quantiles(li.end[ended]),
                "end_kinds": mix(li.kind[ended]),
                # Pending at t=0: scheduled inside the window (when), or ended while pending.
                "p_pending_scheduled": round(float(s_pend.sum()) / max(1, pb.sum()), 6),
                "pending_sched_s": quantiles(
                    ru.sched[s_pend] if s_pend.any() else ru.sched[pend0 & (ru.sched > 0)]
                ),
                "p_pending_ended": round(float(e_pend.sum()) / max(1, pb.sum()), 6),
                "survival_mean_s": None,  # filled below
            }
        )

    # --- arrivals after t=0
    new_task = (ru.run_no == 0) & (ru.submit > 0)
    submits = int((ru.submit > 0).sum())
    hourly = np.bincount((ru.submit[ru.submit > 0] // 3600).astype(int), minlength=int(np.ceil(hours)))
    # Within a job, tasks are SUBMITted a few microseconds apart, in task-index order.
    first_sub = {}
    for r in np.where(new_task)[0]:
        first_sub.setdefault(int(ru.job[r]), []).append(int(tb.ts[ru.row[r]]))
    gaps = np.concatenate([np.diff(sorted(v)) for v in first_sub.values() if len(v) > 1] or [np.zeros(1)])
    arrivals = {
        "submits_per_machine_hour": round(submits / mh, 6),
        "new_tasks_per_machine_hour": round(float(new_task.sum()) / mh, 6),
        "new_jobs_per_machine_hour": round(len(new_jobs) / mh, 6),
        "resubmits_per_machine_hour": round(float(((ru.run_no > 0) & (ru.submit > 0)).sum()) / mh, 6),
        "hourly_submits_per_machine_hour": [round(float(x) / CELL_MACHINES, 4) for x in hourly],
        "jobs": job_templates(tb, new_jobs, tasks_of),
        "task_gap_us": quantiles(gaps, 0),
    }

    # --- runs by band: queueing and ends while pending, per run (runs SUBMITted in (0, FOLLOW_S])
    horizon = window - FOLLOW_S
    followed = (ru.submit > 0) & (ru.submit <= FOLLOW_S)
    scheduled = followed & (ru.sched >= 0) & (ru.sched - ru.submit <= horizon)
    ended_pending = followed & ~scheduled & (ru.end >= 0) & (ru.end - ru.submit <= horizon)
    never = followed & ~scheduled & ~ended_pending
    queue = ru.sched - ru.submit
    # Evictions: per band, EVICTs of running tasks per hour of running (the running time of every
    # run inside the window, t=0 tasks included).
    ran = np.where(ru.sched >= 0, np.where(ru.end >= 0, ru.end, window) - ru.sched, 0.0)
    running_s = np.bincount(ru.band, weights=ran, minlength=3)
    evicts = np.bincount(ru.band[(ru.kind == EVICT) & (ru.sched >= 0)], minlength=3)
    # --- lives by band: outcome and length (lives whose first SUBMIT is in (0, FOLLOW_S]).
    l_followed = (li.submit > 0) & (li.submit <= FOLLOW_S)
    l_sched = l_followed & (li.sched >= 0) & (li.sched - li.submit <= horizon)
    l_short = l_sched & (li.end >= 0) & (li.kind != EVICT) & (li.end - li.sched <= horizon)
    l_long = l_sched & ~l_short & ~((li.end >= 0) & (li.kind == EVICT))
    dur = li.end - li.sched
    pooled = {k: dur[l_short & (li.kind == k)] for k in END_KINDS}
    run_bands = []
    mean_duration: list[dict] = []  # per band, per kind: mean short life (s)
    for b in range(3):
        f = followed & (ru.band == b)
        sb, sh, lg = l_sched & (li.band == b), l_short & (li.band == b), l_long & (li.band == b)
        durations = {}
        mean_duration.append({})
        for k in END_KINDS:
            d = dur[sh & (li.kind == k)]
            if len(d) < MIN_SAMPLES:
                d = pooled[k]
            if len(d):
                durations[str(k)] = quantiles(d)
                mean_duration[b][str(k)] = float(d.mean())
        # A life's outcome given how the task's previous life ended ("first" = a new task):
        # crash loops (FAIL -> FAIL) and kill loops (KILL -> KILL) belong to a task.
        after = {}
        for prev in (-1, FAIL, FINISH, KILL, LOST):
            sp = sb & (li.prev_kind == prev)
            if sp.sum() >= MIN_SAMPLES:
                after["first" if prev < 0 else str(prev)] = {
                    "lives": int(sp.sum()),
                    "p_long": round(float((lg & sp).sum()) / float(sp.sum()), 6),
                    "kinds": mix(li.kind[sh & sp]) or mix(li.kind[sh]),
                }
        run_bands.append(
            {
                "band": BANDS[b],
                "runs": int(f.sum()),
                "p_ended_pending": round(float((ended_pending & (ru.band == b)).sum()) / max(1, f.sum()), 6),
                "p_never_scheduled": round(float((never & (ru.band == b)).sum()) / max(1, f.sum()), 6),
                "queue_s": quantiles(queue[scheduled & (ru.band == b)]),
                "evictions_per_hour": round(float(evicts[b]) / (running_s[b] / 3600), 6),
                "lives": int(sb.sum()),
                "p_long": round(float(lg.sum()) / max(1, sb.sum()), 6),
                "kinds": mix(li.kind[sh]),
                "after": after,
                "duration_s": durations,
                "long_mean_s": None,  # solved below
            }
        )
    pend_end = {
        "kinds": mix(ru.kind[ended_pending]),
        "after_s": quantiles(ru.end[ended_pending] - ru.submit[ended_pending]),
    }

    # --- resubmission after each end kind (ends at least an hour before the window end)
    resub = {"horizon_s": 3600, "p": []}
    delays = []
    for b in range(3):
        row = {}
        for k in END_KINDS:
            m = (ru.end >= 0) & (ru.end < window - 3600) & (ru.kind == k)
            mb = m & (ru.band == b)
            if mb.sum() < MIN_SAMPLES:
                mb = m
            if mb.sum():
                row[str(k)] = round(float((ru.next[mb] >= 0).sum()) / float(mb.sum()), 6)
        resub["p"].append(row)
    m = (ru.end >= 0) & (ru.next >= 0)
    delays = tb.ts[ru.row[ru.next[m]]] - tb.ts[ru.end_row[m]]
    resub["delay_us"] = quantiles(np.maximum(delays, 0), 0)

    # --- long lives: solve the mean extra length M_b of a long life so that each band's running
    # population stays at its measured level (the real cell's population is stationary). A task
    # is a chain of lives. A life whose task's previous life ended with kind s ("first" for a new
    # task) ends while pending with p_ended_pending, else is long with p_long[s] or short with
    # kinds[s]; after an end of kind k the task is SUBMITted again with p_resub[k] (evictions
    # inside a life do not change its running time). With v_s the expected number of lives per
    # task in state s (v = e_first (I - T)^-1), the running time per task is A + B (H + M_b), and
    # stationarity says: new tasks per hour x running time per task = running population.
    pop = running_s / window  # mean running tasks per band over the window, whole cell
    states = ["first"] + [str(k) for k in END_KINDS if k != EVICT]
    for b in range(3):
        rb = run_bands[b]
        # What long lives end with: the t=0 running tasks' lives that ended in the window.
        rb["long_kinds"] = initial["bands"][b]["end_kinds"]
        p_pend = rb["p_ended_pending"]
        outcomes = [
            (rb["after"][s]["p_long"], rb["after"][s]["kinds"])
            if s in rb["after"]
            else (rb["p_long"], rb["kinds"])
            for s in states
        ]
        T = np.zeros((len(states), len(states)))
        for i, (p_long, kinds) in enumerate(outcomes):
            ends: Counter = Counter()
            for k, pk in pend_end["kinds"].items():
                ends[k] += p_pend * pk
            for k, pk in kinds.items():
                ends[k] += (1 - p_pend) * (1 - p_long) * pk
            for k, pk in rb["long_kinds"].items():
                ends[k] += (1 - p_pend) * p_long * pk
            for k, pk in ends.items():
                if k in states:
                    T[i, states.index(k)] = pk * resub["p"][b].get(k, 0.0)
        v = np.linalg.solve((np.eye(len(states)) - T).T, np.eye(len(states))[0])
        a = sum(
            v[i] * (1 - p_pend) * (1 - pl) * sum(pk * mean_duration[b].get(k, 0.0) for k, pk in kinds.items())
            for i, (pl, kinds) in enumerate(outcomes)
        )
        bb = sum(v[i] * (1 - p_pend) * pl for i, (pl, _) in enumerate(outcomes))
        new_per_hour = float((new_task & (ru.band == b)).sum()) / hours  # whole cell
        needed = pop[b] / new_per_hour * 3600 if new_per_hour else 0.0  # running seconds per task
        m = (needed - a) / bb - horizon if bb > 0 else 0.0
        # Survival of the t=0 running tasks' lives between 4 h and the window end, for comparison.
        lb0 = life0 & (li.band == b)
        gone4 = life_final & (li.end <= FOLLOW_S)
        s4 = float((lb0 & ~gone4).sum()) / max(1, lb0.sum())
        s_end = float((lb0 & ~life_final).sum()) / max(1, lb0.sum())
        observed = (window - FOLLOW_S) / np.log(s4 / s_end) if 0 < s_end < s4 else float("inf")
        rb["running_per_machine"] = round(pop[b] / CELL_MACHINES, 6)
        rb["lives_per_task"] = round(float(v.sum()), 4)
        rb["long_mean_s"] = round(float(np.clip(m, horizon / 2, 60 * 86400)), 1)
        rb["long_mean_solved_s"] = round(float(m), 1)
        initial["bands"][b]["survival_mean_s"] = round(float(observed), 1)

    # --- updates: rare; UPDATE_RUNNING scales the requests a little
    n_sched_runs = int((ru.sched >= 0).sum())
    ratios_cpu, ratios_mem = [], []
    for r, p in ru.update_pairs:
        if p >= 0 and tb.cpu[p] > 0 and tb.mem[p] > 0 and not np.isnan(tb.cpu[r]):
            ratios_cpu.append(tb.cpu[r] / tb.cpu[p])
            ratios_mem.append(tb.mem[r] / tb.mem[p])
    updates = {
        "update_running_per_run": round(float((tb.ev == UPDATE_RUNNING).sum()) / max(1, n_sched_runs), 8),
        "update_pending_per_run": round(float((tb.ev == UPDATE_PENDING).sum()) / max(1, len(ru.row)), 8),
        "cpu_ratio": quantiles(np.array(ratios_cpu or [1.0])),
        "mem_ratio": quantiles(np.array(ratios_mem or [1.0])),
    }

    # --- requests: the job's (cpu, memory, disk) from its first SUBMIT, per band, weighted by the
    # job's tasks (so a job drawing from it gives the measured per-task marginal). Separately for
    # the jobs present at t=0 (long-running services, larger requests) and the new jobs.
    requests = {}
    diff_machine = []
    for name, jobs in (("initial", t0_jobs), ("new", new_jobs)):
        requests[name] = []
        for b in range(3):
            rows = [r for r in jobs if band_of(tb.pr[r]) == b and not np.isnan(tb.cpu[r])]
            c: Counter = Counter()
            for r in rows:
                c[(float(tb.cpu[r]), float(tb.mem[r]), float(tb.disk[r]))] += tasks_of[int(tb.job[r])]
            requests[name].append([[k[0], k[1], k[2], c[k]] for k in sorted(c)])
    for b in range(3):
        rows = [r for r in t0_jobs + new_jobs if band_of(tb.pr[r]) == b and not np.isnan(tb.cpu[r])]
        diff_machine.append(round(sum(tb.dm[r] == 1 for r in rows) / max(1, len(rows)), 6))
    users = Counter(int(tb.user[r]) for r in t0_jobs + new_jobs)

    priorities = {
        "initial_running_tasks": np.bincount(ru.pr[run0], minlength=12).tolist(),
        "submits_after_t0": np.bincount(ru.pr[ru.submit > 0], minlength=12).tolist(),
        "new_tasks": np.bincount(ru.pr[new_task], minlength=12).tolist(),
    }
    mach = np.unique(tb.mach[tb.mach >= 0])
    open_frac = [
        round(
            float(((ru.end < 0) & (ru.submit > 0) & (ru.band == b)).sum())
            / max(1, ((ru.submit > 0) & (ru.band == b)).sum()),
            6,
        )
        for b in range(3)
    ]
    outcome_all = {KIND_NAMES[k]: int((ru.kind[ru.submit > 0] == k).sum()) for k in END_KINDS}
    outcome_all["open_at_end"] = int(((ru.end < 0) & (ru.submit > 0)).sum())

    return {
        "window_s": round(window, 6),
        "cell_machines": CELL_MACHINES,
        "rows": int(len(tb.ts)),
        "horizon_s": round(horizon, 6),
        "initial": initial,
        "arrivals": arrivals,
        "runs": run_bands,
        "pending_end": pend_end,
        "resubmit": resub,
        "updates": updates,
        "requests": requests,
        "different_machines_frac": diff_machine,
        "users": sorted(users.values(), reverse=True),
        "machine_id": quantiles(mach.astype(np.float64), 0),
        "priorities": priorities,
        "outcomes_after_t0": outcome_all,
        "open_at_end_frac": open_frac,
        "format": {
            "requests": "%.4g",
            "request_fields_checked": tb.format_checked,
            "request_fields_not_4g": tb.format_mismatch,
            "request_fields_e_notation": tb.e_notation,
            "users_distinct": tb.n_users,
        },
    }


def summary(p: dict) -> str:
    a, i = p["arrivals"], p["initial"]
    lines = [
        f"rows {p['rows']:,}  window {p['window_s'] / 3600:.2f} h  horizon {p['horizon_s'] / 3600:.2f} h",
        f"t=0: running {i['running_per_machine']:.3f}/machine,"
        f" pending {i['pending_per_machine']:.3f}/machine, {i['jobs']['jobs']} jobs",
        f"SUBMITs {a['submits_per_machine_hour']:.3f}/machine-h"
        f" (new tasks {a['new_tasks_per_machine_hour']:.3f},"
        f" resubmits {a['resubmits_per_machine_hour']:.3f});"
        f" new jobs {a['new_jobs_per_machine_hour']:.4f}/machine-h, mean size {a['jobs']['mean_size']:.1f}",
    ]
    for rb in p["runs"]:
        med = {k: v["v"][PROBS.index(0.5)] for k, v in rb["duration_s"].items()}
        lines.append(
            f"{rb['band']:>10}: runs {rb['runs']:>6}  queue p50 {rb['queue_s']['v'][PROBS.index(0.5)]:.1f}s"
            f"  p_long {rb['p_long']:.4f}  lives/task {rb['lives_per_task']:.2f}"
            f"  evict/h {rb['evictions_per_hour']:.4f}  long mean {rb['long_mean_s'] / 3600:.1f} h"
            f" (solved {rb['long_mean_solved_s'] / 3600:.1f} h)  kinds {rb['kinds']}  median s {med}"
            f"  running {rb['running_per_machine']:.3f}/machine"
        )
    for ib in i["bands"]:
        lines.append(
            f"{ib['band']:>10} t=0: pending {ib['pending_frac']:.3f}  end in window "
            f"{ib['p_end_in_window']:.3f}  survival mean {ib['survival_mean_s'] / 3600:.1f} h"
        )
    lines.append(f"resubmit p {p['resubmit']['p']}")
    lines.append(f"outcomes after t=0 {p['outcomes_after_t0']}")
    lines.append(f"format: {p['format']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared", type=Path, default=Path("/work/shared/data"))
    ap.add_argument("--out", type=Path, default=Path("crates/trace/src/synth_params.json"))
    args = ap.parse_args(argv)
    d = args.shared / "google-clusterdata-2011-2" / "task_events"
    files = sorted(d.glob("part-0000[0-9]-of-00500.csv.gz"))
    if len(files) != 10:
        print(f"expected 10 parts in {d}, found {len(files)}", file=sys.stderr)
        return 2
    params = {
        "provenance": {
            "attribution": ATTRIBUTION,
            "source": "task_events parts 00000-00009 of 00500 (about the first 14 hours of the cell)",
            "files": [{"name": f.name, "sha256": sha256(f)} for f in files],
            "script": "scripts/calibrate_synth.py",
            "note": "Fitted distributions of the real parts; the generator samples them "
            "(docs/trace-synth.md).",
        },
        **measure(files),
    }
    args.out.write_text(json.dumps(params, separators=(",", ":")) + "\n")
    print(summary(params))
    print(f"wrote {args.out} ({args.out.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
