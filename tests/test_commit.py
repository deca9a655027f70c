"""All-or-nothing outputs: a run that fails or dies at any write leaves the old set or the new.

Every write point of a run (a buffer written, a file synced, a rename) is made to fail in turn,
with ENOSPC as a full disk gives, or by ending the process there as a kill would
(``_core._fail_writes_after``). After each, the outputs must be the complete old set or the
complete new set; after a kill, a pair may also be one that the reader refuses, never one that
reads as other data. Where the test may mount a tmpfs, a really full small filesystem is tried
too, with a page less room each time, so that it fills during every output's write in turn.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from conftest import write_jsonl

import tokshuf
from tokshuf import _core
from tokshuf.olmo_tokens import from_indexed

KEYS = ("text", "title")


def corpus(path: Path, seed: int, n: int = 40) -> Path:
    rng = np.random.default_rng(seed)
    words = ["alpha", "beta", "gamma", "delta", "é", "日本"]
    rows = [
        {
            "text": " ".join(rng.choice(words, size=int(rng.integers(1, 60)))),
            "title": " ".join(rng.choice(words, size=int(rng.integers(1, 5)))),
        }
        for _ in range(n)
    ]
    return write_jsonl(path, rows)


def snapshot(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.is_file()}


def restore(out: Path, files: dict[str, bytes]) -> None:
    for p in out.iterdir():
        p.unlink()
    for name, data in files.items():
        (out / name).write_bytes(data)


@contextlib.contextmanager
def failing_after(n: int, crash: bool = False) -> Iterator[None]:
    _core._fail_writes_after(n, crash)
    try:
        yield
    finally:
        _core._fail_writes_after(None)


def count_points(run: Callable[[], object]) -> int:
    _core._fail_writes_after(10**18)
    try:
        run()
    finally:
        points = _core._fail_writes_after(None)
    assert points > 0
    return points


@pytest.fixture
def sets(tmp_path: Path) -> tuple[Path, Path, dict[str, bytes], dict[str, bytes]]:
    """An output directory holding the old set, the new input, and both sets' files."""
    old_in, new_in = corpus(tmp_path / "old.jsonl", 1), corpus(tmp_path / "new.jsonl", 2, n=70)
    out = tmp_path / "out"
    out.mkdir()
    tokshuf.preprocess(new_in, out / "c", "byte", json_keys=KEYS)
    new = snapshot(out)
    restore(out, {})
    tokshuf.preprocess(old_in, out / "c", "byte", json_keys=KEYS)
    old = snapshot(out)
    assert (
        set(old)
        == set(new)
        == {"c_text_document.bin", "c_text_document.idx"}
        | {
            "c_title_document.bin",
            "c_title_document.idx",
            "c_summary.json",
            "c.commit.json",
        }
    )
    return out, new_in, old, new


def without_timing(files: dict[str, bytes]) -> dict[str, object]:
    """The summary's `seconds` differs between two runs of the same input (and so does its size
    and checksum in the commit record)."""
    out: dict[str, object] = dict(files)
    if "c_summary.json" in files:
        summary = json.loads(files["c_summary.json"])
        summary.pop("seconds")
        out["c_summary.json"] = summary
    if "c.commit.json" in files:
        record = json.loads(files["c.commit.json"])
        record["members"] = [m for m in record["members"] if m["name"] != "c_summary.json"]
        out["c.commit.json"] = record
    return out


def test_preprocess_fails_at_every_write_point_leaving_the_old_set(
    sets: tuple[Path, Path, dict[str, bytes], dict[str, bytes]],
) -> None:
    out, new_in, old, new = sets
    points = count_points(lambda: tokshuf.preprocess(new_in, out / "c", "byte", json_keys=KEYS))
    restore(out, old)
    for n in range(points):
        with failing_after(n), pytest.raises(OSError, match="No space left on device") as info:
            tokshuf.preprocess(new_in, out / "c", "byte", json_keys=KEYS)
        assert info.value.errno == 28, (n, info.value)
        assert snapshot(out) == old, f"failure at write point {n} of {points} changed the outputs"
    with failing_after(points):
        tokshuf.preprocess(new_in, out / "c", "byte", json_keys=KEYS)
    assert without_timing(snapshot(out)) == without_timing(new)


