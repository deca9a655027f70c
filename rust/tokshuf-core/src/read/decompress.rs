//! A file's bytes as a stream of decompressed bytes, the format chosen by its last extension.

use std::io::{self, BufRead, BufReader, ErrorKind, Read};
use std::path::Path;

use crate::error::Result;

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

/// Decompress `raw` (the bytes of `path`, which picks the format by its extension). Decoding
/// errors (a truncated or corrupt stream) surface as `io::Error`s from `read`, which callers
/// report with the path.
pub fn decompress(path: &Path, raw: impl Read + Send + 'static) -> Result<Box<dyn Read + Send>> {
    // Infallible today; kept a `Result` for callers that open with a path.
    Ok(match Compression::from_path(path) {
        // Unbuffered: the line reader asks for 64 KiB to 1 MiB at a time, and a buffer in
        // between copied every byte of the input once more (1.6% of a one-core `preprocess`).
        // Callers that read a little at a time buffer the result themselves.
        Compression::None => Box::new(raw),
        format => decompress_buffered(format, BufReader::with_capacity(1 << 20, raw)),
    })
}

/// Decompress buffered `raw` as `format` (standard input, whose format is told by its magic).
pub fn decompress_buffered(format: Compression, raw: impl BufRead + Send + 'static) -> Box<dyn Read + Send> {
    match format {
        Compression::None => Box::new(raw),
        format => Box::new(Members::new(format, raw)),
    }
}

/// A [`BufRead`] that counts the bytes consumed from it: the position in the compressed file,
/// for messages that say where a member starts or where trailing data begins.
struct Counted<R> {
    inner: R,
    pos: u64,
}

impl<R: BufRead> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Counted<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.inner.fill_buf()
    }

    fn consume(&mut self, amt: usize) {
        self.pos += amt as u64;
        self.inner.consume(amt);
    }
}

enum MemberState<R: BufRead> {
    /// Between members (or before the first): the next bytes decide what comes.
    Between(Counted<R>),
    /// Inside the gzip member that starts at the given byte.
    Gzip(Box<flate2::bufread::GzDecoder<Counted<R>>>, u64),
    /// Inside the zstd frame that starts at the given byte.
    Zstd(zstd::stream::read::Decoder<'static, Counted<R>>, u64),
    /// After the last member, or after an error (which is not repeated as a different one).
    Done,
}

/// The decoder of one member, over the compressed input.
trait MemberDecoder<R: BufRead>: Read {
    /// The compressed input from where the decoder has read to.
    fn raw(&mut self) -> &mut Counted<R>;
    /// The compressed input after the member, once the decoder has read it whole.
    fn into_raw(self) -> Counted<R>;
}

impl<R: BufRead> MemberDecoder<R> for Box<flate2::bufread::GzDecoder<Counted<R>>> {
    fn raw(&mut self) -> &mut Counted<R> {
        self.get_mut()
    }

    fn into_raw(self) -> Counted<R> {
        (*self).into_inner()
    }
}

impl<R: BufRead> MemberDecoder<R> for zstd::stream::read::Decoder<'static, Counted<R>> {
    fn raw(&mut self) -> &mut Counted<R> {
        self.get_mut()
    }

    fn into_raw(self) -> Counted<R> {
        self.finish()
    }
}

/// Concatenated gzip members or zstd frames, decoded one at a time so that each failure can be
/// told apart and said plainly: a file that is not compressed at all (no magic at byte 0),
/// trailing bytes after the last complete member that are not a member, or a member that is cut
/// short or corrupt, each with its byte offset in the file. The generic multi-member decoders
/// report all of these as "invalid gzip header", "unexpected end of file" or "Unknown frame
/// descriptor". Zero bytes after a gzip member are padding (as tape blocks leave), which `gzip -d`
/// and Python's gzip skip, so they are skipped here too.
struct Members<R: BufRead> {
    format: Compression,
    state: MemberState<R>,
    /// Complete members read so far.
    members: u64,
}

const GZIP_MAGIC: &[u8] = &[0x1f, 0x8b];
const ZSTD_MAGIC: &[u8] = &[0x28, 0xb5, 0x2f, 0xfd];

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(" ")
}

fn invalid(message: String) -> io::Error {
    io::Error::new(ErrorKind::InvalidData, message)
}

