//! Byte-pair merging of one piece, on a cache miss.
//!
//! Both tiktoken's and Hugging Face's BPE repeatedly merge the adjacent pair of lowest priority,
//! the leftmost among equals, until no pair merges. Pieces up to 32 bytes merge on the stack
//! ([`ranks_merge`] for rank tables, a flat array for merge lists); longer ones use a linked list
//! and a min-heap of `(priority, position)` with lazy deletion, so a megabyte-long word costs
//! O(n log n), not O(n²). The buffers are reused across calls (no allocation once warm).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::table::{advise_huge_pages, hash, pack, prefetch, KeyIndex, KEEP, MAX_SHORT};
use super::vocab::{Fallback, Merges, Units, Vocab};

/// Pieces longer than this (in bytes) take the heap path, unless [`ranks_merge`] takes them.
const LINEAR_MAX: usize = 32;

/// Pieces up to this many bytes merge by ranks on the stack ([`ranks_merge`]): the parts are the
/// set bits of a `u64` that also marks the end. Longer ones (rare: long runs of one character,
/// separator lines) take the heap path, whose lookups cannot be prefetched ahead.
const STACK_MAX: usize = 62;

/// [`ranks_merge`] packs a rank and a start offset (6 bits) into 31 bits.
const RANKS_MERGE_MAX_ID: u32 = 1 << 25;

/// At most this many substrings of a piece are looked up ahead on a miss. Hashing and filtering
/// them is about a third of a miss; 24 instead of 48 took 4% off tokenization's instructions and
/// was as fast or faster in wall time at 1 and 2 threads (cl100k, 200 MB).
const PREFETCH_MAX: usize = 24;

/// For a piece of `n` bytes, the longest substrings [`ranks_merge`] prefetches: the most that
/// keeps the number of substrings of 3 bytes or more within [`PREFETCH_MAX`].
const PREFETCH_LONGEST: [usize; STACK_MAX + 1] = {
    let mut t = [0; STACK_MAX + 1];
    let mut n = 0;
    while n <= STACK_MAX {
        let (mut longest, mut count) = (2, 0);
        while longest < (if n < MAX_SHORT { n } else { MAX_SHORT }) && count + (n - longest) <= PREFETCH_MAX {
            longest += 1;
            count += n + 1 - longest;
        }
        t[n] = longest;
        n += 1;
    }
    t
};

/// Buffers above this many elements are released after use, so one huge word does not pin
/// memory for the rest of the run.
const KEEP_MAX: usize = 1 << 16;

#[derive(Clone, Copy)]
struct Part {
    start: u32,
    id: u32,
    /// Priority of merging with the next part (`u32::MAX`: no merge).
    prio: u32,
    /// The id that merge produces.
    merged: u32,
}

#[derive(Clone, Copy)]
/// A part of a long piece, in the list of them; its index in the list is its start byte.
struct Node {
    id: u32,
    prio: u32,
    merged: u32,
    prev: u32,
    next: u32,
}

const NONE: u32 = u32::MAX;

/// Reusable buffers for [`encode_piece`].
#[derive(Default)]
pub(crate) struct MergeScratch {
    parts: Vec<Part>,
    nodes: Vec<Node>,
    heap: BinaryHeap<Reverse<u64>>,
}

/// Where tiktoken merging of a short piece finds the rank of a substring (the id of the token
/// with its bytes), given the key's [`hash`]. A rank comes with a hint, kept beside the id by
/// the table's seed when the vocabulary has priorities: the priorities of the merges making the
/// token, or where they are found ([`Vocab::prio_hint`]); 0 when unknown.
pub(crate) trait RankTable {
    fn prefetch_hashed(&self, key: u128, h: u64);
    fn rank_hashed(&self, key: u128, h: u64) -> Option<(u32, u64)>;

    /// False only if the key with [`hash`] `h` is known to be absent without a look in the table.
    #[inline(always)]
    fn may_hold(&self, _h: u64) -> bool {
        true
    }
    /// [`RankTable::prefetch_hashed`] of a key [`RankTable::may_hold`] let through.
    #[inline(always)]
    fn prefetch_held(&self, key: u128, h: u64) {
        self.prefetch_hashed(key, h);
    }
    /// [`RankTable::prefetch_held`] if `held` (what [`RankTable::may_hold`] said). `held` is
    /// unpredictable, so a table that can should not branch on it (the shared table prefetches a
    /// line that stays cached instead); this default does.
    #[inline(always)]
    fn prefetch_if(&self, key: u128, h: u64, held: bool) {
        if held {
            self.prefetch_held(key, h);
        }
    }
    /// [`RankTable::rank_hashed`] of a key [`RankTable::may_hold`] let through.
    #[inline(always)]
    fn rank_held(&self, key: u128, h: u64) -> Option<(u32, u64)> {
        self.rank_hashed(key, h)
    }

    #[inline(always)]
    fn rank(&self, key: u128) -> Option<(u32, u64)> {
        self.rank_hashed(key, hash(key))
    }
}

