//! PyO3 bindings: the only place Rust meets Python. Thin on purpose: it converts arguments,
//! runs the Rust engine off the GIL, and hands back plain lists and dicts.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use colosched_cluster::{select, simulate, Config, Outcome, Param, Profile};
use colosched_core::{Cell, Limits, Move, Planner, Policy, Rng};
use colosched_memwatch::{
    BackendChoice, MemoryThresholdWatcher, StopHandle, Threshold, WatchOptions,
};
use colosched_trace::usage::{TaskUsage, UsageModel, UsageSource};
use colosched_trace::{IngestOptions, Runs, TraceError, TraceRoot};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyList};

pyo3::create_exception!(
    _native,
    TraceInputError,
    PyValueError,
    "Bad trace input (names file, line, column)."
);

fn trace_err(e: TraceError) -> PyErr {
    TraceInputError::new_err(e.to_string())
}

/// A loaded trace: its runs, real usage rows if the root has them, and what ingest did.
#[pyclass(frozen)]
struct Trace {
    runs: Runs,
    real_usage: Option<Arc<TaskUsage>>,
    #[pyo3(get)]
    root: String,
}

#[pymethods]
impl Trace {
    /// Ingest statistics (rows, runs, parts, cache hits, ...).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = &self.runs.stats;
        let d = PyDict::new(py);
        d.set_item("parts", s.parts)?;
        d.set_item("rows", s.rows)?;
        d.set_item("runs", s.runs)?;
        d.set_item("parts_from_cache", s.parts_from_cache)?;
        d.set_item("never_scheduled", s.never_scheduled)?;
        d.set_item("open_at_end", s.open_at_end)?;
        d.set_item("orphan_events", s.orphan_events)?;
        d.set_item("parse_seconds", s.parse_seconds)?;
        d.set_item("trace_end_s", self.runs.trace_end)?;
        d.set_item("trace_machines", self.runs.machine_ids.len())?;
        d.set_item(
            "usage_rows",
            self.real_usage.as_ref().map_or(0, |u| u.len()),
        )?;
        Ok(d)
    }
}

#[pyfunction]
#[pyo3(signature = (root, parts=None, use_cache=true, cache_dir=None))]
fn load_trace(
    py: Python<'_>,
    root: PathBuf,
    parts: Option<String>,
    use_cache: bool,
    cache_dir: Option<PathBuf>,
) -> PyResult<Trace> {
    py.detach(|| {
        let trace_root = TraceRoot::open(&root)?;
        let parts = parts.map(|p| trace_root.parse_parts(&p)).transpose()?;
        let opts = IngestOptions {
            parts: parts.clone(),
            use_cache,
            cache_dir,
        };
        let runs = colosched_trace::load_runs(&trace_root, &opts)?;
        let real_usage = TaskUsage::load(&root, parts.as_deref())?;
        Ok(Trace {
            runs,
            real_usage: real_usage.map(Arc::new),
            root: root.display().to_string(),
        })
    })
    .map_err(trace_err)
}

#[pyfunction]
#[pyo3(signature = (cache_dir=None))]
fn clear_cache(cache_dir: Option<PathBuf>) -> PyResult<u64> {
    colosched_trace::clear_cache(cache_dir.as_deref()).map_err(trace_err)
}

/// Names of the built-in policies, in the thesis's order, then `random`.
#[pyfunction]
fn policies() -> Vec<String> {
    colosched_core::policy::THESIS_POLICIES
        .iter()
        .map(|s| s.to_string())
        .chain(["random".into()])
        .collect()
}

/// Checks a built-in policy name (`random:<cycles>` included); ValueError names a bad one.
#[pyfunction]
fn check_policy(name: &str) -> PyResult<()> {
    Policy::parse(name).map(drop).map_err(PyValueError::new_err)
}

/// A Python value as a simulator parameter (bool before int: Python's bool is an int).
fn param(value: &Bound<'_, PyAny>) -> PyResult<Param> {
    if value.is_none() {
        Ok(Param::None)
    } else if let Ok(b) = value.cast::<PyBool>() {
        Ok(Param::Bool(b.is_true()))
    } else if let Ok(i) = value.extract::<i64>() {
        Ok(Param::Int(i))
    } else if let Ok(x) = value.extract::<f64>() {
        Ok(Param::Float(x))
    } else if let Ok(t) = value.extract::<String>() {
        Ok(Param::Text(t))
    } else {
        Err(PyValueError::new_err(format!(
            "parameter value {value} is not a number, text, bool or None"
        )))
    }
}

