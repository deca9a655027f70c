"""``tokshuf olmo-convert`` and ``tokshuf instances``: OLMo token files from ``.bin/.idx``, and
building an instance index offline (before the training job, like Megatron's
``prepare_cache.py``), printing a JSON summary."""

from __future__ import annotations

import argparse
import time
from typing import Any

from tokshuf import cli_args
from tokshuf._limits import MAX_THREADS

_ID = cli_args.integer(0, cli_args.ID_MAX)
_POSITIVE = cli_args.integer(1)

__all__ = ["add_commands"]


def add_commands(sub: Any) -> None:
    """Register the subcommands on the ``tokshuf`` parser's subparsers."""
    p = sub.add_parser(
        "olmo-convert",
        help="convert a .bin/.idx dataset into an OLMo token file",
        description="Copy every document of a Megatron .bin/.idx dataset into an OLMo token file "
        "(a headerless .npy array) and its Dolma <stem>.csv.gz document metadata.",
    )
    p.add_argument("--input", required=True, metavar="PREFIX", help="the .bin/.idx prefix")
    p.add_argument("--output", required=True, metavar="PATH.npy")
    p.add_argument("--dtype", default=None, help="uint8/16/32/64 (default: as wide as the .bin's)")
    p.add_argument(
        "--append-eos",
        type=cli_args.integer(0, 2**64 - 1),
        default=None,
        metavar="ID",
        help="end every document with ID",
    )
    p.add_argument("--no-metadata", action="store_true", help="do not write <stem>.csv.gz")
    cli_args.add_output_flags(p)
    p.set_defaults(handler=_convert)

    p = sub.add_parser(
        "instances",
        help="build (and cache) an OLMo-style instance index",
        description="Build the index of an instance dataset into its work directory, so that "
        "training jobs find it cached; prints a JSON summary.",
    )
    p.add_argument("paths", nargs="+", help="OLMo token files or .bin/.idx prefixes")
    p.add_argument("--strategy", required=True, choices=["fsl", "padded", "packed", "interleaved", "vsl"])
    p.add_argument("--sequence-length", type=_POSITIVE, required=True, help="(the maximum for vsl)")
    p.add_argument("--eos-token-id", type=_ID, required=True)
    p.add_argument("--pad-token-id", type=_ID, required=True)
    p.add_argument("--bos-token-id", type=_ID, default=None)
    p.add_argument("--dtype", default=None, help="token dtype of .npy files")
    p.add_argument(
        "--vocab-size", type=cli_args.integer(1, 2**64), default=None, help="picks the dtype of .npy files"
    )
    p.add_argument("--boundaries", choices=["auto", "eos", "metadata"], default="auto")
    p.add_argument(
        "--work-dir",
        default=None,
        help="cache root; the index goes to DIR/instances/ "
        "(default: $TOKSHUF_CACHE_DIR, else ~/.cache/tokshuf)",
    )
    p.add_argument("--threads", type=cli_args.integer(1, MAX_THREADS), default=None)
    p.add_argument("--long-doc-strategy", choices=["truncate", "fragment"], default="truncate")
    p.add_argument("--source-group-size", type=_POSITIVE, default=1, help="packed: files packed together")
    p.add_argument("--min-sequence-length", type=_POSITIVE, default=256, help="vsl")
    p.add_argument("--seed", type=cli_args.integer(0, 2**64 - 1), default=0, help="interleaved")
    p.add_argument("--docs-per-instance", type=_POSITIVE, default=2, help="interleaved")
    p.add_argument("--chunks-per-doc", type=_POSITIVE, default=4, help="interleaved")
    cli_args.add_output_flags(p)
    p.set_defaults(handler=_instances)


def _convert(args: argparse.Namespace) -> int:
    from tokshuf.olmo_tokens import from_indexed

    spans = from_indexed(args.input, args.output, args.dtype, args.append_eos, metadata=not args.no_metadata)
    tokens = int(spans[-1, 1]) if len(spans) else 0
    summary = {"output": args.output, "documents": len(spans), "tokens": tokens}
    cli_args.emit(args, summary, [f"{args.output}: {len(spans):,} documents, {tokens:,} tokens"])
    return 0


def _instances(args: argparse.Namespace) -> int:
    from tokshuf import instances as inst

    common: dict[str, Any] = {
        "pad_token_id": args.pad_token_id,
        "eos_token_id": args.eos_token_id,
        "bos_token_id": args.bos_token_id,
        "vocab_size": args.vocab_size,
        "dtype": args.dtype,
        "document_boundaries": args.boundaries,
        "cache_dir": args.work_dir,
        "num_threads": args.threads,
    }
    seq = args.sequence_length
    t = time.perf_counter()
    ds: (
        inst.FSLDataset
        | inst.PaddedFSLDataset
        | inst.PackedFSLDataset
        | inst.InterleavedFSLDataset
        | inst.VSLDataset
    )
    if args.strategy == "fsl":
        ds = inst.FSLDataset(*args.paths, sequence_length=seq, **common)
    elif args.strategy == "padded":
        ds = inst.PaddedFSLDataset(
            *args.paths, sequence_length=seq, long_doc_strategy=args.long_doc_strategy, **common
        )
    elif args.strategy == "packed":
        ds = inst.PackedFSLDataset(
            *args.paths,
            sequence_length=seq,
            long_doc_strategy=args.long_doc_strategy,
            source_group_size=args.source_group_size,
            **common,
        )
    elif args.strategy == "interleaved":
        ds = inst.InterleavedFSLDataset(
            *args.paths,
            sequence_length=seq,
            seed=args.seed,
            docs_per_instance=args.docs_per_instance,
            chunks_per_doc=args.chunks_per_doc,
            **common,
        )
    else:
        ds = inst.VSLDataset(
            *args.paths, max_sequence_length=seq, min_sequence_length=args.min_sequence_length, **common
        )
    summary: dict[str, Any] = {
        "strategy": args.strategy,
        "instances": len(ds),
        "fingerprint": ds.fingerprint,
        "cache": None if ds.cache_path is None else str(ds.cache_path),
        "seconds": round(time.perf_counter() - t, 3),
    }
    if isinstance(ds, inst.PackedFSLDataset) and len(ds):
        used = int((ds.documents[:, 1] - ds.documents[:, 0]).sum())
        summary["padding_fraction"] = round(1 - used / (len(ds) * seq), 6)
    if isinstance(ds, inst.VSLDataset):
        import numpy as np

        summary["instances_per_bucket"] = ds.instances_per_bucket
        summary["tokens"] = int(np.sum(ds.instance_lengths, dtype=np.uint64))
    line = f"{args.strategy}: {summary['instances']:,} instances in {summary['seconds']:.2f} s"
    cache = f" (cache {summary['cache']})" if summary["cache"] else ""
    cli_args.emit(args, summary, [line + cache])
    return 0
