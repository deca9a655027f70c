//! The deflate encoder of `.json.gz` members (`json_gz`, which uses it): one dynamic-Huffman block
//! for the compact JSON list of a context's token ids.
//!
//! General-purpose deflate spends its time searching for byte matches. In a list of ids the
//! repeats that pay for themselves are repeated runs of tokens, so the search here is over
//! tokens: a table keyed by each pair of consecutive ids remembers where the pair last began, and
//! a match grows token by token (comparing ids, not bytes). Everything else is coded as literals.
//!
//! The Huffman code is the same for every member ([`Code`]): the symbols of a list of ids (the
//! digits, `,`, the match lengths and distances of natural text) are distributed alike in every
//! context, so a code built per member would save about 1% and cost a histogram and a tree per
//! member. A fixed code also lets each id's whole literal unit (`,` and its digits) go out as
//! one precomputed bit string.

const TABLE_BITS: u32 = 13;
const MIN_MATCH: u32 = 3;
const MAX_MATCH: u32 = 258;
const WINDOW: u32 = 32 << 10;
/// Shorter matches cost more bits than their literals (~3.5 bits per digit).
const MIN_WORTHWHILE: u32 = 6;
const END_OF_BLOCK: usize = 256;

/// Deflate symbol of a match length (3..=258) and its extra bits `(symbol, bits, value)`.
fn length_symbol(len: u32) -> (usize, u32, u32) {
    let l = len - 3;
    if l < 8 {
        (257 + l as usize, 0, 0)
    } else if l == 255 {
        (285, 0, 0)
    } else {
        let nb = 31 - l.leading_zeros();
        let extra = nb - 2;
        (257 + 4 * (nb as usize - 1) + ((l >> extra) & 3) as usize, extra, l & ((1 << extra) - 1))
    }
}

/// Deflate symbol of a distance (1..=32768) and its extra bits `(symbol, bits, value)`.
fn distance_symbol(dist: u32) -> (usize, u32, u32) {
    let x = dist - 1;
    if x < 4 {
        (x as usize, 0, 0)
    } else {
        let nb = 31 - x.leading_zeros();
        let extra = nb - 1;
        (2 * nb as usize + ((x >> extra) & 1) as usize, extra, x & ((1 << extra) - 1))
    }
}

/// Little-endian bit output, as deflate packs it, into a buffer with room for the worst case:
/// every `put` stores 8 bytes and keeps the bits of the last partial byte.
struct Bits<'a> {
    out: &'a mut [u8],
    pos: usize,
    buf: u64,
    n: u32,
}

impl Bits<'_> {
    /// Append the low `n` (≤ 56) bits of `v`.
    #[inline(always)]
    fn put(&mut self, v: u64, n: u32) {
        debug_assert!(n <= 56 && (n == 64 || v >> n == 0));
        self.buf |= v << self.n;
        self.n += n;
        self.out[self.pos..self.pos + 8].copy_from_slice(&self.buf.to_le_bytes());
        let bytes = self.n >> 3;
        self.pos += bytes as usize;
        // `bytes` ≤ 7, so the shift is below 64.
        self.buf >>= bytes * 8;
        self.n &= 7;
    }

    /// The number of bytes written (the last one padded with zero bits).
    fn finish(self) -> usize {
        self.pos + usize::from(self.n > 0)
    }
}

/// Huffman code lengths (at most `limit` bits) for `freq`, into `lens`. At least two symbols
/// get a code, so the code is complete (a lone symbol is paired with symbol 0 or 1).
fn code_lengths(freq: &[u32], limit: u32, lens: &mut [u8]) {
    debug_assert!(freq.len() <= MAX_SYMBOLS && lens.len() == freq.len());
    lens.fill(0);
    let mut used = [0u16; MAX_SYMBOLS];
    let mut n = 0;
    for (s, &f) in freq.iter().enumerate() {
        if f > 0 {
            used[n] = s as u16;
            n += 1;
        }
    }
    match n {
        0 => (used[0], used[1], n) = (0, 1, 2),
        1 => (used[1], n) = (u16::from(used[0] == 0), 2),
        _ => {}
    }
    let used = &used[..n];
    let mut weights = [0u64; MAX_SYMBOLS];
    for (w, &s) in weights.iter_mut().zip(used) {
        *w = u64::from(freq[s as usize].max(1));
    }
    let mut depths = [0u32; MAX_SYMBOLS];
    loop {
        huffman_depths(&weights[..n], &mut depths[..n]);
        if depths[..n].iter().all(|&d| d <= limit) {
            for (&s, &d) in used.iter().zip(&depths) {
                lens[s as usize] = d as u8;
            }
            return;
        }
        // Flatten the distribution until the deepest code fits (rare: needs very skewed counts).
        for w in &mut weights[..n] {
            *w = (*w >> 1).max(1);
        }
    }
}

