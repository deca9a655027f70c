//! Splitting a decompressed stream into batches of lines without holding the whole file.
//!
//! Lines end as Python's universal newlines end them (Megatron reads its input in text mode):
//! at `\n`, `\r\n` or a lone `\r`. In valid JSON a raw CR can only be whitespace between
//! tokens or a line end (a string holds it escaped), so this splits no valid JSON line that
//! Python keeps whole, and old-Mac files read line by line.

use std::io::{ErrorKind, Read};
use std::ops::Range;
use std::path::{Path, PathBuf};

use super::rows::Rows;
use crate::error::{Error, Result};

/// One line of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineSpan {
    /// The line's bytes in [`LineBatch::data`], without its `\n`, `\r\n` or `\r`.
    Text(Range<usize>),
    /// A line longer than the reader's limit, dropped while reading; holds its length in bytes.
    TooLong(u64),
    /// Row `.0` of [`LineBatch::rows`] (a Parquet or Arrow input): its values are read from the
    /// columns, with no JSON in between.
    Row(usize),
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
    /// The rows the [`LineSpan::Row`] lines are of; `None` for JSON lines.
    pub rows: Option<Rows>,
}

impl LineBatch {
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// The bytes of its lines held (of the JSON lines its rows stand for).
    pub fn bytes(&self) -> usize {
        self.data.len() + self.rows.as_ref().map_or(0, Rows::bytes)
    }
}

/// Whether a read error is the input's content being undecodable (a truncated or corrupt
/// stream or file) rather than the input being unreadable: never a failed request to a store,
/// whatever its kind (a store that fails, ignores Range or changes the object mid-read is not
/// bad data, and `--on-error skip` must not skip it).
pub(crate) fn is_decoding_error(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::UnexpectedEof | ErrorKind::InvalidData | ErrorKind::InvalidInput | ErrorKind::Other)
        && !crate::storage::is_store_error(e)
}

/// Where a corrupt or truncated stream or file stopped (see [`LineReader::tolerate_corruption`];
/// for Parquet and Arrow files the offset counts the JSON lines their rows stand for).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncation {
    /// Decompressed bytes read before the failure.
    pub offset: u64,
    /// Number of the line the failure cut (the first line lost).
    pub line: u64,
    /// Bytes of that line that were read and dropped (0: the stream broke at a line boundary).
    pub fragment_bytes: u64,
    /// The decoder's message.
    pub message: String,
}