/// The configuration of `profile` with `params` applied; errors name the key.
fn config_from(profile: &str, params: &Bound<'_, PyDict>) -> PyResult<Config> {
    let profile = Profile::parse(profile).map_err(PyValueError::new_err)?;
    let mut pairs = Vec::new();
    for (key, value) in params.iter() {
        pairs.push((key.extract::<String>()?, param(&value)?));
    }
    Config::resolve(profile, pairs.iter().map(|(k, v)| (k.as_str(), v.clone())))
        .map_err(PyValueError::new_err)
}

/// Every parameter of `profile` with `params` applied, resolved (what a run will use).
#[pyfunction]
#[pyo3(signature = (profile, params))]
fn resolve_params<'py>(
    py: Python<'py>,
    profile: &str,
    params: &Bound<'py, PyDict>,
) -> PyResult<Bound<'py, PyDict>> {
    let c = config_from(profile, params)?;
    let d = PyDict::new(py);
    for (key, value) in c.params() {
        match value {
            Param::Int(i) => d.set_item(key, i)?,
            Param::Float(x) => d.set_item(key, x)?,
            Param::Text(t) => d.set_item(key, t)?,
            Param::Bool(b) => d.set_item(key, b)?,
            Param::None => d.set_item(key, py.None())?,
        }
    }
    Ok(d)
}

/// Names of the profiles, the default first.
#[pyfunction]
fn profiles() -> Vec<&'static str> {
    colosched_cluster::params::PROFILES.to_vec()
}

/// A policy written in Python: `fn(cell, cycle) -> [(task_id, from_node, to_node), ...]` where
/// `cell` is a list of nodes `{"load": float, "tasks": [{"id", "index", "priority",
/// "cpu_request", "cpu_usage", "max_cpu", "mem_usage", "mai"}, ...]}`.
struct PyPlanner {
    func: Py<PyAny>,
    name: String,
    error: Option<PyErr>,
}

impl PyPlanner {
    fn call(&self, py: Python<'_>, cell: &Cell, cycle: u64) -> PyResult<Vec<Move>> {
        let nodes = PyList::empty(py);
        for node in &cell.nodes {
            let tasks = PyList::empty(py);
            for t in &node.tasks {
                let d = PyDict::new(py);
                d.set_item("id", t.id)?;
                d.set_item("index", t.index)?;
                d.set_item("priority", t.priority)?;
                d.set_item("cpu_request", t.cpu_request)?;
                d.set_item("cpu_usage", t.cpu_usage)?;
                d.set_item("max_cpu", t.max_cpu)?;
                d.set_item("mem_usage", t.mem_usage)?;
                d.set_item("mai", t.mai)?;
                tasks.append(d)?;
            }
            let d = PyDict::new(py);
            d.set_item("load", node.load)?;
            d.set_item("tasks", tasks)?;
            nodes.append(d)?;
        }
        let result = self.func.call1(py, (nodes, cycle))?;
        let mut moves = Vec::new();
        for item in result.bind(py).try_iter()? {
            let (task, from, to): (u64, usize, usize) = item?.extract()?;
            moves.push(Move {
                task,
                from,
                to,
                rank: 0,
            });
        }
        Ok(moves)
    }
}

impl Planner for PyPlanner {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn plan(&mut self, cell: &Cell, _limits: &Limits, _rng: &mut Rng, cycle: u64) -> Vec<Move> {
        match Python::attach(|py| self.call(py, cell, cycle)) {
            Ok(moves) => moves,
            Err(e) => {
                self.error = Some(e);
                // An impossible move stops the replay at once; the Python error is raised instead.
                vec![Move {
                    task: 0,
                    from: usize::MAX,
                    to: 0,
                    rank: 0,
                }]
            }
        }
    }
}

fn outcome_dict<'py>(py: Python<'py>, o: &Outcome) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let s = &o.summary;
    d.set_item("summary", pythonize_summary(py, s)?)?;
    let ts = PyDict::new(py);
    let r = &o.series;
    ts.set_item("cycle", &r.cycle)?;
    ts.set_item("time_s", &r.time_s)?;
    ts.set_item("mean_cpu", &r.mean_cpu)?;
    ts.set_item("gini", &r.gini)?;
    ts.set_item("overcommit", &r.overcommit)?;
    ts.set_item("net_mbit", &r.net_mbit)?;
    ts.set_item("moves", &r.moves)?;
    ts.set_item("move_to_first", &r.move_to_first)?;
    ts.set_item("move_to_second", &r.move_to_second)?;
    d.set_item("series", ts)?;
    Ok(d)
}

