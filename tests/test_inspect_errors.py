"""``tokshuf inspect`` of a damaged or foreign artifact reports the fault by file and field, never
with a traceback (issue 40, item 5); ``--verify`` fails the command when verification finds
problems; a failed ``--summary`` write leaves nothing behind; a shuffle output in object storage
is inspected as a local one."""

from __future__ import annotations

import gzip
import io
import json
import resource
import signal
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import write_jsonl

import tokshuf
from tokshuf.cli import main


def run(capsys: Any, *argv: str) -> tuple[int, str, str]:
    code = main(["inspect", *argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("ds")
    src = write_jsonl(d / "a.jsonl", [{"text": f"document {i} " * 4} for i in range(40)])
    tokshuf.preprocess(src, d / "a", "byte", append_eod=True, summary=False)
    return d / "a_text_document"


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("sh")
    src = write_jsonl(d / "a.jsonl", [{"text": f"word {i} " * 30} for i in range(120)])
    tokshuf.shuffle(src, d / "cells", d / "out", "byte", context_length=65, wds_chunk_size=40, num_threads=1)
    return d / "out"


def copy_tree(src: Path, dst: Path) -> Path:
    dst.mkdir()
    for p in src.iterdir():
        (dst / p.name).write_bytes(p.read_bytes())
    return dst


@pytest.mark.parametrize(
    ("yaml", "field"),
    [
        ("data_path: {ds}\nseq_length: 64\ntrain_samples: many\n", "train_samples"),
        ("data_path: {ds}\nseq_length: 64\ntrain_iters: 5\nglobal_batch_size: big\n", "global_batch_size"),
        (
            "data_path: {ds}\nseq_length: 64\ntrain_iters: 5\nglobal_batch_size: 2\neval_iters: 1.5\n",
            "eval_iters",
        ),
        ("data_path: {ds}\nseq_length: sixty\ntrain_samples: 4\n", "sequence_length"),
        (
            "data:\n  dataset:\n    dataset_folder: {ds}\ntokens:\n  sequence_length: 64\n  train_steps: 3\n"
            "  micro_batch_size: big\n",
            "micro_batch_size",
        ),
        (
            "data:\n  dataset:\n    dataset_folder: {ds}\ntokens:\n  sequence_length: 64\n  train_steps: 3\n"
            "parallelism: [1]\n",
            "parallelism",
        ),
    ],
)
def test_a_blend_yaml_with_a_field_of_the_wrong_kind_names_file_and_field(
    tmp_path: Path, dataset: Path, capsys: Any, yaml: str, field: str
) -> None:
    y = tmp_path / "blend.yaml"
    y.write_text(yaml.format(ds=dataset))
    code, _, err = run(capsys, str(y))
    assert code == 1
    assert str(y) in err
    assert field in err, err


def test_document_decoded_with_another_tokenizer_is_a_note(tmp_path: Path, capsys: Any) -> None:
    # ids past r50k_base's vocabulary (as a cl100k_base dataset has)
    with tokshuf.IndexedDatasetWriter(tmp_path / "big", np.int32) as w:
        w.add_document(np.array([70000, 90000, 5], np.int32), [3])
    code, out, _ = run(capsys, str(tmp_path / "big"), "--doc", "0", "--tokenizer", "tiktoken:r50k_base")
    assert code == 0
    assert "cannot decode these ids with 'tiktoken:r50k_base'" in out
    assert "70000" in out


def test_a_manifest_count_that_is_not_a_number_is_a_problem(
    tmp_path: Path, shards: Path, capsys: Any
) -> None:
    out = copy_tree(shards, tmp_path / "sh")
    rows = [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()]
    rows[0]["num_sequences"] = "many"
    rows[1]["num_sequences"] = None
    (out / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, stdout, _ = run(capsys, str(out), "--json")
    assert code == 0
    problems = json.loads(stdout)["problems"]
    assert "manifest.jsonl line 1: num_sequences must be a non-negative integer, got 'many'" in problems
    assert "manifest.jsonl line 2: num_sequences must be a non-negative integer, got None" in problems


@pytest.mark.parametrize("payload", [b"null", b"7", b'{"a": 1}', b'[1, "x"]', b"[1, true]"])
def test_a_member_that_is_not_a_context_is_a_problem(
    tmp_path: Path, shards: Path, capsys: Any, payload: bytes
) -> None:
    out = copy_tree(shards, tmp_path / "sh")
    first = sorted(out.glob("*.tar"))[0]
    with tarfile.open(first, "a") as t:
        data = gzip.compress(payload)
        info = tarfile.TarInfo("zzz.json.gz")
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    code, stdout, _ = run(capsys, str(out), "--json")
    assert code == 0
    problems = json.loads(stdout)["problems"]
    assert any("member zzz.json.gz does not decode: expected a JSON list of token ids" in p for p in problems)


def test_verify_fails_the_command_when_it_finds_problems(tmp_path: Path, shards: Path, capsys: Any) -> None:
    code, _, _ = run(capsys, str(shards), "--verify")
    assert code == 0
    out = copy_tree(shards, tmp_path / "sh")
    tars = sorted(out.glob("*.tar"))
    tars[0].write_bytes(tars[0].read_bytes()[:3000])  # cut short
    code, stdout, err = run(capsys, str(out), "--verify")
    assert code == 1
    assert "PROBLEMS" in stdout  # the report is still printed
    assert f"{out}: verification failed" in err
    # Without --verify the same problems are reported, and the command succeeds (a look, not a check).
    code, _, _ = run(capsys, str(out))
    assert code == 0


def test_a_summary_path_that_is_a_directory_is_refused(tmp_path: Path, dataset: Path, capsys: Any) -> None:
    target = tmp_path / "out"
    target.mkdir()
    code, _, err = run(capsys, str(dataset), "--summary", str(target))
    assert code == 1
    assert f"the summary's path is a directory: '{target}'" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def _small_files() -> None:
    # Writes past 100 bytes fail with EFBIG (instead of the signal that would kill the process).
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (100, 100))


def test_a_failed_summary_write_leaves_no_temporary(tmp_path: Path, dataset: Path) -> None:
    out = tmp_path / "reports"
    out.mkdir()
    run = subprocess.run(
        [sys.executable, "-m", "tokshuf", "inspect", str(dataset), "--summary", str(out / "s.json")],
        capture_output=True,
        text=True,
        preexec_fn=_small_files,
        check=False,
    )
    assert run.returncode == 1, run.stderr
    assert "File too large" in run.stderr
    assert "Traceback" not in run.stderr
    assert list(out.iterdir()) == []


def test_a_shuffle_output_in_object_storage(
    s3: Any, tmp_path: Path, shards: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOKSHUF_CACHE_DIR", str(tmp_path / "cache"))
    bucket = s3.bucket("inspected-shards")
    for p in shards.iterdir():
        s3.put(bucket, f"run/shards/{p.name}", p.read_bytes())
    s3.put(bucket, "run/shards/sub/shard_99999999.tar", b"not a direct child")
    local = json.loads(_json(capsys, str(shards)))
    for url in (
        f"s3://{bucket}/run/shards",
        f"s3://{bucket}/run/shards/",
        f"s3://{bucket}/run/shards/manifest.jsonl",
    ):
        got = json.loads(_json(capsys, url))
        assert got["path"] == f"s3://{bucket}/run/shards"
        for key in (
            "shards",
            "contexts",
            "shard_bytes",
            "contexts_read",
            "sequence_length",
            "top_ids",
            "problems",
        ):
            assert got[key] == local[key], key
    verified = json.loads(_json(capsys, f"s3://{bucket}/run/shards", "--verify"))
    assert verified["contexts_read"] == verified["contexts"] == local["contexts"]
    assert verified["problems"] == []
    # A damaged shard in the store fails --verify as a local one does.
    tars = sorted(shards.glob("*.tar"))
    s3.put(bucket, f"run/shards/{tars[1].name}", tars[1].read_bytes()[:2000])
    code, _, err = run(capsys, f"s3://{bucket}/run/shards", "--verify")
    assert code == 1
    assert "verification failed" in err


def _json(capsys: Any, *argv: str) -> str:
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    return out


def test_a_url_naming_nothing_says_what_was_looked_for(s3: Any, capsys: Any) -> None:
    bucket = s3.bucket("inspected-nothing")
    code, _, err = run(capsys, f"s3://{bucket}/nothing/here")
    assert code == 1
    assert "manifest.jsonl (a shuffle output) nor" in err
    assert f"s3://{bucket}/nothing/here.idx" in err


@pytest.mark.parametrize(
    "url", ["hf://datasets/org/name/x.parquet", "ftp://host/x.jsonl", "file:///tmp/x.jsonl"]
)
def test_an_unsupported_scheme_is_named(tmp_path: Path, url: str, capsys: Any) -> None:
    scheme = url.split("://")[0]
    out = tmp_path / "o"
    code = main(["preprocess", "--input", url, "--output-prefix", str(out), "--tokenizer", "byte", "--quiet"])
    err = capsys.readouterr().err
    assert code == 1
    assert f"unsupported scheme {scheme}" in err
    assert "supported: s3, gs, az, http, https" in err
    assert "does not exist" not in err
    # as an output, as a reader's prefix, to inspect: the same words, and nothing created
    src = write_jsonl(tmp_path / "a.jsonl", [{"text": "abc"}])
    with pytest.raises(tokshuf.ConfigError, match=f"unsupported scheme {scheme}"):
        tokshuf.preprocess(src, url, "byte", summary=False)
    with pytest.raises(tokshuf.ConfigError, match=f"unsupported scheme {scheme}"):
        tokshuf.IndexedDataset(url)
    code, _, err = run(capsys, url)
    assert code == 1
    assert f"unsupported scheme {scheme}" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl"]
