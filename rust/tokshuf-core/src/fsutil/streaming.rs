//! A large output file written front to back (the `.bin` of an indexed dataset).
//!
//! Where the filesystem allows it (Linux, `O_DIRECT`), full buffers go from user memory to the
//! disk without passing through the page cache. A buffered `write` copies every byte into fresh
//! page-cache pages, which on a virtual machine costs far more than the copy: 206 MB of tokens
//! took 0.66 s of kernel time that way against 0.01 s direct, on 2 cores where the tokenizer
//! needs every cycle. The output also no longer evicts the input from the cache, and the final
//! sync has only the last page left to write. Elsewhere (tmpfs, other systems, a filesystem that
//! refuses an unaligned write) the same buffers go through `write`, and the written range is
//! handed to the disk every [`WRITEBACK_EVERY`] bytes so that the final sync has less to wait for.
//! `TOKSHUF_DIRECT_IO=0` asks for that path everywhere (say, for a network filesystem whose direct
//! writes are slow).
//!
//! The bytes are summed (CRC32C, for the set's commit record) as they are handed over, while they
//! are still in the core's cache: summing each 8 MiB buffer as it left for the disk cost twice as
//! much (`benches/bench_commit.py`).

use std::fs::File;
use std::io::{self, Write};

use super::record::{Checksum, Sum};

/// Bytes buffered before a write: a multiple of any block size `O_DIRECT` asks for.
const CAPACITY: usize = 8 << 20;
/// Alignment of the buffer, the file offsets and the lengths of direct writes.
const ALIGN: usize = 4096;
/// Buffered mode: start writeback every this many bytes.
const WRITEBACK_EVERY: u64 = 16 << 20;

/// Set to `0` to write through the page cache on every filesystem.
const DIRECT_IO_ENV: &str = "TOKSHUF_DIRECT_IO";

#[derive(Debug)]
pub struct StreamingFile {
    file: File,
    /// Holds `CAPACITY` bytes from an `ALIGN`-aligned offset.
    storage: Vec<u8>,
    /// Bytes waiting in the buffer.
    len: usize,
    /// Full buffers bypass the page cache.
    direct: bool,
    /// Bytes handed to the file.
    written: u64,
    /// Buffered mode: bytes before this offset have been handed to the disk.
    kicked: u64,
    /// Buffered mode: the length of the range kicked last (it ends at `kicked`).
    previous: u64,
    every: u64,
    /// What was handed to the file so far.
    sum: Checksum,
}

impl StreamingFile {
    /// Write `file` (empty, opened for writing) directly where the filesystem allows it (and
    /// `TOKSHUF_DIRECT_IO=0` does not forbid it).
    pub fn new(file: File) -> Self {
        let direct = crate::env_on(DIRECT_IO_ENV) && set_direct(&file, true).is_ok();
        Self::with_mode(file, direct, WRITEBACK_EVERY)
    }

    fn with_mode(file: File, direct: bool, every: u64) -> Self {
        Self {
            file,
            storage: vec![0; CAPACITY + ALIGN],
            len: 0,
            direct,
            written: 0,
            kicked: 0,
            previous: 0,
            every,
            sum: Checksum::new(),
        }
    }

    /// Where the aligned buffer starts in `storage`.
    fn start(&self) -> usize {
        self.storage.as_ptr().align_offset(ALIGN)
    }

    fn buffer(&mut self) -> &mut [u8] {
        let start = self.start();
        &mut self.storage[start..start + CAPACITY]
    }

    /// Write what is buffered and wait until the whole file is on the disk; the file's size
    /// and checksum.
    pub fn finish(mut self) -> io::Result<Sum> {
        self.drain()?;
        if self.len > 0 {
            // The tail is shorter than a block: the page cache takes it.
            self.go_buffered()?;
            self.drain()?;
        }
        self.file.sync_all()?;
        Ok(self.sum.sum())
    }