fn pythonize_summary<'py>(
    py: Python<'py>,
    s: &colosched_cluster::Summary,
) -> PyResult<Bound<'py, PyDict>> {
    let json = serde_json::to_value(s).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    let d = PyDict::new(py);
    if let serde_json::Value::Object(map) = json {
        for (k, v) in map {
            match v {
                serde_json::Value::String(x) => d.set_item(k, x)?,
                serde_json::Value::Number(n) if n.is_u64() => d.set_item(k, n.as_u64())?,
                serde_json::Value::Number(n) => d.set_item(k, n.as_f64())?,
                other => d.set_item(k, other.to_string())?,
            }
        }
    }
    Ok(d)
}

/// Progress for one replay: adds its newly done steps to `done`; false once `stop` is set.
fn step_counter<'a>(
    done: &'a AtomicU64,
    stop: &'a AtomicBool,
) -> impl FnMut(u64, u64) -> bool + 'a {
    let mut last = 0;
    move |d, _total| {
        done.fetch_add(d - last, Ordering::Relaxed);
        last = d;
        !stop.load(Ordering::Relaxed)
    }
}

/// The most CPU the runs a replay of `trace` under `profile` and `params` would place request
/// at once, in machines (`--machines auto` sizes the cluster by it).
#[pyfunction]
#[pyo3(signature = (trace, profile, params, usage_seed=0))]
fn peak_cpu_request(
    py: Python<'_>,
    trace: &Trace,
    profile: &str,
    params: &Bound<'_, PyDict>,
    usage_seed: u64,
) -> PyResult<f64> {
    let cfg = config_from(profile, params)?;
    let usage = UsageSource {
        real: trace.real_usage.clone(),
        model: UsageModel::calibrated(usage_seed),
    };
    Ok(py.detach(|| select(&trace.runs, &usage, &cfg).peak_cpu_request()))
}

