//! Buffers that finished batches hand back for the next ones: line bytes (reader → worker →
//! reader) and token ids (worker → writer or cutter → worker). `preprocess` and shuffle's stage 1
//! share them, so neither run allocates and faults in fresh memory batch after batch.

use crossbeam_channel::{bounded, Receiver, Sender};

/// Buffers of one kind that finished batches hand back, so that a run's memory is allocated
/// (and its pages faulted in) once, not batch after batch.
pub(crate) struct Pool<T> {
    tx: Sender<Vec<T>>,
    rx: Receiver<Vec<T>>,
    /// Larger buffers (a batch with a huge line) are freed instead.
    max_len: usize,
}

impl<T> Pool<T> {
    /// A pool of up to `count` buffers of at most `max_bytes` each.
    pub fn new(count: usize, max_bytes: usize) -> Pool<T> {
        let (tx, rx) = bounded(count);
        Pool { tx, rx, max_len: max_bytes / std::mem::size_of::<T>().max(1) }
    }

    /// A buffer handed back, as it was (a line reader reuses its bytes as scratch without
    /// zeroing them; other takers clear it), or a new empty one.
    pub fn take(&self) -> Vec<T> {
        self.rx.try_recv().unwrap_or_default()
    }

    /// Keep `buf` for a later [`Pool::take`], unless it is too large or the pool is full.
    pub fn give(&self, buf: Vec<T>) {
        if buf.capacity() <= self.max_len {
            let _ = self.tx.try_send(buf);
        }
    }
}

/// The line batches' bytes and the first key's tokens, reused.
pub(crate) struct Spares {
    pub data: Pool<u8>,
    pub tokens: Pool<u32>,
}

impl Spares {
    /// Line buffers up to 4 batches' worth of bytes are kept; token buffers up to 2 ids per byte of
    /// a batch (a byte-level tokenizer writes one per byte, plus one per document), so that no
    /// tokenizer's batches free their buffer and fault in a fresh one every time.
    pub fn new(count: usize, batch_bytes: usize) -> Spares {
        let tokens_bytes = batch_bytes.saturating_mul(2 * std::mem::size_of::<u32>());
        Spares { data: Pool::new(count, batch_bytes.saturating_mul(4)), tokens: Pool::new(count, tokens_bytes) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_byte_level_batchs_token_buffer_is_kept_for_the_next_batch() {
        // One id per byte of a full batch, plus an end of document per short line, rounded up
        // as a growing Vec rounds: what a byte-level tokenizer's batch leaves behind.
        let batch_bytes = 1 << 20;
        let spares = Spares::new(4, batch_bytes);
        let used: Vec<u32> = Vec::with_capacity((batch_bytes + batch_bytes / 8).next_power_of_two());
        let capacity = used.capacity();
        spares.tokens.give(used);
        assert_eq!(spares.tokens.take().capacity(), capacity, "the buffer was freed, not kept");
        // A batch with a huge line may still free its buffers.
        spares.tokens.give(Vec::with_capacity(16 * batch_bytes));
        assert_eq!(spares.tokens.take().capacity(), 0);
    }
}
