"""OLMo-style instance strategies: index build time and batch throughput on a synthetic corpus,
side by side with OLMo-core's own datasets when an interpreter with `ai2-olmo-core` is given.

    python benches/bench_instances.py [--tokens 1000000000] [--files 8] [--sequence-length 4096]
                                      [--olmo-python PATH] [--data-dir DIR]

`make bench` runs it with the defaults (a 4 GB corpus under bench-out/); set OLMO_PYTHON to an
interpreter of a separate venv where `pip install ai2-olmo-core` worked to time OLMo-core too.

The corpus is OLMo token files (uint32, dolma2 ids: EOS 100257) with log-normal document lengths
(median ~600 tokens), written once to --data-dir and reused. For each strategy: the cold build
(document scan + index + cache write, fresh work_dir), the warm open (cache hit), `get_batch`
throughput and `ds[i]` throughput, in real tokens (padding not counted). FSL, padded and packed
batches are random instances; VSL batches are the curriculum's own (OLMo-core's loader order, one
bucket per batch, so unpadded), and VSL items are drawn from those batches' instances (so
lengths come as training reads them). OLMo-core (`--olmo-python`, an interpreter where
`pip install ai2-olmo-core` worked) is timed building the same datasets (`prepare()`) and reading
the same items with `ds[i]` (it has no batched read). Prints one JSON line with ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from tokshuf import olmo_tokens
from tokshuf.instances import FSLDataset, PackedFSLDataset, PaddedFSLDataset, VSLDataset

EOS, PAD, VOCAB = 100257, 100277, 100278


def make_corpus(d: Path, tokens: int, files: int, seed: int = 0) -> list[Path]:
    """Token files of `tokens` tokens in total, reused if already there."""
    d.mkdir(parents=True, exist_ok=True)
    paths = []
    per_file = tokens // files
    for f in range(files):
        p = d / f"part-{f:03d}-{per_file}.npy"
        paths.append(p)
        if p.exists():
            continue
        rng = np.random.default_rng(seed + f)
        lengths = np.maximum(1, rng.lognormal(np.log(600), 1.0, per_file // 300 + 16).astype(np.int64))
        ends = np.cumsum(lengths)
        ends = ends[ends <= per_file]
        with olmo_tokens.TokenFileWriter(p, np.uint32) as w:
            block = 1 << 24
            for start in range(0, per_file, block):
                n = min(block, per_file - start)
                chunk = rng.integers(0, 100000, n, dtype=np.uint32)
                local = ends[(ends > start) & (ends <= start + n)] - start - 1
                chunk[local] = EOS
                w.write(chunk)
    return paths


def real_tokens(instance_or_batch: dict[str, Any]) -> int:
    """Tokens that are not padding: the ``label_mask`` count where there is one (padded, packed,
    a VSL batch of mixed lengths), else every token (FSL and VSL instances are never padded)."""
    mask = instance_or_batch.get("label_mask")
    return int(instance_or_batch["input_ids"].size if mask is None else np.count_nonzero(mask))


def batch_indices(name: str, ds: Any, args: argparse.Namespace, rng: np.random.Generator) -> list[Any]:
    """The batches to time: VSL's as its curriculum forms them (one bucket per batch, so no
    padding; OLMo-core's loader order, ``seed_mode="olmo"``), random instances for the others."""
    if name != "vsl":
        return [rng.integers(0, len(ds), args.batch_size) for _ in range(args.batches)]
    epoch = ds.epoch(args.batch_size * args.sequence_length, seed=0, seed_mode="olmo")
    return [epoch.batch(step) for step in range(min(args.batches, len(epoch)))]


def bench_one(name: str, make: Any, work: str, args: argparse.Namespace) -> tuple[dict[str, Any], list[int]]:
    """Cold build, cached open, batch and item throughput of one strategy (real tokens only);
    returns the figures and the item indices timed, for OLMo-core to read the same ones."""
    rng = np.random.default_rng(0)
    out: dict[str, Any] = {}
    t = time.perf_counter()
    make(work)
    out[f"{name}_build_s"] = time.perf_counter() - t
    t = time.perf_counter()
    ds = make(work)
    out[f"{name}_open_cached_s"] = time.perf_counter() - t
    out[f"{name}_instances"] = len(ds)
    if name == "packed":
        out["packed_fill"] = float(ds.get_batch(rng.integers(0, len(ds), 256))["label_mask"].mean())
    batches = batch_indices(name, ds, args, rng)
    ds.get_batch(batches[0])
    t = time.perf_counter()
    tokens = padded = 0
    for b in batches:
        got = ds.get_batch(b)
        tokens += real_tokens(got)
        padded += got["input_ids"].size
    out[f"{name}_batch_tokens_per_s"] = tokens / (time.perf_counter() - t)
    out[f"{name}_batch_real_fraction"] = tokens / padded
    # Items drawn from the timed batches' instances: for VSL, lengths as the curriculum reads them.
    idx = rng.choice(np.concatenate(batches), args.items)
    t = time.perf_counter()
    tokens = sum(real_tokens(ds[int(i)]) for i in idx)
    dt = time.perf_counter() - t
    out[f"{name}_items_per_s"] = len(idx) / dt
    out[f"{name}_item_tokens_per_s"] = tokens / dt
    return out, [int(i) for i in idx]


