//! Prepared vocabularies kept on disk, so that loading a large vocabulary again takes
//! milliseconds.
//!
//! Reading a `tokenizer.json` of 150,000 tokens means parsing megabytes of JSON, resolving every
//! merge to ids and proving that the merge list can run as a rank table ([`super::equiv`]):
//! hundreds of milliseconds, the same every time for the same file. What comes out (the tokens
//! by id, the merges or the proof, and the small parts of the pipeline) is stored the first
//! time under the SHA-256 of the file, and read back on later loads instead.
//!
//! Entries live in `<dir>/<sha256>.<code>.<kind>`, `<dir>` being the directory the caller gives
//! (`tokshuf-core`'s is `<cache root>/tokenizers`), `<code>` the build of the tokenizer code that
//! prepares them (a fingerprint of its sources, `build.rs`): a new tokshuf never reads what an
//! older one prepared, and two installed side by side keep their own entries instead of
//! replacing each other's.
//! Sharing entries between processes is safe: an entry is written under a temporary name and
//! renamed into place, so a reader sees a whole entry or none, and writers of one source write the
//! same bytes. Each read is checked: the header names the format, the code, the source's SHA-256
//! and the payload's length and checksum. An entry that fails a check is not used (and is
//! replaced); one that cannot be written (a read-only cache) is only not kept.
//!
//! The payload's checksum is a CRC-32: it catches an entry cut short or damaged, at a fraction
//! of a SHA-256's cost (the source, which may be anyone's file, is what the SHA-256 keys).

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bump when the layout of the header or of a payload changes.
const FORMAT: u32 = 2;

/// The build of the tokenizer code (see `build.rs`).
const CODE: &str = env!("TOKSHUF_TOKENIZE_FINGERPRINT");

/// The stored entry of one source.
pub(crate) struct Store {
    path: PathBuf,
    source_sha256: String,
    kind: &'static str,
}

impl Store {
    /// The entry of the source whose SHA-256 is `sha256` (lowercase hex), prepared as `kind`, in
    /// `dir`; `None` if `sha256` is not one.
    pub fn in_dir(dir: PathBuf, sha256: &str, kind: &'static str) -> Option<Store> {
        let hex = sha256.len() == 64 && sha256.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        let name = format!("{sha256}.{CODE}.{kind}");
        hex.then(|| Store { path: dir.join(name), source_sha256: sha256.to_string(), kind })
    }

    /// Where the entry is.
    #[cfg(test)]
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    fn header(&self, payload: &[u8]) -> String {
        let header = serde_json::json!({
            "format": FORMAT,
            "code": CODE,
            "kind": self.kind,
            "source_sha256": self.source_sha256,
            "payload_bytes": payload.len(),
            "payload_crc32": crc32(payload),
        });
        format!("{header}\n")
    }

    /// The stored payload, if there is an entry and it passes every check.
    pub fn read(&self) -> Option<Vec<u8>> {
        let mut bytes = std::fs::read(&self.path).ok()?;
        let end = memchr::memchr(b'\n', &bytes[..bytes.len().min(4096)])? + 1;
        let payload = &bytes[end..];
        if bytes[..end] != *self.header(payload).as_bytes() {
            return None;
        }
        bytes.drain(..end);
        Some(bytes)
    }

    /// Store `payload`. Failing to (no space, a read-only cache) only means it is not kept.
    pub fn write(&self, payload: &[u8]) {
        let Some(dir) = self.path.parent() else { return };
        if std::fs::create_dir_all(dir).is_err() {
            return;
        }
        // Derived data: not synced (a power loss may leave it short, which the checks catch).
        // Under a name of this process and call, renamed into place once whole: the core's
        // `fsutil::TempFile` does the same, and this crate does not depend on the core.
        static WRITES: AtomicU64 = AtomicU64::new(0);
        let mut name = self.path.file_name().map(|s| s.to_os_string()).unwrap_or_default();
        name.push(format!(".tmp-{}-{}", std::process::id(), WRITES.fetch_add(1, Ordering::Relaxed)));
        let tmp = self.path.with_file_name(name);
        let written = std::fs::File::create(&tmp).is_ok_and(|mut f| {
            f.write_all(self.header(payload).as_bytes()).and_then(|()| f.write_all(payload)).is_ok()
        });
        if !written || std::fs::rename(&tmp, &self.path).is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = libdeflater::Crc::new();
    crc.update(bytes);
    crc.sum()
}

/// A payload being written: fixed-width little-endian integers and length-prefixed byte strings.
#[derive(Default)]
pub(crate) struct Out(pub Vec<u8>);

impl Out {
    pub fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    pub fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    pub fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.0.extend_from_slice(b);
    }

