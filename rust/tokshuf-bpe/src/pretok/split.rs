//! How a stretch of text (between added tokens, normalized) becomes the pieces that are merged:
//! the pre-tokenizers of `tokenizer.json` files, as `tokenizers` applies them.
//!
//! The common shapes run as one cursor over the text: a pattern with a hand-written scanner, any
//! other split regex (an [`Automaton`]), or SentencePiece's word starts. Anything else runs as
//! [`SplitStep`]s, each applied to every piece of the one before, with `tokenizers`' five ways
//! of keeping the matches and the text between them.

use std::sync::Arc;

use super::automaton::Automaton;
use super::scan::Cursor;
use crate::pattern::Pattern;

/// What a split keeps of its matches and of the text between them (`SplitDelimiterBehavior`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Behavior {
    Removed,
    Isolated,
    MergedWithPrevious,
    MergedWithNext,
    Contiguous,
}

impl Behavior {
    pub fn from_name(name: &str) -> Option<Behavior> {
        Some(match name {
            "Removed" => Behavior::Removed,
            "Isolated" => Behavior::Isolated,
            "MergedWithPrevious" => Behavior::MergedWithPrevious,
            "MergedWithNext" => Behavior::MergedWithNext,
            "Contiguous" => Behavior::Contiguous,
            _ => return None,
        })
    }
}

/// When `Metaspace` puts its mark before a stretch of text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PrependScheme {
    Always,
    /// Only before the stretch that starts the text.
    First,
    Never,
}

/// What a pre-tokenizer does to each stretch of text before splitting it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Prefix {
    None,
    /// `ByteLevel(add_prefix_space)`: a space before a stretch that does not start with one.
    Space,
    /// `Metaspace`: every space becomes `mark`, which is also put before the stretch (by
    /// `scheme`) unless it starts with one.
    Metaspace {
        mark: char,
        scheme: PrependScheme,
    },
}

impl Prefix {
    /// `text` (not empty) as the splitter sees it; `first`: it starts the text.
    pub fn apply<'a>(&self, text: &'a str, first: bool) -> std::borrow::Cow<'a, str> {
        use std::borrow::Cow;
        match *self {
            Prefix::None => Cow::Borrowed(text),
            Prefix::Space if text.starts_with(' ') => Cow::Borrowed(text),
            Prefix::Space => Cow::Owned(format!(" {text}")),
            Prefix::Metaspace { mark, scheme } => {
                let mut s = String::with_capacity(text.len() + 4);
                let prepend = match scheme {
                    PrependScheme::Always => true,
                    PrependScheme::First => first,
                    PrependScheme::Never => false,
                };
                let replaced = text.replace(' ', mark.encode_utf8(&mut [0; 4]));
                if prepend && !replaced.starts_with(mark) {
                    s.push(mark);
                }
                s.push_str(&replaced);
                Cow::Owned(s)
            }
        }
    }
}

/// What a split step matches.
#[derive(Debug, Clone)]
pub(crate) enum Matcher {
    /// A pattern with a hand-written scanner (it matches at every position).
    Scanner(Pattern),
    Regex(Arc<Automaton>),
}

/// One `Split` (or `Digits`, or `ByteLevel`'s regex) of a pre-tokenizer sequence.
#[derive(Debug, Clone)]
pub(crate) struct SplitStep {
    pub matcher: Matcher,
    pub behavior: Behavior,
    pub invert: bool,
}

/// How a stretch of text is cut into pieces.
#[derive(Debug, Clone)]
pub(crate) enum Splitter {
    /// Each piece is the match at its start (the pattern matches everywhere).
    Scanner(Pattern),
    /// Each piece is the match at its start, or the text up to the next match.
    Regex(Arc<Automaton>),
    /// Cuts that no token spans (SentencePiece-style models, whose text is one piece).
    SafeCuts(Arc<SafeCuts>),
    /// A piece starts before each `mark` (`Metaspace` with `split`).
    Marks(char),
    /// The stretch is one piece.
    Whole,
    /// Steps applied in turn to every piece of the previous one.
    Steps(Arc<[SplitStep]>),
}

