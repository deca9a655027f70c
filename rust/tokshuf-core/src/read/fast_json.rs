//! The common JSON line read without serde: an object whose requested values are strings.
//!
//! `serde_json` decodes an escaped string into a scratch buffer that the caller then copies;
//! here it is decoded once, straight into the string the tokenizer gets, and the rest of the line
//! is only validated. Anything else (a requested value that is not a string, an escaped key, a
//! `\u` escape outside a requested value, a lone surrogate, deep nesting, any syntax error) gives
//! `None`, and the line is read again by serde, which then gives the fields or the error: this
//! path accepts only what that reader accepts (serde, and Python's `NaN`, `Infinity` and
//! `-Infinity`), with the same fields.

use std::borrow::Cow;

use super::field::Field;

/// Nesting beyond this is left to serde (whose limit is 128).
const MAX_DEPTH: usize = 100;

/// The fields named by `keys` of the JSON object `line`, if every one is a string and the line
/// has nothing this reader leaves to serde (invalid UTF-8 included).
///
/// UTF-8 is checked on the way: outside strings JSON is ASCII (any other byte is a syntax
/// error), and a string's bytes are validated only if its scan met a byte above 0x7f, so the
/// ASCII lines of a corpus are read in one pass.
pub(super) fn fields<'a>(line: &'a [u8], keys: &[String]) -> Option<Vec<Field<'a>>> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        return unsafe { fields_avx2(line, keys) };
    }
    fields_with::<false>(line, keys)
}

/// [`fields`] with the requested strings scanned 32 bytes at a time.
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn fields_avx2<'a>(line: &'a [u8], keys: &[String]) -> Option<Vec<Field<'a>>> {
    fields_with::<true>(line, keys)
}

/// [`fields`]; `WIDE`: the requested strings are scanned with AVX2 (only in [`fields_avx2`]).
#[inline(always)]
fn fields_with<'a, const WIDE: bool>(line: &'a [u8], keys: &[String]) -> Option<Vec<Field<'a>>> {
    let mut p = Parser { b: line, pos: 0 };
    let mut found: Vec<Option<Cow<'a, str>>> = vec![None; keys.len()];
    p.ws();
    p.eat(b'{')?;
    p.ws();
    if p.peek()? == b'}' {
        p.pos += 1;
    } else {
        loop {
            let key = p.plain_key()?;
            p.ws();
            p.eat(b':')?;
            p.ws();
            // Duplicate keys: the last one wins, as with serde and Python's json.loads.
            match keys.iter().position(|k| k == key) {
                Some(i) if p.peek()? == b'"' => found[i] = Some(p.string::<WIDE>()?),
                Some(_) => return None,
                None => p.skip_value(1)?,
            }
            p.ws();
            match p.next()? {
                b',' => p.ws(),
                b'}' => break,
                _ => return None,
            }
        }
    }
    p.ws();
    if p.pos != p.b.len() {
        return None;
    }
    found.into_iter().map(|s| s.map(|s| Field { sentences: vec![s] })).collect()
}

struct Parser<'a> {
    b: &'a [u8],
    pos: usize,
}

fn is_special(c: u8) -> bool {
    c == b'"' || c == b'\\' || c < 0x20
}

/// Bit `k` set where byte `k` of the 16 is `"`, `\` or a control character, and where it is
/// above 0x7f.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn special_bits(chunk: &[u8; 16]) -> (u32, u32) {
    use std::arch::x86_64::*;
    // SAFETY: SSE2 is part of x86_64; the load is unaligned and reads the 16 bytes of `chunk`.
    unsafe {
        let v = _mm_loadu_si128(chunk.as_ptr().cast());
        let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
        let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
        // Unsigned v < 0x20: max(v, 0x1f) == 0x1f.
        let control = _mm_cmpeq_epi8(_mm_max_epu8(v, _mm_set1_epi8(0x1f)), _mm_set1_epi8(0x1f));
        (_mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), control)) as u32, _mm_movemask_epi8(v) as u32)
    }
}

