//! Local copies of objects for the readers that map their data (`.idx/.bin`, `.npy`): an object
//! is downloaded once into the cache directory and mapped from there.
//!
//! The copy of `s3://bucket/a/b.bin` is `{cache}/remote/s3/bucket/a/b.bin`, so the `.idx` and
//! `.bin` of a prefix stay side by side and a remote prefix has a local one. Beside it,
//! `b.bin.source.json` records the object's size and ETag: each open asks the store for them
//! (one HEAD request) and downloads again only when they changed. A download goes to a temporary
//! name and is renamed into place when complete, under a lock shared by every process of the
//! machine, so DataLoader workers opening the same dataset download it once and nobody maps a
//! partial file. The cache directory is `$TOKSHUF_CACHE_DIR`, else `$XDG_CACHE_HOME/tokshuf`,
//! else `~/.cache/tokshuf`.

use std::fs::File;
use std::io::{Read as _, Write as _};
use std::os::fd::AsRawFd as _;
use std::path::{Path, PathBuf};

use super::read::RemoteReader;
use super::stores::Remote;
use crate::cancel::Cancel;
use crate::error::{Error, IoContext, Result};

pub fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("TOKSHUF_CACHE_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let base = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()).map(PathBuf::from).unwrap_or_else(|| {
        std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(std::env::temp_dir).join(".cache")
    });
    base.join("tokshuf")
}

/// Where the local copy of the object `url` lives (whether or not it is there yet).
pub fn local_path(url: &str) -> Result<PathBuf> {
    // Redacted: a URL's password or signature is no part of a file name.
    let url = super::redact(url);
    let (scheme, rest) = url.split_once("://").ok_or_else(|| Error::invalid(format!("not a storage URL: {url:?}")))?;
    let mut path = cache_root().join("remote").join(scheme);
    for part in rest.split('/').filter(|p| !p.is_empty()) {
        if part == "." || part == ".." {
            return Err(Error::invalid(format!("{url:?}: a key with `.` or `..` parts cannot be cached")));
        }
        path.push(part);
    }
    Ok(path)
}

/// The local copy of the object `url`, downloaded if it is missing or the object changed.
pub fn local_copy(url: &str) -> Result<PathBuf> {
    local_copy_cancellable(url, &Cancel::new())
}

/// [`local_copy`], stopping (and removing the partial download) when `cancel` is set.
pub fn local_copy_cancellable(url: &str, cancel: &Cancel) -> Result<PathBuf> {
    local_copy_verified(url, &Expected::default(), cancel).map(|c| c.path)
}

/// What a reader knows an object must be (from a set's commit record), if anything.
#[derive(Debug, Clone, Default)]
pub struct Expected {
    /// The ETag the object had when its set was committed.
    pub etag: Option<String>,
    pub bytes: Option<u64>,
    /// The CRC32C of its bytes.
    pub crc32c: Option<u32>,
}

/// A local copy, and the version of the object it is a copy of.
#[derive(Debug, Clone)]
pub struct LocalCopy {
    /// The copy.
    pub path: PathBuf,
    /// The object's version (`{"etag": ...}` or `{"modified": ...}`).
    pub version: serde_json::Value,
}

/// [`local_copy_cancellable`], checked against `expected`: an object whose ETag or size is not
/// the expected one, or whose downloaded bytes do not have the expected checksum, is an error
/// naming it. Every copy's CRC32C is computed as it downloads and kept with the file's identity
/// (device, inode, size, modification time): a copy changed on disk since is hashed again, and
/// downloaded again unless its bytes are still the object's.
pub fn local_copy_verified(url: &str, expected: &Expected, cancel: &Cancel) -> Result<LocalCopy> {
    let remote = super::resolve(url)?;
    let local = local_path(url)?;
    let meta_path = crate::fsutil::with_suffix(&local, ".source.json");
    let dir = local.parent().expect("a cached path has a parent");
    std::fs::create_dir_all(dir).with_path(dir)?;
    let reader = RemoteReader::open(remote.clone()).with_path(Path::new(url))?;
    let version = reader.version().describe();
    let etag = version.get("etag").and_then(serde_json::Value::as_str);
    if expected.etag.is_some() && expected.etag.as_deref() != etag || expected.bytes.is_some_and(|b| b != reader.size())
    {
        return Err(Error::format(
            Path::new(url),
            format!(
                "the object is not the one its commit record lists (ETag {etag:?} and {} bytes, the record lists {:?} \
                 and {:?}): it changed after its set was committed",
                reader.size(),
                expected.etag,
                expected.bytes
            ),
        ));
    }
    let want = serde_json::json!({"url": super::redact(url), "bytes": reader.size(), "version": version});
    let copy = || LocalCopy { path: local.clone(), version: version.clone() };
    if copy_is_current(&meta_path, &local, &want, expected) {
        return Ok(copy());
    }
    let _lock = Lock::take(&crate::fsutil::with_suffix(&local, ".lock"), cancel)?;
    if copy_is_current(&meta_path, &local, &want, expected) {
        return Ok(copy()); // another process downloaded it while this one waited
    }
    // A download killed earlier (SIGKILL, OOM) left its temporary: full-size, and never reused.
    crate::fsutil::remove_dead_temporaries(&local);
    check_space(dir, reader.size(), url)?;
    // The old record goes first: a process that checks while the new bytes are renamed into
    // place must not find them under the old object's size and ETag.
    match std::fs::remove_file(&meta_path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(Error::io(&meta_path, e)),
        _ => {}
    }
    let sum = download(reader, &remote, &local, expected, cancel)?;
    let mut meta = want;
    meta["crc32c"] = sum.hex().into();
    meta["stamp"] = file_stamp(&local);
    crate::fsutil::write_atomic(&meta_path, &serde_json::to_vec(&meta).expect("JSON"))?;
    Ok(copy())
}