/// Runs every (policy, seed) job over `trace` with `params`. Built-in policies (names) run on
/// `threads` worker threads; Python callables run one after another holding the GIL as needed.
/// `progress(done_steps, total_steps)` is called from this thread about ten times a second.
/// Returns one dict per job: `{"summary": {...}, "series": {column: [...]}}`, in job order.
#[pyfunction]
#[pyo3(signature = (trace, policies, seeds, profile, params, usage_seed=0, threads=0, progress=None))]
#[allow(clippy::too_many_arguments)]
fn simulate_jobs<'py>(
    py: Python<'py>,
    trace: &Trace,
    policies: Vec<Bound<'py, PyAny>>,
    seeds: Vec<u64>,
    profile: &str,
    params: &Bound<'py, PyDict>,
    usage_seed: u64,
    threads: usize,
    progress: Option<Bound<'py, PyAny>>,
) -> PyResult<Vec<Bound<'py, PyDict>>> {
    let base = config_from(profile, params)?;
    let usage = UsageSource {
        real: trace.real_usage.clone(),
        model: UsageModel::calibrated(usage_seed),
    };
    // Which runs are replayed depends on the trace and the configuration, not on the policy or
    // the seed: chosen once for every job.
    let selection = py.detach(|| select(&trace.runs, &usage, &base));
    // Jobs: (index, policy, seed); built-in ones are parsed now so a bad name fails before work.
    let mut builtin = Vec::new();
    let mut custom = Vec::new();
    for (pi, p) in policies.iter().enumerate() {
        for (si, &seed) in seeds.iter().enumerate() {
            let idx = pi * seeds.len() + si;
            if let Ok(name) = p.extract::<String>() {
                let policy = Policy::parse(&name).map_err(PyValueError::new_err)?;
                builtin.push((idx, policy, seed));
            } else if p.is_callable() {
                let name = p
                    .getattr("__name__")
                    .and_then(|n| n.extract::<String>())
                    .unwrap_or_else(|_| "custom".into());
                custom.push((idx, p.clone().unbind(), name, seed));
            } else {
                return Err(PyValueError::new_err(format!(
                    "policy #{pi} is neither a name nor a callable"
                )));
            }
        }
    }
    let jobs = builtin.len() + custom.len();
    let steps_each = selection.steps(&base);
    let total = steps_each * jobs as u64;
    let done = AtomicU64::new(0);
    let report = |py: Python<'_>| -> PyResult<()> {
        py.check_signals()?;
        if let Some(cb) = &progress {
            cb.call1((done.load(Ordering::Relaxed), total))?;
        }
        Ok(())
    };
    let slots: Mutex<Vec<Option<Result<Outcome, String>>>> =
        Mutex::new((0..jobs).map(|_| None).collect());
    // Built-in policies on worker threads; this thread reports progress and watches Ctrl-C.
    let next = AtomicUsize::new(0);
    let workers = if threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        threads
    };
    let finished = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let mut interrupted = None;
    std::thread::scope(|scope| {
        for _ in 0..workers.min(builtin.len()) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&(idx, mut policy, seed)) = builtin.get(i) else {
                    break;
                };
                let cfg = Config {
                    seed,
                    ..base.clone()
                };
                let r = simulate(
                    &selection,
                    &usage,
                    &cfg,
                    &mut policy,
                    &mut step_counter(&done, &stop),
                );
                slots.lock().unwrap()[idx] = Some(r.map_err(|e| e.to_string()));
                finished.fetch_add(1, Ordering::Relaxed);
            });
        }
        while finished.load(Ordering::Relaxed) < builtin.len() {
            py.detach(|| std::thread::sleep(Duration::from_millis(100)));
            if let Err(e) = report(py) {
                stop.store(true, Ordering::Relaxed);
                interrupted.get_or_insert(e);
            }
        }
    });
    if let Some(e) = interrupted {
        return Err(e);
    }
    let mut results = slots
        .into_inner()
        .expect("no worker panicked while holding the lock");

    for (idx, func, name, seed) in custom {
        let cfg = Config {
            seed,
            ..base.clone()
        };
        let mut planner = PyPlanner {
            func,
            name,
            error: None,
        };
        let r = simulate(
            &selection,
            &usage,
            &cfg,
            &mut planner,
            &mut step_counter(&done, &stop),
        );
        if let Some(e) = planner.error.take() {
            return Err(e);
        }
        results[idx] = Some(r.map_err(|e| e.to_string()));
        report(py)?;
    }
    report(py)?;
    let mut out = Vec::new();
    for r in results {
        match r {
            Some(Ok(o)) => out.push(outcome_dict(py, &o)?),
            Some(Err(msg)) => return Err(PyValueError::new_err(msg)),
            None => return Err(PyRuntimeError::new_err("a simulation job did not finish")),
        }
    }
    Ok(out)
}

/// Writes a synthetic trace in the official layout (see docs/trace-synth.md).
#[pyfunction]
#[pyo3(signature = (out, machines, days, seed=1, parts=None, progress=None))]
fn synth_trace<'py>(
    py: Python<'py>,
    out: PathBuf,
    machines: u32,
    days: f64,
    seed: u64,
    parts: Option<u32>,
    progress: Option<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    use colosched_trace::synth::{write_trace, SynthOptions};
    let opts = SynthOptions {
        machines,
        days,
        parts,
        seed,
    };
    let done = (AtomicU64::new(0), AtomicU64::new(0));
    let stats = std::thread::scope(|scope| {
        let worker = scope.spawn(|| {
            let r = write_trace(&out, &opts, &|d, t| {
                done.0.store(u64::from(d), Ordering::Relaxed);
                done.1.store(u64::from(t), Ordering::Relaxed);
            });
            done.1.store(u64::MAX, Ordering::Relaxed);
            r
        });
        while done.1.load(Ordering::Relaxed) != u64::MAX {
            py.detach(|| std::thread::sleep(Duration::from_millis(200)));
            if let Some(cb) = &progress {
                cb.call1((
                    done.0.load(Ordering::Relaxed),
                    done.1.load(Ordering::Relaxed),
                ))?;
            }
        }
        worker
            .join()
            .map_err(|_| PyRuntimeError::new_err("synth worker panicked"))?
            .map_err(trace_err)
    })?;
    let d = PyDict::new(py);
    d.set_item("parts", stats.parts)?;
    d.set_item("rows", stats.rows)?;
    d.set_item("tasks", stats.tasks)?;
    d.set_item("bytes", stats.bytes)?;
    Ok(d)
}

