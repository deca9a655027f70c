//! Bit masks of the character classes of a 64-byte window of text, one bit per byte, for the
//! window scanners: the ASCII classes, and the multi-byte characters that a byte comparison can
//! class. On x86-64: 32 bytes at a time with AVX2, else 16 with SSE2 (part of the baseline); the
//! CPU is asked once per process. A byte at a time elsewhere.

/// The classes of the bytes `w..w + 64` of a text (bit `i` is byte `w + i`). Bytes past the
/// text's end are in none of them, `inr` included.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Masks {
    /// Before the end of the text.
    pub inr: u64,
    /// `[A-Za-z]`.
    pub letter: u64,
    /// `[A-Z]`.
    pub upper: u64,
    /// `[0-9]`.
    pub digit: u64,
    /// `' '`.
    pub space: u64,
    /// ASCII `\s`: `\t \n \v \f \r` and `' '`.
    pub ws: u64,
    /// `\r` and `\n`.
    pub nl: u64,
    /// `'`.
    pub apos: u64,
    /// `/`.
    pub slash: u64,
    /// A byte of a multi-byte character (`>= 0x80`).
    pub non_ascii: u64,
    /// The bytes of the multi-byte letters the window knows: Latin-1's, Latin Extended-A's and
    /// basic Cyrillic's (`é`, `ł`, `ж`; with case, see [`classify`], fewer). A character is in
    /// `mb_letter` or `mb_other` whole, or in neither: the rest of `non_ascii` is not known here.
    pub mb_letter: u64,
    /// The capitals among `mb_letter`, when classified by case (else none).
    pub mb_upper: u64,
    /// The bytes of the punctuation of U+2010-U+2027 and U+2030-U+203F (`’ “ ” – — • …`): neither
    /// letter, number nor space.
    pub mb_other: u64,
    /// The first byte of each (three-byte) character of `mb_other`.
    pub other3: u64,
    /// The letters that follow an apostrophe in the contractions: `s d m t`, `l`, `v r`, `e`
    /// (lower case only, or either case when classified with `FOLD`).
    pub sdmt: u64,
    pub l: u64,
    pub vr: u64,
    pub e: u64,
}

impl Masks {
    /// The bytes whose class is not known here: multi-byte characters outside `mb_letter` and
    /// `mb_other`.
    #[inline(always)]
    pub fn unknown(&self) -> u64 {
        self.non_ascii & !(self.mb_letter | self.mb_other)
    }
}

/// The masks of `t[w..]`'s first 64 bytes (`w < t.len()`); `fold` makes the contraction letters
/// match either case, `cased` tells the multi-byte letters' case (and leaves those whose case it
/// cannot tell unknown). Both are constants at every call site, so the branches fold away.
#[inline(always)]
pub(crate) fn classify(t: &[u8], w: usize, fold: bool, cased: bool) -> Masks {
    match (fold, cased) {
        (false, false) => classify_window::<false, false>(t, w),
        (false, true) => classify_window::<false, true>(t, w),
        (true, false) => classify_window::<true, false>(t, w),
        (true, true) => classify_window::<true, true>(t, w),
    }
}

#[inline(always)]
fn classify_window<const FOLD: bool, const CASED: bool>(t: &[u8], w: usize) -> Masks {
    let rest = &t[w..];
    let with_multibyte = |chunk: &[u8; 64], mut m: Masks| {
        if m.non_ascii != 0 {
            (m.mb_letter, m.mb_upper, m.mb_other, m.other3) = multibyte64::<CASED>(chunk);
        }
        m
    };
    match rest.first_chunk::<64>() {
        Some(chunk) => with_multibyte(chunk, classify64::<FOLD>(chunk)),
        None => {
            let mut buf = [0u8; 64];
            buf[..rest.len()].copy_from_slice(rest);
            let mut m = with_multibyte(&buf, classify64::<FOLD>(&buf));
            // Padding is NUL, which is only in `inr`'s complement and no class of its own.
            m.inr = (1u64 << rest.len()) - 1;
            m
        }
    }
}