/// The vocabulary's own index: two dependent loads per lookup (slot, then key).
impl RankTable for KeyIndex {
    #[inline(always)]
    fn prefetch_hashed(&self, _: u128, h: u64) {
        KeyIndex::prefetch_hashed(self, h);
    }
    #[inline(always)]
    fn rank_hashed(&self, key: u128, h: u64) -> Option<(u32, u64)> {
        self.get_one_hashed(key, h).map(|id| (id, 0))
    }
}

/// Append the BPE encoding of `piece` (at least one byte) to `out`. `ranks` knows every token of
/// at most 15 bytes (used for tiktoken vocabularies).
pub(crate) fn encode_piece(
    vocab: &Vocab,
    ranks: &impl RankTable,
    piece: &[u8],
    out: &mut Vec<u32>,
    s: &mut MergeScratch,
) {
    if let Units::Chars(fallback) = &vocab.units {
        // Characters merge on the stack as bytes do, unless one is outside the vocabulary (its
        // fallback ids take the general path).
        if matches!(fallback, Fallback::Bytes(_))
            && stacks(vocab, piece.len())
            && ranks_merge_any::<true>(vocab, ranks, piece, out)
        {
            return;
        }
        return encode_chars(vocab, fallback, ranks, piece, out, s);
    }
    match piece.len() {
        0 => {}
        1 => out.push(vocab.byte_ids[piece[0] as usize]),
        n if stacks(vocab, n) => {
            ranks_merge_any::<false>(vocab, ranks, piece, out);
        }
        n if n <= LINEAR_MAX => linear(vocab, ranks, piece, out, &mut s.parts),
        _ => {
            heap(vocab, ranks, piece, out, &mut s.nodes, &mut s.heap);
            if s.nodes.capacity() > KEEP_MAX {
                s.nodes = Vec::new();
                s.heap = BinaryHeap::new();
            }
        }
    }
}

/// The encoding of `piece` (UTF-8) by a vocabulary of characters: the parts start as its
/// characters, those outside the vocabulary as the fallback's ids (which never merge: no merge
/// involves them, which loading checks), and merge as a byte-level piece's do.
#[cold]
fn encode_chars(
    vocab: &Vocab,
    fallback: &Fallback,
    ranks: &impl RankTable,
    piece: &[u8],
    out: &mut Vec<u32>,
    s: &mut MergeScratch,
) {
    let parts = &mut s.parts;
    parts.clear();
    let mut i = 0;
    // Whether the last part is an unknown token that the next unknown character joins.
    let mut fusing = false;
    while i < piece.len() {
        let len = super::unicode::utf8_len(piece[i]);
        let part = |start: usize, id: u32| Part { start: start as u32, id, prio: u32::MAX, merged: 0 };
        match vocab.id_of(&piece[i..i + len]) {
            Some(id) => {
                parts.push(part(i, id));
                fusing = false;
            }
            None => match fallback {
                Fallback::Bytes(ids) => parts.extend((i..i + len).map(|k| part(k, ids[piece[k] as usize]))),
                Fallback::Unk { id, fuse } => {
                    if !(fusing && *fuse) {
                        parts.push(part(i, *id));
                    }
                    fusing = true;
                }
            },
        }
        i += len;
    }
    let end = |parts: &[Part], k: usize| parts.get(k + 1).map_or(piece.len(), |p| p.start as usize);
    for k in 0..parts.len().saturating_sub(1) {
        let (l, r) = (parts[k], parts[k + 1]);
        (parts[k].prio, parts[k].merged) = merge(vocab, ranks, piece, l.start as usize, end(parts, k + 1), l.id, r.id);
    }
    if parts.len() <= LINEAR_MAX {
        return linear_loop(vocab, ranks, piece, out, parts);
    }
    // The heap path indexes nodes by their start byte.
    let (nodes, heap) = (&mut s.nodes, &mut s.heap);
    nodes.clear();
    heap.clear();
    let unused = Node { id: NONE, prio: u32::MAX, merged: 0, prev: NONE, next: NONE };
    reserve_nodes(nodes, piece.len());
    nodes.resize(piece.len(), unused);
    for (k, p) in parts.iter().enumerate() {
        let at = p.start as usize;
        nodes[at] = Node {
            id: p.id,
            prio: p.prio,
            merged: p.merged,
            prev: if k == 0 { NONE } else { parts[k - 1].start },
            next: parts.get(k + 1).map_or(NONE, |q| q.start),
        };
        if p.prio != u32::MAX {
            heap.push(Reverse(u64::from(p.prio) << 32 | u64::from(p.start)));
        }
    }
    heap_loop(vocab, ranks, piece, out, nodes, heap);
    if nodes.capacity() > KEEP_MAX {
        s.nodes = Vec::new();
        s.heap = BinaryHeap::new();
    }
}

/// Whether a piece of `n` bytes (at least 2) merges on the stack ([`ranks_merge`]).
#[inline(always)]
fn stacks(vocab: &Vocab, n: usize) -> bool {
    (2..=STACK_MAX).contains(&n)
        && matches!(vocab.merges, Merges::Ranks)
        && vocab.id_bound() <= RANKS_MERGE_MAX_ID
        && vocab.prio_bound() <= RANKS_MERGE_MAX_ID
}

