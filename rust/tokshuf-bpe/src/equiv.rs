//! When a merge list (a `tokenizer.json`'s, or a SentencePiece model's) can run as a tiktoken rank
//! table.
//!
//! Merging by ranks (two parts merge when their bytes are a token, the lowest priority first) is
//! the fast path: a token is found from the bytes of a substring, so every candidate can be
//! prefetched before merging starts, and the seeded shared table answers it in one load. A merge
//! list needs the ids of both parts, known only as merging goes. The two agree, piece for piece,
//! when:
//!
//! 1. every listed merge makes a token of two or more units (bytes; characters for
//!    SentencePiece-style vocabularies),
//! 2. the pair of parts spelling a token `t`, split after `k` bytes, is given the priority of the
//!    listed merge making `t` from those two, and none if no merge makes `t` (the id itself when
//!    priorities grow with the ids, each id is made at one priority and every token of two units
//!    or more is made; else the priorities are kept, by id, and by `k` for the ids made at
//!    several; equal ones go leftmost first, as in both), and
//! 3. every token a merge makes, merged on its own, comes out as itself.
//!
//! Why: whenever adjacent parts `x`, `y` spell a token `t`, the merges inside their span happened
//! in the order merging `t`'s bytes alone performs them (merges across a span's edge never
//! happened, and inside it the lowest priority goes first in both), so merging `t` alone reaches
//! `[x, y]`; by 3 it then ends at `[t]`, so `(x, y)` is a listed merge making `t`, and both rules
//! see the pair at that merge's priority (by 2). Pairs that spell no token, or one no merge makes
//! (the special tokens of a vocabulary read with `ignore_merges`), merge in neither.
//! GPT-2's and Tekken's `tokenizer.json` and Mistral v1's `.model` and `tokenizer.json` pass; a
//! list that fails keeps merging by pairs.

use super::merge::{encode_piece, MergeScratch};
use super::vocab::{Merges, Priorities, Vocab};

/// `vocab` merging by ranks if that gives the encodings its merge list gives, else unchanged.
pub(crate) fn list_as_ranks(vocab: Vocab) -> Vocab {
    match list_ranks(&vocab) {
        Some(prio) => vocab.into_ranks(prio),
        None => vocab,
    }
}

