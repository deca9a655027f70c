"""``tokshuf olmo-convert``: an OLMo token file (and its Dolma metadata) from a ``.bin/.idx``
dataset."""

from __future__ import annotations

import argparse
from typing import Any

from tokshuf.cli import _args

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "olmo-convert",
        help="convert a .bin/.idx dataset into an OLMo token file",
        description="Copy every document of a Megatron .bin/.idx dataset into an OLMo token file "
        "(a headerless .npy array) and its Dolma <stem>.csv.gz document metadata.",
    )
    p.add_argument("--input", required=True, metavar="PREFIX", help="the .bin/.idx prefix")
    p.add_argument("--output", required=True, metavar="PATH.npy")
    p.add_argument(
        "--dtype", type=_args.dtype(), default=None, help="uint8/16/32/64 (default: as wide as the .bin's)"
    )
    p.add_argument(
        "--append-eos",
        type=_args.integer(0, 2**64 - 1),
        default=None,
        metavar="ID",
        help="end every document with ID",
    )
    p.add_argument("--no-metadata", dest="metadata", action="store_false", help="do not write <stem>.csv.gz")
    _args.add_summary_flag(p, "<stem>_summary.json")
    _args.add_output_flags(p)
    p.set_defaults(handler=run)
    return p


def run(args: argparse.Namespace) -> int:
    from tokshuf.olmo_tokens import from_indexed

    spans = from_indexed(
        args.input,
        args.output,
        args.dtype,
        args.append_eos,
        metadata=args.metadata,
        summary=_args.summary_option(args),
    )
    tokens = int(spans[-1, 1]) if len(spans) else 0
    summary = {"output": args.output, "documents": len(spans), "tokens": tokens}
    _args.emit(args, summary, [f"{args.output}: {len(spans):,} documents, {tokens:,} tokens"])
    return 0
