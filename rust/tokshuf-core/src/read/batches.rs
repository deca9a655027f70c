//! What the two columnar readers (Parquet in `columnar`, Arrow IPC in `ipc`) share: the record
//! batches they give, why a file's batches stop early, and how key columns are found. Both import
//! it; neither imports the other's internals.

use std::path::Path;

use arrow_array::RecordBatch;

use crate::error::{Error, Result};

/// Why the record batches of a file stop before its end.
#[derive(Debug)]
pub(super) enum Stop {
    /// The file is damaged here (cannot be decoded, or cut short): the rows from here on are lost,
    /// as the lines after a corrupt gzip member are (`truncated_file`).
    Damaged(String),
    /// The run cannot go on: the store failed, or the file needs what this build cannot read.
    Fatal(Error),
}

pub(super) type Batches = Box<dyn Iterator<Item = Result<RecordBatch, Stop>> + Send>;

/// The error for a file that needs `what` (a codec, an encoding...), which this build cannot read.
pub(super) fn unsupported(path: &Path, what: impl std::fmt::Display) -> Stop {
    Stop::Fatal(Error::format(path, format!("unsupported {what}")))
}

/// `f()`, or the message of its panic: the Parquet and Arrow decoders assert on some malformed
/// inputs, and a damaged file must cost that file, not the process.
pub(super) fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|panic| {
        format!("the decoder failed on malformed data: {}", crate::error::panic_message(&*panic, "a panic"))
    })
}

/// The column of each key: the last of that name, as the last of a repeated key of a JSON object
/// wins; sorted and without repeats, as a projection wants them.
pub(super) fn key_indices(path: &Path, keys: &[String], schema: &arrow_schema::Schema) -> Result<Vec<usize>> {
    let names = || schema.fields().iter().map(|f| f.name());
    let mut columns = keys
        .iter()
        .map(|k| names().rposition(|n| n == k).ok_or_else(|| missing_column(path, k, names())))
        .collect::<Result<Vec<_>>>()?;
    columns.sort_unstable();
    columns.dedup();
    Ok(columns)
}

pub(super) fn missing_column<'a>(path: &Path, key: &str, names: impl Iterator<Item = &'a String>) -> Error {
    let names: Vec<&str> = names.map(String::as_str).collect();
    Error::invalid(format!(
        "{}: no column {key:?} (the --json-keys of a Parquet or Arrow input name its columns: {})",
        path.display(),
        names.join(", ")
    ))
}
