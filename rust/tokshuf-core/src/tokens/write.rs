//! Writing OLMo token files: streaming, range-checked, temporary name until finished.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use super::array::{TokenArray, TokenType};
use crate::cancel::Cancel;
use crate::error::{IoContext, Result};
use crate::fsutil::record::{Sum, Summing};
use crate::fsutil::{RecordSpec, Staging, TempFile};
use crate::indexed::IndexedDataset;

/// Writes one flat token file (`np.memmap` layout, no header); nothing appears at the target
/// path until [`TokenFileWriter::finish`].
#[derive(Debug)]
pub struct TokenFileWriter {
    tmp: TempFile,
    out: BufWriter<Summing<File>>,
    ty: TokenType,
    tokens: u64,
    buf: Vec<u8>,
}

impl TokenFileWriter {
    /// Start writing `path` with element type `ty`.
    pub fn create(path: impl AsRef<Path>, ty: TokenType) -> Result<Self> {
        let tmp = TempFile::new(path.as_ref());
        let out = BufWriter::with_capacity(1 << 20, Summing::new(tmp.create()?));
        Ok(Self { tmp, out, ty, tokens: 0, buf: Vec::new() })
    }

    /// Append tokens (ids larger than the type holds are an error).
    pub fn write(&mut self, tokens: &[u64]) -> Result<()> {
        self.buf.clear();
        self.ty.encode(tokens, &mut self.buf)?;
        self.out.write_all(&self.buf).with_path(self.tmp.path())?;
        self.tokens += tokens.len() as u64;
        Ok(())
    }

    /// Tokens written so far.
    pub fn tokens(&self) -> u64 {
        self.tokens
    }

    /// Flush, sync and move the file into place; returns the number of tokens.
    pub fn finish(self) -> Result<u64> {
        let (tokens, tmp, _) = self.finish_staged()?;
        tmp.commit()?;
        Ok(tokens)
    }

    /// Flush and sync, leaving the file under its temporary name (to commit with others); the
    /// tokens, the file and its size and checksum.
    pub fn finish_staged(self) -> Result<(u64, TempFile, Sum)> {
        let summing = self.out.into_inner().map_err(|e| crate::error::Error::io(self.tmp.path(), e.into_error()))?;
        let (file, sum) = summing.into_parts();
        crate::fsutil::fault::point().with_path(self.tmp.path())?;
        file.sync_all().with_path(self.tmp.path())?;
        drop(file);
        Ok((self.tokens, self.tmp, sum))
    }
}

/// Where [`convert_indexed`] writes besides the token file.
#[derive(Debug, Default)]
pub struct ConvertOutputs<'a> {
    /// Dolma metadata: its path, and the `src` column.
    pub metadata: Option<(&'a Path, &'a str)>,
    /// The run's summary (`output`, `documents`, `tokens`) as JSON.
    pub summary: Option<&'a Path>,
    /// Publish the outputs as a set by this record.
    pub record: Option<RecordSpec>,
}

/// Copy every document of an indexed dataset into an OLMo token file of type `ty`, appending
/// `append_eos` to documents that do not already end with it. Returns each document's
/// `(start, end)` in the output. The token file, its metadata and summary (as `also` asks)
/// appear together or not at all.
pub fn convert_indexed(
    ds: &IndexedDataset,
    out: &Path,
    ty: TokenType,
    append_eos: Option<u64>,
    also: ConvertOutputs<'_>,
    cancel: &Cancel,
) -> Result<Vec<[u64; 2]>> {
    let tokens = TokenArray::from_indexed(ds)?;
    let item = tokens.token_type().itemsize() as u64;
    let mut w = TokenFileWriter::create(out, ty)?;
    let mut spans = Vec::with_capacity(ds.num_documents());
    let mut doc = Vec::new();
    for d in 0..ds.num_documents() {
        if d % 4096 == 0 {
            cancel.check()?;
        }
        doc.clear();
        for s in ds.document_index(d) as usize..ds.document_index(d + 1) as usize {
            let first = ds.sequence_pointer(s) / item;
            doc.extend((first..first + u64::from(ds.sequence_length(s))).map(|i| tokens.get(i)));
        }
        if let Some(eos) = append_eos.filter(|&eos| doc.last() != Some(&eos)) {
            doc.push(eos);
        }
        let start = w.tokens();
        w.write(&doc)?;
        spans.push([start, w.tokens()]);
    }
    let (total, tokens_tmp, sum) = w.finish_staged()?;
    let mut staged = Staging::new();
    staged.add_data(tokens_tmp, sum);
    if let Some((path, src)) = also.metadata {
        let (tmp, sum) = super::metadata::write_metadata_staged(path, &spans, src)?;
        staged.add_index(tmp, sum);
    }
    if let Some(path) = also.summary {
        // In this order wherever the file is written (Python writes the same one to a store).
        #[derive(serde::Serialize)]
        struct Written<'a> {
            output: &'a Path,
            documents: usize,
            tokens: u64,
        }
        let summary = Written { output: out, documents: spans.len(), tokens: total };
        staged.add_index_bytes(path, &crate::fsutil::json_file_bytes(&summary)?)?;
    }
    if let Some(record) = also.record {
        staged.set_record(record);
    }
    staged.commit()?;
    Ok(spans)
}
