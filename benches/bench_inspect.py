"""`tokshuf inspect` of a 10-billion-token `.bin/.idx`: answered from the index alone.

    python benches/bench_inspect.py [--documents 20000000] [--repeat 3] [--dir /tmp]

Writes the `.idx` of `--documents` lognormal-length documents (mean 500 tokens: 10 B tokens for
the default) beside a sparse `.bin` of the right size (no disk used, never read), then times
`tokshuf.inspect(prefix)` end to end: open and validate the index, document lengths, quantiles.
Prints one JSON line; the issue's target is < 2 s for 10 B tokens.
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
from tokshuf.indexed import write_index


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--documents", type=int, default=20_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    lengths = np.maximum(1, np.round(rng.lognormal(np.log(500) - 0.5, 1.0, args.documents))).astype(np.int32)
    tokens = int(lengths.sum(dtype=np.int64))
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        prefix = Path(d) / "big_text_document"
        with open(f"{prefix}.bin", "wb") as f:
            f.truncate(tokens * 2)  # uint16: sparse, so the benchmark needs only the index's disk
        write_index(prefix, np.uint16, lengths, np.arange(len(lengths) + 1, dtype=np.int64))
        times = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            report = tokshuf.inspect(prefix)
            times.append(time.perf_counter() - t)
        assert report.tokens == tokens
        assert report.ids is None  # no pass over the .bin
        print(
            json.dumps(
                {
                    "bench": "inspect_indexed",
                    "documents": args.documents,
                    "tokens": tokens,
                    "seconds_median": round(statistics.median(times), 3),
                    "seconds": [round(t, 3) for t in times],
                    "target_seconds": 2.0,
                }
            )
        )


if __name__ == "__main__":
    main()
