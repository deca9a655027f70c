//! Any split regex, compiled to a DFA that reads one symbol per character.
//!
//! The hand-written scanners cover the patterns of the OpenAI families; every other split regex a
//! `tokenizer.json` declares (Qwen's single digits, Tekken's letter classes, DeepSeek's chains,
//! a Split on a plain string) runs here, with the same leftmost-first matches as Oniguruma, the
//! engine `tokenizers` compiles them with.
//!
//! - The code points are partitioned by the character classes the regex mentions, so that each
//!   block of the partition is a *symbol*: the regex is rewritten over symbols and compiled to a
//!   dense DFA (`regex-automata`), which then takes one transition per character instead of one
//!   per byte, over an alphabet of a few dozen symbols (a table that fits in L1).
//! - Top-level alternatives are the DFA's patterns, in order, so its leftmost-first match also
//!   names the alternative that won.
//! - A DFA has no look-around. The one the tokenizer patterns use, an alternative `C+(?!D)`
//!   (`\s+(?!\S)`: a whitespace run that leaves its last character to the next piece), is
//!   compiled as `C+` and checked after the match, backing off one character at a time as a
//!   backtracking engine would; if no end works, the alternatives after it are tried, by a second
//!   DFA made of those alone.
//!
//! The regex is read with `regex-syntax`, whose syntax mostly agrees with Oniguruma's; where it
//! does not, the pattern is first rewritten as Oniguruma reads it (`\w`, `\W`, the POSIX classes:
//! see `tokenize::onig`) or refused there. Refused here, with the reason: other look-arounds,
//! anchors (Oniguruma's `^`/`$` are line anchors), word boundaries, possessive quantifiers and
//! atomic groups, byte classes, and alternatives that can match the empty string.

use regex_automata::dfa::{dense, Automaton as _, StartKind};
use regex_automata::nfa::thompson::{self, WhichCaptures};
use regex_automata::util::primitives::StateID;
use regex_automata::util::start;
use regex_automata::{Anchored, MatchKind};
use regex_syntax::hir::{Class, ClassBytes, ClassBytesRange, ClassUnicode, ClassUnicodeRange, Hir, HirKind};

use super::scan::decode_multibyte;

/// Why a regex has no automaton.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refused(pub String);

fn refused<T>(msg: impl Into<String>) -> Result<T, Refused> {
    Err(Refused(msg.into()))
}

/// Code point → symbol: the block of the partition it falls in.
struct Symbols {
    ascii: [u8; 128],
    /// Block (of 128 code points) → offset of its symbols in `table`.
    blocks: Vec<u32>,
    table: Vec<u8>,
    count: usize,
}

const BLOCK_BITS: u32 = 7;
const BLOCK: usize = 1 << BLOCK_BITS;
const CODE_POINTS: u32 = 0x11_0000;

impl Symbols {
    #[inline(always)]
    fn of(&self, cp: u32) -> u8 {
        match self.blocks.get((cp >> BLOCK_BITS) as usize) {
            Some(&b) => self.table[b as usize + (cp as usize & (BLOCK - 1))],
            None => 0,
        }
    }

    /// The symbol of the character at `i` and its length in bytes (`i` < `t.len()`).
    #[inline(always)]
    fn at(&self, t: &[u8], i: usize) -> (u8, usize) {
        let b0 = t[i];
        if b0 < 0x80 {
            return (self.ascii[b0 as usize], 1);
        }
        let (cp, len) = decode_multibyte(t, i, b0);
        (self.of(cp), len)
    }
}

/// The partition of the code points by a list of classes: each block holds the code points that
/// are in exactly the same classes.
struct Partition {
    symbols: Symbols,
    /// The classes (each once), and for each the bitset of the symbols inside it.
    classes: Vec<ClassUnicode>,
    members: Vec<[u64; 4]>,
}

