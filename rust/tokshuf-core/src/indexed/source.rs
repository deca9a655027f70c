//! Where the bytes of a pair come from: a local file mapped whole, or, for a `.bin` in a store,
//! how it is read. The reader and the pinning of remote pairs both build on these.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use memmap2::Mmap;

use crate::error::{Error, IoContext, Result};

/// Read-only bytes of a whole file: a memory map, or owned bytes (tests, fuzzing, small files).
/// Empty files (which cannot be mapped) are empty slices.
#[derive(Debug, Clone)]
pub struct Mapping(Backing);

#[derive(Debug, Clone)]
enum Backing {
    Mmap(Arc<Mmap>),
    Owned(Arc<[u8]>),
}

impl Mapping {
    /// Map `path` read-only; a storage URL maps the object's local copy
    /// ([`crate::storage::local_copy`]).
    pub fn open(path: &Path) -> Result<Mapping> {
        let local;
        let path = match path.to_str() {
            Some(url) if crate::storage::is_remote(url) => {
                local = crate::storage::local_copy(url)?;
                local.as_path()
            }
            _ => path,
        };
        let file = File::open(path).with_path(path)?;
        let len = file.metadata().with_path(path)?.len();
        if len == 0 {
            return Ok(Mapping::from_bytes(Vec::new()));
        }
        // SAFETY: the mapping is read-only and the file is never written through it. Another
        // process truncating the file while it is mapped is outside what any mmap reader
        // (numpy included) can defend against; all reads below are bounds-checked against
        // the length seen at open.
        let map = unsafe { Mmap::map(&file) }.with_path(path)?;
        Ok(Mapping(Backing::Mmap(Arc::new(map))))
    }

    /// Owned bytes behind the same interface.
    pub fn from_bytes(bytes: impl Into<Arc<[u8]>>) -> Mapping {
        Mapping(Backing::Owned(bytes.into()))
    }

    /// The mapped bytes.
    pub fn bytes(&self) -> &[u8] {
        match &self.0 {
            Backing::Mmap(m) => m,
            Backing::Owned(b) => b,
        }
    }
}

/// How the `.bin` of a dataset in a store is read (a local `.bin` is always mapped; the `.idx`
/// is always a local copy).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteBin {
    /// A batch's token ranges by ranged GETs, nearby ranges in one request
    /// ([`IndexedDataset::read_ranges`]): nothing is stored, a first batch comes at once.
    Ranges,
    /// A local copy of the whole object, mapped ([`crate::storage::local_copy`]).
    Copy,
}

impl std::str::FromStr for RemoteBin {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "ranges" => Ok(RemoteBin::Ranges),
            "copy" => Ok(RemoteBin::Copy),
            _ => Err(Error::invalid(format!("unknown remote read mode {s:?} (expected \"ranges\" or \"copy\")"))),
        }
    }
}
