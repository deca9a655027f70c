"""Parquet and Arrow inputs, and standard input: the same corpus written as JSON lines, as
Parquet (several row groups, nulls, extra columns) and as Arrow IPC (HF `datasets` stream format
and the file format) gives byte-identical `.bin/.idx` and shards, bad rows counted by the same
reasons as bad JSON lines; `--input -` reads a pipe.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest
import zstandard
from conftest import write_jsonl

import tokshuf

FIXTURES = Path(__file__).parent / "fixtures" / "bpe"
CL100K = "tiktoken:cl100k_base"


def documents(n: int = 3000) -> list[dict[str, Any]]:
    """Rows with text that needs escaping, empty text, nulls and a non-string title."""
    tricky = [
        'quote " backslash \\ slash /',
        "lines\nand\r\ncarriage\treturns",
        "nul \x00 ctrl \x1f \x7f",
        "",
    ]
    rows: list[dict[str, Any]] = []
    for i in range(n):
        text = f"document {i}: " + "héllo wörld 😀 " * (i % 37) + tricky[i % len(tricky)]
        title: Any = f"title {i}"
        if i % 97 == 5:
            text = None  # counted as not_string
        if i % 89 == 7:
            title = i  # a number where text is wanted
        rows.append({"id": i, "text": text, "title": title, "score": i / 7})
    return rows


def write_parquet(path: Path, rows: list[dict[str, Any]], row_group_size: int = 700, **kw: Any) -> Path:
    table = pa.table(
        {
            "id": pa.array([r["id"] for r in rows], pa.int64()),
            "text": pa.array([r["text"] for r in rows], kw.pop("text_type", pa.string())),
            "title": pa.array(
                [r["title"] if isinstance(r["title"], str) else None for r in rows], pa.string()
            ),
            "score": pa.array([r["score"] for r in rows], pa.float64()),
        }
    )
    pq.write_table(table, path, row_group_size=row_group_size, **kw)
    return path


def jsonl_twin(path: Path, rows: list[dict[str, Any]]) -> Path:
    """The JSON lines a Parquet file written by `write_parquet` stands for."""
    lines = []
    for r in rows:
        title = r["title"] if isinstance(r["title"], str) else None
        lines.append({"id": r["id"], "text": r["text"], "title": title, "score": r["score"]})
    return write_jsonl(path, lines)


def outputs(prefix: Path, keys: tuple[str, ...] = ("text",)) -> dict[str, bytes]:
    return {
        f"{k}.{ext}": Path(f"{prefix}_{k}_document.{ext}").read_bytes()
        for k in keys
        for ext in ("bin", "idx")
    }


def run(inputs: Any, prefix: Path, keys: tuple[str, ...] = ("text",), **kw: Any) -> dict[str, Any]:
    return tokshuf.preprocess(inputs, prefix, CL100K, json_keys=keys, append_eod=True, on_error="skip", **kw)


def test_parquet_is_byte_identical_to_json_lines(tmp_path: Path) -> None:
    rows = documents()
    twin = jsonl_twin(tmp_path / "c.jsonl", rows)
    expected = run(twin, tmp_path / "j", ("text", "title"))
    assert expected["skipped"]["not_string"] > 0
    for name, kw in [
        ("snappy", {}),
        ("zstd", {"compression": "zstd"}),
        ("one-group", {"row_group_size": 10**6}),
    ]:
        pqf = write_parquet(tmp_path / f"c-{name}.parquet", rows, **kw)
        assert pq.ParquetFile(pqf).num_row_groups == (1 if name == "one-group" else 5)
        got = run(pqf, tmp_path / name, ("text", "title"), num_threads=2)
        assert outputs(tmp_path / name, ("text", "title")) == outputs(tmp_path / "j", ("text", "title")), name
        assert got["skipped"] == expected["skipped"], name
        assert got["documents"] == expected["documents"]


def test_string_kinds_and_lists(tmp_path: Path) -> None:
    rows = documents(800)
    twin = jsonl_twin(tmp_path / "c.jsonl", rows)
    run(twin, tmp_path / "j")
    for kind in [pa.large_string(), pa.string_view(), pa.binary(), pa.large_binary()]:
        path = write_parquet(tmp_path / f"c-{kind}.parquet", rows, text_type=kind)
        run(path, tmp_path / str(kind))
        assert outputs(tmp_path / str(kind)) == outputs(tmp_path / "j"), kind
    # Dictionary-encoded text read back as a dictionary column.
    dict_table = pa.table({"text": pa.array([r["text"] for r in rows]).dictionary_encode()})
    ipc_path = tmp_path / "dict.arrow"
    with ipc.new_stream(ipc_path, dict_table.schema) as w:
        w.write_table(dict_table)
    run(ipc_path, tmp_path / "dict")
    assert outputs(tmp_path / "dict") == outputs(tmp_path / "j")
    # A list of strings is a list of sentences, as in a JSON line.
    sentences = [["first sentence. ", f"second {i}."] for i in range(50)]
    write_jsonl(tmp_path / "s.jsonl", [{"text": s} for s in sentences])
    pq.write_table(pa.table({"text": sentences}), tmp_path / "s.parquet")
    run(tmp_path / "s.jsonl", tmp_path / "sj")
    run(tmp_path / "s.parquet", tmp_path / "sp")
    assert outputs(tmp_path / "sp") == outputs(tmp_path / "sj")


def test_invalid_utf8_in_binary_is_counted_like_a_json_line(tmp_path: Path) -> None:
    values = [b"good text", b"bad \xff byte", b"also good"]
    pq.write_table(pa.table({"text": pa.array(values, pa.binary())}), tmp_path / "b.parquet")
    summary = run(tmp_path / "b.parquet", tmp_path / "b")
    assert summary["documents"] == 2
    assert summary["skipped"] == {"invalid_utf8": 1}
    with pytest.raises(tokshuf.BadInputError, match=r"b\.parquet:2: invalid_utf8"):
        tokshuf.preprocess(tmp_path / "b.parquet", tmp_path / "b2", "byte")


def json_bytes(value: Any) -> bytes:
    """`value` (bytes for text, lists, None) as compact JSON, bytes that are no UTF-8 kept as
    they are: the line a row stands for."""
    if value is None:
        return b"null"
    if isinstance(value, list):
        return b"[" + b",".join(json_bytes(v) for v in value) + b"]"
    short = {b'"': b'\\"', b"\\": b"\\\\", b"\n": b"\\n", b"\r": b"\\r", b"\t": b"\\t"}
    escape = lambda m: short.get(m[0], b"\\u%04x" % m[0][0])  # noqa: E731
    return b'"' + re.sub(rb'["\\\x00-\x1f]', escape, value) + b'"'


def test_rows_are_their_json_lines(tmp_path: Path) -> None:
    """Several keys, binary text (some not UTF-8), lists of sentences (with nulls, empty), nulls,
    empty and large values, rows cut into many small batches: the documents, skip reasons, line
    numbers and decompressed bytes of the JSON lines the rows stand for."""
    texts: list[bytes | None] = []
    titles: list[str | None] = []
    sents: list[list[bytes | None] | None] = []
    for i in range(1500):
        text = f'row {i} "q" \\ / \n\r\t\x00\x1f\x7f é😀 '.encode() * (i % 7)
        texts.append(b"bad \xff byte " + text if i % 101 == 3 else None if i % 97 == 5 else text)
        titles.append(None if i % 89 == 7 else f"title {i}")
        sents.append([b"one. ", f"two {i}".encode()] + ([None] if i % 83 == 1 else []) if i % 13 else [])
    sents[20] = None
    titles[104] = None  # and its text is not UTF-8: that is what the row is rejected for
    texts[700] = b"a large document, " * 200_000  # 3.6 MB: several batches' worth
    columns = {
        "title": pa.array(titles, pa.string()),
        "sents": pa.array(sents, pa.list_(pa.binary())),
        "text": pa.array(texts, pa.binary()),
    }
    pq.write_table(pa.table(columns), tmp_path / "c.parquet", row_group_size=250)
    keys = tuple(columns)
    lines = []
    for values in zip([t and t.encode() for t in titles], sents, texts, strict=True):
        pairs = (b'"%s":%s' % (k.encode(), json_bytes(v)) for k, v in zip(keys, values, strict=True))
        lines.append(b"{" + b",".join(pairs) + b"}\n")
    (tmp_path / "c.jsonl").write_bytes(b"".join(lines))
    skipped = []
    configs: list[dict[str, Any]] = [{}, {"max_line_bytes": 2_000_000}, {"sentence_lists": False}]
    for i, config in enumerate(configs):
        kw = {"json_keys": keys, "on_error": "skip", "batch_bytes": 50_000, **config}
        got = tokshuf.preprocess(tmp_path / "c.parquet", tmp_path / f"p{i}", CL100K, **kw)
        want = tokshuf.preprocess(tmp_path / "c.jsonl", tmp_path / f"j{i}", CL100K, **kw)
        assert outputs(tmp_path / f"p{i}", keys) == outputs(tmp_path / f"j{i}", keys), kw
        for field in ("lines", "documents", "tokens", "skipped", "decompressed_bytes"):
            assert got[field] == want[field], (field, kw)
        skips = [(r["line"], r["reason"]) for r in got["first_skipped"]]
        assert skips == [(r["line"], r["reason"]) for r in want["first_skipped"]], kw
        for g, w in zip(got["first_skipped"], want["first_skipped"], strict=True):
            # The same words, without the place in a JSON line that was never written.
            assert g["reason"] == "invalid_utf8" or w["message"].startswith(g["message"]), (g, w)
        skipped.append(got["skipped"])
    assert skipped[0].keys() == {"invalid_utf8", "not_string"}
    assert skipped[0]["invalid_utf8"] == len(range(3, 1500, 101))  # row 105's null title too
    assert skipped[1]["line_too_long"] == 1
    assert skipped[2]["not_string"] > skipped[0]["not_string"]
    # Under `fail`, the first bad row is the error, numbered as its line.
    errors = []
    for path in (tmp_path / "c.parquet", tmp_path / "c.jsonl"):
        with pytest.raises(tokshuf.BadInputError) as e:
            tokshuf.preprocess(path, tmp_path / "f", "byte", json_keys=["text"], batch_bytes=50_000)
        errors.append((e.value.line, e.value.reason))
    assert errors[0] == errors[1] == (4, "invalid_utf8")


def test_rows_without_rows(tmp_path: Path) -> None:
    pq.write_table(pa.table({"text": pa.array([], pa.string())}), tmp_path / "e.parquet")
    summary = run(tmp_path / "e.parquet", tmp_path / "e")
    assert [f["reason"] for f in summary["skipped_files"]] == ["empty_file"]
    assert summary["documents"] == 0


def test_arrow_stream_and_file_formats(tmp_path: Path) -> None:
    rows = documents(1500)
    twin = jsonl_twin(tmp_path / "c.jsonl", rows)
    run(twin, tmp_path / "j")
    table = pq.read_table(write_parquet(tmp_path / "c.parquet", rows))
    stream, file = tmp_path / "data-00000-of-00001.arrow", tmp_path / "file.arrow"
    with ipc.new_stream(stream, table.schema) as w:  # what HF `datasets` writes
        for batch in table.to_batches(max_chunksize=333):
            w.write_batch(batch)
    with ipc.new_file(file, table.schema) as fw:
        fw.write_table(table, max_chunksize=500)
    for path in (stream, file):
        run(path, tmp_path / path.stem)
        assert outputs(tmp_path / path.stem) == outputs(tmp_path / "j"), path.name


def test_missing_column_names_the_columns(tmp_path: Path) -> None:
    path = write_parquet(tmp_path / "c.parquet", documents(10))
    for fmt_path in (path, tmp_path / "c.arrow"):
        if fmt_path.suffix == ".arrow":
            table = pq.read_table(path)
            with ipc.new_stream(fmt_path, table.schema) as w:
                w.write_table(table)
        with pytest.raises(
            (tokshuf.ConfigError, tokshuf.BadInputError), match=r"\"content\".*id, text, title, score"
        ):
            tokshuf.preprocess(fmt_path, tmp_path / "o", "byte", json_keys=["content"])


def test_directory_of_mixed_formats_and_corrupt_parquet(tmp_path: Path) -> None:
    rows = documents(600)
    d = tmp_path / "d"
    d.mkdir()
    write_parquet(d / "a.parquet", rows[:300])
    jsonl_twin(d / "b.jsonl", rows[300:])
    both = jsonl_twin(tmp_path / "all.jsonl", rows)
    run(both, tmp_path / "j")
    run(d, tmp_path / "dir")
    assert outputs(tmp_path / "dir") == outputs(tmp_path / "j")
    # A partial download (no footer) is a damaged file: the error under `fail`, skipped and
    # listed under `skip`, while the other files of the directory are read.
    (d / "a2.parquet").write_bytes((d / "a.parquet").read_bytes()[:-100])
    with pytest.raises(tokshuf.BadInputError, match=r"a2\.parquet:1: truncated_file: .*Parquet"):
        tokshuf.preprocess(d / "a2.parquet", tmp_path / "o", "byte")
    summary = run(d, tmp_path / "skip")
    assert outputs(tmp_path / "skip") == outputs(tmp_path / "j")
    [skipped] = summary["skipped_files"]
    assert (skipped["path"], skipped["reason"], skipped["first_lost_line"]) == (
        str(d / "a2.parquet"),
        "truncated_file",
        1,
    )


def test_parquet_corrupt_inside_is_a_truncated_file(tmp_path: Path) -> None:
    texts = [f"document {i} " * 50 for i in range(3000)]
    pq.write_table(pa.table({"text": texts}), tmp_path / "g.parquet", row_group_size=1000)
    chunk = pq.ParquetFile(tmp_path / "g.parquet").metadata.row_group(1).column(0)
    data = bytearray((tmp_path / "g.parquet").read_bytes())
    mid = chunk.data_page_offset + chunk.total_compressed_size // 2
    data[mid : mid + 64] = b"\xff" * 64
    (tmp_path / "c.parquet").write_bytes(bytes(data))
    summary = run(tmp_path / "c.parquet", tmp_path / "c")
    [lost] = summary["skipped_files"]
    assert lost["reason"] == "truncated_file"
    assert "snappy" in lost["message"]
    assert summary["documents"] == summary["lines"] == lost["first_lost_line"] - 1 >= 1000
    with pytest.raises(tokshuf.BadInputError, match="truncated_file"):
        tokshuf.preprocess(tmp_path / "c.parquet", tmp_path / "f", "byte")


def test_parquet_from_s3(s3: Any, tmp_path: Path) -> None:
    rows = documents(2000)
    path = write_parquet(tmp_path / "c.parquet", rows, row_group_size=300)
    run(jsonl_twin(tmp_path / "c.jsonl", rows), tmp_path / "j", ("text", "title"))
    bucket = s3.bucket("columnar")
    url = s3.put(bucket, "fineweb/000.parquet", path.read_bytes())
    run(url, tmp_path / "s3", ("text", "title"))
    assert outputs(tmp_path / "s3", ("text", "title")) == outputs(tmp_path / "j", ("text", "title"))


def test_shuffle_of_parquet_equals_shuffle_of_json_lines(tmp_path: Path) -> None:
    rows = [r for r in documents(2000) if r["text"] is not None]
    (tmp_path / "in-j").mkdir()
    pqf = write_parquet(tmp_path / "c.parquet", rows)
    jsonl_twin(tmp_path / "in-j" / "c.jsonl", rows)
    args: dict[str, Any] = {"context_length": 257, "wds_chunk_size": 50, "num_local_cells": 3}
    a = tokshuf.shuffle(tmp_path / "in-j", tmp_path / "cells-j", tmp_path / "out-j", CL100K, **args)
    b = tokshuf.shuffle(pqf, tmp_path / "cells-p", tmp_path / "out-p", CL100K, **args)
    assert (a["contexts"], a["shards"]) == (b["contexts"], b["shards"])
    assert a["shards"] > 1
    for shard in sorted((tmp_path / "out-j").glob("*.tar")):
        assert (tmp_path / "out-p" / shard.name).read_bytes() == shard.read_bytes(), shard.name


def test_shuffle_of_parquet_resumes_inside_the_file(tmp_path: Path) -> None:
    rows = [r for r in documents(1500) if r["text"] is not None]
    pqf = write_parquet(tmp_path / "c.parquet", rows)
    args: dict[str, Any] = {"context_length": 65, "wds_chunk_size": 100, "num_local_cells": 3}
    args |= {"buffer_bytes": 0, "batch_bytes": 4000, "tokenizer": "byte"}
    tokshuf.shuffle(pqf, tmp_path / "cells-a", tmp_path / "out-a", **args)
    paths = [str(p) for p in (pqf, tmp_path / "cells-b", tmp_path / "out-b")]
    call = f"tokshuf.shuffle(*{paths!r}, **{args!r})"
    # Killed after a few checkpoints: the saved position is a row inside the file.
    env = {**os.environ, "TOKSHUF_TEST_CRASH_AT": "checkpoint-saved:5", "TOKSHUF_TEST_SAVE_EVERY_MS": "0"}
    crashed = subprocess.run([sys.executable, "-c", f"import tokshuf; {call}"], env=env, capture_output=True)
    assert crashed.returncode == -signal.SIGABRT, crashed.stderr.decode()
    resumed = tokshuf.shuffle(pqf, tmp_path / "cells-b", tmp_path / "out-b", **args)
    assert resumed["resumed"]
    shards = sorted((tmp_path / "out-a").glob("*.tar"))
    assert len(shards) > 1
    for shard in shards:
        assert (tmp_path / "out-b" / shard.name).read_bytes() == shard.read_bytes(), shard.name


@pytest.mark.parametrize("compress", [None, "zst"])
def test_stdin(tmp_path: Path, compress: str | None) -> None:
    src = FIXTURES / "corpus-mixed.jsonl.zst"
    with src.open("rb") as f:
        raw = zstandard.ZstdDecompressor().stream_reader(f).read()
    data = raw if compress is None else zstandard.ZstdCompressor().compress(raw)
    tokshuf.preprocess(src, tmp_path / "file", CL100K, append_eod=True)
    cmd = [
        sys.executable,
        "-m",
        "tokshuf",
        "preprocess",
        "--input",
        "-",
        "--output-prefix",
        str(tmp_path / "pipe"),
    ]
    cmd += ["--tokenizer", CL100K, "--append-eod", "--progress", "none"]
    done = subprocess.run(cmd, input=data, capture_output=True, check=False)
    assert done.returncode == 0, done.stderr.decode()
    assert outputs(tmp_path / "pipe") == outputs(tmp_path / "file")
    summary = json.loads((tmp_path / "pipe_summary.json").read_text())
    assert summary["input_bytes"] == len(data)
    with pytest.raises(tokshuf.ConfigError, match="standard input"):
        tokshuf.shuffle("-", tmp_path / "cells", tmp_path / "out", "byte")


def byte_documents(prefix: Path, key: str = "text") -> list[bytes]:
    """The documents of a `byte`-tokenized output, as the bytes they were (ids are byte + 1)."""
    ds = tokshuf.IndexedDataset(f"{prefix}_{key}_document")
    return [
        b"".join(bytes((s - 1).astype("uint8")) for s in ds.document(d))
        for d in range(len(ds.document_indices) - 1)
    ]


def test_every_codec_pyarrow_writes_is_read(tmp_path: Path) -> None:
    """Parquet with each codec pyarrow writes (brotli too), Arrow IPC files and streams with LZ4
    and ZSTD bodies (`write_feather` compresses with LZ4 by default): the JSON lines' documents,
    nothing reported as a truncated file."""
    rows = documents(900)
    run(jsonl_twin(tmp_path / "c.jsonl", rows), tmp_path / "j", ("text", "title"))
    table = pq.read_table(write_parquet(tmp_path / "plain.parquet", rows))
    files: list[Path] = []
    codecs = {"none": "UNCOMPRESSED", "snappy": "SNAPPY", "gzip": "GZIP", "brotli": "BROTLI"}
    for codec, name in (codecs | {"lz4": "LZ4", "zstd": "ZSTD"}).items():
        path = tmp_path / f"{codec}.parquet"
        pq.write_table(table, path, compression=codec, row_group_size=250, data_page_version="2.0")
        assert pq.ParquetFile(path).metadata.row_group(0).column(1).compression == name
        files.append(path)
    feather.write_feather(table, tmp_path / "feather-default.arrow", chunksize=300)
    files.append(tmp_path / "feather-default.arrow")
    for codec in ["lz4", "zstd"]:
        options = ipc.IpcWriteOptions(compression=codec)
        with ipc.new_stream(tmp_path / f"stream-{codec}.arrow", table.schema, options=options) as w:
            w.write_table(table, max_chunksize=200)
        with ipc.new_file(tmp_path / f"file-{codec}.arrow", table.schema, options=options) as w:
            w.write_table(table, max_chunksize=400)
        files += [tmp_path / f"stream-{codec}.arrow", tmp_path / f"file-{codec}.arrow"]
    for path in files:
        got = run(path, tmp_path / path.stem, ("text", "title"))
        assert got["skipped_files"] == [], path.name
        assert outputs(tmp_path / path.stem, ("text", "title")) == outputs(tmp_path / "j", ("text", "title"))
    # Under `fail` too: the brotli file is read, not a truncated file.
    tokshuf.preprocess(tmp_path / "brotli.parquet", tmp_path / "f", "byte", json_keys=["id"], on_error="skip")
    fine = tmp_path / "fine.parquet"
    pq.write_table(pa.table({"text": ["a", "b"]}), fine, compression="brotli")
    feather.write_feather(pa.table({"text": ["c"]}), tmp_path / "fine.arrow")
    tokshuf.preprocess([fine, tmp_path / "fine.arrow"], tmp_path / "f", "byte")
    assert byte_documents(tmp_path / "f") == [b"a", b"b", b"c"]


def string_array(values: list[bytes | None]) -> pa.Array:
    """A string array holding `values` as they are, UTF-8 or not (as writers that do not check
    write them): bytes seen as text, which pyarrow does not validate."""
    return pa.array(values, pa.binary()).view(pa.string())


def test_text_in_every_arrow_type_is_read_as_its_json_value(tmp_path: Path) -> None:
    """fixed_size_list, list_view, large_list_view, large_list, run_end_encoded, dictionary
    and fixed_size_binary hold text as their JSON lines do: strings and lists of strings."""
    lists = [["a ", "b"], ["c", "d"], ["e", None], ["f", "g"]]
    flat = [b"a ", b"b", b"c", b"d", b"e", None, b"f", b"g"]
    items = string_array(flat)
    mask = pa.array([False, False, False, True])
    columns = {
        "fixed_size_list": pa.FixedSizeListArray.from_arrays(items, 2, mask=mask),
        "list_view": pa.ListViewArray.from_arrays(
            pa.array([0, 2, 4, 6], pa.int32()), pa.array([2] * 4, pa.int32()), items, mask=mask
        ),
        "large_list_view": pa.array([*lists[:3], None], pa.large_list_view(pa.string())),
        "large_list": pa.array([*lists[:3], None], pa.large_list(pa.string())),
        "run_end_encoded": pa.RunEndEncodedArray.from_arrays(
            pa.array([2, 3, 4], pa.int16()), pa.array(["ab", None, "ab"])
        ),
        "dictionary": pa.array(["x", "y", "x", None]).dictionary_encode(),
        "fixed_size_binary": pa.array([b"abcd", b"efgh", b"ijkl", None], pa.binary(4)),
        "list_of_dictionary": pa.array(
            [["p"], ["q", "p"], [], None], pa.list_(pa.dictionary(pa.int8(), pa.string()))
        ),
    }
    expected: dict[str, list[Any]] = {
        "fixed_size_list": [lists[0], lists[1], lists[2], None],
        "list_view": [lists[0], lists[1], lists[2], None],
        "large_list_view": [lists[0], lists[1], lists[2], None],
        "large_list": [lists[0], lists[1], lists[2], None],
        "run_end_encoded": ["ab", "ab", None, "ab"],
        "dictionary": ["x", "y", "x", None],
        "fixed_size_binary": ["abcd", "efgh", "ijkl", None],
        "list_of_dictionary": [["p"], ["q", "p"], [], None],
    }
    for name, column in columns.items():
        table = pa.table({"text": column, "n": pa.array(range(4))})
        arrow = tmp_path / f"{name}.arrow"
        with ipc.new_stream(arrow, table.schema) as w:
            w.write_table(table)
        paths = [arrow]
        if name != "run_end_encoded":  # Parquet has no run-end encoding
            pq.write_table(table, tmp_path / f"{name}.parquet")
            paths.append(tmp_path / f"{name}.parquet")
        write_jsonl(tmp_path / f"{name}.jsonl", [{"text": v, "n": i} for i, v in enumerate(expected[name])])
        want = tokshuf.preprocess(tmp_path / f"{name}.jsonl", tmp_path / f"{name}-j", "byte", on_error="skip")
        assert want["documents"] >= 2, name
        for path in paths:
            got = tokshuf.preprocess(path, tmp_path / path.name, "byte", on_error="skip")
            assert (got["documents"], got["skipped"]) == (want["documents"], want["skipped"]), path.name
            assert got["decompressed_bytes"] <= want["decompressed_bytes"], path.name  # `"n":i` not counted
            assert byte_documents(tmp_path / path.name) == byte_documents(tmp_path / f"{name}-j"), path.name


def test_invalid_utf8_in_a_string_column_costs_its_row(tmp_path: Path) -> None:
    """One value that is not UTF-8 in a string column (plain, dictionary-encoded, in a list,
    in a compressed Arrow stream) is that row's `invalid_utf8`, as in its JSON line; the other
    rows of its row group or record batch are kept."""
    values = [b"good %d" % i for i in range(1000)]
    values[3] = b"bad \xff here"
    values[640] = b"cut \xe2\x82"
    text = string_array(values)
    table = pa.table({"text": text, "other": string_array([b"\xff"] * 1000), "n": pa.array(range(1000))})
    (tmp_path / "x.jsonl").write_bytes(b"".join(b'{"text":"%s"}\n' % v for v in values))
    want = tokshuf.preprocess(tmp_path / "x.jsonl", tmp_path / "j", "byte", on_error="skip")
    assert (want["documents"], want["skipped"]) == (998, {"invalid_utf8": 2})
    files = {}
    for dictionary in (False, True):
        files[f"d{dictionary}.parquet"] = lambda p, d=dictionary: pq.write_table(
            table, p, row_group_size=300, use_dictionary=d
        )
    files["lz4.arrow"] = lambda p: feather.write_feather(table, p, chunksize=256)
    dict_table = pa.table({"text": pa.DictionaryArray.from_arrays(pa.array(range(1000), pa.int32()), text)})
    files["dict.arrow"] = lambda p: feather.write_feather(dict_table, p, compression="zstd")
    for name, write in files.items():
        write(tmp_path / name)
        got = tokshuf.preprocess(tmp_path / name, tmp_path / name, "byte", on_error="skip")
        assert got["skipped_files"] == [], name
        assert (got["documents"], got["skipped"]) == (998, {"invalid_utf8": 2}), name
        assert [r["line"] for r in got["first_skipped"]] == [4, 641], name
        assert byte_documents(tmp_path / name) == byte_documents(tmp_path / "j"), name
        with pytest.raises(
            tokshuf.BadInputError, match=r":4: invalid_utf8: invalid UTF-8 at byte 4 of a value of \"text\""
        ):
            tokshuf.preprocess(tmp_path / name, tmp_path / "f", "byte")
    # In a list of sentences: the row goes, as its JSON line would.
    sents = pa.ListArray.from_arrays(
        pa.array([0, 2, 3, 4], pa.int32()), string_array([b"a", b"b\xff", b"c", b"d"])
    )
    pq.write_table(pa.table({"text": sents}), tmp_path / "l.parquet")
    got = tokshuf.preprocess(tmp_path / "l.parquet", tmp_path / "l", "byte", on_error="skip")
    assert (got["documents"], got["skipped"]) == (2, {"invalid_utf8": 1})


def test_b_and_f_are_measured_as_their_two_byte_escapes(tmp_path: Path) -> None:
    """A row whose JSON line (as `json.dumps` writes it: `\\b`, `\\f`) is exactly
    --max-line-bytes long is kept, as that line is; the decompressed bytes are that line's."""
    texts = ["a\bb\fc" * 10, "\b", "\f\f\x01"]
    lines = [json.dumps({"text": t}, ensure_ascii=False, separators=(",", ":")) for t in texts]
    (tmp_path / "x.jsonl").write_text("".join(line + "\n" for line in lines))
    pq.write_table(pa.table({"text": texts}), tmp_path / "x.parquet")
    longest = max(len(line) for line in lines)
    for limit, kept in [(longest, 3), (longest - 1, 2)]:
        summaries = [
            tokshuf.preprocess(
                tmp_path / f"x.{ext}", tmp_path / ext, "byte", on_error="skip", max_line_bytes=limit
            )
            for ext in ("jsonl", "parquet")
        ]
        for s in summaries:
            assert s["documents"] == kept, limit
            assert s["decompressed_bytes"] == sum(len(line) + 1 for line in lines)


