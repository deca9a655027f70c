"""OLMo token files: writing, reading, document scans, Dolma metadata, conversion from .bin/.idx."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from olmo_model import eos_documents

from tokshuf import ConfigError, FormatError, IndexedDatasetWriter
from tokshuf import olmo_tokens as ot

DTYPES = [np.uint8, np.uint16, np.uint32, np.uint64]


@pytest.mark.parametrize(
    ("vocab", "dtype"), [(256, np.uint8), (50280, np.uint16), (65536, np.uint16), (100278, np.uint32)]
)
def test_dtype_from_vocab(vocab: int, dtype: type) -> None:
    assert ot.token_dtype(vocab) == np.dtype(dtype)


@given(
    docs=st.lists(st.lists(st.integers(0, 255), max_size=30), max_size=20),
    dtype=st.sampled_from(DTYPES),
)
def test_written_files_are_what_np_memmap_writes(
    tmp_path_factory: pytest.TempPathFactory, docs: list, dtype: type
) -> None:
    d = tmp_path_factory.mktemp("w")
    spans = ot.write_tokens(d / "a.npy", [np.array(x, dtype=np.int64) for x in docs], dtype)
    flat = np.array([t for x in docs for t in x], dtype=dtype)
    assert (d / "a.npy").read_bytes() == flat.tobytes()  # headerless, little-endian
    assert np.array_equal(ot.read_tokens(d / "a.npy", dtype), flat)
    lens = [len(x) for x in docs]
    assert spans.tolist() == [[sum(lens[:i]), sum(lens[: i + 1])] for i in range(len(docs))]
    assert not list(d.glob("*.tmp*"))


def test_np_load_rejects_our_files_like_olmo_files(tmp_path: Path) -> None:
    ot.write_tokens(tmp_path / "a.npy", [np.arange(10)], np.uint16)
    with pytest.raises(ValueError, match=r"pickle|magic|format"):
        np.load(tmp_path / "a.npy")


@given(
    tokens=st.lists(st.integers(0, 5), max_size=300),
    bos=st.sampled_from([None, 0, 3]),
    dtype=st.sampled_from(DTYPES),
)
def test_eos_scan_matches_the_model(
    tmp_path_factory: pytest.TempPathFactory, tokens: list, bos: int | None, dtype: type
) -> None:
    d = tmp_path_factory.mktemp("s")
    ot.write_tokens(d / "a.npy", [np.array(tokens, dtype=np.int64)], dtype)
    got = ot.document_spans(
        d / "a.npy", dtype, eos_token_id=0, bos_token_id=bos, boundaries="eos", num_threads=2
    )
    assert got.dtype == np.uint64
    assert [tuple(x) for x in got.tolist()] == eos_documents(tokens, 0, bos)


def test_scan_of_a_large_file_in_parallel_chunks(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 50, 9_000_000).astype(np.uint32)  # spans several 4 Mi-token chunks
    ot.write_tokens(tmp_path / "a.npy", [tokens], np.uint32)
    got = ot.document_spans(tmp_path / "a.npy", np.uint32, eos_token_id=7, boundaries="eos", num_threads=2)
    ends = np.nonzero(tokens == 7)[0] + 1
    assert np.array_equal(got[:, 1], ends)
    assert np.array_equal(got[1:, 0], ends[:-1])


def test_metadata_round_trip_and_auto_preference(tmp_path: Path) -> None:
    # The second document lost its EOS (a producer truncated it): only the metadata knows.
    docs = [np.array([5, 6, 0]), np.array([7, 8]), np.array([9, 0])]
    spans = ot.write_tokens(tmp_path / "a.npy", docs, np.uint16, metadata=True)
    meta = ot.metadata_path(tmp_path / "a.npy")
    assert meta.name == "a.csv.gz"
    rows = gzip.decompress(meta.read_bytes()).decode().splitlines()
    assert [r.split(",")[:2] for r in rows] == [["0", "3"], ["3", "5"], ["5", "7"]]
    assert np.array_equal(ot.document_spans(tmp_path / "a.npy", np.uint16, 0), spans)  # auto → metadata
    eos = ot.document_spans(tmp_path / "a.npy", np.uint16, 0, boundaries="eos")
    assert eos.tolist() == [[0, 3], [3, 7]]


def test_metadata_out_of_bounds_is_an_error(tmp_path: Path) -> None:
    ot.write_tokens(tmp_path / "a.npy", [np.arange(4)], np.uint16)
    ot.write_metadata(ot.metadata_path(tmp_path / "a.npy"), [[0, 5]])
    with pytest.raises(FormatError, match="4 tokens"):
        ot.document_spans(tmp_path / "a.npy", np.uint16, boundaries="metadata")


def test_truncated_or_mistyped_files_are_errors(tmp_path: Path) -> None:
    (tmp_path / "a.npy").write_bytes(b"\x01\x00\x02")
    with pytest.raises(FormatError, match="not a multiple"):
        ot.document_spans(tmp_path / "a.npy", np.uint16, 0, boundaries="eos")
    np.save(tmp_path / "b.npy", np.arange(8, dtype=np.uint16))
    with pytest.raises(FormatError, match="header"):
        ot.document_spans(tmp_path / "b.npy", np.uint16, 0, boundaries="eos")
    with pytest.raises(FileNotFoundError):
        ot.document_spans(tmp_path / "missing.npy", np.uint16, 0, boundaries="eos")
    with pytest.raises(ConfigError, match="eos_token_id"):
        ot.document_spans(tmp_path / "a.npy", np.uint8)


def test_writer_refuses_ids_the_dtype_cannot_hold(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="70000"):
        ot.write_tokens(tmp_path / "a.npy", [np.array([1, 70000])], np.uint16)
    assert not list(tmp_path.iterdir())


def test_from_indexed(tmp_path: Path) -> None:
    docs = [[5, 6, 0], [7, 8], [], [9]]
    with IndexedDatasetWriter(tmp_path / "ds", np.int32) as w:
        for doc in docs:
            w.add_document(doc, [len(doc)] if doc else [])
    spans = ot.from_indexed(tmp_path / "ds", tmp_path / "ds.npy", append_eos=0)
    tokens = ot.read_tokens(tmp_path / "ds.npy", np.uint32)  # int32 → uint32 by default
    assert tokens.tolist() == [5, 6, 0, 7, 8, 0, 0, 9, 0]
    assert spans.tolist() == [[0, 3], [3, 6], [6, 7], [7, 9]]
    assert np.array_equal(ot.document_spans(tmp_path / "ds.npy", np.uint32, boundaries="metadata"), spans)
    plain = ot.from_indexed(tmp_path / "ds", tmp_path / "plain.npy", dtype=np.uint16, metadata=False)
    assert ot.read_tokens(tmp_path / "plain.npy", np.uint16).tolist() == [5, 6, 0, 7, 8, 9]
    assert plain.tolist() == [[0, 3], [3, 5], [5, 5], [5, 6]]
    assert not ot.metadata_path(tmp_path / "plain.npy").exists()