impl Partition {
    fn new(classes: Vec<ClassUnicode>) -> Result<Partition, Refused> {
        // Elementary intervals: between consecutive boundaries, a code point is in or out of each
        // class all along.
        let mut cuts = vec![0u32, CODE_POINTS];
        cuts.extend(classes.iter().flat_map(|c| c.ranges()).flat_map(|r| [r.start() as u32, r.end() as u32 + 1]));
        cuts.sort_unstable();
        cuts.dedup();
        let intervals = cuts.len() - 1;
        let words = classes.len().div_ceil(64).max(1);
        let mut sigs = vec![0u64; intervals * words];
        for (k, c) in classes.iter().enumerate() {
            for r in c.ranges() {
                let a = cuts.partition_point(|&x| x < r.start() as u32);
                let b = cuts.partition_point(|&x| x < r.end() as u32 + 1);
                for i in a..b {
                    sigs[i * words + k / 64] |= 1 << (k % 64);
                }
            }
        }
        let mut ids: std::collections::HashMap<&[u64], usize> = std::collections::HashMap::new();
        let mut interval_symbol = Vec::with_capacity(intervals);
        let mut members = vec![[0u64; 4]; classes.len()];
        for sig in sigs.chunks(words) {
            let next = ids.len();
            let id = *ids.entry(sig).or_insert(next);
            if id == next {
                if id > usize::from(u8::MAX) {
                    return refused("its character classes cut the code points into more than 256 blocks");
                }
                for (k, m) in members.iter_mut().enumerate() {
                    if sig[k / 64] >> (k % 64) & 1 != 0 {
                        m[id / 64] |= 1 << (id % 64);
                    }
                }
            }
            interval_symbol.push(id as u8);
        }
        // The symbol of every code point, then its blocks of `BLOCK`, each stored once.
        let mut flat = Vec::with_capacity(CODE_POINTS as usize);
        for (w, &s) in cuts.windows(2).zip(&interval_symbol) {
            flat.resize(w[1] as usize, s);
        }
        let mut blocks = Vec::with_capacity(CODE_POINTS as usize / BLOCK);
        let mut table: Vec<u8> = Vec::new();
        let mut seen: std::collections::HashMap<&[u8], u32> = std::collections::HashMap::new();
        for block in flat.chunks(BLOCK) {
            let next = u32::try_from(table.len()).expect("small table");
            let at = *seen.entry(block).or_insert(next);
            if at == next {
                table.extend_from_slice(block);
            }
            blocks.push(at);
        }
        // The first block, stored first, is the ASCII one.
        let ascii = table[..BLOCK].try_into().expect("a whole block");
        Ok(Partition { symbols: Symbols { ascii, blocks, table, count: ids.len() }, classes, members })
    }

    /// The symbols inside `class` (one of the partition's).
    fn set(&self, class: &ClassUnicode) -> &[u64; 4] {
        &self.members[self.classes.iter().position(|x| x == class).expect("collected")]
    }
}

fn char_class(c: char) -> ClassUnicode {
    ClassUnicode::new([ClassUnicodeRange::new(c, c)])
}

/// Split `pattern` at its top-level `|`s (outside groups, classes and escapes).
fn alternatives(pattern: &str) -> Result<Vec<&str>, Refused> {
    let b = pattern.as_bytes();
    let (mut depth, mut class, mut i, mut from) = (0usize, 0usize, 0, 0);
    let mut out = Vec::new();
    while i < b.len() {
        match b[i] {
            b'\\' => {
                i += 1;
                // `\p{..}`, `\x{..}`: the braces are the escape's, not a quantifier's.
                if b.get(i + 1) == Some(&b'{') {
                    while i < b.len() && b[i] != b'}' {
                        i += 1;
                    }
                }
            }
            b'[' => {
                class += 1;
                i = crate::onig::class_opening_end(b, i);
            }
            b']' if class > 0 => class -= 1,
            b'(' if class == 0 => depth += 1,
            b')' if class == 0 => {
                depth = depth.checked_sub(1).ok_or_else(|| Refused("unbalanced parentheses".into()))?;
            }
            b'|' if class == 0 && depth == 0 => {
                out.push(&pattern[from..i]);
                from = i + 1;
            }
            // `X++`, `X*+`, `X?+`, `X{n}+`: possessive (a DFA has no atomic matching).
            b'+' | b'*' | b'?' | b'}' if class == 0 && b.get(i + 1) == Some(&b'+') => {
                return refused(format!("the possessive quantifier at byte {i} of {pattern:?}"));
            }
            _ => {}
        }
        i += 1;
    }
    if depth != 0 || class != 0 {
        return refused("unbalanced parentheses or brackets");
    }
    out.push(&pattern[from..]);
    Ok(out)
}

