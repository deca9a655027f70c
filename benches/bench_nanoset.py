"""Nanoset vs megatron-core's GPTDataset, in the same run on the same data (megatron-spec.md §10).

1. Index build: a synthetic dataset of ``--docs`` sequences (default 10 M, lengths
   ``round(lognormal(ln 500 - 0.5, 1))`` clipped to >= 1: about 5 B tokens), sequence length 2048.
   Only the ``.idx`` is real; the ``.bin`` is sparse (index building never reads it). Timed: a cold
   cache (build + save), one epoch and 1.5 epochs (separate final epoch), and a cache hit. The
   arrays of both are compared, element for element.
2. Reads: ``--read-docs`` sequences of real random tokens; ``get_batch`` samples/s beside
   ``GPTDataset.__getitem__`` over samples 0..19,999 (random file positions via the shuffle index).

Targets: build time <= 0.5x Megatron's; ``get_batch`` >= 20x Megatron's samples/s. Needs
``pip install megatron-core==0.16.1`` (not a tokshuf dependency); without it, only tokshuf runs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from tokshuf import IndexedDataset, NanosetConfig
from tokshuf.nanoset import Nanoset

SEQ = 2048
HEADER = b"MMIDIDX\x00\x00" + np.uint64(1).tobytes()


def lengths_of(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.maximum(1, np.round(rng.lognormal(np.log(500) - 0.5, 1.0, n))).astype(np.int32)


def write_idx(prefix: Path, lengths: np.ndarray, dtype_code: int = 8, itemsize: int = 2) -> None:
    """A Megatron MMIDIDX index with one sequence per document."""
    n = len(lengths)
    pointers = np.zeros(n, np.int64)
    np.cumsum(lengths[:-1].astype(np.int64) * itemsize, out=pointers[1:])
    with open(f"{prefix}.idx", "wb") as f:
        f.write(HEADER + np.uint8(dtype_code).tobytes() + np.uint64(n).tobytes() + np.uint64(n + 1).tobytes())
        f.write(lengths.tobytes())
        f.write(pointers.tobytes())
        f.write(np.arange(n + 1, dtype=np.int64).tobytes())


def make_build_data(root: Path, n: int) -> Path:
    prefix = root / f"syn_{n}"
    if not Path(f"{prefix}.idx").exists():
        lengths = lengths_of(n)
        write_idx(prefix, lengths)
        with open(f"{prefix}.bin", "wb") as f:  # sparse: the index build never reads tokens
            f.truncate(int(lengths.sum(dtype=np.int64)) * 2)
    return prefix


def make_read_data(root: Path, n: int) -> Path:
    prefix = root / f"real_{n}"
    if not Path(f"{prefix}.idx").exists():
        lengths = lengths_of(n, seed=1)
        rng = np.random.default_rng(2)
        with open(f"{prefix}.bin", "wb") as f:
            for chunk in np.array_split(np.arange(n), max(1, n // 20000)):
                total = int(lengths[chunk].sum(dtype=np.int64))
                f.write(rng.integers(1, 50000, total, dtype=np.uint16).tobytes())
        write_idx(prefix, lengths)
    with open(f"{prefix}.bin", "rb") as f:  # into the page cache, as in the spec's measurement
        while f.read(1 << 24):
            pass
    return prefix


def timed(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


class ByteTokenizer:
    """The minimal tokenizer megatron-core's GPTDatasetConfig needs."""

    eod = 0
    vocab_size = 257
    unique_identifiers = {"class": "ByteTokenizer"}  # noqa: RUF012


def megatron() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            from megatron.core.datasets import gpt_dataset, indexed_dataset, utils
        except ImportError:
            return None
    return gpt_dataset, indexed_dataset, utils


def megatron_config(mods: Any, cache: str | None, prefix: Path) -> Any:
    gpt_dataset = mods[0]
    return gpt_dataset.GPTDatasetConfig(
        random_seed=1234,
        sequence_length=SEQ,
        blend=([str(prefix)], None),
        split="1,0,0",
        path_to_cache=cache,
        tokenizer=ByteTokenizer(),
        reset_position_ids=False,
        reset_attention_mask=False,
        eod_mask_loss=False,
    )


