//! Opening a file as a stream of decompressed bytes, chosen by its last extension.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use crate::error::{IoContext, Result};

/// Compression of an input file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Plain bytes.
    None,
    /// gzip, possibly several concatenated members.
    Gzip,
    /// zstd, possibly several concatenated frames.
    Zstd,
}

impl Compression {
    /// From the file's last extension: `.gz`, `.zst`/`.zstd`, anything else is plain.
    pub fn from_path(path: &Path) -> Compression {
        match path.extension().and_then(|e| e.to_str()) {
            Some("gz") => Compression::Gzip,
            Some("zst" | "zstd") => Compression::Zstd,
            _ => Compression::None,
        }
    }

    /// Human name for messages.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "plain",
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
        }
    }
}

/// Open `path` and return its decompressed bytes as a stream. Decoding errors (a truncated or
/// corrupt stream) surface as `io::Error`s from `read`, which callers report with the path.
pub fn open_decompressed(path: &Path) -> Result<Box<dyn Read + Send>> {
    let file = File::open(path).with_path(path)?;
    decompress(path, file)
}

/// Decompress `raw` (the bytes of `path`, which picks the format by its extension).
pub fn decompress(path: &Path, raw: impl Read + Send + 'static) -> Result<Box<dyn Read + Send>> {
    let raw = BufReader::with_capacity(1 << 20, raw);
    Ok(match Compression::from_path(path) {
        Compression::None => Box::new(raw),
        Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(raw)),
        Compression::Zstd => Box::new(zstd::stream::read::Decoder::with_buffer(raw).with_path(path)?),
    })
}

/// A reader that counts the bytes read through it (progress in compressed bytes).
pub struct CountingReader<R> {
    inner: R,
    count: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl<R> CountingReader<R> {
    /// Wrap `inner`; `count` is increased by every read.
    pub fn new(inner: R, count: std::sync::Arc<std::sync::atomic::AtomicU64>) -> Self {
        Self { inner, count }
    }
}

impl<R: Read> Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(n)
    }
}
