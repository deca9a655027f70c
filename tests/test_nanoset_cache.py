"""The index cache: keyed by every parameter and the data's identity, atomic, locked, mapped.
(What the Nanoset and instance caches share, location and key rule, is in test_cache.py.)"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import release
from nanoset_helpers import lognormal_lengths, write_dataset

import tokshuf
from tokshuf import Nanoset, NanosetConfig, _core, build_nanosets


def entries(cache: Path) -> set[str]:
    return {p.name for p in (cache / "nanoset").iterdir() if not p.name.startswith(".")}


def config(prefix: Path, cache: Path, **kw: object) -> NanosetConfig:
    kw.setdefault("sequence_length", 16)
    return NanosetConfig(str(prefix), cache_dir=str(cache), **kw)  # type: ignore[arg-type]


def arrays_of(ds: object) -> dict[str, np.ndarray]:
    assert isinstance(ds, Nanoset)
    return {n: np.array(getattr(ds, n)) for n in ("document_index", "sample_index", "shuffle_index")}


def test_layout_hit_and_description(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_dataset(tmp_path / "d", lognormal_lengths(200))
    cache = tmp_path / "cache"
    first = build_nanosets(config(tmp_path / "d", cache, split="90,5,5"), num_samples=(300, 10, 5))
    assert sorted(e.rsplit("-", 1)[0] for e in entries(cache)) == [
        "Nanoset-test",
        "Nanoset-train",
        "Nanoset-valid",
    ]
    assert not [p for p in (cache / "nanoset").iterdir() if ".tmp-" in p.name]
    (train_dir,) = (cache / "nanoset").glob("Nanoset-train-*")
    assert sorted(p.name for p in train_dir.iterdir()) == [
        "document_index.npy",
        "meta.json",
        "sample_index.npy",
        "shuffle_index.npy",
    ]
    desc = json.loads((train_dir / "meta.json").read_text())["fields"]
    for ext in ("idx", "bin"):
        st = os.stat(f"{tmp_path / 'd'}.{ext}")
        assert desc["data"][ext]["size"] == st.st_size
        assert desc["data"][ext]["mtime_ns"] == st.st_mtime_ns
    assert desc["num_samples"] == 300
    # The .npy files are plain numpy files.
    train = first[0]
    assert isinstance(train, Nanoset)
    assert train.cache_paths is not None
    for name, path in train.cache_paths.items():
        np.testing.assert_array_equal(np.load(path), getattr(train, name))

    def no_build(*args: object, **kwargs: object) -> None:
        raise AssertionError("a cache hit must not rebuild")

    monkeypatch.setattr(_core, "build_gpt_indices", no_build)
    again = build_nanosets(config(tmp_path / "d", cache, split="90,5,5"), num_samples=(300, 10, 5))
    for a, b in zip(first, again, strict=True):
        for name, arr in arrays_of(a).items():
            np.testing.assert_array_equal(arr, arrays_of(b)[name])


@pytest.mark.parametrize(
    "change",
    [
        {"seed": 7},
        {"sequence_length": 17},
        {"add_extra_token_to_sequence": False},
        {"index_scheme": "repeat"},
        {"split": "90,5,5"},
        {"num_samples": (301, None, None)},
    ],
)
def test_every_parameter_is_in_the_key(tmp_path: Path, change: dict[str, object]) -> None:
    write_dataset(tmp_path / "d", lognormal_lengths(200))
    cache = tmp_path / "cache"
    base = {"num_samples": (300, None, None), "split": "1,0,0"}
    build_nanosets(config(tmp_path / "d", cache, **base))  # type: ignore[arg-type]
    before = entries(cache)
    changed = {**base, **change}
    ds = build_nanosets(config(tmp_path / "d", cache, **changed))[0]  # type: ignore[arg-type]
    assert entries(cache) - before, "a changed parameter must not reuse the old entry"
    fresh = build_nanosets(config(tmp_path / "d", tmp_path / "other", **changed))[0]  # type: ignore[arg-type]
    for name, arr in arrays_of(fresh).items():
        np.testing.assert_array_equal(arrays_of(ds)[name], arr)


def test_drop_last_of_valid_is_in_the_key(tmp_path: Path) -> None:
    write_dataset(tmp_path / "d", lognormal_lengths(200))
    cache = tmp_path / "cache"
    a = build_nanosets(config(tmp_path / "d", cache, split="1,1,0"))[1]
    b = build_nanosets(
        config(tmp_path / "d", cache, split="1,1,0", drop_last_partial_validation_sequence=False)
    )[1]
    assert a is not None
    assert b is not None
    assert len(b) == len(a) + 1  # the padded last sample


def test_rewritten_data_is_a_miss(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    write_dataset(tmp_path / "d", lognormal_lengths(200, seed=1))
    old = build_nanosets(config(tmp_path / "d", cache, split="1,0,0"))[0]
    assert old is not None
    time.sleep(0.01)
    write_dataset(tmp_path / "d", lognormal_lengths(200, seed=2), seed=5)  # same path, new data
    new = build_nanosets(config(tmp_path / "d", cache, split="1,0,0"))[0]
    assert new is not None
    assert len(entries(cache)) == 2
    fresh = build_nanosets(NanosetConfig(str(tmp_path / "d"), sequence_length=16, split="1,0,0"))[0]
    assert fresh is not None
    np.testing.assert_array_equal(new.get_batch(range(len(fresh))), fresh.get_batch(range(len(fresh))))
    assert len(new) != len(old) or not np.array_equal(new.sample_index, old.sample_index)


def test_damaged_entries_are_rebuilt(tmp_path: Path) -> None:
    write_dataset(tmp_path / "d", lognormal_lengths(200))
    cache = tmp_path / "cache"
    c = config(tmp_path / "d", cache, split="1,0,0")
    ds = build_nanosets(c, num_samples=(100, None, None))[0]
    assert isinstance(ds, Nanoset)
    assert ds.cache_paths is not None
    want = arrays_of(ds)
    path = Path(ds.cache_paths["sample_index"])
    del ds
    path.write_bytes(path.read_bytes()[:-8])  # truncated
    # The temporary of a builder that was killed (its pid is gone).
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    left = path.parent.with_name(f".{path.parent.name}.tmp-{socket.gethostname()}-{int(dead.stdout)}-0")
    left.mkdir()
    (left / "sample_index.npy").write_bytes(b"junk")
    again = build_nanosets(c, num_samples=(100, None, None))[0]
    for name, arr in want.items():
        np.testing.assert_array_equal(arrays_of(again)[name], arr)
    assert [p.name for p in (cache / "nanoset").glob(".*")] == [".locks"]


def test_npy_files_match_numpy_save_byte_for_byte(tmp_path: Path) -> None:
    write_dataset(tmp_path / "d", lognormal_lengths(100))
    ds = build_nanosets(config(tmp_path / "d", tmp_path / "cache", split="1,0,0"))[0]
    assert isinstance(ds, Nanoset)
    assert ds.cache_paths is not None
    for name, path in ds.cache_paths.items():
        np.save(tmp_path / "ref.npy", np.array(getattr(ds, name)))
        assert Path(path).read_bytes() == (tmp_path / "ref.npy").read_bytes(), name


CHILD = textwrap.dedent(
    """
    import hashlib, json, os, sys, time
    from tokshuf import NanosetConfig, _core, build_nanosets

    builds = 0
    real = _core.build_gpt_indices

    def counting(*a, **k):
        global builds
        builds += 1
        return real(*a, **k)

    _core.build_gpt_indices = counting
    go = sys.argv[3]
    while not os.path.exists(go):
        time.sleep(0.001)
    cfg = NanosetConfig(
        [sys.argv[1], sys.argv[2]], sequence_length=64, cache_dir=sys.argv[4], split="98,1,1"
    )
    digest = hashlib.sha256()
    for ds in build_nanosets(cfg, num_samples=(20000, None, 100)):
        for part in ds.datasets:
            for name in ("document_index", "sample_index", "shuffle_index"):
                digest.update(getattr(part, name).tobytes())
        digest.update(ds.dataset_index.tobytes())
        digest.update(ds.dataset_sample_index.tobytes())
    print(json.dumps({"builds": builds, "digest": digest.hexdigest()}))
    """
)


def test_eight_processes_on_a_cold_cache(tmp_path: Path) -> None:
    write_dataset(tmp_path / "a", lognormal_lengths(20000, seed=3))
    write_dataset(tmp_path / "b", lognormal_lengths(5000, seed=4), dtype="int32")
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    go, cache = tmp_path / "go", tmp_path / "cache"
    args = [str(tmp_path / "a"), str(tmp_path / "b"), str(go), str(cache)]
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(8)
    ]
    results = release(procs, go)
    assert len({r["digest"] for r in results}) == 1
    # 2 prefixes x 3 splits = 6 GPT entries, built once in all, plus 3 blend entries.
    assert sum(r["builds"] for r in results) == 6
    assert len(entries(cache)) == 9
    assert len(list(cache.rglob("*.npy"))) == 6 * 3 + 3 * 2
    assert not list(cache.rglob("*.tmp-*"))


def test_corrupt_cached_values_name_the_cache_and_how_to_rebuild(tmp_path: Path) -> None:
    write_dataset(tmp_path / "d", lognormal_lengths(200))
    cache = tmp_path / "cache"
    c = config(tmp_path / "d", cache, split="1,0,0")
    ds = build_nanosets(c, num_samples=(100, None, None))[0]
    assert isinstance(ds, Nanoset)
    assert ds.cache_paths is not None
    path = Path(ds.cache_paths["sample_index"])
    del ds
    # Well-formed .npy, wrong values: every sample starts at a huge offset into its document.
    arr = np.load(path)
    arr[:, 1] += 10_000
    np.save(path, arr)
    damaged = build_nanosets(c, num_samples=(100, None, None))[0]
    assert isinstance(damaged, Nanoset)
    with pytest.raises(tokshuf.ConfigError) as info:
        damaged.get(0)
    message = str(info.value)
    entry = path.parent.name
    assert str(cache) in message, message
    assert entry in message, message
    assert "delete" in message, message
    assert "rebuilt" in message, message
