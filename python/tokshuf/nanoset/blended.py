"""``BlendedNanoset``: Megatron's ``BlendedDataset`` over several :class:`Nanoset` s."""

from __future__ import annotations

from typing import Any

import numpy as np

from tokshuf import _core
from tokshuf._arrays import as_numpy
from tokshuf.errors import ConfigError
from tokshuf.nanoset.config import NanosetConfig
from tokshuf.nanoset.dataset import Nanoset, SampleDataset

__all__ = ["BlendedNanoset"]


class BlendedNanoset(SampleDataset):
    """Sample k is sample ``dataset_sample_index[k]`` of ``datasets[dataset_index[k]]``.

    Parameters
    ----------
    datasets
        One :class:`Nanoset` per prefix of the blend, in the config's order; ``None`` for a prefix
        with weight 0 (it serves no sample).
    weights
        Float weights (normalized here, as Megatron's BlendedDataset does), or the datasets' int
        lengths for an unweighted blend.
    size
        Number of samples (greedy blending); ``None`` blends every sample of every dataset exactly
        once (Megatron's exhaustive blending; unweighted blends only).
    """

    _pickled: tuple[str, ...] = ("datasets", "weights", "size")

    def __init__(
        self,
        datasets: list[Nanoset | None],
        weights: list[float] | list[int],
        size: int | None,
        split: str,
        config: NanosetConfig,
        *,
        arrays: dict[str, _core.IndexArray] | None = None,
        paths: dict[str, str] | None = None,
    ) -> None:
        if len(datasets) != len(weights):
            raise ConfigError(f"{len(datasets)} datasets but {len(weights)} weights")
        self.datasets = datasets
        self.weights = _core.normalize([float(w) for w in weights]) if size is not None else list(weights)
        self.size = size
        self._attach(split, config, arrays, paths)
        self._check_oversampling()

    def description(self) -> dict[str, Any]:
        return self._blend_description("BlendedNanoset", weights=self.weights, size=self.size)

    def _blend_description(self, kind: str, **fields: Any) -> dict[str, Any]:
        """A blend's cache key: its class and split, its datasets' keys, then ``fields`` (in order)."""
        return {
            "class": kind,
            "split": self.split,
            "datasets": [None if d is None else d.description() for d in self.datasets],
            **fields,
        }

    def _build_arrays(self) -> dict[str, _core.IndexArray]:
        if self.size is None:
            di, si = _core.build_exhaustive_blending_indices([int(w) for w in self.weights])
        else:
            di, si = _core.build_blending_indices([float(w) for w in self.weights], self.size)
        return {"dataset_index": di, "dataset_sample_index": si}

    def _open(self) -> None:
        a = self._arrays
        self._reader = _core.SampleReader.blend(
            [None if d is None else d._reader for d in self.datasets],
            a["dataset_index"],
            a["dataset_sample_index"],
        )
        self.dataset_index = as_numpy(a["dataset_index"])
        self.dataset_sample_index = as_numpy(a["dataset_sample_index"])

    def _check_oversampling(self) -> None:
        drawn: list[int] = (
            np.bincount(self.dataset_index, minlength=len(self.datasets)).tolist() if len(self) else []
        )
        for d, count in enumerate(drawn):
            ds = self.datasets[d]
            have = 0 if ds is None else len(ds)
            if count > have:
                name = "an excluded dataset" if ds is None else repr(ds.prefix)
                raise ConfigError(
                    f"the {self.split} blend draws {count} samples from dataset {d} ({name}), which has only "
                    f"{have}; raise mid_level_dataset_surplus (now {self.config.mid_level_dataset_surplus}) "
                    f"or the weight's share of samples"
                )

    def megatron_item(self, k: int | None) -> dict[str, Any]:
        """Megatron's BlendedDataset item: ``{"dataset_id": d, **GPTDataset item}``."""
        i = 0 if k is None else k
        d = int(self.dataset_index[i])
        return {"dataset_id": d, **super().megatron_item(k)}

    def __repr__(self) -> str:
        names = [None if d is None else d.prefix for d in self.datasets]
        return f"BlendedNanoset({names}, split={self.split!r}, samples={len(self)})"
