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


# -- shuffle cut into tasks --------------------------------------------------------------------
SHUFFLE: dict[str, Any] = {
    "context_length": 129,
    "wds_chunk_size": 40,
    "num_local_cells": 5,
    "on_error": "skip",
}


def shards(out: Path) -> dict[str, bytes]:
    return {
        p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.name.startswith(("shard_", "manifest"))
    }


@pytest.mark.parametrize(("n", "m"), [(1, 1), (2, 3), (5, 1), (8, 4)])
def test_shuffle_tasks_match_the_one_process_run(tmp_path: Path, n: int, m: int) -> None:
    data = corpus(tmp_path)
    whole = tokshuf.shuffle(data, tmp_path / "cells-1", tmp_path / "out-1", CL100K, **SHUFFLE)
    cells, out = tmp_path / "shared-cells", tmp_path / "out-n"
    for i in reversed(range(n)):
        tokshuf.shuffle(data, cells, out, CL100K, stage="cells", task=(i, n), **SHUFFLE)
    with pytest.raises(tokshuf.ConfigError, match="not written yet"):
        tokshuf.shuffle(data, cells, out, CL100K, stage="manifest", **SHUFFLE)
    for j in range(m):
        tokshuf.shuffle(data, cells, out, CL100K, stage="shards", task=(j, m), **SHUFFLE)
    assert not (out / "summary.json").exists()  # a task's summary is not the run's
    done = tokshuf.shuffle(data, cells, out, CL100K, stage="manifest", **SHUFFLE)
    assert json.loads((out / "summary.json").read_text()) == done
    assert shards(out) == shards(tmp_path / "out-1")
    assert len(shards(out)) == whole["shards"] + 1
    for field in ("contexts", "documents", "tokens", "pad_tokens", "lines", "skipped", "shards"):
        assert done[field] == whole[field], field


def test_shuffle_task_reruns_and_refusals(tmp_path: Path) -> None:
    data = corpus(tmp_path)
    cells, out = tmp_path / "cells", tmp_path / "out"
    tokshuf.shuffle(data, cells, out, CL100K, stage="cells", task=(0, 2), **SHUFFLE)
    with pytest.raises(tokshuf.ConfigError, match="cells task 1/2 has not finished"):
        tokshuf.shuffle(data, cells, out, CL100K, stage="shards", task=(0, 1), **SHUFFLE)
    # A task run again (a retry, or a duplicate) changes nothing.
    again = tokshuf.shuffle(data, cells, out, CL100K, stage="cells", task=(0, 2), **SHUFFLE)
    assert again["task"] == {"step": "cells", "index": 0, "count": 2}
    tokshuf.shuffle(data, cells, out, CL100K, stage="cells", task=(1, 2), **SHUFFLE)
    tokshuf.shuffle(data, cells, out, CL100K, stage="shards", task=(0, 1), **SHUFFLE)
    first = shards(out)
    tokshuf.shuffle(data, cells, out, CL100K, stage="shards", task=(0, 1), **SHUFFLE)
    assert shards(out) == first
    with pytest.raises(tokshuf.ConfigError, match="seed"):
        tokshuf.shuffle(data, cells, out, CL100K, stage="shards", task=(0, 1), **{**SHUFFLE, "seed": 7})
    with pytest.raises(tokshuf.ConfigError, match="stage"):
        tokshuf.shuffle(data, cells, out, CL100K, task=(0, 1), **SHUFFLE)


