//! The node agent (crate `agent`): its command line.

use pyo3::prelude::*;

/// `colosched agent …`: the node agent's command line, run in this process (the GIL released).
/// Returns its exit code.
#[pyfunction]
fn agent_main(py: Python<'_>, argv: Vec<String>) -> i32 {
    py.detach(|| colosched_agent::cli::main(argv))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(agent_main, m)?)
}
