"""IndexedDataset reader/writer: golden files, round trips, corruption, the Python boundary."""

from __future__ import annotations

import gc
import pickle
import struct
from pathlib import Path

import numpy as np
import pytest
from conftest import MEGATRON
from hypothesis import given
from hypothesis import strategies as st
from megatron_idx import parse_idx, write_idx_bytes

import tokshuf

FIXTURE_PREFIXES = sorted(p.with_suffix("") for p in (MEGATRON / "data").glob("*.idx"))
DTYPES = ["uint8", "int8", "int16", "int32", "int64", "float32", "float64", "uint16"]


@pytest.mark.parametrize("prefix", FIXTURE_PREFIXES, ids=lambda p: p.name)
def test_reader_matches_hand_parsed_layout(prefix: Path) -> None:
    ref = parse_idx(f"{prefix}.idx")
    ds = tokshuf.IndexedDataset(prefix)
    assert ds.dtype == ref["dtype"]
    for ours, theirs in [
        (ds.sequence_lengths, ref["lengths"]),
        (ds.sequence_pointers, ref["pointers"]),
        (ds.document_indices, ref["document_indices"]),
    ]:
        assert ours.dtype == theirs.dtype
        np.testing.assert_array_equal(ours, theirs)
    assert ds.sequence_modes is None
    tokens = np.fromfile(f"{prefix}.bin", dtype=ref["dtype"])
    for i in [0, 1, len(ds) // 2, len(ds) - 1]:
        start = ref["pointers"][i] // ref["dtype"].itemsize
        np.testing.assert_array_equal(ds[i], tokens[start : start + ref["lengths"][i]])
    np.testing.assert_array_equal(ds.get(3, offset=2, length=4), ds[3][2:6])


@st.composite
def corpora(draw: st.DrawFn) -> tuple[str, list[list[list[int]]], bool]:
    dtype = draw(st.sampled_from(DTYPES))
    hi = 127 if dtype == "int8" else 255
    seq = st.lists(st.integers(0, hi), max_size=20)
    docs = draw(st.lists(st.lists(seq, max_size=4), max_size=12))
    return dtype, docs, draw(st.booleans())


@given(corpora())
def test_round_trip_random_corpora(tmp_path_factory: pytest.TempPathFactory, corpus: tuple) -> None:
    dtype, docs, multimodal = corpus
    prefix = tmp_path_factory.mktemp("rt") / "ds"
    with tokshuf.IndexedDatasetWriter(prefix, dtype, multimodal=multimodal) as w:
        for d, doc in enumerate(docs):
            for s in doc:
                w.add_sequence(np.asarray(s, dtype=dtype), mode=(d % 3) if multimodal else None)
            w.end_document()
    seqs = [s for doc in docs for s in doc]
    boundaries = np.cumsum([0] + [len(doc) for doc in docs])
    # Independently-built expected .idx (Megatron's layout).
    expected = write_idx_bytes(np.dtype(dtype), [len(s) for s in seqs], boundaries.tolist())
    if multimodal and seqs:
        expected += bytes((d % 3) for d, doc in enumerate(docs) for _ in doc)
    assert Path(f"{prefix}.idx").read_bytes() == expected
    ds = tokshuf.IndexedDataset(prefix, multimodal=multimodal or None)
    assert len(ds) == len(seqs)
    assert ds.num_documents == len(docs)
    np.testing.assert_array_equal(ds.document_indices, boundaries)
    for i, s in enumerate(seqs):
        assert ds[i].dtype == np.dtype(dtype)
        np.testing.assert_array_equal(ds[i], np.asarray(s, dtype=dtype))
    if multimodal and seqs:
        assert ds.sequence_modes is not None
        assert list(ds.sequence_modes) == [d % 3 for d, doc in enumerate(docs) for _ in doc]


def test_empty_documents_repeat_the_boundary(tmp_path: Path) -> None:
    with tokshuf.IndexedDatasetWriter(tmp_path / "e", "uint16") as w:
        w.end_document()
        w.add_document([1, 2, 3], [2, 1])
        w.end_document()
    ds = tokshuf.IndexedDataset(tmp_path / "e")
    assert ds.document_indices.tolist() == [0, 0, 2, 2]
    assert ds.sequence_lengths.tolist() == [2, 1]


def test_empty_dataset(tmp_path: Path) -> None:
    with tokshuf.IndexedDatasetWriter(tmp_path / "z", "int32"):
        pass
    ds = tokshuf.IndexedDataset(tmp_path / "z")
    assert len(ds) == 0
    assert ds.num_documents == 0
    assert (tmp_path / "z.bin").stat().st_size == 0


def test_out_of_range_ids_are_refused(tmp_path: Path) -> None:
    w = tokshuf.IndexedDatasetWriter(tmp_path / "o", "uint16")
    with pytest.raises(tokshuf.ConfigError, match="70000"):
        w.add_sequence([1, 70000])
    w.abort()
    assert list(tmp_path.iterdir()) == []


def test_views_are_zero_copy_and_keep_the_mapping_alive() -> None:
    ds = tokshuf.IndexedDataset(MEGATRON / "data" / "byte_text_document")
    tokens = ds[5]
    assert not tokens.flags.writeable
    assert not tokens.flags.owndata
    lengths = ds.sequence_lengths
    del ds
    gc.collect()
    assert int(tokens[0]) > 0  # still mapped
    assert lengths.shape == (989,)


def test_pickles_by_path() -> None:
    ds = tokshuf.IndexedDataset(MEGATRON / "data" / "byte_sents_document")
    blob = pickle.dumps(ds)
    assert len(blob) < 500  # the path, not the data
    again = pickle.loads(blob)
    np.testing.assert_array_equal(again[100], ds[100])


def test_get_bounds_are_checked() -> None:
    ds = tokshuf.IndexedDataset(MEGATRON / "data" / "byte_text_document")
    n = int(ds.sequence_lengths[0])
    with pytest.raises(IndexError):
        ds.get(0, offset=n - 1, length=2)
    with pytest.raises(IndexError):
        ds[len(ds)]
    np.testing.assert_array_equal(ds[-1], ds[len(ds) - 1])
    assert [len(x) for x in ds[0:3]] == ds.sequence_lengths[:3].tolist()


def test_failed_writer_leaves_nothing(tmp_path: Path) -> None:
    class Boom(Exception):
        pass

    def write_then_fail() -> None:
        with tokshuf.IndexedDatasetWriter(tmp_path / "x", "uint16") as w:
            w.add_sequence([1, 2])
            raise Boom

    with pytest.raises(Boom):
        write_then_fail()
    assert list(tmp_path.iterdir()) == []


# -- corruption: each fault raises FormatError naming the file and the fault -----------------


@pytest.fixture
def good(tmp_path: Path) -> Path:
    src = MEGATRON / "data" / "byte_text_document"
    dst = tmp_path / "c"
    for ext in (".bin", ".idx"):
        Path(f"{dst}{ext}").write_bytes(Path(f"{src}{ext}").read_bytes())
    return dst


def patch(path: Path, at: int, data: bytes) -> None:
    b = bytearray(path.read_bytes())
    b[at : at + len(data)] = data
    path.write_bytes(bytes(b))


def expect_format_error(prefix: Path, pattern: str) -> None:
    with pytest.raises(tokshuf.FormatError, match=pattern) as info:
        tokshuf.IndexedDataset(prefix)
    assert prefix.name in str(info.value)


def test_truncated_header(good: Path) -> None:
    idx = Path(f"{good}.idx")
    idx.write_bytes(idx.read_bytes()[:20])
    expect_format_error(good, "truncated index")


def test_truncated_arrays(good: Path) -> None:
    idx = Path(f"{good}.idx")
    idx.write_bytes(idx.read_bytes()[:-9])
    expect_format_error(good, "truncated index")


def test_wrong_magic(good: Path) -> None:
    patch(Path(f"{good}.idx"), 0, b"TNTIDX\x00\x00\x00")
    expect_format_error(good, "not a Megatron MMIDIDX index")


def test_unknown_version(good: Path) -> None:
    patch(Path(f"{good}.idx"), 9, struct.pack("<Q", 2))
    expect_format_error(good, "unsupported index version 2")


@pytest.mark.parametrize("code", [0, 9, 255])
def test_unknown_dtype_code(good: Path, code: int) -> None:
    patch(Path(f"{good}.idx"), 17, bytes([code]))
    expect_format_error(good, f"unknown dtype code {code}")


def test_bin_shorter_than_index(good: Path) -> None:
    b = Path(f"{good}.bin")
    b.write_bytes(b.read_bytes()[:-2])
    with pytest.raises(
        tokshuf.FormatError, match=r"the \.bin has \d+ bytes but its index .* describes"
    ) as info:
        tokshuf.IndexedDataset(good)
    assert "c.bin" in str(info.value)


def pointer_at(good: Path, i: int) -> int:
    return 34 + 4 * len(parse_idx(f"{good}.idx")["lengths"]) + 8 * i


# Well-formed indexes that describe other data than the .bin holds: each must be refused.
WRONG_BUT_WELL_FORMED = {
    # uint16 read as uint8: every size halves.
    "dtype_code_8_to_1": lambda good: patch(Path(f"{good}.idx"), 17, bytes([1])),
    "one_length_plus_1000": lambda good: patch(
        Path(f"{good}.idx"), 34 + 4 * 3, struct.pack("<i", int(parse_idx(f"{good}.idx")["lengths"][3]) + 1000)
    ),
    "odd_pointer": lambda good: patch(
        Path(f"{good}.idx"),
        pointer_at(good, 5),
        struct.pack("<q", int(parse_idx(f"{good}.idx")["pointers"][5]) + 1),
    ),
    "bin_of_another_run": lambda good: Path(f"{good}.bin").write_bytes(
        Path(f"{good}.bin").read_bytes() + b"\0" * 64
    ),
}


@pytest.mark.parametrize("fault", WRONG_BUT_WELL_FORMED)
def test_validation_refuses_an_index_that_does_not_describe_the_bin(good: Path, fault: str) -> None:
    assert tokshuf.IndexedDataset(good).dtype == np.uint16
    WRONG_BUT_WELL_FORMED[fault](good)
    with pytest.raises(tokshuf.FormatError) as info:
        tokshuf.IndexedDataset(good)
    assert "c.idx" in str(info.value) or "c.bin" in str(info.value)


def test_a_bin_beside_another_runs_idx_is_refused_without_full_validation(tmp_path: Path) -> None:
    # What a crash between the two renames of a pair could leave, were they done in the wrong order.
    for name, n in (("old", 10), ("new", 14)):
        with tokshuf.IndexedDatasetWriter(tmp_path / name, np.uint16) as w:
            for k in range(n):
                w.add_document(np.arange(k + 1), [k + 1])
    Path(tmp_path / "old.bin").write_bytes(Path(tmp_path / "new.bin").read_bytes())
    # The pair's commit record catches it first, naming both files.
    with pytest.raises(
        tokshuf.FormatError, match=r"old\.bin: does not match the commit record .*old\.commit\.json"
    ):
        tokshuf.IndexedDataset(tmp_path / "old")
    # Without a record (Megatron's pairs), the index itself does.
    (tmp_path / "old.commit.json").unlink()
    for validate in (True, False):
        with pytest.raises(tokshuf.FormatError, match="do not belong together"):
            tokshuf.IndexedDataset(tmp_path / "old", validate=validate)


def test_reads_outside_the_bin_raise_without_full_validation(good: Path) -> None:
    ref = parse_idx(f"{good}.idx")
    size = Path(f"{good}.bin").stat().st_size
    # Sequence 2 points past the end (the last one still ends at the .bin's end: O(1) check passes).
    patch(Path(f"{good}.idx"), pointer_at(good, 2), struct.pack("<q", size - 2))
    ds = tokshuf.IndexedDataset(good, validate=False)
    assert int(ref["lengths"][2]) > 1
    for read in (lambda d: d[2], lambda d: d.get(2, offset=1), lambda d: pickle.loads(pickle.dumps(d))[2]):
        with pytest.raises(tokshuf.FormatError, match="lies outside"):
            read(ds)
    patch(Path(f"{good}.idx"), pointer_at(good, 2), struct.pack("<q", -4))
    with pytest.raises(tokshuf.FormatError, match="lies outside"):
        tokshuf.IndexedDataset(good, validate=False)[2]
    with pytest.raises(tokshuf.FormatError, match="running sum"):
        tokshuf.IndexedDataset(good)


def test_non_monotonic_document_indices(good: Path) -> None:
    ref = parse_idx(f"{good}.idx")
    s = len(ref["lengths"])
    at = 34 + 12 * s + 8 * 500
    patch(Path(f"{good}.idx"), at, struct.pack("<q", 10**6))
    expect_format_error(good, "not non-decreasing")


def test_last_document_index_must_match_sequences(good: Path) -> None:
    ref = parse_idx(f"{good}.idx")
    s, d = len(ref["lengths"]), len(ref["document_indices"])
    patch(Path(f"{good}.idx"), 34 + 12 * s + 8 * (d - 1), struct.pack("<q", s - 1))
    expect_format_error(good, r"document_indices\[-1\]")


def test_trailing_garbage(good: Path) -> None:
    with open(f"{good}.idx", "ab") as f:
        f.write(b"\x00" * 3)
    expect_format_error(good, "does not match its header")


def test_negative_length(good: Path) -> None:
    patch(Path(f"{good}.idx"), 34, struct.pack("<i", -5))
    expect_format_error(good, "negative")


def test_missing_files_are_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as info:
        tokshuf.IndexedDataset(tmp_path / "nothing")
    assert info.value.filename == f"{tmp_path / 'nothing'}.idx"


@given(st.binary(max_size=200), st.integers(0, 64))
def test_random_bytes_never_crash(
    tmp_path_factory: pytest.TempPathFactory, blob: bytes, bin_len: int
) -> None:
    d = tmp_path_factory.mktemp("fuzz")
    header = b"MMIDIDX\x00\x00" + struct.pack("<Q", 1)
    Path(d / "f.idx").write_bytes(header + blob)
    Path(d / "f.bin").write_bytes(b"\x01" * bin_len)
    try:
        ds = tokshuf.IndexedDataset(d / "f")
    except tokshuf.FormatError:
        return
    for i in range(len(ds)):
        ds[i]


@pytest.mark.parametrize("prefix", FIXTURE_PREFIXES, ids=lambda p: p.name)
def test_write_index_reproduces_fixture_idx(tmp_path: Path, prefix: Path) -> None:
    ref = parse_idx(f"{prefix}.idx")
    size = tokshuf.indexed.write_index(tmp_path / "x", ref["dtype"], ref["lengths"], ref["document_indices"])
    assert (tmp_path / "x.idx").read_bytes() == Path(f"{prefix}.idx").read_bytes()
    assert size == (tmp_path / "x.idx").stat().st_size


def test_write_index_rejects_inconsistent_arrays(tmp_path: Path) -> None:
    with pytest.raises(tokshuf.ConfigError, match="end at the number of sequences"):
        tokshuf.indexed.write_index(tmp_path / "x", "uint16", [1, 2], [0, 1])
    with pytest.raises(tokshuf.ConfigError, match="decrease"):
        tokshuf.indexed.write_index(tmp_path / "x", "uint16", [1, 2], [0, 2, 1, 2])
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_remote_read_mode_names_the_choices(tmp_path: Path) -> None:
    with pytest.raises(tokshuf.ConfigError, match=r"remote must be one of \['ranges', 'copy'\], got 'fetch'"):
        tokshuf.IndexedDataset(tmp_path / "x", remote="fetch")  # type: ignore[arg-type]
    with pytest.raises(tokshuf.ConfigError, match="remote must be one of"):
        tokshuf.NanosetConfig(str(tmp_path / "x"), sequence_length=8, remote="fetch")  # type: ignore[arg-type]
