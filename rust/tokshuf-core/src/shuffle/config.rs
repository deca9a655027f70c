//! The options of a shuffle run and the special-token conventions.

use std::path::PathBuf;

use super::contexts::SpecialIds;
use super::encode::MemberFormat;
use crate::error::{Error, Result};
use crate::preprocess::ErrorPolicy;
use crate::progress::ProgressStyle;
use crate::read::ScanReport;
use crate::tokenize::Tokenizer;

/// Default tokens per context, counting the +1 target token (open_lm's 2048 + 1).
pub const DEFAULT_SEQLEN: usize = 2049;
/// Default contexts per output shard.
pub const DEFAULT_WDS_CHUNK_SIZE: u64 = 8192;
/// Default number of local cells.
pub const DEFAULT_NUM_LOCAL_CELLS: u32 = 512;
/// Default seed (tokshuf-rust's).
pub const DEFAULT_SEED: u64 = 1234;
/// Default bytes of encoded contexts buffered in stage 1 before a run is written (two buffers
/// exist while one is being written).
pub const DEFAULT_BUFFER_BYTES: usize = 32 << 20;
/// Default gzip level of `json.gz` members: tokshuf's token-level deflate (see `encode`).
pub const DEFAULT_GZIP_LEVEL: u8 = 1;
/// The special-token conventions `--special-tokens` accepts.
pub const SPECIAL_TOKEN_PRESETS: &[&str] = &["native", "dclm", "dclm-neox", "dclm-llama3"];
/// Default special-token convention: the tokenizer's own end-of-text id (see [`resolve_special`]).
pub const DEFAULT_SPECIAL_TOKENS: &str = "native";
/// Default JSON key of the text.
pub const DEFAULT_CONTENT_KEY: &str = "text";

/// Options of one shuffle run.
#[derive(Debug, Clone)]
pub struct ShuffleConfig {
    /// Input files, in order (their position is part of every context's id).
    pub inputs: Vec<PathBuf>,
    /// Scratch directory for the local cells and the resume state.
    pub local_cell_dir: PathBuf,
    /// Output directory: `shard_%08d.tar` and `manifest.jsonl`.
    pub output: PathBuf,
    /// Tokens per context (including the +1 target token).
    pub seqlen: usize,
    /// Contexts per shard.
    pub wds_chunk_size: u64,
    /// Number of local cells.
    pub num_local_cells: u32,
    /// Seed of every random decision.
    pub seed: u64,
    /// Worker threads (at least 1); the output does not depend on it.
    pub threads: usize,
    /// JSON key holding the text.
    pub content_key: String,
    /// BOS/EOT/PAD ids.
    pub special: SpecialIds,
    pub on_error: ErrorPolicy,
    pub member_format: MemberFormat,
    /// Inputs are tars whose samples are re-shuffled verbatim (no tokenization).
    pub shuffle_only: bool,
    /// tokshuf-rust's quirk: a file whose tokens fill whole contexts still emits an all-PAD one.
    pub all_pad_context: bool,
    /// Bytes of encoded contexts buffered in stage 1 before a run is written.
    pub buffer_bytes: usize,
    /// Approximate bytes of input per tokenization batch.
    pub batch_bytes: usize,
    /// Longest accepted input line.
    pub max_line_bytes: usize,
    /// How progress is shown on stderr.
    pub progress: ProgressStyle,
    /// The inputs stage 1 reads (a task's slice; default all). Contexts keep the ids of their
    /// files' places in `inputs`, so the slices of all tasks make the cells of one run.
    pub files: Option<std::ops::Range<usize>>,
    /// What the scans that listed `inputs` passed over, for the summary.
    pub scan: ScanReport,
    /// Where the run's summary is written (as JSON, with the output's set: before its commit
    /// record), if anywhere: the one-node run and the manifest step write it.
    pub summary: Option<PathBuf>,
}

/// The longest context: 2^30 tokens, 4 GiB as ids.
pub const MAX_SEQLEN: usize = 1 << 30;

impl ShuffleConfig {
    /// Defaults for everything but the paths and special ids.
    pub fn new(inputs: Vec<PathBuf>, local_cell_dir: PathBuf, output: PathBuf, special: SpecialIds) -> Self {
        Self {
            inputs,
            local_cell_dir,
            output,
            seqlen: DEFAULT_SEQLEN,
            wds_chunk_size: DEFAULT_WDS_CHUNK_SIZE,
            num_local_cells: DEFAULT_NUM_LOCAL_CELLS,
            seed: DEFAULT_SEED,
            threads: 1,
            content_key: DEFAULT_CONTENT_KEY.into(),
            special,
            on_error: ErrorPolicy::Fail,
            member_format: MemberFormat::JsonGz { level: DEFAULT_GZIP_LEVEL },
            shuffle_only: false,
            all_pad_context: false,
            buffer_bytes: DEFAULT_BUFFER_BYTES,
            batch_bytes: 1 << 20,
            max_line_bytes: 1 << 30,
            progress: ProgressStyle::Off,
            files: None,
            scan: ScanReport::default(),
            summary: None,
        }
    }

