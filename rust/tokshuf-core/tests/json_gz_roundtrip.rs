//! Every `.json.gz` member tokshuf's own deflate writes is one gzip member that a standard
//! inflater (flate2) reads back as the compact JSON of its ids, whatever the ids and whatever the
//! encoder wrote before. `cargo fuzz run json_gz_roundtrip` checks the same property at length.

use std::io::Read;

use proptest::prelude::*;
use tokshuf_core::shuffle::json_gz::JsonGz;

// Shared with the fuzz target `json_gz_roundtrip`, which includes the same file.
#[path = "support/json_gz_ops.rs"]
mod json_gz_ops;
use json_gz_ops::ids_from_ops;

/// Inflate one member; nothing may follow it.
fn gunzip(member: &[u8]) -> String {
    let mut d = flate2::read::GzDecoder::new(member);
    let mut s = String::new();
    d.read_to_string(&mut s).expect("a valid gzip member");
    assert!(d.into_inner().is_empty(), "trailing bytes after the member");
    s
}

/// Compress `ids` with `gz`, check the member against the JSON and a fresh encoder's bytes, and
/// return its size.
fn round_trip_with(gz: &mut JsonGz, ids: &[u32]) -> usize {
    let mut member = Vec::new();
    gz.compress(ids, &mut member);
    let text = gunzip(&member);
    assert_eq!(serde_json::from_str::<Vec<u32>>(&text).unwrap(), ids);
    assert!(!text.contains(' '), "compact JSON");
    // Output depends on the ids alone, not on earlier members: the shuffle's bytes must not
    // depend on which thread encoded what.
    let mut fresh = Vec::new();
    JsonGz::default().compress(ids, &mut fresh);
    assert!(member == fresh, "a reused encoder wrote other bytes than a fresh one");
    member.len()
}

fn round_trip(ids: &[u32]) -> usize {
    round_trip_with(&mut JsonGz::default(), ids)
}

/// Distinct ids whose JSON units (`,` and digits) take exactly `bytes` bytes (at least 20): five-
/// digit ids from `first` on and a few four-digit ones, none repeated, so they hold no match.
fn filler(bytes: usize, first: u32) -> Vec<u32> {
    let four = (0..6).find(|b| (bytes - 5 * b).is_multiple_of(6)).expect("6a + 5b covers every size from 20");
    let five = (bytes - 5 * four) / 6;
    (0..five as u32).map(|k| first + k).chain((0..four as u32).map(|k| 1_000 + k)).collect()
}

#[test]
fn filler_has_the_asked_size() {
    for bytes in [20, 21, 25, 32_750, 32_751] {
        let ids = filler(bytes, 10_000);
        let json = serde_json::to_string(&ids).unwrap();
        // `[`, the first id's digits and `]` stand for the first unit's `,`.
        assert_eq!(json.len() - 1, bytes, "{bytes}");
    }
}

#[test]
fn edge_cases_round_trip() {
    round_trip(&[]);
    round_trip(&[0]);
    round_trip(&[u32::MAX]);
    round_trip(&[u32::MAX; 3000]);
    round_trip(&[7; 3]);
    // One long repeat: matches of the longest length, copies that overlap themselves.
    round_trip(&[5; 5000]);
    round_trip(&[1, 2, 1, 2, 1, 2, 1, 2, 1, 2]);
    // Around the ends of the unit table (it grows from 2^16 ids to 2^18) and the digit counts.
    round_trip(&[65_535, 65_536, 131_071, 131_072, 65_535, 65_536, 131_071, 131_072]);
    round_trip(&[262_143, 100_000, 262_143, 9, 99_999, 262_143, 100_000]);
    round_trip(&[262_143, 262_144, 999_999, 1_000_000, 262_143, 262_144, 999_999, 1_000_000]);
    round_trip(&[9, 10, 99, 100, 999_999_999, 1_000_000_000, u32::MAX - 1, u32::MAX, 9, 10, 99, 100]);
    // No repeats at all; a repeat every 97 ids, 8 to 10 digits each.
    round_trip(&(0..2049).collect::<Vec<u32>>());
    round_trip(&(0..20_000).map(|i| i % 97 * 1_000_003).collect::<Vec<u32>>());
}

#[test]
fn matches_around_the_longest_length_and_the_window_round_trip() {
    // A phrase of six-byte units whose repeat is 252 to 264 bytes long (deflate's longest match
    // is 258), at distances around the 32 KiB window.
    for phrase_len in 42..=44 {
        let phrase: Vec<u32> = (0..phrase_len).map(|k| 20_000 + k).collect();
        for distance in [32_760, 32_767, 32_768, 32_769, 32_776] {
            let mut ids = vec![1];
            ids.extend(&phrase);
            ids.extend(filler(distance - 6 * phrase.len(), 40_000));
            ids.extend(&phrase);
            ids.push(2);
            round_trip(&ids);
        }
    }
}

#[test]
fn one_encoder_for_many_members() {
    // Longer and shorter members in turn: the scratch buffers and the match table carry over.
    let mut gz = JsonGz::default();
    let long: Vec<u32> = (0..6000).map(|i| i % 300 * 7).collect();
    for ids in [&long[..], &[], &long[..10], &[3; 600], &long[..], &[u32::MAX, 1 << 20, 4]] {
        round_trip_with(&mut gz, ids);
    }
}

#[test]
fn smaller_than_the_json_on_text_like_ids() {
    // Zipf-ish ids with repeated phrases, as real tokenized text has.
    let mut x = 12345u64;
    let mut ids = Vec::new();
    while ids.len() < 2049 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let r = (x >> 33) as u32;
        if r.is_multiple_of(5) && ids.len() > 20 {
            let start = (r as usize / 7) % (ids.len() - 10);
            let phrase: Vec<u32> = ids[start..start + 6].to_vec();
            ids.extend(phrase);
        } else {
            ids.push(50_000 / (1 + r % 1000));
        }
    }
    ids.truncate(2049);
    let json_len = serde_json::to_string(&ids).unwrap().len();
    let gz = round_trip(&ids);
    assert!(gz * 2 < json_len, "{gz} bytes of gzip for {json_len} of JSON");
}

#[test]
fn long_matches_at_every_distance_round_trip() {
    // A repeated block of `k` distinct ids puts matches at many lengths and distances.
    for k in [2usize, 3, 17, 200, 1500] {
        let block: Vec<u32> = (0..k as u32).map(|i| i * 37 % 50_000).collect();
        let ids: Vec<u32> = block.iter().cycle().take(4 * k + 3).copied().collect();
        round_trip(&ids);
    }
}

proptest! {
    #[test]
    fn any_ids_round_trip(
        ids in proptest::collection::vec(
            prop_oneof![0u32..20, 0u32..70_000, 262_100u32..262_200, any::<u32>(), Just(u32::MAX)],
            0..3000,
        ),
    ) {
        round_trip(&ids);
    }

    #[test]
    fn repetitive_ids_round_trip(
        alphabet in proptest::collection::vec(any::<u32>(), 1..8),
        picks in proptest::collection::vec(any::<u8>(), 0..5000),
    ) {
        let ids: Vec<u32> = picks.iter().map(|&p| alphabet[p as usize % alphabet.len()]).collect();
        round_trip(&ids);
    }

    #[test]
    fn copied_runs_round_trip_through_one_encoder(
        members in proptest::collection::vec(proptest::collection::vec((any::<u8>(), any::<u32>()), 0..60), 1..4),
    ) {
        let mut gz = JsonGz::default();
        for ops in &members {
            round_trip_with(&mut gz, &ids_from_ops(ops));
        }
    }
}