const MAX_SYMBOLS: usize = 286;

/// Depth of each leaf of a Huffman tree over `weights` (at least two), into `depths`.
fn huffman_depths(weights: &[u64], depths: &mut [u32]) {
    let n = weights.len();
    // Leaves sorted by (weight, index), so the result is deterministic; internal nodes are
    // created in non-decreasing weight order, so two queues give the two lightest each time.
    let mut leaves = [(0u64, 0u16); MAX_SYMBOLS];
    for (i, &w) in weights.iter().enumerate() {
        leaves[i] = (w, i as u16);
    }
    let leaves = &mut leaves[..n];
    leaves.sort_unstable();
    // Nodes 0..n are the sorted leaves, n.. the internal nodes.
    let mut weight = [0u64; 2 * MAX_SYMBOLS];
    let mut parent = [0u16; 2 * MAX_SYMBOLS];
    for (i, &(w, _)) in leaves.iter().enumerate() {
        weight[i] = w;
    }
    let (mut leaf, mut inner, mut next) = (0, n, n);
    let take = |weight: &[u64], leaf: &mut usize, inner: &mut usize, next: usize| -> usize {
        if *leaf < n && (*inner >= next || weight[*leaf] <= weight[*inner]) {
            *leaf += 1;
            *leaf - 1
        } else {
            *inner += 1;
            *inner - 1
        }
    };
    while next < 2 * n - 1 {
        let a = take(&weight, &mut leaf, &mut inner, next);
        let b = take(&weight, &mut leaf, &mut inner, next);
        weight[next] = weight[a] + weight[b];
        parent[a] = next as u16;
        parent[b] = next as u16;
        next += 1;
    }
    let mut depth = [0u32; 2 * MAX_SYMBOLS];
    for i in (0..2 * n - 2).rev() {
        depth[i] = depth[parent[i] as usize] + 1;
    }
    for (i, &(_, original)) in leaves.iter().enumerate() {
        depths[original as usize] = depth[i];
    }
}

/// Canonical codes for `lens`, bit-reversed for LSB-first output.
fn canonical_codes(lens: &[u8], codes: &mut [u32]) {
    let mut count = [0u32; 16];
    for &l in lens {
        count[l as usize] += 1;
    }
    count[0] = 0;
    let mut next = [0u32; 16];
    let mut code = 0;
    for bits in 1..16 {
        code = (code + count[bits - 1]) << 1;
        next[bits] = code;
    }
    for (s, &l) in lens.iter().enumerate() {
        if l > 0 {
            let c = next[l as usize];
            next[l as usize] += 1;
            codes[s] = c.reverse_bits() >> (32 - u32::from(l));
        }
    }
}

/// Order in which the code-length code's lengths are sent (RFC 1951 §3.2.7).
const CL_ORDER: [usize; 19] = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15];

/// Run-length code the concatenated code lengths: `(symbol, extra value)`.
fn rle_lengths(lens: &[u8], out: &mut Vec<(u8, u8)>) {
    let mut i = 0;
    while i < lens.len() {
        let v = lens[i];
        let mut run = 1;
        while i + run < lens.len() && lens[i + run] == v {
            run += 1;
        }
        i += run;
        if v == 0 {
            while run >= 11 {
                let r = run.min(138);
                out.push((18, (r - 11) as u8));
                run -= r;
            }
            if run >= 3 {
                out.push((17, (run - 3) as u8));
                run = 0;
            }
        } else {
            out.push((v, 0));
            run -= 1;
            while run >= 3 {
                let r = run.min(6);
                out.push((16, (r - 3) as u8));
                run -= r;
            }
        }
        out.extend(std::iter::repeat_n((v, 0), run));
    }
}

