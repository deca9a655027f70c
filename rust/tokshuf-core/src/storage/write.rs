//! Writing objects: a multipart upload, whose object appears under its key only when the upload
//! completes (a reader never sees part of it), and is abandoned on error.

use std::io::Read;
use std::path::Path;

use object_store::{ObjectStoreExt as _, PutPayload, WriteMultipart};

use super::read::to_io;
use super::runtime::block_on;
use super::stores::Remote;
use crate::error::{Error, IoContext, Result};

/// Bytes per uploaded part.
const PART: usize = 16 << 20;
/// Parts in flight.
const IN_FLIGHT: usize = 4;

/// Upload the local file `from` to `to`.
pub fn upload_file(from: &Path, to: &Remote) -> Result<()> {
    let mut file = std::fs::File::open(from).with_path(from)?;
    let len = file.metadata().with_path(from)?.len();
    let io = |e: object_store::Error| Error::io(Path::new(&to.url), to_io(to, e));
    if len as usize <= PART {
        let mut bytes = Vec::with_capacity(len as usize);
        file.read_to_end(&mut bytes).with_path(from)?;
        return put(to, bytes);
    }
    block_on(async {
        let upload = to.store.put_multipart(&to.key).await.map_err(io)?;
        let mut writer = WriteMultipart::new_with_chunk_size(upload, PART);
        let mut buf = vec![0u8; PART];
        let result: Result<()> = async {
            loop {
                let n = read_full(&mut file, &mut buf).with_path(from)?;
                if n == 0 {
                    return Ok(());
                }
                writer.wait_for_capacity(IN_FLIGHT).await.map_err(io)?;
                writer.write(&buf[..n]);
            }
        }
        .await;
        match result {
            Ok(()) => writer.finish().await.map(drop).map_err(io),
            Err(e) => {
                let _ = writer.abort().await;
                Err(e)
            }
        }
    })
}

/// Store `bytes` as the object `to` (one request).
pub fn put(to: &Remote, bytes: Vec<u8>) -> Result<()> {
    block_on(to.store.put(&to.key, PutPayload::from(bytes)))
        .map(drop)
        .map_err(|e| Error::io(Path::new(&to.url), to_io(to, e)))
}

fn read_full(file: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}
