"""Configs A, C and D of the Megatron fixtures, reproduced exactly: every index array (dtype,
shape, values) of every split and every mid-level dataset, every dumped sample's tokens, config
C's ``__getitem__`` dicts and config D's dataset ids; from a fresh build and from the cache."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import MEGATRON

from tokshuf import BlendedNanoset, Nanoset, NanosetConfig, build_nanosets

SPLITS = ("train", "valid", "test")


def fixture(manifest: dict[str, Any], letter: str) -> dict[str, Any]:
    (f,) = [f for f in manifest["dataset_fixtures"] if f["name"].startswith(letter + "_")]
    return f


def config_of(f: dict[str, Any], cache: Path | None) -> NanosetConfig:
    c = f["config"]
    prefixes, weights = c["blend"]
    paths = [str(MEGATRON / p) for p in prefixes]
    data_path: Any
    if weights is not None:
        data_path = dict(zip(paths, weights, strict=True))
    elif len(paths) == 1:
        data_path = paths[0]
    else:
        data_path = paths
    return NanosetConfig(
        data_path,
        sequence_length=c["sequence_length"],
        split=c["split"],
        seed=c["random_seed"],
        cache_dir=None if cache is None else str(cache),
        add_extra_token_to_sequence=c["add_extra_token_to_sequence"],
        drop_last_partial_validation_sequence=c["drop_last_partial_validation_sequence"],
        reset_position_ids=c["reset_position_ids"],
        reset_attention_mask=c["reset_attention_mask"],
        eod_mask_loss=c["eod_mask_loss"],
        create_attention_mask=c["create_attention_mask"],
        eos_token_id=c["eod_token_id"],
        pad_token_id=c["pad_token_id"],
        mid_level_dataset_surplus=c["mid_level_dataset_surplus"],
    )


def assert_arrays(ds: Any, arrays: dict[str, Any]) -> None:
    for name, spec in arrays.items():
        want = np.load(MEGATRON / spec["file"])
        got = getattr(ds, name)
        assert got.dtype == want.dtype, name
        assert got.shape == want.shape, name
        np.testing.assert_array_equal(got, want, err_msg=name)


def check_split(ds: Nanoset | BlendedNanoset, s: dict[str, Any]) -> None:
    assert len(ds) == s["len"]
    assert_arrays(ds, s["arrays"])
    if s["type"] == "BlendedDataset":
        assert isinstance(ds, BlendedNanoset)
        assert len(ds.datasets) == len(s["mid_level"])
        for part, ml in zip(ds.datasets, s["mid_level"], strict=True):
            assert isinstance(part, Nanoset)
            assert (len(part), list(part.index_range)) == (ml["len"], ml["indices_range"])
            assert part.num_epochs == ml["num_epochs"]
            assert_arrays(part, ml["arrays"])
    else:
        assert isinstance(ds, Nanoset)
        assert list(ds.index_range) == s["indices_range"]
        assert ds.num_epochs == s["num_epochs"]
    text = np.load(MEGATRON / s["samples"]["text"]["file"])
    batch = ds.get_batch(np.arange(len(text)))
    assert batch.dtype == np.int64
    np.testing.assert_array_equal(batch, text)
    for k in range(len(text)):
        item = ds[k]
        assert set(item) == {"input_ids"}
        np.testing.assert_array_equal(item["input_ids"], text[k])
    if "dataset_id" in s["samples"]:
        assert isinstance(ds, BlendedNanoset)
        ids = np.load(MEGATRON / s["samples"]["dataset_id"]["file"])
        np.testing.assert_array_equal(ds.dataset_index[: len(ids)], ids)
        assert [ds.megatron_item(k)["dataset_id"] for k in range(5)] == ids[:5].tolist()


@pytest.mark.parametrize("letter", ["A", "C", "D"])
@pytest.mark.parametrize("cached", [False, True], ids=["memory", "cache"])
def test_fixture_config(megatron_manifest: dict[str, Any], tmp_path: Path, letter: str, cached: bool) -> None:
    f = fixture(megatron_manifest, letter)
    cfg = config_of(f, tmp_path / "cache" if cached else None)
    for _round in range(2 if cached else 1):  # the second round maps the cache
        datasets = build_nanosets(cfg, num_samples=f["config"]["sizes"])
        for split, ds in zip(SPLITS, datasets, strict=True):
            assert ds is not None
            check_split(ds, f["splits"][split])
            if cached and _round == 1:
                assert ds.cache_paths is not None
                assert all(Path(p).exists() for p in ds.cache_paths.values())


@pytest.mark.parametrize("split", SPLITS)
def test_config_c_getitem(megatron_manifest: dict[str, Any], split: str) -> None:
    f = fixture(megatron_manifest, "C")
    datasets = dict(
        zip(SPLITS, build_nanosets(config_of(f, None), num_samples=f["config"]["sizes"]), strict=True)
    )
    ds = datasets[split]
    assert ds is not None
    g = f["splits"][split]["getitem"]
    items = [ds.megatron_item(k) for k in g["indices"]]
    text = np.load(MEGATRON / g["text"]["file"])
    np.testing.assert_array_equal(np.stack([ds.get(k) for k in g["indices"]]), text)
    for key in ("tokens", "labels", "loss_mask", "position_ids", "attention_mask"):
        want = np.load(MEGATRON / g[key]["file"])
        got = np.stack([it[key] for it in items])
        assert got.dtype == want.dtype, key
        np.testing.assert_array_equal(got, want, err_msg=key)


def test_padding_item_masks_the_loss(megatron_manifest: dict[str, Any]) -> None:
    f = fixture(megatron_manifest, "C")
    train = build_nanosets(config_of(f, None), num_samples=f["config"]["sizes"])[0]
    assert train is not None
    pad = train.megatron_item(None)
    np.testing.assert_array_equal(pad["tokens"], train.megatron_item(0)["tokens"])
    assert not pad["loss_mask"].any()
