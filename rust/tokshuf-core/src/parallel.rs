//! Thread pools for data-parallel work (index building, batch reads, tokenization).
//!
//! One rayon pool per (process, thread count), created lazily. After `fork()` (torch DataLoader
//! workers) the parent's pool threads do not exist in the child, and using that pool would
//! deadlock; the pool is therefore keyed by the process id and rebuilt in the child.

use std::sync::{Arc, Mutex};

/// Environment variable that caps the default thread count.
pub const THREADS_ENV: &str = "TOKSHUF_NUM_THREADS";

/// The default number of threads: `TOKSHUF_NUM_THREADS` if set and positive, else the number of
/// CPUs available to this process.
pub fn default_threads() -> usize {
    std::env::var(THREADS_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

struct Cached {
    pid: u32,
    threads: usize,
    pool: Arc<rayon::ThreadPool>,
}

static POOL: Mutex<Option<Cached>> = Mutex::new(None);

/// A pool of `threads` threads (`None`: [`default_threads`]), shared within this process.
pub fn pool(threads: Option<usize>) -> Arc<rayon::ThreadPool> {
    let threads = threads.unwrap_or_else(default_threads).max(1);
    let pid = std::process::id();
    let mut guard = POOL.lock().unwrap_or_else(|e| e.into_inner());
    match guard.as_ref() {
        Some(c) if c.pid == pid && c.threads == threads => Arc::clone(&c.pool),
        _ => {
            if let Some(old) = guard.take().filter(|old| old.pid != pid) {
                // Forked child: the old pool's threads are gone; dropping it could block.
                std::mem::forget(old);
            }
            let pool = Arc::new(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .thread_name(|i| format!("tokshuf-{i}"))
                    .build()
                    .expect("creating a thread pool"),
            );
            *guard = Some(Cached { pid, threads, pool: Arc::clone(&pool) });
            pool
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_are_cached_per_thread_count() {
        let a = pool(Some(2));
        let b = pool(Some(2));
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(a.current_num_threads(), 2);
        let c = pool(Some(1));
        assert_eq!(c.current_num_threads(), 1);
    }
}
