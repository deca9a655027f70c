//! Binding of the preprocessing pipeline.

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::prelude::*;
use tokshuf_core::preprocess::{preprocess as run_preprocess, ErrorPolicy, PreprocessConfig};
use tokshuf_core::read::{expand_inputs, JSONL_EXTENSIONS};
use tokshuf_core::tokenize::{self, Tokenizer};
use tokshuf_core::{DType, Error};

use crate::errors::IntoPyResult;
use crate::long_call::run_detached;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(preprocess, m)?)?;
    m.add_function(wrap_pyfunction!(expand_input_paths, m)?)?;
    Ok(())
}

/// The files `inputs` (files, directories, globs) expand to, in processing order.
#[pyfunction]
fn expand_input_paths(py: Python<'_>, inputs: Vec<String>) -> PyResult<Vec<PathBuf>> {
    expand_inputs(&inputs, JSONL_EXTENSIONS).into_py(py)
}

fn load_tokenizer(spec: &str) -> Result<Arc<dyn Tokenizer>, Error> {
    tokenize::from_spec(spec)
}

/// Tokenize JSON lines into `{output_prefix}_{key}_document.bin/.idx`; returns the run summary as JSON.
#[pyfunction]
#[pyo3(signature = (
    inputs, output_prefix, tokenizer, json_keys, *, append_eod=false, dtype=None, workers=1,
    on_error="fail", partitions=1, batch_bytes=1048576, max_line_bytes=1073741824,
))]
#[allow(clippy::too_many_arguments)]
fn preprocess(
    py: Python<'_>,
    inputs: Vec<String>,
    output_prefix: PathBuf,
    tokenizer: &str,
    json_keys: Vec<String>,
    append_eod: bool,
    dtype: Option<&str>,
    workers: usize,
    on_error: &str,
    partitions: usize,
    batch_bytes: usize,
    max_line_bytes: usize,
) -> PyResult<String> {
    let dtype = dtype.filter(|d| *d != "auto").map(str::parse::<DType>).transpose().into_py(py)?;
    let on_error: ErrorPolicy = on_error.parse().into_py(py)?;
    let tokenizer_spec = tokenizer.to_string();
    run_detached(py, move |cancel| {
        let tokenizer = load_tokenizer(&tokenizer_spec)?;
        let files = expand_inputs(&inputs, JSONL_EXTENSIONS)?;
        let mut cfg = PreprocessConfig::new(files, output_prefix, json_keys);
        cfg.append_eod = append_eod;
        cfg.dtype = dtype;
        cfg.workers = workers;
        cfg.on_error = on_error;
        cfg.partitions = partitions;
        cfg.batch_bytes = batch_bytes;
        cfg.max_line_bytes = max_line_bytes;
        let summary = run_preprocess(&cfg, tokenizer, cancel)?;
        serde_json::to_string(&summary).map_err(|e| Error::invalid(e.to_string()))
    })
}
