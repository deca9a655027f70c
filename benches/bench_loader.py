"""The streaming loader: tokens/s per worker against fms-fsdp's pipeline, and state save/load.

    python benches/bench_loader.py [--tokens 2e9] [--quick] [--fms-fsdp PATH] [--workdir DIR]

* Per-worker throughput on a synthetic ``.bin/.idx`` corpus (uint16, log-normal documents of
  ~1.5k tokens, two sub-datasets mixed 3:1), batches of 8 x 4096 as numpy int64 with
  ``doc_lens``: one worker owning the whole corpus, with and without a 1000-line shuffle buffer,
  and worker 0 of Bamba's layout (960 logical shards over 192 workers).
* fms-fsdp's pure-Python pipeline (StreamingDoc → ScalableShard → Sampling → Buffer →
  PreloadBuffer), run from a fetched copy of foundation-model-stack/fms-fsdp (never part of
  this repository; ``--fms-fsdp`` is a checkout or a bare git directory), on the same documents
  written as Arrow files (its format), same layout and window.
* State save + load (``save_state``/``load_state`` through a checkpoint directory) time and size
  for 1k, 10k and 100k logical shards, and with a full 1000-line buffer.

Targets (issue 6): >= 100 M tokens/s per worker; save + load < 100 ms at 10k logical shards;
state size O(logical shards + buffered tokens x 4 B). Prints one JSON object per measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from corpus_gen import write_indexed

from tokshuf.stream import SubDataset, TokenStream, load_state, save_state

SEQ, BATCH = 4096, 8


def emit(**kw: Any) -> None:
    print(json.dumps(kw), flush=True)


def best_rate(step: Any, tokens_per_step: int, seconds: float, repeat: int = 5) -> float:
    """Best of ``repeat`` timed runs of about ``seconds`` each, in tokens/s (robust to a loaded machine)."""
    n = 1
    t = time.perf_counter()
    step()
    one = max(time.perf_counter() - t, 1e-6)
    n = max(1, int(seconds / one))
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(n):
            step()
        best = min(best, time.perf_counter() - t)
    return n * tokens_per_step / best


def corpus(work: Path, tokens: int) -> list[Path]:
    out = []
    for name, share in (("web", 0.75), ("code", 0.25)):
        d = work / f"idx-{tokens}" / name
        if not (d / "part.idx").exists():
            d.mkdir(parents=True, exist_ok=True)
            write_indexed(d / "part", int(tokens * share), seed=len(name))
        out.append(d)
    return out


def stream(dirs: list[Path], **kw: Any) -> TokenStream:
    subs = [
        SubDataset.from_path(d.name, d, file_type="bin", weight=w) for d, w in zip(dirs, (3, 1), strict=True)
    ]
    kw.setdefault("logical_shards", 960)
    return TokenStream(subs, sequence_length=SEQ, batch_size=BATCH, chunk_size=1024, eos_token_id=0, **kw)


def bench_tokshuf(dirs: list[Path], seconds: float) -> dict[str, float]:
    rates = {}
    for name, workers, window in (
        ("1 worker, no buffer", 1, 0),
        ("1 worker, buffer 1000", 1, 1000),
        ("worker 0 of 192", 192, 0),
    ):
        w = stream(dirs, shuffle_window=window).worker(0, workers)
        w.skip(max(1, window // BATCH + 8))  # past the buffer's fill
        rate = best_rate(w.next_batch, BATCH * SEQ, seconds)
        rates[name] = rate
        emit(bench="loader_throughput", impl="tokshuf", layout=name, tokens_per_s=round(rate))
    return rates


def arrow_copy(dirs: list[Path], work: Path, tokens: int) -> Path:
    """The first ``tokens`` tokens of each sub-dataset as fms-fsdp's Arrow files."""
    import pyarrow as pa

    import tokshuf

    root = work / f"arrow-{tokens}"
    for d in dirs:
        out = root / d.name
        if (out / "part.arrow").exists():
            continue
        out.mkdir(parents=True, exist_ok=True)
        ds = tokshuf.IndexedDataset(d / "part")
        schema = pa.schema([pa.field("tokens", pa.uint32())])
        budget = tokens * (3 if d.name == "web" else 1) // 4
        with pa.ipc.new_file(str(out / "part.arrow"), schema) as wr:
            for i in range(len(ds)):
                doc = ds[i].astype(np.uint32)
                wr.write(pa.record_batch([pa.array(doc)], schema=schema))
                budget -= len(doc)
                if budget <= 0:
                    break
    return root


def fms_source(path: str, work: Path) -> Path | None:
    p = Path(path)
    if (p / "fms_fsdp" / "utils" / "dataset_utils.py").exists():
        return p
    if (p / "HEAD").exists() or (p / ".git").exists():  # a bare mirror: export the package
        dest = work / "fms-fsdp-src"
        if not (dest / "fms_fsdp").exists():
            dest.mkdir(parents=True, exist_ok=True)
            tar = subprocess.run(
                ["git", f"--git-dir={p}", "archive", "HEAD", "fms_fsdp"], capture_output=True, check=True
            )
            subprocess.run(["tar", "-x", "-C", str(dest)], input=tar.stdout, check=True)
        return dest
    return None


