//! The hypervisor host simulator (crate `host`): its schedulers, presets and runs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Mutex};

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use rayon::prelude::*;

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
            None if path.exists() => colosched_host::sim::Scenario::load(path)
                .map_err(|e| PyValueError::new_err(e.to_string()))?,
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
        let in_file =
            |e: &dyn std::fmt::Display| PyValueError::new_err(format!("{}: {e}", self.label));
        for name in &schedulers {
            s.check_for(name).map_err(|e| in_file(&e))?;
            colosched_host::run::scheduler(name, s).map_err(|e| in_file(&e))?;
        }
        Ok(())
    }

    /// Runs under each (scheduler, seed) of `jobs`, one worker thread per core (a run depends
    /// only on its scheduler and seed, so the order they run in changes nothing), and returns one
    /// dict per job in `jobs`' order: the run's fields (`run::RunResult`) and `vms`, a list of
    /// per-VM dicts (NaN where nothing was measured). `progress(done, total)` is called on this
    /// thread as runs end; the GIL is released while it waits.
    #[pyo3(signature = (jobs, progress=None))]
    fn run_all<'py>(
        &self,
        py: Python<'py>,
        jobs: Vec<(String, u64)>,
        progress: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let s = &self.scenario;
        let stop = AtomicBool::new(false);
        let mut results: Vec<Option<_>> = jobs.iter().map(|_| None).collect();
        let (tx, rx) = mpsc::channel();
        std::thread::scope(|scope| {
            let (stop, jobs) = (&stop, &jobs);
            // rayon's pool runs the jobs, one worker per core; a send fails once the wait ended.
            scope.spawn(move || {
                jobs.par_iter()
                    .enumerate()
                    .for_each_with(tx, |tx, (i, (name, seed))| {
                        if !stop.load(Ordering::Relaxed) {
                            let _ = tx.send((i, colosched_host::run::run(s, name, *seed)));
                        }
                    })
            });
            // In a Mutex: Sync, so that the wait without the GIL can borrow it.
            let rx = Mutex::new(rx);
            // Ctrl-C or a callback that raises ends the wait and stops the workers.
            let mut wait = || -> PyResult<()> {
                for done in 1..=jobs.len() {
                    let Ok((i, r)) =
                        py.detach(|| rx.lock().expect("only this thread locks it").recv())
                    else {
                        break;
                    };
                    results[i] = Some(r);
                    py.check_signals()?;
                    if let Some(cb) = &progress {
                        cb.call1((done, jobs.len()))?;
                    }
                }
                Ok(())
            };
            let waited = wait();
            stop.store(waited.is_err(), Ordering::Relaxed);
            waited
        })?;
        let mut out = Vec::new();
        for r in results {
            let r = r.ok_or_else(|| PyRuntimeError::new_err("a host run did not finish"))?;
            let r = r.map_err(|e| PyValueError::new_err(format!("{}: {e}", self.label)))?;
            out.push(pythonize::pythonize(py, &r)?);
        }
        Ok(out)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(host_schedulers, m)?)?;
    m.add_function(wrap_pyfunction!(host_presets, m)?)?;
    m.add_class::<HostScenario>()
}
