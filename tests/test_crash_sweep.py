"""Crash sweep: each command that writes a set (preprocess with two keys, merge, olmo-convert,
shuffle, the staged shuffle; into the S3 test server: preprocess, merge --parts, shuffle, the
staged shuffle) is killed at write points (the fault hook: the process ends there, as a kill
would) and by SIGKILL at random times. After each kill tokshuf's readers see the complete old
set, the complete new set, or refuse with an error that says to rerun; nothing else. Then the
same command runs again and must leave exactly what an uninterrupted run leaves.

Every write point of every job is too many processes for the suite's time: the points of each
job are counted, and a sample drawn with a fixed seed (the first and last point always among
them) is killed, plus a few SIGKILLs at seeded random delays. ``TOKSHUF_SWEEP_ALL=1`` kills at
every point instead.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sweep_jobs
from conftest import write_jsonl

import tokshuf
from tokshuf import _core
from tokshuf.errors import FormatError
from tokshuf.olmo_tokens import from_indexed

SEED = 20261127
JOBS = Path(__file__).with_name("sweep_jobs.py")
EVERY_POINT = os.environ.get("TOKSHUF_SWEEP_ALL") == "1"


def corpus(path: Path, tag: str, n: int) -> Path:
    rows = [{"text": f"{tag} text {i} " * (1 + i % 7), "title": f"{tag} {i}"} for i in range(n)]
    return write_jsonl(path, rows)


def docs(prefix: str | Path) -> list[list[int]]:
    # A pair in the store is read from its local copy (one download, not a request per sequence).
    ds = tokshuf.IndexedDataset(prefix, remote="copy")
    return [ds[i].tolist() for i in range(len(ds))]


def without_timing(files: dict[str, bytes]) -> dict[str, Any]:
    """A set's files as a rerun must reproduce them: the summaries (which record timings) out,
    and out of the records too."""
    out: dict[str, Any] = {}
    for name, data in files.items():
        assert ".tmp-" not in name, f"a temporary was left: {name}"
        if name.endswith("summary.json"):
            continue
        if name.endswith("commit.json"):
            record = json.loads(data)
            record["members"] = [m for m in record["members"] if not m["name"].endswith("summary.json")]
            for m in record["members"]:
                m.pop("etag", None)  # a multipart upload's ETag is not a content hash
            out[name] = record
        else:
            out[name] = data
    return out


@dataclass
class Place:
    """Where a job writes: a local directory, or a prefix of the S3 test server."""

    local: Path | None = None
    s3: Any = None
    bucket: str = ""
    prefix: str = ""

    def url(self, name: str) -> str:
        return f"s3://{self.bucket}/{self.prefix}/{name}" if self.s3 else str(self.local / name)  # type: ignore[operator]

    def files(self) -> dict[str, bytes]:
        if self.s3:
            keys = self.s3.keys(self.bucket, self.prefix + "/")
            return {k[len(self.prefix) + 1 :]: self.s3.get(self.bucket, k) for k in keys}
        assert self.local is not None
        return {p.name: p.read_bytes() for p in sorted(self.local.iterdir()) if p.is_file()}

    def clear(self, keep: Callable[[str], bool] = lambda name: False) -> None:
        if self.s3:
            for k in self.s3.keys(self.bucket, self.prefix + "/"):
                if not keep(k[len(self.prefix) + 1 :]):
                    self.s3.client.delete_object(Bucket=self.bucket, Key=k)
            return
        assert self.local is not None
        self.local.mkdir(parents=True, exist_ok=True)
        for p in self.local.iterdir():
            if not keep(p.name):
                shutil.rmtree(p) if p.is_dir() else p.unlink()


@dataclass
class Job:
    name: str
    place: Place
    work: Path
    out: str
    #: Put the place in its starting state: the old set (or nothing).
    reset: Callable[[], None]
    #: What a reader sees: "old", "new", "none" (no set) or "refused"; anything else fails.
    read: Callable[[], str]

    def run_here(self) -> None:
        sweep_jobs.JOBS[self.name](str(self.work), self.out)

    def process(self, point: int | None = None) -> subprocess.Popen[str]:
        args = [sys.executable, str(JOBS), self.name, str(self.work), self.out]
        if point is not None:
            args.append(str(point))
        return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def pairs_state(prefixes: list[str], old: list[Any] | None, new: list[Any]) -> str:
    """The state every pair of a set reads as (all must agree)."""
    states = set()
    for prefix, o, n in zip(prefixes, old or [None] * len(prefixes), new, strict=True):
        refusal = ""
        try:
            got = docs(prefix)
        except FormatError as e:
            refusal = str(e)
        except FileNotFoundError:
            states.add("none")
            continue
        if refusal:
            assert "rerun" in refusal, refusal
            states.add("refused")
            continue
        assert got in (o, n), f"{prefix} reads as neither set"
        states.add("old" if got == o else "new")
    assert len(states) == 1, f"the pairs of one set read as {states}"
    return states.pop()


def unmixed(files: dict[str, bytes], old: dict[str, bytes], new: dict[str, bytes]) -> None:
    """No index in the store beside data of another run: the pair of every `.bin` and `.idx` there
    is the old set's or the new one's (Megatron, which reads no record, would open any pair)."""
    for name, data in files.items():
        idx = name.removesuffix(".bin") + ".idx"
        if name.endswith(".bin") and idx in files:
            pair = (data, files[idx])
            versions = ((old.get(name), old.get(idx)), (new.get(name), new.get(idx)))
            assert pair in versions, f"{name} beside the {idx} of another run"


def shards_state(place: Place, reference: dict[str, Any]) -> str:
    """A shuffle output: no record (nothing written yet), a record being written (refused: inspect
    reports it), or a committed one whose files are the reference's."""
    files = place.files()
    if "commit.json" not in files:
        # A run claims the output (its record, being written) before anything else lands there.
        assert not [n for n in files if n == "manifest.jsonl" or n.endswith(".tar")], sorted(files)
        return "none"
    record = json.loads(files["commit.json"])
    if record["state"] == "writing":
        if place.local is not None:
            assert any("still being written" in p for p in tokshuf.inspect(place.local).problems)  # type: ignore[union-attr]
        return "refused"
    assert without_timing(files) == reference
    return "new"


