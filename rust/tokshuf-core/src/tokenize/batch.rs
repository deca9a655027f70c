//! Encoding many texts at once on the shared thread pool: the Python `encode_batch*` calls and
//! any stage that tokenizes texts it already holds in memory. The one batch encoder of the crate.
//!
//! Consecutive texts are grouped into grains of about [`GRAIN_BYTES`]; each thread takes the next
//! grain until none is left and encodes it in one [`Tokenizer::encode_each`] call (one cache
//! borrow for the grain, not one per text) onto the end of its own buffer, and the grains' ids
//! are then gathered into one output in parallel. Small grains keep both threads busy to the end
//! of the call (with a few large chunks, one thread idled through the other's last chunk: a
//! tenth of a two-thread call), and the buffers are kept from one call to the next, so
//! encoding allocates nothing once warm. The calling thread is one of the workers. With one
//! thread, or little text, the texts are encoded straight into the output on the calling thread.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use super::tokenizer::{ids_room, Tokenizer};
use crate::cancel::Cancel;
use crate::error::{BadInputReason, Error, Result};

/// The ids of every text, concatenated, and `offsets` (`len + 1` entries) such that text `i`
/// has ids `ids[offsets[i]..offsets[i + 1]]`. Order is the input order for any thread count.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EncodedTexts {
    pub ids: Vec<u32>,
    /// Start of each text's ids, plus the total at the end.
    pub offsets: Vec<u64>,
}

/// Below this many bytes in all, a batch is encoded on the calling thread.
const PARALLEL_MIN_BYTES: usize = 64 << 10;
/// A grain: consecutive texts of about this many bytes (a text longer than this is a grain).
const GRAIN_BYTES: usize = 32 << 10;
/// Ids of room kept between calls, all workers' buffers together (32 MiB): enough for batches of
/// thousands of documents, and a bound on what one huge call leaves behind.
const KEEP_IDS: usize = 8 << 20;

/// One worker's output: the ids of the grains it encoded, one after the other, and the number of
/// ids in `ids` after each of their texts.
#[derive(Default)]
struct Output {
    ids: Vec<u32>,
    ends: Vec<u64>,
}

/// Where a grain's results are: in worker `worker`'s output, ids from `ids`, text ends from `ends`
/// (to the next grain of that worker, or its end).
#[derive(Clone, Copy)]
struct Placed {
    worker: usize,
    ids: usize,
    ends: usize,
}

/// Where a grain's ids go in the output, and the ids.
type Placement<'a> = (&'a mut [std::mem::MaybeUninit<u32>], &'a [u32]);

/// Outputs kept between calls (taken by the workers of a call, given back after its gather).
/// Only ever `try_lock`ed: a call that finds it busy (another call's hand-over, or a lock held
/// by a thread of the parent of a forked DataLoader worker) uses fresh outputs instead of
/// waiting.
static OUTPUTS: Mutex<Vec<Output>> = Mutex::new(Vec::new());

/// Encode `texts` with `threads` threads (`None`: the default count). Fails on the first text the
/// tokenizer rejects, naming its index; stops early once `cancel` is set.
pub fn encode_many<S: AsRef<str> + Sync>(
    tokenizer: &dyn Tokenizer,
    texts: &[S],
    threads: Option<usize>,
    cancel: &Cancel,
) -> Result<EncodedTexts> {
    let threads = threads.unwrap_or_else(crate::parallel::default_threads).max(1);
    let bytes: usize = texts.iter().map(|t| t.as_ref().len()).sum();
    if threads == 1 || bytes < PARALLEL_MIN_BYTES || texts.len() < 2 {
        cancel.check()?;
        let mut out =
            EncodedTexts { ids: Vec::with_capacity(ids_room(bytes)), offsets: Vec::with_capacity(texts.len() + 1) };
        out.offsets.push(0);
        encode_texts(tokenizer, texts, 0, &mut out.ids, &mut out.offsets)?;
        return Ok(out);
    }
    let bounds = grain_bounds(texts);
    let grains = bounds.len() - 1;
    let workers = threads.min(grains);
    let mut outputs: Vec<Output> = match OUTPUTS.try_lock() {
        Ok(mut kept) => {
            let n = kept.len();
            kept.drain(n.saturating_sub(workers)..).collect()
        }
        Err(_) => Vec::new(),
    };
    outputs.resize_with(workers, Output::default);
    // The calling thread works too, beside `workers - 1` jobs on the pool: each takes the next
    // grain until none is left (no thread waits for another to start, or for a grain handed to
    // a busy one).
    let next = AtomicUsize::new(0);
    let placed: Vec<OnceLock<Placed>> = (0..grains).map(|_| OnceLock::new()).collect();
    let failed: Mutex<Option<(usize, Error)>> = Mutex::new(None);
    let work = |worker: usize, out: &mut Output| {
        out.ids.clear();
        out.ends.clear();
        loop {
            let g = next.fetch_add(1, Ordering::Relaxed);
            if g >= grains {
                break;
            }
            let here = Placed { worker, ids: out.ids.len(), ends: out.ends.len() };
            let result = cancel.check().and_then(|()| {
                encode_texts(tokenizer, &texts[bounds[g]..bounds[g + 1]], bounds[g], &mut out.ids, &mut out.ends)
            });
            match result {
                Ok(()) => {
                    let _ = placed[g].set(here);
                }
                Err(e) => {
                    // The earliest grain's error is the one reported, whatever the timing.
                    let mut f = failed.lock().unwrap_or_else(|e| e.into_inner());
                    if f.as_ref().is_none_or(|(at, _)| g < *at) {
                        *f = Some((g, e));
                    }
                    next.store(grains, Ordering::Relaxed);
                    break;
                }
            }
        }
    };
    let pool = crate::parallel::pool(Some(threads));
    {
        let (first, rest) = outputs.split_first_mut().expect("one worker at least");
        pool.in_place_scope(|s| {
            for (i, out) in rest.iter_mut().enumerate() {
                let work = &work;
                s.spawn(move |_| work(i + 1, out));
            }
            work(0, first);
        });
    }
    let result = match failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
        Some((_, e)) => Err(e),
        None => {
            let placed: Vec<Placed> =
                placed.into_iter().map(|p| p.into_inner().expect("every grain is encoded")).collect();
            Ok(gather(&pool, &outputs, &placed, &bounds, threads))
        }
    };
    if let Ok(mut kept) = OUTPUTS.try_lock() {
        let mut room: usize = kept.iter().map(|o| o.ids.capacity()).sum();
        for o in outputs {
            room += o.ids.capacity();
            if room <= KEEP_IDS {
                kept.push(o);
            }
        }
    }
    result
}

