//! Reading an input at offsets (a Parquet footer, then the column chunks it points to; the
//! token ranges of a batch of samples): a local file is mapped and its ranges are views of the
//! map; an object's ranges are ranged GETs pinned to its ETag, resumed where a body breaks off
//! as in [`super::RemoteReader`].

use std::io;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use futures::{StreamExt as _, TryStreamExt as _};

use super::coalesce::coalesce;
use super::read::{fetch, Version};
use super::runtime::{block_on, runtime};
use super::stores::Remote;
use crate::error::{IoContext, Result};

/// Requests of one [`RandomAccess::read_many`] in flight at once.
const IN_FLIGHT: usize = 32;
/// The largest block [`RandomAccess::read_many`] makes of nearby ranges (one range may be larger).
const MAX_BLOCK: u64 = 8 << 20;

/// An input read by ranges.
#[derive(Debug)]
pub enum RandomAccess {
    /// A local file, mapped (`None` when empty: an empty map cannot be made).
    Local(Option<Arc<memmap2::Mmap>>, u64),
    /// An object, pinned to the version first seen.
    Remote { remote: Remote, version: Version, size: u64 },
}

/// A range being read in the background.
pub struct Pending(tokio::task::JoinHandle<io::Result<Bytes>>);

impl Pending {
    /// Its bytes, once they are there.
    pub fn wait(self) -> io::Result<Bytes> {
        block_on(self.0).map_err(io::Error::other)?
    }
}

impl RandomAccess {
    /// Open the input `path` names.
    pub fn open(path: &Path) -> Result<RandomAccess> {
        match super::remote(path)? {
            Some(remote) => {
                let meta = super::read::head(&remote).with_path(path)?;
                Ok(RandomAccess::Remote { remote, version: Version::of(&meta), size: meta.size })
            }
            None => {
                let file = std::fs::File::open(path).with_path(path)?;
                let size = file.metadata().with_path(path)?.len();
                let map = if size == 0 {
                    None
                } else {
                    // SAFETY: the map is only read; a file truncated under a running job is
                    // outside what any reader of local files can defend against (as for the
                    // .bin maps).
                    let map = unsafe { memmap2::Mmap::map(&file) }.with_path(path)?;
                    Some(Arc::new(map))
                };
                Ok(RandomAccess::Local(map, size))
            }
        }
    }

    /// The input's size in bytes.
    pub fn size(&self) -> u64 {
        match self {
            RandomAccess::Local(_, size) | RandomAccess::Remote { size, .. } => *size,
        }
    }

    /// The bytes of `range`, which must lie within the input.
    pub fn read(&self, range: Range<u64>) -> io::Result<Bytes> {
        self.check(&range)?;
        match self {
            RandomAccess::Local(map, _) => Ok(match map {
                Some(map) => Bytes::from_owner(View(Arc::clone(map), range.start as usize..range.end as usize)),
                None => Bytes::new(),
            }),
            RandomAccess::Remote { .. } => self.start(range)?.wait(),
        }
    }

    /// Start reading `range` in the background (a local file's range is a view at once).
    pub fn start(&self, range: Range<u64>) -> io::Result<Pending> {
        self.check(&range)?;
        match self {
            RandomAccess::Local(..) => {
                let bytes = self.read(range);
                Ok(Pending(runtime().spawn(async move { bytes })))
            }
            RandomAccess::Remote { remote, version, .. } => {
                let remote = remote.here().map_err(io::Error::other)?;
                Ok(Pending(runtime().spawn(fetch(remote, version.clone(), range))))
            }
        }
    }

    /// The bytes of every range of `ranges`, in their order: for an object, ranges that touch or
    /// nearly touch are fetched as one request ([`coalesce`]), and up to `IN_FLIGHT` requests
    /// run at once.
    pub fn read_many(&self, ranges: &[Range<u64>]) -> io::Result<Vec<Bytes>> {
        ranges.iter().try_for_each(|r| self.check(r))?;
        let RandomAccess::Remote { remote, version, .. } = self else {
            return ranges.iter().map(|r| self.read(r.clone())).collect();
        };
        let remote = remote.here().map_err(io::Error::other)?;
        let blocks = coalesce(ranges, MAX_BLOCK);
        let requests = blocks.iter().map(|b| fetch(remote.clone(), version.clone(), b.range.clone()));
        let fetched: Vec<Bytes> = block_on(futures::stream::iter(requests).buffered(IN_FLIGHT).try_collect())?;
        let mut out = vec![Bytes::new(); ranges.len()];
        for (block, bytes) in blocks.iter().zip(fetched) {
            for &m in &block.members {
                let at = (ranges[m].start - block.range.start) as usize;
                out[m] = bytes.slice(at..at + (ranges[m].end - ranges[m].start) as usize);
            }
        }
        Ok(out)
    }

    fn check(&self, range: &Range<u64>) -> io::Result<()> {
        if range.start > range.end || range.end > self.size() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("bytes {}..{} lie beyond the end ({} bytes)", range.start, range.end, self.size()),
            ));
        }
        Ok(())
    }
}

/// A range of a mapped file, owned by the bytes that view it.
struct View(Arc<memmap2::Mmap>, Range<usize>);

impl AsRef<[u8]> for View {
    fn as_ref(&self) -> &[u8] {
        &self.0[self.1.clone()]
    }
}
