//! The one helper every long call goes through: run the work on a scoped thread with the GIL
//! released, poll for Ctrl-C while waiting, and convert errors and panics.

use std::time::Duration;

use crossbeam_channel::RecvTimeoutError;
use pyo3::prelude::*;
use tokshuf_core::{Cancel, Result};

use crate::errors::{panic_to_py_err, IntoPyResult};

const POLL: Duration = Duration::from_millis(50);

/// Run `work` detached. Convert inputs to Rust values *before* calling this: the closure must not
/// touch Python objects. On Ctrl-C the [`Cancel`] flag is set, the work is awaited (so it can
/// remove its temporary files) and `KeyboardInterrupt` is raised.
pub fn run_detached<T, F>(py: Python<'_>, work: F) -> PyResult<T>
where
    T: Send,
    F: FnOnce(&Cancel) -> Result<T> + Send,
{
    let cancel = Cancel::new();
    let (done_tx, done_rx) = crossbeam_channel::bounded::<()>(1);
    std::thread::scope(|s| {
        let worker_cancel = cancel.clone();
        let handle = s.spawn(move || {
            let r = work(&worker_cancel);
            let _ = done_tx.send(());
            r
        });
        let mut interrupted = None;
        loop {
            // Disconnected (a panic dropped the sender) counts as finished too.
            let finished = py.detach(|| !matches!(done_rx.recv_timeout(POLL), Err(RecvTimeoutError::Timeout)));
            if finished {
                break;
            }
            if let Err(e) = py.check_signals() {
                cancel.cancel();
                interrupted = Some(e);
                break;
            }
        }
        let joined = py.detach(|| handle.join());
        if let Some(e) = interrupted {
            return Err(e);
        }
        match joined {
            Ok(r) => r.into_py(py),
            Err(panic) => Err(panic_to_py_err(panic)),
        }
    })
}