def bench_ours(paths: list[Path], args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, list[int]]]:
    seq = args.sequence_length
    common = {"pad_token_id": PAD, "eos_token_id": EOS, "vocab_size": VOCAB, "document_boundaries": "eos"}
    makers = {
        "fsl": lambda w: FSLDataset(
            *paths, sequence_length=seq, generate_doc_lengths=True, cache_dir=w, **common
        ),
        "padded": lambda w: PaddedFSLDataset(*paths, sequence_length=seq, cache_dir=w, **common),
        "packed": lambda w: PackedFSLDataset(
            *paths, sequence_length=seq, generate_doc_lengths=True, cache_dir=w, **common
        ),
        "vsl": lambda w: VSLDataset(
            *paths, max_sequence_length=seq, min_sequence_length=args.vsl_min, cache_dir=w, **common
        ),
    }
    out: dict[str, Any] = {}
    items: dict[str, list[int]] = {}
    for name in args.strategies:
        with tempfile.TemporaryDirectory(dir=args.work_root) as work:
            figures, items[name] = bench_one(name, makers[name], work, args)
            out.update(figures)
    return out, items


def bench_olmo(paths: list[Path], args: argparse.Namespace, items: dict[str, list[int]]) -> dict[str, Any]:
    python = args.olmo_python
    if not python:  # None, or "" to skip OLMo-core
        return {"olmo_core": None}
    cfg = {
        "paths": [os.fspath(p) for p in paths],
        "pad": PAD,
        "eos": EOS,
        "vocab": VOCAB,
        "dtype": "uint32",
        "sequence_length": args.sequence_length,
        "vsl_min": args.vsl_min,
        "items": args.items,
        "item_indices": items,
        "strategies": args.strategies,
    }
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(cfg, f)
    peer = Path(__file__).with_name("olmo_instances_peer.py")
    r = subprocess.run([python, os.fspath(peer), f.name], capture_output=True, text=True, check=False)
    os.unlink(f.name)
    if r.returncode != 0:
        return {"olmo_core": None, "olmo_error": r.stderr.strip().splitlines()[-1:]}
    return json.loads(r.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=1_000_000_000)
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--sequence-length", type=int, default=4096)
    ap.add_argument("--vsl-min", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--batches", type=int, default=200)
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--strategies", nargs="+", default=["fsl", "padded", "packed", "vsl"])
    ap.add_argument("--data-dir", type=Path, default=Path("bench-out/instances-corpus"))
    ap.add_argument("--work-root", default=None, help="where cold-build work dirs go (default: system temp)")
    ap.add_argument(
        "--olmo-python",
        default=os.environ.get("OLMO_PYTHON"),
        help="an interpreter with ai2-olmo-core installed (default: $OLMO_PYTHON, or this one if it has it)",
    )
    ap.add_argument("--quick", action="store_true", help="a small run that proves the benchmark works")
    args = ap.parse_args()
    if args.quick:
        args.tokens, args.files, args.batches, args.items = 20_000_000, 4, 50, 500
        args.data_dir = args.data_dir.with_name(args.data_dir.name + "-quick")
    if args.olmo_python is None:
        try:
            import olmo_core  # noqa: F401
        except ImportError:
            pass
        else:
            args.olmo_python = sys.executable
    paths = make_corpus(args.data_dir, args.tokens, args.files)
    result: dict[str, Any] = {
        "bench": "instances",
        "tokens": args.tokens,
        "files": args.files,
        "corpus_gb": sum(p.stat().st_size for p in paths) / 1e9,
        "sequence_length": args.sequence_length,
        "batch_size": args.batch_size,
        "threads": os.environ.get("TOKSHUF_NUM_THREADS") or os.cpu_count(),
    }
    ours, items = bench_ours(paths, args)
    result.update({f"tokshuf_{k}": v for k, v in ours.items()})
    peer = bench_olmo(paths, args, items)
    result.update({f"olmo_{k}" if k not in ("olmo_core", "olmo_error") else k: v for k, v in peer.items()})
    for name in args.strategies:
        ours, theirs = result.get(f"tokshuf_{name}_build_s"), result.get(f"olmo_{name}_build_s")
        if ours and theirs:
            result[f"{name}_build_speedup"] = theirs / ours
        ours, theirs = result.get(f"tokshuf_{name}_items_per_s"), result.get(f"olmo_{name}_items_per_s")
        if ours and theirs:
            result[f"{name}_item_speedup"] = ours / theirs
        ours = result.get(f"tokshuf_{name}_batch_tokens_per_s")
        theirs = result.get(f"olmo_{name}_tokens_per_s")
        if ours and theirs:
            result[f"{name}_batch_vs_item_speedup"] = ours / theirs
    print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in result.items()}))


if __name__ == "__main__":
    main()
