//! The async runtime object stores are driven by, shared by every blocking caller.
//!
//! The pipeline's threads are plain threads that block on a remote read or upload; a small
//! multi-threaded runtime runs the requests (and the read-ahead of every open object) for them.
//! A process forked after the runtime started (a DataLoader worker) cannot use the parent's
//! runtime threads, so the runtime belongs to a process id and is made anew in a child.

use std::future::Future;
use std::sync::{Arc, Mutex};

use tokio::runtime::{Builder, Runtime};

static RUNTIME: Mutex<Option<(u32, Arc<Runtime>)>> = Mutex::new(None);

/// The runtime of this process.
pub(crate) fn runtime() -> Arc<Runtime> {
    let pid = std::process::id();
    let mut slot = RUNTIME.lock().unwrap_or_else(|e| e.into_inner());
    match &*slot {
        Some((owner, rt)) if *owner == pid => Arc::clone(rt),
        _ => {
            let rt = Arc::new(
                Builder::new_multi_thread()
                    .worker_threads(4)
                    .thread_name("tokshuf-storage")
                    .enable_all()
                    .build()
                    .expect("a tokio runtime"),
            );
            if let Some((_, old)) = slot.replace((pid, Arc::clone(&rt))) {
                // The parent's runtime: its threads do not exist here; never drop it (its
                // destructor would wait for them).
                std::mem::forget(old);
            }
            rt
        }
    }
}

/// Run `f` to completion from a thread that is not one of the runtime's.
pub(crate) fn block_on<F: Future>(f: F) -> F::Output {
    runtime().block_on(f)
}