/// [`ranks_merge`] of a piece that [`stacks`], compiled for this CPU; false (nothing written)
/// if `CHARS` and a character of the piece is no token.
#[inline(always)]
fn ranks_merge_any<const CHARS: bool>(vocab: &Vocab, ranks: &impl RankTable, piece: &[u8], out: &mut Vec<u32>) -> bool {
    if vocab.ranks_are_ids() {
        ranks_merge_for::<CHARS, false>(vocab, ranks, piece, out)
    } else {
        ranks_merge_for::<CHARS, true>(vocab, ranks, piece, out)
    }
}

#[inline(always)]
fn ranks_merge_for<const CHARS: bool, const PRIO: bool>(
    vocab: &Vocab,
    ranks: &impl RankTable,
    piece: &[u8],
    out: &mut Vec<u32>,
) -> bool {
    #[cfg(target_arch = "x86_64")]
    if super::cpu::has_x86_64_v3() {
        // SAFETY: the CPU has x86-64-v3's features.
        return unsafe {
            match piece.len() {
                ..=MAX_SHORT => ranks_merge_v3::<16, CHARS, PRIO>(vocab, ranks, piece, out),
                16..=32 => ranks_merge_v3::<32, CHARS, PRIO>(vocab, ranks, piece, out),
                _ => ranks_merge_v3::<64, CHARS, PRIO>(vocab, ranks, piece, out),
            }
        };
    }
    match piece.len() {
        ..=MAX_SHORT => ranks_merge::<16, CHARS, PRIO>(vocab, ranks, piece, out),
        16..=32 => ranks_merge::<32, CHARS, PRIO>(vocab, ranks, piece, out),
        _ => ranks_merge::<64, CHARS, PRIO>(vocab, ranks, piece, out),
    }
}

/// [`ranks_merge`] for x86-64-v3: the bit searches and variable shifts over the parts take one
/// instruction each.
///
/// # Safety
/// The CPU must have AVX2, BMI1, BMI2, LZCNT and POPCNT.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,bmi1,bmi2,lzcnt,popcnt")]
unsafe fn ranks_merge_v3<const N: usize, const CHARS: bool, const PRIO: bool>(
    vocab: &Vocab,
    table: &impl RankTable,
    piece: &[u8],
    out: &mut Vec<u32>,
) -> bool {
    ranks_merge::<N, CHARS, PRIO>(vocab, table, piece, out)
}