def bench_fms(src: Path, arrow: Path, seconds: float) -> dict[str, float]:
    sys.modules.setdefault(
        "transformers", types.SimpleNamespace(AutoTokenizer=None)
    )  # only its parquet path needs it
    sys.path.insert(0, str(src))
    import logging

    logging.disable(logging.WARNING)
    from fms_fsdp.utils import dataset_utils as fu

    rates = {}
    for name, workers, window in (("worker 0 of 192", 192, 0), ("worker 0 of 192, buffer 1000", 192, 1000)):
        sub = [d.name for d in sorted(arrow.iterdir())]
        data = fu.StreamingDocDataset(
            str(arrow / sub[0]), 0, workers, fu.ArrowHandler(), 0, strip_tokens={0}, min_length=3, seed=2023
        )
        data = fu.ScalableShardDataset(data, 0, n_logical_shards=960)
        data = fu.SamplingDataset(str(arrow), data, 0, datasets=["web", "code"], weights=[3, 1])
        data = fu.BufferDataset(data, SEQ + 1, pack_hard=True)
        if window:
            data = fu.PreloadBufferDataset(data, window)
        it = iter(data)
        for _ in range(window + 8):
            next(it)
        rate = best_rate(it.__next__, SEQ + 1, seconds, repeat=3)
        rates[name] = rate
        emit(bench="loader_throughput", impl="fms-fsdp", layout=name, tokens_per_s=round(rate))
    return rates


def bench_state(dirs: list[Path], work: Path, shards: list[int]) -> None:
    for n, window in [(s, 0) for s in shards] + [(10_000, 1000)]:
        w = stream(dirs, logical_shards=n, shuffle_window=window).worker(0, 1)
        w.skip(window // BATCH + 4)
        state = w.state_dict()
        d = work / "ckpt"
        best = float("inf")
        for _ in range(5):
            shutil.rmtree(d, ignore_errors=True)
            t = time.perf_counter()
            save_state(d, state)
            back = load_state(d)
            best = min(best, time.perf_counter() - t)
        assert np.array_equal(back["rows"], state["rows"])
        size = sum(p.stat().st_size for p in d.iterdir())
        buffered = int(state["buffer"][:, 7].sum()) if len(state["buffer"]) else 0
        emit(
            bench="loader_state",
            logical_shards=n,
            sub_datasets=2,
            buffered_tokens=buffered,
            save_load_ms=round(best * 1e3, 2),
            bytes=size,
            bytes_per_row=round(size / (2 * n), 1),
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=float, default=2e9, help="corpus size in tokens (uint16: 2 bytes each)")
    ap.add_argument("--fms-tokens", type=float, default=50e6, help="tokens copied to Arrow for fms-fsdp")
    ap.add_argument("--seconds", type=float, default=2.0, help="length of one timed run")
    ap.add_argument(
        "--fms-fsdp",
        default=os.environ.get("FMS_FSDP", ""),
        help="a checkout (or bare git dir) of foundation-model-stack/fms-fsdp; default $FMS_FSDP",
    )
    ap.add_argument("--workdir", default=None, help="where corpora are generated (reused between runs)")
    ap.add_argument("--state-shards", default="1000,10000,100000")
    ap.add_argument(
        "--quick", action="store_true", help="small scale: 100 M tokens, 5 M for fms-fsdp, short runs"
    )
    args = ap.parse_args()
    if args.quick:
        args.tokens, args.fms_tokens, args.seconds = 1e8, 5e6, 0.5
    work = Path(args.workdir) if args.workdir else Path(tempfile.gettempdir()) / "tokshuf-bench-loader"
    work.mkdir(parents=True, exist_ok=True)
    emit(
        bench="loader_setup",
        tokens=int(args.tokens),
        workdir=str(work),
        note="timings on a shared, loaded machine are rough",
    )
    dirs = corpus(work, int(args.tokens))
    ours = bench_tokshuf(dirs, args.seconds)
    src = fms_source(args.fms_fsdp, work) if args.fms_fsdp else None
    if src is None:
        emit(bench="loader_throughput", impl="fms-fsdp", skipped=f"no fms-fsdp at {args.fms_fsdp}")
    else:
        theirs = bench_fms(src, arrow_copy(dirs, work, int(args.fms_tokens)), args.seconds)
        for layout in ("worker 0 of 192",):
            emit(
                bench="loader_ratio", layout=layout, tokshuf_over_fms=round(ours[layout] / theirs[layout], 1)
            )
        emit(
            bench="loader_ratio",
            layout="buffer 1000 (tokshuf: 1 worker, fms: worker 0 of 192)",
            tokshuf_over_fms=round(ours["1 worker, buffer 1000"] / theirs["worker 0 of 192, buffer 1000"], 1),
        )
    bench_state(dirs, work, [int(s) for s in args.state_shards.split(",")])


if __name__ == "__main__":
    main()
