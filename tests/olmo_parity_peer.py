"""OLMo-core's own datasets on the parity test's corpora (run by test_instances_olmo_parity.py in an
interpreter where `ai2-olmo-core` is installed; never a tokshuf dependency).

    python tests/olmo_parity_peer.py CASES.json OUT_DIR  → OUT_DIR/<case>.npz per case

Every field of every instance is written as `<field>` (all instances concatenated) and
`<field>_len` (each instance's length). OLMo-core's packing sorts documents with numpy's default
(unstable) `argsort`; it is made stable here, the order tokshuf documents, so that ties compare.
"""

from __future__ import annotations

import json
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


def main() -> None:
    cases = json.loads(Path(sys.argv[1]).read_text())
    out_dir = Path(sys.argv[2])
    import olmo_core.data.utils as olmo_utils
    from olmo_core.data.numpy_dataset import (
        NumpyFSLDataset,
        NumpyInterleavedFSLDataset,
        NumpyPackedFSLDataset,
        NumpyPaddedFSLDataset,
        NumpyVSLDataset,
    )
    from olmo_core.data.types import LongDocStrategy

    olmo_utils.np = _StableNumpy()  # type: ignore[assignment]
    classes = {
        "fsl": NumpyFSLDataset,
        "padded": NumpyPaddedFSLDataset,
        "packed": NumpyPackedFSLDataset,
        "interleaved": NumpyInterleavedFSLDataset,
        "vsl": NumpyVSLDataset,
    }
    for case in cases:
        kw = dict(case["kwargs"])
        kw["dtype"] = np.dtype(kw["dtype"]).type
        if "long_doc_strategy" in kw:
            kw["long_doc_strategy"] = LongDocStrategy(kw["long_doc_strategy"])
        ds = classes[case["strategy"]](*case["paths"], **kw)
        ds.work_dir = Path(case["work_dir"])
        ds.prepare()
        fields: dict[str, list[np.ndarray]] = {}
        for i in range(len(ds)):
            for key, value in ds[i].items():
                if key in ("index", "metadata"):
                    continue
                fields.setdefault(key, []).append(np.asarray(value).reshape(-1))
        arrays = {"count": np.array(len(ds))}
        for key, values in fields.items():
            arrays[key] = np.concatenate(values).astype(np.int64)
            arrays[f"{key}_len"] = np.array([v.size for v in values], dtype=np.int64)
        np.savez(out_dir / f"{case['name']}.npz", **arrays)  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
