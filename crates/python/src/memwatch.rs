//! Memory-threshold notification (crate `memwatch`): its command line and the watcher.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use colosched_memwatch::{
    BackendChoice, MemoryThresholdWatcher, StopHandle, Threshold, WatchOptions,
};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// `colosched memwatch …`: the memory-threshold watcher's command line, run in this process.
#[pyfunction]
fn memwatch_main(py: Python<'_>, argv: Vec<String>) -> i32 {
    py.detach(|| colosched_memwatch::cli::main(&argv))
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
    #[pyo3(signature = (cgroup, thresholds, memsw=false, backend="auto", period=None, high=None, psi=None, debounce=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        cgroup: PathBuf,
        thresholds: Vec<String>,
        memsw: bool,
        backend: &str,
        period: Option<f64>,
        high: Option<String>,
        psi: Option<String>,
        debounce: Option<f64>,
    ) -> PyResult<Self> {
        let parse = |what: &str, s: &str| {
            Threshold::parse(s).map_err(|e| PyValueError::new_err(format!("{what} {e}")))
        };
        let poll_period = match period {
            None => WatchOptions::default().poll_period,
            Some(p) if (0.001..=60.0).contains(&p) => Duration::from_secs_f64(p),
            Some(p) => {
                return Err(PyValueError::new_err(format!(
                    "period {p} is not seconds from 0.001 to 60"
                )))
            }
        };
        let opts = WatchOptions {
            thresholds: thresholds
                .iter()
                .map(|t| parse("threshold", t))
                .collect::<PyResult<_>>()?,
            memsw,
            backend: BackendChoice::parse(backend)
                .map_err(|e| PyValueError::new_err(format!("backend: {e}")))?,
            poll_period,
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
            // Every error of `open` is the caller's to fix.
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
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
        let events = events.map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
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

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(memwatch_main, m)?)?;
    m.add_class::<MemWatch>()
}