/// [`special_bits`] of 32 bytes.
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn special_bits32(chunk: &[u8; 32]) -> (u32, u32) {
    use std::arch::x86_64::*;
    // SAFETY: the caller's CPU has AVX2; the load is unaligned and reads the 32 bytes of `chunk`.
    unsafe {
        let v = _mm256_loadu_si256(chunk.as_ptr().cast());
        let quote = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'"' as i8));
        let backslash = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'\\' as i8));
        let control = _mm256_cmpeq_epi8(_mm256_max_epu8(v, _mm256_set1_epi8(0x1f)), _mm256_set1_epi8(0x1f));
        let special = _mm256_or_si256(_mm256_or_si256(quote, backslash), control);
        (_mm256_movemask_epi8(special) as u32, _mm256_movemask_epi8(v) as u32)
    }
}

/// 32 bytes at a time where `WIDE` (the caller runs with AVX2): the special and high bits of
/// `b[i..i + 32]`, if there are 32 bytes.
#[inline(always)]
fn wide_bits<const WIDE: bool>(b: &[u8], i: usize) -> Option<(&[u8; 32], u32, u32)> {
    #[cfg(target_arch = "x86_64")]
    if WIDE {
        let chunk: &[u8; 32] = b.get(i..i + 32)?.try_into().expect("32 bytes");
        // SAFETY: `WIDE` is set only under `fields_avx2`, on a CPU with AVX2.
        let (m, h) = unsafe { special_bits32(chunk) };
        return Some((chunk, m, h));
    }
    let _ = (b, i);
    None
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn special_bits(chunk: &[u8; 16]) -> (u32, u32) {
    chunk
        .iter()
        .enumerate()
        .fold((0, 0), |(m, h), (k, &c)| (m | u32::from(is_special(c)) << k, h | u32::from(c >> 7) << k))
}

/// Whether a byte of `b` is above 0x7f.
fn any_high(b: &[u8]) -> bool {
    b.iter().any(|&c| c >= 0x80)
}

/// The first `"`, `\` or control character of `b` from `i` on; sets `high` if a byte before it
/// (or a few after it) is above 0x7f.
#[inline(always)]
fn find_special<const WIDE: bool>(b: &[u8], mut i: usize, high: &mut bool) -> Option<usize> {
    let mut h = 0;
    while let Some((_, m, hi)) = wide_bits::<WIDE>(b, i) {
        h |= hi;
        if m != 0 {
            *high |= h != 0;
            return Some(i + m.trailing_zeros() as usize);
        }
        i += 32;
    }
    while let Some(chunk) = b.get(i..i + 16) {
        let (m, hi) = special_bits(chunk.try_into().expect("16 bytes"));
        h |= hi;
        if m != 0 {
            *high |= h != 0;
            return Some(i + m.trailing_zeros() as usize);
        }
        i += 16;
    }
    *high |= h != 0;
    let k = i + b[i..].iter().position(|&c| is_special(c))?;
    *high |= any_high(&b[i..k]);
    Some(k)
}

/// Append `b[i..]` to `out` up to the first special byte, and return its index. Sixteen bytes
/// at a time, each chunk appended whole and the excess cut: no call to memcpy for the short runs
/// between the escapes of a text. `out` has room for 32 bytes beyond what it keeps (so it never
/// grows here). Sets `high` as [`find_special`] does.
#[inline(always)]
fn copy_to_special<const WIDE: bool>(b: &[u8], mut i: usize, out: &mut Vec<u8>, high: &mut bool) -> Option<usize> {
    let mut h = 0;
    while let Some((chunk, m, hi)) = wide_bits::<WIDE>(b, i) {
        h |= hi;
        let len = out.len();
        out.extend_from_slice(chunk);
        if m != 0 {
            let k = m.trailing_zeros() as usize;
            out.truncate(len + k);
            *high |= h != 0;
            return Some(i + k);
        }
        i += 32;
    }
    while let Some(chunk) = b.get(i..i + 16) {
        let chunk: &[u8; 16] = chunk.try_into().expect("16 bytes");
        let (m, hi) = special_bits(chunk);
        h |= hi;
        let len = out.len();
        out.extend_from_slice(chunk);
        if m != 0 {
            let k = m.trailing_zeros() as usize;
            out.truncate(len + k);
            *high |= h != 0;
            return Some(i + k);
        }
        i += 16;
    }
    *high |= h != 0;
    let k = b[i..].iter().position(|&c| is_special(c))?;
    out.extend_from_slice(&b[i..i + k]);
    *high |= any_high(&b[i..i + k]);
    Some(i + k)
}

/// Whether the CPU runs [`unescape_blocks`].
#[cfg(target_arch = "x86_64")]
#[inline]
fn has_block_unescape() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512vbmi")
        && std::arch::is_x86_feature_detected!("avx512vbmi2")
}