/// tiktoken merging of a piece of up to 15 bytes (`N` = 16), 32 (`N` = 32) or [`STACK_MAX`] (`N` =
/// 64), on the stack. Every part is a substring of the piece, so the lookup keys are cut out of
/// the piece (held in one register when it fits), and the slots of its short substrings — the
/// candidate merges — are prefetched up front: their cache misses overlap instead of following
/// one another merge after merge. (A table of id pairs, each token's last merge, answers the same
/// questions exactly, but each of its lookups waits for the merge before it: it was no faster
/// overall, and a third slower on pieces over 32 bytes, even with a filter of the pairs in front.)
///
/// With `CHARS` (a vocabulary of characters), the parts start as the piece's characters, and the
/// result is false, with nothing written, if one of them is no token. With `PRIO`, merges are
/// ordered by their priorities ([`Vocab::prio_of`]) rather than the ids they make.
#[inline(always)]
fn ranks_merge<const N: usize, const CHARS: bool, const PRIO: bool>(
    vocab: &Vocab,
    table: &impl RankTable,
    piece: &[u8],
    out: &mut Vec<u32>,
) -> bool {
    let n = piece.len();
    debug_assert!(n >= 2 && (N == 16 && n <= MAX_SHORT || N == 32 && n <= 32 || N == 64 && n <= STACK_MAX));
    let w = if N <= 16 { pack(piece) & !(0xff << 120) } else { 0 };
    let mut buf = [0u8; STACK_MAX + 16];
    if N > 16 {
        buf[..n].copy_from_slice(piece);
    }
    // The key of `piece[a..a + len]` (`len` at most 15), from `tail` = the bytes from `a` on.
    let key_at = |tail: u128, len: usize| (tail & KEEP[len]) | (len as u128) << 120;
    let tail = |a: usize| {
        if N <= 16 {
            w >> (8 * a)
        } else {
            u128::from_le_bytes(buf[a..a + 16].try_into().expect("16 bytes"))
        }
    };
    // Every substring of three bytes or more, up to a length that keeps the count within
    // PREFETCH_MAX (all of them for pieces up to 8 bytes): the shorter, the earlier a merge may
    // need it.
    // Those ruled out without a look in the table are remembered (bit `len` of `absent[a]`): a
    // merge that asks for one again is answered at once.
    // Characters start as parts, so two ASCII ones are a candidate of two bytes; a part never
    // starts inside a character.
    let shortest = if CHARS { 2 } else { 3 };
    let longest = PREFETCH_LONGEST[n];
    let mut absent = [0u16; N];
    #[allow(clippy::needless_range_loop)] // `a` also cuts the keys
    for a in 0..n + 1 - shortest {
        if CHARS && piece[a] & 0xc0 == 0x80 {
            continue;
        }
        // Two ASCII characters are merged by the table of byte pairs, not looked up: only at the
        // start, as every merge makes a part of two characters or more.
        let shortest = if CHARS && piece[a] < 0x80 && piece[a + 1] < 0x80 { 3 } else { shortest };
        let t = tail(a);
        for len in shortest..=longest.min(n - a) {
            let key = key_at(t, len);
            let h = hash(key);
            let held = table.may_hold(h);
            table.prefetch_if(key, h, held);
            absent[a] |= u16::from(!held) << len;
        }
    }
    // The parts start at the set bits of `parts` (bit `n`: the end). The part starting at `s` has
    // the id `id[s]`, and `cand[s]` is `rank << 6 | s` for its merge with the next part
    // (`i32::MAX`: none), so the smallest candidate is the lowest rank, the leftmost of equals, and
    // a merge clears a bit instead of moving the parts after it.
    let mut id = [0u32; N];
    let mut cand = [i32::MAX; N];
    let with_start = |rank: u32, s: usize| if rank == u32::MAX { i32::MAX } else { (rank << 6 | s as u32) as i32 };
    let next = |parts: u64, s: usize| s + 1 + (parts >> (s + 1)).trailing_zeros() as usize;
    // Macros, not closures: inlined at every use (the closure was called).
    // The rank of `piece[a..a + len]`.
    macro_rules! lookup {
        ($a:expr, $len:expr) => {{
            let (a, len): (usize, usize) = ($a, $len);
            match len {
                // Substrings up to `longest` were asked about when prefetched.
                len if len <= longest && absent[a] >> len & 1 != 0 => None,
                len if len <= longest => {
                    let key = key_at(tail(a), len);
                    table.rank_held(key, hash(key))
                }
                len if len <= MAX_SHORT => table.rank(key_at(tail(a), len)),
                _ => long_id(vocab, &piece[a..a + len]).map(|id| (id, 0)),
            }
        }};
    }
    // The candidate of the parts from `a` on, split at `b` and ending at `c`; with priorities,
    // the id it makes is kept in `made`.
    let mut made = [0u32; N];
    macro_rules! rank {
        ($a:expr, $b:expr, $c:expr) => {{
            let (a, b, c): (usize, usize, usize) = ($a, $b, $c);
            let (id, hint) = lookup!(a, c - a).unwrap_or((u32::MAX, 0));
            if PRIO && id != u32::MAX {
                made[a] = id;
                with_start(vocab.prio_of(id, b - a, hint), a)
            } else {
                with_start(id, a)
            }
        }};
    }
    let mut parts: u64;
    if CHARS {
        parts = 1 << n;
        let mut i = 0;
        while i < n {
            let len = super::unicode::utf8_len(piece[i]);
            let c =
                if len == 1 { vocab.byte_ids[piece[i] as usize] } else { lookup!(i, len).map_or(u32::MAX, |r| r.0) };
            if c == u32::MAX {
                return false;
            }
            (id[i], parts) = (c, parts | 1 << i);
            i += len;
        }
        let mut rest = parts & ((1 << n) - 1);
        while rest != 0 {
            let s = rest.trailing_zeros() as usize;
            let e = next(parts, s);
            if e < n {
                if piece[s] < 0x80 && piece[e] < 0x80 {
                    let (prio, merged) = vocab.merge_bytes(piece[s], piece[e]);
                    (cand[s], made[s]) = (with_start(prio, s), merged);
                } else {
                    cand[s] = rank!(s, e, next(parts, e));
                }
            }
            rest &= rest - 1;
        }
    } else {
        for i in 0..n {
            id[i] = vocab.byte_ids[piece[i] as usize];
        }
        for i in 0..n - 1 {
            let (prio, merged) = vocab.merge_bytes(piece[i], piece[i + 1]);
            (cand[i], made[i]) = (with_start(prio, i), merged);
        }
        parts = (1 << (n + 1)) - 1;
    }
    loop {
        // Over the parts only, a load each: a vector load of `cand` would wait for the stores
        // of the last merge to reach the cache (they cannot be forwarded to a wider load).
        let mut best = i32::MAX;
        let mut rest = parts & ((1 << n) - 1);
        while rest != 0 {
            best = best.min(cand[rest.trailing_zeros() as usize]);
            rest &= rest - 1;
        }
        if best == i32::MAX {
            break;
        }
        let s = (best & 63) as usize;
        // In tiktoken the merged token's id is its rank.
        id[s] = if PRIO { made[s] } else { (best >> 6) as u32 };
        let r = next(parts, s);
        parts &= !(1 << r);
        cand[r] = i32::MAX;
        let e = next(parts, s);
        cand[s] = if e < n { rank!(s, e, next(parts, e)) } else { i32::MAX };
        if s > 0 {
            let p = 63 - (parts & ((1 << s) - 1)).leading_zeros() as usize;
            cand[p] = rank!(p, s, e);
        }
    }
    let mut rest = parts & ((1 << n) - 1);
    while rest != 0 {
        out.push(id[rest.trailing_zeros() as usize]);
        rest &= rest - 1;
    }
    true
}

/// The id of a part longer than the rank tables' keys (rare: kept out of the merge loop).
#[cold]
#[inline(never)]
fn long_id(vocab: &Vocab, part: &[u8]) -> Option<u32> {
    vocab.id_of(part)
}

