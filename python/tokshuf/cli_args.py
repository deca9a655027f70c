"""Argument helpers shared by the subcommands: checked integers, the usage of the subcommand a
bad flag belongs to, and Megatron's tokenizer flags for ``tokshuf preprocess``."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast, get_args

from tokshuf._limits import COUNT_MAX, ID_MAX, MAX_SEQUENCE_LENGTH, MAX_THREADS, out_of_range
from tokshuf._summaries import OnError, Progress

__all__ = [
    "COUNT_MAX",
    "ID_MAX",
    "MAX_SEQUENCE_LENGTH",
    "MAX_THREADS",
    "SEQUENCE_LENGTH",
    "TOKEN_ID",
    "add_megatron_tokenizer_flags",
    "add_on_error_flag",
    "add_output_flags",
    "add_progress_flag",
    "add_summary_flag",
    "add_threads_flag",
    "dtype",
    "emit",
    "integer",
    "megatron_options",
    "megatron_tokenizer",
    "name_subparsers",
    "note",
    "parse_args",
    "progress_option",
    "setup_logging",
    "summary_option",
    "task",
    "write_summary_file",
]


def integer(minimum: int = 0, maximum: int = COUNT_MAX) -> Callable[[str], int]:
    """An argparse ``type=`` accepting decimal integers in ``[minimum, maximum]``: anything else
    exits with status 2 and a message naming the flag, the value and the range (the bounds of
    :mod:`tokshuf._limits`, which the Python API checks with the same words)."""

    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        problem = out_of_range(value, minimum, maximum)
        if problem:
            raise argparse.ArgumentTypeError(problem)
        return value

    parse.__name__ = "integer"
    return parse


#: ``--eos-token-id`` and the other token ids.
TOKEN_ID = integer(0, ID_MAX)
#: ``--sequence-length`` and the other lengths held whole in memory.
SEQUENCE_LENGTH = integer(1, MAX_SEQUENCE_LENGTH)


def dtype(*extra: str, integers_only: bool = True) -> Callable[[str], str]:
    """An argparse ``type=`` for ``--dtype``: a numpy integer dtype (or any Megatron dtype with
    ``integers_only=False``), or one of the words in ``extra`` (e.g. ``auto``); anything else is a
    usage error (exit status 2) naming the flag."""

    def parse(text: str) -> str:
        if text in extra:
            return text
        if integers_only:
            from tokshuf._limits import integer_dtype
            from tokshuf.errors import ConfigError

            try:
                return str(integer_dtype(text).name)
            except ConfigError:
                pass
        else:
            from tokshuf.indexed import DTYPE_CODES

            names = [d.name for d in DTYPE_CODES.values()]
            if text in names:
                return text
        words = ", ".join(extra) + ", " if extra else ""
        kinds = "an integer dtype: uint8, uint16, uint32, int32, ..." if integers_only else ", ".join(names)
        raise argparse.ArgumentTypeError(f"expected {words}{kinds}; got {text!r}")

    parse.__name__ = "dtype"
    return parse


#: Flags whose value is a task ``I/N``.
TASK_FLAGS = ("--shard", "--task")


def task(text: str) -> str:
    """An argparse ``type=`` for a task flag (``--shard``, ``--task``): ``I/N`` (task ``I``,
    0-based, of ``N``) or ``auto`` (this Slurm array task, numbered from its array's
    ``SLURM_ARRAY_TASK_MIN`` by ``SLURM_ARRAY_TASK_STEP``), returned as ``I/N``; anything else
    exits with status 2 and a message naming the flag."""
    from tokshuf import _core
    from tokshuf.errors import ConfigError

    try:
        index, count = _core.parse_task(text)
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return f"{index}/{count}"


def name_subparsers(parser: argparse.ArgumentParser) -> None:
    """Record in the namespace which (sub)parser handled the command line, for :func:`parse_args`."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                sub.set_defaults(subparser=sub)
                name_subparsers(sub)


def parse_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """``parser.parse_args(argv)``, except that an unknown flag is reported with the usage of the
    subcommand it was given to (argparse reports it with the top-level usage). A task flag's
    value that begins with ``-`` (``--shard -1/3``) is its value, not a flag, and is refused by
    the flag's own check."""
    given = list(sys.argv[1:] if argv is None else argv)
    argv, i = [], 0
    while i < len(given):
        value = given[i + 1] if i + 1 < len(given) else ""
        if given[i] in TASK_FLAGS and value[:1] == "-" and value[1:2].isdigit():
            argv.append(f"{given[i]}={value}")
            i += 2
        else:
            argv.append(given[i])
            i += 1
    args, extra = parser.parse_known_args(argv)
    if extra:
        sub: argparse.ArgumentParser = getattr(args, "subparser", parser)
        sub.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


