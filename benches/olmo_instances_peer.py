"""OLMo-core's own numpy datasets on the benchmark corpus (run by bench_instances.py in an
interpreter where `ai2-olmo-core` is installed; never a tokshuf dependency).

    python benches/olmo_instances_peer.py CONFIG.json  → one JSON line
"""

from __future__ import annotations

import json
import sys
import tempfile
import time

import numpy as np


def main() -> None:
    with open(sys.argv[1]) as f:
        cfg = json.load(f)
    from olmo_core.data.numpy_dataset import (
        NumpyFSLDataset,
        NumpyPackedFSLDataset,
        NumpyPaddedFSLDataset,
        NumpyVSLDataset,
    )

    common = {
        "pad_token_id": cfg["pad"],
        "eos_token_id": cfg["eos"],
        "vocab_size": cfg["vocab"],
        "dtype": np.dtype(cfg["dtype"]).type,
    }
    seq = cfg["sequence_length"]
    makers = {
        "fsl": lambda: NumpyFSLDataset(
            *cfg["paths"], sequence_length=seq, generate_doc_lengths=True, **common
        ),
        "padded": lambda: NumpyPaddedFSLDataset(*cfg["paths"], sequence_length=seq, **common),
        "packed": lambda: NumpyPackedFSLDataset(
            *cfg["paths"], sequence_length=seq, generate_doc_lengths=True, **common
        ),
        "vsl": lambda: NumpyVSLDataset(
            *cfg["paths"], max_sequence_length=seq, min_sequence_length=cfg["vsl_min"], **common
        ),
    }
    out: dict[str, object] = {"olmo_core": True}
    rng = np.random.default_rng(0)
    for name in cfg["strategies"]:
        if name not in makers:
            continue
        with tempfile.TemporaryDirectory() as work:
            ds = makers[name]()
            ds.work_dir = work
            t = time.perf_counter()
            ds.prepare()
            out[f"{name}_build_s"] = time.perf_counter() - t
            # The items tokshuf timed (the instances are the same), else random ones.
            given = cfg.get("item_indices", {}).get(name)
            idx = given if given and max(given) < len(ds) else rng.integers(0, len(ds), cfg["items"])
            t = time.perf_counter()
            tokens = 0
            for i in idx:
                item = ds[int(i)]
                mask = item.get("label_mask")  # real tokens only: padding not counted
                tokens += int(item["input_ids"].numel() if mask is None else mask.sum())
            dt = time.perf_counter() - t
            out[f"{name}_items_per_s"] = len(idx) / dt
            out[f"{name}_tokens_per_s"] = tokens / dt
    print(json.dumps(out))


if __name__ == "__main__":
    main()