/// [`Vocab::merge`], with the ranks of short parts from `ranks` (for tiktoken vocabularies).
#[inline(always)]
fn merge(vocab: &Vocab, ranks: &impl RankTable, piece: &[u8], a: usize, c: usize, l: u32, r: u32) -> (u32, u32) {
    if c - a <= MAX_SHORT && matches!(vocab.merges, Merges::Ranks) {
        ranks
            .rank(pack(&piece[a..c]))
            .map_or((u32::MAX, 0), |(id, hint)| (vocab.prio_of(id, vocab.token(l).len(), hint), id))
    } else {
        vocab.merge(piece, a, c, l, r)
    }
}

fn linear(vocab: &Vocab, ranks: &impl RankTable, piece: &[u8], out: &mut Vec<u32>, parts: &mut Vec<Part>) {
    parts.clear();
    parts.extend(piece.iter().enumerate().map(|(i, &b)| Part {
        start: i as u32,
        id: vocab.byte_ids[b as usize],
        prio: u32::MAX,
        merged: 0,
    }));
    for i in 0..parts.len() - 1 {
        (parts[i].prio, parts[i].merged) = vocab.merge_bytes(piece[i], piece[i + 1]);
    }
    linear_loop(vocab, ranks, piece, out, parts);
}

/// Merge `parts` (their candidate merges set) to the end.
fn linear_loop(vocab: &Vocab, ranks: &impl RankTable, piece: &[u8], out: &mut Vec<u32>, parts: &mut Vec<Part>) {
    let end = |parts: &[Part], i: usize| parts.get(i + 1).map_or(piece.len(), |p| p.start as usize);
    let rate = |parts: &mut [Part], i: usize| {
        if i + 1 < parts.len() {
            let (l, r) = (parts[i], parts[i + 1]);
            let (prio, merged) = merge(vocab, ranks, piece, l.start as usize, end(parts, i + 1), l.id, r.id);
            parts[i].prio = prio;
            parts[i].merged = merged;
        } else {
            parts[i].prio = u32::MAX;
        }
    };
    loop {
        let mut best = (u32::MAX, 0);
        for (i, p) in parts.iter().enumerate() {
            if p.prio < best.0 {
                best = (p.prio, i);
            }
        }
        if best.0 == u32::MAX {
            break;
        }
        let i = best.1;
        parts[i].id = parts[i].merged;
        parts.remove(i + 1);
        // Both new pairs' lookups in flight at once.
        if i + 1 < parts.len() {
            vocab.prefetch_merge(parts[i].id, parts[i + 1].id);
        }
        if i > 0 {
            vocab.prefetch_merge(parts[i - 1].id, parts[i].id);
        }
        rate(parts, i);
        if i > 0 {
            rate(parts, i - 1);
        }
    }
    out.extend(parts.iter().map(|p| p.id));
}

fn heap(
    vocab: &Vocab,
    ranks: &impl RankTable,
    piece: &[u8],
    out: &mut Vec<u32>,
    nodes: &mut Vec<Node>,
    heap: &mut BinaryHeap<Reverse<u64>>,
) {
    let n = piece.len();
    assert!(n < u32::MAX as usize, "piece of 4 GiB or more");
    nodes.clear();
    heap.clear();
    reserve_nodes(nodes, n);
    nodes.extend(piece.iter().enumerate().map(|(i, &b)| Node {
        id: vocab.byte_ids[b as usize],
        prio: u32::MAX,
        merged: 0,
        prev: if i == 0 { NONE } else { i as u32 - 1 },
        next: if i + 1 == n { NONE } else { i as u32 + 1 },
    }));
    for i in 0..n - 1 {
        let (prio, merged) = vocab.merge_bytes(piece[i], piece[i + 1]);
        (nodes[i].prio, nodes[i].merged) = (prio, merged);
    }
    if n >= BUCKETS_MIN {
        queue_loop(vocab, ranks, piece, out, nodes, &mut Buckets::new(vocab.id_bound() as usize));
    } else {
        queue_loop(vocab, ranks, piece, out, nodes, heap);
    }
}

/// Queue the nodes' candidate merges, then merge.
fn queue_loop(
    vocab: &Vocab,
    ranks: &impl RankTable,
    piece: &[u8],
    out: &mut Vec<u32>,
    nodes: &mut [Node],
    q: &mut impl Queue,
) {
    for (i, node) in nodes.iter().enumerate() {
        if node.prio != u32::MAX {
            q.push(node.prio, i as u32);
        }
    }
    heap_loop(vocab, ranks, piece, out, nodes, q);
}

