"""Outputs are sets: published by a commit record, read only as one committed version, never
written over an input or another run's data, and recovered after a crash.

Each test reproduces one defect of the turn-3 reports (formats D10/D13/D17/D19, storage
D2/D3/D9/D10/D12/D13/D15/D16) on its own inputs, and checks the behaviour that replaced it; the
last ones rewrite a set in a loop while readers open it, locally and in the S3 test server.
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
from shuffle_helpers import tree_digest

import tokshuf
from tokshuf.cli import main
from tokshuf.errors import ConfigError, FormatError
from tokshuf.olmo_tokens import from_indexed

KEYS = ("text", "title")
SHUFFLE: dict[str, Any] = {
    "context_length": 65,
    "wds_chunk_size": 40,
    "num_local_cells": 4,
    "progress": "none",
}


def corpus(path: Path, tag: str, n: int = 60) -> Path:
    rows = [{"text": f"{tag} text {i} " * (1 + i % 5), "title": f"{tag} {i}"} for i in range(n)]
    return write_jsonl(path, rows)


def docs(prefix: str | Path, **kw: Any) -> list[list[int]]:
    ds = tokshuf.IndexedDataset(prefix, **kw)
    return [ds[i].tolist() for i in range(len(ds))]


def files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def crash(code: str, after: int, env: dict[str, str] | None = None) -> None:
    """Run ``code`` in a new process that dies (as if killed) at write point ``after``."""
    script = f"import tokshuf\nfrom tokshuf import _core\n_core._fail_writes_after({after}, True)\n{code}\n"
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=False)
    assert run.returncode == 86, run.stderr


# -- formats D10, D19: outputs never replace inputs; an empty prefix is a usage error ------------------


def test_an_output_that_is_an_input_is_refused_and_the_input_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "x_text_document.jsonl"
    src.write_text('{"text": "precious"}\n')
    base = ["preprocess", "--tokenizer", "byte", "--quiet", "--input"]
    with pytest.raises(SystemExit) as e:
        main([*base, str(src), "--output-prefix", str(tmp_path / "x"), "--summary", str(src)])
    assert e.value.code == 2
    assert "is also an input" in capsys.readouterr().err
    named_like_output = tmp_path / "y_text_document.bin"
    named_like_output.write_text('{"text": "more precious"}\n')
    with pytest.raises(SystemExit) as e:
        main([*base, str(named_like_output), "--output-prefix", str(tmp_path / "y")])
    assert e.value.code == 2
    with pytest.raises(ConfigError, match="is also an input"):
        tokshuf.preprocess(named_like_output, tmp_path / "y", "byte")
    assert src.read_text() == '{"text": "precious"}\n'
    assert named_like_output.read_text() == '{"text": "more precious"}\n'
    # A merge into one of its inputs, and a conversion over its own .bin, likewise.
    tokshuf.preprocess(src, tmp_path / "m", "byte")
    pair = tmp_path / "m_text_document"
    before = files(tmp_path)
    with pytest.raises(ConfigError, match="is also an input"):
        tokshuf.merge([pair], pair)
    with pytest.raises(ConfigError, match="is also an input"):
        from_indexed(pair, f"{pair}.bin")
    assert files(tmp_path) == before


def test_an_empty_output_prefix_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    src = corpus(tmp_path / "in.jsonl", "a")
    with pytest.raises(SystemExit) as e:
        main(["preprocess", "--input", str(src), "--output-prefix", "", "--tokenizer", "byte", "--quiet"])
    assert e.value.code == 2
    assert "--output-prefix" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="output_prefix"):
        tokshuf.preprocess(src, "", "byte")
    assert sorted(os.listdir(tmp_path)) == ["in.jsonl"]


# -- formats D17: a failed summary write leaves no temporary --------------------------------------------


def test_a_summary_that_cannot_be_written_leaves_no_temporary(tmp_path: Path) -> None:
    tokshuf.preprocess(corpus(tmp_path / "a.jsonl", "a"), tmp_path / "a", "byte")
    (tmp_path / "out").mkdir()
    assert main(["inspect", str(tmp_path / "a_text_document"), "--summary", str(tmp_path / "out")]) == 1
    assert [p.name for p in tmp_path.iterdir() if ".tmp-" in p.name] == []


# -- formats D13: a crash during the commit's moves is finished by the next run --------------------------


def test_a_commit_killed_while_moving_files_is_finished_by_the_next_run(tmp_path: Path) -> None:
    from tokshuf import _core

    old_in, new_in = corpus(tmp_path / "old.jsonl", "old"), corpus(tmp_path / "new.jsonl", "new", 90)
    out = tmp_path / "out"
    tokshuf.preprocess(old_in, out / "c", "byte", json_keys=KEYS, summary=False)
    old = files(out)
    _core._fail_writes_after(10**9)
    tokshuf.preprocess(new_in, out / "c", "byte", json_keys=KEYS, summary=False)
    points = _core._fail_writes_after(None)
    new = {k: docs(out / f"c_{k}_document") for k in KEYS}
    for p in out.iterdir():
        p.unlink()
    for name, data in old.items():
        (out / name).write_bytes(data)
    # The last points: the moves of the new .bin files, then of the .idx files, then the
    # record's two writes. The kill lands between the two .bin moves: the old set is retracted,
    # half of the new one is in place, the other half and the old .idx files wait aside.
    code = (
        f"tokshuf.preprocess({str(new_in)!r}, {str(out / 'c')!r}, 'byte', json_keys={KEYS!r}, summary=False)"
    )
    crash(code, points - 5)
    assert json.loads((out / "c.commit.json").read_text())["state"] == "writing"
    with pytest.raises(FormatError, match="rerun"):
        docs(out / "c_text_document")
    # Nothing was deleted: the next run into the directory (any command) finishes the commit.
    tokshuf.merge([tmp_path / "out" / "c_title_document"], tmp_path / "out" / "other", summary=False)
    assert {k: docs(out / f"c_{k}_document") for k in KEYS} == new
    assert not [p for p in out.iterdir() if ".tmp-" in p.name]


# -- storage D2, D16, D13: remote sets ------------------------------------------------------------------


@pytest.fixture
def store(s3: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, str]:
    monkeypatch.setenv("TOKSHUF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TOKSHUF_STAGING_DIR", str(tmp_path))
    name = f"sets-{os.getpid()}-{abs(hash(str(tmp_path))) % 10**8}"
    return s3, s3.bucket(name)


def test_an_s3_rewrite_killed_between_uploads_is_refused_not_mixed(
    store: tuple[Any, str], tmp_path: Path
) -> None:
    s3, bucket = store
    a = corpus(tmp_path / "a.jsonl", "aaaa")
    b = corpus(tmp_path / "b.jsonl", "bbb")
    url = f"s3://{bucket}/ds"
    tokshuf.preprocess(b, tmp_path / "b", "byte", append_eod=True)
    b_docs = docs(tmp_path / "b_text_document")
    from tokshuf import _core

    for prefix in ("ds", "count"):
        tokshuf.preprocess(a, f"s3://{bucket}/{prefix}", "byte", append_eod=True)
    _core._fail_writes_after(10**9)
    tokshuf.preprocess(b, f"s3://{bucket}/count", "byte", append_eod=True)
    points = _core._fail_writes_after(None)
    # The run's last points: the writing record, the deletion of the old .idx and summary, the
    # .bin, the .idx, the summary, the record. Killed at the .idx upload, the store holds the new
    # .bin and no .idx: the old one, which Megatron would pair with it, went first.
    crash(f"tokshuf.preprocess({str(b)!r}, {url!r}, 'byte', append_eod=True)", points - 3)
    assert s3.get(bucket, "ds_text_document.bin") == s3.get(bucket, "count_text_document.bin")
    assert "ds_text_document.idx" not in s3.keys(bucket)
    with pytest.raises(FormatError, match=r"ds\.commit\.json.*rerun"):
        docs(f"{url}_text_document")
    tokshuf.preprocess(b, url, "byte", append_eod=True)
    assert docs(f"{url}_text_document") == b_docs
    assert docs(f"{url}_text_document", remote="copy") == b_docs


@pytest.mark.parametrize("mode", ["copy", "ranges"])
def test_a_remote_pair_replaced_while_it_opens_is_read_as_one_version(
    store: tuple[Any, str], tmp_path: Path, mode: str
) -> None:
    s3, bucket = store
    for name, tag in (("A", "aaaa"), ("B", "bbb")):
        tokshuf.preprocess(
            corpus(tmp_path / f"{name}.jsonl", tag, 30), tmp_path / name, "byte", append_eod=True
        )
    pair = {n: {x: (tmp_path / f"{n}_text_document.{x}").read_bytes() for x in ("bin", "idx")} for n in "AB"}
    b_docs = docs(tmp_path / "B_text_document")
    # A pair without a record (Megatron's): another writer replaces it, .bin then .idx, just as
    # the reader pins the .bin.
    for x in ("bin", "idx"):
        s3.put(bucket, f"raw.{x}", pair["A"][x])

    def replace() -> None:
        for x in ("bin", "idx"):
            s3.put(bucket, f"raw.{x}", pair["B"][x])

    with s3.before("HEAD", "raw.bin", replace):
        assert docs(f"s3://{bucket}/raw", remote=mode) == b_docs
    # A set with a record: tokshuf's rewrite lands the same way.
    tokshuf.preprocess(tmp_path / "A.jsonl", f"s3://{bucket}/set", "byte", append_eod=True)
    tokshuf.preprocess(tmp_path / "B.jsonl", f"s3://{bucket}/next", "byte", append_eod=True)

    def rewrite() -> None:
        for suffix in ("_text_document.bin", "_text_document.idx", "_summary.json", ".commit.json"):
            body = s3.get(bucket, f"next{suffix}")
            if suffix == ".commit.json":
                record = json.loads(body)
                for m in record["members"]:
                    m["name"] = m["name"].replace("next", "set", 1)
                body = json.dumps(record).encode()
            s3.put(bucket, f"set{suffix}", body)

    with s3.before("HEAD", "set_text_document.bin", rewrite):
        assert docs(f"s3://{bucket}/set_text_document", remote=mode) == b_docs


def test_a_cached_copy_changed_on_disk_is_not_served(store: tuple[Any, str], tmp_path: Path) -> None:
    _, bucket = store
    url = f"s3://{bucket}/cached"
    tokshuf.preprocess(corpus(tmp_path / "a.jsonl", "a"), url, "byte")
    want = docs(f"{url}_text_document", remote="copy")
    copy = tmp_path / "cache" / "remote" / "s3" / bucket / "cached_text_document.bin"
    copy.write_bytes(bytes(len(copy.read_bytes())))  # garbage of the same size
    assert docs(f"{url}_text_document", remote="copy") == want


# -- storage D9: parts of different listings ------------------------------------------------------------


def test_merge_parts_refuses_parts_cut_from_different_listings(tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    for name in ("a", "b", "c"):
        corpus(inputs / f"{name}.jsonl", name, 40)
    prefix = tmp_path / "tok" / "ds"
    for i in range(3):
        tokshuf.preprocess(inputs, prefix, "byte", shard=(i, 3))
    corpus(inputs / "d.jsonl", "d", 40)  # the input directory grew; tasks 0 and 1 run again
    for i in range(2):
        tokshuf.preprocess(inputs, prefix, "byte", shard=(i, 3))
    with pytest.raises(ConfigError, match=r"different input listings.*d\.jsonl"):
        tokshuf.merge_parts(prefix)
    assert not Path(f"{prefix}_text_document.bin").exists()
    tokshuf.preprocess(inputs, prefix, "byte", shard=(2, 3))
    tokshuf.preprocess(inputs, tmp_path / "one", "byte")
    tokshuf.merge_parts(prefix)
    assert docs(f"{prefix}_text_document") == docs(tmp_path / "one_text_document")


# -- storage D3, D10, D12, D15: shuffle outputs ---------------------------------------------------------


def shuffle_corpus(tmp_path: Path) -> Path:
    return corpus(tmp_path / "shuffle.jsonl", "s", 300)


def test_a_staged_shuffle_refuses_an_output_holding_another_runs_dataset(tmp_path: Path) -> None:
    data = shuffle_corpus(tmp_path)
    out = tmp_path / "out"
    tokshuf.shuffle(data, tmp_path / "cells-a", out, "byte", **SHUFFLE)
    before = tree_digest(out)
    other = {**SHUFFLE, "seed": 99}
    tokshuf.shuffle(data, tmp_path / "cells-b", out, "byte", stage="cells", task=(0, 1), **other)
    with pytest.raises(ConfigError, match="already holds a dataset"):
        tokshuf.shuffle(data, tmp_path / "cells-b", out, "byte", stage="shards", task=(0, 2), **other)
    with pytest.raises(ConfigError, match="already holds a dataset"):
        tokshuf.shuffle(data, tmp_path / "cells-b", out, "byte", stage="manifest", **other)
    assert tree_digest(out) == before
    # Shards without any record are another run's too.
    (out / "commit.json").unlink()
    with pytest.raises(ConfigError, match="already holds a dataset"):
        tokshuf.shuffle(data, tmp_path / "cells-b", out, "byte", stage="shards", task=(0, 2), **other)


def test_a_fresh_s3_shuffle_refuses_a_prefix_holding_shards(store: tuple[Any, str], tmp_path: Path) -> None:
    s3, bucket = store
    s3.put(bucket, "ds/shard_00000050.tar", b"a stale shard of another run")
    with pytest.raises(ConfigError, match=r"already holds a dataset \(shard_00000050\.tar\)"):
        tokshuf.shuffle(shuffle_corpus(tmp_path), tmp_path / "cells", f"s3://{bucket}/ds", "byte", **SHUFFLE)
    assert s3.keys(bucket, "ds") == ["ds/shard_00000050.tar"]


@pytest.mark.parametrize("staged", [False, True])
def test_a_shuffle_killed_at_its_first_write_resumes(tmp_path: Path, staged: bool) -> None:
    data = shuffle_corpus(tmp_path)
    tokshuf.shuffle(data, tmp_path / "ref-cells", tmp_path / "ref", "byte", **SHUFFLE)
    stage = {"stage": "cells", "task": (0, 1)} if staged else {}
    call = (
        f"tokshuf.shuffle({str(data)!r}, {str(tmp_path / 'cells')!r}, {str(tmp_path / 'out')!r}, 'byte', "
        f"**{ ({**SHUFFLE, **stage})!r})"
    )
    # Killed at its first state write (a one-node run first claims its output: two points).
    crash(call, 0 if staged else 2)
    assert list((tmp_path / "cells").rglob("state.json.tmp-*")), "the kill left the state's temporary"
    tokshuf.shuffle(data, tmp_path / "cells", tmp_path / "out", "byte", **SHUFFLE, **stage)
    if staged:
        tokshuf.shuffle(
            data, tmp_path / "cells", tmp_path / "out", "byte", stage="shards", task=(0, 1), **SHUFFLE
        )
        tokshuf.shuffle(data, tmp_path / "cells", tmp_path / "out", "byte", stage="manifest", **SHUFFLE)
    assert tree_digest(tmp_path / "out") == tree_digest(tmp_path / "ref")


def test_a_killed_shards_task_leaves_no_temporaries_in_the_output(tmp_path: Path) -> None:
    data = shuffle_corpus(tmp_path)
    cells, out = tmp_path / "cells", tmp_path / "out"
    tokshuf.shuffle(data, cells, out, "byte", stage="cells", task=(0, 1), **SHUFFLE)
    call = (
        f"tokshuf.shuffle({str(data)!r}, {str(cells)!r}, {str(out)!r}, 'byte', stage='shards', task=(0, 1), "
        f"**{SHUFFLE!r})"
    )
    crash(call, 3)
    assert [p for p in out.iterdir() if ".tmp-" in p.name], "the kill left a shard's temporary"
    tokshuf.shuffle(data, cells, out, "byte", stage="shards", task=(0, 1), **SHUFFLE)
    tokshuf.shuffle(data, cells, out, "byte", stage="manifest", **SHUFFLE)
    assert [p.name for p in out.iterdir() if ".tmp-" in p.name] == []
    assert tokshuf.inspect(out).problems == []  # type: ignore[union-attr]


# -- readers opening a set while it is rewritten -------------------------------------------------------

REWRITER = """
import sys, time, tokshuf
a, b, out, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
end, n = time.monotonic() + seconds, 0
while time.monotonic() < end:
    tokshuf.preprocess((a, b)[n % 2], out, "byte", json_keys=("text", "title"), append_eod=True)
    n += 1