    /// The inputs stage 1 reads.
    pub(crate) fn file_range(&self) -> std::ops::Range<usize> {
        self.files.clone().unwrap_or(0..self.inputs.len())
    }

    pub(crate) fn check(&self) -> Result<()> {
        if self.inputs.is_empty() {
            return Err(Error::invalid("no input files"));
        }
        if self.inputs.len() as u64 >= 1 << super::contexts::FILE_BITS {
            return Err(Error::invalid(format!("too many input files ({}); the limit is 2^24", self.inputs.len())));
        }
        if self.seqlen == 0 {
            return Err(Error::invalid("context_length (--context-length/--seqlen) must be at least 1, got 0"));
        }
        // A context is held whole, as u32 ids.
        if self.seqlen > MAX_SEQLEN {
            return Err(Error::invalid(format!(
                "context_length (--context-length/--seqlen) {} is too long: a context is held whole in memory and at most {MAX_SEQLEN} tokens \
                 (4 GiB of ids) are allowed",
                self.seqlen
            )));
        }
        if self.wds_chunk_size == 0 {
            return Err(Error::invalid("wds_chunk_size must be at least 1"));
        }
        if self.num_local_cells == 0 {
            return Err(Error::invalid("num_local_cells must be at least 1"));
        }
        if self.threads == 0 {
            return Err(Error::invalid("threads must be at least 1"));
        }
        if self.content_key.is_empty() {
            return Err(Error::invalid("the content key must not be empty"));
        }
        if self.inputs.iter().any(|p| crate::read::is_stdin(p)) {
            // A shuffle is resumed from a checkpoint into its inputs, which a pipe cannot give back.
            return Err(Error::invalid(
                "shuffle cannot read standard input (`-`): its inputs must be readable again to resume; \
                 write the stream to a file first",
            ));
        }
        Ok(())
    }
}

/// Resolve `--special-tokens PRESET` plus explicit overrides into ids, with warnings for ids the
/// tokenizer does not have.
///
/// * `native`: the tokenizer's own end-of-text id as EOT, PAD = EOT, no BOS;
/// * `dclm` / `dclm-neox`: tokshuf-rust with GPT-NeoX: EOT 0, PAD 50256, no BOS;
/// * `dclm-llama3`: tokshuf-rust with Llama-3 (tiktoken): BOS 128000, EOT 0, PAD 128258.
pub fn resolve_special(
    preset: &str,
    tokenizer: &dyn Tokenizer,
    bos: Option<u32>,
    eot: Option<u32>,
    pad: Option<u32>,
) -> Result<(SpecialIds, Vec<String>)> {
    let (p_bos, p_eot, p_pad) = match preset {
        "native" => (None, tokenizer.eod_id(), None),
        "dclm" | "dclm-neox" => (None, Some(0), Some(50256)),
        "dclm-llama3" => (Some(128_000), Some(0), Some(128_258)),
        other => {
            return Err(Error::invalid(format!(
                "unknown special-token convention {other:?} (expected one of: {})",
                SPECIAL_TOKEN_PRESETS.join(", ")
            )))
        }
    };
    let eot = eot.or(p_eot).ok_or_else(|| {
        Error::invalid("the tokenizer has no end-of-text id: pass --eot-id (and --pad-id) or a --special-tokens preset")
    })?;
    let special = SpecialIds { bos: bos.or(p_bos), eot, pad: pad.or(p_pad).unwrap_or(eot) };
    let vocab = tokenizer.vocab_size();
    let mut warnings = Vec::new();
    for (name, id) in [("BOS", special.bos), ("EOT", Some(special.eot)), ("PAD", Some(special.pad))] {
        if let Some(id) = id.filter(|&id| u64::from(id) >= vocab) {
            warnings.push(format!(
                "{name} id {id} is not below the tokenizer's vocabulary size {vocab}: the model's embedding must be larger"
            ));
        }
    }
    Ok((special, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokenize::ByteTokenizer;

    #[test]
    fn presets() {
        let (s, w) = resolve_special("native", &ByteTokenizer, None, None, None).unwrap();
        assert_eq!(s, SpecialIds { bos: None, eot: 0, pad: 0 });
        assert!(w.is_empty());
        let (s, w) = resolve_special("dclm", &ByteTokenizer, None, None, None).unwrap();
        assert_eq!(s, SpecialIds { bos: None, eot: 0, pad: 50256 });
        assert_eq!(w.len(), 1, "PAD 50256 is outside the byte vocabulary");
        let (s, _) = resolve_special("dclm-llama3", &ByteTokenizer, None, Some(5), Some(6)).unwrap();
        assert_eq!(s, SpecialIds { bos: Some(128_000), eot: 5, pad: 6 });
        let e = resolve_special("llama", &ByteTokenizer, None, None, None).unwrap_err().to_string();
        assert!(e.contains("native, dclm"), "{e}");
    }
}
