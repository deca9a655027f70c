"""The one cache of index arrays, as both of its users see it: Nanosets and the OLMo-style
instances (and the remote copies of the Rust side) live under one root, chosen by one rule; a
change of the data's content is a new entry for both, a move is not; concurrent builders in
several processes publish one entry; a killed builder's leftovers go; damage is rebuilt or
reported with the entry to delete."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import release
from nanoset_helpers import write_dataset

import tokshuf
from tokshuf import FormatError, Nanoset, NanosetConfig, build_nanosets
from tokshuf._cache import cached, key_of, prefix_identity
from tokshuf.instances import PackedFSLDataset

KINDS = ("nanoset", "instances")


def lengths(n: int = 150, seed: int = 0) -> list[int]:
    return np.random.default_rng(seed).integers(5, 600, n).tolist()


def nanoset(prefix: Path, **kw: Any) -> Nanoset:
    cfg = NanosetConfig(str(prefix), sequence_length=16, split="1,0,0", **kw)
    ds = build_nanosets(cfg, num_samples=(200, None, None))[0]
    assert isinstance(ds, Nanoset)
    return ds


def packed(prefix: Path, **kw: Any) -> PackedFSLDataset:
    return PackedFSLDataset(str(prefix), sequence_length=64, pad_token_id=0, eos_token_id=0, **kw)


def entry_of(kind: str, prefix: Path, **kw: Any) -> Path:
    """Build ``kind``'s dataset of ``prefix``; the directory of its (last) cache entry."""
    if kind == "nanoset":
        paths = nanoset(prefix, **kw).cache_paths
        assert paths is not None
        return Path(paths["sample_index"]).parent
    path = packed(prefix, **kw).cache_path
    assert path is not None
    return path


def arrays(kind: str, prefix: Path, **kw: Any) -> list[np.ndarray]:
    if kind == "nanoset":
        ds = nanoset(prefix, **kw)
        return [np.array(ds.document_index), np.array(ds.sample_index), np.array(ds.shuffle_index)]
    p = packed(prefix, **kw)
    return [np.array(p.documents), np.array(p.instance_offsets), np.array(p.documents_by_instance)]


def assert_same(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


def entries(directory: Path) -> list[str]:
    return (
        sorted(p.name for p in directory.iterdir() if not p.name.startswith("."))
        if directory.exists()
        else []
    )


# -- where ------------------------------------------------------------------------------------
# Each case: the environment to set (None: unset), the cache_dir argument, the root expected
# (relative to tmp_path). The rule: cache_dir, else $TOKSHUF_CACHE_DIR, else
# $XDG_CACHE_HOME/tokshuf, else $HOME/.cache/tokshuf, else $TMPDIR/.cache/tokshuf.
ROOTS = {
    "argument": ({"TOKSHUF_CACHE_DIR": "env"}, "arg", "arg"),
    "TOKSHUF_CACHE_DIR": ({"TOKSHUF_CACHE_DIR": "env", "XDG_CACHE_HOME": "xdg"}, None, "env"),
    "XDG_CACHE_HOME": (
        {"TOKSHUF_CACHE_DIR": None, "XDG_CACHE_HOME": "xdg", "HOME": "home"},
        None,
        "xdg/tokshuf",
    ),
    "HOME": (
        {"TOKSHUF_CACHE_DIR": None, "XDG_CACHE_HOME": None, "HOME": "home"},
        None,
        "home/.cache/tokshuf",
    ),
    "no HOME": (
        {"TOKSHUF_CACHE_DIR": None, "XDG_CACHE_HOME": None, "HOME": None, "TMPDIR": "t"},
        None,
        "t/.cache/tokshuf",
    ),
}


def set_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, env: dict[str, str | None]) -> None:
    for name, value in env.items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, str(tmp_path / value))


@pytest.mark.parametrize("case", list(ROOTS))
def test_one_rule_places_both_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    env, arg, root = ROOTS[case]
    write_dataset(tmp_path / "data" / "d", lengths())
    set_env(monkeypatch, tmp_path, env)
    kw = {} if arg is None else {"cache_dir": str(tmp_path / arg)}
    n = entry_of("nanoset", tmp_path / "data" / "d", **kw)
    i = entry_of("instances", tmp_path / "data" / "d", **kw)
    assert n.parent == tmp_path / root / "nanoset"
    assert i.parent == tmp_path / root / "instances"
    assert entries(n.parent) == [n.name]
    assert n.name.startswith("Nanoset-train-")
    assert [e.split("-")[0] for e in entries(i.parent)] == ["documents", "packed"]
    if case == "argument":  # the argument wins over the environment
        assert not (tmp_path / "env").exists()


