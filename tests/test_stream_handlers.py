"""File handlers (spec §16.13): every built-in format and a user handler, through the handler
protocol and through the loader; Bamba's documented config through the real constructor (B2)."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from stream_helpers import EOS, FIRST_ID, epoch_tokens, read_epoch, write_corpus

from tokshuf.errors import ConfigError, FormatError
from tokshuf.stream import (
    ArrowHandler,
    ByteTokenizer,
    IndexedHandler,
    LoaderConfig,
    NpyHandler,
    ParquetHandler,
    SubDataset,
    TarHandler,
    TokenStream,
    build_dataloader,
    resolve_tokenizer,
)

pa = pytest.importorskip("pyarrow")

DOCS = [[EOS, 11, 12, EOS], [], [13], [14, EOS, 15, 16], [EOS]]  # edge cases at both ends


def write_arrow(path: Path, docs: list[list[int]], col: str = "tokens") -> Path:
    schema = pa.schema([pa.field(col, pa.uint32())])
    with pa.ipc.new_file(str(path), schema) as w:  # Bamba's recipe: one record batch per document
        for d in docs:
            w.write(pa.record_batch([pa.array(d, type=pa.uint32())], schema=schema))
    return path


def write_parquet(path: Path, texts: list[Any], group: int = 2) -> Path:
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": texts}), str(path), row_group_size=group)
    return path


def write_tar(path: Path, docs: list[list[int]], npy: bool = False) -> Path:
    with tarfile.open(path, "w") as tf:
        for i, d in enumerate(docs):
            if npy:
                buf = io.BytesIO()
                np.save(buf, np.asarray(d, dtype=np.uint32))
                data, name = buf.getvalue(), f"{i:08d}.npy"
            else:
                data, name = gzip.compress(json.dumps(d).encode()), f"{i:08d}.json.gz"
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def write_npy(path: Path, docs: list[list[int]], eos: int = 0) -> Path:
    flat = [t for d in docs for t in [*d, eos]]
    np.asarray(flat, dtype=np.uint16).tofile(path)
    return path


def all_docs(handler: Any, path: Path) -> list[list[int]]:
    r = handler.open(str(path))
    out = []
    for i in range(handler.length(str(path))):
        doc = handler.get(r, i, frozenset())
        out.append([int(t) for t in handler.slice(doc, 0, len(doc))])
    return out


@pytest.fixture(params=["arrow", "tar_json", "tar_npy"])
def token_file(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Any, Path]:
    if request.param == "arrow":
        return ArrowHandler("tokens"), write_arrow(tmp_path / "a.arrow", DOCS)
    return TarHandler(), write_tar(tmp_path / "a.tar", DOCS, npy=request.param == "tar_npy")


def test_token_handlers_length_get_slice(token_file: tuple[Any, Path]) -> None:
    h, path = token_file
    assert h.is_legal(str(path))
    assert h.length(str(path)) == len(DOCS)
    assert all_docs(h, path) == DOCS
    r = h.open(str(path))
    # get() drops only the first and the last token, and only if they are in the drop set.
    assert list(h.get(r, 0, frozenset({EOS}))) == [11, 12]
    assert list(h.get(r, 3, frozenset({EOS}))) == [14, EOS, 15, 16]
    assert list(h.get(r, 4, frozenset({EOS}))) == []
    doc = h.get(r, 3, frozenset())
    assert list(h.slice(doc, 0, 1)) == [14]
    assert list(h.slice(doc, 3, 1)) == [16]
    assert list(h.slice(doc, 4, 3)) == []


def test_empty_files(tmp_path: Path) -> None:
    assert ArrowHandler().length(str(write_arrow(tmp_path / "e.arrow", []))) == 0
    assert TarHandler().length(str(write_tar(tmp_path / "e.tar", []))) == 0
    (tmp_path / "e.npy").write_bytes(b"")
    assert NpyHandler("uint16").length(str(tmp_path / "e.npy")) == 0


def test_npy_handler_splits_at_eos(tmp_path: Path) -> None:
    docs = [[5, 6], [], [7]]
    path = write_npy(tmp_path / "t.npy", docs)
    h = NpyHandler("uint16", eos_token_id=0)
    assert all_docs(h, path) == docs
    with open(path, "ab") as f:
        f.write(b"\x01")
    with pytest.raises(FormatError, match="multiple"):
        h.length(str(path))


def test_parquet_tokenizes_text_on_the_fly(tmp_path: Path) -> None:
    texts = ["hello", "", None, "héllo wörld", "x" * 50]
    path = write_parquet(tmp_path / "t.parquet", texts)
    h = ParquetHandler(tokenizer="byte", col_name="text", max_doclen=20)
    assert h.length(str(path)) == 5
    want = [list(ByteTokenizer().encode((t or "")[:20])) for t in texts]
    assert all_docs(h, path) == want
    with pytest.raises(FormatError, match="no column"):
        ParquetHandler(col_name="body").open(str(path))


def test_tokenizer_resolution() -> None:
    assert list(resolve_tokenizer("byte").encode("ab")) == [98, 99]
    custom = ByteTokenizer()
    assert resolve_tokenizer(custom) is custom
    with pytest.raises(ConfigError):
        resolve_tokenizer(object())


def _corpus_docs(start: int, sizes: list[int]) -> list[list[int]]:
    out, nxt = [], start
    for n in sizes:
        out.append(list(range(nxt, nxt + n)))
        nxt += n
    return out


def _stream(sub: SubDataset, **kw: Any) -> TokenStream:
    return TokenStream(
        [sub], sequence_length=6, logical_shards=3, chunk_size=4, eos_token_id=EOS, provenance=True, **kw
    )


@pytest.mark.parametrize("fmt", ["bin", "arrow", "parquet", "tar", "npy"])
def test_every_format_streams_every_token_once(fmt: str, tmp_path: Path) -> None:
    docs = _corpus_docs(FIRST_ID, [3, 0, 7, 1, 5, 9, 2])
    files = [docs[:3], [], docs[3:]]
    d = tmp_path / fmt
    d.mkdir()
    if fmt == "bin":
        write_corpus(tmp_path / "w", [files])
        d = tmp_path / "w" / "sub0"
    for i, part in enumerate(files):
        if fmt == "arrow":
            write_arrow(d / f"{i}.arrow", part)
        elif fmt == "tar":
            write_tar(d / f"{i}.tar", part)
        elif fmt == "npy":
            write_npy(d / f"{i}.npy", part, eos=EOS)
        elif fmt == "parquet":
            # Text documents: ids are the byte tokenizer's, so compare by decoded text instead.
            write_parquet(d / f"{i}.parquet", ["".join(chr(65 + t % 26) for t in doc) for doc in part])
    sub = SubDataset.from_path("s", d, file_type="auto", dtype="uint16", eos_token_id=EOS)
    assert sub.num_docs == len(docs)
    w = _stream(sub).worker(0, 1)
    got = epoch_tokens(read_epoch(w))
    if fmt == "parquet":
        want = Counter(
            t for doc in docs for t in ByteTokenizer().encode("".join(chr(65 + x % 26) for x in doc))
        )
        got = Counter()
        for b in read_epoch(_stream(sub).worker(0, 1)):
            lines = np.concatenate([b["input"], b["label"][:, -1:]], axis=1)
            for line, at, *_r, n in b["segments"]:
                if _r[2] == 0:
                    got.update(int(t) for t in lines[line, at : at + n] if t != EOS)
        assert got == want
    else:
        assert got == Counter(t for doc in docs for t in doc)


class ListHandler:
    """A user handler in fms-fsdp's style: lists, with its own strip rule."""

    def __init__(self, fail_on: int | None = None) -> None:
        self.fail_on = fail_on

    def is_legal(self, path: str) -> bool:
        return path.endswith(".jsonl")

    def open(self, path: str) -> list[list[int]]:
        return [json.loads(line) for line in Path(path).read_text().splitlines()]

    def length(self, path: str) -> int:
        return len(self.open(path))

    def get(self, reader: list[list[int]], index: int, drop_tokens: Any) -> list[int]:
        if index == self.fail_on:
            raise ValueError(f"document {index} is unreadable")
        return reader[index]

    def slice(self, doc: list[int], start: int, n: int) -> list[int]:
        return doc[start : start + n]


