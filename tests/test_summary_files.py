"""The summary file every long command writes beside its outputs (``--summary PATH`` elsewhere,
``none`` for none): it exists, parses, and equals the summary the run returned or printed."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from shuffle_helpers import open_lm_samples, random_docs, read_manifest, write_corpus

import tokshuf
from tokshuf import IndexedDatasetWriter
from tokshuf._inspect.shards import inspect_shards
from tokshuf._summary_file import write_summary
from tokshuf.cli import main
from tokshuf.olmo_tokens import from_indexed

SEQLEN = 17


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    rng = random.Random(11)
    return write_corpus(tmp_path_factory.mktemp("corpus"), [random_docs(rng, n) for n in (30, 20)])


def _shuffle(corpus: list[Path], root: Path, **kw: Any) -> tokshuf.ShuffleSummary:
    return tokshuf.shuffle(
        corpus, root / "cells", root / "out", "byte", context_length=SEQLEN, wds_chunk_size=9, **kw
    )


def _printed(capsys: pytest.CaptureFixture[str]) -> Any:
    return json.loads(capsys.readouterr().out)


def test_shuffle_writes_its_summary_beside_the_manifest(corpus: list[Path], tmp_path: Path) -> None:
    summary = _shuffle(corpus, tmp_path)
    out = tmp_path / "out"
    written = (out / "summary.json").read_text()
    assert json.loads(written) == summary
    # Readers of the directory see the dataset as before: open_lm reads the manifest's shards,
    # and inspect finds manifest and tars in agreement.
    rows = read_manifest(out)
    assert len(open_lm_samples(out / "manifest.jsonl")) == sum(r["num_sequences"] for r in rows)
    assert inspect_shards(out).problems == []
    # A rerun of the complete run returns already_complete and keeps the first run's file.
    again = _shuffle(corpus, tmp_path)
    assert again["already_complete"]
    assert (out / "summary.json").read_text() == written


def test_a_summary_alone_does_not_make_an_output_used(corpus: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").write_text('{"stale": true}\n')
    summary = _shuffle(corpus, tmp_path)  # a fresh run: only a manifest or shards are refused
    assert json.loads((out / "summary.json").read_text()) == summary
    with pytest.raises(tokshuf.ConfigError, match="already holds a dataset"):
        tokshuf.shuffle(corpus, tmp_path / "other-cells", out, "byte", context_length=SEQLEN)


def test_shuffle_summary_flag(corpus: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["shuffle", "--input", *map(str, corpus), "--tokenizer", "byte", "--seqlen", str(SEQLEN)]
    base += ["--progress", "none", "--json"]
    elsewhere = tmp_path / "runs" / "a.json"
    elsewhere.parent.mkdir()
    assert main([*base, "--local-cell-dir", str(tmp_path / "c1"), "--output", str(tmp_path / "o1"),
                 "--summary", str(elsewhere)]) == 0  # fmt: skip
    assert json.loads(elsewhere.read_text()) == _printed(capsys)
    assert not (tmp_path / "o1" / "summary.json").exists()
    assert main([*base, "--local-cell-dir", str(tmp_path / "c2"), "--output", str(tmp_path / "o2"),
                 "--summary", "none"]) == 0  # fmt: skip
    _printed(capsys)
    # No summary; the commit record that publishes the output is always written.
    assert sorted(p.name for p in (tmp_path / "o2").iterdir()) == sorted(
        ["commit.json", "manifest.jsonl"] + [f"{r['shard']}.tar" for r in read_manifest(tmp_path / "o2")]
    )


def _indexed(prefix: Path, lengths: list[int]) -> None:
    with IndexedDatasetWriter(prefix, np.uint16) as w:
        for n in lengths:
            w.add_document(list(range(1, n + 1)), [n])


def test_merge_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _indexed(tmp_path / "a", [3, 5, 1])
    _indexed(tmp_path / "b", [4, 4])
    out = tmp_path / "m"
    assert main(["merge", "--input", str(tmp_path / "a"), str(tmp_path / "b"), "--output-prefix", str(out),
                 "--json"]) == 0  # fmt: skip
    printed = _printed(capsys)
    assert (printed["documents"], printed["tokens"]) == (5, 17)
    assert json.loads((tmp_path / "m_summary.json").read_text()) == printed
    assert main(["merge", "--input", str(tmp_path / "a"), "--output-prefix", str(tmp_path / "n"),
                 "--summary", "none", "--quiet"]) == 0  # fmt: skip
    assert not (tmp_path / "n_summary.json").exists()


def test_merge_summary_file_is_the_returned_summary_byte_for_byte(tmp_path: Path) -> None:
    # A local merge summary was written from a JSON object whose keys sort, while the one written
    # to a store followed the returned dict: the same run gave two files.
    _indexed(tmp_path / "a", [3, 5, 1])
    result = tokshuf.merge([tmp_path / "a"], tmp_path / "m", summary=True)
    text = (tmp_path / "m_summary.json").read_text()
    assert list(json.loads(text)) == list(result)
    assert list(result) == ["documents", "sequences", "tokens", "bin_bytes", "idx_bytes"]
    write_summary(result, tmp_path / "again.json")
    assert (tmp_path / "again.json").read_text() == text


def test_merge_parts_summary_flag(
    corpus: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = tmp_path / "p" / "ds"
    for i in range(2):
        tokshuf.preprocess(corpus, prefix, "byte", append_eod=True, shard=(i, 2))
    elsewhere = tmp_path / "merged.json"
    assert main(["merge", "--parts", str(prefix), "--summary", str(elsewhere), "--json"]) == 0
    printed = _printed(capsys)
    assert json.loads(elsewhere.read_text()) == printed
    assert printed["documents"] == 50
    assert not (tmp_path / "p" / "ds_summary.json").exists()


def test_olmo_convert_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _indexed(tmp_path / "ds", [2, 7, 3])
    out = tmp_path / "tokens.npy"
    assert main(["olmo-convert", "--input", str(tmp_path / "ds"), "--output", str(out), "--json"]) == 0
    printed = _printed(capsys)
    assert (printed["documents"], printed["tokens"]) == (3, 12)
    assert json.loads((tmp_path / "tokens_summary.json").read_text()) == printed


def test_python_merge_and_convert_write_summaries_as_the_cli_does(tmp_path: Path) -> None:
    """The library functions write the same files as their commands (the CLI only passes
    ``--summary`` through), and ``summary=False`` / a path behave as ``preprocess``'s do."""
    _indexed(tmp_path / "a", [3, 5, 1])
    _indexed(tmp_path / "b", [4, 4])
    merged = tokshuf.merge([tmp_path / "a", tmp_path / "b"], tmp_path / "m")
    assert (merged["documents"], merged["tokens"]) == (5, 17)
    assert json.loads((tmp_path / "m_summary.json").read_text()) == merged
    tokshuf.merge([tmp_path / "a"], tmp_path / "n", summary=False)
    assert not (tmp_path / "n_summary.json").exists()

    spans = from_indexed(tmp_path / "m", tmp_path / "t.npy")
    assert spans.tolist() == [[0, 3], [3, 8], [8, 9], [9, 13], [13, 17]]
    expected = {"output": str(tmp_path / "t.npy"), "documents": 5, "tokens": 17}
    assert json.loads((tmp_path / "t_summary.json").read_text()) == expected
    elsewhere = tmp_path / "runs" / "convert.json"
    elsewhere.parent.mkdir()
    from_indexed(tmp_path / "a", tmp_path / "u.npy", summary=elsewhere)
    assert json.loads(elsewhere.read_text())["tokens"] == 9
    assert not (tmp_path / "u_summary.json").exists()


