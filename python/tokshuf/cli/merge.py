"""``tokshuf merge``: concatenate ``.bin/.idx`` datasets, or the parts of a preprocess cut into
tasks."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tokshuf.cli import _args

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "merge",
        help="concatenate indexed datasets",
        description="Merge .bin/.idx datasets into one, as Megatron's tools/merge_datasets.py: "
        "a directory contributes its pairs sorted by name; explicit prefixes keep their order.",
    )
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--input", action="extend", nargs="+", metavar="DIR_OR_PREFIX")
    what.add_argument(
        "--parts",
        metavar="PREFIX",
        help="the parts of `tokshuf preprocess --output-prefix PREFIX --shard I/N`: writes "
        "PREFIX_{key}_document.bin/.idx and PREFIX_summary.json, as one run over all inputs",
    )
    p.add_argument("--output-prefix")
    _args.add_summary_flag(p, "{prefix}_summary.json, PREFIX_summary.json with --parts")
    _args.add_output_flags(p)
    p.set_defaults(handler=run)
    return p


def run(args: argparse.Namespace) -> int:
    from tokshuf.indexed import merge
    from tokshuf.parts import merge_parts

    if args.parts is not None:
        if args.output_prefix is not None:
            print("tokshuf: error: --parts writes to its own PREFIX; drop --output-prefix", file=sys.stderr)
            return 2
        parts = merge_parts(args.parts, summary=_args.summary_option(args))
        _args.emit(
            args,
            parts,
            [
                f"{o['prefix']}.{{bin,idx}}: {o['documents']:,} documents, {o['tokens']:,} tokens"
                for o in parts["outputs"]
            ]
            + [
                f"merged {parts['parts']} parts of {parts['files']:,} input files in {parts['seconds']:.2f} s"
            ],
        )
        return 0
    if args.output_prefix is None:
        print("tokshuf: error: merge --input needs --output-prefix", file=sys.stderr)
        return 2
    if not args.output_prefix:
        args.subparser.error("--output-prefix must not be empty")
    summary = merge(args.input, args.output_prefix, summary=_args.summary_option(args))
    line = (
        f"{args.output_prefix}.{{bin,idx}}: {summary['documents']:,} documents, {summary['tokens']:,} tokens"
    )
    _args.emit(args, summary, [line])
    return 0
