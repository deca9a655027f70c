# ruff: noqa: RUF001  (the sample alphabet is confusable characters on purpose)
"""``tokshuf tokenizer check``: which encoder a tokenizer runs on, why, and whether its ids are
those of the library that defines it, on a sample.

The reference is ``tokenizers`` for a ``tokenizer.json``, ``sentencepiece`` for a ``.model``,
``tiktoken`` for OpenAI's encodings and rank files; whichever is importable.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import random
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypedDict

from tokshuf import _core
from tokshuf.tokenizer import Tokenizer, tiktoken_encoding

__all__ = ["CheckResult", "check_tokenizer", "sample_texts"]

Encode = Callable[[list[str]], list[list[int]]]


class Mismatch(TypedDict):
    document: int
    text: str
    position: int
    ours: list[int]
    reference: list[int]


class CheckResult(TypedDict):
    spec: str
    kind: str
    encoder: str
    fast_bpe_unsupported: str | None
    pre_tokenizer: str | None
    vocab_size: int
    eod_id: int | None
    reference: str | None
    reference_missing: str | None
    documents: int
    mismatching_documents: int
    first_mismatch: Mismatch | None


# Text where tokenizers differ: contractions, whitespace runs, digits, scripts, marks that NFC
# composes, emoji, characters many vocabularies lack, and special-token look-alikes.
_ALPHABET = (
    "a", "Z", "é", "e\u0301", " ", "  ", "\t", "\n", "\r\n", "'s", "'LL", "1", "123", "²", "中", "日本",
    "ا", "न", "\u094d", "👩\u200d", "\U0001f1eb", "\x00", "\ue000", "▁", "<s>", "</s>", "<|endoftext|>",
    "[INST]", "Σ", "ſ", "\u2126", "-", "//", ".", "İ", "\u3000", "\u00a0", "ß",
)  # fmt: skip

_EDGE = [
    "",
    " ",
    "  two  spaces  and   three   ",
    "\t\tindented\n        code();\n\n\n",
    "x\n 's\n'LL 'Ve it's IT'S don't",
    "a" * 20_000,
    " " * 5_000 + "x",
    "7" * 5_000 + " 12 123 1234 12345",
    "中文文本，没有空格。日本語のテキスト。한국어 텍스트 العربية हिन्दी ภาษาไทย",
    "e\u0301 A\u030a \u2126 \u1100\u1161\u11a8 caf\u00e9 cafe\u0301",
    "emoji 👩\u200d👩\u200d👧\u200d👦 🇫🇷 ✌🏽",
    "controls \x00\x01\x7f \ufeff \ue000 \U00020000",
]


def sample_texts(
    inputs: Sequence[str | os.PathLike[str]] = (), limit: int = 2000, seed: int = 0
) -> list[str]:
    """Edge cases, ``limit`` generated strings, and up to ``limit`` documents of each input
    (``.jsonl``, ``.jsonl.gz``, ``.jsonl.zst``; key ``text``)."""
    rng = random.Random(seed)
    texts = list(_EDGE)
    texts += ["".join(rng.choice(_ALPHABET) for _ in range(rng.randrange(40))) for _ in range(limit)]
    for path in inputs:
        texts += list(_read_jsonl(os.fspath(path), limit))
    return texts


def _read_jsonl(path: str, limit: int) -> Iterable[str]:
    raw: Any
    if path.endswith(".gz"):
        raw = gzip.open(path, "rb")  # noqa: SIM115
    elif path.endswith((".zst", ".zstd")):
        import zstandard

        raw = zstandard.ZstdDecompressor().stream_reader(open(path, "rb"))  # noqa: SIM115
    else:
        raw = open(path, "rb")  # noqa: SIM115
    with raw, io.TextIOWrapper(raw, encoding="utf-8") as lines:
        for n, line in enumerate(lines):
            if n >= limit:
                return
            value = json.loads(line).get("text")
            if isinstance(value, str):
                yield value


def _reference(identity: dict[str, Any]) -> tuple[Encode | None, str | None, str | None]:
    """The defining library's encoder for this tokenizer: (encode, name, why there is none)."""
    kind, spec = identity.get("kind"), str(identity.get("spec", ""))
    try:
        if kind == "huggingface" and spec.startswith("hf:"):
            import tokenizers

            hf = tokenizers.Tokenizer.from_file(spec[3:])

            def encode_hf(batch: list[str]) -> list[list[int]]:
                return [e.ids for e in hf.encode_batch(batch, add_special_tokens=False)]

            return encode_hf, "tokenizers", None
        if kind == "sentencepiece":
            import sentencepiece

            sp = sentencepiece.SentencePieceProcessor(model_file=spec.split(":", 1)[1])
            return (lambda b: [sp.encode(t) for t in b]), "sentencepiece", None
        if kind == "tiktoken":
            import tiktoken
            import tiktoken.load

            name = str(identity.get("name"))
            if name in _core.TIKTOKEN_ENCODINGS:
                enc = tiktoken_encoding(name)
            elif name == "tekken":
                return None, None, "no reference library reads tekken.json here (mistral-common)"
            else:
                path = spec.removeprefix("tiktoken:").rsplit("@", 1)[0]
                ranks = tiktoken.load.load_tiktoken_bpe(path)
                pattern = _core.split_pattern_regex(str(identity["pattern"]))
                enc = tiktoken.Encoding(name, pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
            return enc.encode_ordinary_batch, "tiktoken", None
    except ImportError as e:
        return None, None, f"the reference library is not installed ({e.name})"
    return None, None, f"no reference library for a {kind} tokenizer"


def check_tokenizer(spec: Any, texts: Sequence[str] | None = None) -> CheckResult:
    """Load ``spec``, say which encoder runs it and why, and compare its ids with the defining
    library's on ``texts`` (default: :func:`sample_texts`)."""
    tok = Tokenizer(spec)
    identity = tok.identity
    pre_tokenizer = identity.get("pattern")
    if identity.get("kind") == "huggingface" and identity.get("encoder") == "fast_bpe":
        pre_tokenizer = _core.BpeEncoder.from_hf_file(str(identity["spec"])[3:]).pattern
    encode, name, missing = _reference(identity)
    texts = list(sample_texts() if texts is None else texts)
    first: Mismatch | None = None
    bad = 0
    if encode is not None:
        ours = tok.encode_batch(texts)
        theirs = encode(texts)
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            if a != b:
                bad += 1
                if first is None:
                    pairs = zip(a, b, strict=False)
                    k = next((j for j, (x, y) in enumerate(pairs) if x != y), min(len(a), len(b)))
                    first = Mismatch(
                        document=i, text=texts[i][:200], position=k, ours=a[k : k + 8], reference=b[k : k + 8]
                    )
    return CheckResult(
        spec=tok.spec,
        kind=str(identity.get("kind")),
        encoder=str(identity.get("encoder", "built-in")),
        fast_bpe_unsupported=identity.get("fast_bpe_unsupported"),
        pre_tokenizer=pre_tokenizer,
        vocab_size=tok.vocab_size,
        eod_id=tok.eos_token_id,
        reference=name,
        reference_missing=missing,
        documents=len(texts) if encode is not None else 0,
        mismatching_documents=bad,
        first_mismatch=first,
    )


def render(r: CheckResult) -> str:
    """The human-readable report."""
    lines = [f"{r['spec']}: {r['kind']}, {r['vocab_size']:,} ids, end of document {r['eod_id']}"]
    if r["encoder"] == "fast_bpe":
        split = f" (pre-tokenizer: {r['pre_tokenizer']})" if r["pre_tokenizer"] else ""
        lines.append(f"encoder: tokshuf's fast BPE{split}")
    else:
        why = f": {r['fast_bpe_unsupported']}" if r["fast_bpe_unsupported"] else ""
        lines.append(f"encoder: {r['encoder']} (not the fast BPE{why})")
    if r["reference"] is None:
        lines.append(f"not compared: {r['reference_missing']}")
    elif r["mismatching_documents"] == 0:
        lines.append(f"ids identical to {r['reference']} on {r['documents']:,} documents")
    else:
        m = r["first_mismatch"]
        assert m is not None
        lines.append(
            f"MISMATCH: {r['mismatching_documents']:,} of {r['documents']:,} documents differ from "
            f"{r['reference']}; first: document {m['document']} at token {m['position']}: ours {m['ours']}, "
            f"{r['reference']} {m['reference']} (text {m['text'][:60]!r})"
        )
    return "\n".join(lines)