/// What the filesystem says of a file's current contents: device, inode, size, modification time.
fn file_stamp(path: &Path) -> serde_json::Value {
    use std::os::unix::fs::MetadataExt as _;
    match std::fs::metadata(path) {
        Ok(m) => serde_json::json!([m.dev(), m.ino(), m.len(), m.mtime(), m.mtime_nsec()]),
        Err(_) => serde_json::Value::Null,
    }
}

/// Whether the copy at `local` is the object `want` describes, whole and unchanged.
fn copy_is_current(meta_path: &Path, local: &Path, want: &serde_json::Value, expected: &Expected) -> bool {
    let Some(recorded) =
        std::fs::read(meta_path).ok().and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
    else {
        return false;
    };
    if ["url", "bytes", "version"].iter().any(|k| recorded.get(k) != want.get(k)) {
        return false;
    }
    let crc = recorded.get("crc32c").and_then(serde_json::Value::as_str).and_then(|h| u32::from_str_radix(h, 16).ok());
    if expected.crc32c.is_some_and(|e| crc != Some(e)) {
        return false;
    }
    if !std::fs::metadata(local).is_ok_and(|m| Some(m.len()) == want["bytes"].as_u64()) {
        return false;
    }
    if recorded.get("stamp").is_some_and(|s| *s == file_stamp(local)) {
        return true;
    }
    // Changed on disk since it was verified (or a copy made by an older tokshuf): hash it again.
    crc.is_some_and(|crc| crate::fsutil::record::Checksum::of_file(local).is_ok_and(|s| s.crc32c == crc))
}

fn download(
    mut reader: RemoteReader,
    remote: &Remote,
    local: &Path,
    expected: &Expected,
    cancel: &Cancel,
) -> Result<crate::fsutil::record::Sum> {
    let tmp = crate::fsutil::TempFile::new(local);
    let mut out = tmp.create()?;
    let mut buf = vec![0u8; 4 << 20];
    let mut sum = crate::fsutil::record::Checksum::new();
    loop {
        cancel.check()?;
        let n = reader.read(&mut buf).with_path(Path::new(&remote.url))?;
        if n == 0 {
            break;
        }
        sum.update(&buf[..n]);
        out.write_all(&buf[..n]).with_path(tmp.path())?;
    }
    let sum = sum.sum();
    if let Some(want) = expected.crc32c.filter(|&c| c != sum.crc32c) {
        return Err(Error::format(
            Path::new(&remote.url),
            format!(
                "its bytes have CRC32C {}, its commit record lists {want:08x}: the object is not the committed one",
                sum.hex()
            ),
        ));
    }
    out.sync_all().with_path(tmp.path())?;
    drop(out);
    tmp.commit()?;
    Ok(sum)
}

fn check_space(dir: &Path, bytes: u64, url: &str) -> Result<()> {
    let free = free_bytes(dir).unwrap_or(u64::MAX);
    if free < bytes {
        return Err(Error::invalid(format!(
            "caching {url} needs {bytes} bytes in {}, which has {free} free; point TOKSHUF_CACHE_DIR at a \
             larger disk",
            dir.display()
        )));
    }
    Ok(())
}

/// Bytes available to this user on the filesystem of `dir`.
fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt as _;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs is plain data, for which all zeros is a valid value.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a statvfs the call fills.
    (unsafe { libc::statvfs(c.as_ptr(), &mut st) } == 0).then(|| st.f_bavail as u64 * st.f_frsize as u64)
}

/// An exclusive `flock` on a file, held until dropped.
struct Lock(File);

impl Lock {
    /// Wait for the lock (another process may be downloading), polling so that `cancel` is seen.
    fn take(path: &Path, cancel: &Cancel) -> Result<Lock> {
        let file = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(path).with_path(path)?;
        loop {
            // SAFETY: flock on a descriptor this function owns.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                return Ok(Lock(file));
            }
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EWOULDBLOCK) | Some(libc::EINTR) => {
                    cancel.check()?;
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                _ => return Err(Error::io(path, e)),
            }
        }
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        // SAFETY: unlocking the descriptor this value owns.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_paths_mirror_the_url() {
        let p = local_path("s3://bucket/a//b/c_text_document.bin").unwrap();
        assert!(p.ends_with("remote/s3/bucket/a/b/c_text_document.bin"), "{p:?}");
        assert!(local_path("s3://bucket/../etc/passwd").is_err());
    }
}