    /// Write the buffer out: all of it, or in direct mode its whole blocks (the rest moves to
    /// the front).
    fn drain(&mut self) -> io::Result<()> {
        super::fault::point()?;
        let n = if self.direct { self.len / ALIGN * ALIGN } else { self.len };
        let mut done = 0;
        while done < n {
            let (direct, start) = (self.direct, self.start());
            match (&self.file).write(&self.storage[start + done..start + n]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                // A short direct write leaves the file offset unaligned: go on buffered.
                Ok(k) if direct && k % ALIGN != 0 => {
                    done += k;
                    self.go_buffered()?;
                }
                Ok(k) => done += k,
                Err(e) if direct && e.raw_os_error() == Some(libc::EINVAL) => self.go_buffered()?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.written += n as u64;
        let rest = self.len - n;
        self.buffer().copy_within(n..n + rest, 0);
        self.len = rest;
        if !self.direct && self.written - self.kicked >= self.every {
            self.kick();
        }
        Ok(())
    }

    fn go_buffered(&mut self) -> io::Result<()> {
        set_direct(&self.file, false)?;
        self.direct = false;
        Ok(())
    }

    /// Start writing out the bytes since the last call, and wait for the range before them: at
    /// most two ranges are in flight, so the disk keeps pace with the writer (which it easily
    /// outruns) and dirty pages do not pile up for the final sync.
    #[cfg(target_os = "linux")]
    fn kick(&mut self) {
        use std::os::fd::AsRawFd;
        let fd = self.file.as_raw_fd();
        let (start, len) = (self.kicked, self.written - self.kicked);
        // SAFETY: a valid descriptor and ranges of it; the calls only start or wait for writeback,
        // and their failure only leaves the work to the final sync.
        unsafe {
            if self.previous > 0 {
                let wait =
                    libc::SYNC_FILE_RANGE_WAIT_BEFORE | libc::SYNC_FILE_RANGE_WRITE | libc::SYNC_FILE_RANGE_WAIT_AFTER;
                libc::sync_file_range(fd, (start - self.previous) as i64, self.previous as i64, wait);
            }
            libc::sync_file_range(fd, start as i64, len as i64, libc::SYNC_FILE_RANGE_WRITE);
        }
        (self.kicked, self.previous) = (self.written, len);
    }

    #[cfg(not(target_os = "linux"))]
    fn kick(&mut self) {
        self.kicked = self.written;
    }
}

impl Write for StreamingFile {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if self.len == CAPACITY {
            self.drain()?;
        }
        let n = data.len().min(CAPACITY - self.len);
        let len = self.len;
        // Summed as it arrives, while the caller's bytes are still in the core's cache.
        self.sum.update(&data[..n]);
        self.buffer()[len..len + n].copy_from_slice(&data[..n]);
        self.len += n;
        Ok(n)
    }

    /// Writes whole blocks only in direct mode; [`StreamingFile::finish`] writes the rest.
    fn flush(&mut self) -> io::Result<()> {
        self.drain()
    }
}

/// Turn `O_DIRECT` on or off for an open file (fails where the filesystem does not support it).
#[cfg(target_os = "linux")]
fn set_direct(file: &File, on: bool) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: fcntl on a valid descriptor with integer arguments.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 {
            return Err(io::Error::last_os_error());
        }
        let flags = if on { flags | libc::O_DIRECT } else { flags & !libc::O_DIRECT };
        if libc::fcntl(fd, libc::F_SETFL, flags) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn set_direct(_file: &File, on: bool) -> io::Result<()> {
    if on {
        Err(io::ErrorKind::Unsupported.into())
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Write `chunks` through a file in the given mode; what the file holds afterwards. Where the
    /// filesystem takes `O_DIRECT` at all, it must take every write: no silent fallback.
    fn written(chunks: &[Vec<u8>], direct: bool, flush_every: usize) -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.bin");
        let file = File::create(&path).unwrap();
        let direct = direct && set_direct(&file, true).is_ok();
        let mut f = StreamingFile::with_mode(file, direct, 4096);
        for (i, chunk) in chunks.iter().enumerate() {
            f.write_all(chunk).unwrap();
            if flush_every > 0 && i % flush_every == 0 {
                f.flush().unwrap();
            }
        }
        assert_eq!(f.direct, direct, "direct writes fell back to buffered ones");
        let sum = f.finish().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(sum, Checksum::of(&bytes), "the sum is not that of the bytes written");
        bytes
    }

    fn chunks(seed: usize, count: usize, max: usize) -> Vec<Vec<u8>> {
        (0..count).map(|i| (0..(i * 7919 + seed) % max).map(|j| (i * 31 + j + seed) as u8).collect()).collect()
    }

    #[test]
    fn holds_exactly_what_was_written_direct_or_not() {
        // Several buffers' worth, in pieces that straddle every boundary.
        let data = chunks(7, 700, 60_000);
        let expected = data.concat();
        assert!(expected.len() > 2 * CAPACITY);
        for direct in [true, false] {
            for flush_every in [0, 3] {
                let got = written(&data, direct, flush_every);
                assert!(got == expected, "direct {direct}, flush every {flush_every}: contents differ");
            }
        }
    }

    #[test]
    fn a_buffered_file_hands_ranges_to_the_disk_as_it_grows() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = StreamingFile::with_mode(File::create(dir.path().join("f")).unwrap(), false, 4096);
        for chunk in chunks(1, 300, 3001) {
            f.write_all(&chunk).unwrap();
            f.flush().unwrap();
        }
        assert!(f.kicked > 0 && f.previous > 0);
        f.finish().unwrap();
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn any_sequence_of_writes_and_flushes_is_kept(
            sizes in proptest::collection::vec(0usize..20_000, 0..40),
            direct: bool,
            flush_every in 0usize..4,
        ) {
            let data: Vec<Vec<u8>> = sizes.iter().enumerate().map(|(i, &n)| vec![i as u8 ^ 0x5a; n]).collect();
            let got = written(&data, direct, flush_every);
            prop_assert!(got == data.concat());
        }
    }
}
