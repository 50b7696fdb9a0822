//! PyO3 bindings: the only place Rust meets Python. Thin on purpose: they convert arguments,
//! run the Rust engines off the GIL, and hand back plain lists, dicts and Arrow tables. One
//! module per crate bound.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use serde::{Deserialize, Serialize};
use serde_arrow::schema::{SchemaLike, TracingOptions};

mod agent;
mod cluster;
mod host;
mod memwatch;
mod vms;

/// `rows` as one Arrow IPC stream (polars: `pl.read_ipc_stream`). The columns and their types
/// come from `T` itself, so a table without rows still has them; unit enums become strings.
pub(crate) fn arrow_ipc<T: Serialize + for<'de> Deserialize<'de>>(rows: &[T]) -> PyResult<Vec<u8>> {
    let err = |e: &dyn std::fmt::Display| PyRuntimeError::new_err(e.to_string());
    let opts = TracingOptions::default().enums_without_data_as_strings(true);
    let fields = Vec::<arrow_schema::FieldRef>::from_type::<T>(opts).map_err(|e| err(&e))?;
    let batch = serde_arrow::to_record_batch(&fields, &rows).map_err(|e| err(&e))?;
    let mut out = Vec::new();
    let mut w =
        arrow_ipc::writer::StreamWriter::try_new(&mut out, &batch.schema()).map_err(|e| err(&e))?;
    w.write(&batch).map_err(|e| err(&e))?;
    w.finish().map_err(|e| err(&e))?;
    drop(w);
    Ok(out)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    cluster::register(m)?;
    agent::register(m)?;
    memwatch::register(m)?;
    vms::register(m)?;
    host::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