impl<R: BufRead> Members<R> {
    fn new(format: Compression, raw: R) -> Self {
        Self { format, state: MemberState::Between(Counted { inner: raw, pos: 0 }), members: 0 }
    }

    fn unit(&self) -> &'static str {
        if self.format == Compression::Zstd {
            "frame"
        } else {
            "member"
        }
    }

    /// Whether `head` (the first bytes available, maybe fewer than a magic number) can begin a
    /// member. A zstd skippable frame (magic 0x184D2A5?, little-endian) is a frame the decoder
    /// skips.
    fn starts_member(&self, head: &[u8]) -> bool {
        let prefix_of = |magic: &[u8]| head.iter().zip(magic).all(|(a, b)| a == b);
        match self.format {
            Compression::Gzip => prefix_of(GZIP_MAGIC),
            _ => {
                prefix_of(ZSTD_MAGIC)
                    || (head[0] & 0xf0 == 0x50 && head[1..].iter().zip([0x2a, 0x4d, 0x18]).all(|(&a, b)| a == b))
            }
        }
    }

    /// At a member boundary (`head` not empty is checked here): start the next member, skip gzip
    /// padding, or end; sets the state to go on with.
    fn next_member(&mut self, mut raw: Counted<R>) -> io::Result<()> {
        let name = self.format.name();
        let head = raw.fill_buf()?;
        if head.is_empty() {
            self.state = MemberState::Done;
            return Ok(());
        }
        if self.members > 0 && self.format == Compression::Gzip && head[0] == 0 {
            let zeros = head.iter().take_while(|&&b| b == 0).count();
            raw.consume(zeros);
            self.state = MemberState::Between(raw);
            return Ok(());
        }
        if !self.starts_member(head) {
            let shown = hex(&head[..head.len().min(4)]);
            let magic = hex(if self.format == Compression::Gzip { GZIP_MAGIC } else { ZSTD_MAGIC });
            let message = if self.members == 0 {
                format!("not a {name} file: it starts with the bytes {shown}, not the {name} magic number {magic} (rename it if it is not compressed)")
            } else {
                format!(
                    "trailing data at byte {} of the file is not a {name} {unit} (it starts with the bytes {shown}, not {magic}); the {n} complete {unit}(s) before it were read",
                    raw.pos,
                    unit = self.unit(),
                    n = self.members
                )
            };
            return Err(invalid(message));
        }
        let start = raw.pos;
        self.state = match self.format {
            Compression::Gzip => MemberState::Gzip(Box::new(flate2::bufread::GzDecoder::new(raw)), start),
            _ => MemberState::Zstd(zstd::stream::read::Decoder::with_buffer(raw)?.single_frame(), start),
        };
        Ok(())
    }

    /// Say what went wrong inside the member that starts at `start` (a failed read of the
    /// compressed bytes from a store is not this: it is passed on as it is).
    fn member_error(&self, e: io::Error, start: u64, at_eof: bool) -> io::Error {
        let (name, unit) = (self.format.name(), self.unit());
        if e.kind() == ErrorKind::UnexpectedEof || at_eof {
            invalid(format!(
                "the file is truncated: it ends inside the {name} {unit} that starts at byte {start} ({e})"
            ))
        } else {
            invalid(format!("the {name} {unit} that starts at byte {start} of the file is corrupt ({e})"))
        }
    }

    /// Read from the member that starts at `start`, decoded by `d`, which `state` puts back;
    /// `None` when the member has ended (the state is then the input after it).
    #[inline]
    fn read_member<D: MemberDecoder<R>>(
        &mut self,
        mut d: D,
        start: u64,
        buf: &mut [u8],
        state: impl FnOnce(D, u64) -> MemberState<R>,
    ) -> Option<io::Result<usize>> {
        match d.read(buf) {
            // The member ended, its trailer checked: go on with what follows it.
            Ok(0) => {
                self.members += 1;
                self.state = MemberState::Between(d.into_raw());
                None
            }
            Ok(n) => {
                self.state = state(d, start);
                Some(Ok(n))
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {
                self.state = state(d, start);
                Some(Err(e))
            }
            Err(e) if crate::storage::is_store_error(&e) => Some(Err(e)),
            Err(e) => {
                let at_eof = d.raw().fill_buf().is_ok_and(|b| b.is_empty());
                Some(Err(self.member_error(e, start, at_eof)))
            }
        }
    }
}

