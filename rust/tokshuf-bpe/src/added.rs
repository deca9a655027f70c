//! Tokens matched in the text before it is split and merged: special tokens (tiktoken `encode`
//! with specials allowed) and the added tokens of a `tokenizer.json`, special or not, with their
//! `lstrip` / `rstrip` / `single_word` flags, exactly as `tokenizers` extracts them.
//!
//! `tokenizers` scans a text for its added tokens leftmost-longest, resuming after each match
//! (kept or not): a `single_word` token next to a word character is dropped, not retried
//! shorter; `lstrip` takes the whitespace before a token into it (never past the previous one),
//! `rstrip` the whitespace after it. The text between tokens is then normalized, split and
//! merged on its own.

use aho_corasick::{AhoCorasick, Anchored, Input, MatchKind, StartKind};
use memchr::memmem;

/// An added token: its text, id and how it is matched.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct AddedToken {
    pub content: String,
    pub id: u32,
    pub single_word: bool,
    pub lstrip: bool,
    pub rstrip: bool,
    /// Matched in the normalized text (else in the raw text, before normalization).
    pub normalized: bool,
    pub special: bool,
}

impl AddedToken {
    /// A token matched as is (a tiktoken special token).
    pub fn plain(content: impl Into<String>, id: u32) -> AddedToken {
        AddedToken {
            content: content.into(),
            id,
            single_word: false,
            lstrip: false,
            rstrip: false,
            normalized: false,
            special: true,
        }
    }
}

/// A part of a text: plain text to encode, or an added token's id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    Text(usize, usize),
    Token(u32),
}

/// A set of added tokens searched together (`tokenizers` keeps two: those matched in the raw
/// text, and those matched after normalization).
#[derive(Clone)]
pub(crate) struct AddedSet {
    /// The tokens; the patterns of `matcher` are their (possibly normalized) texts, in order.
    tokens: Vec<AddedToken>,
    matcher: Option<AhoCorasick>,
    /// The prefix all patterns share, when it has two bytes or more (`<|`, or the two spaces
    /// GPT-NeoX's whitespace tokens start with): its occurrences are the only places a match
    /// can start, found far faster than by the automaton's own scan.
    prefix: Option<memmem::Finder<'static>>,
}

impl std::fmt::Debug for AddedSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.tokens.iter().map(|t| (&t.content, t.id))).finish()
    }
}

impl AddedSet {
    /// `tokens` searched by the texts `patterns` (one each; empty ones are never matched).
    pub fn new(tokens: Vec<AddedToken>, patterns: Vec<String>) -> AddedSet {
        debug_assert_eq!(tokens.len(), patterns.len());
        let (tokens, patterns): (Vec<_>, Vec<_>) =
            tokens.into_iter().zip(patterns).filter(|(_, p)| !p.is_empty()).unzip();
        let matcher = (!patterns.is_empty()).then(|| {
            AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostLongest)
                .start_kind(StartKind::Both)
                .build(&patterns)
                .expect("a leftmost-longest automaton of non-empty strings")
        });
        let common = patterns.iter().skip(1).fold(patterns.first().map_or(&[][..], |p| p.as_bytes()), |c, p| {
            let n = c.iter().zip(p.as_bytes()).take_while(|(a, b)| a == b).count();
            &c[..n]
        });
        let prefix = (common.len() >= 2).then(|| memmem::Finder::new(common).into_owned());
        AddedSet { tokens, matcher, prefix }
    }

    /// Tokens searched by their own text.
    pub fn plain(tokens: Vec<AddedToken>) -> AddedSet {
        let patterns = tokens.iter().map(|t| t.content.clone()).collect();
        AddedSet::new(tokens, patterns)
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    pub fn tokens(&self) -> &[AddedToken] {
        &self.tokens
    }

    /// The id of the token whose text is `content`.
    pub fn id(&self, content: &str) -> Option<u32> {
        self.tokens.iter().find(|t| t.content == content).map(|t| t.id)
    }

    /// Whether every token is special (then a caller that leaves special tokens as text need
    /// not look for them).
    pub fn all_special(&self) -> bool {
        self.tokens.iter().all(|t| t.special)
    }

    /// Call `emit` with the parts of `text`, in order. Text parts are never empty; with
    /// `rstrip` tokens they can overlap a following token's whitespace, as in `tokenizers`.
    /// With `specials_as_text`, a special token's match is left in the text (`tokenizers`'
    /// `encode_special_tokens`; as there, the match is not tried again shorter).
    pub fn split(&self, text: &str, specials_as_text: bool, mut emit: impl FnMut(Part)) {
        let Some(matcher) = &self.matcher else {
            if !text.is_empty() {
                emit(Part::Text(0, text.len()));
            }
            return;
        };
        let t = text.as_bytes();
        let (mut done, mut from) = (0, 0);
        while let Some(m) = self.find(matcher, t, from) {
            from = m.end();
            let tok = &self.tokens[m.pattern().as_usize()];
            if tok.special && specials_as_text {
                continue;
            }
            if tok.single_word && (ends_in_word_char(&text[..m.start()]) || starts_with_word_char(&text[m.end()..])) {
                continue;
            }
            let mut start = m.start();
            let mut stop = m.end();
            if tok.lstrip {
                start = trailing_whitespace_start(text, start).max(done);
            }
            if tok.rstrip {
                stop = leading_whitespace_end(text, stop);
            }
            if done < start {
                emit(Part::Text(done, start));
            }
            emit(Part::Token(tok.id));
            done = stop;
        }
        if done < t.len() {
            emit(Part::Text(done, t.len()));
        }
    }

    /// The leftmost-longest match from `from` on.
    fn find(&self, matcher: &AhoCorasick, t: &[u8], mut from: usize) -> Option<aho_corasick::Match> {
        let Some(prefix) = &self.prefix else {
            return matcher.find(Input::new(t).range(from..));
        };
        // The first occurrence of the prefix where a token matches is the leftmost match.
        loop {
            let at = from + prefix.find(&t[from..])?;
            if let Some(m) = matcher.find(Input::new(t).range(at..).anchored(Anchored::Yes)) {
                return Some(m);
            }
            from = at + 1;
        }
    }
}