/// Decode the string `b[i..]` (`i`: not inside an escape) into `out` 64 bytes at a time, up to
/// the first byte the scalar loop must see: a closing quote, a control character, or the `\` of
/// an escape other than the eight two-byte ones (`\u`, an invalid one, one cut by the block's
/// end). Returns where it stopped: that byte, or the start of the last, shorter block. Sets
/// `high` as [`find_special`] does. Web text escapes a line break or a quote every few dozen
/// bytes (every 29 in the English benchmark corpus); the scalar loop takes a branch per escape,
/// mispredicted as often as not, where this takes none: the strings of that corpus decode 2.6x
/// faster.
///
/// In a run of backslashes the first escapes the second, the third the fourth, and so on: which
/// bytes are escaped follows from where each run starts, found for the whole block with one
/// addition (as simdjson finds them). Every escaping `\` before the first stop has its escaped
/// byte before the stop too: those bytes are replaced and the escaping backslashes squeezed out.
/// (VBMI2, for the squeeze, came with Ice Lake and Zen 4, CPUs that run 512-bit integer code at
/// full clock.)
///
/// # Safety
/// The CPU must have AVX-512 F, BW, VBMI and VBMI2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vbmi2,bmi1,popcnt")]
unsafe fn unescape_blocks(b: &[u8], mut i: usize, out: &mut Vec<u8>, high: &mut bool) -> usize {
    use std::arch::x86_64::*;
    // SAFETY: the caller's CPU has the features; the loads read the 64 bytes of `block` and 128 of
    // the table; the store writes 64 bytes within `out`'s capacity (reserved just before),
    // of which only the decoded ones are then counted as its length.
    unsafe {
        // The ASCII half of the escapes' table.
        let table_lo = _mm512_loadu_si512(SHORT_ESCAPE.as_ptr().cast());
        let table_hi = _mm512_loadu_si512(SHORT_ESCAPE[64..].as_ptr().cast());
        while let Some(block) = b.get(i..i + 64) {
            let v = _mm512_loadu_si512(block.as_ptr().cast());
            let backslash = _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'\\' as i8));
            let quote = _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'"' as i8));
            let control = _mm512_cmplt_epu8_mask(v, _mm512_set1_epi8(0x20));
            let above = _mm512_movepi8_mask(v);
            // What each byte stands for after a `\` (0: not an escape this decodes), looked up
            // by its low seven bits; bytes above 0x7f are ruled out by `above`.
            let replaced = _mm512_permutex2var_epi8(table_lo, v, table_hi);
            let simple = _mm512_test_epi8_mask(replaced, replaced) & !above;
            // The bytes a backslash escapes (the block starts outside any escape): after a run
            // of backslashes, every second byte from its start, so the odd positions after a run
            // that starts at an even one, the even positions after one that starts at an odd one.
            // Adding a run's odd start to its backslashes carries past the run's end, which then
            // flips the parity for the byte after it.
            const EVEN: u64 = 0x5555_5555_5555_5555;
            let follows = backslash << 1;
            let odd_starts = backslash & !EVEN & !follows;
            let carried = odd_starts.wrapping_add(backslash);
            let escaped = (EVEN ^ (carried << 1)) & follows;
            let escaping = backslash & !escaped;
            let stop = (quote & !escaped) | control | ((escaped & !simple) >> 1) | (escaping & (1 << 63));
            let first = stop.trailing_zeros();
            let before = if first == 64 { !0 } else { (1u64 << first) - 1 };
            let decoded = _mm512_mask_blend_epi8(escaped & before, v, replaced);
            let keep = !escaping & before;
            if out.capacity() - out.len() < 64 {
                out.reserve(64);
            }
            let len = out.len();
            _mm512_storeu_si512(out.as_mut_ptr().add(len).cast(), _mm512_maskz_compress_epi8(keep, decoded));
            out.set_len(len + keep.count_ones() as usize);
            *high |= above & before != 0;
            if first < 64 {
                return i + first as usize;
            }
            i += 64;
        }
        i
    }
}

/// `b` as text: checked if a byte of it may be above 0x7f (`high`), else ASCII.
#[inline]
fn text_of(b: &[u8], high: bool) -> Option<&str> {
    if high {
        simdutf8::basic::from_utf8(b).ok()
    } else {
        debug_assert!(b.is_ascii());
        // SAFETY: the scan that found the end of `b` saw no byte above 0x7f in it: ASCII.
        Some(unsafe { std::str::from_utf8_unchecked(b) })
    }
}