impl Splitter {
    /// A short description, for identities and messages.
    pub fn describe(&self) -> String {
        match self {
            Splitter::Scanner(p) => p.name().to_string(),
            Splitter::Regex(_) => "regex".into(),
            Splitter::SafeCuts(c) => match c.mark {
                Some(m) => format!("word starts ({m})"),
                None => "safe cuts".into(),
            },
            Splitter::Marks(c) => format!("before each {c}"),
            Splitter::Whole => "none".into(),
            Splitter::Steps(s) => format!("{} steps", s.len()),
        }
    }

    /// The pieces of `text` as byte ranges, in order (with gaps where a step removes text).
    pub fn spans(&self, text: &str, out: &mut Vec<(usize, usize)>) {
        out.clear();
        let t = text.as_bytes();
        match self {
            Splitter::Scanner(p) => push_pieces(p.cursor(), t, out),
            Splitter::Regex(a) => push_pieces(RegexCursor(a), t, out),
            Splitter::SafeCuts(c) => push_pieces(SafeCursor::new(c), t, out),
            Splitter::Marks(c) => push_pieces(MarkCursor::every(*c), t, out),
            Splitter::Whole => {
                if !t.is_empty() {
                    out.push((0, t.len()));
                }
            }
            Splitter::Steps(steps) => {
                if !t.is_empty() {
                    out.push((0, t.len()));
                }
                let mut next = Vec::new();
                for step in steps.iter() {
                    next.clear();
                    for &(a, b) in out.iter() {
                        step.apply(&text[a..b], a, &mut next);
                    }
                    std::mem::swap(out, &mut next);
                }
            }
        }
    }
}

fn push_pieces(mut cursor: impl Cursor, t: &[u8], out: &mut Vec<(usize, usize)>) {
    let mut pos = 0;
    while pos < t.len() {
        let end = cursor.next(t, pos);
        out.push((pos, end));
        pos = end;
    }
}

impl SplitStep {
    /// The pieces of `s` (which starts at byte `base` of the text) appended to `out`.
    fn apply(&self, s: &str, base: usize, out: &mut Vec<(usize, usize)>) {
        let t = s.as_bytes();
        // The matches and the text between them, in order: (start, end, is a match).
        let mut parts: Vec<(usize, usize, bool)> = Vec::new();
        let mut pos = 0;
        match &self.matcher {
            Matcher::Scanner(p) => {
                let mut cursor = p.cursor();
                while pos < t.len() {
                    let e = cursor.next(t, pos);
                    parts.push((pos, e, true));
                    pos = e;
                }
            }
            Matcher::Regex(a) => loop {
                let start = a.next_match_start(t, pos);
                if start > pos {
                    parts.push((pos, start, false));
                }
                if start == t.len() {
                    break;
                }
                let end = a.match_at(t, start).expect("a match starts there");
                parts.push((start, end, true));
                pos = end;
            },
        }
        if self.invert {
            for p in &mut parts {
                p.2 = !p.2;
            }
        }
        // `tokenizers`' `NormalizedString::split`, on non-empty parts.
        let mut kept: Vec<(usize, usize)> = Vec::with_capacity(parts.len());
        match self.behavior {
            Behavior::Removed => kept.extend(parts.iter().filter(|p| !p.2).map(|p| (p.0, p.1))),
            Behavior::Isolated => kept.extend(parts.iter().map(|p| (p.0, p.1))),
            Behavior::Contiguous => {
                let mut prev = false;
                for &(a, b, m) in &parts {
                    match kept.last_mut() {
                        Some(last) if m == prev => last.1 = b,
                        _ => kept.push((a, b)),
                    }
                    prev = m;
                }
            }
            Behavior::MergedWithPrevious => {
                let mut prev = false;
                for &(a, b, m) in &parts {
                    match kept.last_mut() {
                        Some(last) if m && !prev => last.1 = b,
                        _ => kept.push((a, b)),
                    }
                    prev = m;
                }
            }
            Behavior::MergedWithNext => {
                let mut prev = false;
                for &(a, b, m) in parts.iter().rev() {
                    match kept.last_mut() {
                        Some(last) if m && !prev => last.0 = a,
                        _ => kept.push((a, b)),
                    }
                    prev = m;
                }
                kept.reverse();
            }
        }
        out.extend(kept.into_iter().map(|(a, b)| (base + a, base + b)));
    }
}

/// The pieces of an [`Automaton`]'s split: each match, and each gap between matches.
pub(crate) struct RegexCursor<'a>(pub &'a Automaton);

