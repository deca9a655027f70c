//! Files that appear complete or not at all: write to a temporary name, rename when done.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{IoContext, Result};

/// A temporary sibling of `target`, renamed onto it by [`TempFile::commit`] and
/// removed on drop otherwise (error, panic, cancellation).
#[derive(Debug)]
pub struct TempFile {
    tmp: PathBuf,
    target: PathBuf,
    committed: bool,
}

impl TempFile {
    /// Reserve a unique temporary name next to `target` (same directory, so the rename is atomic).
    pub fn new(target: impl Into<PathBuf>) -> Self {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let target = target.into();
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let mut name = target.file_name().map(|s| s.to_os_string()).unwrap_or_default();
        name.push(format!(".tmp-{}-{n}", std::process::id()));
        Self { tmp: target.with_file_name(name), target, committed: false }
    }

    /// The temporary path to write to.
    pub fn path(&self) -> &Path {
        &self.tmp
    }

    /// The final path.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Create (truncate) the temporary file for writing.
    pub fn create(&self) -> Result<File> {
        File::create(&self.tmp).with_path(&self.tmp)
    }

    /// Rename the temporary file onto the target.
    pub fn commit(mut self) -> Result<()> {
        std::fs::rename(&self.tmp, &self.target).with_path(&self.target)?;
        self.committed = true;
        Ok(())
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Write `bytes` to `target` atomically (temporary file, fsync, rename).
pub fn write_atomic(target: impl Into<PathBuf>, bytes: &[u8]) -> Result<()> {
    let tmp = TempFile::new(target);
    let mut f = tmp.create()?;
    f.write_all(bytes).with_path(tmp.path())?;
    f.sync_all().with_path(tmp.path())?;
    drop(f);
    tmp.commit()
}

/// A file written front to back whose pages are sent to the disk as it grows, so that the
/// `sync_all` that makes it durable at the end has less left to wait for (on a 200 MB output,
/// 0.25 s instead of 0.36 s, a twentieth of the job). (Linux; elsewhere a plain file.)
#[derive(Debug)]
pub struct StreamingFile {
    file: File,
    written: u64,
    /// Bytes before this offset have been handed to the disk.
    kicked: u64,
    /// Start writeback every this many bytes.
    every: u64,
    /// The length of the range kicked last (it ends at `kicked`).
    previous: u64,
}

impl StreamingFile {
    pub fn new(file: File) -> Self {
        Self::with_writeback_every(file, 16 << 20)
    }

    fn with_writeback_every(file: File, every: u64) -> Self {
        Self { file, written: 0, kicked: 0, every, previous: 0 }
    }

    /// Flush what is left and wait until all of it is on the disk.
    pub fn sync_all(&self) -> std::io::Result<()> {
        self.file.sync_all()
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
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        self.written += n as u64;
        if self.written - self.kicked >= self.every {
            self.kick();
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

/// `prefix` + `suffix` as a path (`data/x` + `.bin` → `data/x.bin`), keeping dots in the prefix.
pub fn with_suffix(prefix: &Path, suffix: &str) -> PathBuf {
    let mut s = prefix.as_os_str().to_os_string();
    s.push(suffix);
    PathBuf::from(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streaming_file_holds_exactly_what_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.bin");
        let mut f = StreamingFile::with_writeback_every(File::create(&path).unwrap(), 4096);
        let mut expected = Vec::new();
        for i in 0..500usize {
            let chunk: Vec<u8> = (0..(i * 37) % 3001).map(|j| (i * 31 + j) as u8).collect();
            f.write_all(&chunk).unwrap();
            expected.extend_from_slice(&chunk);
        }
        assert!(f.kicked > 0 && f.written == expected.len() as u64);
        f.sync_all().unwrap();
        drop(f);
        assert_eq!(std::fs::read(&path).unwrap(), expected);
    }
}
