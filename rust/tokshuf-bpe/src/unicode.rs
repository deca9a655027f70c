//! Character classes of the split patterns, one flag byte per code point.
//!
//! The classes are built from `regex-syntax`'s Unicode tables, the same tables (and Unicode
//! version) that `fancy-regex` — tiktoken's and tiktoken-rs's engine — matches `\p{L}`, `\p{N}`
//! and `\s` with, so the hand-written scanners agree with the regexes code point for code point.
//! The table is two-level (blocks of 256 code points, deduplicated): about 40 KB.

use std::sync::OnceLock;

use regex_syntax::hir::{Class, HirKind};

/// `\p{L}`.
pub const L: u8 = 1;
/// `\p{N}`.
pub const N: u8 = 2;
/// `\s` (Unicode `White_Space`).
pub const S: u8 = 4;
/// Neither letter, number nor whitespace: `[^\s\p{L}\p{N}]`.
pub const O: u8 = 8;
/// o200k's first letter class `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`.
pub const UP: u8 = 16;
/// o200k's second letter class `[\p{Ll}\p{Lm}\p{Lo}\p{M}]`.
pub const LO: u8 = 32;
/// `\r` or `\n`.
pub const CRLF: u8 = 64;

const BLOCK_BITS: u32 = 8;
const BLOCK: usize = 1 << BLOCK_BITS;

/// The flags of every code point (see the constants above).
pub struct Classes {
    /// Block index of each 256-code-point block.
    blocks: Vec<u16>,
    /// Deduplicated blocks, concatenated.
    flags: Vec<u8>,
}

impl Classes {
    /// The flags of `cp` (any `u32`; values past U+10FFFF have none).
    #[inline]
    pub fn get(&self, cp: u32) -> u8 {
        match self.blocks.get((cp >> BLOCK_BITS) as usize) {
            Some(&b) => self.flags[(b as usize) << BLOCK_BITS | (cp as usize & (BLOCK - 1))],
            None => 0,
        }
    }
}

/// Flags of the ASCII characters, for the fast path.
pub static ASCII: [u8; 128] = ascii_table();

const fn ascii_table() -> [u8; 128] {
    let mut t = [O; 128];
    let mut c = 0;
    while c < 128 {
        t[c] = match c as u8 {
            b'a'..=b'z' => L | LO,
            b'A'..=b'Z' => L | UP,
            b'0'..=b'9' => N,
            b'\r' | b'\n' => S | CRLF,
            b'\t' | 0x0b | 0x0c | b' ' => S,
            _ => O,
        };
        c += 1;
    }
    t
}

/// The byte length of the UTF-8 character whose first byte is `lead`.
#[inline(always)]
pub(crate) fn utf8_len(lead: u8) -> usize {
    match lead {
        0..0xc0 => 1,
        0xc0..0xe0 => 2,
        0xe0..0xf0 => 3,
        _ => 4,
    }
}

/// The character `s` is made of, if it is one.
pub(crate) fn single_char(s: &str) -> Option<char> {
    let mut c = s.chars();
    c.next().filter(|_| c.next().is_none())
}

/// The shared table (built on first use, about a millisecond).
pub fn classes() -> &'static Classes {
    static TABLE: OnceLock<Classes> = OnceLock::new();
    TABLE.get_or_init(build)
}

/// Code point ranges of a regex character class such as `\p{Lu}`.
pub(crate) fn class_ranges(class: &str) -> Vec<(u32, u32)> {
    let hir = regex_syntax::ParserBuilder::new()
        .unicode(true)
        .build()
        .parse(class)
        .unwrap_or_else(|e| panic!("bad class {class}: {e}"));
    match hir.kind() {
        HirKind::Class(Class::Unicode(c)) => c.ranges().iter().map(|r| (r.start() as u32, r.end() as u32)).collect(),
        other => panic!("{class} is not a Unicode class: {other:?}"),
    }
}

fn build() -> Classes {
    const MAX: usize = 0x11_0000;
    let mut flat = vec![0u8; MAX];
    let mut set = |class: &str, flag: u8| {
        for (a, b) in class_ranges(class) {
            for f in &mut flat[a as usize..=b as usize] {
                *f |= flag;
            }
        }
    };
    set(r"\p{L}", L);
    set(r"\p{N}", N);
    set(r"\s", S);
    set(r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]", UP);
    set(r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]", LO);
    set(r"[\r\n]", CRLF);
    for f in &mut flat {
        if *f & (L | N | S) == 0 {
            *f |= O;
        }
    }
    let mut blocks = Vec::with_capacity(MAX / BLOCK);
    let mut flags: Vec<u8> = Vec::new();
    let mut seen = std::collections::HashMap::new();
    for chunk in flat.chunks(BLOCK) {
        let next = seen.len();
        let idx = *seen.entry(chunk).or_insert_with(|| {
            flags.extend_from_slice(chunk);
            next
        });
        blocks.push(u16::try_from(idx).expect("fewer than 65536 distinct blocks"));
    }
    Classes { blocks, flags }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascii_agrees_with_unicode_table() {
        let t = classes();
        for c in 0u32..128 {
            assert_eq!(ASCII[c as usize], t.get(c), "char {c:#x}");
        }
    }

    #[test]
    fn known_code_points() {
        let t = classes();
        assert_eq!(t.get('é' as u32), L | LO);
        assert_eq!(t.get('Σ' as u32), L | UP);
        assert_eq!(t.get('中' as u32), L | UP | LO); // Lo is in both o200k classes
        assert_eq!(t.get(0x0301), O | UP | LO); // combining acute: a mark, not a letter
        assert_eq!(t.get('²' as u32), N);
        assert_eq!(t.get(0x3000), S); // ideographic space
        assert_eq!(t.get(0x85), S);
        assert_eq!(t.get(0x200B), O); // zero-width space is not White_Space
        assert_eq!(t.get('😀' as u32), O);
        assert_eq!(t.get(0x10_FFFF), O);
        assert_eq!(t.get(0x11_0000), 0);
    }

    #[test]
    fn classes_partition_code_points() {
        let t = classes();
        for cp in 0..0x11_0000u32 {
            let f = t.get(cp);
            assert_eq!((f & (L | N | S | O)).count_ones(), 1, "{cp:#x}");
            assert_eq!(f & L != 0, f & (UP | LO) != 0 && f & O == 0, "{cp:#x}");
        }
    }
}