fn parse(regex: &str) -> Result<Hir, Refused> {
    regex_syntax::ParserBuilder::new()
        .unicode(true)
        .utf8(true)
        .nest_limit(64)
        .build()
        .parse(regex)
        .map_err(|e| Refused(format!("regex {regex:?}: {e}")))
}

/// An alternative ending in a negative look-ahead: `C+(?!D)`.
struct LookAhead {
    /// The class the run is made of.
    run: ClassUnicode,
    /// What may not follow the match.
    not_followed_by: ClassUnicode,
}

/// One alternative: its expression, and the look-ahead that ends it, if any.
fn alternative(alt: &str) -> Result<(Hir, Option<LookAhead>), Refused> {
    for bad in ["(?=", "(?<", "(?>", "\\b", "\\B", "\\A", "\\z", "\\Z", "\\G", "\\K"] {
        if alt.contains(bad) {
            return refused(format!("alternative {alt:?} uses {bad}, which has no automaton"));
        }
    }
    let (body, ahead) = match alt.find("(?!") {
        None => (alt, None),
        Some(at) => {
            let rest = &alt[at + 3..];
            let Some(inner) = rest.strip_suffix(')') else {
                return refused(format!("alternative {alt:?}: a look-ahead that does not end it"));
            };
            (&alt[..at], Some(inner))
        }
    };
    let hir = parse(body)?;
    if hir.properties().minimum_len() == Some(0) {
        return refused(format!("alternative {alt:?} can match the empty string"));
    }
    let Some(inner) = ahead else { return Ok((hir, None)) };
    let run = match hir.kind() {
        HirKind::Repetition(r) if r.min == 1 && r.max.is_none() && r.greedy => match r.sub.kind() {
            HirKind::Class(Class::Unicode(c)) => Some(c.clone()),
            _ => None,
        },
        _ => None,
    };
    let run = run.ok_or_else(|| Refused(format!("alternative {alt:?}: a look-ahead after something other than C+")))?;
    let not_followed_by = match parse(inner)?.into_kind() {
        HirKind::Class(Class::Unicode(c)) => Some(c),
        HirKind::Literal(l) => std::str::from_utf8(&l.0).ok().and_then(crate::unicode::single_char).map(char_class),
        _ => None,
    };
    let not_followed_by = not_followed_by
        .ok_or_else(|| Refused(format!("alternative {alt:?}: a look-ahead of more than one character")))?;
    Ok((hir, Some(LookAhead { run, not_followed_by })))
}

/// Every class (and literal character) in `hir`, for the partition.
fn collect_classes(hir: &Hir, out: &mut Vec<ClassUnicode>) -> Result<(), Refused> {
    match hir.kind() {
        HirKind::Empty => {}
        HirKind::Literal(l) => {
            let s = std::str::from_utf8(&l.0).map_err(|_| Refused("a non-UTF-8 literal".into()))?;
            out.extend(s.chars().map(char_class));
        }
        HirKind::Class(Class::Unicode(c)) => out.push(c.clone()),
        HirKind::Class(Class::Bytes(_)) => return refused("a byte class ((?-u) or \\xNN outside Unicode)"),
        HirKind::Look(l) => {
            return refused(format!("the assertion {l:?} (anchors are line anchors in Oniguruma)"));
        }
        HirKind::Repetition(r) => collect_classes(&r.sub, out)?,
        HirKind::Capture(c) => collect_classes(&c.sub, out)?,
        HirKind::Concat(v) | HirKind::Alternation(v) => {
            for h in v {
                collect_classes(h, out)?;
            }
        }
    }
    Ok(())
}

