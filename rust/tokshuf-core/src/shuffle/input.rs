//! Opening an input file like `read::open_decompressed`, counting the on-disk bytes consumed so
//! progress can be shown within a large compressed file.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use super::progress::Progress;
use crate::error::{IoContext, Result};
use crate::read::Compression;

struct Counting<'a> {
    inner: File,
    progress: &'a Progress,
}

impl Read for Counting<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress.add_input_bytes(n as u64);
        Ok(n)
    }
}

/// The decompressed bytes of `path` (by its last extension); on-disk bytes read are added to
/// `progress`.
pub fn open_counted<'a>(path: &Path, progress: &'a Progress) -> Result<Box<dyn Read + Send + 'a>> {
    let file = File::open(path).with_path(path)?;
    let raw = BufReader::with_capacity(1 << 20, Counting { inner: file, progress });
    Ok(match Compression::from_path(path) {
        Compression::None => Box::new(raw),
        Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(raw)),
        Compression::Zstd => Box::new(zstd::stream::read::Decoder::with_buffer(raw).with_path(path)?),
    })
}
