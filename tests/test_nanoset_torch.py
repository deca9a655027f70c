"""Nanosets as torch map-style datasets (DataLoader with workers, DistributedSampler, resume), and
no torch import when torch is absent."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from nanoset_helpers import lognormal_lengths, write_dataset

from tokshuf import NanosetConfig, build_nanosets
from tokshuf.nanoset import SkipSampler, resume_sampler


@pytest.fixture(scope="module")
def prefixes(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    d = tmp_path_factory.mktemp("torch")
    write_dataset(d / "a", lognormal_lengths(300, seed=5))
    write_dataset(d / "b", lognormal_lengths(100, seed=6), dtype="int32")
    return str(d / "a"), str(d / "b")


@pytest.mark.torch
@pytest.mark.parametrize("cached", [False, True])
@pytest.mark.parametrize("blend", [False, True])
def test_dataloader_with_workers(
    prefixes: tuple[str, str], tmp_path: Path, cached: bool, blend: bool
) -> None:
    torch = pytest.importorskip("torch")
    data = {prefixes[0]: 0.6, prefixes[1]: 0.4} if blend else prefixes[0]
    cfg = NanosetConfig(
        data, sequence_length=32, split="1,0,0", cache_dir=str(tmp_path / "c") if cached else None
    )
    train = build_nanosets(cfg, num_samples=(256, None, None))[0]
    assert train is not None
    loader = torch.utils.data.DataLoader(train, batch_size=16, num_workers=2, shuffle=False)
    batches = list(loader)
    got = torch.cat([b["input_ids"] for b in batches]).numpy()
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, train.get_batch(range(len(train))))
    if cached and blend:  # spawned workers unpickle the dataset (by path) instead of inheriting it
        loader = torch.utils.data.DataLoader(
            train, batch_size=64, num_workers=1, multiprocessing_context="spawn", shuffle=False
        )
        first = next(iter(loader))["input_ids"].numpy()
        np.testing.assert_array_equal(first, train.get_batch(range(64)))


@pytest.mark.torch
@pytest.mark.parametrize("consumed", [0, 4, 37])
@pytest.mark.parametrize("drop_last", [True, False])
def test_resume_sampler_is_distributed_sampler_plus_skip(
    prefixes: tuple[str, str], consumed: int, drop_last: bool
) -> None:
    torch = pytest.importorskip("torch")
    train = build_nanosets(NanosetConfig(prefixes[0], sequence_length=32, split="1,0,0"), (103, None, None))[
        0
    ]
    assert train is not None
    for world in (1, 2, 3):
        for rank in range(world):
            ref = torch.utils.data.DistributedSampler(
                train, num_replicas=world, rank=rank, shuffle=False, drop_last=drop_last
            )
            skip = consumed // world
            mine = resume_sampler(train, consumed, num_replicas=world, rank=rank, drop_last=drop_last)
            assert list(mine) == list(ref)[skip:]
            assert len(mine) == len(ref) - skip
            assert list(SkipSampler(ref, skip)) == list(mine)
            loader = torch.utils.data.DataLoader(train, sampler=mine, batch_size=5)
            ids = torch.cat([b["input_ids"] for b in loader]).numpy() if len(mine) else np.zeros((0, 33))
            np.testing.assert_array_equal(ids, train.get_batch(list(mine)) if len(mine) else ids)


def test_resume_sampler_nanotron_tv7() -> None:
    # nanotron spec TV7: N = 12, dp = 2, micro-batch 2, consumed = 4.
    class Twelve:
        def __len__(self) -> int:
            return 12

    rank0 = list(resume_sampler(Twelve(), 4, num_replicas=2, rank=0))
    rank1 = list(resume_sampler(Twelve(), 4, num_replicas=2, rank=1))
    assert [rank0[:2], rank0[2:4]] == [[4, 6], [8, 10]]
    assert [rank1[:2], rank1[2:4]] == [[5, 7], [9, 11]]


NO_TORCH = textwrap.dedent(
    """
    import pickle, sys
    sys.modules["torch"] = None  # any `import torch` now raises ImportError
    import numpy as np
    import tokshuf
    from tokshuf.nanoset import resume_sampler
    prefix = sys.argv[1]
    cfg = tokshuf.NanosetConfig(prefix, sequence_length=16, split="90,10,0")
    train, valid, test = tokshuf.build_nanosets(cfg, num_samples=(50, None, None))
    assert train[0]["input_ids"].shape == (17,)
    assert train.get_batch([0, 1]).shape == (2, 17)
    back = pickle.loads(pickle.dumps(train))
    assert np.array_equal(back.get_batch(range(10)), train.get_batch(range(10)))
    assert list(resume_sampler(train, 2, num_replicas=2, rank=1))[:2] == [3, 5]
    train.megatron_item(3)
    assert sys.modules["torch"] is None
    print("ok")
    """
)


def test_no_torch_needed(prefixes: tuple[str, str], tmp_path: Path) -> None:
    script = tmp_path / "no_torch.py"
    script.write_text(NO_TORCH)
    r = subprocess.run(
        [sys.executable, str(script), prefixes[0]], capture_output=True, text=True, check=False
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"