/// Whether `vocab`'s list runs as ranks: `Some(None)` comparing the ids made, `Some(Some(p))`
/// comparing the list's priorities `p`, `None` not at all.
fn list_ranks(vocab: &Vocab) -> Option<Option<Priorities>> {
    let Merges::List(list) = &vocab.merges else { return None };
    // 1: the merges making each id, as (bytes of the left part, priority).
    let mut made = vec![Vec::new(); vocab.id_bound() as usize];
    for (pair, v) in list.iter() {
        let left = vocab.token((pair >> 32) as u32).len() as u32;
        made.get_mut(v as u32 as usize)?.push((left, (v >> 32) as u32));
    }
    let multi = |id: u32| vocab.units_len(id) >= 2;
    if (0..vocab.id_bound()).any(|id| !multi(id) && !made[id as usize].is_empty()) {
        return None; // a merge making a single unit
    }
    let unmade = (0..vocab.id_bound()).any(|id| multi(id) && made[id as usize].is_empty());
    // 3.
    let mut scratch = MergeScratch::default();
    let mut ids = Vec::new();
    let whole = (0..vocab.id_bound()).filter(|&id| !made[id as usize].is_empty()).all(|id| {
        ids.clear();
        encode_piece(vocab, vocab.short_table(), vocab.token(id), &mut ids, &mut scratch);
        ids == [id]
    });
    if !whole {
        return None;
    }
    // 2.
    let prio = Priorities::new(&made, |id| vocab.token(id).len())?;
    Some((unmade || !prio.follow_ids()).then_some(prio))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::{Fallback, FastMap, MergeList};
    use proptest::prelude::*;

    /// A vocabulary of all bytes (id = byte) and the merges `(left, right)` in priority order,
    /// the `i`-th merge making a new token making id `256 + order[i]` (a merge making a token
    /// made before makes that token's id).
    fn list_vocab(merges: &[(&[u8], &[u8])], order: &[u32]) -> Vocab {
        let mut tokens: Vec<(Vec<u8>, u32)> = (0..=255u8).map(|b| (vec![b], u32::from(b))).collect();
        let mut list = FastMap::default();
        let mut order = order.iter();
        for (i, (l, r)) in merges.iter().enumerate() {
            let id_of = |s: &[u8]| tokens.iter().find(|t| t.0 == s).map(|t| t.1);
            let (li, ri) = (id_of(l).unwrap(), id_of(r).unwrap());
            let t = [*l, *r].concat();
            let made = id_of(&t).unwrap_or_else(|| {
                let id = 256 + order.next().unwrap();
                tokens.push((t, id));
                id
            });
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
        let p = list_ranks(&v).expect("runs as ranks").expect("by its priorities");
        assert_eq!((p.of(256, 1), p.of(257, 1), p.of(b'a'.into(), 1)), (1, 0, u32::MAX));
        assert_eq!(list_ranks(&list_vocab(&[(b"a", b"b"), (b"c", b"d")], &[0, 1])), Some(None));
        let r = list_as_ranks(v);
        assert!(matches!(r.merges, Merges::Ranks) && !r.ranks_are_ids());
        assert_eq!(encode(&r, b"abcd"), [257, 256]);
    }

    #[test]
    fn a_token_made_by_two_merges_merges_at_the_priority_of_the_split() {
        // "abc" is made from "a"+"bc", before "cd", and from "ab"+"c", after it. Merged alone it
        // comes from "ab"+"c" ("ab" goes first), so in "abcd" "cd" goes first: [ab, cd].
        let merges: [(&[u8], &[u8]); 5] = [(b"a", b"b"), (b"b", b"c"), (b"a", b"bc"), (b"c", b"d"), (b"ab", b"c")];
        let v = list_vocab(&merges, &[0, 1, 2, 3]);
        assert_eq!(encode(&v, b"abcd"), [256, 259]);
        let r = list_as_ranks(v);
        assert!(matches!(r.merges, Merges::Ranks) && !r.ranks_are_ids());
        assert_eq!((encode(&r, b"abcd"), encode(&r, b"abc")), (vec![256, 259], vec![258]));
    }

    /// The hint of a token made by splits of different priorities carries them inline when the
    /// token has at most 11 bytes and they lie within 7 of each other, else it points at them;
    /// either way it gives what looking them up gives, at every split.
    #[test]
    fn split_priorities_ride_in_the_hint_when_they_fit() {
        let word = b"abcdefghijkl";
        // Pairs that go first, then every prefix.
        let mut merges: Vec<(Vec<u8>, Vec<u8>)> =
            [b"jk", b"kl", b"ef"].iter().map(|t| (t[..1].to_vec(), t[1..].to_vec())).collect();
        for end in 2..=word.len() {
            merges.push((word[..end - 1].to_vec(), word[end - 1..end].to_vec()));
        }
        let at = |merges: &[(Vec<u8>, Vec<u8>)], t: &[u8]| {
            merges.iter().position(|(l, r)| [l.as_slice(), r.as_slice()].concat() == t).unwrap()
        };
        // A second split, before the last pair, of the prefixes of 12 and 11 bytes just after the
        // first, and of the prefix of 6 bytes 7 merges later.
        for (len, gap) in [(12, 0), (11, 0), (6, 7)] {
            let second = (word[..len - 2].to_vec(), word[len - 2..len].to_vec());
            merges.insert(at(&merges, &word[..len]) + 1 + gap, second);
        }
        let refs: Vec<(&[u8], &[u8])> = merges.iter().map(|(l, r)| (l.as_slice(), r.as_slice())).collect();
        let order: Vec<u32> = (0..merges.len() as u32).collect();
        let list = list_vocab(&refs, &order);
        let id = |t: &[u8]| list.id_of(t).unwrap();
        let (p6, p11, p12) = (id(&word[..6]), id(&word[..11]), id(&word[..12]));
        let ranks = list_as_ranks(list);
        assert!(!ranks.ranks_are_ids(), "priorities by split");
        let inline = |id: u32| ranks.prio_hint(id) >> 32 != 0;
        assert!(inline(p11) && !inline(p12) && !inline(p6), "inline: 11 bytes within 7 only");
        for id in 0..ranks.id_bound() {
            let hint = ranks.prio_hint(id);
            for left in 1..ranks.token(id).len() {
                assert_eq!(ranks.prio_of(id, left, hint), ranks.prio_of(id, left, 0), "id {id} left {left}");
            }
        }
        let p = |left: usize| ranks.prio_of(p11, left, ranks.prio_hint(p11));
        assert_eq!((p(9), p(1)), (p(10) + 1, u32::MAX));
        let texts: Vec<&[u8]> = vec![word, &word[..11], &word[..6], b"abcdefghijkabcdefjk"];
        ranks_agree_with_list(list_vocab(&refs, &order), &texts).unwrap();
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
    /// into two tokens, at its priority; with `split_prio`, each split at a priority of its own
    /// (as the list of a `tokenizer.json` converted from such a model), in an order that depends
    /// on the token and the split.
    fn complete_list(units: &[&str], picks: &[(usize, usize, u32)], split_prio: bool) -> Vocab {
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
                    let p = if split_prio { prio[id] * 64 + ((id * 7 + cut * 5) % 64) as u32 } else { prio[id] };
                    list.insert(u64::from(l) << 32 | u64::from(r), u64::from(p) << 32 | id as u64);
                }
            }
        }
        let tokens: Vec<(Vec<u8>, u32)> = made.iter().cloned().zip(0..).collect();
        let fallback = Fallback::Bytes(Box::new(std::array::from_fn(|b| 1000 + b as u32)));
        Vocab::new_chars(tokens, Merges::List(MergeList::new(list)), fallback).unwrap()
    }

    /// Whenever `list` is taken for ranks, both encode every text of `texts` alike, and the
    /// hint that the shared table keeps beside each id gives the priority that looking it up
    /// does, at every split.
    fn ranks_agree_with_list(list: Vocab, texts: &[impl AsRef<[u8]>]) -> Result<(), TestCaseError> {
        let expected: Vec<Vec<u32>> = texts.iter().map(|t| encode(&list, t.as_ref())).collect();
        let ranks = list_as_ranks(list);
        if matches!(ranks.merges, Merges::Ranks) {
            for id in 0..ranks.id_bound() {
                let hint = ranks.prio_hint(id);
                for left in 1..ranks.token(id).len() {
                    let (hinted, looked_up) = (ranks.prio_of(id, left, hint), ranks.prio_of(id, left, 0));
                    prop_assert_eq!(hinted, looked_up, "id {} left {}", id, left);
                }
            }
            for (t, e) in texts.iter().zip(&expected) {
                prop_assert_eq!(&encode(&ranks, t.as_ref()), e, "text {:?}", String::from_utf8_lossy(t.as_ref()));
            }
        }
        Ok(())
    }

    proptest! {
        /// SentencePiece-style lists over characters of 1 to 3 bytes, priorities in any order and
        /// often equal: whenever the list is taken for ranks, both encode every text alike (texts
        /// with a character that is no token too).
        ///
        /// With `split_prio`, the merges making a token differ in priority, and other tokens'
        /// merges fall between them: both encode alike too.
        #[test]
        fn ranks_by_priority_and_list_agree(
            picks in prop::collection::vec((0usize..64, 0usize..64, 0u32..6), 1..40),
            split_prio in any::<bool>(),
            texts in prop::collection::vec(
                prop::collection::vec(prop::sample::select(vec!["a", "b", "é", "▁", "z"]), 1..40).prop_map(|c| c.concat()),
                1..20,
            ),
        ) {
            ranks_agree_with_list(complete_list(&["a", "b", "é", "▁"], &picks, split_prio), &texts)?;
        }

        /// Random merge lists (each merge joins two existing tokens; the ids it makes in list
        /// order or shuffled; with `again`, a token may be made by several merges, at different
        /// priorities): whenever the list is taken for a rank table, both encode every text
        /// alike.
        #[test]
        fn ranks_and_list_agree(
            picks in prop::collection::vec((0usize..64, 0usize..64), 1..40),
            texts in prop::collection::vec(prop::collection::vec(0usize..64, 1..24), 1..20),
            shuffled in any::<bool>(),
            again in any::<bool>(),
        ) {
            let mut made: Vec<Vec<u8>> = b"abcd".iter().map(|&b| vec![b]).collect();
            let mut merges: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
            for (l, r) in picks {
                let (l, r) = (made[l % made.len()].clone(), made[r % made.len()].clone());
                let t = [l.as_slice(), r.as_slice()].concat();
                if !made.contains(&t) {
                    made.push(t);
                    merges.push((l, r));
                } else if again && t.len() > 2 && !merges.contains(&(l.clone(), r.clone())) {
                    merges.push((l, r));
                }
            }
            let refs: Vec<(&[u8], &[u8])> = merges.iter().map(|(l, r)| (l.as_slice(), r.as_slice())).collect();
            let mut order: Vec<u32> = (0..(made.len() - 4) as u32).collect();
            if shuffled {
                order.reverse();
                let n = order.len();
                order.rotate_left(texts.len() % n);
            }
            // Texts of tokens (single letters among them), so that long merges happen.
            let texts: Vec<Vec<u8>> = texts.iter().map(|t| t.iter().flat_map(|&i| made[i % made.len()].clone()).collect()).collect();
            ranks_agree_with_list(list_vocab(&refs, &order), &texts)?;
        }
    }
}