/// Relative frequencies of the literal/length symbols in the JSON lists of tokenized text
/// (measured on the prose, code and docs of `make_corpus.py`'s benchmark corpus with r50k,
/// cl100k and o200k): `,`, `[`, `]` and the end of block here, the digits and the match lengths
/// below. Every other symbol that can occur gets weight 1.
const LITERAL_WEIGHTS: [(usize, u32); 4] =
    [(b',' as usize, 6453), (b'[' as usize, 6), (b']' as usize, 6), (END_OF_BLOCK, 6)];

/// Relative frequencies of the digits `0` to `9`, measured likewise.
const DIGIT_WEIGHTS: [u32; 10] = [2000, 3882, 3197, 2831, 2291, 2225, 2321, 1943, 2134, 2110];

/// Relative frequencies of the length symbols 260 to 285, measured likewise.
const LENGTH_WEIGHTS: [u32; 26] =
    [35, 82, 282, 177, 129, 167, 116, 88, 70, 95, 62, 43, 30, 38, 21, 18, 11, 10, 5, 3, 2, 2, 1, 1, 2, 1];

/// Relative frequencies of the 30 distance symbols, measured likewise.
const DISTANCE_WEIGHTS: [u32; 30] =
    [1, 1, 1, 1, 1, 1, 5, 18, 37, 41, 88, 90, 167, 100, 136, 100, 148, 85, 107, 68, 87, 53, 64, 37, 39, 15, 3, 1, 1, 1];

/// Bytes a literal unit can hold: `,` and the digits (see [`Deflater::unit`]).
const UNIT_SYMBOLS: &[u8] = b",0123456789";

/// The Huffman code every member uses, and the block header that describes it.
struct Code {
    lit: [u32; 286],
    lit_len: [u8; 286],
    dist: [u32; 30],
    dist_len: [u8; 30],
    /// `lengths[len]` for a match of `len` bytes: its symbol's code and extra bits, and their
    /// number of bits in the top byte.
    lengths: [u64; MAX_MATCH as usize + 1],
    /// The block header (final block, dynamic Huffman, the code lengths), `header_bits` long.
    header: Vec<u8>,
    header_bits: usize,
}

impl Code {
    fn new() -> Code {
        let mut weights = [0u32; 286];
        for &(s, w) in &LITERAL_WEIGHTS {
            weights[s] = w;
        }
        weights[usize::from(b'0')..][..10].copy_from_slice(&DIGIT_WEIGHTS);
        weights[260..][..LENGTH_WEIGHTS.len()].copy_from_slice(&LENGTH_WEIGHTS);
        for w in &mut weights[257..] {
            *w = (*w).max(1);
        }
        let mut lit_len = [0u8; 286];
        code_lengths(&weights, 15, &mut lit_len);
        let mut dist_len = [0u8; 30];
        code_lengths(&DISTANCE_WEIGHTS, 15, &mut dist_len);
        // A unit (at most 7 symbols) must fit in one 56-bit `put`.
        assert!(UNIT_SYMBOLS.iter().all(|&b| lit_len[b as usize] <= 8), "unit symbols within 8 bits");
        let mut lit = [0u32; 286];
        let mut dist = [0u32; 30];
        canonical_codes(&lit_len, &mut lit);
        canonical_codes(&dist_len, &mut dist);
        let mut lengths = [0u64; MAX_MATCH as usize + 1];
        for (len, slot) in lengths.iter_mut().enumerate().skip(MIN_MATCH as usize) {
            let (s, bits, value) = length_symbol(len as u32);
            let n = u32::from(lit_len[s]);
            *slot = u64::from(lit[s]) | u64::from(value) << n | u64::from(n + bits) << 56;
        }
        let (header, header_bits) = block_header(&lit_len, &dist_len);
        Code { lit, lit_len, dist, dist_len, lengths, header, header_bits }
    }

    /// The code of the unit `u` (as in [`Deflater::unit`]), its length in the top byte.
    fn unit(&self, u: u64) -> u64 {
        let (mut code, mut n) = (0u64, 0u32);
        for &b in &u.to_le_bytes()[..(u >> 56) as usize] {
            code |= u64::from(self.lit[b as usize]) << n;
            n += u32::from(self.lit_len[b as usize]);
        }
        debug_assert!(n <= 56);
        code | u64::from(n) << 56
    }