/// `colosched agent …`: the node agent's command line, run in this process (the GIL released).
/// Returns its exit code.
#[pyfunction]
fn agent_main(py: Python<'_>, argv: Vec<String>) -> i32 {
    py.detach(|| colosched_agent::cli::main(argv))
}

/// `colosched memwatch …`: the memory-threshold watcher's command line, run in this process.
#[pyfunction]
fn memwatch_main(py: Python<'_>, argv: Vec<String>) -> i32 {
    py.detach(|| colosched_memwatch::cli::main(&argv))
}

/// `colosched migrate …`: the live-migration executor's command line, run in this process.
#[pyfunction]
fn migrate_main(py: Python<'_>, argv: Vec<String>) -> i32 {
    py.detach(|| colosched_vms::cli::main(argv))
}

/// `colosched plan vms`: a cluster state file read and planned (spec 003); returns the plan as
/// JSON. A file that cannot be read or does not check raises ValueError naming the file and
/// the field.
#[pyfunction]
fn plan_vms(path: &str, per_host: usize, per_cluster: usize, min_gain: f64) -> PyResult<String> {
    use colosched_vms::decide::plan::{plan, PlanParams};
    let c = colosched_vms::state::load(std::path::Path::new(path))
        .map_err(pyo3::exceptions::PyValueError::new_err)?;
    let params = PlanParams {
        per_host,
        per_cluster,
        min_gain,
        ..PlanParams::default()
    };
    Ok(colosched_vms::state::plan_json(&c, &plan(&c, &params)).to_string())
}

/// The VM-level simulator's policies and bundled scenarios (spec 003), by name.
#[pyfunction]
fn vms_policies() -> Vec<&'static str> {
    colosched_vms::sim::POLICIES.to_vec()
}

#[pyfunction]
fn vms_presets() -> Vec<&'static str> {
    colosched_vms::sim::PRESETS
        .iter()
        .map(|(n, _)| *n)
        .collect()
}

/// A VM-level scenario, read and checked once: a bundled preset's name, or a TOML file. Bad
/// input raises ValueError naming the file and key.
#[pyclass(frozen)]
struct VmsScenario {
    scenario: colosched_vms::sim::Scenario,
}

#[pymethods]
impl VmsScenario {
    #[new]
    fn new(scenario: &str) -> PyResult<VmsScenario> {
        Ok(VmsScenario {
            scenario: colosched_vms::sim::Scenario::load(scenario)
                .map_err(PyValueError::new_err)?,
        })
    }

    #[getter]
    fn name(&self) -> &str {
        &self.scenario.name
    }

    /// One run under `policy`, as JSON (`sim::RunResult`); the GIL is released while it runs.
    fn run(&self, py: Python<'_>, policy: &str, seed: u64) -> PyResult<String> {
        let r = py
            .detach(|| colosched_vms::sim::run(&self.scenario, policy, seed))
            .map_err(PyValueError::new_err)?;
        serde_json::to_string(&r).map_err(|e| PyRuntimeError::new_err(e.to_string()))
    }
}

/// One `MemoryThresholdWatcher`; `wait` blocks with the GIL released, `stop` wakes it from any
/// thread. The Python layer (`colosched.memwatch`) adds the generator and the callback thread.
#[pyclass(frozen)]
struct MemWatch {
    inner: Mutex<Option<MemoryThresholdWatcher>>,
    /// Its own lock, never held for long, so `stop` works while `wait` holds `inner`.
    stop: Mutex<Option<StopHandle>>,
    #[pyo3(get)]
    backend: String,
    #[pyo3(get)]
    describe: String,
    #[pyo3(get)]
    limit: Option<u64>,
    #[pyo3(get)]
    thresholds: Vec<(String, u64)>,
}

