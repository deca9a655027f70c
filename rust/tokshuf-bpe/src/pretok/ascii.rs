//! Bit masks of the ASCII character classes of a 64-byte window of text, one bit per byte, for
//! the window scanners. On x86-64: 32 bytes at a time with AVX2, else 16 with SSE2 (part of the
//! baseline); the CPU is asked once per process. A byte at a time elsewhere.

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
    /// A byte of a multi-byte character (`>= 0x80`): its class is not known here.
    pub non_ascii: u64,
    /// The letters that follow an apostrophe in the contractions: `s d m t`, `l`, `v r`, `e`
    /// (lower case only, or either case when classified with `FOLD`).
    pub sdmt: u64,
    pub l: u64,
    pub vr: u64,
    pub e: u64,
}

/// The masks of `t[w..]`'s first 64 bytes (`w < t.len()`); `fold` makes the contraction letters
/// match either case (a constant at every call site, so the branch folds away).
#[inline(always)]
pub(crate) fn classify(t: &[u8], w: usize, fold: bool) -> Masks {
    if fold {
        classify_window::<true>(t, w)
    } else {
        classify_window::<false>(t, w)
    }
}

#[inline(always)]
fn classify_window<const FOLD: bool>(t: &[u8], w: usize) -> Masks {
    let rest = &t[w..];
    match rest.first_chunk::<64>() {
        Some(chunk) => classify64::<FOLD>(chunk),
        None => {
            let mut buf = [0u8; 64];
            buf[..rest.len()].copy_from_slice(rest);
            let mut m = classify64::<FOLD>(&buf);
            // Padding is NUL, which is only in `inr`'s complement and no class of its own.
            m.inr = (1u64 << rest.len()) - 1;
            m
        }
    }
}

/// The widest class-mask code this CPU runs.
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

    #[test]
    fn the_window_past_the_end_is_in_no_class() {
        let t = b"ab 'd\n";
        let m = classify(t, 1, false);
        assert_eq!(m.inr, 0b11111);
        assert_eq!(m.letter, 0b01001);
        assert_eq!(m.ws, 0b10010);
        assert_eq!(m.apos, 0b00100);
    }
}