@pytest.mark.parametrize("case", ["TOKSHUF_CACHE_DIR", "XDG_CACHE_HOME", "HOME"])
def test_remote_copies_live_under_the_same_root(
    s3: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    env, _, root = ROOTS[case]
    write_dataset(tmp_path / "data" / "d", lengths())
    bucket = s3.bucket(f"roots-{case.lower().replace('_', '-')}")
    for ext in ("idx", "bin"):
        s3.put(bucket, f"k/d.{ext}", (tmp_path / "data" / f"d.{ext}").read_bytes())
    set_env(monkeypatch, tmp_path, env)
    url = f"s3://{bucket}/k/d"
    n = build_nanosets(NanosetConfig(url, sequence_length=16, split="1,0,0"))[0]
    i = PackedFSLDataset(url, sequence_length=64, pad_token_id=0, eos_token_id=0)
    assert n is not None
    assert n.cache_paths is not None
    assert i.cache_path is not None
    base = tmp_path / root
    assert (base / "remote" / "s3" / bucket / "k" / "d.bin").read_bytes() == (
        tmp_path / "data" / "d.bin"
    ).read_bytes()
    assert Path(n.cache_paths["sample_index"]).parent.parent == base / "nanoset"
    assert i.cache_path.parent == base / "instances"


def test_cache_dir_false_builds_nanosets_in_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_dataset(tmp_path / "d", lengths())
    monkeypatch.setenv("TOKSHUF_CACHE_DIR", str(tmp_path / "env"))
    ds = nanoset(tmp_path / "d", cache_dir=False)
    assert ds.cache_paths is None
    assert not (tmp_path / "env").exists()
    assert_same(arrays("nanoset", tmp_path / "d"), arrays("nanoset", tmp_path / "d", cache_dir=False))


# -- the key ----------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_new_content_with_the_same_size_and_mtime_is_a_new_entry(tmp_path: Path, kind: str) -> None:
    prefix, cache = tmp_path / "d", tmp_path / "cache"
    old_lengths = lengths()
    write_dataset(prefix, old_lengths)
    stats = {ext: os.stat(f"{prefix}.{ext}") for ext in ("idx", "bin")}
    old_entry, old = entry_of(kind, prefix, cache_dir=cache), arrays(kind, prefix, cache_dir=cache)
    # The same documents in reverse order: both files keep their sizes, and get their times back
    # (as `rsync -a` or `cp -p` of a re-tokenized dataset would leave them).
    write_dataset(prefix, old_lengths[::-1])
    for ext, st in stats.items():
        assert os.path.getsize(f"{prefix}.{ext}") == st.st_size
        os.utime(f"{prefix}.{ext}", ns=(st.st_atime_ns, st.st_mtime_ns))
    new_entry, new = entry_of(kind, prefix, cache_dir=cache), arrays(kind, prefix, cache_dir=cache)
    assert new_entry != old_entry
    assert entries(cache / kind) == sorted({*entries(cache / kind), old_entry.name, new_entry.name})
    fresh = arrays(kind, prefix, cache_dir=tmp_path / "fresh")
    assert any(not np.array_equal(a, b) for a, b in zip(old, fresh, strict=True))
    assert_same(new, fresh)


@pytest.mark.parametrize("kind", KINDS)
def test_moved_data_keeps_its_entries(tmp_path: Path, kind: str) -> None:
    cache = tmp_path / "cache"
    write_dataset(tmp_path / "a" / "d", lengths())
    before = entry_of(kind, tmp_path / "a" / "d", cache_dir=cache)
    listing = entries(cache / kind)
    os.rename(tmp_path / "a", tmp_path / "b")  # keeps sizes, times and contents
    assert entry_of(kind, tmp_path / "b" / "d", cache_dir=cache) == before
    assert entries(cache / kind) == listing


def test_keying_a_10b_token_dataset_reads_a_few_blocks(tmp_path: Path) -> None:
    # 10 B uint16 tokens: a 20 GB .bin (sparse: no disk used). Hashing it whole would take
    # seconds at the least; the key reads 9 blocks of 4 KiB.
    write_dataset(tmp_path / "d", lengths())
    with open(tmp_path / "d.bin", "r+b") as f:
        f.truncate(20 * 10**9)
    t = time.perf_counter()
    ident = prefix_identity(tmp_path / "d")
    assert time.perf_counter() - t < 0.5
    assert ident["bin"]["size"] == 20 * 10**9
    # A byte changed in a sampled block (the middle one) changes the key.
    with open(tmp_path / "d.bin", "r+b") as f:
        f.seek((20 * 10**9 - 4096) // 8 * 4)
        f.write(b"\1")
    assert prefix_identity(tmp_path / "d")["bin"]["sample_sha256"] != ident["bin"]["sample_sha256"]


# -- concurrent builders, killed builders -----------------------------------------------------
CHILD = textwrap.dedent(
    """
    import hashlib, json, os, sys, time
    from tokshuf import NanosetConfig, _core, build_nanosets
    from tokshuf.instances import PackedFSLDataset

    prefix, go, mode = sys.argv[1:4]
    builds = {"nanoset": 0, "instances": 0}

    def counted(kind, real):
        def build(*a, **k):
            builds[kind] += 1
            if mode == "hang":
                open(go + "." + kind, "w").close()
                time.sleep(600)
            time.sleep(0.2)  # widen the race window
            return real(*a, **k)
        return build

    _core.build_gpt_indices = counted("nanoset", _core.build_gpt_indices)
    _core.pack_documents = counted("instances", _core.pack_documents)
    while mode == "race" and not os.path.exists(go):
        time.sleep(0.001)
    digest, paths = hashlib.sha256(), {}
    if mode != "hang" or sys.argv[4] == "nanoset":
        cfg = NanosetConfig(prefix, sequence_length=16, split="1,0,0")
        ds = build_nanosets(cfg, num_samples=(200, None, None))[0]
        digest.update(ds.sample_index.tobytes() + ds.shuffle_index.tobytes() + ds.document_index.tobytes())
        paths["nanoset"] = os.path.dirname(ds.cache_paths["sample_index"])
    if mode != "hang" or sys.argv[4] == "instances":
        p = PackedFSLDataset(prefix, sequence_length=64, pad_token_id=0, eos_token_id=0)
        digest.update(p.documents.tobytes() + p.documents_by_instance.tobytes())
        paths["instances"] = str(p.cache_path)
    print(json.dumps({"builds": builds, "digest": digest.hexdigest(), "paths": paths}))
    """
)


def child(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    script = tmp_path / "child.py"
    if not script.exists():  # rewritten under a child that is reading it, it would run empty
        script.write_text(CHILD)
    return subprocess.Popen(
        [sys.executable, str(script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TOKSHUF_CACHE_DIR": str(tmp_path / "cache")},
    )


def test_concurrent_processes_publish_one_entry_for_both(tmp_path: Path) -> None:
    write_dataset(tmp_path / "d", lengths(2000))
    go = tmp_path / "go"
    procs = [child(tmp_path, str(tmp_path / "d"), str(go), "race") for _ in range(6)]
    results = release(procs, go)
    assert len({r["digest"] for r in results}) == 1
    assert len({json.dumps(r["paths"], sort_keys=True) for r in results}) == 1
    for kind in KINDS:
        assert sum(r["builds"][kind] for r in results) == 1, kind
    cache = tmp_path / "cache"
    assert len(entries(cache / "nanoset")) == 1
    assert [e.split("-")[0] for e in entries(cache / "instances")] == ["documents", "packed"]
    assert sorted(p.name for p in cache.glob("*/.*")) == [".locks", ".locks"]  # no temporaries


@pytest.mark.parametrize("kind", KINDS)
def test_a_killed_builder_leaves_nothing_behind(tmp_path: Path, kind: str) -> None:
    write_dataset(tmp_path / "d", lengths())
    started = tmp_path / "started"
    p = child(tmp_path, str(tmp_path / "d"), str(started), "hang", kind)
    deadline = time.monotonic() + 120
    while not Path(f"{started}.{kind}").exists():
        assert p.poll() is None, p.communicate()[1]
        assert time.monotonic() < deadline
        time.sleep(0.01)
    cache = tmp_path / "cache" / kind
    assert [q.name for q in cache.glob(".*.tmp-*")], "the builder writes in a temporary"
    assert not [e for e in entries(cache) if not e.startswith("documents-")]
    os.kill(p.pid, signal.SIGKILL)
    p.communicate()
    fresh = arrays(kind, tmp_path / "d", cache_dir=tmp_path / "fresh")
    assert_same(arrays(kind, tmp_path / "d", cache_dir=tmp_path / "cache"), fresh)
    assert [q.name for q in cache.glob(".*")] == [".locks"]


def test_temporaries_of_other_hosts_go_when_a_day_old(tmp_path: Path) -> None:
    # A builder on another host (sharing the cache over NFS) cannot be asked whether it lives.
    root = tmp_path / "k"
    root.mkdir()
    name = f"x-{key_of({'name': 'x', 'a': 1})}"
    old, recent = root / f".{name}.tmp-elsewhere-1-00", root / f".{name}.tmp-elsewhere-2-00"
    for d in (old, recent):
        d.mkdir()
    two_days_ago = time.time() - 2 * 86400
    os.utime(old, (two_days_ago, two_days_ago))
    cached(tmp_path, "k", "x", {"a": 1}, lambda: {"v": np.arange(3, dtype=np.uint64)})
    assert sorted(p.name for p in root.glob(".*")) == [".locks", recent.name]


# -- damage -----------------------------------------------------------------------------------
def _truncate(entry: Path) -> None:
    f = max((f for f in entry.iterdir() if f.name != "meta.json"), key=lambda f: f.stat().st_size)
    f.write_bytes(f.read_bytes()[:-8])


def _remove_an_array(entry: Path) -> None:
    next(f for f in entry.iterdir() if f.name != "meta.json").unlink()


def _garble_meta(entry: Path) -> None:
    (entry / "meta.json").write_text('{"format": ')


def _npy_header(entry: Path) -> None:
    # Same size, but the header says another dtype: the bytes would be read as wrong values.
    f = entry / "sample_index.npy"
    data = f.read_bytes()
    f.write_bytes(data.replace(b"'<i4'", b"'<u4'", 1).replace(b"'<i8'", b"'<u8'", 1))
    assert f.read_bytes() != data


DAMAGE = {"truncated": _truncate, "missing": _remove_an_array, "meta": _garble_meta, "header": _npy_header}


@pytest.mark.parametrize(
    ("kind", "damage"),
    [(k, d) for k in KINDS for d in DAMAGE if not (k == "instances" and d == "header")],  # raw: no header
)
def test_a_damaged_entry_is_rebuilt(tmp_path: Path, kind: str, damage: str) -> None:
    write_dataset(tmp_path / "d", lengths())
    cache = tmp_path / "cache"
    want = arrays(kind, tmp_path / "d", cache_dir=cache)
    entry = entry_of(kind, tmp_path / "d", cache_dir=cache)
    DAMAGE[damage](entry)
    assert entry_of(kind, tmp_path / "d", cache_dir=cache) == entry
    assert_same(arrays(kind, tmp_path / "d", cache_dir=cache), want)
    assert [q.name for q in (cache / kind).glob(".*")] == [".locks"]


@pytest.mark.parametrize("kind", KINDS)
def test_wrong_values_name_the_entry_to_delete(tmp_path: Path, kind: str) -> None:
    write_dataset(tmp_path / "d", lengths())
    cache = tmp_path / "cache"
    entry = entry_of(kind, tmp_path / "d", cache_dir=cache)
    # Well-formed files of the right size whose values point far beyond the data.
    name = "sample_index.npy" if kind == "nanoset" else "doc_ids.bin"
    f = entry / name
    if kind == "nanoset":
        a = np.load(f)
        a[:, 1] += 10**6
        np.save(f, a)
    else:
        f.write_bytes(np.full(f.stat().st_size // 8, 2**40, np.uint64).tobytes())
    read = (
        nanoset(tmp_path / "d", cache_dir=cache).get
        if kind == "nanoset"
        else packed(tmp_path / "d", cache_dir=cache).__getitem__
    )
    with pytest.raises((tokshuf.ConfigError, FormatError)) as info:
        read(0)
    message = str(info.value)
    assert entry.name in message, message
    assert "delete" in message, message
    assert entry.exists()  # left for the user to delete: the files are of the right shape