#[pymethods]
impl MemWatch {
    #[new]
    #[pyo3(signature = (cgroup, thresholds, memsw=false, backend="auto", period=0.1, high=None, psi=None, debounce=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        cgroup: PathBuf,
        thresholds: Vec<String>,
        memsw: bool,
        backend: &str,
        period: f64,
        high: Option<String>,
        psi: Option<String>,
        debounce: Option<f64>,
    ) -> PyResult<Self> {
        let parse = |what: &str, s: &str| {
            Threshold::parse(s).map_err(|e| PyValueError::new_err(format!("{what} {e}")))
        };
        if !(0.001..=60.0).contains(&period) {
            return Err(PyValueError::new_err(format!(
                "period {period} is not seconds from 0.001 to 60"
            )));
        }
        let opts = WatchOptions {
            thresholds: thresholds
                .iter()
                .map(|t| parse("threshold", t))
                .collect::<PyResult<_>>()?,
            memsw,
            backend: BackendChoice::parse(backend)
                .map_err(|e| PyValueError::new_err(format!("backend: {e}")))?,
            poll_period: Duration::from_secs_f64(period),
            high: high.map(|h| parse("high", &h)).transpose()?,
            psi,
            debounce: debounce
                .map(|d| {
                    if d.is_finite() && d > 0.0 && d <= 3600.0 {
                        Ok(Duration::from_secs_f64(d))
                    } else {
                        Err(PyValueError::new_err(format!(
                            "debounce {d} is not seconds above 0 and at most 3600"
                        )))
                    }
                })
                .transpose()?,
        };
        let w = py
            .detach(|| MemoryThresholdWatcher::open(&cgroup, &opts))
            .map_err(|e| {
                if e.bad_input {
                    PyValueError::new_err(e.msg)
                } else {
                    PyRuntimeError::new_err(e.msg)
                }
            })?;
        Ok(MemWatch {
            stop: Mutex::new(Some(w.stop_handle())),
            backend: w.backend().name().to_string(),
            describe: w.describe().to_string(),
            limit: w.limit(),
            thresholds: w.thresholds(),
            inner: Mutex::new(Some(w)),
        })
    }

    /// Events within `timeout` seconds (None: until one arrives or `stop`); [] on a timeout.
    #[pyo3(signature = (timeout=None))]
    fn wait<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<f64>,
    ) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let timeout = timeout.map(|t| Duration::from_secs_f64(t.max(0.0)));
        let events = py.detach(|| {
            let mut guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            match guard.as_mut() {
                Some(w) => w.wait(timeout),
                None => Ok(Vec::new()),
            }
        });
        let events = events.map_err(PyRuntimeError::new_err)?;
        events
            .iter()
            .map(|e| {
                let d = PyDict::new(py);
                d.set_item("time", e.time)?;
                d.set_item("cgroup", e.cgroup.display().to_string())?;
                d.set_item("threshold", &e.threshold)?;
                d.set_item("threshold_bytes", e.threshold_bytes)?;
                d.set_item("direction", e.direction.name())?;
                d.set_item("usage", e.usage)?;
                d.set_item("limit", e.limit)?;
                d.set_item("count", e.count)?;
                d.set_item("backend", e.backend.name())?;
                d.set_item("monotonic_ns", e.monotonic_ns)?;
                Ok(d)
            })
            .collect()
    }

    /// True once the cgroup is gone or the watcher stopped or closed.
    #[getter]
    fn finished(&self) -> bool {
        match self.inner.try_lock() {
            Ok(g) => g.as_ref().is_none_or(|w| w.finished()),
            Err(_) => false, // a wait is running
        }
    }

    /// Ends a blocked `wait` (from any thread); the watcher then unregisters everything.
    fn stop(&self) {
        if let Some(s) = self.stop.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            s.stop();
        }
    }

    /// Stops and unregisters now: every fd closed, memory.high put back.
    fn close(&self, py: Python<'_>) {
        self.stop();
        py.detach(|| {
            let mut guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            guard.take();
        });
        // Last, so a `wait` racing with this close still had a way to be woken.
        self.stop.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}

/// The host simulator's schedulers and bundled scenarios, by name.
#[pyfunction]
fn host_schedulers() -> Vec<&'static str> {
    colosched_host::run::SCHEDULERS.to_vec()
}

#[pyfunction]
fn host_presets() -> Vec<&'static str> {
    colosched_host::run::PRESETS
        .iter()
        .map(|(n, _)| *n)
        .collect()
}

/// A host scenario, read and checked once: a bundled preset's name, or a TOML file. Bad input
/// raises ValueError naming the file and key.
#[pyclass(frozen)]
struct HostScenario {
    label: String,
    scenario: colosched_host::sim::Scenario,
}