def build_ours(prefix: Path, n: int, num_samples: int | None, cache: str) -> Nanoset:
    cfg = NanosetConfig(str(prefix), sequence_length=SEQ, split="1,0,0", seed=1234, cache_dir=cache)
    return Nanoset(str(prefix), (0, n), num_samples, "train", cfg)


def build_megatron(mods: Any, prefix: Path, n: int, num_samples: int | None, cache: str) -> Any:
    gpt_dataset, indexed_dataset, utils = mods
    low = indexed_dataset.IndexedDataset(str(prefix))
    cfg = megatron_config(mods, cache, prefix)
    with contextlib.redirect_stdout(sys.stderr):
        indices = np.arange(n, dtype=np.int32)
        return gpt_dataset.GPTDataset(low, str(prefix), indices, num_samples, utils.Split.train, cfg)


def bench_build(prefix: Path, n: int, repeats: int, mods: Any, rows: list[dict[str, Any]]) -> None:
    per_epoch = (int(lengths_of(n).sum(dtype=np.int64)) - 1) // SEQ
    for label, num_samples in (("1 epoch", None), ("1.5 epochs", int(1.5 * per_epoch))):
        scratch = Path(tempfile.mkdtemp(prefix="build-"))
        fresh = partial(tempfile.mkdtemp, dir=scratch)  # a cold cache per run
        t_ours, ds = timed(lambda f=fresh, k=num_samples: build_ours(prefix, n, k, f()), repeats)
        warm = tempfile.mkdtemp(dir=scratch)
        build_ours(prefix, n, num_samples, warm)
        t_hit, _ = timed(partial(build_ours, prefix, n, num_samples, warm), repeats)
        row: dict[str, Any] = {"step": f"build, cache miss, {label}", "tokshuf_s": t_ours}
        hit: dict[str, Any] = {"step": f"cache hit, {label}", "tokshuf_s": t_hit}
        if mods is not None:
            t_theirs, ref = timed(
                lambda f=fresh, k=num_samples: build_megatron(mods, prefix, n, k, f()), repeats
            )
            row["megatron_s"] = t_theirs
            row["identical"] = all(
                getattr(ds, a).dtype == getattr(ref, a).dtype
                and np.array_equal(getattr(ds, a), getattr(ref, a))
                for a in ("document_index", "sample_index", "shuffle_index")
            )
            build_megatron(mods, prefix, n, num_samples, warm)
            hit["megatron_s"], _ = timed(partial(build_megatron, mods, prefix, n, num_samples, warm), repeats)
        rows += [row, hit]
        shutil.rmtree(scratch, ignore_errors=True)


