"""Writing the .idx of 10 M sequences: tokshuf vs Megatron's `_IndexWriter`, same arrays, one run.

    python benches/bench_idx_write.py [--sequences 10000000] [--repeat 3] [--dir /dev/shm]

Megatron's writer is timed only if `megatron-core` is importable (`pip install megatron-core`).
It receives Python lists, as `preprocess_data.py`'s builder holds them; tokshuf gets numpy arrays.
Prints one JSON line; the issue's target is <= 0.5 s for 10 M sequences (Megatron: 5.3 s here).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

import tokshuf


def lognormal_lengths(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.maximum(1, np.round(rng.lognormal(np.log(500) - 0.5, 1.0, n))).astype(np.int32)


def timed(fn, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sequences", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default=None, help="output dir (default: temp; /dev/shm leaves the disk out)")
    args = ap.parse_args()
    lengths = lognormal_lengths(args.sequences)
    docs = np.arange(args.sequences + 1, dtype=np.int64)
    result: dict[str, object] = {"bench": "idx_write", "sequences": args.sequences}
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        ours = timed(
            lambda: tokshuf.indexed.write_index(Path(d) / "ours", np.uint16, lengths, docs), args.repeat
        )
        result["tokshuf_s"] = statistics.median(ours)
        try:
            from megatron.core.datasets.indexed_dataset import _IndexWriter
        except ImportError:
            result["megatron_s"] = None
        else:
            lengths_list, docs_list = lengths.tolist(), docs.tolist()

            def megatron() -> None:
                with _IndexWriter(f"{d}/theirs.idx", np.uint16) as w:
                    w.write(lengths_list, None, docs_list)

            theirs = timed(megatron, args.repeat)
            result["megatron_s"] = statistics.median(theirs)
            result["speedup"] = result["megatron_s"] / result["tokshuf_s"]
            same = Path(f"{d}/theirs.idx").read_bytes() == Path(f"{d}/ours.idx").read_bytes()
            result["identical_bytes"] = same
    print(json.dumps(result))


if __name__ == "__main__":
    main()
