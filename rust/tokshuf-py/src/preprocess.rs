//! Binding of the preprocessing pipeline.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use tokshuf_core::preprocess::{preprocess as run_preprocess, ErrorPolicy, PreprocessConfig, DEFAULT_JSON_KEYS};
use tokshuf_core::progress::ProgressStyle;
use tokshuf_core::read::{expand_inputs, INPUT_EXTENSIONS};
use tokshuf_core::DType;

use crate::errors::IntoPyResult;
use crate::long_call::run_detached;
use crate::tokenizer::PyTokenizer;

/// `(index, count)` of a task given as `i/N` (0-based `i`) or `auto` (this Slurm array task).
#[pyfunction]
pub(crate) fn parse_task(py: Python<'_>, text: &str) -> PyResult<(usize, usize)> {
    text.parse::<tokshuf_core::tasks::Task>().map(|t| (t.index, t.count)).into_py(py)
}

/// The files `inputs` (files, directories, globs) expand to, in processing order. Without the
/// GIL: listing a store is network requests (and the store may be served by this process).
#[pyfunction]
pub(crate) fn expand_input_paths(py: Python<'_>, inputs: Vec<String>) -> PyResult<Vec<PathBuf>> {
    run_detached(py, move |_| expand_inputs(&inputs, INPUT_EXTENSIONS).map(|i| i.files))
}

/// The defaults of `preprocess`'s options, by their public names: the core's config is their one
/// declaration, read by the Python API and the command line through `_core.defaults("preprocess")`.
pub(crate) fn defaults(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let cfg = PreprocessConfig::new(Vec::new(), PathBuf::new(), Vec::new());
    let d = PyDict::new(py);
    d.set_item("json_keys", DEFAULT_JSON_KEYS)?;
    d.set_item("append_eod", cfg.append_eod)?;
    d.set_item("dtype", cfg.dtype.map(|t| t.name()))?;
    d.set_item("on_error", cfg.on_error.name())?;
    d.set_item("partitions", cfg.partitions)?;
    d.set_item("sentence_lists", cfg.sentence_lists)?;
    d.set_item("batch_bytes", cfg.batch_bytes)?;
    d.set_item("max_line_bytes", cfg.max_line_bytes)?;
    Ok(d)
}

/// Where the summary goes: `True` beside the outputs, `False` nowhere, or a path.
#[derive(FromPyObject)]
pub(crate) enum SummaryTarget {
    Beside(bool),
    At(PathBuf),
}

/// Tokenize JSON lines into `{output_prefix}_{key}_document.bin/.idx`; returns the run summary
/// (a dict). Every option is given: their defaults are [`defaults`]'.
#[pyfunction]
#[pyo3(signature = (
    inputs, output_prefix, tokenizer, json_keys, *, append_eod, dtype, num_threads, on_error,
    partitions, batch_bytes, max_line_bytes, sentence_lists, progress, summary, shard,
))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn preprocess<'py>(
    py: Python<'py>,
    inputs: Vec<String>,
    output_prefix: PathBuf,
    tokenizer: &PyTokenizer,
    json_keys: Vec<String>,
    append_eod: bool,
    dtype: Option<&str>,
    num_threads: Option<usize>,
    on_error: &str,
    partitions: usize,
    batch_bytes: usize,
    max_line_bytes: usize,
    sentence_lists: bool,
    progress: &str,
    summary: SummaryTarget,
    shard: Option<String>,
) -> PyResult<Bound<'py, PyAny>> {
    let dtype = dtype.filter(|d| *d != "auto").map(str::parse::<DType>).transpose().into_py(py)?;
    let on_error: ErrorPolicy = on_error.parse().into_py(py)?;
    let progress: ProgressStyle = progress.parse().into_py(py)?;
    let tokenizer = tokenizer.shared();
    let summary = run_detached(py, move |cancel| {
        let inputs = expand_inputs(&inputs, INPUT_EXTENSIONS)?;
        let mut cfg = PreprocessConfig::new(inputs.files, output_prefix, json_keys);
        cfg.scan = inputs.scan;
        cfg.append_eod = append_eod;
        cfg.dtype = dtype;
        cfg.workers = num_threads.unwrap_or_else(tokshuf_core::parallel::default_threads);
        cfg.on_error = on_error;
        cfg.partitions = partitions;
        cfg.batch_bytes = batch_bytes;
        cfg.max_line_bytes = max_line_bytes;
        cfg.sentence_lists = sentence_lists;
        cfg.progress = progress;
        match summary {
            SummaryTarget::Beside(true) => {}
            SummaryTarget::Beside(false) => cfg.summary_path = None,
            SummaryTarget::At(path) => cfg.summary_path = Some(path),
        }
        if let Some(task) = shard {
            cfg = cfg.for_task(task.parse()?)?;
        }
        run_preprocess(&cfg, tokenizer, cancel)
    })?;
    crate::summary::to_python(py, &summary)
}
