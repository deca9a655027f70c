//! `tokshuf._core`: the thin PyO3 layer over `tokshuf-core`.
//!
//! Inputs are converted while attached, long work runs detached through
//! [`long_call::run_detached`], and every core error becomes a Python exception in
//! [`errors`]. The public API lives in the `tokshuf` Python package.

mod buffer;
mod errors;
mod indexed;
mod long_call;
mod preprocess;
mod stream;
mod stream_source;
mod tokenizer;

use pyo3::prelude::*;

#[pymodule(gil_used = false)]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("build_profile", if cfg!(debug_assertions) { "debug" } else { "release" })?;
    m.add_class::<buffer::PyMappedBuffer>()?;
    indexed::register(m)?;
    preprocess::register(m)?;
    stream::register(m)?;
    tokenizer::register(m)?;
    Ok(())
}
