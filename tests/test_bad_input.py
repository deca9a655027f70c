"""Bad input: every kind of bad line the corpus generator makes, truncated .gz/.zst, empty files
and huge lines — a clear error under ``fail``, exact counts and a report under ``skip``."""

from __future__ import annotations

import gzip
import json
import logging
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest
import zstandard
from conftest import write_jsonl

import tokshuf
from tokshuf import _core

# The generator's kinds (make_corpus.py --bad-fraction) → our reasons.
KIND_TO_REASON = {
    "truncated": "truncated_json",
    "syntax": "invalid_json",
    "missing_text": "missing_key",
    "text_not_string": "not_string",
    "invalid_utf8": "invalid_utf8",
    "lone_surrogate": "lone_surrogate",
    "not_object": "not_object",
    "blank": "blank_line",
    "bom": "bom",
}


def lines_of(path: Path) -> list[bytes]:
    data = path.read_bytes()
    assert data.endswith(b"\n")
    return data[:-1].split(b"\n")


def text_value(line: bytes) -> Any:
    """The value of "text" if the line is a usable JSON object (Python's rules, stricter where
    Python is lenient: no BOM, no lone surrogates); else None."""
    if line.startswith(b"\xef\xbb\xbf"):
        return None
    try:
        obj = json.loads(line.decode("utf-8"))
    except ValueError:  # includes UnicodeDecodeError and blank lines
        return None
    if not isinstance(obj, dict) or "text" not in obj:
        return None
    value = obj["text"]
    strings = [value] if isinstance(value, str) else value if isinstance(value, list) else [None]
    if not all(isinstance(s, str) for s in strings):
        return None
    try:
        for s in strings:
            s.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return value


def is_good(line: bytes, sentence_lists: bool) -> bool:
    value = text_value(line)
    return isinstance(value, str) or (sentence_lists and isinstance(value, list))


@pytest.fixture(scope="module", params=[(), ("--ensure-ascii",)], ids=["utf8", "ascii-escapes"])
def bad_corpus(make_corpus: Any, request: pytest.FixtureRequest) -> tuple[Path, dict[str, Any]]:
    extra: tuple[str, ...] = request.param
    path, manifest = make_corpus(
        f"bad{len(extra)}.jsonl", "--size", "1MB", "--seed", "3", "--bad-fraction", "0.3", *extra
    )
    assert set(manifest["bad_lines"]) == set(KIND_TO_REASON), "every kind of bad line occurs"
    return path, manifest


def test_skip_counts_match_the_generators_manifest(
    tmp_path: Path, bad_corpus: tuple[Path, dict[str, Any]]
) -> None:
    path, manifest = bad_corpus
    summary = tokshuf.preprocess(
        path, tmp_path / "b", "byte", on_error="skip", sentence_lists=False, num_threads=2
    )
    assert summary["skipped"] == {KIND_TO_REASON[k]: n for k, n in manifest["bad_lines"].items()}
    assert summary["documents"] == manifest["documents"]
    assert summary["lines"] == manifest["documents"] + manifest["bad_lines_total"]
    bad = [i + 1 for i, line in enumerate(lines_of(path)) if not is_good(line, sentence_lists=False)]
    assert len(bad) == manifest["bad_lines_total"]
    assert [r["line"] for r in summary["first_skipped"]] == bad[:20]
    assert {r["path"] for r in summary["first_skipped"]} == {str(path)}
    written = json.loads((tmp_path / "b_summary.json").read_text())
    assert written["skipped"] == summary["skipped"]


def test_lists_of_strings_are_sentences_by_default(
    tmp_path: Path, bad_corpus: tuple[Path, dict[str, Any]]
) -> None:
    # The generator counts {"text": ["a", "list", ...]} as text_not_string; Megatron (and so our
    # default) reads it as a list of sentences.
    path, manifest = bad_corpus
    lists = sum(isinstance(text_value(line), list) for line in lines_of(path))
    assert lists > 0
    summary = tokshuf.preprocess(path, tmp_path / "b", "byte", on_error="skip")
    expected = {KIND_TO_REASON[k]: n for k, n in manifest["bad_lines"].items()}
    expected["not_string"] -= lists
    assert summary["skipped"] == {k: n for k, n in expected.items() if n}
    assert summary["documents"] == manifest["documents"] + lists