def test_user_handlers_plug_in_and_their_errors_surface(tmp_path: Path) -> None:
    docs = _corpus_docs(FIRST_ID, [4, 2, 6])
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.jsonl").write_text("\n".join(json.dumps(d) for d in docs))
    sub = SubDataset.from_path("u", tmp_path / "d", file_type=ListHandler())
    assert epoch_tokens(read_epoch(_stream(sub).worker(0, 1))) == Counter(t for d in docs for t in d)
    bad = SubDataset.from_path("u", tmp_path / "d", file_type=ListHandler(fail_on=1))
    w = _stream(bad).worker(0, 1)

    def drain() -> None:
        for _ in range(10):
            w.next_batch()

    with pytest.raises(ValueError, match="document 1 is unreadable"):
        drain()


def test_auto_detection_rejects_mixed_formats(tmp_path: Path) -> None:
    write_arrow(tmp_path / "a.arrow", [[11]])
    write_tar(tmp_path / "b.tar", [[12]])
    with pytest.raises(ConfigError, match="several formats"):
        SubDataset.from_path("m", tmp_path)
    with pytest.raises(ConfigError, match="unknown file_type"):
        SubDataset.from_path("m", tmp_path, file_type="csv")
    sub = SubDataset.from_path("m", tmp_path, file_type="arrow")
    assert sub.num_docs == 1
    assert isinstance(SubDataset.from_path("m", tmp_path / "b.tar").handler, TarHandler)


