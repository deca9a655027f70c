"""Command lines of the tools tokshuf replaces paste in: Megatron's tokenizer flags for
``preprocess``, tokshuf-rust's ``--use-tiktoken`` for ``shuffle``; every numeric flag is checked
by argparse (exit 2, the flag named, no traceback); hub names are refused with what to fetch."""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import re
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES
from corpus import GPT2

import tokshuf
from tokshuf import _core
from tokshuf.cli import build_parser, main

TRICKY = FIXTURES / "megatron_hf" / "tricky.jsonl"
GOLDEN = json.loads((FIXTURES / "megatron_hf" / "golden.json").read_text())["outputs"]["tricky"]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def preprocess(tmp_path: Path, name: str, *flags: str) -> Path:
    out = tmp_path / name
    args = ["preprocess", "--input", str(TRICKY), "--output-prefix", str(out), "--append-eod", "--quiet"]
    assert main([*args, *flags]) == 0
    return Path(f"{out}_text_document")


def run_cli(*args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tokshuf", *args], capture_output=True, text=True, **kw)


def test_megatron_hugging_face_flags_match_megatron(tmp_path: Path) -> None:
    ds = preprocess(
        tmp_path, "hf", "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", str(GPT2)
    )
    assert sha256(ds.with_suffix(".bin")) == GOLDEN["bin_sha256"]
    assert sha256(ds.with_suffix(".idx")) == GOLDEN["idx_sha256"]


def test_megatron_gpt2_bpe_flags_give_gpt2_ids(tmp_path: Path) -> None:
    # vocab.json and merges.txt, as GPT-2 ships them, from the tokenizer.json that holds them.
    model = json.loads((GPT2 / "tokenizer.json").read_text())["model"]
    (tmp_path / "vocab.json").write_text(json.dumps(model["vocab"]))
    (tmp_path / "merges.txt").write_text("#version: 0.2\n" + "\n".join(model["merges"]) + "\n")
    flags = ["--tokenizer-type", "GPT2BPETokenizer", "--legacy-tokenizer", "--dataset-impl", "mmap"]
    flags += ["--vocab-file", str(tmp_path / "vocab.json"), "--merge-file", str(tmp_path / "merges.txt")]
    ours = preprocess(tmp_path, "bpe", *flags)
    # Megatron's GPT2Tokenizer is OpenAI's GPT-2 encoder: tiktoken's r50k_base, where
    # "<|endoftext|>" written in the text is text (the tricky corpus has one).
    reference = preprocess(tmp_path, "r50k", "--tokenizer", "tiktoken:r50k_base")
    assert ours.with_suffix(".bin").read_bytes() == reference.with_suffix(".bin").read_bytes()
    assert ours.with_suffix(".idx").read_bytes() == reference.with_suffix(".idx").read_bytes()
    tok = tokshuf.Tokenizer.from_gpt2_bpe(tmp_path / "vocab.json", tmp_path / "merges.txt")
    assert tok.eos_token_id == model["vocab"]["<|endoftext|>"]


def test_megatron_tiktokenizer_flags_give_tiktoken_ids_after_the_special_tokens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tiktoken = pytest.importorskip("tiktoken")
    monkeypatch.setenv("TOKSHUF_CACHE_DIR", str(tmp_path / "cache"))
    # Megatron's vocabulary file: ranks 0-255 are the bytes in order, then GPT-2's merged tokens.
    data = _core.tiktoken_encoding_data("r50k_base")
    ranks = {
        base64.b64decode(t): int(r) for t, r in (ln.split() for ln in data["tiktoken_file"].splitlines())
    }
    order = [bytes([i]) for i in range(256)] + [
        b for b, _ in sorted(ranks.items(), key=lambda kv: kv[1]) if len(b) > 1
    ]
    entries = [
        {"rank": i, "token_bytes": base64.b64encode(b).decode(), "token_str": ""} for i, b in enumerate(order)
    ]
    (tmp_path / "vocab.json").write_text(json.dumps(entries))
    flags = ["--tokenizer-type", "TikTokenizer", "--tokenizer-model", str(tmp_path / "vocab.json")]
    ds = preprocess(tmp_path, "tik", *flags, "--tiktoken-pattern", "v2", "--vocab-size", "40000")
    # Megatron's PATTERN_TIKTOKEN_V2, 1000 special tokens first, "</s>" (2) ends documents.
    pattern = (
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?"
        r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|"
        r"\s*[\r\n]+|\s+(?!\S)|\s+"
    )
    kept = {b: i for i, b in enumerate(order[: 40000 - 1000])}
    enc = tiktoken.Encoding("megatron", pat_str=pattern, mergeable_ranks=kept, special_tokens={})
    got = tokshuf.IndexedDataset(ds)
    expected = []
    for line in TRICKY.read_text().split("\n")[:-1]:
        text = json.loads(line)["text"]
        sequences = [
            [t + 1000 for t in enc.encode_ordinary(p)] for p in (text if isinstance(text, list) else [text])
        ]
        sequences = [s for s in sequences if s]
        if sequences:
            sequences[-1].append(2)
        expected.extend(sequences)
    assert [got[i].tolist() for i in range(len(got))] == expected


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--tokenizer", "byte", "--split-sentences"], "--split-sentences is not supported"),
        ([], "a tokenizer is required"),
        (
            ["--tokenizer-type", "BertWordPieceCase"],
            "BertWordPieceCase is not supported; supported: HuggingFace",
        ),
        (
            ["--tokenizer-type", "GPT2BPETokenizer", "--vocab-file", "v.json"],
            "needs --vocab-file and --merge-file",
        ),
        (
            ["--tokenizer-type", "TikTokenizer", "--tokenizer-model", "v.json", "--tiktoken-pattern", "v1"],
            "only v2",
        ),
        (["--tokenizer", "byte", "--tokenizer-type", "HuggingFaceTokenizer"], "not both"),
        (["--tokenizer", "byte", "--no-such-flag"], "unrecognized arguments: --no-such-flag"),
    ],
)
def test_preprocess_usage_errors(tmp_path: Path, flags: list[str], message: str) -> None:
    run = run_cli("preprocess", "--input", str(TRICKY), "--output-prefix", str(tmp_path / "x"), *flags)
    assert run.returncode == 2
    assert message in run.stderr
    assert run.stderr.startswith("usage: tokshuf preprocess"), run.stderr
    assert not list(tmp_path.iterdir())