/// Merge the linked `nodes` (indexed by their start byte; the first at 0) with the candidate
/// merges in `heap` to the end.
fn heap_loop(
    vocab: &Vocab,
    ranks: &impl RankTable,
    piece: &[u8],
    out: &mut Vec<u32>,
    nodes: &mut [Node],
    heap: &mut impl Queue,
) {
    let n = piece.len();
    // A merge is a function of the ids of its two parts, and a long piece asks about the same
    // pairs again and again (a run of one character, the syllables of a long word): they are
    // remembered here, so that most answers come from this small table rather than from a miss in
    // the large ones each time.
    let memo_bits = n.next_power_of_two().trailing_zeros().clamp(6, 12);
    let mut memo = vec![(u64::MAX, 0u64); 1 << memo_bits];
    let mut pair_merge = |a: usize, c: usize, l: u32, r: u32| {
        let key = u64::from(l) << 32 | u64::from(r);
        let slot = &mut memo[(key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - memo_bits)) as usize];
        if slot.0 != key {
            let (prio, merged) = merge(vocab, ranks, piece, a, c, l, r);
            *slot = (key, u64::from(prio) << 32 | u64::from(merged));
        }
        ((slot.1 >> 32) as u32, slot.1 as u32)
    };
    // Nodes are indexed by their start byte, which a merge keeps for the left node, so the heap
    // key (priority, index) orders equal priorities leftmost first.
    let mut rate = |nodes: &mut [Node], heap: &mut _, i: u32| {
        let l = nodes[i as usize];
        let (prio, merged) = if l.next == NONE {
            (u32::MAX, 0)
        } else {
            let r = nodes[l.next as usize];
            let end = if r.next == NONE { n } else { r.next as usize };
            pair_merge(i as usize, end, l.id, r.id)
        };
        nodes[i as usize].prio = prio;
        nodes[i as usize].merged = merged;
        if prio != u32::MAX {
            Queue::push(heap, prio, i);
        }
    };
    while let Some((prio, i)) = Queue::pop(heap) {
        // A bucket's nodes are visited in index order but far apart in a long piece: each would
        // wait for memory without a prefetch a few pops ahead.
        if let Some(next) = heap.ahead(8) {
            prefetch(&nodes[next as usize]);
        }
        let node = nodes[i as usize];
        // Stale entries: the node was absorbed (prio reset below) or its pair changed. A changed
        // pair of the same priority (equal scores in a SentencePiece model) has this very key:
        // the entry then stands for it, as its own one would.
        if node.prio != prio {
            continue;
        }
        let j = node.next;
        let right = nodes[j as usize];
        nodes[i as usize].id = node.merged;
        nodes[i as usize].next = right.next;
        nodes[j as usize].prio = u32::MAX;
        nodes[j as usize].id = NONE;
        if right.next != NONE {
            nodes[right.next as usize].prev = i;
        }
        rate(nodes, heap, i);
        if node.prev != NONE {
            rate(nodes, heap, node.prev);
        }
    }
    let mut i = 0u32;
    while i != NONE {
        out.push(nodes[i as usize].id);
        i = nodes[i as usize].next;
    }
}

/// Make room for `n` nodes in the empty `nodes`. A long piece's nodes are visited in order of
/// priority, far apart: from a few megabytes of them on, they are on huge pages (a 10 MB word
/// merged 10% faster).
fn reserve_nodes(nodes: &mut Vec<Node>, n: usize) {
    if n * std::mem::size_of::<Node>() >= 4 << 20 {
        nodes.reserve_exact(n);
        advise_huge_pages(nodes.spare_capacity_mut());
    }
}

/// The candidate merges of the heap path: popped lowest priority first, leftmost (lowest
/// index) first among equals. Entries may be stale; the loop checks them.
trait Queue {
    fn push(&mut self, prio: u32, i: u32);
    fn pop(&mut self) -> Option<(u32, u32)>;
    /// The index `k` pops ahead, where the queue knows it cheaply (to prefetch its node).
    fn ahead(&self, _k: usize) -> Option<u32> {
        None
    }
}

impl Queue for BinaryHeap<Reverse<u64>> {
    #[inline]
    fn push(&mut self, prio: u32, i: u32) {
        BinaryHeap::push(self, Reverse(u64::from(prio) << 32 | u64::from(i)));
    }
    #[inline]
    fn pop(&mut self) -> Option<(u32, u32)> {
        BinaryHeap::pop(self).map(|Reverse(key)| ((key >> 32) as u32, key as u32))
    }
}

/// Pieces of at least this many bytes queue their merges in [`Buckets`]: a binary heap of
/// millions of entries misses the CPU caches at every level of every pop (a 10 MB run of one
/// character took 17 times as long as a 1 MB one).
const BUCKETS_MIN: usize = 1 << 16;

/// A bucket queue: one list of entries per priority, so that a push or a pop touches a few cache
/// lines whatever the number of entries. The lowest non-empty bucket is taken whole, sorted by
/// index (its entries were mostly pushed in that order already), and popped in that order. A
/// merge creates a candidate of the priority being popped only where priorities tie (equal
/// scores in a SentencePiece model: with ids as priorities it would be the token it just made,
/// spelled longer), and it joins that bucket in index order; one of a lower priority (possible
/// with some vocabularies) is taken before the rest of the bucket being popped, which waits on a
/// stack.
#[derive(Default)]
struct Buckets {
    /// The indices queued at each priority, in the order they were pushed. One array per
    /// priority rather than one list threaded through all the entries: taking a bucket then reads
    /// memory in order instead of hopping across an array of every entry (tens of millions for a
    /// long piece, far beyond the CPU's caches: a 10 MB piece took 14 times as long as 1 MB).
    lists: Vec<Vec<u32>>,
    /// No bucket below this one holds entries.
    low: usize,
    /// Buckets taken and not popped to their end, the lowest priority last: `(priority, sorted
    /// indices, how many were popped)`.
    taken: Vec<(u32, Vec<u32>, usize)>,
}

