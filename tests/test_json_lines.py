"""JSON lines as Python's `json` reads them: Megatron's `preprocess_data.py` iterates over its
input in text mode (universal newlines) and `json.loads` each line. A repeated key keeps its last
value whatever the earlier ones were; `NaN`, `Infinity` and `-Infinity` are numbers; a lone CR
ends a line as LF and CRLF do. The documents tokshuf keeps are the values Python gets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

import tokshuf


def byte_documents(prefix: Path) -> list[bytes]:
    """The documents of a `byte`-tokenized output (ids are byte + 1), as the bytes they were."""
    ds = tokshuf.IndexedDataset(f"{prefix}_text_document")
    n = len(ds.document_indices) - 1
    return [b"".join(bytes((s - 1).astype("uint8")) for s in ds.document(d)) for d in range(n)]


def python_reads(path: Path) -> tuple[int, list[bytes]]:
    """How many lines Python's text mode gives, and the documents of those `json.loads` reads as
    an object whose "text" is a string or a list of strings (their concatenation)."""
    kept, lines = [], 0
    with path.open(encoding="utf-8") as f:
        for line in f:
            lines += 1
            try:
                value = json.loads(line)
            except ValueError:
                continue
            text = value.get("text") if isinstance(value, dict) else None
            sentences = [text] if isinstance(text, str) else text if isinstance(text, list) else [None]
            if all(isinstance(s, str) for s in sentences):
                kept.append("".join(sentences).encode())
    return lines, kept


def preprocess(path: Path, prefix: Path) -> dict[str, Any]:
    return tokshuf.preprocess(path, prefix, "byte", on_error="skip")


def test_a_repeated_key_keeps_its_last_value(tmp_path: Path) -> None:
    lines = [
        '{"text": null, "text": "second"}',
        '{"text": 5, "id": 1, "text": "third"}',
        '{"text": ["a", 1], "text": "fourth"}',
        '{"text": {"nested": [1, {"x": null}]}, "text": ["fi", "fth"]}',
        '{"text": [], "text": true, "text": "sixth"}',
        '{"text": "dropped", "text": null}',
    ]
    (tmp_path / "d.jsonl").write_text("\n".join(lines) + "\n")
    assert python_reads(tmp_path / "d.jsonl") == (6, [b"second", b"third", b"fourth", b"fifth", b"sixth"])
    summary = preprocess(tmp_path / "d.jsonl", tmp_path / "o")
    assert byte_documents(tmp_path / "o") == [b"second", b"third", b"fourth", b"fifth", b"sixth"]
    assert summary["skipped"] == {"not_string": 1}
    assert summary["first_skipped"][0]["line"] == 6


def test_python_non_finite_numbers_are_read(tmp_path: Path) -> None:
    """`json.dumps` writes NaN and infinities as `NaN`, `Infinity`, `-Infinity` (allow_nan is its
    default) and `json.loads` reads them back."""
    records = [
        {"text": "hello", "score": float("nan")},
        {"ppl": float("inf"), "text": "world", "low": [float("-inf"), {"x": float("nan")}]},
        {"text": float("nan")},
        {"text": "é \u00e9", "meta": {"v": float("inf")}, "id": "\u2028"},
    ]
    for ensure_ascii in (True, False):
        path = tmp_path / f"n{ensure_ascii}.jsonl"
        path.write_text("".join(json.dumps(r, ensure_ascii=ensure_ascii) + "\n" for r in records))
        assert b"NaN" in path.read_bytes()
        summary = preprocess(path, tmp_path / f"o{ensure_ascii}")
        assert byte_documents(tmp_path / f"o{ensure_ascii}") == python_reads(path)[1]
        assert byte_documents(tmp_path / f"o{ensure_ascii}") == [b"hello", b"world", "é é".encode()]
        assert summary["skipped"] == {"not_string": 1}  # a number where text is wanted


def test_a_lone_cr_ends_a_line(tmp_path: Path) -> None:
    """Old-Mac line ends, and files that mix all three; a CRLF is one line end, even across the
    reader's blocks."""
    body = '{"text":"a"}\r{"text":"b"}\r\n{"text":"c"}\n\r{"text":"d"}\r'
    path = tmp_path / "cr.jsonl"
    path.write_bytes(body.encode())
    assert python_reads(path) == (5, [b"a", b"b", b"c", b"d"])
    summary = preprocess(path, tmp_path / "o")
    assert byte_documents(tmp_path / "o") == [b"a", b"b", b"c", b"d"]
    assert (summary["lines"], summary["skipped"]) == (5, {"blank_line": 1})
    # Many lines, CRLF and lone CR at every offset of the reader's blocks.
    lines = [json.dumps({"text": f"line {i} " + "x" * (i % 97)}) for i in range(20_000)]
    ends = ["\r", "\r\n", "\n"]
    big = tmp_path / "big.jsonl"
    big.write_bytes("".join(line + ends[i % 3] for i, line in enumerate(lines)).encode())
    n, want = python_reads(big)
    summary = tokshuf.preprocess(big, tmp_path / "b", "byte", batch_bytes=4096)
    assert (summary["lines"], summary["documents"], n) == (20_000, 20_000, 20_000)
    assert byte_documents(tmp_path / "b") == want


def values(depth: int = 2) -> st.SearchStrategy[Any]:
    leaves = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5)
    if depth == 0:
        return leaves
    inner = values(depth - 1)
    return (
        leaves
        | st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["text", "k"]), inner, max_size=2)
    )


texts = st.text(min_size=1, max_size=12) | st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=3)


@st.composite
def corpora(draw: st.DrawFn) -> bytes:
    """Lines of JSON objects as `json.dumps` writes them (NaN included), with repeated keys,
    whitespace that may be a raw CR, and LF, CRLF or CR line ends."""
    out = []
    for _ in range(draw(st.integers(1, 12))):
        pairs = draw(st.lists(st.tuples(st.sampled_from(["text", "id"]), texts | values()), max_size=4))
        ascii_only = draw(st.booleans())
        space = draw(st.sampled_from(["", " ", "\t", "\r"]))
        items = [json.dumps(k) + ":" + space + json.dumps(v, ensure_ascii=ascii_only) for k, v in pairs]
        out.append("{" + ("," + space).join(items) + "}" + draw(st.sampled_from(["\n", "\r\n", "\r"])))
    if draw(st.booleans()):
        out[-1] = out[-1].rstrip("\r\n")
    return "".join(out).encode()


@given(corpus=corpora())
def test_documents_are_the_values_python_reads(tmp_path_factory: Any, corpus: bytes) -> None:
    tmp = tmp_path_factory.mktemp("json")
    (tmp / "c.jsonl").write_bytes(corpus)
    lines, want = python_reads(tmp / "c.jsonl")
    summary = preprocess(tmp / "c.jsonl", tmp / "o")
    assert summary["lines"] == lines
    assert byte_documents(tmp / "o") == want
