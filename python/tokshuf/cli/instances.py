"""``tokshuf instances``: build an instance dataset's index offline (before the training job, like
Megatron's ``prepare_cache.py``), with a summary beside it that ``tokshuf inspect`` reads."""

from __future__ import annotations

import argparse
import os
import time
from typing import Any, get_args

from tokshuf._summaries import InstancesSummary
from tokshuf.cli import _args
from tokshuf.instances._options import (
    DEFAULTS,
    LONG_DOC_STRATEGY,
    MIN_SEQUENCE_LENGTH,
    SOURCE_GROUP_SIZE,
    LongDocStrategy,
)

_ID = _args.TOKEN_ID
_POSITIVE = _args.integer(1)

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "instances",
        help="build (and cache) an OLMo-style instance index",
        description="Build the index of an instance dataset into its work directory, so that "
        "training jobs find it cached, and write a summary beside it that `tokshuf inspect` reads.",
    )
    p.add_argument("paths", nargs="+", help="OLMo token files or .bin/.idx prefixes")
    p.add_argument("--strategy", required=True, choices=["fsl", "padded", "packed", "interleaved", "vsl"])
    p.add_argument(
        "--sequence-length", type=_args.SEQUENCE_LENGTH, required=True, help="(the maximum for vsl)"
    )
    p.add_argument("--eos-token-id", type=_ID, required=True)
    p.add_argument("--pad-token-id", type=_ID, required=True)
    p.add_argument("--bos-token-id", type=_ID, default=DEFAULTS["bos_token_id"])
    p.add_argument("--dtype", type=_args.dtype(), default=DEFAULTS["dtype"], help="token dtype of .npy files")
    p.add_argument(
        "--vocab-size",
        type=_args.integer(1, 2**64),
        default=DEFAULTS["vocab_size"],
        help="picks the dtype of .npy files",
    )
    p.add_argument(
        "--document-boundaries",
        "--boundaries",
        choices=["auto", "eos", "metadata"],
        default=DEFAULTS["document_boundaries"],
        help="where documents end in .npy token files (default: %(default)s)",
    )
    p.add_argument(
        "--cache-dir",
        "--work-dir",
        metavar="DIR",
        default=DEFAULTS["cache_dir"],
        help="cache root; the index goes to DIR/instances/ "
        "(default: $TOKSHUF_CACHE_DIR, else ~/.cache/tokshuf)",
    )
    _args.add_threads_flag(p, "index-building threads")
    p.add_argument(
        "--long-doc-strategy",
        choices=get_args(LongDocStrategy),
        default=LONG_DOC_STRATEGY,
        help="padded, packed (default: %(default)s)",
    )
    p.add_argument(
        "--source-group-size", type=_POSITIVE, default=SOURCE_GROUP_SIZE, help="packed: files packed together"
    )
    p.add_argument(
        "--min-sequence-length", type=_args.SEQUENCE_LENGTH, default=MIN_SEQUENCE_LENGTH, help="vsl"
    )
    p.add_argument("--seed", type=_args.integer(0, 2**64 - 1), default=0, help="interleaved")
    p.add_argument("--docs-per-instance", type=_POSITIVE, default=2, help="interleaved")
    p.add_argument("--chunks-per-doc", type=_POSITIVE, default=4, help="interleaved")
    _args.add_summary_flag(
        p, "CACHE_DIR/instances/instances-STRATEGY-FINGERPRINT_summary.json, which inspect reads"
    )
    _args.add_output_flags(p)
    p.set_defaults(handler=run)
    return p


def _arguments(args: argparse.Namespace) -> dict[str, Any]:
    """The strategy class's keyword arguments that the flags give (threads aside: they do not
    change the instances)."""
    seq = args.sequence_length
    out: dict[str, Any] = {
        "pad_token_id": args.pad_token_id,
        "eos_token_id": args.eos_token_id,
        "bos_token_id": args.bos_token_id,
        "vocab_size": args.vocab_size,
        "dtype": args.dtype,
        "document_boundaries": args.document_boundaries,
        "cache_dir": os.path.abspath(args.cache_dir) if args.cache_dir else None,
    }
    if args.strategy == "vsl":
        return {**out, "max_sequence_length": seq, "min_sequence_length": args.min_sequence_length}
    out["sequence_length"] = seq
    if args.strategy in ("padded", "packed"):
        out["long_doc_strategy"] = args.long_doc_strategy
    if args.strategy == "packed":
        out["source_group_size"] = args.source_group_size
    if args.strategy == "interleaved":
        out["seed"] = args.seed
        out["docs_per_instance"] = args.docs_per_instance
        out["chunks_per_doc"] = args.chunks_per_doc
    return out


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from tokshuf._storage import is_remote
    from tokshuf.instances import PackedFSLDataset, VSLDataset
    from tokshuf.instances._named import open_strategy

    paths = [p if is_remote(p) else os.path.abspath(p) for p in args.paths]
    arguments = _arguments(args)
    t = time.perf_counter()
    ds = open_strategy(args.strategy, paths, {**arguments, "num_threads": args.num_threads or None})
    # Recorded with the cache directory it used, so that reopening it finds the same index.
    arguments["cache_dir"] = os.path.abspath(ds.cache_dir)
    summary: InstancesSummary = {
        "strategy": args.strategy,
        "paths": paths,
        "arguments": arguments,
        "instances": len(ds),
        "fingerprint": ds.fingerprint,
        "cache": None if ds.cache_path is None else str(ds.cache_path),
        "seconds": round(time.perf_counter() - t, 3),
    }
    if isinstance(ds, PackedFSLDataset) and len(ds):
        used = int((ds.documents[:, 1] - ds.documents[:, 0]).sum())
        summary["padding_fraction"] = round(1 - used / (len(ds) * args.sequence_length), 6)
    if isinstance(ds, VSLDataset):
        summary["instances_per_bucket"] = [[length, n] for length, n in ds.instances_per_bucket]
        summary["tokens"] = int(np.sum(ds.instance_lengths, dtype=np.uint64))
    # Beside the index entries (inspect finds an entry's summary there).
    where = ds.cache_dir / "instances"
    where.mkdir(parents=True, exist_ok=True)
    default = where / f"instances-{args.strategy}-{ds.fingerprint}_summary.json"
    _args.write_summary_file(args, summary, str(default))
    line = f"{args.strategy}: {summary['instances']:,} instances in {summary['seconds']:.2f} s"
    cache = f" (cache {summary['cache']})" if summary["cache"] else ""
    _args.emit(args, summary, [line + cache])
    return 0
