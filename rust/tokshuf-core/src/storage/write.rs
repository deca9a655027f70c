//! Writing objects: a multipart upload, whose object appears under its key only when the upload
//! completes (a reader never sees part of it). Every request (creating the upload, each part,
//! completing it, a single PUT) is retried within the retry budget like a read (a request that
//! sends bytes may take a second per MiB beyond it), and an upload that fails is aborted, so a
//! failed run leaves no incomplete upload behind (but one whose creation answer was lost: the
//! store made it and never said its id).

use std::collections::VecDeque;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use object_store::multipart::{MultipartStore, PartId};
use object_store::{ObjectStoreExt as _, PutPayload, WriteMultipart};

use super::failure::{retried, retried_sending, Failure};
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
    if len as usize <= PART {
        let mut bytes = Vec::with_capacity(len as usize);
        file.read_to_end(&mut bytes).with_path(from)?;
        return put(to, bytes);
    }
    match &to.multipart {
        Some(store) => block_on(multipart(store, &mut file, from, to, len)),
        None => block_on(streamed(&mut file, from, to)),
    }
}

/// Store `bytes` as the object `to` (one request, retried).
pub fn put(to: &Remote, bytes: Vec<u8>) -> Result<()> {
    let len = bytes.len();
    let payload = PutPayload::from(bytes);
    block_on(retried_sending(to, "PUT", len, || to.store.put(&to.key, payload.clone())))
        .map(drop)
        .map_err(|e| Error::io(Path::new(&to.url), e))
}

/// Delete the object `to` if it is there (each request retried). It is looked for first, so a
/// run allowed to write but not to delete (an IAM policy without `s3:DeleteObject`) needs no
/// more when there is nothing to delete.
pub fn delete(to: &Remote) -> Result<()> {
    let gone = |e: &std::io::Error| e.kind() == std::io::ErrorKind::NotFound;
    match super::read::head(to) {
        Err(e) if gone(&e) => return Ok(()),
        Err(e) => return Err(Error::io(Path::new(&to.url), e)),
        Ok(_) => {}
    }
    match block_on(retried(to, "DELETE", || to.store.delete(&to.key))) {
        Err(e) if gone(&e) => Ok(()),
        done => done.map_err(|e| Error::io(Path::new(&to.url), e)),
    }
}

/// An upload part by part, each request retried; aborted if anything fails.
async fn multipart(
    store: &Arc<dyn MultipartStore>,
    file: &mut std::fs::File,
    from: &Path,
    to: &Remote,
    len: u64,
) -> Result<()> {
    let io = |e: std::io::Error| Error::io(Path::new(&to.url), e);
    let id = retried(to, "create multipart upload", || store.create_multipart(&to.key)).await.map_err(io)?;
    let result = async {
        let id = &id;
        let mut parts: Vec<PartId> = Vec::new();
        // Parts upload in the background while the next ones are read; aborted if one fails.
        let mut in_flight = Tasks(VecDeque::new());
        for index in 0.. {
            let mut buf = vec![0u8; PART];
            let n = crate::fsutil::read_up_to(file, &mut buf).with_path(from)?;
            if n == 0 {
                break;
            }
            buf.truncate(n);
            let payload = PutPayload::from(buf);
            let (store, target, id) = (Arc::clone(store), to.clone(), id.clone());
            in_flight.0.push_back(tokio::spawn(async move {
                let request = format!("upload part {}", index + 1);
                let attempt = || store.put_part(&target.key, &id, index, payload.clone());
                retried_sending(&target, &request, n, attempt).await
            }));
            if in_flight.0.len() >= IN_FLIGHT {
                parts.push(in_flight.next(to).await.map_err(io)?);
            }
        }
        while !in_flight.0.is_empty() {
            parts.push(in_flight.next(to).await.map_err(io)?);
        }
        let mut attempts = 0;
        let completed = retried(to, "complete multipart upload", || {
            attempts += 1;
            let (parts, again) = (parts.clone(), attempts > 1);
            async move {
                match store.complete_multipart(&to.key, id, parts).await {
                    // A retry after an answer that was lost: the store may have completed the
                    // upload already (S3 then no longer knows its id). The object is there, whole,
                    // if it has the uploaded size.
                    Err(object_store::Error::NotFound { .. }) if again && uploaded(to, len).await => {
                        Ok(object_store::PutResult { e_tag: None, version: None, extensions: Default::default() })
                    }
                    other => other,
                }
            }
        })
        .await;
        completed.map(drop).map_err(io)
    }
    .await;
    if result.is_err() {
        // Best effort: the failure being reported is the one that matters.
        let _ = retried(to, "abort multipart upload", || store.abort_multipart(&to.key, &id)).await;
    }
    result
}

/// Part uploads in flight, in part order; dropped, they are stopped.
struct Tasks(VecDeque<tokio::task::JoinHandle<std::io::Result<PartId>>>);

impl Tasks {
    async fn next(&mut self, to: &Remote) -> std::io::Result<PartId> {
        let task = self.0.pop_front().expect("a part in flight");
        task.await.map_err(|e| {
            Failure::Other(format!("the upload task failed: {e}")).into_io(to, "upload part", Duration::ZERO)
        })?
    }
}

impl Drop for Tasks {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// Whether the object `to` exists with `len` bytes.
async fn uploaded(to: &Remote, len: u64) -> bool {
    to.store.head(&to.key).await.is_ok_and(|meta| meta.size == len)
}

/// A store without part-by-part uploads (an http(s) server): its own streaming upload.
async fn streamed(file: &mut std::fs::File, from: &Path, to: &Remote) -> Result<()> {
    let fail = |e: object_store::Error, request: &str| {
        Error::io(Path::new(&to.url), Failure::Store(e).into_io(to, request, Duration::ZERO))
    };
    let upload = to.store.put_multipart(&to.key).await.map_err(|e| fail(e, "create upload"))?;
    let mut writer = WriteMultipart::new_with_chunk_size(upload, PART);
    let mut buf = vec![0u8; PART];
    let result: Result<()> = async {
        loop {
            let n = crate::fsutil::read_up_to(file, &mut buf).with_path(from)?;
            if n == 0 {
                return Ok(());
            }
            writer.wait_for_capacity(IN_FLIGHT).await.map_err(|e| fail(e, "upload part"))?;
            writer.write(&buf[..n]);
        }
    }
    .await;
    match result {
        Ok(()) => writer.finish().await.map(drop).map_err(|e| fail(e, "complete upload")),
        Err(e) => {
            let _ = writer.abort().await;
            Err(e)
        }
    }
}