    /// Literal/length symbol `s`.
    #[inline(always)]
    fn put_symbol(&self, bits: &mut Bits<'_>, s: usize) {
        bits.put(u64::from(self.lit[s]), u32::from(self.lit_len[s]));
    }

    /// A match's length and distance codes, with their extra bits.
    #[inline(always)]
    fn put_match(&self, bits: &mut Bits<'_>, len: u32, dist: u32) {
        let l = self.lengths[len as usize];
        bits.put(l & ((1 << 56) - 1), (l >> 56) as u32);
        let (s, extra, value) = distance_symbol(dist);
        let n = u32::from(self.dist_len[s]);
        // At most 15 + 13 bits.
        bits.put(u64::from(self.dist[s]) | u64::from(value) << n, n + extra);
    }
}

/// The header of a final dynamic-Huffman block with these code lengths: its bytes (the last one
/// partial) and its length in bits.
fn block_header(lit_len: &[u8; 286], dist_len: &[u8; 30]) -> (Vec<u8>, usize) {
    let hlit = 257.max(lit_len.iter().rposition(|&l| l > 0).map_or(0, |p| p + 1));
    let hdist = 1.max(dist_len.iter().rposition(|&l| l > 0).map_or(0, |p| p + 1));
    let mut all = [0u8; 286 + 30];
    all[..hlit].copy_from_slice(&lit_len[..hlit]);
    all[hlit..hlit + hdist].copy_from_slice(&dist_len[..hdist]);
    let mut rle = Vec::with_capacity(hlit + hdist);
    rle_lengths(&all[..hlit + hdist], &mut rle);
    let mut cl_freq = [0u32; 19];
    for &(s, _) in &rle {
        cl_freq[s as usize] += 1;
    }
    let mut cl_lens = [0u8; 19];
    code_lengths(&cl_freq, 7, &mut cl_lens);
    let mut cl_codes = [0u32; 19];
    canonical_codes(&cl_lens, &mut cl_codes);
    let hclen = 4.max(CL_ORDER.iter().rposition(|&s| cl_lens[s] > 0).map_or(0, |p| p + 1));

    let mut buf = vec![0u8; 1024];
    let mut bits = Bits { out: &mut buf, pos: 0, buf: 0, n: 0 };
    bits.put(1 | 2 << 1, 3); // final block, dynamic Huffman
    bits.put((hlit - 257) as u64, 5);
    bits.put((hdist - 1) as u64, 5);
    bits.put((hclen - 4) as u64, 4);
    for &s in &CL_ORDER[..hclen] {
        bits.put(u64::from(cl_lens[s]), 3);
    }
    for &(s, extra) in &rle {
        bits.put(u64::from(cl_codes[s as usize]), u32::from(cl_lens[s as usize]));
        match s {
            16 => bits.put(u64::from(extra), 2),
            17 => bits.put(u64::from(extra), 3),
            18 => bits.put(u64::from(extra), 7),
            _ => {}
        }
    }
    let total = bits.pos * 8 + bits.n as usize;
    let n = bits.finish();
    buf.truncate(n);
    (buf, total)
}

/// The fixed code and the match search's state, reused across members (one per thread).
pub(super) struct Deflater {
    code: Code,
    /// The deflate block being written (sized for the worst case, cut at the end).
    block: Vec<u8>,
    /// Hash of a pair of ids → `base + position`; older entries are below `base`.
    table: Vec<u32>,
    base: u32,
}

impl Default for Deflater {
    fn default() -> Self {
        Self { code: Code::new(), block: Vec::new(), table: Vec::new(), base: 0 }
    }
}

impl Deflater {
    /// The code of a literal unit: up to seven bytes of `,` and digits in the low bytes of `text`,
    /// their number in the top byte. Returns the bit string, its length in bits in the top byte.
    pub(super) fn unit(&self, text: u64) -> u64 {
        self.code.unit(text)
    }

