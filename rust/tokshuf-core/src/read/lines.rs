//! Splitting a decompressed stream into batches of lines without holding the whole file.

use std::io::{ErrorKind, Read};
use std::ops::Range;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// One line of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineSpan {
    /// The line's bytes in [`LineBatch::data`], without its `\n` or `\r\n`.
    Text(Range<usize>),
    /// A line longer than the reader's limit, dropped while reading; holds its length in bytes.
    TooLong(u64),
}

/// Consecutive lines of one file.
#[derive(Debug, Default)]
pub struct LineBatch {
    /// 1-based number of the first line.
    pub first_line: u64,
    /// Backing bytes.
    pub data: Vec<u8>,
    /// The lines, in order.
    pub lines: Vec<LineSpan>,
}

impl LineBatch {
    /// Number of lines.
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    /// Whether the batch has no lines.
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }
}

/// Reads a stream in batches of whole lines of about `batch_bytes` bytes.
pub struct LineReader<R> {
    path: PathBuf,
    inner: R,
    batch_bytes: usize,
    max_line_bytes: usize,
    pending: Vec<u8>,
    next_line: u64,
    offset: u64,
    eof: bool,
}

const READ_CHUNK: usize = 1 << 20;

impl<R: Read> LineReader<R> {
    /// A reader over `inner` (already decompressed), `path` for messages.
    pub fn new(path: &Path, inner: R, batch_bytes: usize, max_line_bytes: usize) -> Self {
        Self {
            path: path.to_path_buf(),
            inner,
            batch_bytes: batch_bytes.max(1),
            max_line_bytes: max_line_bytes.max(1),
            pending: Vec::new(),
            next_line: 1,
            offset: 0,
            eof: false,
        }
    }