def test_a_bad_flag_shows_its_subcommands_usage(tmp_path: Path) -> None:
    run = run_cli("shuffle", "--input", "x", "--local-cell-dir", "c", "--output", "o", "--workers", "2")
    assert run.returncode == 2
    assert run.stderr.startswith("usage: tokshuf shuffle")
    assert "unrecognized arguments: --workers 2" in run.stderr


def _integer_flags() -> list[tuple[str, list[str], Any]]:
    """(label, subcommand path, flag, type) of every option that takes an integer."""
    found = []

    def walk(parser: argparse.ArgumentParser, path: list[str]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, [*path, name])
            elif action.type is int or getattr(action.type, "__name__", "") == "integer":
                flag = action.option_strings[0]
                found.append((f"{' '.join(path)} {flag}", [*path, flag], action.type))

    walk(build_parser(), [])
    return found


INTEGER_FLAGS = _integer_flags()


def test_every_integer_flag_goes_through_the_checked_type() -> None:
    assert len(INTEGER_FLAGS) > 25
    assert [label for label, _, kind in INTEGER_FLAGS if kind is int] == []


@pytest.mark.parametrize(("label", "args"), [(label, args) for label, args, _ in INTEGER_FLAGS])
@pytest.mark.parametrize("value", ["-1", "2" * 25, "1.5", "0x10", ""])
def test_bad_integers_exit_2_naming_the_flag(
    label: str, args: list[str], value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args([*args, value])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    # A flag with aliases is named with all of them: "argument --threads/--num-threads: ".
    assert re.search(rf"argument {re.escape(args[-1])}(/--[\w-]+)*: ", err), err
    assert "Traceback" not in err


def test_thread_counts_beyond_the_bound_are_refused_before_the_run(tmp_path: Path) -> None:
    dirs = ["--local-cell-dir", str(tmp_path / "c"), "--output", str(tmp_path / "o")]
    run = run_cli("shuffle", "--input", str(TRICKY), *dirs, "--tokenizer", "byte", "--threads", "100000")
    assert run.returncode == 2
    assert "--threads/--num-threads: must be between 0 and 1024, got 100000" in run.stderr
    with pytest.raises(tokshuf.ConfigError, match="num_threads must be between 1 and 1024"):
        tokshuf.shuffle(TRICKY, tmp_path / "c", tmp_path / "o", "byte", num_threads=100_000)
    with pytest.raises(tokshuf.ConfigError, match="num_threads must be between 1 and 1024"):
        tokshuf.preprocess(TRICKY, tmp_path / "p", "byte", num_threads=0)
    assert not (tmp_path / "o").exists()


def test_num_threads_is_an_alias_of_each_commands_thread_flag(tmp_path: Path) -> None:
    parser = build_parser()
    ids = ["--eos-token-id", "0", "--pad-token-id", "0"]
    required = {
        "preprocess": ["--input", "x", "--output-prefix", "p"],
        "shuffle": ["--input", "x", "--local-cell-dir", "c", "--output", "o"],
        "instances": ["x", "--strategy", "fsl", "--sequence-length", "8", *ids],
    }
    for command, old in (("preprocess", "--workers"), ("shuffle", "--threads"), ("instances", "--threads")):
        for flag in (old, "--num-threads"):
            args = parser.parse_args([command, *required[command], flag, "3"])
            assert args.num_threads == 3, (command, flag)
    # preprocess: the same outputs, and the summary counts the threads given.
    old = preprocess(tmp_path, "old", "--tokenizer", "byte", "--workers", "2")
    new = preprocess(tmp_path, "new", "--tokenizer", "byte", "--num-threads", "2")
    for ext in (".bin", ".idx"):
        assert sha256(Path(f"{old}{ext}")) == sha256(Path(f"{new}{ext}"))
    summary = json.loads((tmp_path / "new_summary.json").read_text())
    assert summary["workers"] == 2


def test_partitions_beyond_the_open_file_limit_are_refused_up_front(tmp_path: Path) -> None:
    def low_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

    out = tmp_path / "p"
    args = ["--input", str(TRICKY), "--output-prefix", str(out), "--tokenizer", "byte", "--quiet"]
    run = run_cli("preprocess", *args, "--partitions", "1000", preexec_fn=low_limit, timeout=60)
    assert run.returncode == 1
    assert "partitions=1000" in run.stderr
    assert "limit of 256 (`ulimit -n`" in run.stderr
    assert not list(tmp_path.iterdir())
    assert run_cli("preprocess", *args, "--partitions", "8", preexec_fn=low_limit, timeout=60).returncode == 0


@pytest.mark.parametrize("spec", ["EleutherAI/gpt-neox-20b", "hf:EleutherAI/gpt-neox-20b"])
def test_hub_names_say_which_files_to_fetch(tmp_path: Path, spec: str) -> None:
    with pytest.raises(tokshuf.ConfigError) as info:
        tokshuf.Tokenizer(spec)
    msg = str(info.value)
    assert "give a local tokenizer.json (no downloads)" in msg
    assert "huggingface.co/EleutherAI/gpt-neox-20b/resolve/main/tokenizer.json" in msg
    assert "tokenizer_config.json" in msg
    with pytest.raises(tokshuf.ConfigError, match="no downloads"):
        tokshuf.shuffle(TRICKY, tmp_path / "c", tmp_path / "o", spec)
    assert not (tmp_path / "c").exists()


def test_use_tiktoken_is_accepted_and_names_tokshuf_rust_files(tmp_path: Path) -> None:
    base = ["shuffle", "--input", str(TRICKY), "--local-cell-dir", str(tmp_path / "c"), "--quiet"]
    run = run_cli(
        *base, "--output", str(tmp_path / "o"), "--use-tiktoken", "--tokenizer", "EleutherAI/gpt-neox-20b"
    )
    assert run.returncode == 2
    assert "EleutherAI_gpt-neox-20b.tiktoken" in run.stderr
    assert "--special-tokens dclm-neox" in run.stderr
    run = run_cli(
        *base, "--output", str(tmp_path / "o"), "--use-tiktoken", "--tokenizer", "tiktoken:r50k_base"
    )
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "o" / "manifest.jsonl").is_file()