# -- Megatron's preprocess_data.py tokenizer flags ------------------------------------------------

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


def note(args: argparse.Namespace, message: str) -> None:
    """A line on stderr about how a flag was taken (nothing with ``--quiet``)."""
    if not getattr(args, "quiet", False):
        print(f"tokshuf: note: {message}", file=sys.stderr)


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


def add_output_flags(p: argparse.ArgumentParser) -> None:
    """The flags every long command shares: ``--json`` (the run summary as one JSON object on
    stdout instead of the human lines) and ``--quiet`` (nothing but errors)."""
    p.add_argument("--json", action="store_true", help="print the run summary as JSON on stdout")
    p.add_argument("--quiet", action="store_true", help="print nothing but errors")


def add_summary_flag(p: argparse.ArgumentParser, default: str) -> None:
    """``--summary PATH``: where the run summary file goes (``default`` describes where it goes
    without the flag; ``none`` writes none)."""
    p.add_argument(
        "--summary",
        default=None,
        metavar="PATH",
        help=f"where to write the run summary as JSON (default: {default}; 'none' to skip)",
    )


def summary_option(args: argparse.Namespace) -> bool | str:
    """``--summary`` as the ``summary`` argument of the Python functions: ``True`` (the default
    place beside the outputs), ``False`` (``none``) or the path given."""
    value: str | None = args.summary
    if value is None:
        return True
    return False if value == "none" else value


def add_threads_flag(p: argparse.ArgumentParser, what: str) -> None:
    """``--threads``/``--num-threads N`` (``num_threads``): unset (or 0) is every CPU."""
    p.add_argument(
        "--threads",
        "--num-threads",
        dest="num_threads",
        type=integer(0, MAX_THREADS),
        metavar="N",
        help=f"{what}, at most {MAX_THREADS} (default, or 0: all CPUs; the output is the same for any value)",
    )


def add_on_error_flag(p: argparse.ArgumentParser, default: str) -> None:
    """``--on-error fail|skip`` (``on_error``), the bad-input policy of the commands that read
    text."""
    p.add_argument(
        "--on-error",
        choices=get_args(OnError),
        default=default,
        help="bad lines and files: fail (exit 1 naming the file and line) or skip, count and report "
        "them (default: %(default)s)",
    )


def add_progress_flag(p: argparse.ArgumentParser, per: str) -> None:
    """``--progress``; :func:`progress_option` reads it. Unlike the Python functions' default
    (a bar on a terminal, else nothing), ``auto`` prints JSON lines off a terminal, for job logs."""
    p.add_argument(
        "--progress",
        choices=["auto", *get_args(Progress)],
        default="auto",
        help=f"on stderr{per}: a bar, JSON lines or nothing (auto: a bar on a terminal, else JSON lines)",
    )


def progress_option(args: argparse.Namespace) -> Progress:
    """``--progress`` as the ``progress`` argument of the Python functions (``none`` with
    ``--quiet``)."""
    if args.quiet:
        return "none"
    if args.progress == "auto":
        return "bar" if sys.stderr.isatty() else "json"
    return cast(Progress, args.progress)


def write_summary_file(args: argparse.Namespace, summary: Mapping[str, Any], default: str) -> None:
    """Write a finished run's summary where ``--summary`` says (``default``: beside its outputs),
    for the commands whose Python function writes none itself."""
    from tokshuf._summary_file import summary_target, write_summary

    target = summary_target(summary_option(args), default)
    if target is not None:
        write_summary(summary, target)


def emit(args: argparse.Namespace, summary: Mapping[str, Any], lines: Sequence[str]) -> None:
    """Print a finished run's summary as ``--json``/``--quiet`` say: JSON, or the human
    ``lines`` (skips and warnings went to the ``tokshuf`` logger, on stderr)."""
    from tokshuf._storage import redact

    if args.quiet:
        return
    if args.json:
        print(redact(json.dumps(summary, default=str)))
        return
    for line in lines:
        print(redact(line))


def setup_logging(quiet: bool) -> None:
    """The ``tokshuf`` logger on stderr for the command line: warnings (skips, problems), and
    nothing but errors with ``--quiet``."""
    import logging

    logger = logging.getLogger("tokshuf")
    ours = [h for h in logger.handlers if getattr(h, "_tokshuf_cli", False)]
    if ours:
        # The stderr of this call (main() run again in one process, e.g. under a test's capture;
        # not setStream, which flushes the old stream, perhaps closed by now).
        cast(logging.StreamHandler[Any], ours[0]).stream = sys.stderr
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("tokshuf: %(levelname)s: %(message)s"))
        from tokshuf._log import RedactFilter

        handler.addFilter(RedactFilter())  # the loggers below tokshuf's too
        handler._tokshuf_cli = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
        logger.propagate = False
    logger.setLevel(logging.ERROR if quiet else logging.WARNING)