@pytest.mark.parametrize("bad", [None, 1, ["s.json"]])
def test_a_bad_summary_argument_is_a_config_error(corpus: list[Path], tmp_path: Path, bad: Any) -> None:
    """Not True, False or a path: a ConfigError naming ``summary`` and the valid choices, before
    any output is written (shuffle's comes after its run)."""
    _indexed(tmp_path / "a", [3, 5, 1])
    parts = tmp_path / "p" / "ds"
    for i in range(2):
        tokshuf.preprocess(corpus, parts, "byte", shard=(i, 2), summary=False)
    before = sorted(tmp_path.rglob("*"))
    runs = {
        "preprocess": lambda: tokshuf.preprocess(corpus, tmp_path / "pre", "byte", summary=bad),
        "merge": lambda: tokshuf.merge([tmp_path / "a"], tmp_path / "m", summary=bad),
        "merge_parts": lambda: tokshuf.merge_parts(parts, summary=bad),
        "from_indexed": lambda: from_indexed(tmp_path / "a", tmp_path / "t.npy", summary=bad),
    }
    for name, run in runs.items():
        with pytest.raises(tokshuf.ConfigError, match=r"summary must be True .*, False .* or a path, got"):
            run()
        assert sorted(tmp_path.rglob("*")) == before, name
    with pytest.raises(tokshuf.ConfigError, match=r"summary must be True .*, False .* or a path, got"):
        _shuffle(corpus, tmp_path / "shuffled", summary=bad)