def _documents(ds: Path) -> list[list[int]]:
    d = tokshuf.IndexedDataset(ds)
    return [[int(t) for s in d.document(k) for t in s] for k in range(d.num_documents)]


def test_megatrons_remaining_preprocess_flags_paste_in(tmp_path: Path, capsys: Any) -> None:
    docs = [{"text": f"line {i} " * (i % 5 + 1)} for i in range(40)]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(d) + "\n" for d in docs))

    def run(name: str, *flags: str) -> tuple[list[list[int]], str]:
        args = ["preprocess", "--input", str(src), "--output-prefix", str(tmp_path / name), "--workers", "2"]
        assert main([*args, "--tokenizer", "byte", "--progress", "none", *flags]) == 0
        return _documents(tmp_path / f"{name}_text_document"), capsys.readouterr().err

    in_order, _ = run("one")
    round_robin, _ = run("rr", "--partitions", "4")
    assert round_robin != in_order  # Megatron's default with P > 1: lines 0, 4, 8, ..., then 1, 5, ...
    # --keep-sequential-samples: contiguous blocks merged in order, i.e. the input order.
    kept, note = run("seq", "--partitions", "4", "--keep-sequential-samples")
    assert kept == in_order
    assert "--keep-sequential-samples" in note
    # Extra ids only exist in Megatron's BERT/T5 tokenizers; the benchmark flags change nothing.
    extra, note = run("extra", "--vocab-extra-ids", "100")
    assert extra == in_order
    assert "--vocab-extra-ids 100 is ignored" in note
    flags = ["--find-optimal-num-workers", "--workers-to-check", "1", "2", "--performance-dir"]
    bench, note = run("bench", *flags, str(tmp_path / "perf"), "--max-documents", "10")
    assert bench == in_order
    assert "--find-optimal-num-workers, --workers-to-check, --performance-dir, --max-documents" in note
    assert not (tmp_path / "perf").exists()
    # --vocab-extra-ids 0 (Megatron's default) says nothing.
    _, note = run("zero", "--vocab-extra-ids", "0")
    assert "note" not in note


