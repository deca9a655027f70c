//! Merging datasets: Megatron's `tools/merge_datasets.py` semantics.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::reader::{IndexedDataset, Validate};
use super::writer::{IndexedDatasetWriter, WriteSummary};
use crate::error::{Error, IoContext, Result};

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

/// Concatenate `prefixes` (in the given order) into `output`. Every input must have the same dtype.
pub fn merge(prefixes: &[PathBuf], output: &Path) -> Result<WriteSummary> {
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
    writer.finish()
}
