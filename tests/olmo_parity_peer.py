"""OLMo-core's own datasets and VSL loader on the parity test's corpora (run by
test_instances_olmo_parity.py in an interpreter where `ai2-olmo-core` is installed; never a tokshuf
dependency).

    python tests/olmo_parity_peer.py CASES.json OUT_DIR  → OUT_DIR/<case>.npz and <case>.json

A dataset case writes every field of every instance as `<field>` (all instances concatenated) and
`<field>_len` (each instance's length), and `<case>.json` with the item keys and each item's
`metadata`. A case's `env` is set while OLMo-core prepares it (`OLMO_DATA_PREP_USE_ARRAY_IF_LOCAL`
makes the padded dataset read the Dolma metadata). A loader case writes, for each rank, the
instance indices of every batch of `NumpyVSLDataLoader` (`rank<r>`, `rank<r>_len`), and in
`<case>.json` the exception each `probes` entry (rank, world size) raised. OLMo-core's packing
sorts documents with numpy's default (unstable) `argsort`; it is made stable here, the order tokshuf
documents, so that ties compare.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np


class _StableNumpy:
    """numpy, except that `argsort` defaults to a stable sort."""

    def __getattr__(self, name: str) -> Any:
        return getattr(np, name)

    @staticmethod
    def argsort(a: Any, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("kind", "stable")
        return np.argsort(a, *args, **kwargs)


def dataset(case: dict[str, Any]) -> Any:
    from olmo_core.data.numpy_dataset import (
        NumpyFSLDataset,
        NumpyInterleavedFSLDataset,
        NumpyPackedFSLDataset,
        NumpyPaddedFSLDataset,
        NumpyVSLDataset,
    )
    from olmo_core.data.types import LongDocStrategy

    classes = {
        "fsl": NumpyFSLDataset,
        "padded": NumpyPaddedFSLDataset,
        "packed": NumpyPackedFSLDataset,
        "interleaved": NumpyInterleavedFSLDataset,
        "vsl": NumpyVSLDataset,
    }
    kw = {**case["kwargs"], **case.get("olmo_kwargs", {})}
    kw["dtype"] = np.dtype(kw["dtype"]).type
    if "long_doc_strategy" in kw:
        kw["long_doc_strategy"] = LongDocStrategy(kw["long_doc_strategy"])
    saved = {k: os.environ.get(k) for k in case.get("env", {})}
    os.environ.update(case.get("env", {}))
    try:
        ds = classes[case["strategy"]](*case["paths"], **kw)
        ds.work_dir = Path(case["work_dir"])
        ds.prepare()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return ds


def run_dataset(case: dict[str, Any], out_dir: Path) -> None:
    ds = dataset(case)
    fields: dict[str, list[np.ndarray]] = {}
    keys: list[str] = []
    metadata = []
    for i in range(len(ds)):
        item = ds[i]
        keys = sorted(item)
        metadata.append(item.get("metadata"))
        for key, value in item.items():
            if key in ("index", "metadata"):
                continue
            fields.setdefault(key, []).append(np.asarray(value).reshape(-1))
    arrays = {"count": np.array(len(ds))}
    for key, values in fields.items():
        arrays[key] = np.concatenate(values).astype(np.int64)
        arrays[f"{key}_len"] = np.array([v.size for v in values], dtype=np.int64)
    np.savez(out_dir / f"{case['name']}.npz", **arrays)  # type: ignore[arg-type]
    (out_dir / f"{case['name']}.json").write_text(json.dumps({"keys": keys, "metadata": metadata}))


def run_loader(case: dict[str, Any], out_dir: Path) -> None:
    from olmo_core.data.collator import DataCollator
    from olmo_core.data.data_loader import NumpyVSLDataLoader

    ds = dataset(case)
    lo = case["loader"]

    def loader(rank: int, world_size: int) -> Any:
        ld = NumpyVSLDataLoader(
            ds,
            collator=DataCollator(pad_token_id=case["kwargs"]["pad_token_id"]),
            global_batch_size=lo["global_batch_size"],
            work_dir=case["work_dir"],
            seed=lo["seed"],
            dp_world_size=world_size,
            dp_rank=rank,
            num_threads=0,
        )
        ld.reshuffle(epoch=lo["epoch"], in_memory=True)
        return ld

    arrays = {}
    for r in range(lo["world_size"]):
        ld = loader(r, lo["world_size"])
        batches = [ld[step]["index"].numpy().astype(np.int64) for step in range(ld.total_batches)]
        arrays[f"rank{r}"] = np.concatenate(batches) if batches else np.zeros(0, np.int64)
        arrays[f"rank{r}_len"] = np.array([b.size for b in batches], dtype=np.int64)
    raised = []
    for rank, world_size in lo["probes"]:
        try:
            loader(rank, world_size)[0]
            raised.append(None)
        except Exception as e:  # what OLMo-core does with it is the point
            raised.append(type(e).__name__)
    np.savez(out_dir / f"{case['name']}.npz", **arrays)  # type: ignore[arg-type]
    (out_dir / f"{case['name']}.json").write_text(json.dumps({"raised": raised}))


def main() -> None:
    cases = json.loads(Path(sys.argv[1]).read_text())
    out_dir = Path(sys.argv[2])
    import olmo_core.data.utils as olmo_utils

    olmo_utils.np = _StableNumpy()  # type: ignore[assignment]
    for case in cases:
        (run_loader if "loader" in case else run_dataset)(case, out_dir)


if __name__ == "__main__":
    main()
