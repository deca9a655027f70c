//! Stage 1's on-disk format: the local cells, stored as "runs".
//!
//! Stage 1 buffers encoded contexts in memory and, when the buffer is full, writes them as one
//! run file `run_XXXXXXXX.cells` in which every cell owns one contiguous, checksummed segment.
//! Local cell `c` is the union of segment `c` of every run. A run is written to a temporary
//! name and renamed when complete, so a crash leaves whole runs or none: there is no torn or
//! half-appended cell to repair, and only a handful of files are ever open.
//!
//! Layout: records of cell 0, of cell 1, ..., then the index (one 32-byte entry per cell:
//! offset, bytes, count as u64, crc32 as u32, 4 reserved), then a 32-byte trailer (magic,
//! version u32, cell count u32, index offset u64, index crc32 u32, reserved u32). A record is
//! `id: u64 | len: u32 | payload`; all integers little-endian.

use std::fs::File;
use std::io::{IoSlice, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use libdeflater::Crc;

use crate::error::{Error, IoContext, Result};
use crate::fsutil::TempFile;

const MAGIC: &[u8; 8] = b"TKSHRUN\0";
const VERSION: u32 = 1;
const TRAILER: usize = 32;
const ENTRY: usize = 32;
/// Bytes before a record's payload.
pub const RECORD_HEADER: usize = 12;

/// One cell's segment in a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Segment {
    /// Byte offset in the run file.
    pub offset: u64,
    pub bytes: u64,
    pub count: u64,
    /// crc32 of its bytes.
    pub crc: u32,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    cell: u32,
    block: u32,
    id: u64,
    /// The record's bytes in its block, header included.
    start: usize,
    end: usize,
}