def test_fail_names_the_first_bad_line(tmp_path: Path, bad_corpus: tuple[Path, dict[str, Any]]) -> None:
    path, _ = bad_corpus
    first = next(i + 1 for i, line in enumerate(lines_of(path)) if not is_good(line, sentence_lists=True))
    with pytest.raises(tokshuf.BadInputError) as info:
        tokshuf.preprocess(path, tmp_path / "b", "byte", num_threads=3, batch_bytes=4096)
    err = info.value
    assert (err.path, err.line) == (str(path), first)
    assert err.reason in KIND_TO_REASON.values()
    assert str(err).startswith(f"{path}:{first}: {err.reason}: ")
    assert list(tmp_path.iterdir()) == []

    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "tokshuf",
            "preprocess",
            "--input",
            str(path),
            "--output-prefix",
            str(tmp_path / "c"),
            "--tokenizer",
            "byte",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert cli.returncode == 1
    assert f"{path}:{first}: {err.reason}" in cli.stderr
    assert "--on-error skip" in cli.stderr
    assert list(tmp_path.iterdir()) == []


def decodable_prefix(blob: bytes, fmt: str) -> bytes:
    """What Python's own decoders recover from a cut stream."""
    if fmt == "gz":
        return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(blob)
    return zstandard.ZstdDecompressor().decompressobj().decompress(blob)