impl Buckets {
    fn new(priorities: usize) -> Buckets {
        Buckets { lists: (0..priorities).map(|_| Vec::new()).collect(), ..Buckets::default() }
    }

    fn append(&mut self, prio: u32, i: u32) {
        let p = prio as usize;
        if p >= self.lists.len() {
            self.lists.resize_with(p + 1, Vec::new);
        }
        self.lists[p].push(i);
        self.low = self.low.min(p);
    }

    /// Empty bucket `p` into a sorted list.
    fn take(&mut self, p: usize) -> Vec<u32> {
        let mut list = std::mem::take(&mut self.lists[p]);
        if !list.is_sorted() {
            list.sort_unstable();
        }
        list
    }
}

impl Queue for Buckets {
    fn push(&mut self, prio: u32, i: u32) {
        if let Some((p, list, at)) = self.taken.last_mut() {
            if *p == prio {
                let at = *at + list[*at..].partition_point(|&x| x < i);
                list.insert(at, i);
                return;
            }
        }
        self.append(prio, i);
    }

    #[inline]
    fn ahead(&self, k: usize) -> Option<u32> {
        let (_, list, at) = self.taken.last()?;
        list.get(at + k).copied()
    }

    fn pop(&mut self) -> Option<(u32, u32)> {
        loop {
            while self.taken.last().is_some_and(|(_, list, at)| *at == list.len()) {
                self.taken.pop();
            }
            while self.low < self.lists.len() && self.lists[self.low].is_empty() {
                self.low += 1;
            }
            let bucket = (self.low < self.lists.len()).then_some(self.low);
            match (self.taken.last_mut(), bucket) {
                (Some((p, ..)), Some(b)) if b as u32 == *p => {
                    // Entries of this priority pushed while it waited: merged in, in order.
                    let more = self.take(b);
                    let (_, list, at) = self.taken.last_mut().expect("a taken bucket");
                    let mut rest = list.split_off(*at);
                    rest.extend(more);
                    rest.sort_unstable();
                    (*list, *at) = (rest, 0);
                }
                (Some((p, list, at)), b) if b.is_none_or(|b| b as u32 > *p) => {
                    *at += 1;
                    return Some((*p, list[*at - 1]));
                }
                (_, Some(b)) => {
                    let list = self.take(b);
                    self.taken.push((b as u32, list, 0));
                }
                (_, None) => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::{Filtered, TokenFilter};
    use crate::shared::SharedTable;
    use crate::vocab::Merges;

    /// A toy tiktoken vocabulary: all bytes, then the given tokens in rank order.
    fn toy(extra: &[&str]) -> Vocab {
        let mut t: Vec<(Vec<u8>, u32)> = (0..=255u8).map(|b| (vec![b], u32::from(b))).collect();
        for (i, s) in extra.iter().enumerate() {
            t.push((s.as_bytes().to_vec(), 256 + i as u32));
        }
        Vocab::new(t, Merges::Ranks).unwrap()
    }

    /// An encoder's table seeded with the short tokens of `v`, and one learned multi-token piece.
    fn seeded(v: &Vocab) -> SharedTable {
        let table = SharedTable::new(2048, 64);
        for id in 0..v.id_bound() {
            if (1..=MAX_SHORT).contains(&v.token(id).len()) {
                table.insert(pack(v.token(id)), &[id]);
            }
        }
        table.insert(pack(b"zz"), &[1, 2]);
        table
    }

    /// [`ranks_merge`] of a piece of 2 to [`STACK_MAX`] bytes.
    fn stack(v: &Vocab, ranks: &impl RankTable, piece: &[u8]) -> Vec<u32> {
        let mut ids = Vec::new();
        match piece.len() {
            ..=MAX_SHORT => ranks_merge::<16, false, false>(v, ranks, piece, &mut ids),
            16..=32 => ranks_merge::<32, false, false>(v, ranks, piece, &mut ids),
            _ => ranks_merge::<64, false, false>(v, ranks, piece, &mut ids),
        };
        ids
    }

    /// Every path, with the ranks from the vocabulary and from a seeded table, gives one answer.
    fn both(v: &Vocab, piece: &[u8]) -> Vec<u32> {
        let mut s = MergeScratch::default();
        let table = seeded(v);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        linear(v, v.short_table(), piece, &mut a, &mut s.parts);
        heap(v, v.short_table(), piece, &mut b, &mut s.nodes, &mut s.heap);
        assert_eq!(a, b, "linear and heap paths differ on {piece:?}");
        let (mut c, mut d) = (Vec::new(), Vec::new());
        linear(v, &table, piece, &mut c, &mut s.parts);
        heap(v, &table, piece, &mut d, &mut s.nodes, &mut s.heap);
        assert_eq!((&a, &a), (&c, &d), "vocabulary and table ranks differ on {piece:?}");
        // And behind the filter of the short tokens, as the encoder uses it.
        let keys: Vec<u128> =
            (0..v.id_bound()).map(|id| v.token(id)).filter(|t| (1..=MAX_SHORT).contains(&t.len())).map(pack).collect();
        let filter = TokenFilter::new(&keys);
        let filtered = Filtered { filter: &filter, ranks: &table };
        let (mut c, mut d) = (Vec::new(), Vec::new());
        linear(v, &filtered, piece, &mut c, &mut s.parts);
        heap(v, &filtered, piece, &mut d, &mut s.nodes, &mut s.heap);
        assert_eq!((&a, &a), (&c, &d), "unfiltered and filtered ranks differ on {piece:?}");
        if (2..=STACK_MAX).contains(&piece.len()) {
            let (e, f, g) = (stack(v, v.short_table(), piece), stack(v, &table, piece), stack(v, &filtered, piece));
            assert_eq!((&a, &a, &a), (&e, &f, &g), "linear and stack paths differ on {piece:?}");
        }
        // As dispatched for this CPU (the x86-64-v3 variant of the stack path where it has it).
        let mut h = Vec::new();
        encode_piece(v, &filtered, piece, &mut h, &mut s);
        assert_eq!(a, h, "encode_piece differs on {piece:?}");
        a
    }

    #[test]
    fn lowest_rank_first_leftmost_on_ties() {
        let v = toy(&["ab", "bc", "abc", "aa"]);
        // "abc": "ab" (256) beats "bc" (257), then "ab"+"c" = "abc".
        assert_eq!(both(&v, b"abc"), vec![258]);
        // "aaa": two equal "aa" candidates, the left one wins.
        assert_eq!(both(&v, b"aaa"), vec![259, u32::from(b'a')]);
        assert_eq!(both(&v, b"aaaa"), vec![259, 259]);
        assert_eq!(both(&v, b"xbc"), vec![u32::from(b'x'), 257]);
        // "zz" is in the seeded table as a learned two-token piece, which is no token to merge to.
        assert_eq!(both(&v, b"zzab"), vec![u32::from(b'z'), u32::from(b'z'), 256]);
    }

    proptest::proptest! {
        /// Buckets pop what a binary heap of `(priority, index)` pops, whatever the pushes.
        #[test]
        fn buckets_pop_as_a_heap_does(ops in proptest::collection::vec((0u32..12, 0u32..40, 0u8..3), 0..300)) {
            let mut heap = BinaryHeap::new();
            let mut buckets = Buckets::new(4);
            for (prio, i, pops) in ops {
                Queue::push(&mut heap, prio, i);
                Queue::push(&mut buckets, prio, i);
                for _ in 0..pops {
                    proptest::prop_assert_eq!(Queue::pop(&mut heap), Queue::pop(&mut buckets));
                }
            }
            loop {
                let (a, b) = (Queue::pop(&mut heap), Queue::pop(&mut buckets));
                proptest::prop_assert_eq!(a, b);
                if a.is_none() {
                    break;
                }
            }
        }
    }

    /// A piece merged with its candidates in a binary heap and in buckets.
    fn both_queues(v: &Vocab, piece: &[u8]) -> Vec<u32> {
        let mut s = MergeScratch::default();
        let mut a = Vec::new();
        heap(v, v.short_table(), piece, &mut a, &mut s.nodes, &mut s.heap);
        let mut b = Vec::new();
        queue_loop(v, v.short_table(), piece, &mut b, &mut s.nodes, &mut Buckets::new(1));
        assert_eq!(a, b, "heap and buckets differ on a piece of {} bytes", piece.len());
        a
    }

    #[test]
    fn long_pieces_merge_alike_in_a_heap_and_in_buckets() {
        let v = toy(&["aa", "aaaa", "ab", "ba", "aaaaaaaa", "bab", "aab", "baa", "bb", "abab"]);
        let mut x = 7u64;
        // 250,000 bytes: nodes enough to ask for huge pages.
        for n in [2, 3, 100, 1000, 5000, 250_000] {
            for kind in 0..3 {
                let s: Vec<u8> = (0..n)
                    .map(|i| {
                        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        match kind {
                            0 => b'a',
                            1 => {
                                if i % 7 == 3 {
                                    b'b'
                                } else {
                                    b'a'
                                }
                            }
                            _ => b"ab"[(x >> 60) as usize & 1],
                        }
                    })
                    .collect();
                let ids = both_queues(&v, &s);
                let decoded: Vec<u8> = ids.iter().flat_map(|&i| v.token(i).to_vec()).collect();
                assert_eq!(decoded, s);
            }
        }
    }

    #[test]
    fn long_runs_agree_between_paths() {
        let v = toy(&["aa", "aaaa", "ab", "ba", "aaaaaaaa", "bab"]);
        for n in [2, 3, 5, 17, 32, 33, 47, 61, 62, 63, 95, 96, 97, 300] {
            let s: Vec<u8> = (0..n).map(|i| if i % 7 == 3 { b'b' } else { b'a' }).collect();
            let ids = both(&v, &s);
            let decoded: Vec<u8> = ids.iter().flat_map(|&i| v.token(i).to_vec()).collect();
            assert_eq!(decoded, s);
        }
    }
}