/// Encode `texts` (the first being text number `first` of the batch) onto `ids`, pushing the
/// length of `ids` after each text to `ends`.
fn encode_texts<S: AsRef<str>>(
    tokenizer: &dyn Tokenizer,
    texts: &[S],
    first: usize,
    ids: &mut Vec<u32>,
    ends: &mut Vec<u64>,
) -> Result<()> {
    // `encode_each` takes `&str`s: the grain's are gathered once (a few dozen pointers).
    let strs: Vec<&str> = texts.iter().map(AsRef::as_ref).collect();
    tokenizer.encode_each(&strs, ids, ends).map_err(|(i, msg)| Error::BadInput {
        path: "<texts>".into(),
        line: (first + i + 1) as u64,
        reason: BadInputReason::Tokenizer,
        msg,
    })
}

/// Grain boundaries (indices into `texts`, from 0 to `texts.len()`).
fn grain_bounds<S: AsRef<str>>(texts: &[S]) -> Vec<usize> {
    let mut bounds = vec![0];
    let mut acc = 0;
    for (i, t) in texts.iter().enumerate() {
        acc += t.as_ref().len();
        if acc >= GRAIN_BYTES {
            bounds.push(i + 1);
            acc = 0;
        }
    }
    if *bounds.last().expect("starts with 0") != texts.len() {
        bounds.push(texts.len());
    }
    bounds
}

