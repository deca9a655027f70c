//! `tokshuf._core`: the thin PyO3 layer over `tokshuf-core`.
//!
//! Inputs are converted while attached, long work runs detached through
//! [`long_call::run_detached`], and every core error becomes a Python exception in
//! [`errors`]. The public API lives in the `tokshuf` Python package.

mod arrays;
mod bpe;
mod buffer;
mod errors;
mod index_array;
mod indexed;
mod instances;
mod long_call;
mod nanoset;
mod open;
mod preprocess;
mod shuffle;
mod storage;
mod stream;
mod stream_source;
mod summary;
mod tokenizer;
mod tokens;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::IntoPyResult;

/// Rust allocations of the extension: large blocks straight from the OS, so that the RSS of a
/// long job does not creep up (`tokshuf_core::alloc`). Python keeps its own allocator.
#[global_allocator]
static ALLOCATOR: tokshuf_core::alloc::LargeFromOs = tokshuf_core::alloc::LargeFromOs;

/// The defaults of `command`'s options (`preprocess`, `shuffle`), by their public names. Their one
/// declaration is the core's config; the Python API, the command line and the tests read them here.
#[pyfunction]
fn defaults<'py>(py: Python<'py>, command: &str) -> PyResult<Bound<'py, PyDict>> {
    match command {
        "preprocess" => preprocess::defaults(py),
        "shuffle" => shuffle::defaults(py),
        other => Err(tokshuf_core::Error::invalid(format!(
            "no defaults for command {other:?} (expected one of: preprocess, shuffle)"
        )))
        .into_py(py),
    }
}

#[pymodule(gil_used = false)]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("build_profile", if cfg!(debug_assertions) { "debug" } else { "release" })?;
    m.add_function(wrap_pyfunction!(defaults, m)?)?;
    m.add_class::<buffer::PyMappedBuffer>()?;
    indexed::register(m)?;
    bpe::register(m)?;
    preprocess::register(m)?;
    tokens::register(m)?;
    instances::register(m)?;
    stream::register(m)?;
    tokenizer::register(m)?;
    nanoset::register(m)?;
    shuffle::register(m)?;
    storage::register(m)?;
    summary::register(m)?;
    Ok(())
}
