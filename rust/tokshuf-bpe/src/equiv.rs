//! When a merge list (a `tokenizer.json`'s, or a SentencePiece model's) can run as a tiktoken rank
//! table.
//!
//! Merging by ranks (two parts merge when their bytes are a token, the lowest id first) is the
//! fast path: a rank is found from the bytes of a substring, so every candidate can be prefetched
//! before merging starts, and the seeded shared table answers it in one load. A merge list
//! needs the ids of both parts, known only as merging goes. The two agree, piece for piece, when:
//!
//! 1. every token of two or more units (bytes; characters for SentencePiece-style
//!    vocabularies) is made by listed merges of one priority (one merge in a `tokenizer.json`;
//!    every split into two pieces, ranked by the piece's score, in a SentencePiece `.model`),
//! 2. list priority grows with the id made, so that comparing ids compares priorities (else
//!    the priority of each id is kept and compared instead: equal ones, leftmost first, as a
//!    SentencePiece model's equal scores), and
//! 3. every such token, merged on its own, comes out as itself.
//!
//! Why: whenever adjacent parts `x`, `y` spell a token `t`, the merges inside their span happened
//! in the order merging `t`'s bytes alone performs them (merges across a span's edge never
//! happened, and inside it the lowest priority goes first in both), so merging `t` alone reaches
//! `[x, y]`; by 3 it then ends at `[t]`, so `(x, y)` is a listed merge making `t`, at `t`'s one
//! priority (by 1), and both rules see the pair with the same precedence (by 2). Pairs that
//! spell no token merge in neither. GPT-2's `tokenizer.json` and Mistral v1's `.model` pass; a
//! list that fails keeps merging by pairs.

use super::merge::{encode_piece, MergeScratch};
use super::vocab::{Merges, Vocab};

/// `vocab` merging by ranks if that gives the encodings its merge list gives, else unchanged.
pub(crate) fn list_as_ranks(vocab: Vocab) -> Vocab {
    match list_ranks(&vocab) {
        Some(prio) => vocab.into_ranks(prio),
        None => vocab,
    }
}

