"""A preprocess cut into tasks: `--shard i/N` parts merged by `merge --parts` are byte-identical
to the one-task run, for any N (more tasks than inputs included), in the CLI, in Python and from
a Slurm array's environment; incomplete or mismatched parts are refused.
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

CL100K = "tiktoken:cl100k_base"


def corpus(tmp_path: Path) -> Path:
    d = tmp_path / "corpus"
    d.mkdir()
    for f in range(5):
        docs = [
            {"text": f"file {f} doc {i} " + "word " * ((i * 7 + f) % 60), "title": f"t{f}.{i}"}
            for i in range(40 * (f + 1))
        ]
        if f == 2:
            docs.insert(3, {"text": 17})  # a bad line, skipped and counted
        write_jsonl(
            d / f"{f:02d}.jsonl.gz" if f % 2 else d / f"{f:02d}.jsonl", docs, compress="gz" if f % 2 else None
        )
    return d


def outputs(prefix: Path, keys: tuple[str, ...] = ("text", "title")) -> dict[str, bytes]:
    return {f"{k}.{e}": Path(f"{prefix}_{k}_document.{e}").read_bytes() for k in keys for e in ("bin", "idx")}


def run(inputs: Any, prefix: Path, **kw: Any) -> dict[str, Any]:
    return tokshuf.preprocess(
        inputs, prefix, CL100K, json_keys=("text", "title"), append_eod=True, on_error="skip", **kw
    )


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8])
def test_parts_merge_to_the_one_task_run(tmp_path: Path, n: int) -> None:
    data = corpus(tmp_path)
    whole = run(data, tmp_path / "whole")
    for i in reversed(range(n)):  # any order
        part = run(data, tmp_path / "out" / "c4", shard=(i, n))
        assert part["task"] == {"index": i, "count": n}
    merged = tokshuf.merge_parts(tmp_path / "out" / "c4")
    assert outputs(tmp_path / "out" / "c4") == outputs(tmp_path / "whole")
    for field in ("files", "lines", "documents", "tokens", "input_bytes", "skipped"):
        assert merged[field] == whole[field], field
    assert merged["inputs"] == whole["inputs"]
    written = json.loads((tmp_path / "out" / "c4_summary.json").read_text())
    assert written["parts"] == n
    assert written["outputs"][0]["documents"] == whole["outputs"][0]["documents"]


def test_cli_and_slurm_array(tmp_path: Path) -> None:
    data = corpus(tmp_path)
    run(data, tmp_path / "whole")
    base = [sys.executable, "-m", "tokshuf", "preprocess", "--input", str(data), "--output-prefix"]
    base += [str(tmp_path / "p" / "ds"), "--tokenizer", CL100K, "--json-keys", "text", "title"]
    base += ["--append-eod", "--on-error", "skip", "--progress", "none", "--shard", "auto"]
    for task in (4, 5, 6):  # an array 4-6
        env = {**os.environ, "SLURM_ARRAY_TASK_ID": str(task), "SLURM_ARRAY_TASK_MIN": "4"}
        env["SLURM_ARRAY_TASK_COUNT"] = "3"
        subprocess.run(base, env=env, check=True, capture_output=True)
    merge = [sys.executable, "-m", "tokshuf", "merge", "--parts", str(tmp_path / "p" / "ds")]
    subprocess.run(merge, check=True, capture_output=True)
    assert outputs(tmp_path / "p" / "ds") == outputs(tmp_path / "whole")
    outside = subprocess.run(base, capture_output=True, text=True, check=False)
    assert outside.returncode != 0
    assert "SLURM_ARRAY_TASK_ID" in outside.stderr


def test_missing_and_mismatched_parts_are_refused(tmp_path: Path) -> None:
    data = corpus(tmp_path)
    run(data, tmp_path / "a" / "ds", shard=(0, 3))
    run(data, tmp_path / "a" / "ds", shard=(2, 3))
    with pytest.raises(tokshuf.ConfigError, match=r"1 of 3 parts are missing \(tasks \[1\]\)"):
        tokshuf.merge_parts(tmp_path / "a" / "ds")
    tokshuf.preprocess(
        data, tmp_path / "a" / "ds", CL100K, json_keys=("text", "title"), on_error="skip", shard=(1, 3)
    )
    with pytest.raises(tokshuf.ConfigError, match="different config"):
        tokshuf.merge_parts(tmp_path / "a" / "ds")
    with pytest.raises(tokshuf.ConfigError, match="task"):
        run(data, tmp_path / "b", shard="3/3")
    with pytest.raises(tokshuf.ConfigError, match="partitions"):
        run(data, tmp_path / "b", shard="0/3", partitions=2)