fn symbol_class(set: &[u64; 4]) -> Hir {
    let ranges = (0..=255u8).filter(|&s| has(set, s)).map(|s| ClassBytesRange::new(s, s));
    Hir::class(Class::Bytes(ClassBytes::new(ranges)))
}

/// `hir` over symbols instead of code points.
fn over_symbols(hir: &Hir, p: &Partition) -> Hir {
    match hir.kind() {
        HirKind::Empty => Hir::empty(),
        HirKind::Literal(l) => {
            let s = std::str::from_utf8(&l.0).expect("checked when collected");
            Hir::concat(s.chars().map(|c| symbol_class(p.set(&char_class(c)))).collect())
        }
        HirKind::Class(Class::Unicode(c)) => symbol_class(p.set(c)),
        HirKind::Repetition(r) => {
            let mut r = r.clone();
            r.sub = Box::new(over_symbols(&r.sub, p));
            Hir::repetition(r)
        }
        HirKind::Capture(c) => over_symbols(&c.sub, p),
        HirKind::Concat(v) => Hir::concat(v.iter().map(|h| over_symbols(h, p)).collect()),
        HirKind::Alternation(v) => Hir::alternation(v.iter().map(|h| over_symbols(h, p)).collect()),
        HirKind::Class(Class::Bytes(_)) | HirKind::Look(_) => unreachable!("refused when collected"),
    }
}

/// The DFA of the alternatives from some index on, as flat transition tables over states
/// numbered so that one comparison tells an ordinary state from a match or the dead state.
/// A state is held premultiplied (`number << 7`, the start of its row of `ascii`), which takes a
/// shift off the chain of dependent loads that reading a piece is.
struct Stage {
    /// `ascii[s + b]`: the state after ASCII byte `b` (the symbol lookup folded in).
    ascii: Vec<u32>,
    /// `other[(s >> 7) << shift | symbol]`: the state after a non-ASCII character.
    other: Vec<u32>,
    shift: u32,
    start: u32,
    /// States from here on are match states, the last of them the dead state.
    special: u32,
    dead: u32,
    /// By match state number (from `special`): the alternative whose match ended before the last
    /// character read (a DFA reports matches one character late).
    matched: Vec<u32>,
    /// By state number: the alternative that matches when the text ends there, if any.
    at_end: Vec<Option<u32>>,
}

/// What to do after an alternative with a look-ahead wins: check it, else go to `next` (a stage
/// index; `None`: no alternative follows).
struct AheadRule {
    run: [u64; 4],
    not_followed_by: [u64; 4],
    next: Option<usize>,
}

/// A split regex compiled for leftmost-first matching at a position.
pub(crate) struct Automaton {
    symbols: Symbols,
    stages: Vec<Stage>,
    /// By alternative.
    ahead: Vec<Option<AheadRule>>,
    covers: bool,
}

impl std::fmt::Debug for Automaton {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Automaton").field("symbols", &self.symbols.count).field("stages", &self.stages.len()).finish()
    }
}

#[inline(always)]
fn has(set: &[u64; 4], s: u8) -> bool {
    set[s as usize / 64] >> (s % 64) & 1 != 0
}