/// Whether `vocab`'s list runs as ranks: `Some(None)` comparing the ids made, `Some(Some(p))`
/// comparing their priorities `p[id]` (condition 2 does not hold), `None` not at all.
fn list_ranks(vocab: &Vocab) -> Option<Option<Box<[u32]>>> {
    let Merges::List(list) = &vocab.merges else { return None };
    // 1: the priority of the merges making each id, one for all of them.
    let mut prio = vec![u32::MAX; vocab.id_bound() as usize];
    for v in list.values() {
        let (p, made) = ((v >> 32) as u32, v as u32);
        match prio.get_mut(made as usize) {
            Some(slot) if *slot == u32::MAX || *slot == p => *slot = p,
            _ => return None,
        }
    }
    let multi = |id: u32| vocab.units_len(id) >= 2;
    if (0..vocab.id_bound()).any(|id| multi(id) != (prio[id as usize] != u32::MAX)) {
        return None; // a token no merge makes, or a merge making a single unit
    }
    // 2.
    let made: Vec<u32> = (0..vocab.id_bound()).filter(|&id| multi(id)).map(|id| prio[id as usize]).collect();
    let by_id = made.windows(2).all(|w| w[0] < w[1]);
    // 3.
    let mut scratch = MergeScratch::default();
    let mut ids = Vec::new();
    let whole = (0..vocab.id_bound()).filter(|&id| multi(id)).all(|id| {
        ids.clear();
        encode_piece(vocab, vocab.short_table(), vocab.token(id), &mut ids, &mut scratch);
        ids == [id]
    });
    if !whole {
        return None;
    }
    if by_id {
        return Some(None);
    }
    // Only their order counts: as ranks 0, 1, …, priorities pack into the merge candidates as
    // ids do.
    let mut order = made;
    order.sort_unstable();
    order.dedup();
    for p in prio.iter_mut().filter(|p| **p != u32::MAX) {
        *p = order.binary_search(p).expect("a priority of the list") as u32;
    }
    Some(Some(prio.into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::{Fallback, FastMap, MergeList};
    use proptest::prelude::*;

    /// A vocabulary of all bytes (id = byte) and the merges `(left, right)` in priority order,
    /// merge `i` making id `256 + order[i]`.
    fn list_vocab(merges: &[(&[u8], &[u8])], order: &[u32]) -> Vocab {
        let mut tokens: Vec<(Vec<u8>, u32)> = (0..=255u8).map(|b| (vec![b], u32::from(b))).collect();
        let mut list = FastMap::default();
        for (i, (l, r)) in merges.iter().enumerate() {
            let id_of = |s: &[u8]| tokens.iter().find(|t| t.0 == s).map(|t| t.1).unwrap();
            let (li, ri) = (id_of(l), id_of(r));
            let made = 256 + order[i];
            tokens.push(([*l, *r].concat(), made));
            list.insert(u64::from(li) << 32 | u64::from(ri), (i as u64) << 32 | u64::from(made));
        }
        Vocab::new(tokens, Merges::List(MergeList::new(list))).unwrap()
    }

    fn encode(v: &Vocab, text: &[u8]) -> Vec<u32> {
        let mut out = Vec::new();
        encode_piece(v, v.short_table(), text, &mut out, &mut MergeScratch::default());
        out
    }

    #[test]
    fn a_token_its_own_merges_cannot_make_stays_a_list() {
        // "bc" goes before "ab", so "abc" alone merges to [a, bc]: ranks would give [abc].
        let v = list_vocab(&[(b"b", b"c"), (b"a", b"b"), (b"ab", b"c")], &[0, 1, 2]);
        assert!(list_ranks(&v).is_none());
        assert_eq!(encode(&v, b"abc"), vec![u32::from(b'a'), 256]);
    }

    #[test]
    fn priorities_out_of_id_order_are_kept() {
        let v = list_vocab(&[(b"a", b"b"), (b"c", b"d")], &[1, 0]);
        assert_eq!(list_ranks(&v), Some(Some(vec![u32::MAX; 256].into_iter().chain([1, 0]).collect())));
        assert_eq!(list_ranks(&list_vocab(&[(b"a", b"b"), (b"c", b"d")], &[0, 1])), Some(None));
        let r = list_as_ranks(v);
        assert!(matches!(r.merges, Merges::Ranks) && !r.ranks_are_ids());
        assert_eq!(encode(&r, b"abcd"), [257, 256]);
    }

    #[test]
    fn keeps_the_identity_of_the_list() {
        let v = list_vocab(&[(b"a", b"b"), (b"ab", b"c")], &[0, 1]);
        let digest = v.digest();
        let r = list_as_ranks(v);
        assert!(matches!(r.merges, Merges::Ranks));
        assert_eq!(r.digest(), digest);
    }

    #[test]
    fn gpt2_tokenizer_json_runs_as_ranks() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/gpt2/tokenizer.json");
        let hf = crate::hf::parse(&std::fs::read_to_string(path).unwrap()).unwrap();
        let v = Vocab::new(hf.tokens, hf.merges).unwrap();
        assert_eq!(list_ranks(&v), Some(None), "compared by id");
    }

    /// A list made as a SentencePiece model's is: units, then tokens each made from two earlier
    /// ones (`picks`: which two, and the token's priority) and listed under every split of it
    /// into two tokens, at its priority.
    fn complete_list(units: &[&str], picks: &[(usize, usize, u32)]) -> Vocab {
        let mut made: Vec<Vec<u8>> = units.iter().map(|u| u.as_bytes().to_vec()).collect();
        let mut prio = vec![u32::MAX; units.len()];
        for &(l, r, p) in picks {
            let t = [made[l % made.len()].as_slice(), made[r % made.len()].as_slice()].concat();
            if !made.contains(&t) {
                made.push(t);
                prio.push(p);
            }
        }
        let id_of = |s: &[u8]| made.iter().position(|t| t == s).map(|i| i as u32);
        let mut list = FastMap::default();
        for (id, t) in made.iter().enumerate().skip(units.len()) {
            for cut in (1..t.len()).filter(|&c| t[c] & 0xc0 != 0x80) {
                if let (Some(l), Some(r)) = (id_of(&t[..cut]), id_of(&t[cut..])) {
                    list.insert(u64::from(l) << 32 | u64::from(r), u64::from(prio[id]) << 32 | id as u64);
                }
            }
        }
        let tokens: Vec<(Vec<u8>, u32)> = made.iter().cloned().zip(0..).collect();
        let fallback = Fallback::Bytes(Box::new(std::array::from_fn(|b| 1000 + b as u32)));
        Vocab::new_chars(tokens, Merges::List(MergeList::new(list)), fallback).unwrap()
    }

    proptest! {
        /// SentencePiece-style lists over characters of 1 to 3 bytes, priorities in any order and
        /// often equal: whenever the list is taken for ranks, both encode every text alike (texts
        /// with a character that is no token too).
        #[test]
        fn ranks_by_priority_and_list_agree(
            picks in prop::collection::vec((0usize..64, 0usize..64, 0u32..6), 1..40),
            texts in prop::collection::vec(
                prop::collection::vec(prop::sample::select(vec!["a", "b", "é", "▁", "z"]), 1..40).prop_map(|c| c.concat()),
                1..20,
            ),
        ) {
            let units = ["a", "b", "é", "▁"];
            let expected: Vec<Vec<u32>> = texts.iter().map(|t| encode(&complete_list(&units, &picks), t.as_bytes())).collect();
            let ranks = list_as_ranks(complete_list(&units, &picks));
            if matches!(ranks.merges, Merges::Ranks) {
                for (t, e) in texts.iter().zip(&expected) {
                    prop_assert_eq!(&encode(&ranks, t.as_bytes()), e, "text {:?}", t);
                }
            }
        }

        /// Random merge lists (each merge joins two existing tokens; the ids it makes in list
        /// order or shuffled): whenever the list is taken for a rank table, both encode every
        /// text alike.
        #[test]
        fn ranks_and_list_agree(
            picks in prop::collection::vec((0usize..64, 0usize..64), 1..40),
            texts in prop::collection::vec(prop::collection::vec(prop::sample::select(b"abcd".to_vec()), 1..60), 1..20),
            shuffled in any::<bool>(),
        ) {
            let mut made: Vec<Vec<u8>> = b"abcd".iter().map(|&b| vec![b]).collect();
            let mut merges = Vec::new();
            for (l, r) in picks {
                let (l, r) = (made[l % made.len()].clone(), made[r % made.len()].clone());
                let t = [l.as_slice(), r.as_slice()].concat();
                if !made.contains(&t) {
                    made.push(t);
                    merges.push((l, r));
                }
            }
            let refs: Vec<(&[u8], &[u8])> = merges.iter().map(|(l, r)| (l.as_slice(), r.as_slice())).collect();
            let mut order: Vec<u32> = (0..refs.len() as u32).collect();
            if shuffled {
                order.reverse();
                order.rotate_left(texts.len() % refs.len());
            }
            let list = list_vocab(&refs, &order);
            let expected: Vec<Vec<u32>> = texts.iter().map(|t| encode(&list, t)).collect();
            let ranks = list_as_ranks(list_vocab(&refs, &order));
            if matches!(ranks.merges, Merges::Ranks) {
                for (t, e) in texts.iter().zip(&expected) {
                    prop_assert_eq!(&encode(&ranks, t), e, "text {:?}", String::from_utf8_lossy(t));
                }
            }
        }
    }
}
