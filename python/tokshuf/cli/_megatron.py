"""Megatron-LM's ``tools/preprocess_data.py`` flags for ``tokshuf preprocess``, so that its
command lines paste in unchanged: the tokenizer they name, and what the other flags change."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tokshuf.cli._args import ID_MAX, integer, note

__all__ = ["add_megatron_tokenizer_flags", "megatron_options", "megatron_tokenizer", "tekken_from_megatron"]

#: Megatron's --tokenizer-type values tokshuf reproduces, and what each needs.
_SUPPORTED = {
    "HuggingFaceTokenizer": "--tokenizer-model DIR (a directory holding tokenizer.json)",
    "GPT2BPETokenizer": "--vocab-file vocab.json --merge-file merges.txt",
    "TikTokenizer": "--tokenizer-model VOCAB.json --tiktoken-pattern v2",
}
#: Megatron's TikTokenizer: the special tokens before the ranks, padded to their number.
_TIKTOKEN_SPECIALS = ["<unk>", "<s>", "</s>", "<mask>", "<pad>", "<cls>", "<sep>"]
#: Megatron's default --vocab-size of a TikTokenizer (ranks plus special tokens).
_TIKTOKEN_VOCAB = 2**17
#: Megatron's PATTERN_TIKTOKEN_V2 is Mistral's Tekken split pattern (tokshuf's ``tekken``).
_TEKKEN_PATTERN = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
    r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def add_megatron_tokenizer_flags(p: argparse.ArgumentParser) -> None:
    """Megatron's ``tools/preprocess_data.py`` flags, so its command lines paste in unchanged."""
    g = p.add_argument_group(
        "Megatron-LM's tokenizer flags (instead of --tokenizer)",
        "tools/preprocess_data.py command lines work unchanged: "
        + "; ".join(f"{k}: {v}" for k, v in _SUPPORTED.items()),
    )
    g.add_argument("--tokenizer-type", metavar="TYPE", help=", ".join(_SUPPORTED))
    g.add_argument(
        "--tokenizer-model", metavar="PATH", help="HuggingFaceTokenizer's directory, TikTokenizer's JSON"
    )
    g.add_argument("--vocab-file", metavar="PATH", help="GPT2BPETokenizer's vocab.json")
    g.add_argument("--merge-file", metavar="PATH", help="GPT2BPETokenizer's merges.txt")
    g.add_argument(
        "--tiktoken-pattern", metavar="v1|v2", help="TikTokenizer's split pattern (v2 is supported)"
    )
    g.add_argument(
        "--tiktoken-num-special-tokens",
        type=integer(0, ID_MAX),
        default=1000,
        metavar="N",
        help="TikTokenizer's special tokens before the ranks (default: 1000)",
    )
    g.add_argument(
        "--vocab-size",
        type=integer(1, ID_MAX),
        metavar="N",
        help=f"TikTokenizer's vocabulary size, special tokens included (default: {_TIKTOKEN_VOCAB})",
    )
    g.add_argument(
        "--legacy-tokenizer", action="store_true", help="accepted; the ids are the same either way"
    )
    g.add_argument(
        "--dataset-impl",
        choices=["mmap"],
        help="accepted: mmap is the format written (older Megatron's flag)",
    )
    g.add_argument("--split-sentences", action="store_true", help="not supported (needs NLTK's punkt)")
    g.add_argument(
        "--keep-newlines", action="store_true", help="accepted (only matters with --split-sentences)"
    )
    g.add_argument("--lang", help="accepted (only matters with --split-sentences)")
    g.add_argument("--log-interval", type=integer(1), metavar="N", help="accepted (see --progress)")
    g.add_argument(
        "--keep-sequential-samples",
        action="store_true",
        help="Megatron's --partitions P cut into contiguous blocks instead of round-robin: the input "
        "order, which is what is written (--partitions is then ignored)",
    )
    g.add_argument(
        "--vocab-extra-ids",
        type=integer(0),
        default=0,
        metavar="N",
        help="accepted; Megatron adds <extra_id_*> tokens only in its BERT and T5 tokenizers, so the ids "
        "of the tokenizers above do not change",
    )
    g.add_argument(
        "--find-optimal-num-workers",
        action="store_true",
        help="accepted; Megatron's benchmark of worker counts (the output is the same for any --workers, "
        "and it is written as usual)",
    )
    g.add_argument(
        "--workers-to-check", type=integer(1), nargs="+", metavar="N", help="accepted (the benchmark's)"
    )
    g.add_argument("--performance-dir", metavar="DIR", help="accepted (the benchmark's; nothing is written)")
    g.add_argument("--max-documents", type=integer(1), metavar="N", help="accepted (the benchmark's)")


def megatron_options(args: argparse.Namespace) -> dict[str, Any]:
    """What Megatron's preprocess flags beside the tokenizer's change: the ``partitions`` to use
    (``--keep-sequential-samples`` keeps the input order, Megatron's blocks merged in order), with a
    note on stderr for each flag that changes nothing here."""
    partitions: int = args.partitions
    if args.keep_sequential_samples and partitions > 1:
        note(
            args,
            f"--keep-sequential-samples: documents keep their input order (Megatron's {partitions} "
            "partitions of contiguous lines, merged in order), so --partitions changes nothing",
        )
        partitions = 1
    if args.vocab_extra_ids:
        note(
            args,
            f"--vocab-extra-ids {args.vocab_extra_ids} is ignored: Megatron adds <extra_id_*> tokens only in "
            "its BERT and T5 tokenizers (BertWordPiece*, SentencePieceTokenizer), and the ids of the others "
            "do not change",
        )
    benchmark = [
        flag
        for flag, value in (
            ("--find-optimal-num-workers", args.find_optimal_num_workers),
            ("--workers-to-check", args.workers_to_check),
            ("--performance-dir", args.performance_dir),
            ("--max-documents", args.max_documents),
        )
        if value
    ]
    if benchmark:
        note(
            args,
            f"{', '.join(benchmark)} ignored: they drive Megatron's benchmark of worker counts, and "
            "tokshuf's output is the same for any --workers; the dataset is written as usual",
        )
    return {"partitions": partitions}