impl Automaton {
    /// Compile `pattern` (Oniguruma / `regex` syntax), or say why it cannot be.
    pub(crate) fn new(pattern: &str) -> Result<Automaton, Refused> {
        let pattern = crate::onig::rewrite(pattern, crate::onig::Engine::Automaton).map_err(Refused)?;
        let (hirs, aheads): (Vec<Hir>, Vec<Option<LookAhead>>) =
            alternatives(&pattern)?.into_iter().map(alternative).collect::<Result<Vec<_>, _>>()?.into_iter().unzip();
        let mut classes = Vec::new();
        for h in &hirs {
            collect_classes(h, &mut classes)?;
        }
        for a in aheads.iter().flatten() {
            classes.extend([a.run.clone(), a.not_followed_by.clone()]);
        }
        let mut unique: Vec<ClassUnicode> = Vec::with_capacity(classes.len());
        for c in classes {
            if !unique.contains(&c) {
                unique.push(c);
            }
        }
        let partition = Partition::new(unique)?;
        let symbolic: Vec<Hir> = hirs.iter().map(|h| over_symbols(h, &partition)).collect();
        let mut stages = vec![Stage::new(&symbolic, 0, &partition.symbols)?];
        let mut ahead = Vec::with_capacity(aheads.len());
        for (k, a) in aheads.iter().enumerate() {
            let Some(a) = a else {
                ahead.push(None);
                continue;
            };
            let next = if k + 1 < symbolic.len() {
                stages.push(Stage::new(&symbolic, k + 1, &partition.symbols)?);
                Some(stages.len() - 1)
            } else {
                None
            };
            let (run, not_followed_by) = (*partition.set(&a.run), *partition.set(&a.not_followed_by));
            ahead.push(Some(AheadRule { run, not_followed_by, next }));
        }
        let mut automaton = Automaton { symbols: partition.symbols, stages, ahead, covers: false };
        automaton.covers = automaton.check_covers();
        Ok(automaton)
    }

    /// Whether a match starts at every position of every text: at the start of any one- or
    /// two-character text. That suffices: with no anchors, a match of a prefix is a match
    /// whatever follows, and a look-ahead's run (disjoint from what it may not be followed by)
    /// of two characters or more always backs off to a match.
    fn check_covers(&self) -> bool {
        if self.ahead.iter().flatten().any(|r| (0..4).any(|k| r.run[k] & r.not_followed_by[k] != 0)) {
            return false;
        }
        let mut reps: Vec<Option<char>> = vec![None; self.symbols.count];
        for cp in 0..CODE_POINTS {
            let s = usize::from(self.symbols.of(cp));
            reps[s] = reps[s].or(char::from_u32(cp));
        }
        let reps: Vec<char> = reps.into_iter().flatten().collect();
        let mut text = String::new();
        reps.iter().all(|&a| {
            std::iter::once(None).chain(reps.iter().map(Some)).all(|b| {
                text.clear();
                text.push(a);
                text.extend(b);
                self.match_at(text.as_bytes(), 0).is_some()
            })
        })
    }

    /// Whether a match starts at every position of every text, so that splitting leaves no gap
    /// between matches.
    pub(crate) fn covers(&self) -> bool {
        self.covers
    }

    /// The end of the match starting at `pos` (`< t.len()`), if one does.
    #[inline]
    pub(crate) fn match_at(&self, t: &[u8], pos: usize) -> Option<usize> {
        let mut stage = &self.stages[0];
        loop {
            let (end, alt) = stage.longest(&self.symbols, t, pos)?;
            let Some(rule) = &self.ahead[alt] else { return Some(end) };
            if let Some(end) = self.back_off(rule, t, pos, end) {
                return Some(end);
            }
            stage = &self.stages[rule.next?];
        }
    }

    /// The longest end of the run `t[pos..end]` (as long as the greedy match, or shorter by whole
    /// characters) that the look-ahead accepts.
    #[cold]
    fn back_off(&self, rule: &AheadRule, t: &[u8], pos: usize, mut end: usize) -> Option<usize> {
        while end > pos {
            if end == t.len() || !has(&rule.not_followed_by, self.symbols.at(t, end).0) {
                return Some(end);
            }
            // The previous character boundary (the run is valid UTF-8).
            end -= 1;
            while t[end] & 0xc0 == 0x80 {
                end -= 1;
            }
            debug_assert!(has(&rule.run, self.symbols.at(t, end).0));
        }
        None
    }

    /// Where the text without a match that starts at `pos` ends: at the next position where a
    /// match starts, or at the end.
    pub(crate) fn gap_end(&self, t: &[u8], pos: usize) -> usize {
        self.next_match_start(t, pos + self.symbols.at(t, pos).1)
    }

    /// Where the first match at or after `from` (a character boundary) starts, or `t.len()`.
    pub(crate) fn next_match_start(&self, t: &[u8], mut from: usize) -> usize {
        while from < t.len() {
            if self.match_at(t, from).is_some() {
                return from;
            }
            from += self.symbols.at(t, from).1;
        }
        t.len()
    }
}