    /// Append the deflate block of the JSON list `json` of `ids` to `out`: token-level LZ77 (see
    /// the module docs) and the fixed code, in one pass. Token `i`'s unit (its `,` and digits; the
    /// first one's `[` and digits) is `json[starts[i]..starts[i + 1]]`, `starts[n]` is the closing
    /// bracket, and `codes[i]` is the unit's code from [`Deflater::unit`] or 0 to code it byte by
    /// byte.
    pub(super) fn write_block(&mut self, ids: &[u32], json: &[u8], starts: &[u32], codes: &[u64], out: &mut Vec<u8>) {
        let n = ids.len();
        if self.table.is_empty() {
            self.table = vec![0; 1 << TABLE_BITS];
        }
        if u64::from(self.base) + n as u64 + 2 >= u64::from(u32::MAX) {
            self.table.fill(0);
            self.base = 0;
        }
        let base = self.base + 1;
        self.base += n as u32 + 1;
        // Worst case: every byte a 15-bit literal, plus the header and 8 bytes of slack.
        debug_assert!(starts.len() == n + 1 && codes.len() == n && json.len() == starts[n] as usize + 1);
        let bound = json.len() * 2 + self.code.header.len() + 16;
        if self.block.len() < bound {
            self.block.resize(bound, 0);
        }
        let (code, table) = (&self.code, &mut self.table);
        let header = &code.header;
        self.block[..header.len()].copy_from_slice(header);
        let mut bits = Bits {
            out: &mut self.block,
            pos: code.header_bits / 8,
            buf: u64::from(header.last().copied().unwrap_or(0)) & ((1 << (code.header_bits % 8)) - 1),
            n: (code.header_bits % 8) as u32,
        };
        // Unit `i`'s literals: its whole code from the table, or byte by byte for large ids.
        let literals = |bits: &mut Bits<'_>, i: usize| match codes[i] {
            c if c != 0 => bits.put(c & ((1 << 56) - 1), (c >> 56) as u32),
            _ => {
                for &b in &json[starts[i] as usize..starts[i + 1] as usize] {
                    code.put_symbol(bits, usize::from(b));
                }
            }
        };
        let slot = |i: usize| -> usize {
            let k = u64::from(ids[i]) | u64::from(ids[i + 1]) << 32;
            (k.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - TABLE_BITS)) as usize
        };
        code.put_symbol(&mut bits, usize::from(b'['));
        if n > 0 {
            // The first unit has no `,`: the bracket stands in its place.
            for &b in &json[1..starts[1] as usize] {
                code.put_symbol(&mut bits, usize::from(b));
            }
        }
        // Unit 0 starts with '[', so only units from 1 on can match each other byte for byte.
        let mut i = 1;
        while i < n {
            if i + 1 < n {
                let h = slot(i);
                let candidate = table[h];
                table[h] = base + i as u32;
                if candidate > base {
                    let j = (candidate - base) as usize;
                    let dist = starts[i] - starts[j];
                    if ids[j] == ids[i] && ids[j + 1] == ids[i + 1] && dist <= WINDOW {
                        let mut k = 2;
                        while i + k < n && ids[j + k] == ids[i + k] && starts[i + k + 1] - starts[i] <= MAX_MATCH {
                            k += 1;
                        }
                        let len = starts[i + k] - starts[i];
                        if (MIN_WORTHWHILE..=MAX_MATCH).contains(&len) {
                            code.put_match(&mut bits, len, dist);
                            for p in i + 1..(i + k).min(n - 1) {
                                table[slot(p)] = base + p as u32;
                            }
                            i += k;
                            continue;
                        }
                    }
                }
            }
            literals(&mut bits, i);
            i += 1;
        }
        code.put_symbol(&mut bits, usize::from(b']'));
        code.put_symbol(&mut bits, END_OF_BLOCK);
        let len = bits.finish();
        out.extend_from_slice(&self.block[..len]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// The block of `ids` with every unit coded byte by byte, inflated back to its JSON.
    fn round_trip(d: &mut Deflater, ids: &[u32]) {
        // (What json_gz's `json` writes, from serde_json: the tests import nothing of their users.)
        let json = serde_json::to_vec(ids).unwrap();
        // Unit 0 begins at the `[`, every other one at its `,`; the last entry is the `]`.
        let mut starts: Vec<u32> = (0..json.len() as u32).filter(|&i| i == 0 || json[i as usize] == b',').collect();
        starts.truncate(ids.len());
        starts.push(json.len() as u32 - 1);
        let mut block = Vec::new();
        d.write_block(ids, &json, &starts, &vec![0; ids.len()], &mut block);
        let mut back = Vec::new();
        flate2::read::DeflateDecoder::new(&block[..]).read_to_end(&mut back).expect("a valid deflate block");
        assert_eq!(String::from_utf8(back).unwrap(), String::from_utf8(json).unwrap());
    }

    #[test]
    fn symbols_match_rfc_1951_tables() {
        // (length, symbol, extra bits) at the edges of each range.
        for (len, sym, bits) in [(3, 257, 0), (10, 264, 0), (11, 265, 1), (12, 265, 1), (13, 266, 1), (19, 269, 2)] {
            assert_eq!(length_symbol(len).0, sym, "length {len}");
            assert_eq!(length_symbol(len).1, bits, "length {len}");
        }
        for (len, sym, bits, v) in [(227, 284, 5, 0), (257, 284, 5, 30), (258, 285, 0, 0), (131, 281, 5, 0)] {
            assert_eq!(length_symbol(len), (sym, bits, v), "length {len}");
        }
        for (d, sym, bits, v) in
            [(1, 0, 0, 0), (4, 3, 0, 0), (5, 4, 1, 0), (6, 4, 1, 1), (7, 5, 1, 0), (24577, 29, 13, 0)]
        {
            assert_eq!(distance_symbol(d), (sym, bits, v), "distance {d}");
        }
        assert_eq!(distance_symbol(32768), (29, 13, 8191));
    }

    #[test]
    fn skewed_counts_keep_codes_within_15_bits() {
        // Fibonacci-like symbol counts would give a Huffman tree deeper than deflate allows.
        let mut freq = [0u32; 286];
        let (mut a, mut b) = (1u32, 1u32);
        for f in freq.iter_mut().take(30) {
            *f = a;
            (a, b) = (b, a.saturating_add(b));
        }
        let mut lens = [0u8; 286];
        code_lengths(&freq, 15, &mut lens);
        assert!(lens.iter().all(|&l| l <= 15));
        let kraft: f64 = lens.iter().filter(|&&l| l > 0).map(|&l| 0.5f64.powi(i32::from(l))).sum();
        assert!((kraft - 1.0).abs() < 1e-12, "the code is complete: {kraft}");
    }

    #[test]
    fn the_fixed_code_is_complete_and_covers_every_symbol_a_member_can_need() {
        let code = Code::new();
        let kraft = |lens: &[u8]| -> f64 { lens.iter().filter(|&&l| l > 0).map(|&l| 0.5f64.powi(i32::from(l))).sum() };
        assert!((kraft(&code.lit_len) - 1.0).abs() < 1e-12);
        assert!((kraft(&code.dist_len) - 1.0).abs() < 1e-12);
        for s in UNIT_SYMBOLS.iter().chain(b"[]").map(|&b| usize::from(b)).chain(END_OF_BLOCK..286) {
            assert!((1..=15).contains(&code.lit_len[s]), "literal/length symbol {s}");
        }
        assert!(code.dist_len.iter().all(|l| (1..=15).contains(l)), "every distance symbol");
        // (That seven unit symbols fit one 56-bit write, `Code::new` asserts.)
    }

    #[test]
    fn byte_by_byte_blocks_round_trip() {
        let mut d = Deflater::default();
        round_trip(&mut d, &[]);
        round_trip(&mut d, &[u32::MAX]);
        round_trip(&mut d, &[7; 1000]);
        round_trip(&mut d, &(0..3000).map(|i| i % 41 * 1_000_003).collect::<Vec<u32>>());
    }

    #[test]
    fn the_match_table_starts_over_when_its_positions_would_overflow() {
        let mut d = Deflater::default();
        let ids: Vec<u32> = [3u32, 1, 4, 1, 5, 9, 2, 6].iter().cycle().take(300).copied().collect();
        round_trip(&mut d, &ids);
        // The next block ends just below `u32::MAX`, the one after starts the table over; entries
        // of either must not be taken for matches in the blocks after it.
        d.base = u32::MAX - 400;
        round_trip(&mut d, &ids);
        assert!(d.base > u32::MAX - 400);
        round_trip(&mut d, &ids);
        assert_eq!(d.base, 301, "the table started over");
        round_trip(&mut d, &ids[1..]);
    }
}