def test_files_hash_follows_contents_not_location(tmp_path: Path) -> None:
    for d in ("x", "y"):
        (tmp_path / d).mkdir()
        write_arrow(tmp_path / d / "a.arrow", [[11, 12]])
    a = SubDataset.from_path("s", tmp_path / "x").files_sha256
    assert a == SubDataset.from_path("s", tmp_path / "y").files_sha256
    write_arrow(tmp_path / "y" / "a.arrow", [[11, 12], [13]])
    assert a != SubDataset.from_path("s", tmp_path / "y").files_sha256


@pytest.mark.torch
@pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")
def test_b2_bambas_documented_config_builds_and_runs(tmp_path: Path) -> None:
    # B2: fms-fsdp's get_data_loader(file_type="arrow") crashed with Bamba's own config.
    pytest.importorskip("torch")
    nxt = FIRST_ID
    for name in ("dataset=a", "dataset=b"):
        (tmp_path / name).mkdir()
        for f in range(2):
            docs = _corpus_docs(nxt, [5, 9, 3, 12])
            nxt = docs[-1][-1] + 1
            write_arrow(tmp_path / name / f"shard{f}.arrow", docs)
    cfg = LoaderConfig(
        data_path=str(tmp_path),
        file_type="arrow",
        col_name="tokens",
        datasets="dataset=a,dataset=b",
        weights="3,1",
        seq_length=16,
        bos_token=None,
        eos_token=0,
        strip_tokens="",
        logical_shards=8,
        num_workers=2,
        batch_size=2,
        seed=2023,
    )
    dl = build_dataloader(cfg)
    it = iter(dl)
    batches = [next(it) for _ in range(4)]
    assert tuple(batches[0]["input"].shape) == (2, 16)
    assert batches[0]["input"].dtype.is_floating_point is False
    assert all(b["input"].dtype == batches[0]["input"].dtype for b in batches)
    assert (batches[0]["label"][:, :-1] == batches[0]["input"][:, 1:]).all()
    state = dl.state_dict()
    assert [d["name"] for d in state["manifest"]["datasets"]] == ["dataset=a", "dataset=b"]
    assert state["manifest"]["datasets"][0]["weight"] == 3.0


def test_indexed_handler_python_view_matches_native(tmp_path: Path) -> None:
    write_corpus(tmp_path, [[[[11, 12], [], [13]]]])
    h = IndexedHandler()
    path = tmp_path / "sub0" / "part000.idx"
    assert h.is_legal(str(path))
    assert all_docs(h, path) == [[11, 12], [], [13]]


def test_parquet_handler_pickles_with_a_spec(tmp_path: Path) -> None:
    import pickle

    path = write_parquet(tmp_path / "t.parquet", ["abc", "de"])
    h = pickle.loads(pickle.dumps(ParquetHandler(tokenizer="byte")))
    assert all_docs(h, path) == [[98, 99, 100], [101, 102]]
