//! Writer → reader round trips on random corpora, and the reader on random bytes.

use std::path::Path;

use proptest::prelude::*;
use tokshuf_core::indexed::{IndexedDataset, IndexedDatasetWriter, Mapping, Validate, WriteSummary};
use tokshuf_core::DType;

/// Writes `docs`, each a list of sequences, as the dataset at `prefix`.
fn write<D: AsRef<[S]>, S: AsRef<[u32]>>(prefix: &Path, dtype: DType, docs: &[D]) -> WriteSummary {
    let mut w = IndexedDatasetWriter::create(prefix, dtype, false).unwrap();
    for doc in docs {
        for seq in doc.as_ref() {
            w.add_sequence(seq.as_ref()).unwrap();
        }
        w.end_document().unwrap();
    }
    w.finish().unwrap()
}

fn corpus() -> impl Strategy<Value = (DType, Vec<Vec<Vec<u32>>>)> {
    let dtype = prop::sample::select(DType::ALL.to_vec());
    let docs = prop::collection::vec(prop::collection::vec(prop::collection::vec(0u32..=127, 0..20), 0..4), 0..12);
    (dtype, docs)
}

proptest! {
    #[test]
    fn round_trip((dtype, docs) in corpus()) {
        let dir = tempfile::tempdir().unwrap();
        let prefix = dir.path().join("ds");
        let summary = write(&prefix, dtype, &docs);
        let seqs: Vec<&Vec<u32>> = docs.iter().flatten().collect();
        prop_assert_eq!(summary.sequences as usize, seqs.len());
        prop_assert_eq!(summary.documents as usize, docs.len());

        let ds = IndexedDataset::open(&prefix, None, Validate::Full).unwrap();
        prop_assert_eq!(ds.dtype(), dtype);
        prop_assert_eq!(ds.len(), seqs.len());
        prop_assert_eq!(ds.num_documents(), docs.len());
        let mut boundary = 0u64;
        for (d, doc) in docs.iter().enumerate() {
            boundary += doc.len() as u64;
            prop_assert_eq!(ds.document_index(d + 1), boundary);
        }
        prop_assert!(ds.is_contiguous());
        for (i, seq) in seqs.iter().enumerate() {
            let mut expected = Vec::new();
            dtype.convert_checked(seq, &mut expected);
            prop_assert_eq!(ds.sequence_bytes(i, 0, None).unwrap(), &expected[..]);
        }
    }

    #[test]
    fn random_index_bytes_never_panic(tail in prop::collection::vec(any::<u8>(), 0..300), bin_len in 0usize..64) {
        let mut idx = b"MMIDIDX\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00".to_vec();
        idx.extend(tail);
        let ds = IndexedDataset::from_mappings(
            "fuzz",
            Mapping::from_bytes(idx),
            Mapping::from_bytes(vec![1u8; bin_len]),
            None,
            Validate::Full,
        );
        if let Ok(ds) = ds {
            for i in 0..ds.len() {
                prop_assert!(ds.sequence_bytes(i, 0, None).is_ok());
            }
        }
    }
}

#[test]
fn merge_is_concatenation() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, docs: &[&[&[u32]]]| write(&dir.path().join(name), DType::U16, docs);
    write("a", &[&[&[1, 2], &[3]], &[]]);
    write("b", &[&[&[4]], &[&[5, 6, 7]]]);
    write("whole", &[&[&[1, 2], &[3]], &[], &[&[4]], &[&[5, 6, 7]]]);
    assert_eq!(tokshuf_core::indexed::list_prefixes(dir.path()).unwrap().len(), 3);
    tokshuf_core::indexed::merge(&[dir.path().join("a"), dir.path().join("b")], &dir.path().join("m"), None).unwrap();
    for ext in ["bin", "idx"] {
        let merged = std::fs::read(dir.path().join(format!("m.{ext}"))).unwrap();
        let whole = std::fs::read(dir.path().join(format!("whole.{ext}"))).unwrap();
        assert_eq!(merged, whole, "{ext}");
    }
}

/// Enough sequences that every `.idx` array goes through the writer's spill files several times.
#[test]
fn an_index_larger_than_memory_chunks_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("big");
    let (docs, item) = (1_600_000u64, 2u64);
    let seq_len = |s: u64| (s * 7 % 5) as usize;
    let mut w = IndexedDatasetWriter::create(&prefix, DType::U16, true).unwrap();
    let mut s = 0u64;
    for d in 0..docs {
        // Documents of 0, 1 or 2 sequences.
        for _ in 0..d % 3 {
            w.add_sequence_with_mode(&vec![(s % 1000) as u32; seq_len(s)], Some((s % 3) as i8)).unwrap();
            s += 1;
        }
        w.end_document().unwrap();
    }
    let summary = w.finish().unwrap();
    assert_eq!((summary.documents, summary.sequences), (docs, s));
    assert_eq!(summary.tokens, (0..s).map(|s| seq_len(s) as u64).sum::<u64>());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2, "only the .bin and the .idx remain");
    let ds = IndexedDataset::open(&prefix, Some(true), Validate::Full).unwrap();
    assert_eq!(summary.idx_bytes, std::fs::metadata(ds.idx_path()).unwrap().len());
    assert_eq!((ds.len() as u64, ds.num_documents() as u64), (s, docs));
    let (mut pointer, mut boundary) = (0u64, 0u64);
    for i in 0..s {
        assert_eq!(ds.sequence_length(i as usize) as usize, seq_len(i), "length {i}");
        assert_eq!(ds.sequence_pointer(i as usize), pointer, "pointer {i}");
        assert_eq!(ds.sequence_mode(i as usize), Some((i % 3) as i8), "mode {i}");
        pointer += seq_len(i) as u64 * item;
    }
    for d in 0..docs {
        boundary += d % 3;
        assert_eq!(ds.document_index(d as usize + 1), boundary, "document {d}");
    }
}

/// After a write fails part-way (here: the output directory vanished, so the first spill of
/// the index arrays cannot create its file) the writer refuses to go on, rather than write an
/// index that misses entries.
#[test]
fn a_failed_write_stops_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("gone");
    let mut w = IndexedDatasetWriter::create(out.join("ds"), DType::U16, false).unwrap();
    // A call refused before it writes anything leaves the writer usable.
    assert!(!w.add_sequence(&[70_000]).unwrap_err().to_string().contains("earlier write"));
    w.add_sequence(&[1]).unwrap();
    std::fs::remove_dir_all(&out).unwrap();
    let failure = (0..1_000_000).find_map(|_| w.add_sequence(&[]).err()).expect("a spill fails");
    assert!(matches!(failure, tokshuf_core::Error::Io { .. }), "{failure}");
    assert!(failure.to_string().contains("gone"), "the error names the directory: {failure}");
    for later in [w.end_document().unwrap_err(), w.add_sequence(&[1]).unwrap_err(), w.finish().unwrap_err()] {
        assert!(later.to_string().contains("earlier write"), "{later}");
    }
}