def no_points(points: int) -> range:
    return range(0)


def sweep(
    job: Job, points_sample: int, kills: int, also: Callable[[int], range] = no_points
) -> dict[str, int]:
    """Kill ``job`` at sampled write points, at the points ``also(points)`` picks, and at random
    times; check readers and reruns."""
    rng = random.Random(f"{SEED}-{job.name}-{job.place.s3 is not None}")
    job.reset()
    started = time.perf_counter()
    job.run_here()
    duration = time.perf_counter() - started
    reference = without_timing(job.place.files())
    assert job.read() == "new"
    job.reset()
    _core._fail_writes_after(10**18)
    try:
        job.run_here()
    finally:
        points = _core._fail_writes_after(None)
    assert without_timing(job.place.files()) == reference
    chosen = (
        range(points)
        if EVERY_POINT
        else sorted({0, points - 1, *rng.sample(range(points), min(points_sample, points)), *also(points)})
    )
    seen: dict[str, int] = {}
    for n in [*chosen, *[-1] * kills]:
        job.reset()
        if n >= 0:
            p = job.process(n)
            _, err = p.communicate(timeout=120)
            assert p.returncode == 86, (job.name, n, err[-2000:])
        else:
            p = job.process()
            assert p.stdout is not None
            assert p.stdout.readline() == "ready\n"
            time.sleep(rng.uniform(0, duration))
            p.send_signal(signal.SIGKILL)
            p.communicate(timeout=120)
        state = job.read()
        seen[state] = seen.get(state, 0) + 1
        job.run_here()
        assert without_timing(job.place.files()) == reference, (job.name, n)
        assert job.read() == "new"
    return seen


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("sweep-inputs")
    corpus(work / "old.jsonl", "old", 40)
    corpus(work / "new.jsonl", "new", 70)
    for name, n in (("a", 30), ("b", 45)):
        tokshuf.preprocess(corpus(work / f"{name}.jsonl", name, n), work / name, "byte", append_eod=True)
    return work


def local_jobs(inputs: Path, tmp_path: Path) -> list[tuple[Job, set[str]]]:
    place = Place(local=tmp_path / "out")
    keys = sweep_jobs.KEYS

    def key_docs(src: str) -> list[Any]:
        tokshuf.preprocess(
            inputs / f"{src}.jsonl", tmp_path / "ref" / src, "byte", json_keys=keys, append_eod=True
        )
        return [docs(tmp_path / "ref" / f"{src}_{k}_document") for k in keys]

    old, new = key_docs("old"), key_docs("new")
    a, b = inputs / "a_text_document", inputs / "b_text_document"
    merged_old = [docs(a)]
    tokshuf.merge([a, b], tmp_path / "ref" / "ab", summary=False)
    merged_new = [docs(tmp_path / "ref" / "ab")]

    def reset_pre() -> None:
        place.clear()
        tokshuf.preprocess(inputs / "old.jsonl", place.url("c"), "byte", json_keys=keys, append_eod=True)

    def reset_merge() -> None:
        place.clear()
        tokshuf.merge([a], place.url("m"))

    def reset_convert() -> None:
        place.clear()
        from_indexed(a, place.url("m.npy"))

    conv: dict[str, dict[str, bytes]] = {}

    def read_convert() -> str:
        files = place.files()
        npy = place.url("m.npy")
        refusal = ""
        try:
            _core.scan_documents(npy, "uint16", 0)
        except FormatError as e:
            refusal = str(e)
        if refusal:
            assert "rerun" in refusal, refusal
            return "refused"
        got = {k: files[k] for k in ("m.npy", "m.csv.gz")}
        assert got in (conv["old"], conv["new"]), "the token file and its metadata are of two sets"
        return "old" if got == conv["old"] else "new"

    reset_convert()
    conv["old"] = {k: place.files()[k] for k in ("m.npy", "m.csv.gz")}
    from_indexed(b, tmp_path / "ref" / "m.npy")
    conv["new"] = {k: (tmp_path / "ref" / k).read_bytes() for k in ("m.npy", "m.csv.gz")}

    shard_ref: dict[str, Any] = {}

    def reset_shuffle() -> None:
        place.clear()
        shutil.rmtree(inputs / "cells", ignore_errors=True)

    def read_shards() -> str:
        if not shard_ref:
            shard_ref.update(without_timing(place.files()))
        return shards_state(place, shard_ref)

    def job(name: str, out: str, reset: Callable[[], None], read: Callable[[], str]) -> Job:
        return Job(name, place, inputs, out, reset, read)

    pre = [place.url(f"c_{k}_document") for k in keys]
    return [
        (
            job("preprocess", place.url("c"), reset_pre, lambda: pairs_state(pre, old, new)),
            {"old", "new", "refused"},
        ),
        (
            job(
                "merge",
                place.url("m"),
                reset_merge,
                lambda: pairs_state([place.url("m")], merged_old, merged_new),
            ),
            {"old", "new", "refused"},
        ),
        (job("convert", place.url("m.npy"), reset_convert, read_convert), {"old", "new", "refused"}),
        (job("shuffle", str(place.local), reset_shuffle, read_shards), {"none", "new", "refused"}),
        (job("staged", str(place.local), reset_shuffle, read_shards), {"none", "new", "refused"}),
    ]