impl Cursor for RegexCursor<'_> {
    #[inline(always)]
    fn next(&mut self, t: &[u8], pos: usize) -> usize {
        match self.0.match_at(t, pos) {
            Some(end) => end,
            None => self.0.gap_end(t, pos),
        }
    }
}

/// Pieces that start before each `mark` character (`Metaspace` with `split`).
pub(crate) struct MarkCursor {
    finder: memchr::memmem::Finder<'static>,
}

impl MarkCursor {
    pub fn every(mark: char) -> MarkCursor {
        MarkCursor { finder: memchr::memmem::Finder::new(mark.encode_utf8(&mut [0; 4]).as_bytes()).into_owned() }
    }
}

impl Cursor for MarkCursor {
    #[inline]
    fn next(&mut self, t: &[u8], pos: usize) -> usize {
        let from = pos + 1;
        if from >= t.len() {
            return t.len();
        }
        self.finder.find(&t[from..]).map_or(t.len(), |i| from + i)
    }
}

/// Where a text that BPE merges as one piece can be cut without changing its encoding: wherever
/// no token spans the cut, since every merge makes a token. With the vocabularies of
/// SentencePiece models that is before each `▁` that follows another character (tokens hold
/// `▁` only at their start, or in runs of `▁`), and between ASCII characters that no token
/// holds side by side (a line break and what follows it, for one: line breaks are byte tokens).
/// Pieces are what the caches remember, so the shorter the better.
#[derive(Debug)]
pub(crate) struct SafeCuts {
    /// The mark, when no token holds it after another character.
    mark: Option<char>,
    /// Its UTF-8 bytes as a little-endian word, and the mask of their length (0: no mark).
    mark_word: u32,
    mark_mask: u32,
    mark_len: usize,
    /// `cut[a * 128 + b]` is 1 when no token holds the ASCII characters `a`, `b` side by side.
    cut: Box<[u8; 128 * 128]>,
    /// The table by columns of eight: `by_eights[j][a]` has bit `b % 8` set when `cut` holds 1
    /// for `a`, `b`, for the `b` with `b / 8 == j`. Sixteen tables of 128 bytes, each looked up
    /// whole by one byte permute.
    by_eights: Box<[[u8; 128]; 16]>,
    /// A space is a mark too: the text is cut before the normalizer writes the mark for it.
    spaces: bool,
}

