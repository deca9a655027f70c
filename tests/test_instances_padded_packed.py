"""Padded and packed (OBFD) datasets against the model: instance contents, lengths, masks,
packing validity, determinism."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from instance_data import BOS, EOS, PAD, bodies, common, files, files_with_documents, write_files
from olmo_model import eos_documents, limit, obfd, olmo_doc_lens, olmo_recorded_doc_lens

from tokshuf import ConfigError
from tokshuf import olmo_tokens as ot
from tokshuf.instances import PackedFSLDataset, PaddedFSLDataset


def global_docs(tokens: list[list[int]]) -> list[tuple[int, int]]:
    out, base = [], 0
    for toks in tokens:
        out += [(base + s, base + e) for s, e in eos_documents(toks, EOS)]
        base += len(toks)
    return out


@given(
    corpus=files_with_documents,
    seq=st.integers(1, 24),
    strategy=st.sampled_from(["truncate", "fragment"]),
)
def test_padded_matches_the_model(
    tmp_path_factory: pytest.TempPathFactory, corpus: list, seq: int, strategy: str
) -> None:
    d = tmp_path_factory.mktemp("pad")
    paths, tokens = write_files(d, corpus)
    flat = np.array([t for f in tokens for t in f], dtype=np.int64)
    ds = PaddedFSLDataset(*paths, sequence_length=seq, long_doc_strategy=strategy, **common(d / "w"))
    spans = limit(global_docs(tokens), seq, strategy)
    assert len(ds) == len(spans)  # one instance per (non-empty) document piece
    b = ds.get_batch(np.arange(len(ds)))
    for i, (s, e) in enumerate(spans):
        n = e - s
        assert b["input_ids"][i].tolist() == flat[s:e].tolist() + [PAD] * (seq - n)
        assert b["label_mask"][i].tolist() == [True] * n + [False] * (seq - n)


@given(
    corpus=files,
    seq=st.integers(1, 40),
    strategy=st.sampled_from(["truncate", "fragment"]),
    group=st.integers(1, 3),
)
def test_packing_is_valid_and_equals_best_fit_decreasing(
    tmp_path_factory: pytest.TempPathFactory, corpus: list, seq: int, strategy: str, group: int
) -> None:
    d = tmp_path_factory.mktemp("pack")
    paths, tokens = write_files(d, corpus)
    flat = np.array([t for f in tokens for t in f], dtype=np.int64)
    ds = PackedFSLDataset(
        *paths,
        sequence_length=seq,
        long_doc_strategy=strategy,
        source_group_size=group,
        generate_doc_lengths=True,
        doc_lens_rule="packing",
        **common(d / "w"),
    )
    # The model, group by group.
    sizes = np.cumsum([0] + [len(t) for t in tokens])
    expect_bins: list[list[int]] = []
    expect_docs: Counter = Counter()
    for g in range(0, len(tokens), group):
        docs = [
            x
            for x in limit(global_docs(tokens), seq, strategy)
            if sizes[g] <= x[0] < sizes[min(g + group, len(tokens))]
        ]
        lengths = sorted((e - s for s, e in docs), reverse=True)
        expect_bins += [[lengths[t] for t in b] for b in obfd([e - s for s, e in docs], seq)]
        expect_docs.update(tuple(flat[s:e]) for s, e in docs)
    assert len(ds) == len(expect_bins)
    b = ds.get_batch(np.arange(len(ds)))
    got_docs: Counter = Counter()
    for i, bins in enumerate(expect_bins):
        spans = ds.instance_documents(i)
        assert [int(e - s) for s, e in spans] == bins  # same bins as OBFD, in the same order
        n = sum(bins)
        assert n <= seq  # no instance over capacity
        content = np.concatenate([flat[s:e] for s, e in spans])
        assert b["input_ids"][i].tolist() == content.tolist() + [PAD] * (seq - n)
        assert b["label_mask"][i].tolist() == [True] * n + [False] * (seq - n)
        lens = bins + ([seq - n] if n < seq else [])
        row = b["doc_lens"][i]
        assert row[: len(lens)].tolist() == lens
        assert not row[len(lens) :].any()
        got_docs.update(tuple(flat[s:e]) for s, e in spans)
    assert got_docs == expect_docs  # every document placed exactly once


def test_packing_is_deterministic_across_threads_and_rebuilds(tmp_path) -> None:
    rng = np.random.default_rng(1)
    corpus = [[rng.integers(2, 40, int(rng.integers(0, 90))).tolist() for _ in range(400)] for _ in range(3)]
    paths, _ = write_files(tmp_path, corpus)
    a = PackedFSLDataset(*paths, sequence_length=64, num_threads=1, **common(tmp_path / "a"))
    b = PackedFSLDataset(*paths, sequence_length=64, num_threads=2, **common(tmp_path / "b"))
    assert a.cache_path != b.cache_path
    for name in ("documents", "instance_offsets", "documents_by_instance"):
        assert np.array_equal(getattr(a, name), getattr(b, name))
    idx = np.arange(len(a))
    assert np.array_equal(a.get_batch(idx)["input_ids"], b.get_batch(idx)["input_ids"])
    fill = 1 - a.get_batch(idx)["label_mask"].mean()
    assert fill < 0.05  # OBFD packs compactly


def test_small_known_packing(tmp_path) -> None:
    # Lengths (with EOS) 3, 8, 5, 1, 4 into 8: [8], [5, 3], [4, 1].
    corpus = [[[2, 3], [4] * 7, [5] * 4, [], [6] * 3]]
    paths, _ = write_files(tmp_path, corpus)
    ds = PackedFSLDataset(*paths, sequence_length=8, generate_doc_lengths=True, **common(tmp_path / "w"))
    assert [[int(e - s) for s, e in ds.instance_documents(i)] for i in range(len(ds))] == [
        [8],
        [5, 3],
        [4, 1],
    ]
    assert ds[2]["input_ids"].tolist() == [6, 6, 6, EOS, EOS, PAD, PAD, PAD]
    assert ds[2]["doc_lens"].tolist() == [4, 1, 3]
    with pytest.raises(ConfigError):
        PackedFSLDataset(*paths, sequence_length=8, source_group_size=0, **common(tmp_path / "w"))


def write(path, tokens: list[int]) -> str:
    from tokshuf import olmo_tokens as ot

    ot.write_tokens(path, [np.array(tokens, dtype=np.int64)], np.uint16)
    return str(path)


def test_packed_doc_lens_follow_olmo_in_issue_33s_examples(tmp_path) -> None:
    # With a BOS, OLMo-core ends documents only at EOS followed by BOS: the padding joins the last.
    p = write(tmp_path / "bos.npy", [2, 5, 6, 1, 2, 7, 1])
    kw = {"sequence_length": 8, "generate_doc_lengths": True, "dtype": np.uint16, "eos_token_id": 1}
    ds = PackedFSLDataset(p, pad_token_id=0, bos_token_id=2, cache_dir=tmp_path / "w", **kw)
    assert ds[0]["input_ids"].tolist() == [2, 5, 6, 1, 2, 7, 1, 0]
    assert ds[0]["doc_lens"].tolist() == [4, 4]
    assert ds.get_batch([0])["max_doc_lens"] == [4]
    # With pad = EOS, each padding token is an EOS and so a one-token document.
    p = write(tmp_path / "pad.npy", [5, 6, 1, 7, 1])
    ds = PackedFSLDataset(p, pad_token_id=1, cache_dir=tmp_path / "w", **kw)
    assert ds[0]["doc_lens"].tolist() == [3, 2, 1, 1, 1]
    # The packing's own lengths, on request.
    ds = PackedFSLDataset(p, pad_token_id=1, doc_lens_rule="packing", cache_dir=tmp_path / "w", **kw)
    assert ds[0]["doc_lens"].tolist() == [3, 2, 3]
    with pytest.raises(ConfigError, match="doc_lens_rule must be 'olmo' or 'packing', got 'eos'"):
        PackedFSLDataset(p, pad_token_id=1, doc_lens_rule="eos", cache_dir=tmp_path / "w", **kw)  # type: ignore[arg-type]


@given(
    corpus=files,
    seq=st.integers(1, 40),
    strategy=st.sampled_from(["truncate", "fragment"]),
    bos=st.sampled_from([None, BOS]),
    pad_is_eos=st.booleans(),
)
def test_packed_doc_lens_equal_olmos_rule_on_every_instance(
    tmp_path_factory: pytest.TempPathFactory,
    corpus: list,
    seq: int,
    strategy: str,
    bos: int | None,
    pad_is_eos: bool,
) -> None:
    d = tmp_path_factory.mktemp("lens")
    if bos is not None:  # documents as OLMo writes them with a BOS: [BOS, *body, EOS]
        corpus = [[[BOS, *body] for body in f] for f in corpus]
    paths, _ = write_files(d, corpus)
    pad = EOS if pad_is_eos else PAD
    ds = PackedFSLDataset(
        *paths,
        sequence_length=seq,
        long_doc_strategy=strategy,
        generate_doc_lengths=True,
        **common(d / "w", bos_token_id=bos, pad_token_id=pad),
    )
    b = ds.get_batch(np.arange(len(ds)))
    for i in range(len(ds)):
        lens = olmo_doc_lens(b["input_ids"][i].tolist(), EOS, bos)
        row = b["doc_lens"][i]
        assert row[: len(lens)].tolist() == lens
        assert not row[len(lens) :].any()
        assert b["max_doc_lens"][i] == max(lens)
        assert ds[i]["doc_lens"].tolist() == lens


def test_padded_refuses_a_file_without_eos(tmp_path) -> None:
    # OLMo-core raises "Failed to produce any documents"; 0 instances would go unnoticed.
    paths, _ = write_files(tmp_path, [[[3, 4]], []], tail=[5, 6, 7, 8])
    with pytest.raises(ConfigError, match=r"part-1.npy: no document .* no eos_token_id 0 among its 4 tokens"):
        PaddedFSLDataset(*paths, sequence_length=8, **common(tmp_path / "w"))
    assert len(PaddedFSLDataset(paths[0], sequence_length=8, **common(tmp_path / "w"))) == 1


def metadata_corpus(d, seed: int, docs: list[tuple[int, bool]], eos: int, bos: int | None) -> str:
    """A token file whose Dolma metadata bounds every document, some of which lack their EOS."""
    rng = np.random.default_rng(seed)
    tokens = []
    for n, has_eos in docs:
        body = rng.integers(10, 900, n).tolist()
        tokens.append(np.array(([bos] if bos is not None else []) + body + ([eos] if has_eos else [])))
    path = d / "part.npy"
    ot.write_tokens(path, tokens, np.uint16, metadata=True)
    return str(path)


#: olmo D1 (../shared/redteam/turn3/olmo/r_packed_metadata_doc_lens*.py): OLMo-core 3.0.0's doc_lens
#: for these corpora, measured with NumpyPackedFSLDataset(..., use_array_if_local=False) (its
#: packing sort made stable). A document without EOS must stay apart from the next one.
DOCS_A = [(5, True), (7, False), (3, True), (20, False), (1, True), (9, True), (4, False)]
DOCS_B = [(5, True), (7, False), (3, True), (20, False), (1, True), (9, True), (2, True), (4, False)]
OLMO_FROM_METADATA = {
    "no_bos": (0, DOCS_A, 0, None, [[16], [10, 6], [7, 4, 4, 1], [2, 14]]),
    "bos": (11, DOCS_B, 0, 3, [[16], [11, 5], [8, 8], [5, 4, 7]]),
    "pad_is_eos": (11, DOCS_B, 2, None, [[16], [10, 6], [7, 4, 4, 1], [3, 2] + [1] * 11]),
}


@pytest.mark.parametrize("case", sorted(OLMO_FROM_METADATA))
@pytest.mark.parametrize("boundaries", ["metadata", "auto"])
def test_packed_doc_lens_from_metadata_equal_olmo_cores(tmp_path, case: str, boundaries: str) -> None:
    seed, docs, pad, bos, expected = OLMO_FROM_METADATA[case]
    path = metadata_corpus(tmp_path, seed, docs, 2, bos)
    kw = {"eos_token_id": 2, "pad_token_id": pad, "bos_token_id": bos, "vocab_size": 1000}
    ds = PackedFSLDataset(
        path,
        sequence_length=16,
        generate_doc_lengths=True,
        document_boundaries=boundaries,
        cache_dir=tmp_path,
        **kw,
    )
    assert [ds[i]["doc_lens"].tolist() for i in range(len(ds))] == expected
    b = ds.get_batch(np.arange(len(ds)))
    assert b["max_doc_lens"] == [max(x) for x in expected]
    # From an EOS scan, the row is scanned again, as OLMo-core does on its default path.
    scanned = PackedFSLDataset(
        path,
        sequence_length=16,
        generate_doc_lengths=True,
        document_boundaries="eos",
        cache_dir=tmp_path,
        **kw,
    )
    for i in range(len(scanned)):
        assert scanned[i]["doc_lens"].tolist() == olmo_doc_lens(scanned[i]["input_ids"].tolist(), 2, bos)


@given(
    corpus=st.lists(
        st.lists(st.tuples(bodies, st.booleans()), min_size=1, max_size=10), min_size=1, max_size=3
    ),
    seq=st.integers(1, 40),
    strategy=st.sampled_from(["truncate", "fragment"]),
    bos=st.sampled_from([None, BOS]),
    pad_is_eos=st.booleans(),
    group=st.integers(1, 2),
)
def test_packed_doc_lens_from_metadata_follow_olmos_rule(
    tmp_path_factory: pytest.TempPathFactory,
    corpus: list,
    seq: int,
    strategy: str,
    bos: int | None,
    pad_is_eos: bool,
    group: int,
) -> None:
    d = tmp_path_factory.mktemp("meta")
    paths = []
    for f, docs in enumerate(corpus):  # (body, has EOS) per document, bounded by the metadata
        tokens = [
            np.array([*([bos] if bos is not None else []), *body, *([EOS] if e else [])]) for body, e in docs
        ]
        tokens = [t for t in tokens if t.size]
        paths.append(d / f"part-{f}.npy")
        ot.write_tokens(paths[-1], tokens or [np.array([EOS])], np.uint16, metadata=True)
    pad = EOS if pad_is_eos else PAD
    ds = PackedFSLDataset(
        *paths,
        sequence_length=seq,
        long_doc_strategy=strategy,
        source_group_size=group,
        generate_doc_lengths=True,
        **common(d / "w", bos_token_id=bos, pad_token_id=pad, document_boundaries="metadata"),
    )
    b = ds.get_batch(np.arange(len(ds)))
    for i in range(len(ds)):
        packed = [int(e - s) for s, e in ds.instance_documents(i)]
        lens = olmo_recorded_doc_lens(b["input_ids"][i].tolist(), packed, EOS, bos)
        assert ds[i]["doc_lens"].tolist() == lens
        assert sum(lens) == seq
