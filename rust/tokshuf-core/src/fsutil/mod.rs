//! Files that appear complete or not at all: write to a temporary name, rename when done;
//! several files of one run are staged and moved into place together by [`Staging`].

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{IoContext, Result};

pub mod fault;
mod os;
pub mod record;
mod staging;
mod streaming;
pub use staging::{remove_dead_temporaries, remove_dead_temporaries_in, RecordSpec, Staging};
pub use streaming::StreamingFile;

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

    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Create (truncate) the temporary file for writing.
    pub fn create(&self) -> Result<File> {
        File::create(&self.tmp).with_path(&self.tmp)
    }

    /// Rename the temporary file onto the target.
    pub fn commit(mut self) -> Result<()> {
        fault::point().with_path(&self.target)?;
        std::fs::rename(&self.tmp, &self.target).with_path(&self.target)?;
        self.committed = true;
        Ok(())
    }

    /// Forget the temporary name: something else moved the file into place.
    fn placed(mut self) {
        self.committed = true;
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// The bytes of a JSON file tokshuf writes (summaries, state): pretty, ending in a newline, with
/// any credential masked (inputs, skip records and error messages are copied into them, and an
/// input URL may carry a password or a signature).
pub fn json_file_bytes(value: &impl serde::Serialize) -> Result<Vec<u8>> {
    let text = serde_json::to_string_pretty(value).map_err(|e| crate::Error::invalid(e.to_string()))?;
    let mut bytes = crate::storage::redact(&text).into_owned().into_bytes();
    bytes.push(b'\n');
    Ok(bytes)
}

/// Write `bytes` as `target`, which appears whole or not at all: a local file is replaced
/// atomically ([`write_atomic`]), an object in a store is written in one request. With
/// [`json_file_bytes`], the one writer of summary files whichever command made them.
pub fn write_whole(target: &Path, bytes: Vec<u8>) -> Result<()> {
    match crate::storage::remote(target)? {
        Some(object) => crate::storage::put(&object, bytes),
        None => write_atomic(target, &bytes),
    }
}

/// Write `bytes` to `target` atomically (temporary file, fsync, rename).
pub fn write_atomic(target: impl Into<PathBuf>, bytes: &[u8]) -> Result<()> {
    write_synced(target, bytes)?.commit()
}

/// `bytes` written and synced to a temporary sibling of `target`, not yet renamed.
fn write_synced(target: impl Into<PathBuf>, bytes: &[u8]) -> Result<TempFile> {
    let tmp = TempFile::new(target);
    let mut f = tmp.create()?;
    fault::point().with_path(tmp.path())?;
    f.write_all(bytes).with_path(tmp.path())?;
    f.sync_all().with_path(tmp.path())?;
    Ok(tmp)
}

/// Fill `buf` from `r` as far as it goes.
pub(crate) fn read_up_to(r: &mut impl std::io::Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// `prefix` + `suffix` as a path (`data/x` + `.bin` → `data/x.bin`), keeping dots in the prefix.
pub fn with_suffix(prefix: &Path, suffix: &str) -> PathBuf {
    let mut s = prefix.as_os_str().to_os_string();
    s.push(suffix);
    PathBuf::from(s)
}

/// Refuse to write `outputs` when one of them is one of `inputs` (the same file, whatever the
/// path that names it; or the same object URL): an output never replaces an input.
pub fn check_outputs_are_not_inputs(outputs: &[PathBuf], inputs: &[PathBuf]) -> Result<()> {
    use std::os::unix::fs::MetadataExt as _;
    let id = |p: &Path| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
    let inputs: Vec<(&PathBuf, Option<(u64, u64)>)> = inputs.iter().map(|p| (p, id(p))).collect();
    for out in outputs {
        let out_id = if crate::storage::is_remote(&out.to_string_lossy()) { None } else { id(out) };
        let same = inputs.iter().find(|(p, i)| *p == out || (out_id.is_some() && *i == out_id));
        if let Some((input, _)) = same {
            return Err(crate::error::Error::invalid(format!(
                "the output {} is also an input ({}): an output never replaces an input; choose another output",
                out.display(),
                input.display()
            )));
        }
    }
    Ok(())
}
