"""Property: a Parquet or Arrow file gives what the JSON lines it stands for give. Random
tables (every Arrow type that holds text, numbers, nulls, null list items, text that is not
UTF-8, `\\b`/`\\f` and other escapes), written with a random codec, row-group or record-batch
size, page version and dictionary setting, preprocess to the same `.bin/.idx`, counts, skip
reasons and line numbers as the rows written as JSON lines (as `json.dumps` writes them, bytes
that are not UTF-8 kept as they are)."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
from hypothesis import given
from hypothesis import strategies as st

import tokshuf

# Text with the bytes JSON escapes (short and \u00XX), multi-byte characters, and sometimes a
# byte sequence that is not UTF-8.
PIECES = [
    "a",
    "b c",
    '"',
    "\\",
    "\n",
    "\r",
    "\t",
    "\b",
    "\f",
    "\x00",
    "\x1f",
    "\x7f",
    "é",
    "😀",
    "\u2028",
    "/",
]
BAD = [b"\xff", b"\xe2\x82", b"\xc0\xaf", b"\xed\xa0\x80"]

# The types a key column may have: text in every Arrow form, or a value that is no text.
SCALARS = [
    "string",
    "large_string",
    "string_view",
    "binary",
    "large_binary",
    "fixed_size_binary",
    "dictionary",
]
LISTS = ["list", "large_list", "fixed_size_list", "list_view", "large_list_view"]
KINDS = [*SCALARS, *LISTS, "run_end_encoded", "int64"]
NOT_IN_PARQUET = {"run_end_encoded"}

SHORT = {
    b'"': b'\\"',
    b"\\": b"\\\\",
    b"\n": b"\\n",
    b"\r": b"\\r",
    b"\t": b"\\t",
    b"\b": b"\\b",
    b"\f": b"\\f",
}


def json_string(value: bytes) -> bytes:
    """`value` as `json.dumps(..., ensure_ascii=False)` writes a string, bytes that are no UTF-8
    kept as they are."""
    escape = lambda m: SHORT.get(m[0], b"\\u%04x" % m[0][0])  # noqa: E731
    return b'"' + re.sub(rb'["\\\x00-\x1f]', escape, value) + b'"'


def json_value(value: Any) -> bytes:
    if value is None:
        return b"null"
    if isinstance(value, int):
        return str(value).encode()
    if isinstance(value, list):
        return b"[" + b",".join(json_value(v) for v in value) + b"]"
    return json_string(value)


@st.composite
def texts(draw: st.DrawFn, width: int | None = None) -> bytes:
    parts = draw(st.lists(st.sampled_from(PIECES), max_size=6))
    raw = "".join(parts).encode()
    if draw(st.integers(0, 9)) == 0:
        raw = draw(st.sampled_from(BAD)) + raw
    if width is not None:  # fixed_size_binary: every value `width` bytes
        raw = (raw + b"." * width)[:width]
    return raw


@st.composite
def columns(draw: st.DrawFn, rows: int) -> tuple[str, pa.Array, list[Any]]:
    """A column of `rows` values: its kind, the array, and the values of its JSON lines."""
    kind = draw(st.sampled_from(KINDS))
    null = st.integers(0, 5).map(lambda n: n == 0)
    if kind == "int64":
        # One digit: a number is measured as `0`, whatever it is.
        values: list[Any] = [None if draw(null) else draw(st.integers(0, 9)) for _ in range(rows)]
        return kind, pa.array(values, pa.int64()), values
    if kind in SCALARS:
        width = 3 if kind == "fixed_size_binary" else None
        values = [None if draw(null) else draw(texts(width)) for _ in range(rows)]
        binary = {
            "large_string": pa.large_binary(),
            "string_view": pa.binary_view(),
            "large_binary": pa.large_binary(),
        }
        arrow = {"string": pa.string(), "large_string": pa.large_string(), "string_view": pa.string_view()}
        if kind == "fixed_size_binary":
            array = pa.array(values, pa.binary(3))
        elif kind == "dictionary":
            array = pa.array(values, pa.binary()).view(pa.string()).dictionary_encode()
        else:
            array = pa.array(values, binary.get(kind, pa.binary()))
            if kind in arrow:
                array = array.view(arrow[kind])
        return kind, array, values
    if kind == "run_end_encoded":
        runs = draw(st.lists(st.tuples(st.integers(1, 4), st.none() | texts()), max_size=rows))
        ends: list[int] = []
        distinct: list[bytes | None] = []
        for n, v in runs:
            if (ends[-1] if ends else 0) < rows:
                ends.append(min((ends[-1] if ends else 0) + n, rows))
                distinct.append(v)
        if (ends[-1] if ends else 0) < rows:
            ends.append(rows)
            distinct.append(None)
        values = [
            v for start, end, v in zip([0, *ends], ends, distinct, strict=False) for _ in range(end - start)
        ]
        array = pa.RunEndEncodedArray.from_arrays(pa.array(ends, pa.int32()), pa.array(distinct, pa.binary()))
        return kind, array.view(pa.run_end_encoded(pa.int32(), pa.string())), values
    size = 2 if kind == "fixed_size_list" else None
    item = st.none() | texts() if draw(st.booleans()) else texts()
    values = [
        None if draw(null) else draw(st.lists(item, min_size=size or 0, max_size=size or 3))
        for _ in range(rows)
    ]
    # Built over bytes (pyarrow checks the UTF-8 of string items), then seen as strings.
    items = pa.array([v for row in values for v in (row or [None] * (size or 0))], pa.binary())
    offsets = [0]
    for row in values:
        offsets.append(offsets[-1] + (len(row) if row is not None else size or 0))
    mask = pa.array([row is None for row in values], pa.bool_())
    if kind == "fixed_size_list":
        array = pa.FixedSizeListArray.from_arrays(items, 2, mask=mask)
        as_text = pa.list_(pa.string(), 2)
    elif kind in ("list_view", "large_list_view"):
        index = pa.int32() if kind == "list_view" else pa.int64()
        sizes = [b - a for a, b in itertools.pairwise(offsets)]
        cls = pa.ListViewArray if kind == "list_view" else pa.LargeListViewArray
        array = cls.from_arrays(pa.array(offsets[:-1], index), pa.array(sizes, index), items, mask=mask)
        as_text = pa.list_view(pa.string()) if kind == "list_view" else pa.large_list_view(pa.string())
    else:
        cls = pa.ListArray if kind == "list" else pa.LargeListArray
        index = pa.int32() if kind == "list" else pa.int64()
        array = cls.from_arrays(pa.array(offsets, index), items, mask=mask)
        as_text = pa.list_(pa.string()) if kind == "list" else pa.large_list(pa.string())
    return kind, array.view(as_text), values


@st.composite
def tables(draw: st.DrawFn) -> tuple[pa.Table, list[str], list[bytes], dict[str, Any]]:
    rows = draw(st.integers(0, 25))
    keys = draw(st.lists(st.sampled_from(["text", "title", "body"]), min_size=1, max_size=2, unique=True))
    drawn = {k: draw(columns(rows)) for k in keys}
    # A column that is no key (never read, even where it is not UTF-8).
    other = pa.array([b"\xff"] * rows, pa.binary()).view(pa.string())
    names = draw(st.permutations([*keys, "other"]))
    table = pa.table({n: other if n == "other" else drawn[n][1] for n in names})
    lines = [
        b"{" + b",".join(b'"%s":%s' % (k.encode(), json_value(drawn[k][2][r])) for k in keys) + b"}\n"
        for r in range(rows)
    ]
    parquet = not any(drawn[k][0] in NOT_IN_PARQUET for k in keys) and draw(st.booleans())
    write: dict[str, Any] = {"parquet": parquet}
    if parquet:
        write["compression"] = draw(st.sampled_from(["none", "snappy", "gzip", "brotli", "lz4", "zstd"]))
        write["row_group_size"] = draw(st.integers(1, 30))
        write["use_dictionary"] = draw(st.booleans())
        write["data_page_version"] = draw(st.sampled_from(["1.0", "2.0"]))
    else:
        write["compression"] = draw(st.sampled_from([None, "lz4", "zstd"]))
        write["file_format"] = draw(st.booleans())
        write["max_chunksize"] = draw(st.integers(1, 30))
    options = {"sentence_lists": draw(st.booleans()), "batch_bytes": draw(st.sampled_from([1, 64, 1 << 20]))}
    if draw(st.booleans()):
        longest = max((len(line) - 1 for line in lines), default=1)
        options["max_line_bytes"] = draw(st.integers(1, longest + 1))
    return table, keys, lines, {"write": write, "options": options}


def write_columnar(table: pa.Table, path: Path, write: dict[str, Any]) -> Path:
    if write["parquet"]:
        path = path.with_suffix(".parquet")
        kw = {k: write[k] for k in ("compression", "row_group_size", "use_dictionary", "data_page_version")}
        pq.write_table(table, path, **kw)
        return path
    path = path.with_suffix(".arrow")
    options = ipc.IpcWriteOptions(compression=write["compression"])
    new = ipc.new_file if write["file_format"] else ipc.new_stream
    with new(path, table.schema, options=options) as w:
        w.write_table(table, max_chunksize=write["max_chunksize"])
    return path


def outputs(prefix: Path, keys: list[str]) -> dict[str, bytes]:
    return {
        f"{k}.{ext}": Path(f"{prefix}_{k}_document.{ext}").read_bytes()
        for k in keys
        for ext in ("bin", "idx")
    }


def test_the_json_escaper_writes_what_json_dumps_writes() -> None:
    for text in ["", *PIECES, "".join(PIECES), "\x01\x02\x0b\x0e"]:
        assert json_string(text.encode()) == json.dumps(text, ensure_ascii=False).encode(), repr(text)


@given(case=tables())
def test_columnar_file_equals_its_json_lines(tmp_path_factory: Any, case: Any) -> None:
    table, keys, lines, how = case
    tmp = tmp_path_factory.mktemp("case")
    path = write_columnar(table, tmp / "t", how["write"])
    (tmp / "t.jsonl").write_bytes(b"".join(lines))
    kw = {"json_keys": keys, "on_error": "skip", "append_eod": True, **how["options"]}
    got = tokshuf.preprocess(path, tmp / "c", "byte", **kw)
    want = tokshuf.preprocess(tmp / "t.jsonl", tmp / "j", "byte", **kw)
    assert outputs(tmp / "c", keys) == outputs(tmp / "j", keys)
    for field in ("lines", "documents", "tokens", "skipped", "decompressed_bytes"):
        assert got[field] == want[field], field
    assert [(r["line"], r["reason"]) for r in got["first_skipped"]] == [
        (r["line"], r["reason"]) for r in want["first_skipped"]
    ]
    assert [f["reason"] for f in got["skipped_files"]] == [f["reason"] for f in want["skipped_files"]]