/// Append the record `id` to `out`: its header, then the payload `fill` appends.
pub fn push_record(out: &mut Vec<u8>, id: u64, fill: impl FnOnce(&mut Vec<u8>)) {
    let start = out.len();
    out.extend_from_slice(&id.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    fill(out);
    let len = u32::try_from(out.len() - start - RECORD_HEADER).expect("a record under 4 GiB");
    out[start + 8..start + RECORD_HEADER].copy_from_slice(&len.to_le_bytes());
}

/// Records waiting to be written as a run, in the blocks their encoders wrote them in, each
/// record laid out as in the file ([`push_record`]): none is copied on its way to the file.
#[derive(Debug, Default)]
pub struct RunBuffer {
    blocks: Vec<Vec<u8>>,
    entries: Vec<Entry>,
    payload: usize,
}

impl RunBuffer {
    /// Take `block`, records written by [`push_record`], the i-th for `cells[i]`. Returns the
    /// payload bytes added.
    pub fn push_records(&mut self, block: Vec<u8>, cells: &[u32]) -> usize {
        let b = u32::try_from(self.blocks.len()).expect("under 4 Gi blocks");
        let mut start = 0;
        for &cell in cells {
            let head = &block[start..start + RECORD_HEADER];
            let id = u64::from_le_bytes(head[..8].try_into().expect("8 bytes"));
            let len = u32::from_le_bytes(head[8..].try_into().expect("4 bytes")) as usize;
            let end = start + RECORD_HEADER + len;
            self.entries.push(Entry { cell, block: b, id, start, end });
            self.payload += len;
            start = end;
        }
        assert_eq!(start, block.len(), "a block holds whole records, one per cell given");
        self.blocks.push(block);
        start - cells.len() * RECORD_HEADER
    }

    /// Payload bytes buffered.
    pub fn bytes(&self) -> usize {
        self.payload
    }

    /// Records buffered.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is buffered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Write the buffer as the run `path` (temporary file, fsync, rename) and empty it. Within a
    /// cell, records are sorted by id, so the file does not depend on arrival order. Each block,
    /// emptied, goes to `recycle` once the file holds its bytes, before the sync: the next run
    /// fills it while this one reaches the disk.
    pub fn write(&mut self, path: &Path, cells: u32, mut recycle: impl FnMut(Vec<u8>)) -> Result<Vec<Segment>> {
        self.entries.sort_unstable_by_key(|e| (e.cell, e.id));
        let tmp = TempFile::new(path);
        let mut file = tmp.create()?;
        let mut segments = vec![Segment::default(); cells as usize];
        // Records go out a few hundred KiB at a time, straight from their blocks, each read
        // for its checksum just before the kernel copies it.
        let mut slices: Vec<IoSlice> = Vec::new();
        let mut pending = 0;
        let mut offset = 0u64;
        let mut rest = &self.entries[..];
        for (cell, seg) in segments.iter_mut().enumerate() {
            let n = rest.iter().take_while(|e| e.cell as usize == cell).count();
            let mut crc = Crc::new();
            for e in &rest[..n] {
                let record = &self.blocks[e.block as usize][e.start..e.end];
                crc.update(record);
                slices.push(IoSlice::new(record));
                pending += record.len();
                seg.bytes += record.len() as u64;
                if pending >= 256 << 10 || slices.len() >= 1024 {
                    write_all_vectored(&mut file, &mut slices).with_path(tmp.path())?;
                    pending = 0;
                }
            }
            rest = &rest[n..];
            (seg.offset, seg.count, seg.crc) = (offset, n as u64, crc.sum());
            offset += seg.bytes;
        }
        debug_assert!(rest.is_empty(), "every record belongs to a cell below the cell count");
        write_all_vectored(&mut file, &mut slices).with_path(tmp.path())?;
        drop(slices);
        self.entries.clear();
        self.payload = 0;
        for mut block in self.blocks.drain(..) {
            block.clear();
            recycle(block);
        }
        let mut index = Vec::with_capacity(segments.len() * ENTRY + TRAILER);
        for s in &segments {
            index.extend_from_slice(&s.offset.to_le_bytes());
            index.extend_from_slice(&s.bytes.to_le_bytes());
            index.extend_from_slice(&s.count.to_le_bytes());
            index.extend_from_slice(&s.crc.to_le_bytes());
            index.extend_from_slice(&[0u8; 4]);
        }
        let index_crc = libdeflater::crc32(&index);
        index.extend_from_slice(MAGIC);
        index.extend_from_slice(&VERSION.to_le_bytes());
        index.extend_from_slice(&cells.to_le_bytes());
        index.extend_from_slice(&offset.to_le_bytes());
        index.extend_from_slice(&index_crc.to_le_bytes());
        index.extend_from_slice(&[0u8; 4]);
        file.write_all(&index).with_path(tmp.path())?;
        file.sync_all().with_path(tmp.path())?;
        drop(file);
        tmp.commit()?;
        Ok(segments)
    }
}

/// Write every byte of `slices` and empty it.
fn write_all_vectored(file: &mut File, slices: &mut Vec<IoSlice>) -> std::io::Result<()> {
    let mut left = &mut slices[..];
    while !left.is_empty() {
        match file.write_vectored(left) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut left, n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    slices.clear();
    Ok(())
}

/// The index of a run file, read back for stage 2.
#[derive(Debug, Clone)]
pub struct Run {
    pub path: PathBuf,
    /// One segment per cell.
    pub segments: Vec<Segment>,
}

impl Run {
    /// Read and check the trailer and index of `path`, which must hold `cells` cells.
    pub fn open(path: &Path, cells: u32) -> Result<Self> {
        let file = File::open(path).with_path(path)?;
        let len = file.metadata().with_path(path)?.len();
        let bad = |msg: &str| Error::format(path, format!("not a complete tokshuf cell run: {msg}"));
        if len < TRAILER as u64 {
            return Err(bad("too short"));
        }
        let mut t = [0u8; TRAILER];
        file.read_exact_at(&mut t, len - TRAILER as u64).with_path(path)?;
        let u32_at = |b: &[u8], i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let u64_at = |b: &[u8], i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        if &t[..8] != MAGIC || u32_at(&t, 8) != VERSION || u32_at(&t, 28) != 0 {
            return Err(bad("bad magic or version"));
        }
        if u32_at(&t, 12) != cells {
            return Err(bad(&format!("it has {} cells, expected {cells}", u32_at(&t, 12))));
        }
        let index_offset = u64_at(&t, 16);
        let index_end = index_offset.checked_add(u64::from(cells) * ENTRY as u64 + TRAILER as u64);
        if index_end != Some(len) {
            return Err(bad("the index does not end where the trailer starts"));
        }
        let mut index = vec![0u8; cells as usize * ENTRY];
        file.read_exact_at(&mut index, index_offset).with_path(path)?;
        if libdeflater::crc32(&index) != u32_at(&t, 24) {
            return Err(bad("index checksum mismatch"));
        }
        let mut expect = 0u64;
        let segments = index
            .chunks_exact(ENTRY)
            .map(|e| {
                let s = Segment { offset: u64_at(e, 0), bytes: u64_at(e, 8), count: u64_at(e, 16), crc: u32_at(e, 24) };
                let framing = s.count.checked_mul(RECORD_HEADER as u64);
                if s.offset != expect || framing.is_none_or(|f| s.bytes < f) || s.bytes > index_offset - s.offset {
                    return Err(bad("inconsistent segment table"));
                }
                expect = s.offset + s.bytes;
                Ok(s)
            })
            .collect::<Result<Vec<_>>>()?;
        if expect != index_offset {
            return Err(bad("segments do not fill the data area"));
        }
        Ok(Self { path: path.to_path_buf(), segments })
    }

    /// Append the bytes of `cell`'s segment to `out` (checksum verified); returns its record count.
    pub fn read_cell(&self, cell: u32, out: &mut Vec<u8>) -> Result<u64> {
        let s = self.segments[cell as usize];
        if s.bytes == 0 {
            return Ok(0);
        }
        let file = File::open(&self.path).with_path(&self.path)?;
        let start = out.len();
        out.resize(start + s.bytes as usize, 0);
        file.read_exact_at(&mut out[start..], s.offset).with_path(&self.path)?;
        if libdeflater::crc32(&out[start..]) != s.crc {
            return Err(Error::format(&self.path, format!("cell {cell}: checksum mismatch (the file is corrupt)")));
        }
        Ok(s.count)
    }

    /// Give the disk space of cells `cells` back to the file system (best effort: a file system
    /// without hole punching keeps the bytes until the run is deleted). Those cells must never
    /// be read again.
    pub fn release(&self, cells: std::ops::Range<u32>) {
        if cells.is_empty() {
            return;
        }
        let first = self.segments[cells.start as usize];
        let last = self.segments[cells.end as usize - 1];
        let (offset, len) = (first.offset, last.offset + last.bytes - first.offset);
        if len == 0 {
            return;
        }
        if let Ok(file) = std::fs::OpenOptions::new().write(true).open(&self.path) {
            // SAFETY: fallocate on a valid, owned descriptor; no memory is passed.
            let _ = unsafe {
                libc::fallocate(
                    std::os::unix::io::AsRawFd::as_raw_fd(&file),
                    libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                    offset as libc::off_t,
                    len as libc::off_t,
                )
            };
        }
    }
}

/// A record inside a loaded cell buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRef {
    /// Content id.
    pub id: u64,
    /// Payload start in the buffer.
    pub start: usize,
    /// Payload length.
    pub len: u32,
}

/// Split concatenated segments into records, checking the framing.
pub fn parse_records(buf: &[u8], expected: u64, path: &Path) -> Result<Vec<RecordRef>> {
    let mut out = Vec::with_capacity(expected as usize);
    let mut pos = 0usize;
    while pos < buf.len() {
        if buf.len() - pos < RECORD_HEADER {
            return Err(Error::format(path, "a cell record header is cut off"));
        }
        let id = u64::from_le_bytes(buf[pos..pos + 8].try_into().expect("8 bytes"));
        let len = u32::from_le_bytes(buf[pos + 8..pos + 12].try_into().expect("4 bytes"));
        let start = pos + RECORD_HEADER;
        if buf.len() - start < len as usize {
            return Err(Error::format(path, "a cell record is cut off"));
        }
        out.push(RecordRef { id, start, len });
        pos = start + len as usize;
    }
    if out.len() as u64 != expected {
        return Err(Error::format(path, format!("a cell holds {} records, its index says {expected}", out.len())));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push(b: &mut RunBuffer, cell: u32, id: u64, payload: &[u8]) {
        let mut block = Vec::new();
        push_record(&mut block, id, |out| out.extend_from_slice(payload));
        b.push_records(block, &[cell]);
    }

    #[test]
    fn runs_round_trip_and_sort_by_id() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run_00000000.cells");
        let mut b = RunBuffer::default();
        push(&mut b, 2, 50, b"fifty");
        push(&mut b, 0, 7, b"seven");
        push(&mut b, 2, 3, b"three");
        push(&mut b, 0, 1, b"");
        let segs = b.write(&path, 3, drop).unwrap();
        assert!(b.is_empty());
        assert_eq!(segs.iter().map(|s| s.count).collect::<Vec<_>>(), vec![2, 0, 2]);
        let run = Run::open(&path, 3).unwrap();
        assert_eq!(run.segments, segs);
        let mut buf = Vec::new();
        let n = run.read_cell(2, &mut buf).unwrap();
        let recs = parse_records(&buf, n, &path).unwrap();
        let got: Vec<(u64, &[u8])> = recs.iter().map(|r| (r.id, &buf[r.start..r.start + r.len as usize])).collect();
        assert_eq!(got, vec![(3, &b"three"[..]), (50, &b"fifty"[..])]);
        assert!(Run::open(&path, 4).is_err());
    }

    #[test]
    fn released_cells_free_their_blocks_and_the_rest_stays_readable() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.cells");
        let mut b = RunBuffer::default();
        for cell in 0..3u32 {
            push(&mut b, cell, u64::from(cell), &vec![cell as u8 + 1; 1 << 20]);
        }
        b.write(&path, 3, drop).unwrap();
        let run = Run::open(&path, 3).unwrap();
        let before = std::fs::metadata(&path).unwrap().blocks();
        run.release(0..2);
        let after = std::fs::metadata(&path).unwrap().blocks();
        // Some file systems (tmpfs on old kernels, ...) cannot punch holes; then nothing changes.
        assert!(after == before || after < before - 2 * 2048 + 64, "{before} -> {after}");
        let mut buf = Vec::new();
        assert_eq!(run.read_cell(2, &mut buf).unwrap(), 1);
        assert!(buf[RECORD_HEADER..].iter().all(|&x| x == 3));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), (3 * ((1 << 20) + 12) + 3 * 32 + 32) as u64);
    }

    #[test]
    fn corruption_is_detected() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.cells");
        let mut b = RunBuffer::default();
        push(&mut b, 0, 1, b"payload");
        b.write(&path, 1, drop).unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[13] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let run = Run::open(&path, 1).unwrap();
        let err = run.read_cell(0, &mut Vec::new()).unwrap_err();
        assert!(err.to_string().contains("checksum"), "{err}");
        std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        assert!(matches!(Run::open(&path, 1), Err(Error::Format { .. })));
    }
}
