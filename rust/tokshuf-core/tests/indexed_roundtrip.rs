//! Writer → reader round trips on random corpora, and the reader on random bytes.

use proptest::prelude::*;
use tokshuf_core::indexed::{IndexedDataset, IndexedDatasetWriter, Mapping, Validate};
use tokshuf_core::DType;

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
        let mut w = IndexedDatasetWriter::create(&prefix, dtype, false).unwrap();
        for doc in &docs {
            for seq in doc {
                w.add_sequence(seq).unwrap();
            }
            w.end_document();
        }
        let summary = w.finish().unwrap();
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
            dtype.encode_tokens(seq, &mut expected).unwrap();
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
    let write = |name: &str, docs: &[&[&[u32]]]| {
        let mut w = IndexedDatasetWriter::create(dir.path().join(name), DType::U16, false).unwrap();
        for doc in docs {
            for seq in doc.iter() {
                w.add_sequence(seq).unwrap();
            }
            w.end_document();
        }
        w.finish().unwrap();
    };
    write("a", &[&[&[1, 2], &[3]], &[]]);
    write("b", &[&[&[4]], &[&[5, 6, 7]]]);
    write("whole", &[&[&[1, 2], &[3]], &[], &[&[4]], &[&[5, 6, 7]]]);
    let prefixes = tokshuf_core::indexed::list_prefixes(dir.path()).unwrap();
    assert_eq!(prefixes.len(), 3);
    tokshuf_core::indexed::merge(&[dir.path().join("a"), dir.path().join("b")], &dir.path().join("m")).unwrap();
    for ext in ["bin", "idx"] {
        let merged = std::fs::read(dir.path().join(format!("m.{ext}"))).unwrap();
        let whole = std::fs::read(dir.path().join(format!("whole.{ext}"))).unwrap();
        assert_eq!(merged, whole, "{ext}");
    }
}