#[pymethods]
impl HostScenario {
    #[new]
    fn new(scenario: &str) -> PyResult<HostScenario> {
        let path = std::path::Path::new(scenario);
        let parsed = match colosched_host::run::preset(scenario) {
            Some(s) => s,
            None if path.exists() => {
                colosched_host::sim::Scenario::load(path).map_err(PyValueError::new_err)?
            }
            None => {
                return Err(PyValueError::new_err(format!(
                    "scenario {scenario:?}: neither a file nor a preset (presets: {})",
                    host_presets().join(", ")
                )))
            }
        };
        Ok(HostScenario {
            label: scenario.to_string(),
            scenario: parsed,
        })
    }

    #[getter]
    fn name(&self) -> &str {
        &self.scenario.name
    }

    /// ValueError if one of `schedulers` is unknown or cannot run this scenario.
    fn check(&self, schedulers: Vec<String>) -> PyResult<()> {
        let s = &self.scenario;
        let in_file = |e| PyValueError::new_err(format!("{}: {e}", self.label));
        for name in &schedulers {
            s.check_for(name).map_err(in_file)?;
            colosched_host::run::scheduler(name, &s.host, &s.vms).map_err(in_file)?;
        }
        Ok(())
    }

    /// One run under `scheduler`, as JSON: the run's fields and `vms`, a list of per-VM
    /// objects. The GIL is released while it runs.
    fn run(&self, py: Python<'_>, scheduler: &str, seed: u64) -> PyResult<String> {
        let s = &self.scenario;
        let r = py
            .detach(|| colosched_host::run::run(s, scheduler, seed))
            .map_err(|e| PyValueError::new_err(format!("{}: {e}", self.label)))?;
        let vms: Vec<serde_json::Value> = (r.vms.iter())
            .map(|v| {
                // NaN (nothing completed, not a network VM) has no JSON form: null, None in Python.
                let num = |x: f64| {
                    if x.is_finite() {
                        x.into()
                    } else {
                        serde_json::Value::Null
                    }
                };
                serde_json::json!({
                    "vm": v.vm, "vcpus": v.vcpus, "workload": v.workload,
                    "completions": v.completions, "mean_completion_ms": num(v.mean_completion_ms),
                    "run_ms": v.run_ms, "spin_ms": v.spin_ms, "work_ms": v.work_ms,
                    "migrations": v.migrations,
                    "throughput_mbit_s": num(v.throughput_mbit_s), "ring_drops": v.ring_drops,
                    "link_drops": v.link_drops, "pings_answered": v.pings_answered,
                    "pings_sent": v.pings_sent, "ping_mean_ms": num(v.ping_mean_ms),
                    "ping_p50_ms": num(v.ping_p50_ms), "ping_p99_ms": num(v.ping_p99_ms),
                    "ping_rtts_ms": v.ping_rtts_ms,
                })
            })
            .collect();
        let out = serde_json::json!({
            "scenario": r.scenario, "scheduler": r.scheduler, "seed": r.seed,
            "end_ms": r.end_ms, "events": r.events, "vms": vms,
        });
        Ok(out.to_string())
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Trace>()?;
    m.add_function(wrap_pyfunction!(load_trace, m)?)?;
    m.add_function(wrap_pyfunction!(clear_cache, m)?)?;
    m.add_function(wrap_pyfunction!(policies, m)?)?;
    m.add_function(wrap_pyfunction!(check_policy, m)?)?;
    m.add_function(wrap_pyfunction!(profiles, m)?)?;
    m.add_function(wrap_pyfunction!(resolve_params, m)?)?;
    m.add_function(wrap_pyfunction!(simulate_jobs, m)?)?;
    m.add_function(wrap_pyfunction!(peak_cpu_request, m)?)?;
    m.add_function(wrap_pyfunction!(synth_trace, m)?)?;
    m.add_function(wrap_pyfunction!(agent_main, m)?)?;
    m.add_function(wrap_pyfunction!(memwatch_main, m)?)?;
    m.add_function(wrap_pyfunction!(migrate_main, m)?)?;
    m.add_function(wrap_pyfunction!(plan_vms, m)?)?;
    m.add_function(wrap_pyfunction!(host_schedulers, m)?)?;
    m.add_function(wrap_pyfunction!(host_presets, m)?)?;
    m.add_class::<HostScenario>()?;
    m.add_function(wrap_pyfunction!(vms_policies, m)?)?;
    m.add_function(wrap_pyfunction!(vms_presets, m)?)?;
    m.add_class::<VmsScenario>()?;
    m.add_class::<MemWatch>()?;
    m.add("TraceInputError", m.py().get_type::<TraceInputError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
