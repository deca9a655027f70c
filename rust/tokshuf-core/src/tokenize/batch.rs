//! Encoding many texts at once on the shared thread pool: the Python `encode_batch*` calls and
//! any stage that tokenizes texts it already holds in memory. The one batch encoder of the crate.
//!
//! Consecutive texts are grouped into chunks of about the same number of bytes (a few per thread,
//! so that one slow chunk does not leave a core idle), each chunk is encoded by one thread in one
//! [`Tokenizer::encode_each`] call (one cache borrow for the chunk, not one per text), and the
//! chunks' ids are gathered into one buffer in parallel. The calling thread is one of the
//! workers. With one thread, or little text, the texts are encoded straight into the output on
//! the calling thread.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use super::tokenizer::{ids_room, Tokenizer};
use crate::cancel::Cancel;
use crate::error::{BadInputReason, Error, Result};

/// The ids of every text, concatenated, and `offsets` (`len + 1` entries) such that text `i`
/// has ids `ids[offsets[i]..offsets[i + 1]]`. Order is the input order for any thread count.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EncodedTexts {
    /// All ids.
    pub ids: Vec<u32>,
    /// Start of each text's ids, plus the total at the end.
    pub offsets: Vec<u64>,
}

/// One chunk's ids and the number of ids after each of its texts.
type Part = (Vec<u32>, Vec<u64>);
/// Where a part's ids go in the output, and the ids.
type Placement<'a> = (&'a mut [std::mem::MaybeUninit<u32>], &'a [u32]);

/// Below this many bytes in all, a batch is encoded on the calling thread.
const PARALLEL_MIN_BYTES: usize = 64 << 10;
/// Chunks are about `bytes / (threads * CHUNKS_PER_THREAD)`, within these bounds.
const CHUNKS_PER_THREAD: usize = 4;
const CHUNK_MIN_BYTES: usize = 32 << 10;
const CHUNK_MAX_BYTES: usize = 1 << 20;

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
        encode_chunk(tokenizer, texts, 0, &mut out.ids, &mut out.offsets)?;
        return Ok(out);
    }
    let bounds = chunk_bounds(texts, bytes, threads);
    let chunks = bounds.len() - 1;
    // The calling thread works too, beside `threads - 1` jobs on the pool: each takes the next
    // chunk until none is left (no thread waits for another to start, or for a chunk handed to a
    // busy one).
    let next = AtomicUsize::new(0);
    let done: Vec<OnceLock<Result<Part>>> = (0..chunks).map(|_| OnceLock::new()).collect();
    let work = || loop {
        let c = next.fetch_add(1, Ordering::Relaxed);
        if c >= chunks {
            break;
        }
        let result = cancel.check().and_then(|()| {
            let chunk = &texts[bounds[c]..bounds[c + 1]];
            let room = ids_room(chunk.iter().map(|t| t.as_ref().len()).sum::<usize>());
            let (mut ids, mut ends) = (Vec::with_capacity(room), Vec::with_capacity(chunk.len()));
            encode_chunk(tokenizer, chunk, bounds[c], &mut ids, &mut ends)?;
            Ok((ids, ends))
        });
        let _ = done[c].set(result);
    };
    let pool = crate::parallel::pool(Some(threads));
    pool.in_place_scope(|s| {
        for _ in 1..threads.min(chunks) {
            s.spawn(|_| work());
        }
        work();
    });
    let parts =
        done.into_iter().map(|d| d.into_inner().expect("every chunk is encoded")).collect::<Result<Vec<_>>>()?;
    Ok(gather(&pool, parts, texts.len(), threads))
}

/// Encode `texts` (the first being text number `first` of the batch) onto `ids`, which is empty,
/// pushing the number of ids after each text to `ends`.
fn encode_chunk<S: AsRef<str>>(
    tokenizer: &dyn Tokenizer,
    texts: &[S],
    first: usize,
    ids: &mut Vec<u32>,
    ends: &mut Vec<u64>,
) -> Result<()> {
    debug_assert!(ids.is_empty());
    // `encode_each` takes `&str`s: the chunk's are gathered once (a few hundred pointers).
    let strs: Vec<&str> = texts.iter().map(AsRef::as_ref).collect();
    tokenizer.encode_each(&strs, ids, ends).map_err(|(i, msg)| Error::BadInput {
        path: "<texts>".into(),
        line: (first + i + 1) as u64,
        reason: BadInputReason::Tokenizer,
        msg,
    })
}

/// Chunk boundaries (indices into `texts`, from 0 to `texts.len()`) of about the same bytes.
fn chunk_bounds<S: AsRef<str>>(texts: &[S], bytes: usize, threads: usize) -> Vec<usize> {
    let target = (bytes / (threads * CHUNKS_PER_THREAD)).clamp(CHUNK_MIN_BYTES, CHUNK_MAX_BYTES);
    let mut bounds = vec![0];
    let mut acc = 0;
    for (i, t) in texts.iter().enumerate() {
        acc += t.as_ref().len();
        if acc >= target {
            bounds.push(i + 1);
            acc = 0;
        }
    }
    if *bounds.last().expect("starts with 0") != texts.len() {
        bounds.push(texts.len());
    }
    bounds
}

/// The chunks' ids in one buffer (copied by `threads` threads, the caller one of them) and their
/// offsets.
fn gather(pool: &rayon::ThreadPool, parts: Vec<Part>, texts: usize, threads: usize) -> EncodedTexts {
    let total: usize = parts.iter().map(|p| p.0.len()).sum();
    let mut offsets = Vec::with_capacity(texts + 1);
    offsets.push(0u64);
    let mut base = 0u64;
    for (ids, ends) in &parts {
        offsets.extend(ends.iter().map(|e| base + e));
        base += ids.len() as u64;
    }
    let mut ids: Vec<u32> = Vec::with_capacity(total);
    // Each part's destination, then the parts dealt to the threads in runs of about equal size.
    let mut rest = &mut ids.spare_capacity_mut()[..total];
    let mut copies: Vec<Placement<'_>> = Vec::with_capacity(parts.len());
    for (part, _) in &parts {
        let (dest, tail) = std::mem::take(&mut rest).split_at_mut(part.len());
        copies.push((dest, part));
        rest = tail;
    }
    let share = total.div_ceil(threads.max(1)).max(1);
    let mut groups: Vec<Vec<Placement<'_>>> = vec![Vec::new()];
    let mut acc = 0;
    for copy in copies {
        if acc >= share {
            groups.push(Vec::new());
            acc = 0;
        }
        acc += copy.1.len();
        groups.last_mut().expect("one group").push(copy);
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
        fn encode(&self, text: &str, out: &mut Vec<u32>) -> std::result::Result<(), String> {
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
    fn a_rejected_text_is_named_by_its_index_in_the_batch() {
        let mut texts: Vec<String> = (0..200).map(|_| "y".repeat(3000)).collect();
        texts[157] = "bad!".into();
        for threads in [1, 2, 4] {
            let e = encode_many(&Picky, &texts, Some(threads), &Cancel::new()).unwrap_err().to_string();
            assert!(e.contains(":158:") && e.contains("no ! in"), "{threads} threads: {e}");
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