impl SafeCuts {
    /// The cuts for a vocabulary of `tokens` (the text of every token a merge can make), and the
    /// `mark` its pipeline writes for spaces, if any. With `unknowns_fuse`, a run of characters
    /// that are no token becomes one unknown token, so no cut may fall inside such a run: cuts
    /// are then only between characters that are tokens. With `spaces`, the cuts are those of
    /// the text before SentencePiece's normalizer writes `mark` for each space: a space is then
    /// a mark too, and never one of an ASCII pair.
    pub fn new<'a>(
        tokens: impl Iterator<Item = &'a str>,
        mark: Option<char>,
        unknowns_fuse: bool,
        spaces: bool,
    ) -> SafeCuts {
        let mut cut = Box::new([1u8; 128 * 128]);
        let mut mark_safe = mark.is_some();
        let mut ascii_token = [false; 128];
        let mut mark_token = false;
        for t in tokens {
            let mut one = t.chars();
            if let (Some(c), None) = (one.next(), one.next()) {
                if c.is_ascii() {
                    ascii_token[c as usize] = true;
                }
                mark_token |= Some(c) == mark;
            }
            let mut prev: Option<char> = None;
            for c in t.chars() {
                if let Some(p) = prev {
                    if p.is_ascii() && c.is_ascii() {
                        cut[p as usize * 128 + c as usize] = 0;
                    }
                    if Some(c) == mark && Some(p) != mark {
                        mark_safe = false;
                    }
                }
                prev = Some(c);
            }
        }
        if unknowns_fuse {
            for a in 0..128 {
                for b in 0..128 {
                    if !(ascii_token[a] && ascii_token[b]) {
                        cut[a * 128 + b] = 0;
                    }
                }
            }
            // Before a mark that is no token, an unknown run could continue.
            mark_safe &= mark_token;
        }
        let mark = mark.filter(|_| mark_safe);
        let spaces = spaces && mark.is_some();
        if spaces {
            for c in 0..128 {
                cut[usize::from(b' ') * 128 + c] = 0;
                cut[c * 128 + usize::from(b' ')] = 0;
            }
        }
        let mut mark_bytes = [0u8; 4];
        let mark_len = mark.map_or(0, |m| m.encode_utf8(&mut mark_bytes).len());
        let mark_mask = if mark_len == 4 { u32::MAX } else { (1u32 << (8 * mark_len)) - 1 };
        let mut by_eights = Box::new([[0u8; 128]; 16]);
        for (i, &c) in cut.iter().enumerate() {
            let (a, b) = (i / 128, i % 128);
            by_eights[b / 8][a] |= c << (b % 8);
        }
        SafeCuts { mark, mark_word: u32::from_le_bytes(mark_bytes), mark_mask, mark_len, cut, by_eights, spaces }
    }

    /// Whether the text before the normalizer is cut (spaces are marks).
    pub fn spaces(&self) -> bool {
        self.spaces
    }

    /// 1 if the text can be cut between the ASCII characters `a` and `b`.
    #[cfg(any(test, not(target_arch = "x86_64")))]
    #[inline(always)]
    fn cut(&self, a: u8, b: u8) -> u8 {
        self.cut[usize::from(a & 0x7f) * 128 + usize::from(b & 0x7f)]
    }

    /// Bit `k`: the table's entry for the pair `buf[k]`, `buf[k + 1]` (their low 7 bits).
    #[inline(always)]
    fn pair_cuts(&self, buf: &[u8; 65]) -> u64 {
        #[cfg(target_arch = "x86_64")]
        if crate::cpu::has_avx512_vbmi() {
            // SAFETY: the CPU has the features `pair_cuts_vbmi` is compiled for.
            return unsafe { self.pair_cuts_vbmi(buf) };
        }
        self.pair_cuts_sse2(buf)
    }

    /// [`SafeCuts::pair_cuts`] in registers: each pair's byte of [`SafeCuts::by_eights`] is
    /// picked by sixteen permutes (one per table, kept where the pair's second character selects
    /// it), and its bit by a byte test. No load depends on the text.
    ///
    /// # Safety
    /// The CPU must have AVX-512 F, BW and VBMI.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    unsafe fn pair_cuts_vbmi(&self, buf: &[u8; 65]) -> u64 {
        use std::arch::x86_64::*;
        // SAFETY: the caller's CPU has the features; the loads read bytes 0..64 and 1..65 of `buf`
        // and the two halves of each 128-byte table.
        unsafe {
            let low7 = _mm512_set1_epi8(0x7f);
            let a = _mm512_and_si512(_mm512_loadu_si512(buf.as_ptr().cast()), low7);
            let b = _mm512_and_si512(_mm512_loadu_si512(buf.as_ptr().add(1).cast()), low7);
            let eight = _mm512_and_si512(_mm512_srli_epi16(b, 3), _mm512_set1_epi8(0x0f));
            let mut bytes = _mm512_setzero_si512();
            for (j, table) in self.by_eights.iter().enumerate() {
                let lo = _mm512_loadu_si512(table.as_ptr().cast());
                let hi = _mm512_loadu_si512(table.as_ptr().add(64).cast());
                let picked = _mm512_permutex2var_epi8(lo, a, hi);
                let here = _mm512_cmpeq_epi8_mask(eight, _mm512_set1_epi8(j as i8));
                bytes = _mm512_mask_mov_epi8(bytes, here, picked);
            }
            // 1 << (b % 8) in each byte: a shuffle within each 16-byte lane.
            let bits =
                _mm512_broadcast_i32x4(_mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128));
            let bit = _mm512_shuffle_epi8(bits, _mm512_and_si512(b, _mm512_set1_epi8(7)));
            _mm512_test_epi8_mask(bytes, bit)
        }
    }

    /// [`SafeCuts::pair_cuts`] on any CPU.
    #[inline(always)]
    fn pair_cuts_sse2(&self, buf: &[u8; 65]) -> u64 {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::*;
            // The 64 indices are made 16 at a time and the entries read one by one into bytes,
            // whose high bits a movemask gathers: a third of the instructions of shifting each
            // entry into the mask (the window's largest cost with a SentencePiece vocabulary).
            let mut index = [0u16; 64];
            let mut entries = [0u8; 64];
            // SAFETY: SSE2 is part of x86_64; the loads read bytes 0..64 and 1..65 of `buf` and the
            // 64 entries, the stores write the 64 indices: all in bounds.
            unsafe {
                let low7 = _mm_set1_epi8(0x7f);
                let zero = _mm_setzero_si128();
                for c in 0..4 {
                    let a = _mm_and_si128(_mm_loadu_si128(buf.as_ptr().add(16 * c).cast()), low7);
                    let b = _mm_and_si128(_mm_loadu_si128(buf.as_ptr().add(16 * c + 1).cast()), low7);
                    let lo = _mm_or_si128(_mm_slli_epi16(_mm_unpacklo_epi8(a, zero), 7), _mm_unpacklo_epi8(b, zero));
                    let hi = _mm_or_si128(_mm_slli_epi16(_mm_unpackhi_epi8(a, zero), 7), _mm_unpackhi_epi8(b, zero));
                    _mm_storeu_si128(index.as_mut_ptr().add(16 * c).cast(), lo);
                    _mm_storeu_si128(index.as_mut_ptr().add(16 * c + 8).cast(), hi);
                }
                for (e, &i) in entries.iter_mut().zip(&index) {
                    // Two 7-bit halves: the mask only spares the bounds check.
                    *e = self.cut[usize::from(i) & 0x3fff];
                }
                let mut mask = 0u64;
                for c in 0..4 {
                    // An entry is 0 or 1: 1 - 1 = 0, 0 - 1 = 0xff, so the movemask finds the 0s.
                    let v = _mm_sub_epi8(_mm_loadu_si128(entries.as_ptr().add(16 * c).cast()), _mm_set1_epi8(1));
                    mask |= u64::from(_mm_movemask_epi8(v) as u16) << (16 * c);
                }
                !mask
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let mut mask = 0u64;
            for k in 0..64 {
                mask |= u64::from(self.cut(buf[k], buf[k + 1])) << k;
            }
            mask
        }
    }

    /// Whether the mark starts at `i` (never, without a mark).
    #[inline(always)]
    fn mark_at(&self, t: &[u8], i: usize) -> bool {
        if self.mark_len == 0 {
            return false;
        }
        match t.get(i..i + 4) {
            Some(w) => u32::from_le_bytes(w.try_into().expect("4 bytes")) & self.mark_mask == self.mark_word,
            None => t
                .get(i..i + self.mark_len)
                .is_some_and(|w| w.iter().enumerate().all(|(k, &b)| u32::from(b) == self.mark_word >> (8 * k) & 0xff)),
        }
    }
}