impl Truncation {
    /// What went wrong and what was lost, for a skipped-file record or an error: the decoder's
    /// message says what is wrong with the file (not compressed at all, trailing data, a member
    /// cut short or corrupt) and where.
    pub fn describe(&self) -> String {
        let lost = if self.fragment_bytes > 0 {
            format!("line {} ({} bytes of it were read) and anything after it are lost", self.line, self.fragment_bytes)
        } else if self.line <= 1 {
            "nothing was read from it".to_string()
        } else {
            format!("anything after line {} is lost", self.line - 1)
        };
        let message = self.message.trim();
        if self.offset == 0 {
            format!("cannot read it: {message}; {lost}")
        } else {
            format!("reading failed after {} bytes of decompressed data: {message}; {lost}", self.offset)
        }
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
    tolerate: bool,
    truncation: Option<Truncation>,
    /// Complete lines of the batch being cut (for messages about a failure mid-batch).
    scanned: u64,
    /// Bytes the last read gave: the next one is offered about twice that, as new room must be
    /// zero-filled first (a decoder returns a block at a time, however much room it is given).
    last_read: usize,
    /// The last line ended in a CR that was the last byte read: a LF that comes next is part of
    /// that line end.
    after_cr: bool,
}

const READ_CHUNK: usize = 1 << 20;
/// Smallest read once a batch is nearly full (a line may still be incomplete).
const MIN_READ: usize = 64 << 10;

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
            tolerate: false,
            truncation: None,
            scanned: 0,
            last_read: READ_CHUNK,
            after_cr: false,
        }
    }

    /// On a decoding error (truncated or corrupt gzip/zstd), end the stream after the last
    /// complete line instead of failing, and record what was lost in [`LineReader::truncation`].
    pub fn tolerate_corruption(mut self) -> Self {
        self.tolerate = true;
        self
    }

    /// Where the stream broke, once the reader has stopped on a decoding error.
    pub fn truncation(&self) -> Option<&Truncation> {
        self.truncation.as_ref()
    }

    /// Decompressed bytes consumed so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    fn read_error(&self, e: std::io::Error) -> Error {
        if !is_decoding_error(&e) {
            return Error::io(&self.path, e);
        }
        let after = self.next_line.saturating_sub(1) + self.scanned;
        Error::format(
            &self.path,
            format!("cannot decompress past byte {} of output (after line {after}): {e}", self.offset),
        )
    }

    /// Append up to what the batch still needs (between `MIN_READ` and `READ_CHUNK` bytes) to
    /// `buf`, so a batch holds about `batch_bytes`, not a whole read chunk more; false at end of
    /// stream.
    fn fill(&mut self, buf: &mut Vec<u8>) -> Result<bool> {
        let start = buf.len();
        let n = self.fill_at(buf, start).inspect_err(|_| buf.truncate(start))?;
        buf.truncate(start + n);
        Ok(n > 0)
    }

    /// [`LineReader::fill`] at `buf[valid..]`, whose bytes are scratch: only room `buf` does not
    /// have yet is zero-filled first. The bytes read; 0 at end of stream.
    fn fill_at(&mut self, buf: &mut Vec<u8>, valid: usize) -> Result<usize> {
        let want =
            self.batch_bytes.saturating_sub(valid).clamp(MIN_READ, READ_CHUNK).min(2 * self.last_read.max(MIN_READ));
        if buf.len() < valid + want {
            buf.resize(valid + want, 0);
        }
        let n = loop {
            match self.inner.read(&mut buf[valid..valid + want]) {
                Ok(n) => break n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if self.tolerate && is_decoding_error(&e) => {
                    // `line` and `fragment_bytes` are filled in when the last batch is cut.
                    self.truncation =
                        Some(Truncation { offset: self.offset, line: 0, fragment_bytes: 0, message: e.to_string() });
                    return Ok(0);
                }
                Err(e) => return Err(self.read_error(e)),
            }
        };
        self.offset += n as u64;
        self.last_read = n;
        Ok(n)
    }

    /// The end of the line that ends at `data[end]` (a `\n` or `\r`): where the next line
    /// starts. A CR that is the last byte held may be half of a CRLF: [`LineReader::after_cr`].
    #[inline]
    fn line_end(&mut self, data: &[u8], end: usize) -> usize {
        if data[end] == b'\r' {
            match data.get(end + 1) {
                Some(b'\n') => return end + 2,
                Some(_) => {}
                None => self.after_cr = true,
            }
        }
        end + 1
    }

    /// Drop the LF of a CRLF split between two reads, if `data[at]` is it.
    #[inline]
    fn skip_split_crlf(&mut self, data: &[u8], at: usize) -> usize {
        match data.get(at) {
            Some(&c) if self.after_cr => {
                self.after_cr = false;
                at + usize::from(c == b'\n')
            }
            _ => at,
        }
    }

    /// Discard the rest of an over-long line; returns the bytes discarded and keeps what follows
    /// its line end in `buf`.
    fn skip_line(&mut self, buf: &mut Vec<u8>) -> Result<u64> {
        let mut skipped = 0u64;
        loop {
            if let Some(pos) = memchr::memchr2(b'\n', b'\r', buf) {
                skipped += pos as u64;
                let next = self.line_end(buf, pos);
                buf.drain(..next);
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

    /// The next batch, or `None` at end of stream, in `buf`'s memory (its bytes are overwritten,
    /// not zeroed first): a caller that hands the buffers of used batches back allocates none once
    /// it has a few.
    pub fn next_batch_in(&mut self, buf: Vec<u8>) -> Result<Option<LineBatch>> {
        if self.eof && self.pending.is_empty() {
            return Ok(None);
        }
        // `data[..valid]` is the batch so far; what follows it is scratch.
        let (mut data, mut valid) = (buf, self.pending.len());
        if data.len() >= valid {
            data[..valid].copy_from_slice(&self.pending);
        } else if data.capacity() > valid {
            data.clear();
            data.extend_from_slice(&self.pending);
        } else {
            data = std::mem::take(&mut self.pending);
        }
        self.pending.clear();
        data.reserve((self.batch_bytes + MIN_READ).saturating_sub(data.len()).min(READ_CHUNK + MIN_READ));
        let mut lines = Vec::new();
        let mut line_start = 0usize;
        let mut scan = 0usize;
        loop {
            if scan == line_start {
                line_start = self.skip_split_crlf(&data[..valid], line_start);
                scan = line_start;
            }
            // One search for both line ends: a lone CR ends a line too.
            while let Some(pos) = memchr::memchr2(b'\n', b'\r', &data[scan..valid]) {
                let end = scan + pos;
                lines.push(self.span(line_start..end));
                line_start = self.line_end(&data[..valid], end);
                scan = line_start;
            }
            scan = valid;
            if valid - line_start > self.max_line_bytes {
                data.truncate(valid);
                let mut rest = data.split_off(line_start);
                let skipped = self.skip_line(&mut rest)?;
                lines.push(LineSpan::TooLong(skipped));
                line_start = data.len();
                data.extend_from_slice(&rest);
                valid = data.len();
                scan = line_start;
                continue;
            }
            // (A skipped LF of a split CRLF moves `line_start` without a line.)
            if !lines.is_empty() && (line_start >= self.batch_bytes || self.eof) {
                break;
            }
            if self.eof {
                if self.truncation.is_none() && line_start < valid {
                    lines.push(self.span(line_start..valid));
                    line_start = valid;
                }
                break;
            }
            self.scanned = lines.len() as u64;
            match self.fill_at(&mut data, valid)? {
                0 => self.eof = true,
                n => valid += n,
            }
        }
        data.truncate(valid);
        if let Some(t) = self.truncation.as_mut().filter(|t| self.eof && t.line == 0) {
            // The bytes after the last newline are a fragment of the line the failure cut.
            t.line = self.next_line + lines.len() as u64;
            t.fragment_bytes = (data.len() - line_start) as u64;
            line_start = data.len();
        }
        self.pending.clear();
        self.pending.extend_from_slice(&data[line_start..]);
        data.truncate(line_start);
        if lines.is_empty() {
            return Ok(None);
        }
        let batch = LineBatch { first_line: self.next_line, data, lines, rows: None };
        self.next_line += batch.lines.len() as u64;
        Ok(Some(batch))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Gives at most `.1` bytes per read, as a decoder gives a block at a time.
    struct Trickle<'a>(&'a [u8], usize);

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = buf.len().min(self.1).min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    /// Every batch as (first line number, lines: `None` for an over-long one); with `reuse`, each
    /// batch read into the memory of the one before (its bytes still there).
    fn collect(input: impl Read, batch: usize, max_line: usize, reuse: bool) -> Vec<(u64, Vec<Option<Vec<u8>>>)> {
        let mut r = LineReader::new(Path::new("t"), input, batch, max_line);
        let (mut out, mut spare) = (Vec::new(), b"stale bytes\n".repeat(50));
        while let Some(b) = r.next_batch_in(if reuse { spare } else { Vec::new() }).unwrap() {
            let lines = b
                .lines
                .iter()
                .map(|l| match l {
                    LineSpan::Text(r) => Some(b.data[r.clone()].to_vec()),
                    LineSpan::TooLong(_) | LineSpan::Row(_) => None,
                })
                .collect();
            out.push((b.first_line, lines));
            spare = b.data;
        }
        out
    }

    fn flat(batches: &[(u64, Vec<Option<Vec<u8>>>)]) -> Vec<Option<Vec<u8>>> {
        batches.iter().flat_map(|b| b.1.clone()).collect()
    }

    /// `lines` as [`collect`] gives them, none over-long.
    fn texts(lines: &[&str]) -> Vec<Option<Vec<u8>>> {
        lines.iter().map(|l| Some(l.as_bytes().to_vec())).collect()
    }

    /// Every line `r` reads: a text line as its bytes, any other as its span.
    fn spans(mut r: LineReader<impl Read>) -> Vec<Result<Vec<u8>, LineSpan>> {
        let mut spans = Vec::new();
        while let Some(b) = r.next_batch_in(Vec::new()).unwrap() {
            spans.extend(b.lines.iter().map(|l| match l {
                LineSpan::Text(range) => Ok(b.data[range.clone()].to_vec()),
                other => Err(other.clone()),
            }));
        }
        spans
    }

    proptest::proptest! {
        /// Whatever the batch size, line limit and line lengths, the reader yields exactly the
        /// lines of the input as universal newlines cut them (at LF, CRLF or a lone CR), numbered
        /// in order, over-long ones flagged.
        #[test]
        fn batches_are_the_lines(
            lines in proptest::collection::vec(proptest::collection::vec(proptest::sample::select(b"ab\r {}".to_vec()), 0..300), 0..60),
            batch in 1usize..2000,
            max_line in 1usize..400,
            final_newline: bool,
            read_size in 1usize..3000,
        ) {
            let mut input = lines.join(&b'\n');
            if final_newline && !lines.is_empty() {
                input.push(b'\n');
            }
            let expected: Vec<Option<Vec<u8>>> = universal_lines(&input)
                .into_iter()
                .map(|l| (l.len() <= max_line).then_some(l))
                .collect();
            let batches = collect(&input[..], batch, max_line, false);
            let mut next = 1;
            for (first, b) in &batches {
                proptest::prop_assert_eq!(*first, next);
                next += b.len() as u64;
            }
            proptest::prop_assert_eq!(&flat(&batches), &expected);
            // The same lines whatever the reads give.
            let trickled = collect(Trickle(&input, read_size), batch, max_line, false);
            proptest::prop_assert_eq!(flat(&trickled), expected);
            // Reading into the buffers of earlier batches gives the same batches.
            proptest::prop_assert_eq!(collect(Trickle(&input, read_size), batch, max_line, true), trickled);
        }
    }

    /// The lines of `input` as Python's universal newlines give them: its text with CRLF and
    /// then lone CRs turned into LFs, cut at each LF (a last line end starts no line).
    fn universal_lines(input: &[u8]) -> Vec<Vec<u8>> {
        let text = String::from_utf8_lossy(input).replace("\r\n", "\n").replace('\r', "\n");
        let body = text.strip_suffix('\n').unwrap_or(&text);
        if text.is_empty() {
            return vec![];
        }
        body.split('\n').map(|l| l.as_bytes().to_vec()).collect()
    }

    #[test]
    fn crlf_final_line_and_blank_lines() {
        assert_eq!(flat(&collect(&b"a\r\n\nb\nc"[..], 1 << 20, 1 << 20, false)), texts(&["a", "", "b", "c"]));
        assert!(collect(&b""[..], 10, 10, false).is_empty());
    }

    #[test]
    fn a_lone_cr_ends_a_line_and_a_crlf_split_between_reads_is_one_line_end() {
        let input = b"{\"text\":\"a\"}\r{\"text\":\"b\"}\r\r\nc\r\n\rd\r";
        let expected = texts(&[r#"{"text":"a"}"#, r#"{"text":"b"}"#, "", "c", "", "d"]);
        for read_size in 1..8 {
            for batch in [1, 3, 1 << 20] {
                let got = flat(&collect(Trickle(input, read_size), batch, 100, false));
                assert_eq!(got, expected, "reads of {read_size}, batches of {batch}");
            }
        }
        // An over-long line cut by a CR whose LF comes in the next read.
        let mut input = vec![b'x'; 3000];
        input.extend_from_slice(b"\r\nafter\r\n");
        for read_size in [1, 7, 2999, 3000, 3001] {
            let got = spans(LineReader::new(Path::new("t"), Trickle(&input, read_size), 16, 100));
            assert_eq!(got, [Err(LineSpan::TooLong(3000)), Ok(b"after".to_vec())], "reads of {read_size}");
        }
    }

    #[test]
    fn tiny_batches_keep_every_line_and_number_them() {
        let input: Vec<u8> = (0..100).flat_map(|i| format!("line{i}\n").into_bytes()).collect();
        let batches = collect(&input[..], 7, 1 << 20, false);
        let mut expect_first = 1;
        for (first, lines) in &batches {
            assert_eq!(*first, expect_first);
            expect_first += lines.len() as u64;
        }
        assert_eq!(flat(&batches), (0..100).map(|i| Some(format!("line{i}").into_bytes())).collect::<Vec<_>>());
    }

    /// A reader whose stream fails with `kind` after `data`.
    struct Broken<'a>(&'a [u8], ErrorKind);

    impl Read for Broken<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.0.is_empty() {
                return Err(std::io::Error::new(self.1, "corrupt deflate stream"));
            }
            let n = self.0.len().min(buf.len()).min(3);
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn truncation_fails_or_is_recorded() {
        let input = b"one\ntwo\nthr";
        // Broken at a line boundary: nothing cut, the next line number is still reported.
        let mut r = LineReader::new(Path::new("f.gz"), Broken(b"a\nb\n", ErrorKind::InvalidData), 1 << 20, 100)
            .tolerate_corruption();
        assert_eq!(r.next_batch_in(Vec::new()).unwrap().unwrap().len(), 2);
        assert!(r.next_batch_in(Vec::new()).unwrap().is_none());
        assert_eq!(r.truncation().map(|t| (t.offset, t.line, t.fragment_bytes)), Some((4, 3, 0)));

        let mut strict = LineReader::new(Path::new("f.gz"), Broken(input, ErrorKind::UnexpectedEof), 1 << 20, 100);
        let e = strict.next_batch_in(Vec::new()).unwrap_err().to_string();
        assert!(e.contains("f.gz") && e.contains("past byte 11") && e.contains("after line 2"), "{e}");

        let mut r = LineReader::new(Path::new("f.gz"), Broken(input, ErrorKind::UnexpectedEof), 1 << 20, 100)
            .tolerate_corruption();
        let b = r.next_batch_in(Vec::new()).unwrap().unwrap();
        assert_eq!(b.lines, vec![LineSpan::Text(0..3), LineSpan::Text(4..7)]);
        assert!(r.next_batch_in(Vec::new()).unwrap().is_none());
        let t = r.truncation().unwrap();
        assert_eq!((t.offset, t.line, t.fragment_bytes), (11, 3, 3));

        // Real I/O errors are never tolerated.
        let mut r = LineReader::new(Path::new("f"), Broken(input, ErrorKind::PermissionDenied), 1 << 20, 100)
            .tolerate_corruption();
        assert!(r.next_batch_in(Vec::new()).is_err());
    }

    #[test]
    fn over_long_lines_are_reported_not_held() {
        let mut input = b"short\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', 5000));
        input.extend_from_slice(b"\nafter\n");
        let got = flat(&collect(&input[..], 16, 100, false));
        assert!(got == vec![Some(b"short".to_vec()), None, Some(b"after".to_vec())], "{} lines", got.len());
        // A line spanning several reads is discarded while streaming.
        let mut big = b"a\n".to_vec();
        big.extend(std::iter::repeat_n(b'y', 3 * READ_CHUNK + 5));
        big.extend_from_slice(b"\nb");
        let got = spans(LineReader::new(Path::new("t"), &big[..], 16, 1000));
        assert_eq!(got, [Ok(b"a".to_vec()), Err(LineSpan::TooLong(3 * READ_CHUNK as u64 + 5)), Ok(b"b".to_vec())]);
    }
}