/// The byte each two-character escape `\x` stands for, by `x`; 0 for the others (`\u`, errors).
static SHORT_ESCAPE: [u8; 256] = {
    let mut t = [0u8; 256];
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t[b'/' as usize] = b'/';
    t[b'b' as usize] = 0x08;
    t[b'f' as usize] = 0x0c;
    t[b'n' as usize] = b'\n';
    t[b'r' as usize] = b'\r';
    t[b't' as usize] = b'\t';
    t
};

fn hex4(b: &[u8]) -> Option<u32> {
    let digits = b.get(..4)?;
    digits.iter().try_fold(0u32, |acc, &c| Some(acc << 4 | char::from(c).to_digit(16)?))
}

impl<'a> Parser<'a> {
    fn ws(&mut self) {
        while matches!(self.b.get(self.pos), Some(b' ' | b'\n' | b'\t' | b'\r')) {
            self.pos += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.pos += 1;
        Some(c)
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.next()? == c).then_some(())
    }

    fn eat_word(&mut self, word: &[u8]) -> Option<()> {
        self.b[self.pos..].starts_with(word).then(|| self.pos += word.len())
    }

    /// A key without escapes.
    fn plain_key(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let mut high = false;
        let end = find_special::<false>(self.b, self.pos, &mut high)?;
        if self.b[end] != b'"' {
            return None;
        }
        let key = text_of(&self.b[self.pos..end], high)?;
        self.pos = end + 1;
        Some(key)
    }