/// The byte sets [`multibyte64`] looks at, as masks built from `$eq(b)` (the byte `b`),
/// `$range(lo, n)` (`lo..lo + n`) and `$or`, for each instruction set to instantiate: multi-byte
/// characters are told apart by their first two bytes (and, for punctuation, the third).
///
/// Without case: the leads of Latin-1 letters, Latin Extended-A and basic Cyrillic
/// (U+00C0-U+017F, U+0400-U+047F); the leads after which a second byte may make an exception
/// (`0xc3`, `0xc5`), and those second bytes: `×` `÷` `ſ` (and with them the letters `ÿ ŗ ŷ`, left
/// unknown; `ſ` matches a contraction's `s` under `(?i)`, `×` and `÷` are symbols). Then `0xe2`,
/// `0x80` and the third bytes of U+2010-U+2027 and U+2030-U+203F: dashes, quotes, bullets, `…`,
/// `‰`, primes (not the spaces, line separators and format characters around them).
macro_rules! plain_sets {
    ($eq:ident, $range:ident, $or:ident) => {
        [
            $or($range(0xc3, 3), $range(0xd0, 2)),
            $or($eq(0xc3), $eq(0xc5)),
            $or($or($eq(0x97), $eq(0xb7)), $eq(0xbf)),
            $eq(0xe2),
            $eq(0x80),
            $or($range(0x90, 0x18), $range(0xb0, 0x10)),
        ]
    };
}

/// With case, for patterns that split words by it: Latin-1's letters (`0xc3`), capitals up to
/// the second byte `0x9e`; Cyrillic's first 96 (`0xd0`: capitals up to `0xaf`; `0xd1` up to
/// `0x9f`, small). Latin Extended-A and the rest of Cyrillic alternate capitals and small letters
/// one code point at a time: left unknown. Then the exceptions and punctuation as without case.
macro_rules! cased_sets {
    ($eq:ident, $range:ident, $or:ident) => {
        [
            $eq(0xc3),
            $eq(0xd0),
            $eq(0xd1),
            $range(0x80, 0x1f),
            $range(0x80, 0x30),
            $range(0x80, 0x20),
            $or($or($eq(0x97), $eq(0xb7)), $eq(0xbf)),
            $eq(0xe2),
            $eq(0x80),
            $or($range(0x90, 0x18), $range(0xb0, 0x10)),
        ]
    };
}

/// `out[k] |= $bits(set k)` for the sets of [`cased_sets`] or [`plain_sets`] as `$cased` says
/// (`out` holds as many masks).
macro_rules! or_sets {
    ($cased:expr, $out:ident, $bits:ident, $eq:ident, $range:ident, $or:ident) => {
        if $cased {
            for (mask, set) in $out.iter_mut().zip(cased_sets!($eq, $range, $or)) {
                *mask |= $bits(set);
            }
        } else {
            for (mask, set) in $out.iter_mut().zip(plain_sets!($eq, $range, $or)) {
                *mask |= $bits(set);
            }
        }
    };
}

/// What the window knows of its multi-byte characters: `(mb_letter, mb_upper, mb_other,
/// other3)` (see [`Masks`]); `mb_upper` only with `CASED`. A character that reaches past the
/// window is left unknown (its last bytes are not there: the shifts bring in zeros).
#[inline(always)]
fn multibyte64<const CASED: bool>(chunk: &[u8; 64]) -> (u64, u64, u64, u64) {
    let after = |m: u64| m >> 1; // bit i: byte i + 1 is in the set
    let (letters, upper, punct) = if CASED {
        let [c3, d0, d1, up_c3, up_d0, lo_d1, exc, e2, x80, punct] = byte_sets::<true, 10>(chunk);
        let c3 = c3 & !after(exc);
        let upper = c3 & after(up_c3) | d0 & after(up_d0);
        let lower = c3 & !after(up_c3) | d0 & !after(up_d0) | d1 & after(lo_d1);
        (upper | lower, upper, e2 & after(x80) & punct >> 2)
    } else {
        let [lead, maybe_not, exc, e2, x80, punct] = byte_sets::<false, 6>(chunk);
        (lead & !(maybe_not & after(exc)), 0, e2 & after(x80) & punct >> 2)
    };
    let (letters, upper) = (letters & !(1 << 63), upper & !(1 << 63));
    (letters | letters << 1, upper | upper << 1, punct | punct << 1 | punct << 2, punct)
}