print(n)
"""


def rewritten_while_read(tmp_path: Path, out: str, seconds: float, docs_a: int, **kw: Any) -> tuple[int, int]:
    """Rewrite the set at ``out`` with one corpus then the other for ``seconds`` in another process,
    while this one opens it in a loop: every open reads one version whole or is refused. (Opens
    tried while rewriting, and rewrites.)"""
    a, b = corpus(tmp_path / "a.jsonl", "aaaa", docs_a), corpus(tmp_path / "b.jsonl", "bbb", docs_a * 2 // 3)
    versions = []
    for src in (a, b):
        tokshuf.preprocess(src, tmp_path / "v", "byte", json_keys=KEYS, append_eod=True)
        versions.append({k: docs(tmp_path / f"v_{k}_document") for k in KEYS})
    tokshuf.preprocess(a, out, "byte", json_keys=KEYS, append_eod=True)
    writer = subprocess.Popen(
        [sys.executable, "-c", REWRITER, str(a), str(b), out, str(seconds)], stdout=subprocess.PIPE, text=True
    )
    opened = refused = 0
    try:
        while writer.poll() is None:
            for key in KEYS:
                error = ""
                try:
                    got = docs(f"{out}_{key}_document", **kw)
                except OSError as e:
                    error = str(e)
                if error:
                    # Ranged reads are pinned to the version opened: one replaced under them is
                    # an error naming the object, never bytes of the new version.
                    assert kw.get("remote") == "ranges", error
                    assert "changed while it was read" in error, error
                    refused += 1
                    continue
                assert got in (versions[0][key], versions[1][key]), f"a mixed {key} pair after {opened} opens"
                opened += 1
    finally:
        rewrites = int(writer.communicate(timeout=120)[0] or 0)
    # Once the rewrites stop, the set opens whole, as the last rewrite left it.
    last = versions[(rewrites - 1) % 2] if rewrites else versions[0]
    assert {key: docs(f"{out}_{key}_document", **kw) for key in KEYS} == last
    return opened + refused, rewrites


def test_readers_never_see_a_mixed_local_set_while_it_is_rewritten(tmp_path: Path) -> None:
    opened, rewrites = rewritten_while_read(tmp_path, str(tmp_path / "out" / "c"), 4.0, 80)
    assert opened > 10, opened
    assert rewrites > 3, rewrites


@pytest.mark.parametrize("mode", ["ranges", "copy"])
def test_readers_never_see_a_mixed_remote_set_while_it_is_rewritten(
    store: tuple[Any, str], tmp_path: Path, mode: str
) -> None:
    _, bucket = store
    opened, rewrites = rewritten_while_read(tmp_path, f"s3://{bucket}/c", 3.0, 9, remote=mode)
    assert opened > 1, opened
    assert rewrites > 1, rewrites