impl Stage {
    fn new(alternatives: &[Hir], first: usize, symbols: &Symbols) -> Result<Stage, Refused> {
        // Limits keep a hostile regex (`x{300000}`, `(a|b)*a(a|b){20}`) from stalling the load:
        // it is refused and the file runs on the `tokenizers` crate instead.
        let nfa = thompson::Compiler::new()
            .configure(
                thompson::Config::new().utf8(false).which_captures(WhichCaptures::None).nfa_size_limit(Some(1 << 20)),
            )
            .build_many_from_hir(&alternatives[first..])
            .map_err(|e| Refused(format!("cannot compile: {e}")))?;
        let dfa = dense::Builder::new()
            .configure(
                dense::Config::new()
                    .match_kind(MatchKind::LeftmostFirst)
                    .start_kind(StartKind::Anchored)
                    .byte_classes(true)
                    .minimize(true)
                    .dfa_size_limit(Some(4 << 20))
                    .determinize_size_limit(Some(16 << 20)),
            )
            .build_from_nfa(&nfa)
            .map_err(|e| Refused(format!("cannot compile to a DFA: {e}")))?;
        let start = dfa
            .start_state(&start::Config::new().anchored(Anchored::Yes))
            .map_err(|e| Refused(format!("no start state: {e}")))?;
        // The states reachable from the start, over the symbols.
        let count = symbols.count;
        let mut ids = vec![start];
        let mut index = std::collections::HashMap::from([(start, 0usize)]);
        let mut edges = Vec::new();
        let mut k = 0;
        while k < ids.len() {
            for sym in 0..count {
                let next = dfa.next_state(ids[k], sym as u8);
                let n = ids.len();
                let j = *index.entry(next).or_insert_with(|| {
                    ids.push(next);
                    n
                });
                edges.push(j);
            }
            k += 1;
        }
        let kind = |sid: StateID| u8::from(dfa.is_match_state(sid)) + 2 * u8::from(dfa.is_dead_state(sid));
        // Ordinary states, then match states, then the dead state.
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by_key(|&i| (kind(ids[i]), i));
        if order.len() > usize::from(u16::MAX) {
            return refused(format!("its DFA has {} states", order.len()));
        }
        let mut renumber = vec![0u16; ids.len()];
        for (new, &old) in order.iter().enumerate() {
            renumber[old] = new as u16;
        }
        let special = order.iter().position(|&i| kind(ids[i]) != 0).unwrap_or(order.len()) as u16;
        // No dead state: every transition stays live, and `u16::MAX` is never reached.
        let dead = order.iter().position(|&i| dfa.is_dead_state(ids[i])).map_or(u16::MAX, |d| d as u16);
        let shift = count.next_power_of_two().trailing_zeros();
        let mut ascii = vec![0u32; order.len() << 7];
        let mut other = vec![0u32; order.len() << shift];
        let mut matched = Vec::new();
        let mut at_end = Vec::with_capacity(order.len());
        let row_of = |j: usize| u32::from(renumber[j]) << 7;
        for (new, &old) in order.iter().enumerate() {
            let row = &edges[old * count..(old + 1) * count];
            for (sym, &j) in row.iter().enumerate() {
                other[new << shift | sym] = row_of(j);
            }
            for (b, &sym) in symbols.ascii.iter().enumerate() {
                ascii[new << 7 | b] = row_of(row[sym as usize]);
            }
            let sid = ids[old];
            if dfa.is_match_state(sid) {
                matched.push((first + dfa.match_pattern(sid, 0).as_usize()) as u32);
            }
            let eoi = dfa.next_eoi_state(sid);
            at_end.push(dfa.is_match_state(eoi).then(|| (first + dfa.match_pattern(eoi, 0).as_usize()) as u32));
        }
        // No alternative matches the empty string, so the start is an ordinary state (0): a match
        // state is never 0.
        debug_assert!(renumber[0] == 0 && special > 0);
        Ok(Stage {
            ascii,
            other,
            shift,
            start: u32::from(renumber[0]) << 7,
            special: u32::from(special) << 7,
            dead: u32::from(dead) << 7,
            matched,
            at_end,
        })
    }

