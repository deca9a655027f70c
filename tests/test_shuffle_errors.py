"""Bad input under `--on-error fail|skip`, broken files, bad arguments: never a silent loss."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from conftest import write_jsonl
from shuffle_helpers import model_contexts, read_contexts, tree_digest

import tokshuf
from tokshuf.cli import main
from tokshuf.errors import BadInputError, ConfigError

GOOD = [["alpha beta", "gamma"], ["delta", "epsilon zeta eta"]]


def corpus_with_bad_lines(root: Path) -> list[Path]:
    a = write_jsonl(root / "a.jsonl", [{"text": t} for t in GOOD[0]])
    b = root / "b.jsonl"
    b.write_text('{"text": "delta"}\n{"text": 5}\n{"text": "epsilon zeta eta"}\n{"text": "unterminated\n')
    return [a, b]


def test_fail_names_the_file_and_line(tmp_path: Path) -> None:
    paths = corpus_with_bad_lines(tmp_path)
    with pytest.raises(BadInputError) as info:
        tokshuf.shuffle(paths, tmp_path / "c", tmp_path / "o", "byte", context_length=8)
    assert (info.value.path, info.value.line, info.value.reason) == (str(paths[1]), 2, "not_string")
    assert not list((tmp_path / "o").glob("*.tar"))


def test_cli_fail_exits_non_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = corpus_with_bad_lines(tmp_path)
    argv = ["shuffle", "--input", str(paths[0]), "--input", str(paths[1]), "--tokenizer", "byte"]
    argv += ["--local-cell-dir", str(tmp_path / "c"), "--output", str(tmp_path / "o"), "--seqlen", "8"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert f"{paths[1]}:2: not_string" in err
    assert "--on-error skip" in err


def test_skip_counts_and_keeps_the_rest(tmp_path: Path) -> None:
    paths = corpus_with_bad_lines(tmp_path)
    s = tokshuf.shuffle(paths, tmp_path / "c", tmp_path / "o", "byte", context_length=8, on_error="skip")
    assert s["skipped"] == {"not_string": 1, "truncated_json": 1}
    assert [(r["line"], r["reason"]) for r in s["first_skipped"]] == [
        (2, "not_string"),
        (4, "truncated_json"),
    ]
    assert s["lines"] == 6
    assert s["documents"] == 4
    assert Counter(read_contexts(tmp_path / "o")) == Counter(model_contexts(GOOD, 8))


def test_failed_run_resumes_with_skip_as_a_fresh_skip_run(tmp_path: Path) -> None:
    paths = corpus_with_bad_lines(tmp_path)
    with pytest.raises(BadInputError):
        tokshuf.shuffle(paths, tmp_path / "c", tmp_path / "o", "byte", context_length=8, buffer_bytes=1)
    tokshuf.shuffle(paths, tmp_path / "c", tmp_path / "o", "byte", context_length=8, on_error="skip")
    tokshuf.shuffle(paths, tmp_path / "c2", tmp_path / "o2", "byte", context_length=8, on_error="skip")
    assert tree_digest(tmp_path / "o") == tree_digest(tmp_path / "o2")


def test_empty_and_truncated_files_follow_the_policy(tmp_path: Path) -> None:
    rng = random.Random(1)
    docs = [" ".join(str(rng.random()) for _ in range(30)) for _ in range(300)]
    p = write_jsonl(tmp_path / "x.jsonl.gz", [{"text": t} for t in docs], "gz")
    p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2])
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    with pytest.raises(BadInputError) as info:
        tokshuf.shuffle([empty, p], tmp_path / "c", tmp_path / "o", "byte")
    assert (info.value.reason, info.value.line) == ("empty_file", 0)
    with pytest.raises(BadInputError) as info:
        tokshuf.shuffle([p], tmp_path / "c2", tmp_path / "o2", "byte")
    assert info.value.reason == "truncated_file"
    # Skip: what could be read is kept, and both files are reported.
    s = tokshuf.shuffle(
        [empty, p], tmp_path / "c3", tmp_path / "o3", "byte", context_length=64, on_error="skip"
    )
    assert [f["reason"] for f in s["skipped_files"]] == ["empty_file", "truncated_file"]
    lost = s["skipped_files"][1]["first_lost_line"]
    assert 1 < lost < len(docs)
    assert s["documents"] == lost - 1
    got = Counter(read_contexts(tmp_path / "o3"))
    assert got == Counter(model_contexts([docs[: lost - 1]], 64))


def test_bad_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = write_jsonl(tmp_path / "a.jsonl", [{"text": "x"}])
    with pytest.raises(ConfigError, match="expected one of: native, dclm"):
        tokshuf.shuffle([p], tmp_path / "c", tmp_path / "o", "byte", special_tokens="neox")
    with pytest.raises(ConfigError, match=r"expected one of: json\.gz, npy"):
        tokshuf.shuffle([p], tmp_path / "c", tmp_path / "o", "byte", member_format="bin")
    with pytest.raises(
        ConfigError, match=r"context_length \(--context-length/--seqlen\) must be >= 1, got 0"
    ):
        tokshuf.shuffle([p], tmp_path / "c", tmp_path / "o", "byte", context_length=0)
    with pytest.raises(FileNotFoundError):
        tokshuf.shuffle([tmp_path / "missing.jsonl"], tmp_path / "c", tmp_path / "o", "byte")
    assert main(["shuffle", "--input", str(p), "--local-cell-dir", "c", "--output", "o"]) == 2
    assert "--tokenizer is required" in capsys.readouterr().err


def test_help_shows_the_conventions(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["shuffle", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "PAD = the EOT id" in out
    assert "INCLUDING the +1 target" in out
    assert "EOT 0, PAD 50256" in out


def test_progress_json_lines_and_summary(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    p = write_jsonl(tmp_path / "a.jsonl", [{"text": "word " * 30}] * 50)
    argv = ["shuffle", "--input", str(p), "--tokenizer", "byte", "--progress", "json", "--seqlen", "16"]
    assert main([*argv, "--local-cell-dir", str(tmp_path / "c"), "--output", str(tmp_path / "o")]) == 0
    out, err = capfd.readouterr()
    done = {r["progress"]: r for r in map(json.loads, err.strip().splitlines()) if r["done"]}
    cells, shards = done["shuffle-cells"], done["shuffle-shards"]
    # 50 documents of 150 + 1 tokens = 7550 = 471 * 16 + 14: 471 contexts and a padded one.
    assert (cells["bytes"], cells["documents"], cells["tokens"]) == (p.stat().st_size, 50, 7550)
    shard = tmp_path / "o" / "shard_00000000.tar"
    assert (shards["bytes"], shards["documents"]) == (shard.stat().st_size, 472)
    assert "1 shards, 472 contexts of 16 tokens" in out
    assert "1 files, 50 documents, 7,550 tokens" in out


def test_dclm_dataset_reference_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = write_jsonl(tmp_path / "a.jsonl", [{"text": "word " * 30}] * 50)
    src = tmp_path / "ref.json"
    src.write_text(json.dumps({"name": "x", "num_tokens": 1}))
    argv = ["shuffle", "--input", str(p), "--tokenizer", "byte", "--seqlen", "16", "--quiet"]
    argv += ["--local-cell-dir", str(tmp_path / "c"), "--output", str(tmp_path / "o")]
    assert main([*argv, "--input-json", str(src), "--output-json", str(tmp_path / "out.json")]) == 0
    ref = json.loads((tmp_path / "out.json").read_text())
    assert ref["dataset_url"] == f"{tmp_path / 'o'}/"
    assert ref["manifest_url"] == str(tmp_path / "o" / "manifest.jsonl")
    assert (ref["tokenized"], ref["tokenizer"], ref["name"]) == (True, "byte", "x")
    # An existing num_tokens is kept, with a warning that it differs (472 contexts of 16 tokens).
    assert ref["num_tokens"] == 1
    assert "the output has 7552" in capsys.readouterr().err
    assert ref["size"] == sum(f.stat().st_size for f in (tmp_path / "o").iterdir())


def test_a_huge_context_length_is_refused_naming_it(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "in.jsonl", [{"text": "hello world"}] * 10)
    with pytest.raises(
        ConfigError, match=r"context_length \(--context-length/--seqlen\) 1099511627776 is too long"
    ):
        tokshuf.shuffle(data, tmp_path / "cells", tmp_path / "out", "byte", context_length=2**40)


def test_a_long_context_over_a_small_input_reserves_no_more_than_the_input_needs(tmp_path: Path) -> None:
    # 10^8 tokens a context would be 6.4 GB reserved up front for a chunk of 16 contexts: under a
    # 5 GiB address-space limit (the one padded context written needs about 2), the run must still
    # go through on a 1 MB input.
    data = write_jsonl(tmp_path / "in.jsonl", [{"text": "lorem ipsum " * 80}] * 1000)
    script = (
        "import resource, sys, tokshuf\n"
        "resource.setrlimit(resource.RLIMIT_AS, (5 << 30, 5 << 30))\n"
        "tokshuf.shuffle(\n"
        "    sys.argv[1], sys.argv[2], sys.argv[3], 'byte', context_length=10**8, num_threads=2\n"
        ")\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script, str(data), str(tmp_path / "cells"), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