def test_duplicate_columns_read_the_last_as_json_reads_the_last_key(tmp_path: Path) -> None:
    table = pa.Table.from_arrays(
        [pa.array(["first", "f2"]), pa.array([1, 2]), pa.array(["second", None]), pa.array(["t", "u"])],
        names=["text", "n", "text", "title"],
    )
    pq.write_table(table, tmp_path / "dup.parquet")
    with ipc.new_file(tmp_path / "dup.arrow", table.schema) as w:
        w.write_table(table)
    lines = [
        '{"text":"first","n":1,"text":"second","title":"t"}',
        '{"text":"f2","n":2,"text":null,"title":"u"}',
    ]
    (tmp_path / "dup.jsonl").write_text("\n".join(lines) + "\n")
    for name in ("dup.jsonl", "dup.parquet", "dup.arrow"):
        got = tokshuf.preprocess(
            tmp_path / name, tmp_path / name, "byte", on_error="skip", json_keys=["title", "text"]
        )
        assert got["skipped"] == {"not_string": 1}, name
        assert byte_documents(tmp_path / name) == [b"second"], name
        assert byte_documents(tmp_path / name, "title") == [b"t"], name


def test_a_damaged_file_is_skipped_and_listed_under_skip(tmp_path: Path) -> None:
    """Parquet and Arrow files damaged anywhere (a cut download, a garbled footer, header or
    body) are `truncated_file` under `--on-error skip`: listed, their readable rows kept, the run
    goes on; under `fail` the same is the error. Never a crash."""
    table = pa.table({"text": [f"row {i} " * 20 for i in range(3000)]})
    pq.write_table(table, tmp_path / "good.parquet", row_group_size=1000)
    feather.write_feather(table, tmp_path / "good-file.arrow", chunksize=1000)
    with ipc.new_stream(tmp_path / "good-stream.arrow", table.schema) as w:
        w.write_table(table, max_chunksize=1000)
    damaged: dict[str, bytes] = {}
    for name in ("good.parquet", "good-file.arrow", "good-stream.arrow"):
        data = (tmp_path / name).read_bytes()
        damaged[f"half-{name}"] = data[: len(data) // 2]
        damaged[f"head-{name}"] = data[:7]
        damaged[f"garbage-{name}"] = bytes(range(256)) * 40
        for at in (len(data) // 3, len(data) - 40, 12):
            flipped = bytearray(data)
            flipped[at : at + 24] = b"\xff" * 24
            damaged[f"flip{at}-{name}"] = bytes(flipped)
    cases = sorted(damaged)
    d = tmp_path / "in"
    d.mkdir()
    for i, name in enumerate(cases):
        (d / f"{i:02d}-{name}").write_bytes(damaged[name])
    (d / "zz-last.jsonl").write_text('{"text": "last"}\n')
    summary = tokshuf.preprocess(d, tmp_path / "o", "byte", on_error="skip")
    listed = {Path(f["path"]).name.split("-", 1)[1]: f for f in summary["skipped_files"]}
    assert all(f["reason"] == "truncated_file" for f in listed.values()), listed
    # Every cut or garbled file is listed (a flipped byte in data that only holds text may read).
    for name in cases:
        if not name.startswith("flip"):
            assert name in listed, name
    assert byte_documents(tmp_path / "o")[-1] == b"last"
    for i, name in enumerate(cases):
        path = d / f"{i:02d}-{name}"
        single = tokshuf.preprocess(path, tmp_path / "one", "byte", on_error="skip")
        if name in listed:
            with pytest.raises(tokshuf.BadInputError, match="truncated_file"):
                tokshuf.preprocess(path, tmp_path / "f", "byte")
            assert single["skipped_files"][0]["first_lost_line"] == single["lines"] + 1, name


def test_what_is_not_supported_is_refused_naming_it(tmp_path: Path) -> None:
    """A file this build cannot read is an error naming the feature under any policy, never a
    truncated file to skip: here a Parquet file with encrypted metadata."""
    pq.write_table(pa.table({"text": ["a"]}), tmp_path / "e.parquet")
    data = (tmp_path / "e.parquet").read_bytes()
    (tmp_path / "e.parquet").write_bytes(data[:-4] + b"PARE")  # the magic of an encrypted footer
    for policy in ("fail", "skip"):
        with pytest.raises(tokshuf.FormatError, match=r"e\.parquet: unsupported Parquet encryption"):
            tokshuf.preprocess(tmp_path / "e.parquet", tmp_path / "o", "byte", on_error=policy)
