"""``tokshuf tokenizer check``: the encoder a tokenizer runs on, and a differential check."""

from __future__ import annotations

import argparse
import json
from typing import Any

from tokshuf.cli import _args


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "tokenizer",
        help="inspect a tokenizer: which encoder runs it, and whether its ids match its library's",
        description="Tools for tokenizer specs (see `tokshuf preprocess --help` for the forms).",
    )
    commands = p.add_subparsers(title="commands", metavar="COMMAND", required=True)
    c = commands.add_parser(
        "check",
        help="report the encoder and compare ids with the reference library on a sample",
        description="Load SPEC, report which encoder runs it (tokshuf's fast BPE, or the library it "
        "falls back to and why), and compare its ids with the library that defines it (tokenizers, "
        "sentencepiece or tiktoken, if installed) on edge cases, generated text and --input documents. "
        "Exits 1 if any document differs.",
    )
    c.add_argument("spec", help="tokenizer spec or path")
    c.add_argument(
        "--input", action="extend", nargs="+", default=[], metavar="JSONL", help="documents to compare on"
    )
    c.add_argument(
        "--limit",
        type=_args.integer(0),
        default=2000,
        help="generated texts, and documents per input (2000)",
    )
    c.add_argument("--json", action="store_true", help="print the result as JSON")
    c.set_defaults(handler=check)
    return p


def check(args: argparse.Namespace) -> int:
    from tokshuf.tokenizer_check import check_tokenizer, render, sample_texts

    result = check_tokenizer(args.spec, sample_texts(args.input, args.limit))
    print(json.dumps(result, indent=1) if args.json else render(result))
    return 1 if result["mismatching_documents"] else 0
