//! Binding of the preprocessing pipeline.

use std::path::PathBuf;

use pyo3::prelude::*;
use tokshuf_core::preprocess::{preprocess as run_preprocess, ErrorPolicy, PreprocessConfig};
use tokshuf_core::progress::ProgressStyle;
use tokshuf_core::read::{expand_inputs, INPUT_EXTENSIONS};
use tokshuf_core::{DType, Error};

use crate::errors::IntoPyResult;
use crate::long_call::run_detached;
use crate::tokenizer::PyTokenizer;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(preprocess, m)?)?;
    m.add_function(wrap_pyfunction!(expand_input_paths, m)?)?;
    m.add_function(wrap_pyfunction!(parse_task, m)?)?;
    Ok(())
}

/// `(index, count)` of a task given as `i/N` (0-based `i`) or `auto` (this Slurm array task).
#[pyfunction]
fn parse_task(py: Python<'_>, text: &str) -> PyResult<(usize, usize)> {
    text.parse::<tokshuf_core::tasks::Task>().map(|t| (t.index, t.count)).into_py(py)
}

/// The files `inputs` (files, directories, globs) expand to, in processing order. Without the
/// GIL: listing a store is network requests (and the store may be served by this process).
#[pyfunction]
fn expand_input_paths(py: Python<'_>, inputs: Vec<String>) -> PyResult<Vec<PathBuf>> {
    run_detached(py, move |_| expand_inputs(&inputs, INPUT_EXTENSIONS).map(|i| i.files))
}

/// Tokenize JSON lines into `{output_prefix}_{key}_document.bin/.idx`; returns the run summary as JSON.
#[pyfunction]
#[pyo3(signature = (
    inputs, output_prefix, tokenizer, json_keys, *, append_eod=false, dtype=None, workers=None,
    on_error="fail", partitions=1, batch_bytes=1048576, max_line_bytes=1073741824, sentence_lists=true,
    progress="none", write_summary=true, summary_path=None, shard=None,
))]
#[allow(clippy::too_many_arguments)]
fn preprocess(
    py: Python<'_>,
    inputs: Vec<String>,
    output_prefix: PathBuf,
    tokenizer: &PyTokenizer,
    json_keys: Vec<String>,
    append_eod: bool,
    dtype: Option<&str>,
    workers: Option<usize>,
    on_error: &str,
    partitions: usize,
    batch_bytes: usize,
    max_line_bytes: usize,
    sentence_lists: bool,
    progress: &str,
    write_summary: bool,
    summary_path: Option<PathBuf>,
    shard: Option<String>,
) -> PyResult<String> {
    let dtype = dtype.filter(|d| *d != "auto").map(str::parse::<DType>).transpose().into_py(py)?;
    let on_error: ErrorPolicy = on_error.parse().into_py(py)?;
    let progress: ProgressStyle = progress.parse().into_py(py)?;
    let tokenizer = tokenizer.shared();
    run_detached(py, move |cancel| {
        let inputs = expand_inputs(&inputs, INPUT_EXTENSIONS)?;
        let mut cfg = PreprocessConfig::new(inputs.files, output_prefix, json_keys);
        cfg.scan = inputs.scan;
        cfg.append_eod = append_eod;
        cfg.dtype = dtype;
        cfg.workers = workers.unwrap_or_else(tokshuf_core::parallel::default_threads);
        cfg.on_error = on_error;
        cfg.partitions = partitions;
        cfg.batch_bytes = batch_bytes;
        cfg.max_line_bytes = max_line_bytes;
        cfg.sentence_lists = sentence_lists;
        cfg.progress = progress;
        if !write_summary {
            cfg.summary_path = None;
        } else if summary_path.is_some() {
            cfg.summary_path = summary_path;
        }
        if let Some(task) = shard {
            cfg = cfg.for_task(task.parse()?)?;
        }
        let summary = run_preprocess(&cfg, tokenizer, cancel)?;
        // A summary lists its inputs: no URL's password or signature in it.
        let json = serde_json::to_string(&summary).map_err(|e| Error::invalid(e.to_string()))?;
        Ok(tokshuf_core::storage::redact(&json).into_owned())
    })
}
