//! Merging datasets: Megatron's `tools/merge_datasets.py` semantics.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::reader::{IndexedDataset, Validate};
use super::writer::{IndexedDatasetWriter, WriteSummary};
use crate::error::{Error, IoContext, Result};
use crate::fsutil::record;
use crate::fsutil::{RecordSpec, Staging};

/// The prefixes of every `.bin/.idx` pair in `dir`, sorted lexicographically (as Megatron does,
/// so `shard_10` sorts before `shard_2`). Other files are ignored; a `.bin` without its `.idx`
/// (or the reverse) is an error.
pub fn list_prefixes(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut stems = BTreeSet::new();
    for entry in std::fs::read_dir(dir).with_path(dir)? {
        let path = entry.with_path(dir)?.path();
        if !path.is_file() {
            continue;
        }
        let (Some(stem), Some(ext)) = (path.file_stem(), path.extension()) else { continue };
        let partner = match ext.to_str() {
            Some("bin") => "idx",
            Some("idx") => "bin",
            _ => continue,
        };
        if !path.with_extension(partner).is_file() {
            return Err(Error::io(
                path.with_extension(partner),
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!("{} has no .{partner} partner", path.display()),
                ),
            ));
        }
        stems.insert(stem.to_os_string());
    }
    Ok(stems.into_iter().map(|s| dir.join(s)).collect())
}

/// Concatenate `prefixes` (in the given order) into `output`. Every input must have the same
/// dtype. The pair, and the summary (the counts, as JSON) at `summary` if given, are published as
/// one set by the record `{output}.commit.json`.
pub fn merge(prefixes: &[PathBuf], output: &Path, summary: Option<&Path>) -> Result<WriteSummary> {
    let record = record::record_path(output);
    let mut outputs = vec![record.clone()];
    outputs.extend(summary.map(Path::to_path_buf));
    check_outputs(prefixes, output, &outputs)?;
    let identity = record::listing_identity(&merge_inputs(prefixes))?;
    let (written, mut staged) = merge_staged(prefixes, output)?;
    if let Some(path) = summary {
        // The counts in the order `merge` returns them, wherever the file is written.
        staged.add_index_bytes(path, &crate::fsutil::json_file_bytes(&written)?)?;
    }
    staged.set_record(RecordSpec {
        path: record,
        command: "merge".into(),
        run: serde_json::Value::Null,
        inputs: identity,
    });
    staged.commit()?;
    Ok(written)
}

/// The files a merge of `prefixes` reads.
pub fn merge_inputs(prefixes: &[PathBuf]) -> Vec<PathBuf> {
    prefixes.iter().flat_map(|p| [super::format::bin_path(p), super::format::idx_path(p)]).collect()
}

/// Refuse a merge into `output` (and the other files `more` it writes) that would replace one
/// of its inputs; finish an interrupted commit in the output's directory.
pub fn check_outputs(prefixes: &[PathBuf], output: &Path, more: &[PathBuf]) -> Result<()> {
    let mut outputs = vec![super::format::bin_path(output), super::format::idx_path(output)];
    outputs.extend(more.iter().cloned());
    crate::fsutil::check_outputs_are_not_inputs(&outputs, &merge_inputs(prefixes))?;
    if let Some(dir) = output.parent() {
        record::recover_dir(dir)?;
    }
    Ok(())
}

/// [`merge`] without the commit: the written counts, and the pair staged under temporary names.
pub fn merge_staged(prefixes: &[PathBuf], output: &Path) -> Result<(WriteSummary, Staging)> {
    let Some(first) = prefixes.first() else {
        return Err(Error::invalid("nothing to merge: no input datasets were given"));
    };
    let datasets: Vec<IndexedDataset> =
        prefixes.iter().map(|p| IndexedDataset::open(p, None, Validate::Full)).collect::<Result<_>>()?;
    let dtype = datasets[0].dtype();
    if let Some(other) = datasets.iter().find(|d| d.dtype() != dtype) {
        let all: Vec<String> = datasets.iter().map(|d| format!("{} ({})", d.prefix().display(), d.dtype())).collect();
        return Err(Error::invalid(format!(
            "cannot merge datasets of different dtypes: {} is {} but {} is {}; inputs: {}",
            first.display(),
            dtype,
            other.prefix().display(),
            other.dtype(),
            all.join(", ")
        )));
    }
    let mut writer = IndexedDatasetWriter::create(output, dtype, datasets[0].multimodal())?;
    for ds in &datasets {
        writer.append(ds)?;
    }
    writer.finish_staged()
}
