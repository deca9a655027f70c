"""``tokshuf inspect`` of a shuffle output: every number recomputed with tarfile + gzip + json, the
padding from the independent model of context formation."""

from __future__ import annotations

import json
import logging
import random
import tarfile
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from shuffle_helpers import model_contexts, random_docs, read_contexts, read_manifest, write_corpus

import tokshuf
from tokshuf._inspect import detect
from tokshuf._inspect.shards import ShardsReport, inspect_shards
from tokshuf.cli import main

SEQLEN = 33
EOT, PAD = 0, 300  # PAD outside the byte vocabulary: every PAD seen is padding


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[list[str]], Path]:
    rng = random.Random(7)
    files = [random_docs(rng, n, max_len=120) for n in (60, 25, 40)]
    root = tmp_path_factory.mktemp("shards")
    paths = write_corpus(root, files)
    tokshuf.shuffle(
        paths, root / "cells", root / "out", "byte", context_length=SEQLEN, wds_chunk_size=13, num_threads=1,
        special_tokens="native", eos_token_id=EOT, pad_token_id=PAD, num_local_cells=3,
    )  # fmt: skip
    return files, root / "out"


def _copy(src: Path, dst: Path) -> Path:
    dst.mkdir()
    for p in src.iterdir():
        (dst / p.name).write_bytes(p.read_bytes())
    return dst


def test_verify_reads_every_context(run: tuple[list[list[str]], Path]) -> None:
    files, out = run
    contexts = read_contexts(out)
    rows = read_manifest(out)
    model = model_contexts(files, SEQLEN, eot=EOT, pad=PAD)
    assert sorted(contexts) == sorted(model)  # the helpers read what the model predicts
    flat = Counter(t for c in contexts for t in c)
    tokens = len(contexts) * SEQLEN
    sizes = np.array([(out / f"{r['shard']}.tar").stat().st_size for r in rows])

    assert detect(out) == "shards"
    r = inspect_shards(out, verify=True, eos_token_id=EOT, pad_token_id=PAD)
    assert r.problems == []
    assert (r.shards, r.contexts, r.contexts_read, r.sequence_length, r.tokens_read) == (
        len(rows),
        sum(row["num_sequences"] for row in rows),
        len(contexts),
        SEQLEN,
        tokens,
    )
    assert (r.shard_bytes, r.shard_bytes_min, r.shard_bytes_max) == (sizes.sum(), sizes.min(), sizes.max())
    assert r.shard_bytes_median == np.median(sizes)
    assert r.special_counts == {"eot": flat[EOT], "pad": flat[PAD]}
    assert r.padding_fraction == pytest.approx(sum(c.count(PAD) for c in model) / tokens)
    assert r.padding_fraction > 0
    assert r.top_ids == sorted(flat.items(), key=lambda kv: (-kv[1], kv[0]))[:10]


def test_without_verify_only_the_first_shard_is_decoded(run: tuple[list[list[str]], Path]) -> None:
    _, out = run
    r = inspect_shards(out / "manifest.jsonl", eos_token_id=EOT, pad_token_id=PAD)
    with tarfile.open(out / "shard_00000000.tar") as t:
        first = len(t.getmembers())
    assert (r.contexts_read, r.verified, r.problems) == (first, False, [])


def test_pad_equal_to_eot_counts_the_last_eot_as_a_document_end(tmp_path: Path) -> None:
    files = [["abcdefgh" * 3, "xyz"], ["hello world"]]  # no empty document: EOT EOT only as padding
    paths = write_corpus(tmp_path, files)
    tokshuf.shuffle(paths, tmp_path / "cells", tmp_path / "out", "byte", context_length=SEQLEN, num_threads=1)
    model = model_contexts(files, SEQLEN, eot=0, pad=0)
    # Every token that is not a document's byte or its EOT is padding.
    pads = len(model) * SEQLEN - sum(len(d.encode()) + 1 for f in files for d in f)
    assert pads > 0
    r = inspect_shards(tmp_path / "out", verify=True, eos_token_id=0)  # PAD defaults to EOT (native)
    assert r.pad_token_id == 0
    assert r.padding_fraction == pytest.approx(pads / (len(model) * SEQLEN))


def test_mismatches_between_manifest_and_tars_are_reported(
    run: tuple[list[list[str]], Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _, out = run
    bad = _copy(out, tmp_path / "bad")
    rows = read_manifest(bad)
    rows[0]["num_sequences"] += 1
    (bad / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:-1]))
    (bad / f"{rows[1]['shard']}.tar").unlink()
    with caplog.at_level(logging.WARNING, logger="tokshuf"):
        r = tokshuf.inspect(bad)
    assert isinstance(r, ShardsReport)
    assert [rec.getMessage() for rec in caplog.records] == [f"inspect: {bad}: {p}" for p in r.problems]
    last = rows[-1]["shard"]
    assert any(
        f"{rows[0]['shard']}.tar holds {rows[0]['num_sequences'] - 1} members" in p for p in r.problems
    )
    assert any(f"{rows[1]['shard']}.tar is in manifest.jsonl but missing" in p for p in r.problems)
    assert any(f"{last}.tar is not in manifest.jsonl" in p for p in r.problems)
    # The commit record sees the same tampering: a listed shard gone, the manifest changed.
    assert any(f"{rows[1]['shard']}.tar is in commit.json but missing" in p for p in r.problems)
    assert any(p.startswith("manifest.jsonl holds") and "commit.json lists" in p for p in r.problems)
    assert len(r.problems) == 5
    (bad / "manifest.jsonl").write_text(json.dumps(rows[0]))  # no final newline
    assert any("does not end with a newline" in p for p in inspect_shards(bad).problems)


def test_cli_json(run: tuple[list[list[str]], Path], capsys: Any) -> None:
    _, out = run
    assert main(["inspect", str(out), "--verify", "--eot-id", str(EOT), "--pad-id", str(PAD), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["kind"] == "shards"
    assert got["contexts_read"] == len(read_contexts(out))
    assert "per_shard" not in got
    assert main(["inspect", str(out), "--tokenizer", "byte"]) == 0  # EOT and PAD from the tokenizer
    text = capsys.readouterr().out
    assert "manifest and tars agree" in text
    assert "EOT 0:" in text