/// `\w` of the `regex` crate (Unicode), which `tokenizers` tests `single_word` against.
fn is_word_char(c: char) -> bool {
    use std::sync::OnceLock;
    static WORD: OnceLock<Vec<(u32, u32)>> = OnceLock::new();
    let ranges = WORD.get_or_init(|| super::unicode::class_ranges(r"\w"));
    let cp = c as u32;
    let i = ranges.partition_point(|r| r.1 < cp);
    ranges.get(i).is_some_and(|r| r.0 <= cp)
}

fn ends_in_word_char(s: &str) -> bool {
    s.chars().next_back().is_some_and(is_word_char)
}

fn starts_with_word_char(s: &str) -> bool {
    s.chars().next().is_some_and(is_word_char)
}

/// `\s` of the `regex` crate (Unicode `White_Space`).
fn is_space(c: char) -> bool {
    super::unicode::classes().get(c as u32) & super::unicode::S != 0
}

/// Where the run of whitespace that ends at `end` starts.
fn trailing_whitespace_start(text: &str, end: usize) -> usize {
    text[..end].trim_end_matches(is_space).len()
}

/// Where the run of whitespace that starts at `start` ends.
fn leading_whitespace_end(text: &str, start: usize) -> usize {
    text.len() - text[start..].trim_start_matches(is_space).len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(set: &AddedSet, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        set.split(text, false, |p| {
            out.push(match p {
                Part::Text(a, b) => text[a..b].to_string(),
                Part::Token(id) => format!("#{id}"),
            })
        });
        out
    }

    fn token(content: &str, id: u32) -> AddedToken {
        AddedToken::plain(content, id)
    }

    #[test]
    fn leftmost_then_longest() {
        let s = AddedSet::plain(vec![token("<|a|>", 1), token("<|a|>x", 2), token("<|b|>", 3)]);
        assert_eq!(parts(&s, "zz<|b|><|a|>x"), ["zz", "#3", "#2"]);
        assert_eq!(parts(&s, "<|a|"), ["<|a|"]);
        assert_eq!(parts(&s, ""), Vec::<String>::new());
        // NeoX-style whitespace tokens: runs of spaces become one token.
        let spaces = AddedSet::plain(vec![token("  ", 10), token("   ", 11)]);
        assert_eq!(parts(&spaces, "a b  c     d"), ["a b", "#10", "c", "#11", "#10", "d"]);
    }

    #[test]
    fn flags_strip_and_single_word() {
        let mut t = token("<m>", 5);
        t.lstrip = true;
        t.rstrip = true;
        let s = AddedSet::plain(vec![t]);
        assert_eq!(parts(&s, "a  <m>\t b"), ["a", "#5", "b"]);
        let mut w = token("ab", 7);
        w.single_word = true;
        let s = AddedSet::plain(vec![w]);
        assert_eq!(parts(&s, "ab xab ab, éab ab"), ["#7", " xab ", "#7", ", éab ", "#7"]);
    }

    /// Leftmost-longest by brute force.
    fn naive(tokens: &[(String, u32)], text: &str) -> Vec<String> {
        let mut out = Vec::new();
        let (mut done, mut pos) = (0, 0);
        while pos < text.len() {
            let best = tokens.iter().filter(|(t, _)| text[pos..].starts_with(t.as_str())).max_by_key(|(t, _)| t.len());
            match best {
                Some((t, id)) => {
                    if done < pos {
                        out.push(text[done..pos].to_string());
                    }
                    out.push(format!("#{id}"));
                    pos += t.len();
                    done = pos;
                }
                None => pos += 1,
            }
        }
        if done < text.len() {
            out.push(text[done..].to_string());
        }
        out
    }

    proptest::proptest! {
        #[test]
        fn same_parts_as_brute_force(
            tokens in proptest::collection::vec("[ab<|]{1,4}", 1..6),
            text in "[ab<| ]{0,30}",
        ) {
            let mut list: Vec<(String, u32)> = Vec::new();
            for (i, t) in tokens.into_iter().enumerate() {
                if !list.iter().any(|(x, _)| *x == t) {
                    list.push((t, i as u32));
                }
            }
            let set = AddedSet::plain(list.iter().map(|(t, id)| token(t, *id)).collect());
            proptest::prop_assert_eq!(parts(&set, &text), naive(&list, &text));
        }
    }

    #[test]
    fn rstrip_overlapping_the_next_token_as_tokenizers_does() {
        let mut a = token("<a>", 1);
        a.rstrip = true;
        let s = AddedSet::plain(vec![a, token("\n", 2)]);
        // `<a>` takes " \n  "; the newline is still matched on its own, and the text after it
        // starts where that match ends.
        assert_eq!(parts(&s, "<a> \n  x"), ["#1", "#2", "  x"]);
    }
}