def test_local_sets_survive_kills_anywhere(inputs: Path, tmp_path: Path) -> None:
    seen = {}
    for job, allowed in local_jobs(inputs, tmp_path):
        states = sweep(job, points_sample=4, kills=2)
        assert set(states) <= allowed, (job.name, states)
        seen[job.name] = states
    # The sample reaches the window where no committed set is left (the refusal the next run
    # repairs) in every job: the kills land inside commits, not only before or after them.
    assert all("refused" in s for s in seen.values()), seen


def test_sets_in_s3_survive_kills_anywhere(
    s3: Any, inputs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOKSHUF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TOKSHUF_STAGING_DIR", str(tmp_path))
    bucket = s3.bucket("sweep")
    keys = sweep_jobs.KEYS

    def place(prefix: str) -> Place:
        return Place(s3=s3, bucket=bucket, prefix=prefix)

    pre = place("pre")

    def key_docs(src: str) -> list[Any]:
        tokshuf.preprocess(
            inputs / f"{src}.jsonl", tmp_path / "ref" / src, "byte", json_keys=keys, append_eod=True
        )
        return [docs(tmp_path / "ref" / f"{src}_{k}_document") for k in keys]

    old, new = key_docs("old"), key_docs("new")

    def reset_pre() -> None:
        pre.clear()
        tokshuf.preprocess(inputs / "old.jsonl", pre.url("c"), "byte", json_keys=keys, append_eod=True)

    reset_pre()
    old_files = pre.files()
    sweep_jobs.preprocess(str(inputs), pre.url("c"))
    new_files = pre.files()

    def read_pre() -> str:
        unmixed(pre.files(), old_files, new_files)
        return pairs_state([pre.url(f"c_{k}_document") for k in keys], old, new)

    parts = place("parts")
    for i in range(3):
        tokshuf.preprocess(
            inputs / "new.jsonl", parts.url("c"), "byte", json_keys=keys, append_eod=True, shard=(i, 3)
        )

    def reset_parts() -> None:
        parts.clear(keep=lambda name: "-part-" in name)

    shard_ref: dict[str, dict[str, Any]] = {}

    def shards(p: Place) -> tuple[Callable[[], None], Callable[[], str]]:
        def reset() -> None:
            p.clear()
            shutil.rmtree(inputs / "cells", ignore_errors=True)

        def read() -> str:
            if p.prefix not in shard_ref:
                shard_ref[p.prefix] = without_timing(p.files())
            return shards_state(p, shard_ref[p.prefix])

        return reset, read

    sh, st = place("shuffle"), place("staged")
    jobs = [
        (
            Job("preprocess", pre, inputs, pre.url("c"), reset_pre, read_pre),
            {"old", "new", "refused"},
        ),
        (
            Job(
                "parts",
                parts,
                inputs,
                parts.url("c"),
                reset_parts,
                lambda: pairs_state([parts.url(f"c_{k}_document") for k in keys], None, new),
            ),
            {"none", "new", "refused"},
        ),
        (Job("shuffle", sh, inputs, f"s3://{bucket}/shuffle", *shards(sh)), {"none", "new", "refused"}),
        (Job("staged", st, inputs, f"s3://{bucket}/staged", *shards(st)), {"none", "new", "refused"}),
    ]

    def upload_points(points: int) -> range:
        """Every point of preprocess's upload (its last dozen): the old indexes must be gone
        before the first new data lands."""
        return range(max(points - 12, 0), points)

    for job, allowed in jobs:
        also = upload_points if job.name == "preprocess" else no_points
        states = sweep(job, points_sample=3, kills=1, also=also)
        assert set(states) <= allowed, (job.name, states)
