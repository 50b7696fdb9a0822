//! The hypervisor host simulator (crate `host`): its schedulers, presets and runs.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

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

    /// One run under `scheduler` (`run::RunResult`) as a dict: the run's fields and `vms`, a
    /// list of per-VM dicts (NaN where nothing was measured). The GIL is released while it runs.
    fn run<'py>(&self, py: Python<'py>, scheduler: &str, seed: u64) -> PyResult<Bound<'py, PyAny>> {
        let s = &self.scenario;
        let r = py
            .detach(|| colosched_host::run::run(s, scheduler, seed))
            .map_err(|e| PyValueError::new_err(format!("{}: {e}", self.label)))?;
        Ok(pythonize::pythonize(py, &r)?)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(host_schedulers, m)?)?;
    m.add_function(wrap_pyfunction!(host_presets, m)?)?;
    m.add_class::<HostScenario>()
}
