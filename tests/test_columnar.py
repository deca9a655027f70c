"""Parquet and Arrow inputs, and standard input: the same corpus written as JSON lines, as
Parquet (several row groups, nulls, extra columns) and as Arrow IPC (HF `datasets` stream format
and the file format) gives byte-identical `.bin/.idx` and shards, bad rows counted by the same
reasons as bad JSON lines; `--input -` reads a pipe.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
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
    bad = tmp_path / "bad.parquet"
    bad.write_bytes((d / "a.parquet").read_bytes()[:-100])
    with pytest.raises(OSError, match=r"bad\.parquet.*Parquet"):
        tokshuf.preprocess(bad, tmp_path / "o", "byte")


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
    args: dict[str, Any] = {"sequence_length": 257, "wds_chunk_size": 50, "num_local_cells": 3}
    a = tokshuf.shuffle(tmp_path / "in-j", tmp_path / "cells-j", tmp_path / "out-j", CL100K, **args)
    b = tokshuf.shuffle(pqf, tmp_path / "cells-p", tmp_path / "out-p", CL100K, **args)
    assert (a["contexts"], a["shards"]) == (b["contexts"], b["shards"])
    assert a["shards"] > 1
    for shard in sorted((tmp_path / "out-j").glob("*.tar")):
        assert (tmp_path / "out-p" / shard.name).read_bytes() == shard.read_bytes(), shard.name


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
