//! Property tests of the shuffle's formats: context cutting, local-cell runs, tar members.

use proptest::prelude::*;
use tokshuf_core::shuffle::cells::{parse_records, push_record, Run, RunBuffer};
use tokshuf_core::shuffle::tar::{write_end, write_member, TarReader};
use tokshuf_core::shuffle::{Cutter, SpecialIds};

/// Concatenate `[BOS] + doc + [EOT]`, cut every `seqlen`, pad the rest (written independently).
fn model(docs: &[Vec<u32>], sp: &SpecialIds, seqlen: usize) -> Vec<u32> {
    let mut all: Vec<u32> = Vec::new();
    for d in docs {
        all.extend(sp.bos);
        all.extend(d);
        all.push(sp.eot);
    }
    let rem = all.len() % seqlen;
    if rem > 0 {
        all.extend(std::iter::repeat_n(sp.pad, seqlen - rem));
    }
    all
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn cutting_is_concatenate_and_chunk(
        docs in proptest::collection::vec(proptest::collection::vec(1u32..1000, 0..40), 0..30),
        seqlen in 1usize..25,
        bos in proptest::option::of(1000u32..1010),
    ) {
        let sp = SpecialIds { bos, eot: 0, pad: 7 };
        let mut cutter = Cutter::default();
        let mut out = Vec::new();
        for d in &docs {
            let before = out.len();
            let n = cutter.push_document(d, &sp, seqlen, &mut out);
            prop_assert_eq!(out.len() - before, n as usize * seqlen);
            prop_assert!(cutter.pending.len() < seqlen);
        }
        cutter.finish(&sp, seqlen, false, &mut out);
        prop_assert_eq!(out.len() % seqlen, 0);
        prop_assert_eq!(cutter.next_index as usize, out.len() / seqlen);
        prop_assert_eq!(out, model(&docs, &sp, seqlen));
    }

    #[test]
    fn runs_give_back_every_record_by_cell(
        records in proptest::collection::btree_map(0u64..10_000, (0u32..5, proptest::collection::vec(any::<u8>(), 0..50)), 0..60),
        flip in any::<prop::sample::Index>(),
        block_len in 1usize..4,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.cells");
        // Records handed over in blocks of a few, as stage 1's encoders write them.
        let mut buf = RunBuffer::default();
        let (mut block, mut cells) = (Vec::new(), Vec::new());
        for (&id, (cell, payload)) in records.iter().rev() {
            push_record(&mut block, id, |out| out.extend_from_slice(payload));
            cells.push(*cell);
            if cells.len() == block_len {
                buf.push_records(std::mem::take(&mut block), &std::mem::take(&mut cells));
            }
        }
        buf.push_records(block, &cells);
        let payload: usize = records.values().map(|(_, p)| p.len()).sum();
        prop_assert_eq!(buf.bytes(), payload);
        let mut recycled = 0;
        buf.write(&path, 5, |b| { assert!(b.is_empty()); recycled += 1 }).unwrap();
        prop_assert_eq!(recycled, records.len() / block_len + 1);
        prop_assert!(buf.is_empty());
        let run = Run::open(&path, 5).unwrap();
        for cell in 0..5u32 {
            let mut bytes = Vec::new();
            let n = run.read_cell(cell, &mut bytes).unwrap();
            let got: Vec<(u64, Vec<u8>)> = parse_records(&bytes, n, &path)
                .unwrap()
                .iter()
                .map(|r| (r.id, bytes[r.start..r.start + r.len as usize].to_vec()))
                .collect();
            let want: Vec<(u64, Vec<u8>)> =
                records.iter().filter(|(_, (c, _))| *c == cell).map(|(&id, (_, p))| (id, p.clone())).collect();
            prop_assert_eq!(got, want);
        }
        // Any single damaged byte is caught (checksums, framing), never read back as data.
        let mut damaged = std::fs::read(&path).unwrap();
        let i = flip.index(damaged.len());
        damaged[i] ^= 0x55;
        std::fs::write(&path, &damaged).unwrap();
        let caught = match Run::open(&path, 5) {
            Err(_) => true,
            Ok(run) => (0..5).any(|c| run.read_cell(c, &mut Vec::new()).is_err()),
        };
        prop_assert!(caught, "byte {} of {}", i, damaged.len());
    }

    #[test]
    fn tar_members_round_trip(
        members in proptest::collection::vec(("[a-z0-9_]{1,40}\\.[a-z]{1,8}", proptest::collection::vec(any::<u8>(), 0..1500)), 0..12),
    ) {
        let mut tar = Vec::new();
        for (name, data) in &members {
            write_member(&mut tar, name, data).unwrap();
        }
        write_end(&mut tar).unwrap();
        let mut reader = TarReader::new(&tar[..]);
        for (name, data) in &members {
            let (n, d) = reader.next_member().unwrap().unwrap();
            prop_assert_eq!(&n, name);
            prop_assert_eq!(&d, data);
        }
        prop_assert!(reader.next_member().unwrap().is_none());
    }
}