/// The pieces of [`SafeCuts`]. Where pieces start is worked out for 64 bytes at a time (a bit
/// per position), and each piece's end is then a bit search: a piece is a few bytes, so a window
/// serves about ten of them.
pub(crate) struct SafeCursor<'a> {
    cuts: &'a SafeCuts,
    /// The window's first byte, and the first byte past it (`w` itself: none loaded yet).
    w: usize,
    end: usize,
    /// Bit `k`: a piece starts at byte `w + k` (before the text's end only).
    starts: u64,
}

impl<'a> SafeCursor<'a> {
    pub(crate) fn new(cuts: &'a SafeCuts) -> Self {
        SafeCursor { cuts, w: 0, end: 0, starts: 0 }
    }

    /// The piece starts among the 64 bytes from `w` on. The text may be cut between two ASCII
    /// characters no token holds side by side, before a space (a mark, `spaces`), and before a
    /// mark; a run of marks and the character after it stay one piece, so a cut right after a
    /// mark starts none.
    #[inline(never)]
    fn load(&mut self, t: &[u8], w: usize) {
        let cuts = self.cuts;
        // The window and the byte before it, read in place or, at the text's ends, copied with
        // NUL past them (a cut needs a character on each side, so the positions without one are
        // masked out below).
        let end = (w + 64).min(t.len());
        let mut copy = [0u8; 65];
        let buf: &[u8; 65] = match t.get(w.wrapping_sub(1)..w + 64) {
            Some(b) if w > 0 => b.try_into().expect("65 bytes"),
            _ => {
                let from = w.saturating_sub(1);
                copy[1 - (w - from)..][..end - from].copy_from_slice(&t[from..end]);
                &copy
            }
        };
        let (spaces, high) = space_and_high(buf[1..].try_into().expect("64 bytes"));
        // The pairs' entries of the table, then those with a non-ASCII side dropped.
        let mut mask = cuts.pair_cuts(buf);
        mask &= !(high | high << 1 | u64::from(buf[0] >> 7));
        // Bit `k`: a mark ends just before byte `w + k`.
        let mut after_mark = 0u64;
        if cuts.spaces {
            mask |= spaces;
            after_mark |= spaces << 1 | u64::from(buf[0] == b' ');
        }
        if cuts.mark_len > 0 {
            // Marks that start in the window, then those that start before it and end in it.
            let mut leads = high;
            while leads != 0 {
                let k = leads.trailing_zeros() as usize;
                leads &= leads - 1;
                if w + k < end && t[w + k] >= 0xc0 && cuts.mark_at(t, w + k) {
                    mask |= 1 << k;
                    // (Past the window: the next window looks back for it.)
                    after_mark |= 1u64.checked_shl((k + cuts.mark_len) as u32).unwrap_or(0);
                }
            }
            for s in w.saturating_sub(cuts.mark_len)..w {
                if cuts.mark_at(t, s) {
                    after_mark |= 1 << (s + cuts.mark_len - w);
                }
            }
        }
        // No piece starts at the text's first byte (it is no end), nor at or past its end.
        let inside = if end - w == 64 { !0 } else { (1u64 << (end - w)) - 1 };
        let first = if w == 0 { !1u64 } else { !0 };
        (self.w, self.end, self.starts) = (w, w + 64, mask & !after_mark & inside & first);
    }
}

