"""Object storage: preprocess and shuffle reading from and writing to a real S3-compatible server
(moto, on 127.0.0.1), byte-identical to the same run on local files, through a proxy that drops
connections, answers 503/500 and cuts bodies short; and with a fault that never clears, a clear
error naming the object and nothing under the final output keys.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import write_jsonl

import tokshuf

FIXTURES = Path(__file__).parent / "fixtures" / "bpe"
CL100K = "tiktoken:cl100k_base"


def corpus(tmp_path: Path) -> list[Path]:
    """Four inputs in three formats, in key order."""
    files = [FIXTURES / "corpus-mixed.jsonl.zst", FIXTURES / "corpus-i18n.jsonl.zst"]
    docs = [{"text": f"document {i} " + "word " * (i % 50)} for i in range(500)]
    files.append(write_jsonl(tmp_path / "c-plain.jsonl", docs))
    files.append(write_jsonl(tmp_path / "d-gzip.jsonl.gz", docs[::-1], compress="gz"))
    return files


def upload(s3: Any, bucket: str, prefix: str, files: list[Path]) -> list[str]:
    names = ["a-mixed.jsonl.zst", "b-i18n.jsonl.zst", "c-plain.jsonl", "d-gzip.jsonl.gz"]
    return [s3.put(bucket, f"{prefix}/{n}", f.read_bytes()) for n, f in zip(names, files, strict=True)]


def outputs(prefix: Path) -> dict[str, bytes]:
    return {ext: Path(f"{prefix}_text_document.{ext}").read_bytes() for ext in ("bin", "idx")}


def test_preprocess_from_and_to_s3_is_byte_identical(s3: Any, tmp_path: Path) -> None:
    bucket = s3.bucket("pre")
    files = corpus(tmp_path)
    upload(s3, bucket, "corpus", files)
    local = tokshuf.preprocess(files, tmp_path / "local", CL100K, append_eod=True, num_threads=2)
    expected = outputs(tmp_path / "local")
    for source in ["s3://pre/corpus", "s3://pre/corpus/", "s3://pre/corpus/*.jsonl*"]:
        out = f"s3://pre/out-{len(s3.keys(bucket, 'out'))}/ds"
        summary = tokshuf.preprocess(source, out, CL100K, append_eod=True, num_threads=2)
        assert summary["documents"] == local["documents"]
        assert summary["outputs"][0]["prefix"] == f"{out}_text_document"
        key = out.removeprefix("s3://pre/")
        for ext, data in expected.items():
            assert s3.get(bucket, f"{key}_text_document.{ext}") == data, (source, ext)
        written = json.loads(s3.get(bucket, f"{key}_summary.json"))
        assert written["tokens"] == local["tokens"]
    # One object, and local inputs with a remote output.
    one = tokshuf.preprocess("s3://pre/corpus/c-plain.jsonl", tmp_path / "one", "byte", append_eod=True)
    assert one["documents"] == 500
    tokshuf.preprocess(files[2], "s3://pre/mixed/ds", "byte", append_eod=True)
    assert s3.get(bucket, "mixed/ds_text_document.bin") == outputs(tmp_path / "one")["bin"]


def test_missing_inputs_name_the_url(s3: Any, tmp_path: Path) -> None:
    s3.bucket("empty")
    for spec in ["s3://empty/nothing-here", "s3://empty/x/*.jsonl"]:
        with pytest.raises((FileNotFoundError, tokshuf.ConfigError), match=spec.split("*")[0]):
            tokshuf.preprocess(spec, tmp_path / "o", "byte")


def test_shuffle_from_and_to_s3_is_byte_identical(s3: Any, tmp_path: Path) -> None:
    bucket = s3.bucket("shuf")
    files = corpus(tmp_path)
    upload(s3, bucket, "corpus", files)
    args: dict[str, Any] = {"sequence_length": 513, "wds_chunk_size": 64, "num_local_cells": 4}
    local = tokshuf.shuffle(files, tmp_path / "cells-l", tmp_path / "out", CL100K, **args)
    remote = tokshuf.shuffle("s3://shuf/corpus/", tmp_path / "cells-r", "s3://shuf/shards", CL100K, **args)
    assert (remote["contexts"], remote["shards"]) == (local["contexts"], local["shards"])
    assert remote["manifest"] == "s3://shuf/shards/manifest.jsonl"
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert s3.keys(bucket, "shards/") == [f"shards/{n}" for n in names]
    for n in names:
        assert s3.get(bucket, f"shards/{n}") == (tmp_path / "out" / n).read_bytes(), n
    # Rerun: already complete. Another run into the same output: refused.
    again = tokshuf.shuffle("s3://shuf/corpus/", tmp_path / "cells-r", "s3://shuf/shards", CL100K, **args)
    assert again["already_complete"]
    with pytest.raises(tokshuf.ConfigError, match="already holds a dataset"):
        tokshuf.shuffle("s3://shuf/corpus/", tmp_path / "cells-x", "s3://shuf/shards", CL100K, **args)


@pytest.mark.parametrize("seed", [1, 2])
def test_faults_do_not_change_the_output(s3: Any, tmp_path: Path, seed: int) -> None:
    bucket = s3.bucket(f"faulty{seed}")
    files = corpus(tmp_path)
    upload(s3, bucket, "corpus", files)
    tokshuf.preprocess(files, tmp_path / "local", CL100K, append_eod=True, num_threads=2)
    with s3.faults(rate=0.3, seed=seed) as faults:
        tokshuf.preprocess(f"s3://{bucket}/corpus", f"s3://{bucket}/out/ds", CL100K, append_eod=True)
    assert faults.injected > 0
    for ext, data in outputs(tmp_path / "local").items():
        assert s3.get(bucket, f"out/ds_text_document.{ext}") == data, ext


def test_a_fault_that_never_clears(s3: Any, tmp_path: Path) -> None:
    bucket = s3.bucket("broken")
    upload(s3, bucket, "corpus", corpus(tmp_path))
    env = {**os.environ, "TOKSHUF_STORAGE_RETRY_SECONDS": "1"}
    cmd = [sys.executable, "-m", "tokshuf", "preprocess", "--input", "s3://broken/corpus"]
    cmd += ["--output-prefix", "s3://broken/out/ds", "--tokenizer", "byte", "--quiet"]
    with s3.faults(rate=1.0, kinds=("503",), only="b-i18n"):
        run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert "s3://broken/corpus/b-i18n.jsonl.zst" in run.stderr, run.stderr
    assert s3.keys(bucket, "out/") == []