    /// The leftmost-first match at `pos`: its end and its alternative.
    #[inline(always)]
    fn longest(&self, symbols: &Symbols, t: &[u8], pos: usize) -> Option<(usize, usize)> {
        let (ascii, other, shift) = (&self.ascii[..], &self.other[..], self.shift);
        let (special, dead) = (self.special, self.dead);
        let mut s = self.start;
        let mut i = pos;
        // The last match state and where it was reached (its alternative is looked up once).
        let mut last = (0, 0u32);
        while let Some(&b) = t.get(i) {
            let at = i;
            s = if b < 0x80 {
                i += 1;
                // SAFETY: `s` is a state's row (every entry of the tables is one) and `b` < 128,
                // so the index is below `states << 7`, the table's length.
                unsafe { *ascii.get_unchecked((s | u32::from(b)) as usize) }
            } else {
                let (cp, len) = decode_multibyte(t, i, b);
                i += len;
                // SAFETY: as above, with rows of `1 << shift` entries and symbols below that.
                unsafe { *other.get_unchecked(((s >> 7) << shift | u32::from(symbols.of(cp))) as usize) }
            };
            if s == dead {
                break;
            }
            // The match ended before the character just read. Without a branch: whether a state
            // matches changes from character to character, too often to predict.
            let is_match = s >= special;
            last = if is_match { (at, s) } else { last };
        }
        if i == t.len() && s != dead {
            if let Some(alt) = self.at_end[(s >> 7) as usize] {
                return Some((i, alt as usize));
            }
        }
        (last.1 != 0).then(|| (last.0, self.matched[((last.1 - special) >> 7) as usize] as usize))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::Strategy as _;

    fn split<'a>(a: &Automaton, text: &'a str) -> Vec<&'a str> {
        let t = text.as_bytes();
        let mut out = Vec::new();
        let mut pos = 0;
        while pos < t.len() {
            let end = a.match_at(t, pos).unwrap_or_else(|| a.gap_end(t, pos));
            out.push(&text[pos..end]);
            pos = end;
        }
        out
    }

    #[test]
    fn top_level_alternatives() {
        assert_eq!(alternatives(r"a|(b|c)|[|]|\||d").unwrap(), vec!["a", "(b|c)", "[|]", r"\|", "d"]);
        assert_eq!(alternatives(r"[]|]|x").unwrap(), vec!["[]|]", "x"]);
        assert!(alternatives("(a").is_err());
    }

    #[test]
    fn lookahead_backs_off_and_falls_through() {
        let a = Automaton::new(r"\p{L}+|\s+(?!\S)|\s+").unwrap();
        assert_eq!(split(&a, "a   b"), ["a", "  ", " ", "b"]);
        assert_eq!(split(&a, "a b  "), ["a", " ", "b", "  "]);
        // Without the fallback alternative a lone space before a letter is a gap.
        let a = Automaton::new(r"\p{L}+|\s+(?!\S)").unwrap();
        assert_eq!(split(&a, "a b"), ["a", " ", "b"]);
        assert_eq!(a.match_at(b"a b", 1), None);
    }

    /// Split regexes of real `tokenizer.json` files, and parts of them.
    pub(crate) const REAL_PATTERNS: &[&str] = &[
        // Qwen2 / Qwen2.5 / Qwen3
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        // Mistral Tekken
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        // DeepSeek-V3's three Splits
        r"\p{N}{1,3}",
        r"[一-龥぀-ゟ゠-ヿ]+",
        r"[!\x22#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        // The families with a hand-written scanner, as HF files spell them.
        super::super::super::pattern::GPT2_ORIGINAL,
        super::super::super::pattern::CL100K_CLASSIC,
        super::super::super::pattern::O200K,
        // Plain-string Splits, digits, whitespace.
        r" ",
        r"\p{N}",
        r"\s+",
        r"\n\n|\n",
    ];

    /// The non-overlapping matches, leftmost first (what `find_iter` yields).
    fn matches(a: &Automaton, text: &str) -> Vec<(usize, usize)> {
        let t = text.as_bytes();
        let mut out = Vec::new();
        let mut pos = 0;
        loop {
            let s = a.next_match_start(t, pos);
            if s == t.len() {
                return out;
            }
            let e = a.match_at(t, s).expect("a match starts here");
            out.push((s, e));
            pos = e;
        }
    }

    fn compiled() -> &'static [(Automaton, fancy_regex::Regex)] {
        use std::sync::OnceLock;
        static ALL: OnceLock<Vec<(Automaton, fancy_regex::Regex)>> = OnceLock::new();
        ALL.get_or_init(|| {
            REAL_PATTERNS.iter().map(|p| (Automaton::new(p).unwrap(), fancy_regex::Regex::new(p).unwrap())).collect()
        })
    }

    fn check(text: &str) -> Result<(), proptest::test_runner::TestCaseError> {
        for (i, (a, re)) in compiled().iter().enumerate() {
            let expected: Vec<(usize, usize)> =
                re.find_iter(text).map(|m| m.unwrap()).map(|m| (m.start(), m.end())).collect();
            proptest::prop_assert_eq!(matches(a, text), expected, "pattern {} on {:?}", REAL_PATTERNS[i], text);
        }
        Ok(())
    }

    const TRICKY: &[char] = &[
        'a', 'x', 'A', 'X', 's', 't', 'd', 'm', 'l', 'v', 'e', 'r', 'S', 'L', 'ſ', 'K', '\'', ' ', ' ', '\t', '\n',
        '\r', '\u{b}', '\u{85}', '\u{a0}', '\u{3000}', '\u{200b}', '(', '/', '-', '_', '.', '!', '?', '<', '$', '`',
        '0', '1', '9', '²', 'Ⅷ', '٣', '中', '龥', '぀', 'あ', 'ア', 'ヿ', '한', 'ا', 'न', '\u{94d}', 'ǅ', 'ʰ', 'ß', 'Σ',
        'σ', '\u{301}', '\u{20dd}', '\u{fe0f}', '\u{200d}', '😀', '🏽', '\u{0}', '\u{7f}', '\u{feff}', '€', '«',
    ];

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config { cases: 1500, ..Default::default() })]

        #[test]
        fn same_matches_as_a_backtracking_engine(
            text in proptest::collection::vec(
                proptest::prop_oneof![8 => proptest::sample::select(TRICKY), 1 => proptest::arbitrary::any::<char>()],
                0..40,
            ).prop_map(|v| v.into_iter().collect::<String>())
        ) {
            check(&text)?;
        }

        #[test]
        fn runs_of_one_character(
            runs in proptest::collection::vec((proptest::sample::select(TRICKY), 1usize..5), 0..10)
        ) {
            let text: String = runs.iter().flat_map(|&(c, n)| std::iter::repeat_n(c, n)).collect();
            check(&text)?;
        }
    }

    #[test]
    fn knows_which_patterns_cover_every_position() {
        for p in [REAL_PATTERNS[0], REAL_PATTERNS[1], super::super::super::pattern::CL100K_CLASSIC] {
            assert!(Automaton::new(p).unwrap().covers(), "{p}");
        }
        for p in [r"\p{N}{1,3}", r" ", r"\p{L}+|\s+(?!\S)"] {
            assert!(!Automaton::new(p).unwrap().covers(), "{p}");
        }
    }

    #[test]
    fn refuses_what_it_cannot_do() {
        for p in [
            r"a(?=b)",
            r"^a",
            r"a$",
            r"\bword",
            r"a++",
            r"(?>a)",
            r"a*",
            r"x|y?",
            r"(?-u:\xff)",
            r"a(?i)a|b",
            r"(?m).+",
            r"(?i:ss)",
            r"(?i:st)",
            r"(?i:é)",
            r"[:alpha:]+",
            r"\w+\b",
            r"x{300000}",
            r"(a|b)*a(a|b){20}",
        ] {
            assert!(Automaton::new(p).is_err(), "{p}");
        }
    }
}