/// The spaces and the bytes of 0x80 or more of 64 bytes, a bit each.
#[inline(always)]
fn space_and_high(b: &[u8; 64]) -> (u64, u64) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        let (mut spaces, mut high) = (0u64, 0u64);
        for k in 0..4 {
            // SAFETY: SSE2 is part of the x86-64 baseline; the load reads 16 of the 64 bytes.
            unsafe {
                let v = _mm_loadu_si128(b.as_ptr().add(16 * k).cast());
                spaces |= u64::from(_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(b' ' as i8))) as u16) << (16 * k);
                high |= u64::from(_mm_movemask_epi8(v) as u16) << (16 * k);
            }
        }
        (spaces, high)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let (mut spaces, mut high) = (0u64, 0u64);
        for (k, &x) in b.iter().enumerate() {
            spaces |= u64::from(x == b' ') << k;
            high |= u64::from(x >> 7) << k;
        }
        (spaces, high)
    }
}

impl Cursor for SafeCursor<'_> {
    #[inline]
    fn next(&mut self, t: &[u8], pos: usize) -> usize {
        let mut i = pos + 1;
        loop {
            if i >= t.len() {
                return t.len();
            }
            if i < self.w || i >= self.end {
                self.load(t, i);
            }
            let ahead = self.starts >> (i - self.w);
            if ahead != 0 {
                return i + ahead.trailing_zeros() as usize;
            }
            i = self.end;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(s: &Splitter, text: &str) -> Vec<String> {
        let mut spans = Vec::new();
        s.spans(text, &mut spans);
        spans.iter().map(|&(a, b)| text[a..b].to_string()).collect()
    }

    fn step(regex: &str, behavior: Behavior, invert: bool) -> SplitStep {
        SplitStep { matcher: Matcher::Regex(Arc::new(Automaton::new(regex).unwrap())), behavior, invert }
    }

    #[test]
    fn behaviors_as_tokenizers_documents_them() {
        let b = |behavior, invert| {
            pieces(&Splitter::Steps(Arc::new([step("-", behavior, invert)])), "the-final--countdown")
        };
        assert_eq!(b(Behavior::Removed, false), ["the", "final", "countdown"]);
        assert_eq!(b(Behavior::Isolated, false), ["the", "-", "final", "-", "-", "countdown"]);
        assert_eq!(b(Behavior::MergedWithPrevious, false), ["the-", "final-", "-", "countdown"]);
        assert_eq!(b(Behavior::MergedWithNext, false), ["the", "-final", "-", "-countdown"]);
        assert_eq!(b(Behavior::Contiguous, false), ["the", "-", "final", "--", "countdown"]);
        assert_eq!(b(Behavior::Removed, true), ["-", "-", "-"]);
    }

    #[test]
    fn sequences_refine_each_piece() {
        let s = Splitter::Steps(Arc::new([
            step(r"\p{N}{1,3}", Behavior::Isolated, false),
            SplitStep { matcher: Matcher::Scanner(Pattern::Gpt2), behavior: Behavior::Isolated, invert: false },
        ]));
        assert_eq!(pieces(&s, "ab 12345 cd"), ["ab", " ", "123", "45", " cd"]);
    }

    proptest::proptest! {
        /// Cutting the text as written (spaces as marks) cuts where the escaped text is cut.
        #[test]
        fn spaces_cut_where_the_escaped_text_is_cut(
            parts in proptest::collection::vec(proptest::sample::select(vec!["a", "b", "cd", "x", " ", "  ", "▁", "\n", "é"]), 0..20),
            fuse in proptest::bool::ANY,
        ) {
            let raw = parts.concat();
            let tokens = ["▁a", "cd", "▁▁", "x", "a", "b", "c", "d", "▁", "é", "ab"];
            let escaped_cuts = SafeCuts::new(tokens.into_iter(), Some('▁'), fuse, false);
            let raw_cuts = SafeCuts::new(tokens.into_iter(), Some('▁'), fuse, true);
            proptest::prop_assert!(raw_cuts.spaces());
            let escaped = raw.replace(' ', "▁");
            let mut a = Vec::new();
            push_pieces(SafeCursor::new(&escaped_cuts), escaped.as_bytes(), &mut a);
            let mut b = Vec::new();
            push_pieces(SafeCursor::new(&raw_cuts), raw.as_bytes(), &mut b);
            let unescape = |s: &str| s.replace('▁', " ");
            let pieces_a: Vec<String> = a.iter().map(|&(x, y)| unescape(&escaped[x..y])).collect();
            let pieces_b: Vec<String> = b.iter().map(|&(x, y)| unescape(&raw[x..y])).collect();
            proptest::prop_assert_eq!(pieces_a, pieces_b, "{:?}", raw);
        }
    }

    /// The pieces of `cuts` one character at a time: a run of marks and the character after it,
    /// then on to the first position where the text may be cut.
    fn safe_pieces_by_characters(cuts: &SafeCuts, t: &[u8]) -> Vec<(usize, usize)> {
        let mark_len_at = |i: usize| {
            if cuts.spaces && t.get(i) == Some(&b' ') {
                1
            } else if cuts.mark_at(t, i) {
                cuts.mark_len
            } else {
                0
            }
        };
        let ascii = |i: usize| t[i] < 0x80;
        let may_cut = |i: usize| {
            cuts.spaces && t[i] == b' '
                || cuts.mark_at(t, i)
                || ascii(i - 1) && ascii(i) && cuts.cut(t[i - 1], t[i]) == 1
        };
        let mut pieces = Vec::new();
        let mut pos = 0;
        while pos < t.len() {
            let mut i = pos;
            while mark_len_at(i) > 0 {
                i += mark_len_at(i);
            }
            if i < t.len() {
                i += crate::unicode::utf8_len(t[i]);
            }
            while i < t.len() && !may_cut(i) {
                i += 1;
            }
            pieces.push((pos, i));
            pos = i;
        }
        pieces
    }

    proptest::proptest! {
        /// The windows find the pieces that a character at a time finds, across window edges.
        #[test]
        fn safe_cursor_matches_a_character_at_a_time(
            parts in proptest::collection::vec(
                proptest::sample::select(vec!["a", "b", "cd", "x", " ", "  ", "▁", "▁▁", "\n", "é", "y"]),
                0..120,
            ),
            fuse in proptest::bool::ANY,
            spaces in proptest::bool::ANY,
            mark in proptest::bool::ANY,
        ) {
            let text = parts.concat();
            let tokens = ["▁a", "cd", "▁▁", "x", "a", "b", "c", "d", "▁", "é", "ab", " ", "y"];
            let cuts = SafeCuts::new(tokens.into_iter(), mark.then_some('▁'), fuse, spaces);
            let mut windows = Vec::new();
            push_pieces(SafeCursor::new(&cuts), text.as_bytes(), &mut windows);
            proptest::prop_assert_eq!(windows, safe_pieces_by_characters(&cuts, text.as_bytes()), "{:?}", text);
        }

        /// Each way of reading a window's pairs from the table (the one this CPU takes, and
        /// every other it can run) gives what reading them one by one gives.
        #[test]
        fn pair_cuts_read_the_table_pair_by_pair(
            tokens in proptest::collection::vec("[\\x00-\\x7f]{2,3}", 0..400),
            buf in proptest::array::uniform32(proptest::num::u8::ANY),
            tail in proptest::array::uniform32(proptest::num::u8::ANY),
            last in proptest::num::u8::ANY,
        ) {
            let cuts = SafeCuts::new(tokens.iter().map(String::as_str), None, false, false);
            let mut window = [0u8; 65];
            window[..32].copy_from_slice(&buf);
            window[32..64].copy_from_slice(&tail);
            window[64] = last;
            let expected = (0..64).fold(0u64, |m, k| m | u64::from(cuts.cut(window[k], window[k + 1])) << k);
            proptest::prop_assert_eq!(cuts.pair_cuts(&window), expected);
            proptest::prop_assert_eq!(cuts.pair_cuts_sse2(&window), expected);
            #[cfg(target_arch = "x86_64")]
            if crate::cpu::has_avx512_vbmi() {
                // SAFETY: the CPU has the features.
                proptest::prop_assert_eq!(unsafe { cuts.pair_cuts_vbmi(&window) }, expected);
            }
        }

        /// Any ASCII text against a table of any ASCII tokens: every entry of the pair table may
        /// be read, in every position of a window.
        #[test]
        fn safe_cursor_reads_every_pair_of_the_table(
            tokens in proptest::collection::vec("[\\x00-\\x7f]{2,4}", 0..300),
            text in "[\\x00-\\x7f]{0,300}",
        ) {
            let cuts = SafeCuts::new(tokens.iter().map(String::as_str), None, false, false);
            let mut windows = Vec::new();
            push_pieces(SafeCursor::new(&cuts), text.as_bytes(), &mut windows);
            proptest::prop_assert_eq!(windows, safe_pieces_by_characters(&cuts, text.as_bytes()), "{:?}", text);
        }
    }

    #[test]
    fn mark_cursors() {
        let words =
            Splitter::SafeCuts(Arc::new(SafeCuts::new(["▁a", "cd", "▁▁", "x"].into_iter(), Some('▁'), false, false)));
        assert_eq!(pieces(&words, "▁a▁▁b▁▁▁cd▁"), ["▁a", "▁▁b", "▁▁▁cd", "▁"]);
        assert_eq!(pieces(&words, "x▁"), ["x", "▁"]);
        // Between ASCII characters no token holds side by side.
        assert_eq!(pieces(&words, "▁cdx\nab"), ["▁cd", "x", "\n", "a", "b"]);
        // A token with the mark inside: no cut before marks, only the ASCII ones.
        let inside = Splitter::SafeCuts(Arc::new(SafeCuts::new(["a▁b", "ab"].into_iter(), Some('▁'), false, false)));
        assert_eq!(pieces(&inside, "ab▁ab▁c"), ["ab▁ab▁c"]);
        assert_eq!(pieces(&inside, "abc"), ["ab", "c"]);
        // Unknown characters that fuse into one token are never cut apart.
        let fused = ["▁", "a", "b", "▁a", "ab"];
        let fusing = Splitter::SafeCuts(Arc::new(SafeCuts::new(fused.into_iter(), Some('▁'), true, false)));
        assert_eq!(pieces(&fusing, "▁xyz▁a\t\nb"), ["▁xyz", "▁a\t\nb"]);
        let separate = Splitter::SafeCuts(Arc::new(SafeCuts::new(fused.into_iter(), Some('▁'), false, false)));
        assert_eq!(pieces(&separate, "▁xyz▁a\t\nb"), ["▁x", "y", "z", "▁a", "\t", "\n", "b"]);
        assert_eq!(pieces(&Splitter::Marks('▁'), "▁a▁▁b"), ["▁a", "▁", "▁b"]);
        assert_eq!(pieces(&Splitter::Marks('▁'), "ab"), ["ab"]);
    }
}
