//! Output shards (`shard_%08d.tar`) and `manifest.jsonl`.
//!
//! Shard `s` holds global positions `s*W .. (s+1)*W` of the shuffled sequence, and the member of
//! position `p` is named `{s:08}_{p - s*W:08}.{ext}`: names and shard numbers are functions of
//! content positions only. A shard is written to a temporary name, fsynced and renamed.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use super::samples::decode_sample;
use super::tar;
use crate::error::{Error, IoContext, Result};
use crate::fsutil::record::{Sum, Summing};
use crate::fsutil::{write_atomic, TempFile};

/// How cell payloads become members.
#[derive(Debug, Clone, Copy)]
pub enum PayloadKind {
    /// The payload is one member with this extension.
    Member(&'static str),
    /// The payload is an encoded sample of several members (`--shuffle-only`).
    Sample,
}

impl PayloadKind {
    /// The members of `cfg`'s shards.
    pub fn of(cfg: &super::config::ShuffleConfig) -> Self {
        if cfg.shuffle_only {
            PayloadKind::Sample
        } else {
            PayloadKind::Member(cfg.member_format.extension())
        }
    }
}

/// The path of shard `s`.
pub fn shard_path(dir: &Path, s: u64) -> PathBuf {
    dir.join(format!("shard_{s:08}.tar"))
}

struct Open {
    shard: u64,
    tmp: TempFile,
    w: BufWriter<Summing<File>>,
}

/// Writes members into consecutive shards.
pub struct ShardWriter<'a> {
    dir: &'a Path,
    kind: PayloadKind,
    current: Option<Open>,
}

impl<'a> ShardWriter<'a> {
    /// A writer into `dir`.
    pub fn new(dir: &'a Path, kind: PayloadKind) -> Self {
        Self { dir, kind, current: None }
    }

    /// Append the record at `index` of `shard` (which must be the current shard or open a new one
    /// once the previous is finished).
    pub fn add(&mut self, shard: u64, index: u64, payload: &[u8]) -> Result<()> {
        if self.current.is_none() {
            let tmp = TempFile::new(shard_path(self.dir, shard));
            let w = BufWriter::with_capacity(1 << 20, Summing::new(tmp.create()?));
            self.current = Some(Open { shard, tmp, w });
        }
        let open = self.current.as_mut().expect("an open shard");
        debug_assert_eq!(open.shard, shard);
        let key = format!("{shard:08}_{index:08}");
        match self.kind {
            PayloadKind::Member(ext) => {
                tar::write_member(&mut open.w, &format!("{key}.{ext}"), payload).with_path(open.tmp.path())?;
            }
            PayloadKind::Sample => {
                for (ext, data) in decode_sample(payload, open.tmp.target())? {
                    let name = if ext.is_empty() { key.clone() } else { format!("{key}.{ext}") };
                    if name.len() > 100 {
                        return Err(Error::invalid(format!("member extension too long for tar: {ext:?}")));
                    }
                    tar::write_member(&mut open.w, &name, data).with_path(open.tmp.path())?;
                }
            }
        }
        Ok(())
    }

    /// End the current shard's archive and hand it over for [`FinishedShard::commit`].
    pub fn finish(&mut self) -> Result<Option<FinishedShard>> {
        let Some(mut open) = self.current.take() else { return Ok(None) };
        tar::write_end(&mut open.w).with_path(open.tmp.path())?;
        let summing = open.w.into_inner().map_err(|e| Error::io(open.tmp.path(), e.into_error()))?;
        let (file, sum) = summing.into_parts();
        Ok(Some(FinishedShard { shard: open.shard, tmp: open.tmp, file, sum }))
    }
}

/// A complete shard under its temporary name.
#[derive(Debug)]
pub struct FinishedShard {
    shard: u64,
    tmp: TempFile,
    file: File,
    sum: Sum,
}

impl FinishedShard {
    /// fsync it and rename it into place; returns its number, its size and its checksum.
    pub fn commit(self) -> Result<(u64, Sum)> {
        self.file.sync_data().with_path(self.tmp.path())?;
        drop(self.file);
        self.tmp.commit()?;
        Ok((self.shard, self.sum))
    }
}

/// Contexts in shard `s` of `shards` when `total` contexts are cut into shards of `chunk`.
pub fn shard_len(s: u64, total: u64, chunk: u64) -> u64 {
    (total - s * chunk).min(chunk)
}

/// Write `manifest.jsonl`: one `{"shard": ..., "num_sequences": ...}` line per shard, sorted,
/// every line ending in a newline (open_lm drops a last line without one). Returns its path and
/// its size and checksum.
pub fn write_manifest(dir: &Path, total: u64, chunk: u64) -> Result<(PathBuf, Sum)> {
    let shards = total.div_ceil(chunk);
    let mut out = String::with_capacity(shards as usize * 56);
    for s in 0..shards {
        out.push_str(&format!("{{\"shard\":\"shard_{s:08}\",\"num_sequences\":{}}}\n", shard_len(s, total, chunk)));
    }
    let path = dir.join("manifest.jsonl");
    write_atomic(&path, out.as_bytes())?;
    Ok((path, crate::fsutil::record::Checksum::of(out.as_bytes())))
}

/// fsync a directory so the renames in it are durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).with_path(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_lines() {
        let dir = tempfile::tempdir().unwrap();
        let (p, _) = write_manifest(dir.path(), 10, 4).unwrap();
        let text = std::fs::read_to_string(p).unwrap();
        assert_eq!(
            text,
            "{\"shard\":\"shard_00000000\",\"num_sequences\":4}\n\
             {\"shard\":\"shard_00000001\",\"num_sequences\":4}\n\
             {\"shard\":\"shard_00000002\",\"num_sequences\":2}\n"
        );
        let (p, _) = write_manifest(dir.path(), 0, 4).unwrap();
        assert_eq!(std::fs::read_to_string(p).unwrap(), "");
    }

    #[test]
    fn shards_appear_only_when_finished() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = ShardWriter::new(dir.path(), PayloadKind::Member("json.gz"));
        w.add(3, 0, b"abc").unwrap();
        assert!(!shard_path(dir.path(), 3).exists());
        let finished = w.finish().unwrap().unwrap();
        assert!(!shard_path(dir.path(), 3).exists());
        let (shard, sum) = finished.commit().unwrap();
        assert_eq!((shard, sum.bytes), (3, 512 * 4));
        let bytes = std::fs::read(shard_path(dir.path(), 3)).unwrap();
        assert_eq!(&bytes[..26], b"00000003_00000000.json.gz\0");
        assert_eq!(sum, crate::fsutil::record::Checksum::of(&bytes));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