    /// Decompressed bytes consumed so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    fn read_error(&self, e: std::io::Error) -> Error {
        match e.kind() {
            ErrorKind::UnexpectedEof | ErrorKind::InvalidData | ErrorKind::InvalidInput | ErrorKind::Other => {
                Error::format(
                    &self.path,
                    format!(
                        "cannot decompress past byte {} (after line {}): the file is truncated or corrupt ({e})",
                        self.offset,
                        self.next_line.saturating_sub(1)
                    ),
                )
            }
            _ => Error::io(&self.path, e),
        }
    }

    /// Append up to `READ_CHUNK` bytes to `buf`; false at end of stream.
    fn fill(&mut self, buf: &mut Vec<u8>) -> Result<bool> {
        let start = buf.len();
        buf.resize(start + READ_CHUNK, 0);
        let n = loop {
            match self.inner.read(&mut buf[start..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => {
                    buf.truncate(start);
                    return Err(self.read_error(e));
                }
            }
        };
        buf.truncate(start + n);
        self.offset += n as u64;
        Ok(n > 0)
    }

    /// Discard the rest of an over-long line; returns the bytes discarded and keeps what follows
    /// its newline in `buf`.
    fn skip_line(&mut self, buf: &mut Vec<u8>) -> Result<u64> {
        let mut skipped = 0u64;
        loop {
            if let Some(pos) = memchr::memchr(b'\n', buf) {
                skipped += pos as u64;
                buf.drain(..=pos);
                return Ok(skipped);
            }
            skipped += buf.len() as u64;
            buf.clear();
            if !self.fill(buf)? {
                self.eof = true;
                return Ok(skipped);
            }
        }
    }

    fn span(&self, r: Range<usize>) -> LineSpan {
        if r.len() > self.max_line_bytes {
            LineSpan::TooLong(r.len() as u64)
        } else {
            LineSpan::Text(r)
        }
    }

    /// The next batch, or `None` at end of stream.
    pub fn next_batch(&mut self) -> Result<Option<LineBatch>> {
        if self.eof && self.pending.is_empty() {
            return Ok(None);
        }
        let mut data = std::mem::take(&mut self.pending);
        let mut lines = Vec::new();
        let mut line_start = 0usize;
        let mut scan = 0usize;
        loop {
            while let Some(pos) = memchr::memchr(b'\n', &data[scan..]) {
                let end = scan + pos;
                let text_end = if end > line_start && data[end - 1] == b'\r' { end - 1 } else { end };
                lines.push(self.span(line_start..text_end));
                line_start = end + 1;
                scan = line_start;
            }
            scan = data.len();
            if data.len() - line_start > self.max_line_bytes {
                let mut rest = data.split_off(line_start);
                let skipped = self.skip_line(&mut rest)?;
                lines.push(LineSpan::TooLong(skipped));
                line_start = data.len();
                data.extend_from_slice(&rest);
                scan = line_start;
                continue;
            }
            if line_start >= self.batch_bytes || (self.eof && !lines.is_empty()) {
                break;
            }
            if self.eof {
                if line_start < data.len() {
                    let end = data.len();
                    let text_end = if data[end - 1] == b'\r' { end - 1 } else { end };
                    lines.push(self.span(line_start..text_end));
                    line_start = end;
                }
                break;
            }
            if !self.fill(&mut data)? {
                self.eof = true;
            }
        }
        self.pending = data[line_start..].to_vec();
        data.truncate(line_start);
        if lines.is_empty() {
            return Ok(None);
        }
        let batch = LineBatch { first_line: self.next_line, data, lines };
        self.next_line += batch.lines.len() as u64;
        Ok(Some(batch))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(input: &[u8], batch: usize, max_line: usize) -> Vec<(u64, Vec<Option<Vec<u8>>>)> {
        let mut r = LineReader::new(Path::new("t"), input, batch, max_line);
        let mut out = Vec::new();
        while let Some(b) = r.next_batch().unwrap() {
            let lines = b
                .lines
                .iter()
                .map(|l| match l {
                    LineSpan::Text(r) => Some(b.data[r.clone()].to_vec()),
                    LineSpan::TooLong(_) => None,
                })
                .collect();
            out.push((b.first_line, lines));
        }
        out
    }

    fn flat(batches: &[(u64, Vec<Option<Vec<u8>>>)]) -> Vec<Option<Vec<u8>>> {
        batches.iter().flat_map(|b| b.1.clone()).collect()
    }

    #[test]
    fn crlf_final_line_and_blank_lines() {
        let got = flat(&collect(b"a\r\n\nb\nc", 1 << 20, 1 << 20));
        let want: Vec<Option<Vec<u8>>> =
            vec![Some(b"a".to_vec()), Some(vec![]), Some(b"b".to_vec()), Some(b"c".to_vec())];
        assert_eq!(got, want);
        assert!(collect(b"", 10, 10).is_empty());
    }

    #[test]
    fn tiny_batches_keep_every_line_and_number_them() {
        let input: Vec<u8> = (0..100).flat_map(|i| format!("line{i}\n").into_bytes()).collect();
        let batches = collect(&input, 7, 1 << 20);
        let mut expect_first = 1;
        for (first, lines) in &batches {
            assert_eq!(*first, expect_first);
            expect_first += lines.len() as u64;
        }
        let got = flat(&batches);
        assert_eq!(got.len(), 100);
        assert_eq!(got[42], Some(b"line42".to_vec()));
    }

    #[test]
    fn over_long_lines_are_reported_not_held() {
        let mut input = b"short\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', 5000));
        input.extend_from_slice(b"\nafter\n");
        let got = flat(&collect(&input, 16, 100));
        assert!(got == vec![Some(b"short".to_vec()), None, Some(b"after".to_vec())], "{} lines", got.len());
        // A line spanning several reads is discarded while streaming.
        let mut big = b"a\n".to_vec();
        big.extend(std::iter::repeat_n(b'y', 3 * READ_CHUNK + 5));
        big.extend_from_slice(b"\nb");
        let mut r = LineReader::new(Path::new("t"), &big[..], 16, 1000);
        let mut spans = Vec::new();
        while let Some(b) = r.next_batch().unwrap() {
            spans.extend(b.lines);
        }
        assert_eq!(spans.len(), 3);
        assert_eq!(spans[1], LineSpan::TooLong(3 * READ_CHUNK as u64 + 5));
    }
}
