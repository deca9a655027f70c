//! Binding of `tokshuf shuffle`.

use std::path::PathBuf;

use pyo3::prelude::*;
use tokshuf_core::preprocess::ErrorPolicy;
use tokshuf_core::progress::ProgressStyle;
use tokshuf_core::read::{expand_inputs, INPUT_EXTENSIONS};
use tokshuf_core::shuffle::{
    resolve_special, run_step, shuffle as run_shuffle, MemberFormat, ShuffleConfig, SpecialIds, Step,
};
use tokshuf_core::{tokenize, Error};

use crate::errors::IntoPyResult;
use crate::long_call::run_detached;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(shuffle, m)?)?;
    Ok(())
}

fn extensions(ext: Option<Vec<String>>, shuffle_only: bool) -> Vec<String> {
    match ext {
        Some(list) if !list.is_empty() => {
            list.into_iter().map(|e| if e.starts_with('.') { e } else { format!(".{e}") }).collect()
        }
        _ if shuffle_only => vec![".tar".into()],
        _ => INPUT_EXTENSIONS.iter().map(|e| e.to_string()).collect(),
    }
}

/// Tokenize, cut into contexts, shuffle through local cells and write webdataset shards; returns
/// the run summary as JSON. Rerunning the same call after an interruption resumes it.
#[pyfunction]
#[pyo3(signature = (
    inputs, local_cell_dir, output, tokenizer=None, *, seqlen=2049, wds_chunk_size=8192,
    num_local_cells=512, seed=1234, threads=None, ext=None, shuffle_only=false,
    special_tokens="native", eot_id=None, pad_id=None, bos_id=None, content_key="text",
    on_error="fail", member_format="json.gz", gzip_level=1, all_pad_context=false,
    buffer_bytes=33554432, batch_bytes=1048576, max_line_bytes=1073741824, progress="none",
    tokenizer_special_tokens=None, stage=None, task=None, summary_path=None,
))]
#[allow(clippy::too_many_arguments)]
fn shuffle(
    py: Python<'_>,
    inputs: Vec<String>,
    local_cell_dir: PathBuf,
    output: PathBuf,
    tokenizer: Option<String>,
    seqlen: usize,
    wds_chunk_size: u64,
    num_local_cells: u32,
    seed: u64,
    threads: Option<usize>,
    ext: Option<Vec<String>>,
    shuffle_only: bool,
    special_tokens: &str,
    eot_id: Option<u32>,
    pad_id: Option<u32>,
    bos_id: Option<u32>,
    content_key: &str,
    on_error: &str,
    member_format: &str,
    gzip_level: u8,
    all_pad_context: bool,
    buffer_bytes: usize,
    batch_bytes: usize,
    max_line_bytes: usize,
    progress: &str,
    tokenizer_special_tokens: Option<Vec<(String, u32)>>,
    stage: Option<String>,
    task: Option<String>,
    summary_path: Option<PathBuf>,
) -> PyResult<String> {
    let on_error: ErrorPolicy = on_error.parse().into_py(py)?;
    let progress: ProgressStyle = progress.parse().into_py(py)?;
    let special_tokens = special_tokens.to_string();
    let member_format = member_format.to_string();
    let content_key = content_key.to_string();
    run_detached(py, move |cancel| {
        let exts = extensions(ext, shuffle_only);
        let ext_refs: Vec<&str> = exts.iter().map(String::as_str).collect();
        let inputs = expand_inputs(&inputs, &ext_refs)?;
        // Loaded once and shared by every worker.
        let (tok, special, warnings) = if shuffle_only {
            (None, SpecialIds { bos: None, eot: 0, pad: 0 }, Vec::new())
        } else {
            let spec = tokenizer.as_deref().ok_or_else(|| Error::invalid("a tokenizer is required (e.g. byte)"))?;
            let tok = tokenize::from_spec_with_specials(spec, tokenizer_special_tokens)?;
            let (special, warnings) = resolve_special(&special_tokens, tok.as_ref(), bos_id, eot_id, pad_id)?;
            (Some(tok), special, warnings)
        };
        let max_id = tok.as_ref().map_or(0, |t| t.vocab_size().saturating_sub(1).min(u64::from(u32::MAX)) as u32);
        let max_id = [Some(max_id), special.bos, Some(special.eot), Some(special.pad)].into_iter().flatten().max();
        let mut cfg = ShuffleConfig::new(inputs.files, local_cell_dir, output, special);
        cfg.scan = inputs.scan;
        cfg.seqlen = seqlen;
        cfg.wds_chunk_size = wds_chunk_size;
        cfg.num_local_cells = num_local_cells;
        cfg.seed = seed;
        cfg.threads = threads.filter(|&t| t > 0).unwrap_or_else(tokshuf_core::parallel::default_threads);
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
        let summary = match stage {
            Some(stage) => run_step(&cfg, tok, Step::parse(&stage, task.as_deref())?, warnings, cancel)?,
            None if task.is_some() => return Err(Error::invalid("a task needs its stage (cells, shards or manifest)")),
            None => run_shuffle(&cfg, tok, warnings, cancel)?,
        };
        // A summary lists its inputs: no URL's password or signature in it.
        let json = serde_json::to_string(&summary).map_err(|e| Error::invalid(e.to_string()))?;
        Ok(tokshuf_core::storage::redact(&json).into_owned())
    })
}