def test_shuffle_stages_from_a_slurm_array(tmp_path: Path) -> None:
    data = corpus(tmp_path)
    tokshuf.shuffle(data, tmp_path / "c1", tmp_path / "o1", CL100K, **SHUFFLE)
    base = [sys.executable, "-m", "tokshuf", "shuffle", "--input", str(data), "--local-cell-dir"]
    base += [str(tmp_path / "cn"), "--output", str(tmp_path / "on"), "--tokenizer", CL100K, "--seqlen", "129"]
    base += ["--wds-chunk-size", "40", "--num-local-cells", "5", "--on-error", "skip", "--progress", "none"]
    for stage, count in (("cells", 3), ("shards", 2)):
        for task in range(count):
            env = {**os.environ, "SLURM_ARRAY_TASK_ID": str(task), "SLURM_ARRAY_TASK_COUNT": str(count)}
            subprocess.run(
                [*base, "--stage", stage, "--task", "auto"], env=env, check=True, capture_output=True
            )
    subprocess.run([*base, "--stage", "manifest"], check=True, capture_output=True)
    assert shards(tmp_path / "on") == shards(tmp_path / "o1")


# -- task outputs in object storage ------------------------------------------------------------
def test_parts_and_shards_in_s3(s3: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKSHUF_CACHE_DIR", str(tmp_path / "cache"))
    data = corpus(tmp_path)
    bucket = s3.bucket("tasks-out")
    run(data, tmp_path / "whole")
    for i in range(3):
        run(data, "s3://tasks-out/tok/ds", shard=(i, 3))
    merged = tokshuf.merge_parts("s3://tasks-out/tok/ds")
    assert merged["parts"] == 3
    for key in ("text", "title"):
        for ext in ("bin", "idx"):
            expected = Path(f"{tmp_path / 'whole'}_{key}_document.{ext}").read_bytes()
            assert s3.get(bucket, f"tok/ds_{key}_document.{ext}") == expected, (key, ext)
    assert json.loads(s3.get(bucket, "tok/ds_summary.json"))["documents"] == merged["documents"]

    tokshuf.shuffle(data, tmp_path / "c1", tmp_path / "o1", CL100K, **SHUFFLE)
    cells, out = tmp_path / "shared-cells", "s3://tasks-out/shards"
    for i in range(2):
        tokshuf.shuffle(data, cells, out, CL100K, stage="cells", task=(i, 2), **SHUFFLE)
    tokshuf.shuffle(data, cells, out, CL100K, stage="shards", task=(0, 2), **SHUFFLE)
    with pytest.raises(tokshuf.ConfigError, match="run every shards task first"):
        tokshuf.shuffle(data, cells, out, CL100K, stage="manifest", **SHUFFLE)
    assert "shards/manifest.jsonl" not in s3.keys(bucket, "shards")
    tokshuf.shuffle(data, cells, out, CL100K, stage="shards", task=(1, 2), **SHUFFLE)
    done = tokshuf.shuffle(data, cells, out, CL100K, stage="manifest", **SHUFFLE)
    assert done["output"] == out
    expected = shards(tmp_path / "o1")
    written = {k.removeprefix("shards/"): s3.get(bucket, k) for k in s3.keys(bucket, "shards")}
    assert json.loads(written.pop("summary.json")) == done
    # The set is published by its commit record, listing every member with the ETag it got.
    record = json.loads(written.pop("commit.json"))
    assert record["state"] == "committed"
    assert {m["name"] for m in record["members"]} == set(expected) | {"summary.json"}
    assert all(m["etag"] for m in record["members"])
    assert written == expected


# -- one orchestrator: the one-node run is the staged run with one task ------------------------
def test_shuffle_only_runs_as_tasks(tmp_path: Path) -> None:
    # Tokenized tars (a shuffle's shards) re-shuffled in tasks: the bytes of the one-node run.
    data = corpus(tmp_path)
    tokshuf.shuffle(data, tmp_path / "c0", tmp_path / "tars", CL100K, **SHUFFLE)
    tars = sorted((tmp_path / "tars").glob("shard_*.tar"))
    assert len(tars) > 3
    opts = {"wds_chunk_size": 25, "num_local_cells": 3, "shuffle_only": True}
    whole = tokshuf.shuffle(tars, tmp_path / "c1", tmp_path / "o1", None, **opts)
    cells, out = tmp_path / "cn", tmp_path / "on"
    for i in range(3):
        tokshuf.shuffle(tars, cells, out, None, stage="cells", task=(i, 3), **opts)
    for j in range(2):
        tokshuf.shuffle(tars, cells, out, None, stage="shards", task=(j, 2), **opts)
    done = tokshuf.shuffle(tars, cells, out, None, stage="manifest", **opts)
    assert shards(out) == shards(tmp_path / "o1")
    assert done["contexts"] == whole["contexts"]
    assert done["member_format"] == "as input"


def test_a_killed_shards_task_goes_on_from_its_last_saved_shard(tmp_path: Path) -> None:
    data = corpus(tmp_path)
    tokshuf.shuffle(data, tmp_path / "c1", tmp_path / "o1", CL100K, **SHUFFLE)
    cells, out = tmp_path / "cn", tmp_path / "on"
    for i in range(2):
        tokshuf.shuffle(data, cells, out, CL100K, stage="cells", task=(i, 2), **SHUFFLE)
    base = [sys.executable, "-m", "tokshuf", "shuffle", "--input", str(data), "--local-cell-dir", str(cells)]
    base += ["--output", str(out), "--tokenizer", CL100K, "--seqlen", "129", "--wds-chunk-size", "40"]
    base += ["--num-local-cells", "5", "--on-error", "skip", "--progress", "none"]
    base += ["--stage", "shards", "--task", "0/1"]
    env = {**os.environ, "TOKSHUF_TEST_CRASH_AT": "shard-saved:3", "TOKSHUF_TEST_SAVE_EVERY_MS": "0"}
    killed = subprocess.run(base, env=env, capture_output=True, text=True, check=False)
    assert killed.returncode < 0, killed.stderr
    kept = {s: (out / f"shard_{s:08d}.tar").stat().st_ino for s in range(3)}
    subprocess.run(base, check=True, capture_output=True)
    # The shards saved before the kill are not written again (a rewrite would rename a new file).
    assert {s: (out / f"shard_{s:08d}.tar").stat().st_ino for s in range(3)} == kept
    tokshuf.shuffle(data, cells, out, CL100K, stage="manifest", **SHUFFLE)
    assert shards(out) == shards(tmp_path / "o1")


def test_a_complete_run_answers_from_any_step(tmp_path: Path) -> None:
    data = corpus(tmp_path)
    cells, out = tmp_path / "cells", tmp_path / "out"
    tokshuf.shuffle(data, cells, out, CL100K, stage="cells", task=(0, 1), **SHUFFLE)
    tokshuf.shuffle(data, cells, out, CL100K, stage="shards", task=(0, 1), **SHUFFLE)
    done = tokshuf.shuffle(data, cells, out, CL100K, stage="manifest", **SHUFFLE)
    assert not done["already_complete"]
    assert not list(cells.rglob("run_*")), "the cells are removed once the run is complete"
    again = tokshuf.shuffle(data, cells, out, CL100K, stage="shards", task=(0, 1), **SHUFFLE)
    assert again["already_complete"]
    assert again["task"]["step"] == "shards"
    assert again["contexts"] == done["contexts"]
    # The one-node run of the same command is the same run.
    one = tokshuf.shuffle(data, cells, out, CL100K, **SHUFFLE)
    assert one["already_complete"]
    assert one["shards"] == done["shards"]


def test_a_local_cell_dir_of_the_old_layout_is_refused(tmp_path: Path) -> None:
    # Before the one orchestrator, a one-node run kept its cells and state.json at the top.
    cells = tmp_path / "cells"
    cells.mkdir()
    (cells / "state.json").write_text("{}")
    (cells / "run_00000000.cells").write_bytes(b"")
    data = corpus(tmp_path)
    for stage in (None, "cells"):
        task = (0, 1) if stage else None
        with pytest.raises(tokshuf.ConfigError, match=rf"earlier tokshuf.*delete {cells}"):
            tokshuf.shuffle(data, cells, tmp_path / "out", CL100K, stage=stage, task=task, **SHUFFLE)
