"""`tokshuf shuffle` survives being killed anywhere, and refuses to mix different runs."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from shuffle_helpers import random_docs, tree_digest, write_corpus

import tokshuf
from tokshuf.errors import ConfigError

# Many small runs and shards, so kills land in every phase.
OPTS = ["--tokenizer", "byte", "--seqlen", "9", "--wds-chunk-size", "200", "--num-local-cells", "8"]
OPTS += ["--buffer-mb", "0", "--threads", "2", "--quiet", "--on-error", "skip"]  # one file is empty


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    rng = random.Random(3)
    files = [random_docs(rng, n, max_len=200) for n in (200, 0, 150, 120, 90, 180, 60, 100)]
    return write_corpus(tmp_path_factory.mktemp("corpus"), files)


def command(corpus: list[Path], work: Path) -> list[str]:
    args = [sys.executable, "-m", "tokshuf", "shuffle"]
    for p in corpus:
        args += ["--input", str(p)]
    return [*args, "--local-cell-dir", str(work / "cells"), "--output", str(work / "out"), *OPTS]


def run_cli(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def reference(corpus: list[Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    work = tmp_path_factory.mktemp("reference")
    r = run_cli(command(corpus, work))
    assert r.returncode == 0, r.stderr
    digest = tree_digest(work / "out")
    assert len(digest) > 10, "enough shards to kill the run between them"
    return digest


CRASH_POINTS = [
    "run-written:1",
    "checkpoint-saved:1",
    "run-written:5",
    "checkpoint-saved:7",
    "stage1-done:1",
    "shard-renamed:1",
    "shard-renamed:6",
    "shard-saved:3",
    "shard-saved:12",
    "manifest-written:1",
]


def test_crash_at_every_checkpoint_then_resume(
    corpus: list[Path], reference: dict[str, str], tmp_path: Path
) -> None:
    for i, point in enumerate(CRASH_POINTS):
        work = tmp_path / str(i)
        # Save the stage-2 position after every shard, so a resume also starts mid-stage-2 (with
        # the cells before it already released).
        env = {"TOKSHUF_TEST_CRASH_AT": point, "TOKSHUF_TEST_SAVE_EVERY_MS": "0"}
        crashed = run_cli(command(corpus, work), env)
        assert crashed.returncode == -signal.SIGABRT, (point, crashed.returncode, crashed.stderr)
        resumed = run_cli(command(corpus, work))
        assert resumed.returncode == 0, (point, resumed.stderr)
        assert tree_digest(work / "out") == reference, point
        assert not list((work / "cells").rglob("run_*")), "cells are removed when the run completes"


def test_random_kills_then_resume(tmp_path: Path) -> None:
    # A corpus with about a second of work, so that kills land inside both stages.
    rng = random.Random(2024)
    corpus = write_corpus(tmp_path / "in", [random_docs(rng, 1500, max_len=300) for _ in range(6)])
    opts = ["--seqlen", "33", "--wds-chunk-size", "400", "--buffer-mb", "1"]

    def cmd(work: Path) -> list[str]:
        return [*command(corpus, work), *opts]

    started = time.monotonic()
    assert run_cli([sys.executable, "-m", "tokshuf", "--version"]).returncode == 0
    startup = time.monotonic() - started
    started = time.monotonic()
    assert run_cli(cmd(tmp_path / "ref")).returncode == 0
    work = max(time.monotonic() - started - startup, 0.2)
    reference = tree_digest(tmp_path / "ref" / "out")

    kills = 0
    first_delay = startup + work / 2
    while True:
        proc = subprocess.Popen(cmd(tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            # The first kill must land mid-run; later ones anywhere (or not at all).
            delay = first_delay if kills == 0 else startup + rng.uniform(0, work)
            _, err = proc.communicate(timeout=delay if kills < 12 else 300)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            kills += 1
            continue
        assert proc.returncode == 0, err
        if kills == 0 and first_delay > 0.02:
            # On a loaded machine the run can beat the first kill: start over, killing sooner.
            shutil.rmtree(tmp_path / "cells", ignore_errors=True)
            shutil.rmtree(tmp_path / "out", ignore_errors=True)
            first_delay /= 2
            continue
        break
    assert kills >= 1
    assert tree_digest(tmp_path / "out") == reference


def test_ctrl_c_then_resume(corpus: list[Path], reference: dict[str, str], tmp_path: Path) -> None:
    args = command(corpus, tmp_path)
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.6)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    if proc.returncode == 130:
        assert "run the same command again to resume" in err
    else:
        assert proc.returncode == 0, err  # finished before the signal arrived
    r = run_cli(args)
    assert r.returncode == 0, r.stderr
    assert tree_digest(tmp_path / "out") == reference


def test_rerun_after_completion_is_a_no_op(corpus: list[Path], tmp_path: Path) -> None:
    first = tokshuf.shuffle(corpus, tmp_path / "c", tmp_path / "o", "byte", context_length=9, on_error="skip")
    before = tree_digest(tmp_path / "o")
    again = tokshuf.shuffle(corpus, tmp_path / "c", tmp_path / "o", "byte", context_length=9, on_error="skip")
    assert again["already_complete"]
    assert again["contexts"] == first["contexts"]
    assert tree_digest(tmp_path / "o") == before
    (tmp_path / "o" / "shard_00000000.tar").unlink()
    with pytest.raises(ConfigError, match=r"is complete, but its output .* is gone"):
        tokshuf.shuffle(corpus, tmp_path / "c", tmp_path / "o", "byte", context_length=9, on_error="skip")


def test_a_different_command_is_refused(corpus: list[Path], tmp_path: Path) -> None:
    crashed = run_cli(command(corpus, tmp_path), {"TOKSHUF_TEST_CRASH_AT": "stage1-done:1"})
    assert crashed.returncode == -signal.SIGABRT
    with pytest.raises(ConfigError, match=r"different tokshuf shuffle command \(seed: 1234 there, 5 now"):
        tokshuf.shuffle(
            corpus, tmp_path / "cells", tmp_path / "out", "byte", context_length=9, wds_chunk_size=200,
            num_local_cells=8, seed=5,
        )  # fmt: skip
    with pytest.raises(ConfigError, match="input files differ"):
        tokshuf.shuffle(
            corpus[:2], tmp_path / "cells", tmp_path / "out", "byte", context_length=9, wds_chunk_size=200,
            num_local_cells=8,
        )  # fmt: skip


def test_foreign_directories_are_refused(corpus: list[Path], tmp_path: Path) -> None:
    (tmp_path / "cells").mkdir()
    (tmp_path / "cells" / "local_cell_00000000.tar").write_bytes(b"")
    with pytest.raises(ConfigError, match="not empty and holds no tokshuf shuffle state"):
        tokshuf.shuffle(corpus, tmp_path / "cells", tmp_path / "out", "byte")
    (tmp_path / "out2").mkdir()
    (tmp_path / "out2" / "shard_00000000.tar").write_bytes(b"")
    with pytest.raises(ConfigError, match="already holds a dataset"):
        tokshuf.shuffle(corpus, tmp_path / "cells2", tmp_path / "out2", "byte")


def test_one_process_per_cell_dir(corpus: list[Path], tmp_path: Path) -> None:
    import fcntl

    (tmp_path / "cells").mkdir()
    with open(tmp_path / "cells" / ".lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(ConfigError, match="in use by another tokshuf shuffle process"):
            tokshuf.shuffle(corpus, tmp_path / "cells", tmp_path / "out", "byte")


def test_a_file_problem_is_counted_once_whenever_the_run_is_killed(tmp_path: Path) -> None:
    # An empty file between two others, and a checkpoint after every item (--buffer-mb 0): a
    # kill just after a checkpoint that fell between the empty file's problem and its end made
    # the resumed run read the file again and list it twice.
    rng = random.Random(11)
    corpus = write_corpus(
        tmp_path / "in", [random_docs(rng, 40, max_len=60), [], random_docs(rng, 40, max_len=60)]
    )
    ref = tmp_path / "ref"
    assert run_cli(command(corpus, ref)).returncode == 0
    expected = json.loads((ref / "out" / "summary.json").read_text())
    assert [f["reason"] for f in expected["skipped_files"]] == ["empty_file"]
    for k in range(1, 12):
        work = tmp_path / f"k{k}"
        crashed = run_cli(command(corpus, work), {"TOKSHUF_TEST_CRASH_AT": f"checkpoint-saved:{k}"})
        if crashed.returncode == 0:
            break  # fewer checkpoints than k: every one was tried
        assert crashed.returncode == -signal.SIGABRT, (k, crashed.stderr)
        resumed = run_cli(command(corpus, work))
        assert resumed.returncode == 0, (k, resumed.stderr)
        got = json.loads((work / "out" / "summary.json").read_text())
        assert got["skipped_files"] == expected["skipped_files"], k
        assert got["skipped"] == expected["skipped"], k
        assert tree_digest(work / "out") == tree_digest(ref / "out"), k
    else:
        pytest.fail("more checkpoints than tried: raise the bound")