CRASH_SCRIPT = """
import sys
import tokshuf
from tokshuf import _core
_core._fail_writes_after(int(sys.argv[1]), True)
tokshuf.preprocess(sys.argv[2], sys.argv[3], "byte", json_keys=("text", "title"))
"""


def reads_as(out: Path, key: str, files: dict[str, bytes]) -> str:
    """Whether the `key` pair in `out` is the one in `files` ("same"), refused, or other data."""
    prefix = out / f"c_{key}_document"
    try:
        ds = tokshuf.IndexedDataset(prefix)
    except (FileNotFoundError, tokshuf.FormatError):
        return "refused"
    name = f"c_{key}_document"
    ours = (Path(f"{prefix}.bin").read_bytes(), Path(f"{prefix}.idx").read_bytes())
    del ds
    return "same" if ours == (files[f"{name}.bin"], files[f"{name}.idx"]) else "other"


def test_preprocess_killed_at_every_write_point_leaves_a_committed_set_or_a_refusal(
    sets: tuple[Path, Path, dict[str, bytes], dict[str, bytes]], tmp_path: Path
) -> None:
    out, new_in, old, new = sets
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    points = count_points(lambda: tokshuf.preprocess(new_in, out / "c", "byte", json_keys=KEYS))
    seen = set()
    for n in range(points):
        restore(out, old)
        run = subprocess.run(
            [sys.executable, "-c", CRASH_SCRIPT, str(n), str(new_in), str(out / "c")],
            capture_output=True,
            text=True,
            check=False,
        )
        assert run.returncode == 86, run.stderr
        states = {}
        for key in KEYS:
            as_old, as_new = reads_as(out, key, old), reads_as(out, key, new)
            # A pair the reader opens is exactly the old or exactly the new one.
            assert "other" not in (as_old, as_new) or "same" in (as_old, as_new), (n, key)
            states[key] = "old" if as_old == "same" else "new" if as_new == "same" else "refused"
        # Every key reads as the same committed set, or every key is refused.
        assert len(set(states.values())) == 1, f"kill at point {n}: {states}"
        state = states[KEYS[0]]
        seen.add(state)
        record = json.loads((out / "c.commit.json").read_text())
        assert record["state"] == ("writing" if state == "refused" else "committed"), (n, record["state"])
        if state == "refused":
            with pytest.raises(tokshuf.FormatError, match=r"stopped before it finished.*rerun"):
                tokshuf.IndexedDataset(out / "c_text_document")
            # The next run into the directory finishes the interrupted commit first (its new
            # members were complete), even when the run itself then fails.
            with pytest.raises(tokshuf.BadInputError):
                tokshuf.preprocess(bad, out / "c", "byte", json_keys=KEYS)
            assert without_timing(snapshot(out)) == without_timing(new), n
            assert {reads_as(out, key, new) for key in KEYS} == {"same"}, n
        # The next run of the same command gives the uninterrupted run's outputs, and nothing else.
        tokshuf.preprocess(new_in, out / "c", "byte", json_keys=KEYS)
        assert without_timing(snapshot(out)) == without_timing(new), n
    # The commit record's rename is the last write point: a kill anywhere before it leaves the
    # old set, or (once the old one is retracted) a refusal that the next run repairs.
    assert seen == {"old", "refused"}, seen


