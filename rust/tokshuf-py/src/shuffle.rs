//! Binding of `tokshuf shuffle`.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use tokshuf_core::preprocess::ErrorPolicy;
use tokshuf_core::progress::ProgressStyle;
use tokshuf_core::read::{expand_inputs, INPUT_EXTENSIONS};
use tokshuf_core::shuffle::{
    resolve_special, shuffle as run_shuffle, MemberFormat, ShuffleConfig, SpecialIds, Step, DEFAULT_GZIP_LEVEL,
    DEFAULT_SPECIAL_TOKENS,
};
use tokshuf_core::Error;

use crate::errors::IntoPyResult;
use crate::long_call::run_detached;
use crate::tokenizer::PyTokenizer;

fn extensions(ext: Option<Vec<String>>, shuffle_only: bool) -> Vec<String> {
    match ext {
        Some(list) if !list.is_empty() => {
            list.into_iter().map(|e| if e.starts_with('.') { e } else { format!(".{e}") }).collect()
        }
        _ if shuffle_only => vec![".tar".into()],
        _ => INPUT_EXTENSIONS.iter().map(|e| e.to_string()).collect(),
    }
}

/// The defaults of `shuffle`'s options, by their public names: the core's config is their one
/// declaration, read by the Python API and the command line through `_core.defaults("shuffle")`.
pub(crate) fn defaults(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let cfg = ShuffleConfig::new(Vec::new(), PathBuf::new(), PathBuf::new(), SpecialIds { bos: None, eot: 0, pad: 0 });
    let d = PyDict::new(py);
    d.set_item("context_length", cfg.seqlen)?;
    d.set_item("wds_chunk_size", cfg.wds_chunk_size)?;
    d.set_item("num_local_cells", cfg.num_local_cells)?;
    d.set_item("seed", cfg.seed)?;
    d.set_item("shuffle_only", cfg.shuffle_only)?;
    d.set_item("special_tokens", DEFAULT_SPECIAL_TOKENS)?;
    d.set_item("content_key", cfg.content_key)?;
    d.set_item("on_error", cfg.on_error.name())?;
    d.set_item("member_format", cfg.member_format.extension())?;
    d.set_item("gzip_level", DEFAULT_GZIP_LEVEL)?;
    d.set_item("all_pad_context", cfg.all_pad_context)?;
    d.set_item("buffer_bytes", cfg.buffer_bytes)?;
    d.set_item("batch_bytes", cfg.batch_bytes)?;
    d.set_item("max_line_bytes", cfg.max_line_bytes)?;
    Ok(d)
}

/// Tokenize, cut into contexts, shuffle through local cells and write webdataset shards; returns
/// the run summary (a dict). Rerunning the same call after an interruption resumes it. Every
/// option is given: their defaults are [`defaults`]'.
#[pyfunction]
#[pyo3(signature = (
    inputs, local_cell_dir, output, tokenizer, *, context_length, wds_chunk_size, num_local_cells,
    seed, num_threads, ext, shuffle_only, special_tokens, eos_token_id, pad_token_id, bos_token_id,
    content_key, on_error, member_format, gzip_level, all_pad_context, buffer_bytes, batch_bytes,
    max_line_bytes, progress, stage, task, summary_path,
))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn shuffle<'py>(
    py: Python<'py>,
    inputs: Vec<String>,
    local_cell_dir: PathBuf,
    output: PathBuf,
    tokenizer: Option<&PyTokenizer>,
    context_length: usize,
    wds_chunk_size: u64,
    num_local_cells: u32,
    seed: u64,
    num_threads: Option<usize>,
    ext: Option<Vec<String>>,
    shuffle_only: bool,
    special_tokens: &str,
    eos_token_id: Option<u32>,
    pad_token_id: Option<u32>,
    bos_token_id: Option<u32>,
    content_key: &str,
    on_error: &str,
    member_format: &str,
    gzip_level: u8,
    all_pad_context: bool,
    buffer_bytes: usize,
    batch_bytes: usize,
    max_line_bytes: usize,
    progress: &str,
    stage: Option<String>,
    task: Option<String>,
    summary_path: Option<PathBuf>,
) -> PyResult<Bound<'py, PyAny>> {
    let on_error: ErrorPolicy = on_error.parse().into_py(py)?;
    let progress: ProgressStyle = progress.parse().into_py(py)?;
    let special_tokens = special_tokens.to_string();
    let member_format = member_format.to_string();
    let content_key = content_key.to_string();
    // Loaded once (by the caller) and shared by every worker.
    let tokenizer = if shuffle_only { None } else { tokenizer.map(PyTokenizer::shared) };
    let summary = run_detached(py, move |cancel| {
        let exts = extensions(ext, shuffle_only);
        let ext_refs: Vec<&str> = exts.iter().map(String::as_str).collect();
        let inputs = expand_inputs(&inputs, &ext_refs)?;
        let (special, warnings) = match (&tokenizer, shuffle_only) {
            (_, true) => (SpecialIds { bos: None, eot: 0, pad: 0 }, Vec::new()),
            (Some(tok), false) => {
                resolve_special(&special_tokens, tok.as_ref(), bos_token_id, eos_token_id, pad_token_id)?
            }
            (None, false) => return Err(Error::invalid("a tokenizer is required (e.g. byte)")),
        };
        let max_id = tokenizer.as_ref().map_or(0, |t| t.vocab_size().saturating_sub(1).min(u64::from(u32::MAX)) as u32);
        let max_id = [Some(max_id), special.bos, Some(special.eot), Some(special.pad)].into_iter().flatten().max();
        let mut cfg = ShuffleConfig::new(inputs.files, local_cell_dir, output, special);
        cfg.scan = inputs.scan;
        cfg.seqlen = context_length;
        cfg.wds_chunk_size = wds_chunk_size;
        cfg.num_local_cells = num_local_cells;
        cfg.seed = seed;
        cfg.threads = num_threads.filter(|&t| t > 0).unwrap_or_else(tokshuf_core::parallel::default_threads);
        cfg.content_key = content_key;
        cfg.on_error = on_error;
        cfg.member_format = MemberFormat::parse(&member_format, gzip_level, max_id.unwrap_or(0))?;
        cfg.shuffle_only = shuffle_only;
        cfg.all_pad_context = all_pad_context;
        cfg.buffer_bytes = buffer_bytes;
        cfg.batch_bytes = batch_bytes;
        cfg.max_line_bytes = max_line_bytes;
        cfg.progress = progress;
        cfg.summary = summary_path;
        run_shuffle(&cfg, tokenizer, Step::parse(stage.as_deref(), task.as_deref())?, warnings, cancel)
    })?;
    crate::summary::to_python(py, &summary)
}