def megatron_tokenizer(args: argparse.Namespace, error: Callable[[str], Any]) -> Any:
    """The tokenizer that ``--tokenizer`` or Megatron's flags name; ``error`` (the subcommand's
    ``parser.error``) reports a wrong combination with exit status 2."""
    if args.split_sentences:
        error(
            "--split-sentences is not supported: tokshuf writes one sequence per document, or per "
            "element of a list value (split the text into a list of sentences beforehand)"
        )
    kind = args.tokenizer_type
    if kind is None:
        if args.tokenizer is None:
            error(
                "a tokenizer is required: --tokenizer SPEC (e.g. tiktoken:cl100k_base, a tokenizer.json "
                "or its directory; 'byte' is Megatron's test tokenizer), or Megatron's --tokenizer-type"
            )
        return args.tokenizer
    if args.tokenizer is not None:
        error("give --tokenizer or --tokenizer-type, not both")
    if kind not in _SUPPORTED:
        error(
            f"--tokenizer-type {kind} is not supported; supported: "
            + "; ".join(f"{k} ({v})" for k, v in _SUPPORTED.items())
            + ". Other tokenizers: give the model file to --tokenizer (a tokenizer.json, a SentencePiece "
            ".model, a .tiktoken rank file)"
        )
    from tokshuf.tokenizer import Tokenizer

    if kind == "HuggingFaceTokenizer":
        if not args.tokenizer_model:
            error("--tokenizer-type HuggingFaceTokenizer needs --tokenizer-model DIR")
        return args.tokenizer_model
    if kind == "GPT2BPETokenizer":
        if not (args.vocab_file and args.merge_file):
            error("--tokenizer-type GPT2BPETokenizer needs --vocab-file and --merge-file")
        return Tokenizer.from_gpt2_bpe(args.vocab_file, args.merge_file)
    if not args.tokenizer_model:
        error("--tokenizer-type TikTokenizer needs --tokenizer-model VOCAB.json")
    if args.tiktoken_pattern != "v2":
        error(
            f"--tiktoken-pattern {args.tiktoken_pattern}: only v2 is supported (Megatron's v2 is Mistral's "
            "Tekken pattern, which tokshuf's fast encoder runs); v1 needs a tokenizer.json"
        )
    return str(tekken_from_megatron(args.tokenizer_model, args.tiktoken_num_special_tokens, args.vocab_size))


def tekken_from_megatron(vocab_file: str, num_special_tokens: int, vocab_size: int | None) -> Path:
    """Megatron's TikTokenizer vocabulary (a JSON list of ``{rank, token_bytes, token_str}``) as
    the ``tekken.json`` that holds the same ids: Megatron puts ``num_special_tokens`` special
    tokens (``<unk> <s> </s> ...``, then ``<SPECIAL_n>``) before the ranks, as Tekken does.

    Written once, under a name given by its content, into the cache directory
    (``$TOKSHUF_CACHE_DIR``, else ``$XDG_CACHE_HOME/tokshuf``, else ``~/.cache/tokshuf``)."""
    from tokshuf._cache import cache_root
    from tokshuf.errors import ConfigError

    try:
        raw = Path(vocab_file).read_bytes()
        vocab = json.loads(raw)
    except OSError as e:
        raise ConfigError(f"TikTokenizer vocabulary {vocab_file!r}: {e.strerror or e}") from e
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"TikTokenizer vocabulary {vocab_file!r} is not JSON: {e}") from e
    if not isinstance(vocab, list) or not all(isinstance(x, dict) and "token_bytes" in x for x in vocab):
        raise ConfigError(
            f"TikTokenizer vocabulary {vocab_file!r} must be Megatron's JSON list of "
            "{rank, token_bytes, token_str} (a tekken.json or .tiktoken file goes to --tokenizer)"
        )
    names = _TIKTOKEN_SPECIALS[:num_special_tokens]
    names += [f"<SPECIAL_{i}>" for i in range(len(names), num_special_tokens)]
    tekken = {
        "config": {
            "pattern": _TEKKEN_PATTERN,
            # Megatron keeps the first (vocab size - special tokens) ranks, or all if fewer.
            "default_vocab_size": min(vocab_size or _TIKTOKEN_VOCAB, len(vocab) + num_special_tokens),
            "default_num_special_tokens": num_special_tokens,
        },
        "vocab": [{"rank": x.get("rank", i), "token_bytes": x["token_bytes"]} for i, x in enumerate(vocab)],
        "special_tokens": [{"rank": i, "token_str": s} for i, s in enumerate(names)],
    }
    text = json.dumps(tekken)
    key = hashlib.sha256(text.encode()).hexdigest()[:16]
    out = cache_root() / "megatron-tiktoken" / key / "tekken.json"
    if not out.is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f"tekken.json.tmp-{os.getpid()}")
        tmp.write_text(text)
        os.replace(tmp, out)
    return out