    /// A string value, decoded (`WIDE`: see [`fields_with`]).
    #[inline(always)]
    fn string<const WIDE: bool>(&mut self) -> Option<Cow<'a, str>> {
        self.eat(b'"')?;
        let start = self.pos;
        let mut high = false;
        let mut at = find_special::<WIDE>(self.b, start, &mut high)?;
        if self.b[at] == b'"' {
            self.pos = at + 1;
            return Some(Cow::Borrowed(text_of(&self.b[start..at], high)?));
        }
        // The rest of the line bounds the decoded length (escapes only shrink), and copies
        // overshoot by at most 32 bytes: one allocation, not zero-filled.
        let mut out = Vec::with_capacity(self.b.len() - start + 32);
        out.extend_from_slice(&self.b[start..at]);
        #[cfg(target_arch = "x86_64")]
        let blocks = WIDE && has_block_unescape();
        loop {
            match self.b[at] {
                b'"' => {
                    self.pos = at + 1;
                    let len = out.len();
                    // A short value before a long one must not keep the rest of the line's room.
                    if out.capacity() > 2 * len + 64 {
                        out.shrink_to_fit();
                    }
                    // The escapes decode to whole characters, so `out` is UTF-8 exactly when the
                    // runs between them are.
                    if high {
                        simdutf8::basic::from_utf8(&out).ok()?;
                    }
                    // SAFETY: just validated, or runs of ASCII bytes (the scans saw no byte above
                    // 0x7f) and UTF-8 encoded characters.
                    return Some(Cow::Owned(unsafe { String::from_utf8_unchecked(out) }));
                }
                b'\\' => {
                    #[cfg(target_arch = "x86_64")]
                    if WIDE && blocks {
                        // SAFETY: `blocks` says the CPU has the features.
                        let stopped = unsafe { unescape_blocks(self.b, at, &mut out, &mut high) };
                        if stopped != at {
                            at = if self.b.get(stopped).copied().is_some_and(is_special) {
                                stopped
                            } else {
                                copy_to_special::<WIDE>(self.b, stopped, &mut out, &mut high)?
                            };
                            continue;
                        }
                    }
                    let n = match self.b.get(at + 1).map(|&e| SHORT_ESCAPE[usize::from(e)]) {
                        Some(c @ 1..) => {
                            out.push(c);
                            2
                        }
                        _ => {
                            let (c, n) = self.unicode_escape(at)?;
                            out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
                            n
                        }
                    };
                    at = copy_to_special::<WIDE>(self.b, at + n, &mut out, &mut high)?;
                }
                _ => return None,
            }
        }
    }

    /// The `\u` escape at `at` (a character, or a surrogate pair) and its length in bytes.
    fn unicode_escape(&self, at: usize) -> Option<(char, usize)> {
        if self.b.get(at + 1) != Some(&b'u') {
            return None;
        }
        let hi = hex4(&self.b[at + 2..])?;
        if (0xdc00..0xe000).contains(&hi) {
            return None;
        }
        if !(0xd800..0xdc00).contains(&hi) {
            return Some((char::from_u32(hi)?, 6));
        }
        if self.b.get(at + 6..at + 8)? != b"\\u" {
            return None;
        }
        let lo = hex4(&self.b[at + 8..])?;
        if !(0xdc00..0xe000).contains(&lo) {
            return None;
        }
        Some((char::from_u32(0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00))?, 12))
    }

    /// Validate a string that is not kept (without `\u` escapes, which serde checks differently
    /// when it ignores a value).
    fn skip_string(&mut self) -> Option<()> {
        self.eat(b'"')?;
        let start = self.pos;
        let mut high = false;
        loop {
            let at = find_special::<false>(self.b, self.pos, &mut high)?;
            match self.b[at] {
                b'"' => {
                    // Escapes are ASCII: the raw bytes are UTF-8 exactly when the value is.
                    text_of(&self.b[start..at], high)?;
                    self.pos = at + 1;
                    return Some(());
                }
                b'\\' if self.b.get(at + 1).is_some_and(|&e| SHORT_ESCAPE[usize::from(e)] != 0) => {
                    self.pos = at + 2;
                }
                _ => return None,
            }
        }
    }

    fn skip_value(&mut self, depth: usize) -> Option<()> {
        match self.peek()? {
            b'"' => self.skip_string(),
            b'{' => self.skip_container(depth, b'}', true),
            b'[' => self.skip_container(depth, b']', false),
            b't' => self.eat_word(b"true"),
            b'f' => self.eat_word(b"false"),
            b'n' => self.eat_word(b"null"),
            _ => self.skip_number(),
        }
    }

    /// An object (`keyed`) or an array, from its opening bracket.
    fn skip_container(&mut self, depth: usize, close: u8, keyed: bool) -> Option<()> {
        if depth >= MAX_DEPTH {
            return None;
        }
        self.pos += 1;
        self.ws();
        if self.peek()? == close {
            self.pos += 1;
            return Some(());
        }
        loop {
            if keyed {
                self.skip_string()?;
                self.ws();
                self.eat(b':')?;
                self.ws();
            }
            self.skip_value(depth + 1)?;
            self.ws();
            match self.next()? {
                b',' => self.ws(),
                c if c == close => return Some(()),
                _ => return None,
            }
        }
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`, or one of Python's non-finite numbers.
    fn skip_number(&mut self) -> Option<()> {
        let digits = |p: &mut Self| {
            let start = p.pos;
            while p.peek().is_some_and(|c| c.is_ascii_digit()) {
                p.pos += 1;
            }
            (p.pos > start).then_some(())
        };
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        if self.peek()? == b'0' {
            self.pos += 1;
        } else if digits(self).is_none() {
            return self.skip_non_finite(start);
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            digits(self)?;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            digits(self)?;
        }
        Some(())
    }

    /// `NaN`, `Infinity` or `-Infinity` at `start`, as Python's `json` writes non-finite floats.
    #[cold]
    fn skip_non_finite(&mut self, start: usize) -> Option<()> {
        let rest = &self.b[start..];
        let word = [&b"NaN"[..], b"Infinity", b"-Infinity"].into_iter().find(|w| rest.starts_with(w))?;
        self.pos = start + word.len();
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_first_special_byte_in_any_word() {
        let mut line = vec![b'a'; 40];
        for (special, at) in [(b'"', 0), (b'\\', 7), (0x1f, 8), (0, 13), (b'"', 39)] {
            line[at] = special;
            let mut high = false;
            assert_eq!(find_special::<false>(&line, 0, &mut high), Some(at));
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx2") {
                let mut wide_high = false;
                assert_eq!(find_special::<true>(&line, 0, &mut wide_high), Some(at));
                // It may look further ahead (a whole 32 bytes), never less far.
                assert!(wide_high || !high);
            }
            assert_eq!(high, line[..at].iter().any(|&c| c >= 0x80));
            // Bytes just above the specials, and non-ASCII ones, are not special.
            line[at] = [b'#', b']', b' ', 0x80, 0xff][at % 5];
        }
        assert_eq!(find_special::<false>(&line, 0, &mut false), None);
    }
}