/// The masks of [`plain_sets`] (`K` = 6) or [`cased_sets`] (`K` = 10): bit `i` of mask `k`,
/// byte `i` of `chunk` is in set `k`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn byte_sets<const CASED: bool, const K: usize>(chunk: &[u8; 64]) -> [u64; K] {
    byte_sets_with::<CASED, K>(isa(), chunk)
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn byte_sets_with<const CASED: bool, const K: usize>(isa: Isa, chunk: &[u8; 64]) -> [u64; K] {
    match isa {
        // SAFETY: `isa()` found the CPU features (or the test asking for it checked them).
        Isa::Avx2 => unsafe { byte_sets_avx2::<CASED, K>(chunk) },
        Isa::Sse2 => byte_sets_sse2::<CASED, K>(chunk),
    }
}

/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn byte_sets_avx2<const CASED: bool, const K: usize>(chunk: &[u8; 64]) -> [u64; K] {
    use std::arch::x86_64::*;
    let splat = |b: u8| _mm256_set1_epi8(b as i8);
    let mut out = [0u64; K];
    for k in 0..2 {
        // SAFETY: reads 32 of the 64 bytes of `chunk`.
        let v = unsafe { _mm256_loadu_si256(chunk[32 * k..].as_ptr().cast()) };
        let eq = |b: u8| _mm256_cmpeq_epi8(v, splat(b));
        // Unsigned `lo <= x < lo + n` as a signed compare: shift `lo` to -128.
        let range = |lo: u8, n: u8| {
            _mm256_cmpgt_epi8(splat(0x80u8.wrapping_add(n)), _mm256_add_epi8(v, splat(0x80u8.wrapping_sub(lo))))
        };
        let or = |a: __m256i, b: __m256i| _mm256_or_si256(a, b);
        let bits = |x: __m256i| u64::from(_mm256_movemask_epi8(x) as u32) << (32 * k);
        or_sets!(CASED, out, bits, eq, range, or);
    }
    out
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn byte_sets_sse2<const CASED: bool, const K: usize>(chunk: &[u8; 64]) -> [u64; K] {
    use std::arch::x86_64::*;
    let mut out = [0u64; K];
    // SAFETY: SSE2 is part of the x86-64 baseline; the loads read 4 × 16 bytes of `chunk`.
    unsafe {
        let splat = |b: u8| _mm_set1_epi8(b as i8);
        for k in 0..4 {
            let v = _mm_loadu_si128(chunk.as_ptr().add(16 * k).cast());
            let eq = |b: u8| _mm_cmpeq_epi8(v, splat(b));
            let range = |lo: u8, n: u8| {
                _mm_cmplt_epi8(_mm_add_epi8(v, splat(0x80u8.wrapping_sub(lo))), splat(0x80u8.wrapping_add(n)))
            };
            let or = |a: __m128i, b: __m128i| _mm_or_si128(a, b);
            let bits = |x: __m128i| u64::from(_mm_movemask_epi8(x) as u16) << (16 * k);
            or_sets!(CASED, out, bits, eq, range, or);
        }
    }
    out
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn byte_sets<const CASED: bool, const K: usize>(chunk: &[u8; 64]) -> [u64; K] {
    byte_sets_scalar::<CASED, K>(chunk)
}

/// [`byte_sets`] a byte at a time (the reference for the SIMD versions, and their stand-in).
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn byte_sets_scalar<const CASED: bool, const K: usize>(chunk: &[u8; 64]) -> [u64; K] {
    let mut out = [0u64; K];
    for (i, &b) in chunk.iter().enumerate() {
        let eq = |x: u8| b == x;
        let range = |lo: u8, n: u8| b.wrapping_sub(lo) < n;
        let or = |x: bool, y: bool| x | y;
        let bits = |on: bool| u64::from(on) << i;
        or_sets!(CASED, out, bits, eq, range, or);
    }
    out
}

#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Isa {
    Sse2,
    Avx2,
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn isa() -> Isa {
    if crate::cpu::has_avx2() {
        Isa::Avx2
    } else {
        Isa::Sse2
    }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn classify64<const FOLD: bool>(chunk: &[u8; 64]) -> Masks {
    classify64_with::<FOLD>(isa(), chunk)
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn classify64_with<const FOLD: bool>(isa: Isa, chunk: &[u8; 64]) -> Masks {
    match isa {
        // SAFETY: `isa()` found the CPU features (or the test asking for it checked them).
        Isa::Avx2 => unsafe { classify64_avx2::<FOLD>(chunk) },
        Isa::Sse2 => classify64_sse2::<FOLD>(chunk),
    }
}

/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn classify64_avx2<const FOLD: bool>(chunk: &[u8; 64]) -> Masks {
    use std::arch::x86_64::*;
    let mut m = Masks { inr: !0, ..Masks::default() };
    let splat = |b: u8| _mm256_set1_epi8(b as i8);
    // Unsigned `lo <= x < lo + n` as a signed compare: shift `lo` to -128.
    let range = |x: __m256i, lo: u8, n: u8| {
        _mm256_cmpgt_epi8(splat(0x80u8.wrapping_add(n)), _mm256_add_epi8(x, splat(0x80u8.wrapping_sub(lo))))
    };
    for k in 0..2 {
        // SAFETY: reads 32 of the 64 bytes of `chunk`.
        let v = unsafe { _mm256_loadu_si256(chunk[32 * k..].as_ptr().cast()) };
        let bits = |x: __m256i| u64::from(_mm256_movemask_epi8(x) as u32) << (32 * k);
        let eq = |b: u8| _mm256_cmpeq_epi8(v, splat(b));
        let folded = if FOLD { _mm256_or_si256(v, splat(0x20)) } else { v };
        let letter_eq = |b: u8| _mm256_cmpeq_epi8(folded, splat(b));
        let space = eq(b' ');
        m.letter |= bits(range(_mm256_or_si256(v, splat(0x20)), b'a', 26));
        m.upper |= bits(range(v, b'A', 26));
        m.digit |= bits(range(v, b'0', 10));
        m.space |= bits(space);
        m.ws |= bits(_mm256_or_si256(space, range(v, b'\t', 5)));
        m.nl |= bits(_mm256_or_si256(eq(b'\r'), eq(b'\n')));
        m.apos |= bits(eq(b'\''));
        m.slash |= bits(eq(b'/'));
        m.non_ascii |= bits(v);
        let (s, d, mm, t) = (letter_eq(b's'), letter_eq(b'd'), letter_eq(b'm'), letter_eq(b't'));
        m.sdmt |= bits(_mm256_or_si256(_mm256_or_si256(s, d), _mm256_or_si256(mm, t)));
        m.l |= bits(letter_eq(b'l'));
        m.vr |= bits(_mm256_or_si256(letter_eq(b'v'), letter_eq(b'r')));
        m.e |= bits(letter_eq(b'e'));
    }
    m.letter &= !m.non_ascii;
    m
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn classify64_sse2<const FOLD: bool>(chunk: &[u8; 64]) -> Masks {
    use std::arch::x86_64::*;
    let mut m = Masks { inr: !0, ..Masks::default() };
    // SAFETY: SSE2 is part of the x86-64 baseline; the loads read 4 × 16 bytes of `chunk`.
    unsafe {
        let splat = |b: u8| _mm_set1_epi8(b as i8);
        // Unsigned `lo <= x < lo + n` as a signed compare: shift `lo` to -128.
        let range = |x: __m128i, lo: u8, n: u8| {
            _mm_cmplt_epi8(_mm_add_epi8(x, splat(0x80u8.wrapping_sub(lo))), splat(0x80u8.wrapping_add(n)))
        };
        for k in 0..4 {
            let v = _mm_loadu_si128(chunk.as_ptr().add(16 * k).cast());
            let bits = |x: __m128i| u64::from(_mm_movemask_epi8(x) as u16) << (16 * k);
            let eq = |b: u8| _mm_cmpeq_epi8(v, splat(b));
            // `| 0x20` maps `A-Z` onto `a-z` and no other byte onto a letter (bytes >= 0x80 stay).
            let folded = if FOLD { _mm_or_si128(v, splat(0x20)) } else { v };
            let letter_eq = |b: u8| _mm_cmpeq_epi8(folded, splat(b));
            let space = eq(b' ');
            m.letter |= bits(range(_mm_or_si128(v, splat(0x20)), b'a', 26));
            m.upper |= bits(range(v, b'A', 26));
            m.digit |= bits(range(v, b'0', 10));
            m.space |= bits(space);
            m.ws |= bits(_mm_or_si128(space, range(v, b'\t', 5)));
            m.nl |= bits(_mm_or_si128(eq(b'\r'), eq(b'\n')));
            m.apos |= bits(eq(b'\''));
            m.slash |= bits(eq(b'/'));
            m.non_ascii |= bits(v);
            let (s, d, mm, t) = (letter_eq(b's'), letter_eq(b'd'), letter_eq(b'm'), letter_eq(b't'));
            m.sdmt |= bits(_mm_or_si128(_mm_or_si128(s, d), _mm_or_si128(mm, t)));
            m.l |= bits(letter_eq(b'l'));
            m.vr |= bits(_mm_or_si128(letter_eq(b'v'), letter_eq(b'r')));
            m.e |= bits(letter_eq(b'e'));
        }
    }
    // `| 0x20` folds some bytes >= 0x80 into the letter range; their class is not known here.
    m.letter &= !m.non_ascii;
    m
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn classify64<const FOLD: bool>(chunk: &[u8; 64]) -> Masks {
    classify64_scalar::<FOLD>(chunk)
}

/// The masks a byte at a time (the reference for the SIMD version, and its stand-in).
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn classify64_scalar<const FOLD: bool>(chunk: &[u8; 64]) -> Masks {
    let mut m = Masks { inr: !0, ..Masks::default() };
    for (i, &b) in chunk.iter().enumerate() {
        let bit = 1u64 << i;
        let f = if FOLD { b.to_ascii_lowercase() } else { b };
        let set = |mask: &mut u64, on: bool| *mask |= if on { bit } else { 0 };
        set(&mut m.letter, b.is_ascii_alphabetic());
        set(&mut m.upper, b.is_ascii_uppercase());
        set(&mut m.digit, b.is_ascii_digit());
        set(&mut m.space, b == b' ');
        set(&mut m.ws, matches!(b, b'\t'..=b'\r' | b' '));
        set(&mut m.nl, matches!(b, b'\r' | b'\n'));
        set(&mut m.apos, b == b'\'');
        set(&mut m.slash, b == b'/');
        set(&mut m.non_ascii, b >= 0x80);
        set(&mut m.sdmt, matches!(f, b's' | b'd' | b'm' | b't'));
        set(&mut m.l, f == b'l');
        set(&mut m.vr, matches!(f, b'v' | b'r'));
        set(&mut m.e, f == b'e');
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unicode::{ASCII, CRLF, L, LO, N, S, UP};

    /// The SIMD versions this CPU runs.
    #[cfg(target_arch = "x86_64")]
    fn simd_versions() -> Vec<Isa> {
        let mut v = vec![Isa::Sse2];
        if is_x86_feature_detected!("avx2") {
            v.push(Isa::Avx2);
        }
        v
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn every_simd_version_matches_the_scalar_one() {
        let versions = simd_versions();
        // Every byte value at every lane position, and windows of random bytes.
        let mut windows: Vec<[u8; 64]> = Vec::new();
        for b in 0..=255u8 {
            for i in 0..64 {
                let mut chunk = [b'x'; 64];
                chunk[i] = b;
                windows.push(chunk);
            }
        }
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2000 {
            let mut chunk = [0u8; 64];
            for b in &mut chunk {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = x as u8;
            }
            windows.push(chunk);
        }
        for chunk in &windows {
            for &isa in &versions {
                assert_eq!(
                    classify64_with::<false>(isa, chunk),
                    classify64_scalar::<false>(chunk),
                    "{isa:?} {chunk:?}"
                );
                assert_eq!(classify64_with::<true>(isa, chunk), classify64_scalar::<true>(chunk), "{isa:?} {chunk:?}");
            }
        }
    }

    #[test]
    fn classes_match_the_scanners_ascii_table() {
        // Every byte value at every lane position.
        for b in 0..=255u8 {
            for i in 0..64 {
                let mut chunk = [b'x'; 64];
                chunk[i] = b;
                let m = classify64::<false>(&chunk);
                assert_eq!(m, classify64_scalar::<false>(&chunk), "byte {b:#04x} at {i}");
                let folded = classify64::<true>(&chunk);
                assert_eq!(folded, classify64_scalar::<true>(&chunk), "byte {b:#04x} at {i}, folded");
                let has = |mask: u64| mask >> i & 1 == 1;
                let lower = b.to_ascii_lowercase();
                assert_eq!(has(folded.l), lower == b'l', "byte {b:#04x}");
                assert_eq!(has(folded.e), lower == b'e', "byte {b:#04x}");
                assert_eq!(has(folded.sdmt), b"sdmt".contains(&lower), "byte {b:#04x}");
                assert_eq!(has(folded.vr), b"vr".contains(&lower), "byte {b:#04x}");
                assert_eq!(has(m.sdmt), b"sdmt".contains(&b), "byte {b:#04x}");
                assert_eq!(has(m.non_ascii), b >= 0x80, "byte {b:#04x}");
                if b < 0x80 {
                    let c = ASCII[b as usize];
                    assert_eq!(has(m.letter), c & L != 0, "byte {b:#04x}");
                    assert_eq!(has(m.digit), c & N != 0, "byte {b:#04x}");
                    assert_eq!(has(m.ws), c & S != 0, "byte {b:#04x}");
                    assert_eq!(has(m.nl), c & CRLF != 0, "byte {b:#04x}");
                    assert_eq!(has(m.upper), c & UP != 0 && c & LO == 0, "byte {b:#04x}");
                    assert_eq!(has(m.slash), b == b'/', "byte {b:#04x}");
                } else {
                    assert!(!has(m.letter) && !has(m.digit) && !has(m.ws), "byte {b:#04x}");
                }
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn every_simd_version_finds_the_byte_sets_of_the_scalar_one() {
        // Every byte value at every lane position, among lead and continuation bytes, and
        // windows of random bytes drawn mostly from the ones the sets hold.
        let mut windows: Vec<[u8; 64]> = Vec::new();
        for filler in [b'x', 0x80, 0xc3, 0xe2] {
            for b in 0..=255u8 {
                for i in 0..64 {
                    let mut chunk = [filler; 64];
                    chunk[i] = b;
                    windows.push(chunk);
                }
            }
        }
        let pool =
            [0x80, 0x97, 0x99, 0x9e, 0x9f, 0xa6, 0xa8, 0xaf, 0xb0, 0xb7, 0xbf, 0xc2, 0xc3, 0xc5, 0xd0, 0xd1, 0xe2];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..4000 {
            let mut chunk = [0u8; 64];
            for b in &mut chunk {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = if x >> 40 & 1 == 0 { pool[(x >> 8) as usize % pool.len()] } else { x as u8 };
            }
            windows.push(chunk);
        }
        for chunk in &windows {
            for isa in simd_versions() {
                assert_eq!(byte_sets_with::<false, 6>(isa, chunk), byte_sets_scalar::<false, 6>(chunk), "{isa:?}");
                assert_eq!(byte_sets_with::<true, 10>(isa, chunk), byte_sets_scalar::<true, 10>(chunk), "{isa:?}");
            }
        }
    }

    /// Every character of two or three bytes, at several offsets in a window of ASCII: what the
    /// window says of it is what the Unicode tables say (its case too, when asked for), and it
    /// says it of the whole character or not at all.
    #[test]
    fn multibyte_classes_agree_with_unicode() {
        use crate::unicode::{classes, O};
        let mut known = [[0usize; 2]; 2]; // [plain, cased][letters, punctuation]
        for cp in 0x80..0x10000u32 {
            let Some(c) = char::from_u32(cp) else { continue };
            let mut utf8 = [0u8; 4];
            let bytes = c.encode_utf8(&mut utf8).as_bytes();
            let class = classes().get(cp);
            for cased in [false, true] {
                for at in [0, 1, 30, 61, 62, 63] {
                    let mut text = [b'x'; 64];
                    let end = (at + bytes.len()).min(64);
                    text[at..end].copy_from_slice(&bytes[..end - at]);
                    let m = classify(&text, 0, true, cased);
                    let own = ((1u64 << bytes.len()) - 1) << at; // the character's bytes in the window
                    let whole = at + bytes.len() <= 64;
                    for (mask, name) in [(m.mb_letter, "letter"), (m.mb_upper, "capital"), (m.mb_other, "other")] {
                        assert!(mask & !own == 0, "{c:?} at {at}: {name} outside the character");
                        assert!(mask & own == 0 || mask & own == own && whole, "{c:?} at {at}: part of it {name}");
                    }
                    assert_eq!(m.other3, m.mb_other & 1 << at, "{c:?} at {at}");
                    assert_eq!(m.mb_upper & !m.mb_letter, 0, "{c:?} at {at}");
                    if m.mb_letter & own != 0 {
                        assert!(class & L != 0 && class & (N | S) == 0, "{c:?} taken for a letter");
                        assert_ne!(c, 'ſ', "ſ is a contraction's `s` under (?i)");
                        if cased {
                            let capital = m.mb_upper & own != 0;
                            let (this, that) = if capital { (UP, LO) } else { (LO, UP) };
                            assert!(class & this != 0 && class & that == 0, "{c:?} taken for capital: {capital}");
                        }
                        known[usize::from(cased)][0] += usize::from(at == 0);
                    }
                    if m.mb_other & own != 0 {
                        assert!(class & (L | N | S) == 0 && class & O != 0, "{c:?} taken for punctuation");
                        known[usize::from(cased)][1] += usize::from(at == 0);
                    }
                }
            }
        }
        // What the window knows: the 62 letters of U+00C0-U+00FF, the 128 of Latin Extended-A
        // and the 128 of basic Cyrillic, less `ſ` and the `ÿ ŗ ŷ` that share a second byte with
        // `ſ × ÷`; by case, the same Latin-1 letters and the first 96 Cyrillic ones; and the 40
        // punctuation marks.
        assert_eq!(known, [[62 + 128 + 128 - 4, 40], [62 - 1 + 96, 40]]);
    }

    #[test]
    fn the_window_past_the_end_is_in_no_class() {
        let t = b"ab 'd\n";
        let m = classify(t, 1, false, false);
        assert_eq!(m.inr, 0b11111);
        assert_eq!(m.letter, 0b01001);
        assert_eq!(m.ws, 0b10010);
        assert_eq!(m.apos, 0b00100);
    }
}
