//! When a Hugging Face merge list can run as a tiktoken rank table.
//!
//! Merging by ranks (two parts merge when their bytes are a token, the lowest id first) is the
//! fast path: a rank is found from the bytes of a substring, so every candidate can be prefetched
//! before merging starts, and the seeded shared table answers it in one load. A merge list
//! needs the ids of both parts, known only as merging goes. The two agree, piece for piece, when:
//!
//! 1. every token of two or more units (bytes; characters for SentencePiece-style
//!    vocabularies) is made by exactly one listed merge,
//! 2. list priority grows with the id made (so comparing ids compares priorities), and
//! 3. every such token, merged on its own, comes out as itself.
//!
//! Why: whenever adjacent parts `x`, `y` spell a token `t`, the merges inside their span happened
//! in the order merging `t`'s bytes alone performs them (merges across a span's edge never
//! happened, and inside it the lowest priority goes first in both), so merging `t` alone reaches
//! `[x, y]`; by 3 it then ends at `[t]`, so `(x, y)` is the one merge making `t` (by 1), and
//! both rules see the pair with the same precedence (by 2). Pairs that spell no token merge in
//! neither. GPT-2's `tokenizer.json` passes; a list that fails keeps merging by pairs.

use super::merge::{encode_piece, MergeScratch};
use super::vocab::{Merges, Vocab};

/// `vocab` merging by ranks if that gives the encodings its merge list gives, else unchanged.
pub(crate) fn list_as_ranks(vocab: Vocab) -> Vocab {
    if list_is_ranks(&vocab) {
        vocab.into_ranks()
    } else {
        vocab
    }
}

fn list_is_ranks(vocab: &Vocab) -> bool {
    let Merges::List(list) = &vocab.merges else { return false };
    // 1 and 2: the priority of the merge making each id, every id made once.
    let mut prio = vec![u32::MAX; vocab.id_bound() as usize];
    for v in list.values() {
        let (p, made) = ((v >> 32) as u32, v as u32);
        match prio.get_mut(made as usize) {
            Some(slot) if *slot == u32::MAX => *slot = p,
            _ => return false,
        }
    }
    let mut last = None;
    for id in 0..vocab.id_bound() {
        let multi = vocab.units_len(id) >= 2;
        let p = prio[id as usize];
        if multi != (p != u32::MAX) {
            return false; // a token no merge makes, or a merge making a single byte
        }
        if multi {
            if last.is_some_and(|l| l >= p) {
                return false;
            }
            last = Some(p);
        }
    }
    // 3.
    let mut scratch = MergeScratch::default();
    let mut ids = Vec::new();
    (0..vocab.id_bound()).filter(|&id| vocab.units_len(id) >= 2).all(|id| {
        ids.clear();
        encode_piece(vocab, vocab.short_table(), vocab.token(id), &mut ids, &mut scratch);
        ids == [id]
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::{FastMap, MergeList};
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
        assert!(!list_is_ranks(&v));
        assert_eq!(encode(&v, b"abc"), vec![u32::from(b'a'), 256]);
    }

    #[test]
    fn priorities_out_of_id_order_stay_a_list() {
        let v = list_vocab(&[(b"a", b"b"), (b"c", b"d")], &[1, 0]);
        assert!(!list_is_ranks(&v));
        assert!(list_is_ranks(&list_vocab(&[(b"a", b"b"), (b"c", b"d")], &[0, 1])));
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
        assert!(list_is_ranks(&v));
    }

    proptest! {
        /// Random merge lists (each merge joins two existing tokens): whenever the list is taken
        /// for a rank table, both encode every text alike.
        #[test]
        fn ranks_and_list_agree(
            picks in prop::collection::vec((0usize..64, 0usize..64), 1..40),
            texts in prop::collection::vec(prop::collection::vec(prop::sample::select(b"abcd".to_vec()), 1..60), 1..20),
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
            let order: Vec<u32> = (0..refs.len() as u32).collect();
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
