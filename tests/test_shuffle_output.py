"""`tokshuf shuffle` output: open_lm compatibility, context content, formats and conventions."""

from __future__ import annotations

import gzip
import io
import json
import random
import re
import tarfile
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from conftest import write_jsonl
from shuffle_helpers import (
    model_contexts,
    open_lm_samples,
    random_docs,
    read_contexts,
    read_manifest,
    read_members,
    write_corpus,
)

import tokshuf
from tokshuf.cli import main

SEQLEN = 33


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[list[str]], list[Path]]:
    rng = random.Random(5)
    files = [random_docs(rng, n) for n in (200, 0, 1, 150, 90)]
    files.append(["x" * (SEQLEN - 1)] * 3)  # tokens fill exactly 3 contexts: no padded tail
    root = tmp_path_factory.mktemp("corpus")
    return files, write_corpus(root, files)


@pytest.fixture(scope="module")
def shuffled(corpus: tuple[list[list[str]], list[Path]], tmp_path_factory: pytest.TempPathFactory) -> Path:
    _, paths = corpus
    work = tmp_path_factory.mktemp("run")
    # The corpus has an empty file: bad input, skipped and reported under on_error="skip".
    tokshuf.shuffle(
        paths,
        work / "cells",
        work / "out",
        "byte",
        context_length=SEQLEN,
        wds_chunk_size=37,
        num_threads=2,
        on_error="skip",
    )
    return work / "out"


def test_open_lm_pipeline_reads_every_sample(shuffled: Path) -> None:
    samples = open_lm_samples(shuffled / "manifest.jsonl")
    rows = read_manifest(shuffled)
    assert len(samples) == sum(r["num_sequences"] for r in rows) > 0
    for s in samples:
        assert isinstance(s, list)
        assert len(s) == SEQLEN
        assert all(type(t) is int and 0 <= t < 257 for t in s)


def test_manifest_matches_the_tars(shuffled: Path) -> None:
    rows = read_manifest(shuffled)
    assert [r["shard"] for r in rows] == [f"shard_{i:08d}" for i in range(len(rows))]
    assert all(set(r) == {"shard", "num_sequences"} for r in rows)
    assert sorted(p.name for p in shuffled.iterdir()) == sorted(
        ["commit.json", "manifest.jsonl", "summary.json"] + [f"{r['shard']}.tar" for r in rows]
    )
    for r in rows:
        with tarfile.open(shuffled / f"{r['shard']}.tar") as t:
            assert len(t.getmembers()) == r["num_sequences"]
    # Only the last shard may be partial.
    assert all(r["num_sequences"] == 37 for r in rows[:-1])
    assert 1 <= rows[-1]["num_sequences"] <= 37


def test_members_are_deterministic_plain_files(shuffled: Path) -> None:
    keys = set()
    for shard, name, _ in read_members(shuffled):
        key, ext = name.split(".", 1)
        assert ext == "json.gz"
        assert re.fullmatch(r"\d{8}_\d{8}", key), name
        assert key.startswith(shard.removeprefix("shard_"))
        keys.add(key)
    assert len(keys) == len(read_members(shuffled))
    with tarfile.open(shuffled / "shard_00000000.tar") as t:
        for m in t.getmembers():
            assert (m.isreg(), m.mtime, m.uid, m.gid, m.mode, m.uname, m.gname) == (
                True,
                0,
                0,
                0,
                0o644,
                "",
                "",
            )


def test_contexts_equal_the_model(corpus: tuple[list[list[str]], list[Path]], shuffled: Path) -> None:
    files, _ = corpus
    want = Counter(model_contexts(files, SEQLEN))
    got = Counter(read_contexts(shuffled))
    assert got == want
    # The shuffle changed the order.
    assert read_contexts(shuffled) != model_contexts(files, SEQLEN)


def test_json_is_compact(shuffled: Path) -> None:
    _, _, data = read_members(shuffled)[0]
    text = gzip.decompress(data).decode()
    assert text.startswith("[")
    assert " " not in text


def test_summary_counts(corpus: tuple[list[list[str]], list[Path]], tmp_path: Path) -> None:
    files, paths = corpus
    s = tokshuf.shuffle(
        paths,
        tmp_path / "c",
        tmp_path / "o",
        "byte",
        context_length=SEQLEN,
        wds_chunk_size=50,
        on_error="skip",
    )
    model = model_contexts(files, SEQLEN)
    n_tokens = sum(len(d.encode()) + 1 for docs in files for d in docs)
    assert s["contexts"] == len(model) == s["shards"] * 50 - (-len(model) % 50)
    assert s["tokens"] == n_tokens
    assert s["tokens"] + s["pad_tokens"] == len(model) * SEQLEN
    assert s["documents"] == sum(len(f) for f in files)
    assert s["files"] == len(files)
    assert not s["resumed"]
    assert not s["skipped"]
    assert s["padding_fraction"] == pytest.approx(s["pad_tokens"] / (len(model) * SEQLEN))
    assert s["output_bytes"] == sum(p.stat().st_size for p in (tmp_path / "o").glob("*.tar"))


