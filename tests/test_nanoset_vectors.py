"""Every test vector of tests/fixtures/megatron/vectors/vectors.json (written by Megatron's and
numpy's own code) against the native implementation."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from conftest import MEGATRON

from tokshuf import _core
from tokshuf._arrays import as_numpy

VECTORS: dict[str, list[dict[str, Any]]] = json.loads((MEGATRON / "vectors" / "vectors.json").read_text())


def hexes(values: list[float]) -> list[str]:
    return [float(v).hex() for v in values]


def canonical_hex(h: str) -> str:
    return float.fromhex(h).hex()


@pytest.mark.parametrize("v", VECTORS["split_parsing"], ids=lambda v: v["split"])
def test_split_parsing(v: dict[str, Any]) -> None:
    vector, matrix = _core.parse_split(v["split"])
    assert hexes(list(vector)) == [canonical_hex(h) for h in v["vector_float_hex"]]
    for got, want in zip(matrix, v["matrix_float_hex"], strict=True):
        if want is None:
            assert got is None
        else:
            assert got is not None
            assert hexes(list(got)) == [canonical_hex(h) for h in want]
    for n, ranges in v["ranges_by_num_elements"].items():
        got_ranges = _core.split_ranges(matrix, int(n))
        assert [None if r is None else list(r) for r in got_ranges] == ranges, n


@pytest.mark.parametrize("v", VECTORS["size_per_split_per_dataset"])
def test_size_per_split_per_dataset(v: dict[str, Any]) -> None:
    normalized = _core.normalize(v["weights"])
    assert hexes(normalized) == [canonical_hex(h) for h in v["normalized_float_hex"]]
    got = _core.size_per_split_per_dataset(normalized, v["sizes"], v["surplus"])
    assert [list(r) for r in got] == v["result"]


@pytest.mark.parametrize("v", VECTORS["normalize"], ids=lambda v: str(len(v["weights_float_hex"])))
def test_normalize_bit_exact(v: dict[str, Any]) -> None:
    weights = [float.fromhex(h) for h in v["weights_float_hex"]]
    assert _core.numpy_sum(weights).hex() == canonical_hex(v["numpy_sum_float_hex"])
    once = _core.normalize(weights)
    assert hexes(once) == [canonical_hex(h) for h in v["normalized_float_hex"]]
    assert hexes(_core.normalize(once)) == [canonical_hex(h) for h in v["normalized_twice_float_hex"]]


@pytest.mark.parametrize("v", VECTORS["build_sample_idx"])
def test_build_sample_idx(v: dict[str, Any]) -> None:
    arr = _core.build_sample_index(
        v["sizes"],
        v["document_index"],
        v["sequence_length"],
        v["num_epochs"],
        v["tokens_per_epoch"],
        drop_last_partial_sequence=v["drop_last_partial_sequence"],
        add_extra_token_to_sequence=v["add_extra_token_to_sequence"],
    )
    got = as_numpy(arr)
    assert got.dtype == np.int32
    assert got.tolist() == v["sample_index"]


@pytest.mark.parametrize("v", VECTORS["build_blending_indices"])
def test_build_blending_indices(v: dict[str, Any]) -> None:
    di, dsi = (as_numpy(a) for a in _core.build_blending_indices(v["weights"], v["size"]))
    assert (di.dtype, dsi.dtype) == (np.int16, np.int64)
    assert di.tolist() == v["dataset_index"]
    assert dsi.tolist() == v["dataset_sample_index"]


@pytest.mark.parametrize("v", VECTORS["build_exhaustive_blending_indices"])
def test_build_exhaustive_blending_indices(v: dict[str, Any]) -> None:
    di, dsi = (as_numpy(a) for a in _core.build_exhaustive_blending_indices(v["sizes"]))
    assert (di.dtype, dsi.dtype) == (np.int16, np.int64)
    assert di.tolist() == v["dataset_index"]
    assert dsi.tolist() == v["dataset_sample_index"]


@pytest.mark.parametrize("v", VECTORS["randomstate_shuffle"], ids=lambda v: str(v["seed"]))
def test_randomstate(v: dict[str, Any]) -> None:
    assert _core.numpy_random_words(v["seed"], 8) == v["first_8_raw_uint32"]
    for key, want in v["shuffle_arange"].items():
        n = int(key.split("_")[0])
        assert _core.numpy_shuffled_aranges(v["seed"], [n]) == [want], key
    seq = v["sequential_shuffles"]
    first, then = _core.numpy_shuffled_aranges(v["seed"], [7, 11])
    assert first == seq["first_arange7_int32"]
    assert then == seq["then_arange11_uint32"]


def test_every_section_is_covered() -> None:
    tested = {
        "split_parsing",
        "size_per_split_per_dataset",
        "normalize",
        "build_sample_idx",
        "build_blending_indices",
        "build_exhaustive_blending_indices",
        "randomstate_shuffle",
    }
    assert set(VECTORS) == tested