/// The grains' ids in one buffer, in order (copied by `threads` threads, the caller one of
/// them), and their offsets.
fn gather(
    pool: &rayon::ThreadPool,
    outputs: &[Output],
    placed: &[Placed],
    bounds: &[usize],
    threads: usize,
) -> EncodedTexts {
    // Each grain's ids: from its start to the next grain of the same worker, or the worker's end.
    let mut spans: Vec<(usize, usize, usize)> = Vec::with_capacity(placed.len());
    let mut after: Vec<Option<usize>> = vec![None; outputs.len()];
    for (g, p) in placed.iter().enumerate().rev() {
        let end = after[p.worker].map_or(outputs[p.worker].ids.len(), |next| placed[next].ids);
        spans.push((p.worker, p.ids, end));
        after[p.worker] = Some(g);
    }
    spans.reverse();
    let texts = *bounds.last().expect("one bound at least");
    let mut offsets = Vec::with_capacity(texts + 1);
    offsets.push(0u64);
    let mut base = 0u64;
    for ((g, p), &(_, start, end)) in placed.iter().enumerate().zip(&spans) {
        let n = bounds[g + 1] - bounds[g];
        offsets.extend(outputs[p.worker].ends[p.ends..p.ends + n].iter().map(|&e| base + e - start as u64));
        base += (end - start) as u64;
    }
    let total = base as usize;
    let mut ids: Vec<u32> = Vec::with_capacity(total);
    // Each grain's destination, then the grains dealt to the threads in runs of about equal size.
    let mut rest = &mut ids.spare_capacity_mut()[..total];
    let share = total.div_ceil(threads.max(1)).max(1);
    let mut groups: Vec<Vec<Placement<'_>>> = vec![Vec::new()];
    let mut acc = 0;
    for &(worker, start, end) in &spans {
        let (dest, tail) = std::mem::take(&mut rest).split_at_mut(end - start);
        rest = tail;
        if acc >= share {
            groups.push(Vec::new());
            acc = 0;
        }
        acc += end - start;
        groups.last_mut().expect("one group").push((dest, &outputs[worker].ids[start..end]));
    }
    let copy = |group: Vec<Placement<'_>>| {
        for (dest, src) in group {
            for (d, &s) in dest.iter_mut().zip(src) {
                d.write(s);
            }
        }
    };
    let mut groups = groups.into_iter();
    let first = groups.next().expect("one group");
    pool.in_place_scope(|s| {
        for group in groups {
            s.spawn(move |_| copy(group));
        }
        copy(first);
    });
    // SAFETY: the destinations cover the first `total` elements exactly, and each was written.
    unsafe { ids.set_len(total) };
    EncodedTexts { ids, offsets }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokenize::ByteTokenizer;

    #[test]
    fn order_and_offsets_do_not_depend_on_threads() {
        // Small texts (one chunk) and enough bytes for many chunks, with empty texts among them.
        for scale in [1, 5000] {
            let texts: Vec<String> = (0..300).map(|i| "x".repeat((i % 7) * scale)).collect();
            let one = encode_many(&ByteTokenizer, &texts, Some(1), &Cancel::new()).unwrap();
            for threads in [2, 3, 4] {
                assert_eq!(one, encode_many(&ByteTokenizer, &texts, Some(threads), &Cancel::new()).unwrap());
            }
            assert_eq!(one.offsets.len(), 301);
            assert_eq!(one.offsets[8] - one.offsets[7], 0); // text 7 is ""
            assert_eq!(one.ids.len() as u64, *one.offsets.last().unwrap());
            assert_eq!(&one.ids[one.offsets[3] as usize..one.offsets[4] as usize], &vec![b'x' as u32 + 1; 3 * scale]);
        }
    }

    /// Fails on texts containing `!`.
    struct Picky;

    impl Tokenizer for Picky {
        fn encode(&self, text: &str, out: &mut Vec<u32>) -> Result<(), String> {
            if text.contains('!') {
                return Err(format!("no ! in {text:?}"));
            }
            ByteTokenizer.encode(text, out)
        }
        fn eod_id(&self) -> Option<u32> {
            None
        }
        fn vocab_size(&self) -> u64 {
            257
        }
        fn identity(&self) -> serde_json::Value {
            serde_json::Value::Null
        }
    }

    #[test]
    fn the_first_rejected_text_is_named_by_its_index_in_the_batch() {
        let mut texts: Vec<String> = (0..200).map(|_| "y".repeat(3000)).collect();
        texts[157] = "bad!".into();
        for threads in [1, 2, 4] {
            let e = encode_many(&Picky, &texts, Some(threads), &Cancel::new()).unwrap_err().to_string();
            assert!(e.contains(":158:") && e.contains("no ! in"), "{threads} threads: {e}");
        }
        // The first rejected text is named, whichever grain fails first.
        let mut texts: Vec<String> = (0..400).map(|_| "y".repeat(3000)).collect();
        texts[390] = "bad!".into();
        texts[41] = "bad!".into();
        for _ in 0..20 {
            let e = encode_many(&Picky, &texts, Some(2), &Cancel::new()).unwrap_err().to_string();
            assert!(e.contains(":42:"), "{e}");
        }
    }

    #[test]
    fn buffers_kept_from_a_call_do_not_leak_into_the_next() {
        // Calls of different shapes one after the other, each against the one-thread result:
        // the workers' kept outputs are cleared and re-filled, whatever they held.
        for (n, len) in [(400, 900), (50, 20_000), (3, 100_000), (1000, 70), (400, 900)] {
            let texts: Vec<String> =
                (0..n).map(|i| char::from(b'a' + (i % 26) as u8).to_string().repeat(len + i)).collect();
            let one = encode_many(&ByteTokenizer, &texts, Some(1), &Cancel::new()).unwrap();
            for threads in [2, 3] {
                assert_eq!(
                    one,
                    encode_many(&ByteTokenizer, &texts, Some(threads), &Cancel::new()).unwrap(),
                    "{n}x{len}"
                );
            }
        }
    }

    #[test]
    fn a_cancelled_batch_stops() {
        let texts: Vec<String> = (0..100).map(|_| "z".repeat(5000)).collect();
        let cancel = Cancel::new();
        cancel.cancel();
        for threads in [1, 2] {
            assert!(matches!(encode_many(&ByteTokenizer, &texts, Some(threads), &cancel), Err(Error::Cancelled)));
        }
    }
}