def test_dclm_command_lines_paste_in_and_say_which_ids_pad(tmp_path: Path, capsys: Any) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"text": f"doc {i} " * 7}) + "\n" for i in range(30)))

    def run(name: str, *flags: str) -> tuple[int, str, str]:
        args = ["shuffle", "--input", str(src), "--local-cell-dir", str(tmp_path / f"c-{name}")]
        args += ["--output", str(tmp_path / name), "--seqlen", "65", "--num-local-cells", "2"]
        code = main([*args, "--progress", "none", *flags])
        out, err = capsys.readouterr()
        return code, out, err

    code, out, err = run("retries", "--tokenizer", "byte", "--s3-retries", "3")
    assert code == 0
    assert "--s3-retries 3 is ignored" in err
    # Without --special-tokens the run says which ids it used, and how to get tokshuf-rust's.
    assert "ids (--special-tokens native, the default): EOT 0 after every document, PAD 0" in out
    assert "padding cannot be told from it" in out
    assert "--special-tokens dclm" in out
    for preset in ("native", "dclm"):
        code, out, _ = run(preset, "--tokenizer", "byte", "--special-tokens", preset)
        assert code == 0
        assert "--special-tokens native, the default" not in out
    # The same bytes as naming the default.
    assert (tmp_path / "retries" / "manifest.jsonl").read_bytes() == (
        tmp_path / "native" / "manifest.jsonl"
    ).read_bytes()
    # tokshuf-rust's default tokenizer is a hub name: say what to give instead.
    code, _, err = run("none")
    assert code == 2
    assert "EleutherAI/gpt-neox-20b" in err
    assert "--special-tokens dclm" in err
