//! The cluster simulator and the trace (crates `trace`, `cluster`): loading, replaying, synthesis.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use colosched_cluster::{select, simulate, Config, Outcome, Param, Profile};
use colosched_core::{Cell, Limits, Move, Planner, Policy, Rng};
use colosched_trace::usage::{TaskUsage, UsageModel, UsageSource};
use colosched_trace::{IngestOptions, Runs, TraceError, TraceRoot};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyList};
use rayon::prelude::*;

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

/// The parameters `sim cluster` sets by flag (`params::flags`), in `--help`'s order, each as
/// (key, flag, kind, choices, help); kind is int, positive_int, float, bool, choice, int_choice
/// or text, and choices a list for the two choice kinds, else None.
#[pyfunction]
fn sim_flags<'py>(py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
    use colosched_cluster::params::Kind;
    let out = PyList::empty(py);
    for f in colosched_cluster::params::flags() {
        let (kind, choices) = match f.kind {
            Kind::Int => ("int", None),
            Kind::PositiveInt => ("positive_int", None),
            Kind::Float => ("float", None),
            Kind::Bool => ("bool", None),
            Kind::Text => ("text", None),
            Kind::Choice(names) => ("choice", Some(names.into_pyobject(py)?.into_any())),
            Kind::IntChoice(values) => ("int_choice", Some(values.into_pyobject(py)?.into_any())),
        };
        out.append((f.key, f.flag, kind, choices, f.help))?;
    }
    Ok(out)
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
/// `threads` worker threads (0: one per core), which also share a lone job's heavy steps; Python
/// callables run one after another holding the GIL as needed.
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
) -> PyResult<Vec<Bound<'py, PyAny>>> {
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
    let workers = if threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        threads
    };
    // Built-in policies in a pool of that many threads, where a replay also splits its heavy
    // steps (a new usage window): one job alone uses every thread, `threads=1` (a sweep's worker)
    // one. This thread reports progress and watches Ctrl-C meanwhile.
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(workers)
        .build()
        .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    let stop = AtomicBool::new(false);
    let mut interrupted = None;
    std::thread::scope(|scope| {
        let jobs = scope.spawn(|| {
            pool.install(|| {
                builtin
                    .par_iter()
                    .with_max_len(1)
                    .for_each(|&(idx, mut policy, seed)| {
                        let cfg = Config {
                            seed,
                            ..base.clone()
                        };
                        let mut counter = step_counter(&done, &stop);
                        let r = simulate(&selection, &usage, &cfg, &mut policy, &mut counter);
                        slots.lock().unwrap()[idx] = Some(r.map_err(|e| e.to_string()));
                    })
            })
        });
        while !jobs.is_finished() {
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
            Some(Ok(o)) => out.push(pythonize::pythonize(py, &o)?),
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

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Trace>()?;
    m.add_function(wrap_pyfunction!(load_trace, m)?)?;
    m.add_function(wrap_pyfunction!(clear_cache, m)?)?;
    m.add_function(wrap_pyfunction!(policies, m)?)?;
    m.add_function(wrap_pyfunction!(check_policy, m)?)?;
    m.add_function(wrap_pyfunction!(profiles, m)?)?;
    m.add_function(wrap_pyfunction!(sim_flags, m)?)?;
    m.add_function(wrap_pyfunction!(resolve_params, m)?)?;
    m.add_function(wrap_pyfunction!(simulate_jobs, m)?)?;
    m.add_function(wrap_pyfunction!(peak_cpu_request, m)?)?;
    m.add_function(wrap_pyfunction!(synth_trace, m)?)?;
    m.add("TraceInputError", m.py().get_type::<TraceInputError>())?;
    Ok(())
}
