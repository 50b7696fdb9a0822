//! SSD-cache-aware VM placement (crate `vms`): the planner, the simulator, the executor's
//! command line.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::arrow_ipc;

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
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let params = PlanParams {
        per_host,
        per_cluster,
        min_gain,
        ..PlanParams::default()
    };
    Ok(colosched_vms::state::plan_json(&c, &plan(&c, &params)).to_string())
}

/// `plan vms`'s settings that its command line exposes, at their one default
/// (`PlanParams::default()`).
#[pyfunction]
fn plan_vms_defaults() -> (usize, usize, f64) {
    let d = colosched_vms::decide::plan::PlanParams::default();
    (d.per_host, d.per_cluster, d.min_gain)
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
                .map_err(|e| PyValueError::new_err(e.to_string()))?,
        })
    }

    #[getter]
    fn name(&self) -> &str {
        &self.scenario.name
    }

    /// One run under `policy` (`sim::RunResult`): a dict of its tables, each an Arrow IPC
    /// stream whose columns are the Rust fields (`vms`, `jobs`, `apps`, `migrations`,
    /// `windows`, `spread`). The GIL is released while it runs.
    fn run(
        &self,
        py: Python<'_>,
        policy: &str,
        seed: u64,
    ) -> PyResult<Vec<(&'static str, Vec<u8>)>> {
        let r = py
            .detach(|| colosched_vms::sim::run(&self.scenario, policy, seed))
            .map_err(PyValueError::new_err)?;
        Ok(vec![
            ("vms", arrow_ipc(&r.vms)?),
            ("jobs", arrow_ipc(&r.jobs)?),
            ("apps", arrow_ipc(&r.apps)?),
            ("migrations", arrow_ipc(&r.migrations)?),
            ("windows", arrow_ipc(&r.windows)?),
            ("spread", arrow_ipc(&r.spread)?),
        ])
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(migrate_main, m)?)?;
    m.add_function(wrap_pyfunction!(plan_vms, m)?)?;
    m.add_function(wrap_pyfunction!(plan_vms_defaults, m)?)?;
    m.add_function(wrap_pyfunction!(vms_policies, m)?)?;
    m.add_function(wrap_pyfunction!(vms_presets, m)?)?;
    m.add_class::<VmsScenario>()
}