impl<R: BufRead> Read for Members<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            // Taken out and put back: a member's decoder is given up for its input at its end.
            let read = match std::mem::replace(&mut self.state, MemberState::Done) {
                MemberState::Done => return Ok(0),
                MemberState::Between(raw) => {
                    self.next_member(raw)?;
                    continue;
                }
                MemberState::Gzip(d, start) => self.read_member(d, start, buf, MemberState::Gzip),
                MemberState::Zstd(d, start) => self.read_member(d, start, buf, MemberState::Zstd),
            };
            if let Some(read) = read {
                return read;
            }
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gz(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn zst(data: &[u8]) -> Vec<u8> {
        zstd::stream::encode_all(data, 3).unwrap()
    }

    /// Decode `blob` as `format` through a reader that gives at most `chunk` bytes per fill, so
    /// member boundaries and magic numbers fall across buffer edges.
    fn decode(format: Compression, blob: &[u8], chunk: usize) -> io::Result<Vec<u8>> {
        let raw = BufReader::with_capacity(chunk, blob);
        let mut out = Vec::new();
        Members::new(format, raw).read_to_end(&mut out)?;
        Ok(out)
    }

    #[test]
    fn members_and_frames_are_concatenated_at_any_buffer_size() {
        for chunk in [1, 2, 3, 7, 1 << 16] {
            let blob = [gz(b"one\n"), gz(b""), gz(b"two\n")].concat();
            assert_eq!(decode(Compression::Gzip, &blob, chunk).unwrap(), b"one\ntwo\n");
            let blob = [zst(b"one\n"), zst(b"two\n")].concat();
            assert_eq!(decode(Compression::Zstd, &blob, chunk).unwrap(), b"one\ntwo\n");
            assert_eq!(decode(Compression::Gzip, b"", chunk).unwrap(), b"");
        }
    }

    #[test]
    fn gzip_zero_padding_is_skipped_between_and_after_members() {
        for chunk in [1, 5, 1 << 16] {
            let blob = [gz(b"a\n"), vec![0; 700], gz(b"b\n"), vec![0; 3]].concat();
            assert_eq!(decode(Compression::Gzip, &blob, chunk).unwrap(), b"a\nb\n");
        }
        // Zero bytes before the first member are not padding: the file is not gzip.
        let e = decode(Compression::Gzip, &[vec![0; 4], gz(b"a")].concat(), 64).unwrap_err();
        assert!(e.to_string().starts_with("not a gzip file: it starts with the bytes 00 00 00 00"), "{e}");
    }

    #[test]
    fn each_failure_is_named_with_its_offset() {
        let plain = b"{\"text\": 1}\n";
        for (format, magic) in [(Compression::Gzip, "1f 8b"), (Compression::Zstd, "28 b5 2f fd")] {
            let e = decode(format, plain, 64).unwrap_err().to_string();
            let name = format.name();
            let want =
                format!("not a {name} file: it starts with the bytes 7b 22 74 65, not the {name} magic number {magic}");
            assert!(e.starts_with(&want), "{e}");
        }

        for (format, good) in [(Compression::Gzip, [gz(b"a\n"), gz(b"b\n")].concat()), (Compression::Zstd, zst(b"a\n"))]
        {
            let unit = if format == Compression::Gzip { "member" } else { "frame" };
            let e = decode(format, &[&good[..], b"junk"].concat(), 3).unwrap_err().to_string();
            let want = format!("trailing data at byte {} of the file is not a {} {unit}", good.len(), format.name());
            assert!(e.starts_with(&want), "{e}");

            let cut = &good[..good.len() - 3];
            let e = decode(format, cut, 64).unwrap_err().to_string();
            assert!(e.starts_with("the file is truncated: it ends inside the"), "{e}");
        }
        // A member with a corrupt body (not at the end of the file) is called corrupt, with where it starts.
        let first = gz(&[b'x'; 1000]);
        let mut bad = [first.clone(), gz(b"tail")].concat();
        bad[15] ^= 0xff;
        let e = decode(Compression::Gzip, &bad, 64).unwrap_err().to_string();
        assert!(e.starts_with("the gzip member that starts at byte 0 of the file is corrupt"), "{e}");
    }
}
