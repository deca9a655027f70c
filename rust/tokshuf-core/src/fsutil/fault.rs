//! Injected write failures, for tests that check what a run leaves behind when the disk fills
//! or the process dies at any point (`tokshuf._core._fail_writes_after`). Off unless armed: one
//! relaxed load per buffer written or file renamed.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

/// Write points left before the injected failure; negative: off.
static REMAINING: AtomicI64 = AtomicI64::new(-1);
/// Write points passed since the last [`arm`], counted while armed.
static PASSED: AtomicI64 = AtomicI64::new(0);
/// Die on the spot (as if killed) instead of failing the write.
static CRASH: AtomicBool = AtomicBool::new(false);

/// Let `n` more write points succeed and fail the next (`None`: disarm). The failure is ENOSPC,
/// and every later point fails too, as on a full disk; with `crash` the process exits at once
/// instead, running no cleanup, as if killed. Resets the count of [`passed`] points.
pub fn arm(n: Option<u64>, crash: bool) {
    PASSED.store(0, Ordering::SeqCst);
    CRASH.store(crash, Ordering::SeqCst);
    REMAINING.store(n.map_or(-1, |n| n.min(i64::MAX as u64) as i64), Ordering::SeqCst);
}

/// Points passed since the last [`arm`].
pub fn passed() -> u64 {
    PASSED.load(Ordering::SeqCst) as u64
}

/// A place where a run writes or renames an output file: fails once the armed count runs out.
#[inline]
pub fn point() -> io::Result<()> {
    if REMAINING.load(Ordering::Relaxed) < 0 {
        return Ok(());
    }
    armed_point()
}

#[cold]
fn armed_point() -> io::Result<()> {
    PASSED.fetch_add(1, Ordering::SeqCst);
    match REMAINING.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| (n > 0).then(|| n - 1)) {
        Ok(_) => Ok(()),
        // Disarmed meanwhile.
        Err(n) if n < 0 => Ok(()),
        Err(_) if CRASH.load(Ordering::SeqCst) => crash(),
        Err(_) => Err(io::Error::from_raw_os_error(libc::ENOSPC)),
    }
}

fn crash() -> ! {
    // SAFETY: _exit ends the process without running any handler, which is the point.
    unsafe { libc::_exit(86) }
}
