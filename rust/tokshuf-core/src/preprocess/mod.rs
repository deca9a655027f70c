//! `tokshuf preprocess`: JSON lines → tokens → Megatron `.bin/.idx`, one output per key.
//!
//! A reader thread decompresses and splits lines into batches, a pool of workers tokenizes
//! them, and this thread writes results strictly in input order (file order, then line order),
//! so the output is byte-identical for any number of workers. Batches in flight are bounded,
//! so memory does not grow with the input.

mod config;
mod document;
mod pipeline;
mod summary;

use std::sync::Arc;

pub use config::{output_prefix_for, part_prefix, summary_path_for, PreprocessConfig, DEFAULT_JSON_KEYS};
pub use document::{
    encode_batch, encode_batch_parsed, parse_batch, DocumentRules, EncodedBatch, KeyTokens, ParsedLines,
};
pub use summary::{OutputSummary, Summary};

pub use crate::ingest::ErrorPolicy;

use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::fsutil::{with_suffix, RecordSpec};
use crate::tokenize::Tokenizer;

/// Run the pipeline. Outputs appear only when complete; on error or cancellation none are left.
pub fn preprocess(cfg: &PreprocessConfig, tokenizer: Arc<dyn Tokenizer>, cancel: &Cancel) -> Result<Summary> {
    cfg.check()?;
    if cfg.append_eod && tokenizer.eod_id().is_none() {
        return Err(Error::invalid(
            "--append-eod needs an end-of-document id, but the tokenizer has none: give one with --eod-id",
        ));
    }
    if let Some(dtype) = cfg.dtype {
        let largest = tokenizer.vocab_size().saturating_sub(1);
        if largest > dtype.max_token() {
            return Err(Error::invalid(format!(
                "dtype {} cannot hold the tokenizer's ids (up to {largest}); use auto, int32 or a wider type",
                dtype.name()
            )));
        }
    }
    crate::fsutil::check_outputs_are_not_inputs(&cfg.output_paths(), cfg.listing())?;
    let inputs = crate::fsutil::record::listing_identity(cfg.listing())?;
    let record = RecordSpec {
        path: crate::fsutil::record::record_path(&cfg.output_prefix),
        command: "preprocess".into(),
        run: cfg
            .task
            .map_or(serde_json::Value::Null, |t| serde_json::json!({"task": {"index": t.index, "count": t.count}})),
        inputs,
    };
    match crate::storage::remote(&cfg.output_prefix)? {
        None => {
            if let Some(dir) = cfg.output_prefix.parent() {
                crate::fsutil::record::recover_dir(dir)?;
            }
            pipeline::run(cfg, tokenizer, record, cancel)
        }
        Some(_) => remote_outputs(cfg, tokenizer, record, cancel),
    }
}

/// Outputs in an object store. The run writes into a local staging directory (under
/// `TOKSHUF_STAGING_DIR`, else the system's temporary directory), then every `.bin` is uploaded,
/// then every `.idx`, then the summary: an index, which is what a reader opens, appears only
/// beside its complete data, and the summary only once the whole dataset is there.
fn remote_outputs(
    cfg: &PreprocessConfig,
    tokenizer: Arc<dyn Tokenizer>,
    record: RecordSpec,
    cancel: &Cancel,
) -> Result<Summary> {
    use crate::fsutil::record::{staging_dir, Checksum, RemoteFile};

    let staging = staging_dir("tokshuf-staging")?;
    let name = cfg.output_prefix.file_name().map_or_else(|| "out".into(), |n| n.to_os_string());
    let mut local = cfg.clone();
    local.output_prefix = staging.path().join(name);
    local.summary_path = None;
    let (mut summary, sums) = pipeline::run_staged(&local, tokenizer, cancel)?;
    let sum_of = |p: &std::path::Path| sums.iter().find(|(t, _)| t == p).map(|(_, s)| *s).unwrap_or_default();
    let mut files = Vec::new();
    for ext in [".bin", ".idx"] {
        for (key, out) in cfg.json_keys.iter().zip(&summary.outputs) {
            let local = with_suffix(&out.prefix, ext);
            let sum = sum_of(&local);
            files.push(RemoteFile::upload(local, with_suffix(&cfg.key_prefix(key), ext), sum));
        }
    }
    for (key, out) in cfg.json_keys.iter().zip(summary.outputs.iter_mut()) {
        out.prefix = cfg.key_prefix(key);
    }
    if let Some(path) = &cfg.summary_path {
        let json = crate::fsutil::json_file_bytes(&summary)?;
        match crate::storage::remote(path)? {
            Some(_) => {
                let sum = Checksum::of(&json);
                files.push(RemoteFile::bytes(json, path.clone(), sum));
            }
            None => crate::fsutil::write_atomic(path, &json)?,
        }
    }
    crate::fsutil::record::publish_remote(&record, files, cancel)?;
    Ok(summary)
}