@pytest.mark.parametrize("fmt", ["gz", "zst"])
def test_truncated_compressed_file(tmp_path: Path, make_corpus: Any, fmt: str) -> None:
    src, manifest = make_corpus("c1.jsonl", "--size", "1MB", "--seed", "1")
    data = src.read_bytes()
    blob = gzip.compress(data, mtime=0) if fmt == "gz" else zstandard.ZstdCompressor().compress(data)
    cut = tmp_path / f"cut.jsonl.{fmt}"
    cut.write_bytes(blob[: len(blob) // 2])
    after = write_jsonl(tmp_path / "z_after.jsonl", [{"text": "still read"}])
    decoded = decodable_prefix(cut.read_bytes(), fmt)
    complete = decoded[: decoded.rfind(b"\n") + 1].count(b"\n")
    fragment = len(decoded) - (decoded.rfind(b"\n") + 1)
    assert 0 < complete < manifest["documents"]

    with pytest.raises(tokshuf.BadInputError) as info:
        tokshuf.preprocess([cut, after], tmp_path / "f", "byte")
    err = info.value
    assert (err.path, err.reason) == (str(cut), "truncated_file")
    assert f"after {len(decoded)} bytes" in str(err)
    assert err.line == complete + 1
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([cut.name, after.name])

    summary = tokshuf.preprocess([cut, after], tmp_path / "s", "byte", on_error="skip")
    assert summary["documents"] == complete + 1  # the next file is still read
    assert summary["skipped"] == ({"truncated_file": 1} if fragment else {})
    [record] = summary["skipped_files"]
    assert record["path"] == str(cut)
    assert record["reason"] == "truncated_file"
    assert record["first_lost_line"] == complete + 1
    assert record["decompressed_bytes_read"] == len(decoded)
    assert "the file is truncated: it ends inside the" in record["message"]


def compressed(data: bytes, fmt: str) -> bytes:
    return gzip.compress(data, mtime=0) if fmt == "gz" else zstandard.ZstdCompressor().compress(data)


@pytest.mark.parametrize("fmt", ["gz", "zst"])
def test_a_plain_file_with_a_compressed_name_is_called_not_compressed(tmp_path: Path, fmt: str) -> None:
    plain = write_jsonl(tmp_path / f"plain.jsonl.{fmt}", [{"text": "x"}])
    name = {"gz": "gzip", "zst": "zstd"}[fmt]
    with pytest.raises(tokshuf.BadInputError) as info:
        tokshuf.preprocess(plain, tmp_path / "f", "byte")
    message = str(info.value)
    assert f"not a {name} file" in message, message
    assert "7b 22" in message  # the bytes it starts with: '{"'
    assert "after 0 bytes" not in message
    summary = tokshuf.preprocess(plain, tmp_path / "s", "byte", on_error="skip")
    assert f"not a {name} file" in summary["skipped_files"][0]["message"]


@pytest.mark.parametrize("fmt", ["gz", "zst"])
def test_a_garbage_tail_is_named_with_its_offset(tmp_path: Path, fmt: str) -> None:
    good = compressed(b'{"text": "a"}\n{"text": "b"}\n', fmt)
    path = tmp_path / f"tail.jsonl.{fmt}"
    path.write_bytes(good + b"garbage!")
    with pytest.raises(tokshuf.BadInputError) as info:
        tokshuf.preprocess(path, tmp_path / "f", "byte")
    message = str(info.value)
    assert f"trailing data at byte {len(good)}" in message, message
    assert "unexpected end of file" not in message
    summary = tokshuf.preprocess(path, tmp_path / "s", "byte", on_error="skip")
    assert summary["documents"] == 2  # everything before the tail is kept
    assert f"trailing data at byte {len(good)}" in summary["skipped_files"][0]["message"]


def test_gzip_zero_padding_is_accepted_as_gzip_and_python_do(tmp_path: Path) -> None:
    data = b'{"text": "a"}\n{"text": "b"}\n'
    # Two members, zeros between them and after the last (tape-block padding): `gzip -d` and
    # Python's gzip read both members and ignore the zeros.
    blob = gzip.compress(data[:14], mtime=0) + bytes(100) + gzip.compress(data[14:], mtime=0) + bytes(512)
    assert gzip.decompress(blob) == data
    path = tmp_path / "padded.jsonl.gz"
    path.write_bytes(blob)
    summary = tokshuf.preprocess(path, tmp_path / "p", "byte")
    assert summary["documents"] == 2
    assert summary["skipped_files"] == []


@pytest.mark.parametrize("where", ["shuffle", "preprocess"])
def test_shuffle_and_preprocess_say_the_same(tmp_path: Path, where: str) -> None:
    plain = write_jsonl(tmp_path / "in" / "plain.jsonl.gz", [{"text": "x"}])

    def run() -> None:
        if where == "shuffle":
            tokshuf.shuffle(plain, tmp_path / "cells", tmp_path / "out", "byte", num_threads=1)
        else:
            tokshuf.preprocess(plain, tmp_path / "out" / "p", "byte")

    with pytest.raises(tokshuf.BadInputError) as info:
        run()
    assert "not a gzip file" in str(info.value)


def test_empty_files(tmp_path: Path) -> None:
    good = write_jsonl(tmp_path / "in" / "a.jsonl", [{"text": "x"}])
    empty = tmp_path / "in" / "b.jsonl"
    empty.write_bytes(b"")
    empty_gz = tmp_path / "in" / "c.jsonl.gz"
    empty_gz.write_bytes(gzip.compress(b""))  # not empty on disk, empty once decompressed
    with pytest.raises(tokshuf.BadInputError) as info:
        tokshuf.preprocess(tmp_path / "in", tmp_path / "out" / "e", "byte")
    assert (info.value.path, info.value.line, info.value.reason) == (str(empty), 0, "empty_file")
    assert str(info.value) == f"{empty}: empty_file: the file is empty"

    summary = tokshuf.preprocess(tmp_path / "in", tmp_path / "out" / "e", "byte", on_error="skip")
    assert summary["documents"] == 1
    assert summary["skipped"] == {}
    assert [(r["path"], r["reason"]) for r in summary["skipped_files"]] == [
        (str(empty), "empty_file"),
        (str(empty_gz), "empty_file"),
    ]
    assert good.exists()


def test_huge_lines(tmp_path: Path) -> None:
    big = "x" * 3_000_000
    path = write_jsonl(tmp_path / "h.jsonl", [{"text": "a"}, {"text": big}, {"text": "b"}])
    summary = tokshuf.preprocess(path, tmp_path / "s", "byte", on_error="skip", max_line_bytes=1_000_000)
    assert summary["skipped"] == {"line_too_long": 1}
    assert summary["first_skipped"][0]["line"] == 2
    assert summary["documents"] == 2
    with pytest.raises(tokshuf.BadInputError, match=r"h\.jsonl:2: line_too_long"):
        tokshuf.preprocess(path, tmp_path / "f", "byte", max_line_bytes=1_000_000)
    summary = tokshuf.preprocess(path, tmp_path / "d", "byte", batch_bytes=4096)
    assert summary["documents"] == 3
    assert summary["tokens"] == 1 + len(big) + 1


def test_dtype_too_small_is_refused_up_front(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "in.jsonl", [{"text": "x"}])
    with pytest.raises(tokshuf.ConfigError, match=r"dtype uint16 cannot hold .* \(up to 100276\)"):
        tokshuf.preprocess(path, tmp_path / "o", "tiktoken:cl100k_base", dtype="uint16")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]


@pytest.mark.parametrize("workers", [1, 4])
def test_the_first_problem_in_input_order_is_reported(tmp_path: Path, workers: int) -> None:
    # A bad line deep in the first file comes before an empty second file, however far ahead
    # the reader gets; and an empty first file before a bad line in the second.
    records = [{"text": "ok"}] * 5000 + [{"content": "no text"}]
    bad = write_jsonl(tmp_path / "a.jsonl", records)
    empty = tmp_path / "b.jsonl"
    empty.write_bytes(b"")
    with pytest.raises(tokshuf.BadInputError) as info:
        tokshuf.preprocess([bad, empty], tmp_path / "o", "byte", num_threads=workers, batch_bytes=1024)
    assert (info.value.path, info.value.line, info.value.reason) == (str(bad), 5001, "missing_key")
    with pytest.raises(tokshuf.BadInputError) as info:
        tokshuf.preprocess([empty, bad], tmp_path / "o", "byte", num_threads=workers, batch_bytes=1024)
    assert (info.value.path, info.value.reason) == (str(empty), "empty_file")


def test_directory_loops_are_walked_once(tmp_path: Path) -> None:
    data = tmp_path / "d"
    (data / "sub").mkdir(parents=True)
    write_jsonl(data / "a.jsonl", [{"text": "one"}])
    write_jsonl(data / "sub" / "b.jsonl", [{"text": "two"}])
    (data / "self").symlink_to(".")
    (data / "sub" / "up").symlink_to("..")
    summary = tokshuf.preprocess(data, tmp_path / "o", "byte")
    assert summary["documents"] == 2
    assert _core.expand_input_paths([str(data)]) == [data / "a.jsonl", data / "sub" / "b.jsonl"]


def test_a_directory_scan_reads_inputs_only_and_reports_the_rest(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "d"
    (data / ".cache").mkdir(parents=True)
    write_jsonl(data / "a.jsonl", [{"text": "read"}])
    write_jsonl(data / ".b.jsonl", [{"text": "a hidden file"}])
    write_jsonl(data / ".cache" / "c.jsonl", [{"text": "in a hidden directory"}])
    write_jsonl(data / "D.JSONL", [{"text": "an upper-case extension"}])
    (data / "notes.txt").write_text("not an input\n")
    (data / "self").symlink_to(".")
    counts = {"extension": 2, "hidden": 2, "link_loop": 1}
    listed = [
        {"path": str(data / ".b.jsonl"), "reason": "hidden"},
        {"path": str(data / ".cache"), "reason": "hidden"},
        {"path": str(data / "D.JSONL"), "reason": "extension"},
        {"path": str(data / "notes.txt"), "reason": "extension"},
        {"path": str(data / "self"), "reason": "link_loop"},
    ]
    with caplog.at_level(logging.WARNING, logger="tokshuf"):
        pre = tokshuf.preprocess(data, tmp_path / "o", "byte")
    # Only "read" (4 bytes, 4 byte tokens) was tokenized.
    assert (pre["inputs"], pre["documents"], pre["tokens"]) == ([str(data / "a.jsonl")], 1, 4)
    assert (pre["scan_skipped"], pre["first_scan_skipped"]) == (counts, listed)
    on_disk = json.loads((tmp_path / "o_summary.json").read_text())
    assert (on_disk["scan_skipped"], on_disk["first_scan_skipped"]) == (counts, listed)
    assert "5 paths that were not read" in caplog.text
    assert f"{data / 'notes.txt'}: extension" in caplog.text

    shuffled = tokshuf.shuffle([data], tmp_path / "c", tmp_path / "s", "byte", context_length=8)
    assert (shuffled["files"], shuffled["documents"]) == (1, 1)
    assert (shuffled["scan_skipped"], shuffled["first_scan_skipped"]) == (counts, listed)
    # The summaries hold what their types say ("task" only for a task's run).
    assert set(pre) == set(tokshuf.PreprocessSummary.__annotations__) - {"task"}
    assert set(shuffled) == set(tokshuf.ShuffleSummary.__annotations__) - {"task"}


@pytest.mark.parametrize("how", ["given_twice", "directory_and_file", "file_link"])
def test_a_file_reached_twice_is_refused_naming_both_paths(tmp_path: Path, how: str) -> None:
    data = tmp_path / "d"
    data.mkdir()
    a = write_jsonl(data / "a.jsonl", [{"text": "one"}])
    (tmp_path / "link.jsonl").symlink_to(a)
    inputs = {
        "given_twice": [a, a],
        "directory_and_file": [data, a],
        "file_link": [a, tmp_path / "link.jsonl"],
    }[how]
    with pytest.raises(tokshuf.ConfigError, match="same file") as info:
        tokshuf.preprocess(inputs, tmp_path / "o", "byte")
    assert str(a) in str(info.value)
    assert not list(tmp_path.glob("o_*"))