def test_merge_and_olmo_convert_fail_at_every_point_leaving_the_old_outputs(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for name, seed in (("a", 1), ("b", 2)):
        tokshuf.preprocess(corpus(tmp_path / f"{name}.jsonl", seed), src / name, "byte", json_keys=("text",))
    out = tmp_path / "out"
    out.mkdir()
    a, b = src / "a_text_document", src / "b_text_document"

    def merge_and_convert(inputs: list[Path]) -> None:
        tokshuf.merge(inputs, out / "m", summary=False)
        from_indexed(out / "m", out / "m.npy", summary=False)

    merge_and_convert([a])
    old = snapshot(out)
    assert set(old) == {"m.bin", "m.idx", "m.commit.json", "m.npy", "m.csv.gz", "m.npy.commit.json"}
    points = count_points(lambda: merge_and_convert([a, b]))
    new = snapshot(out)
    assert new != old
    for n in range(points):
        restore(out, old)
        with failing_after(n), pytest.raises(OSError, match="No space left on device"):
            merge_and_convert([a, b])
        now = snapshot(out)
        # Each command's outputs are all old or all new (merge may succeed before convert fails).
        merged, converted = ("m.bin", "m.idx", "m.commit.json"), ("m.npy", "m.csv.gz", "m.npy.commit.json")
        assert {k: now[k] for k in merged} in ({k: old[k] for k in merged}, {k: new[k] for k in merged}), n
        assert {k: now[k] for k in converted} == {k: old[k] for k in converted}, n
        assert set(now) == set(old), n


def test_temporaries_of_dead_processes_are_removed_on_the_next_commit(tmp_path: Path) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    pid = int(dead.stdout)
    left = [tmp_path / f"c_text_document.bin.tmp-{pid}-0", tmp_path / f"c_summary.json.tmp-{pid}-3"]
    alive = tmp_path / f"c_text_document.idx.tmp-{os.getppid()}-1"
    unrelated = tmp_path / f"other.bin.tmp-{pid}-0"
    for p in [*left, alive, unrelated]:
        p.write_bytes(b"x")
    tokshuf.preprocess(corpus(tmp_path / "in.jsonl", 3), tmp_path / "c", "byte", json_keys=("text",))
    assert not any(p.exists() for p in left)
    assert alive.exists()
    assert unrelated.exists()


def can_mount_tmpfs() -> bool:
    return sys.platform == "linux" and os.geteuid() == 0 and Path("/bin/mount").exists()


@pytest.mark.skipif(not can_mount_tmpfs(), reason="mounting a tmpfs needs root on Linux")
def test_preprocess_on_a_full_tmpfs_leaves_the_old_set(tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mnt)], check=False).returncode:
        pytest.skip("mount -t tmpfs was refused")
    try:
        out = mnt / "out"
        out.mkdir()
        # A small old set and a large new one: moving one key's new pair into place frees too
        # little to write the rest, so a run that committed key by key would be caught with a
        # mixed set when the disk fills after its first commit.
        small, big = corpus(tmp_path / "small.jsonl", 5, n=20), corpus(tmp_path / "big.jsonl", 6, n=600)
        tokshuf.preprocess(big, out / "c", "byte", json_keys=KEYS)
        new_files = snapshot(out)
        new = without_timing(new_files)
        restore(out, {})
        tokshuf.preprocess(small, out / "c", "byte", json_keys=KEYS)
        old = snapshot(out)
        # Leave less and less room, a page at a time, down from more than the new set needs
        # beside the old one: the disk fills at every write of the run in turn.
        peak = sum(len(b) + 4096 for b in new_files.values()) + (64 << 10)
        failed_at: set[str] = set()
        for room in range(peak, 0, -4096):
            restore(out, old)
            stat = os.statvfs(mnt)
            filler = mnt / "filler"
            filler.write_bytes(b"\0" * max(stat.f_bavail * stat.f_frsize - room, 0))
            error: OSError | None = None
            try:
                tokshuf.preprocess(big, out / "c", "byte", json_keys=KEYS)
            except OSError as e:
                error = e
            if error is None:
                assert without_timing(snapshot(out)) == new, f"{room} bytes free"
            else:
                assert snapshot(out) == old, f"{room} bytes free: {error}"
                # The file being written: "... No space left on device: '.../c_text_document.bin.tmp-P-N'".
                failed_at.add(re.sub(r"\.tmp-\d+-\d+$", "", str(error).rstrip("'").rsplit("/", 1)[-1]))
            filler.unlink()
        # The disk filled while each output was being written: both keys' data and indexes and
        # the summary.
        assert failed_at == set(old), failed_at
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