    pub fn u32s(&mut self, v: &[u32]) {
        self.u64(v.len() as u64);
        self.0.extend(v.iter().flat_map(|x| x.to_le_bytes()));
    }
}

/// A payload being read; every read is bounds-checked (`None` past the end).
pub(crate) struct In<'a>(pub &'a [u8]);

impl<'a> In<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }

    pub fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    pub fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    pub fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.u64()?).ok()?;
        self.take(n)
    }

    /// A list of `u32`.
    pub fn u32s(&mut self) -> Option<Box<[u32]>> {
        let n = usize::try_from(self.u64()?).ok()?;
        let b = self.take(n.checked_mul(4)?)?;
        Some(b.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes"))).collect())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_read_back_only_when_whole_and_for_their_source() {
        let dir = tempfile::tempdir().unwrap();
        let a = "a".repeat(64);
        let store = Store::in_dir(dir.path().to_path_buf(), &a, "test").unwrap();
        assert_eq!(store.read(), None);
        store.write(b"payload");
        assert_eq!(store.read().as_deref(), Some(&b"payload"[..]));
        // The entry of another source, copied over this one's, is not this one's.
        let b = Store::in_dir(dir.path().to_path_buf(), &"b".repeat(64), "test").unwrap();
        std::fs::copy(store.path(), b.path()).unwrap();
        assert_eq!(b.read(), None);
        // Cut short, or changed: not used.
        let whole = std::fs::read(store.path()).unwrap();
        std::fs::write(store.path(), &whole[..whole.len() - 1]).unwrap();
        assert_eq!(store.read(), None);
        let mut changed = whole.clone();
        *changed.last_mut().unwrap() ^= 1;
        std::fs::write(store.path(), &changed).unwrap();
        assert_eq!(store.read(), None);
        // Prepared by another build of the tokenizer code (which names its entries apart): not used.
        assert!(store.path().to_str().unwrap().contains(CODE));
        let other = String::from_utf8(whole.clone()).unwrap().replacen(CODE, "another-build", 1);
        std::fs::write(store.path(), other).unwrap();
        assert_eq!(store.read(), None);
        // Written again, it is whole again.
        store.write(b"payload");
        assert_eq!(std::fs::read(store.path()).unwrap(), whole);
        assert!(Store::in_dir(dir.path().to_path_buf(), "not-a-hash", "test").is_none());
    }

    #[test]
    fn an_unwritable_cache_is_no_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, b"").unwrap();
        // A directory that cannot be made (its parent is a file).
        let store = Store::in_dir(file.join("sub"), &"a".repeat(64), "test").unwrap();
        store.write(b"payload");
        assert_eq!(store.read(), None);
    }

    #[test]
    fn payload_reads_are_bounds_checked() {
        let mut out = Out::default();
        out.u32(7);
        out.bytes(b"abc");
        out.u32s(&[1, 2]);
        let mut r = In(&out.0);
        assert_eq!(r.u32(), Some(7));
        assert_eq!(r.bytes(), Some(&b"abc"[..]));
        assert_eq!(r.u32s().as_deref(), Some(&[1, 2][..]));
        assert!(r.is_empty());
        assert_eq!(r.u64(), None);
        let mut short = In(&out.0[..10]);
        short.u32();
        assert_eq!(short.bytes(), None);
    }
}