def test_all_pad_quirk_and_presets(tmp_path: Path) -> None:
    files = [["ab"], [], ["abc"]]  # 3 + 0 + 4 tokens with seqlen 4: the 3rd file fills one context
    paths = write_corpus(tmp_path / "in", files)
    opts = {"context_length": 4, "on_error": "skip"}
    s = tokshuf.shuffle(
        paths, tmp_path / "c1", tmp_path / "o1", "byte", special_tokens="dclm", all_pad_context=True, **opts
    )
    assert Counter(read_contexts(tmp_path / "o1")) == Counter(
        model_contexts(files, 4, eot=0, pad=50256, all_pad=True)
    )
    # The empty file and the file that fills one context exactly each add an all-PAD context.
    assert Counter(read_contexts(tmp_path / "o1"))[(50256,) * 4] == 2
    assert any("PAD id 50256" in w for w in s["warnings"])
    tokshuf.shuffle(
        paths,
        tmp_path / "c2",
        tmp_path / "o2",
        "byte",
        context_length=4,
        bos_token_id=256,
        pad_token_id=255,
        on_error="skip",
    )
    assert Counter(read_contexts(tmp_path / "o2")) == Counter(model_contexts(files, 4, bos=256, pad=255))


def test_npy_members(corpus: tuple[list[list[str]], list[Path]], tmp_path: Path) -> None:
    files, paths = corpus
    tokshuf.shuffle(
        paths,
        tmp_path / "c",
        tmp_path / "o",
        "byte",
        context_length=SEQLEN,
        member_format="npy",
        on_error="skip",
    )
    names = [n for _, n, _ in read_members(tmp_path / "o")]
    assert all(n.endswith(".npy") for n in names)
    _, _, data = read_members(tmp_path / "o")[0]
    assert np.load(io.BytesIO(data)).dtype == np.dtype("<u2")
    assert Counter(read_contexts(tmp_path / "o")) == Counter(model_contexts(files, SEQLEN))


def test_content_key_and_list_values(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "a.jsonl", [{"body": "hello"}, {"body": ["ab", "", "c"]}])
    tokshuf.shuffle(
        [tmp_path / "a.jsonl"], tmp_path / "c", tmp_path / "o", "byte", context_length=5, content_key="body"
    )
    assert Counter(read_contexts(tmp_path / "o")) == Counter(model_contexts([["hello", "abc"]], 5))


def test_shuffle_only_reshuffles_samples(shuffled: Path, tmp_path: Path) -> None:
    # A second member per sample must travel with it.
    extra = tmp_path / "in"
    extra.mkdir()
    with tarfile.open(extra / "x.tar", "w") as t:
        for i in range(30):
            for ext, data in (
                ("json.gz", gzip.compress(json.dumps([i] * 4).encode())),
                ("txt", str(i).encode()),
            ):
                info = tarfile.TarInfo(f"sub/s{i:03d}.{ext}")
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
    s = tokshuf.shuffle(
        [shuffled, extra / "x.tar"],
        tmp_path / "c",
        tmp_path / "o",
        None,
        shuffle_only=True,
        wds_chunk_size=40,
    )
    before = Counter(read_contexts(shuffled))
    pairs = {}
    plain = []
    for _, name, data in read_members(tmp_path / "o"):
        key, ext = name.split(".", 1)
        if ext == "txt":
            pairs.setdefault(key, {})["txt"] = int(data)
        else:
            ctx = json.loads(gzip.decompress(data))
            pairs.setdefault(key, {})["json"] = ctx
            plain.append(tuple(ctx))
    tagged = [p for p in pairs.values() if "txt" in p]
    assert len(tagged) == 30
    assert all(p["json"] == [p["txt"]] * 4 for p in tagged)
    assert Counter(c for c in plain if len(c) == SEQLEN) == before
    assert s["contexts"] == sum(before.values()) + 30 == s["documents"]
    rows = read_manifest(tmp_path / "o")
    assert sum(r["num_sequences"] for r in rows) == s["contexts"]


def test_context_length_and_seqlen_flags_give_the_same_shards(
    corpus: tuple[list[list[str]], list[Path]], tmp_path: Path
) -> None:
    _, paths = corpus

    def run(name: str, *flags: str) -> dict[str, bytes]:
        argv = ["shuffle", "--input", *map(str, paths), "--tokenizer", "byte", "--on-error", "skip"]
        argv += ["--local-cell-dir", str(tmp_path / f"cells-{name}"), "--output", str(tmp_path / name)]
        assert main([*argv, "--wds-chunk-size", "37", "--summary", "none", "--quiet", *flags]) == 0
        return {p.name: p.read_bytes() for p in sorted((tmp_path / name).iterdir())}

    new = run("new", "--context-length", str(SEQLEN), "--num-threads", "2")
    assert new == run("dclm", "--seqlen", str(SEQLEN), "--threads", "2")
    assert {len(c) for c in read_contexts(tmp_path / "new")} == {SEQLEN}