def test_merge_parts_takes_summary_by_keyword_only(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="positional"):
        tokshuf.merge_parts(tmp_path / "ds", False)  # type: ignore[misc]


def test_one_writer_of_summary_files(tmp_path: Path) -> None:
    """Summaries come back as dicts in the order of the file's keys, and a summary file the Python
    side writes (``write_summary``: inspect, instances, a summary in a store; ``merge --parts``'
    committed one) has the bytes of the one the command wrote: the core's one writer (indented
    JSON in UTF-8, a newline, credentials masked)."""
    from tokshuf._summary_file import write_summary

    src = tmp_path / "données token=SECRET"
    src.mkdir()
    (src / "a.jsonl").write_text('{"text": "héllo"}\n' * 3 + "not json\n", encoding="utf-8")
    summary = tokshuf.preprocess(src, tmp_path / "p", "byte", on_error="skip")
    written = (tmp_path / "p_summary.json").read_bytes()
    assert type(summary) is dict
    assert list(summary) == list(json.loads(written))
    assert json.loads(written) == summary
    assert "données token=***" in summary["inputs"][0]
    assert "SECRET" not in written.decode()
    write_summary(summary, tmp_path / "again.json")
    assert (tmp_path / "again.json").read_bytes() == written

    parts = tmp_path / "données" / "ds"
    for i in range(2):
        tokshuf.preprocess(src, parts, "byte", on_error="skip", shard=(i, 2))
    merged = tokshuf.merge_parts(parts)
    text = (tmp_path / "données" / "ds_summary.json").read_bytes()
    write_summary(merged, tmp_path / "merged.json")
    assert (tmp_path / "merged.json").read_bytes() == text
    assert "données/ds_text_document" in text.decode()


def test_write_summary_masks_credentials_and_replaces_atomically(tmp_path: Path) -> None:
    """Keys stay in their order, credentials are masked, and a target that is a directory or a
    value JSON cannot hold is an error that leaves the old file and nothing else behind."""
    from tokshuf._summary_file import write_summary

    target = tmp_path / "s.json"
    target.write_text("old")
    url = "s3://user:pw@host/b/k?X-Amz-Signature=abc"
    write_summary({"z": [1, 0.5, None, True, (2, 3)], "a": {url: url}, "n": 2**63}, target)
    masked = "s3://***@host/b/k?X-Amz-Signature=***"
    expected = {"z": [1, 0.5, None, True, [2, 3]], "a": {masked: masked}, "n": 2**63}
    assert json.loads(target.read_text()) == expected
    assert target.read_text().startswith('{\n  "z": [\n    1,')
    assert target.read_text().endswith("}\n")
    (tmp_path / "d").mkdir()
    with pytest.raises(IsADirectoryError):
        write_summary({}, tmp_path / "d")
    with pytest.raises(TypeError, match="not JSON serializable"):
        write_summary({"x": object()}, target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d", "s.json"]
    assert json.loads(target.read_text()) == expected


def test_token_file_summary_lists_output_documents_tokens_wherever_written(tmp_path: Path) -> None:
    # Written locally from a JSON object whose keys sort (documents, output, tokens), and to a
    # store from Python's dict (output, documents, tokens): one summary, two files.
    _indexed(tmp_path / "a", [3, 5, 1])
    from_indexed(tmp_path / "a", tmp_path / "t.npy", summary=True)
    written = json.loads((tmp_path / "t_summary.json").read_text())
    assert list(written) == ["output", "documents", "tokens"]
    assert (written["documents"], written["tokens"]) == (3, 9)