def bench_reads(prefix: Path, repeats: int, batch: int, mods: Any, rows: list[dict[str, Any]]) -> None:
    n_samples = 20000
    cfg = NanosetConfig(str(prefix), sequence_length=SEQ, split="1,0,0", seed=1234, cache_dir=False)
    ds = Nanoset(str(prefix), (0, len(IndexedDataset(str(prefix)))), None, "train", cfg)
    ks = np.arange(min(n_samples, len(ds)))
    chunks = [ks[i : i + batch] for i in range(0, len(ks), batch)]
    out = np.empty((batch, ds.sample_width), np.int64)

    def batches(threads: int | None) -> None:
        for c in chunks:
            ds.get_batch(c, out=out[: len(c)], num_threads=threads)

    t_par, _ = timed(lambda: batches(None), repeats)
    t_one, _ = timed(lambda: batches(1), repeats)
    t_item, _ = timed(lambda: [ds[int(k)] for k in ks], max(1, repeats // 2))
    n_ks = len(ks)
    rows.append({"step": f"get_batch({batch}), all threads", "tokshuf_sps": n_ks / t_par})
    rows.append({"step": f"get_batch({batch}), 1 thread", "tokshuf_sps": n_ks / t_one})
    rows.append({"step": "ds[k] (one sample per call)", "tokshuf_sps": n_ks / t_item})
    if mods is not None:
        import torch

        torch.set_num_threads(1)
        gpt_dataset, indexed_dataset, utils = mods
        low = indexed_dataset.IndexedDataset(str(prefix))
        mcfg = megatron_config(mods, None, prefix)
        mcfg.path_to_cache = tempfile.mkdtemp(prefix="nanoset-bench-")
        with contextlib.redirect_stdout(sys.stderr):
            ref = gpt_dataset.GPTDataset(
                low, str(prefix), np.arange(len(low), dtype=np.int32), None, utils.Split.train, mcfg
            )
        t_ref, _ = timed(lambda: [ref[int(k)] for k in ks], max(1, repeats // 2))
        same = all(
            np.array_equal(ds.get(int(k))[:-1], ref[int(k)]["tokens"].numpy())
            for k in ks[:: max(1, len(ks) // 50)]
        )
        for r in rows[-3:]:
            r["megatron_sps"] = n_ks / t_ref
            r["identical"] = same
        shutil.rmtree(mcfg.path_to_cache, ignore_errors=True)


def report(rows: list[dict[str, Any]]) -> None:
    print(f"{'step':44} {'tokshuf':>12} {'megatron':>12} {'ratio':>8}  same")
    for r in rows:
        if "tokshuf_s" in r:
            m = r.get("megatron_s")
            ratio = f"{r['tokshuf_s'] / m:.2f}x" if m else "-"
            ms = f"{m:.3f} s" if m else "-"
            print(f"{r['step']:44} {r['tokshuf_s']:10.3f} s {ms:>12} {ratio:>8}  {r.get('identical', '')}")
        else:
            m = r.get("megatron_sps")
            ratio = f"{r['tokshuf_sps'] / m:.1f}x" if m else "-"
            ms = f"{m:,.0f}/s" if m else "-"
            print(f"{r['step']:44} {r['tokshuf_sps']:10,.0f}/s {ms:>12} {ratio:>8}  {r.get('identical', '')}")
    print("(build: time ratio, target <= 0.5x; reads: samples/s ratio, target >= 20x)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--docs", type=int, default=10_000_000, help="sequences of the build benchmark")
    p.add_argument("--read-docs", type=int, default=200_000, help="sequences of the read benchmark")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--quick", action="store_true", help="1 M / 50 k sequences, 1 repeat: proves it runs")
    shm = Path("/dev/shm")
    p.add_argument(
        "--scratch",
        type=Path,
        default=(shm if shm.is_dir() else Path("bench-out")) / f"tokshuf-nanoset-bench-{os.getpid()}",
        help="data and caches (default: tmpfs when there is one, so disk load elsewhere does not count); "
        "removed afterwards",
    )
    p.add_argument("--no-megatron", action="store_true")
    args = p.parse_args(argv)
    if args.quick:
        args.docs, args.read_docs = 1_000_000, 50_000
    args.scratch.mkdir(parents=True, exist_ok=True)
    tempfile.tempdir = str(args.scratch)
    mods = None if args.no_megatron else megatron()
    if mods is None and not args.no_megatron:
        print(
            "megatron-core is not installed: tokshuf only (pip install megatron-core==0.16.1)",
            file=sys.stderr,
        )
    rows: list[dict[str, Any]] = []
    sizes = f"{args.docs:,} sequences (build), {args.read_docs:,} (reads)"
    print(f"# nanoset: {sizes}, seq {SEQ}, cpus {os.cpu_count()}")
    try:
        bench_build(make_build_data(args.scratch, args.docs), args.docs, args.repeats, mods, rows)
        bench_reads(make_read_data(args.scratch, args.read_docs), args.repeats, args.batch, mods, rows)
    finally:
        shutil.rmtree(args.scratch, ignore_errors=True)
    report(rows)
    Path("bench-out").mkdir(exist_ok=True)
    Path("bench-out/nanoset.json").write_text(json.dumps(rows, indent=2))
    return 0 if all(r.get("identical") is not False for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
