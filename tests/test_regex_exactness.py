"""Split regexes with Oniguruma's classes (``\\w``, ``\\d``, ``\\s``, POSIX brackets) and anchors,
on tokshuf's fast encoder and on its fallback (the ``tokenizers`` crate, built with fancy-regex),
against the ``tokenizers`` Python package (Oniguruma), over every code point up to U+323FF.

Each file splits with ``behavior: Removed`` before a byte-level BPE without merges, so the ids of
a text are the bytes of the characters the regex does not match: equal ids mean an equal set.
What tokshuf cannot read as Oniguruma does is refused with a ``ConfigError`` naming the construct.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import tokenizers
from tokenizer_helpers import byte_chars

import tokshuf

LAST = 0x323FF
CHUNK = 8192


def tokenizer_json(regex: str, behavior: str = "Removed") -> dict[str, Any]:
    vocab = {c: b for b, c in byte_chars().items()}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": None,
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": regex}, "behavior": behavior, "invert": False},
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
            ],
        },
        "post_processor": None,
        "decoder": None,
        "model": {"type": "BPE", "vocab": vocab, "merges": [], "dropout": None},
    }


def sweep_texts() -> list[str]:
    """Every code point up to U+323FF but the surrogates, a few thousand per text."""
    cps = [c for c in range(LAST + 1) if not 0xD800 <= c <= 0xDFFF]
    return ["".join(map(chr, cps[i : i + CHUNK])) for i in range(0, len(cps), CHUNK)]


SWEEP = sweep_texts()


def write(tmp_path: Path, regex: str) -> Path:
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(tokenizer_json(regex)))
    return path


def same_ids(tmp_path: Path, regex: str, texts: list[str], encoder: str) -> None:
    path = write(tmp_path, regex)
    ours = tokshuf.Tokenizer(path)
    assert ours.identity["encoder"] == encoder, ours.identity
    ref = tokenizers.Tokenizer.from_file(str(path))
    expected = [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
    got = ours.encode_batch(texts)
    bad = [i for i, (a, b) in enumerate(zip(got, expected, strict=True)) if a != b]
    if bad:
        t, a, b = texts[bad[0]], got[bad[0]], expected[bad[0]]
        # The first differing character, for the message.
        kept_ours = bytes(a).decode("utf-8", "replace") if max(a, default=0) < 256 else a
        kept_ref = bytes(b).decode("utf-8", "replace") if max(b, default=0) < 256 else b
        diff = sorted(set(kept_ours) ^ set(kept_ref)) if isinstance(kept_ours, str) else []
        pytest.fail(
            f"{len(bad)} texts differ, e.g. code points {[hex(ord(c)) for c in diff[:10]]} "
            f"(text from {hex(ord(t[0]))})"
        )


CLASSES = [
    r"\w+",
    r"\W+",
    r"\d+",
    r"\D+",
    r"\s+",
    r"\S+",
    r"[\w\s]+",
    r"[\W\d]+",
    r"[^\W\d]+",
    r"[[:alpha:]]+",
    r"[[:digit:]]+",
    r"[[:alnum:]]+",
    r"[[:space:]]+",
    r"[[:punct:]]+",
    r"[[:upper:]]+",
    r"[[:lower:]]+",
    r"[[:word:]]+",
    r"[[:xdigit:]]+",
    r"[[:blank:]]+",
    r"[[:cntrl:]]+",
    r"[[:graph:]]+",
    r"[[:print:]]+",
    r"[[:ascii:]]+",
    r"[[:^alpha:]_]+",
    # Oniguruma's POSIX-named properties (`\p{Word}` is `\w`) and negations.
    r"\p{Word}+",
    r"\P{Word}+",
    r"[\p{Word}]+",
    r"[\p{^Word}]+",
    r"\p{Alnum}+",
    r"\p{Graph}+",
    r"\p{Print}+",
    r"\p{XDigit}+",
    r"\p{Blank}+",
    r"\p{^L}+",
    r"\p{Alpha}+|\p{Punct}+|\p{Upper}+",
]


@pytest.mark.parametrize("regex", CLASSES)
def test_classes_on_the_fast_path_over_every_code_point(tmp_path: Path, regex: str) -> None:
    same_ids(tmp_path, regex, SWEEP, encoder="fast_bpe")


# A construct the fast encoder refuses (an anchor) beside the class: the file takes the
# `tokenizers` crate, with the regex rewritten for fancy-regex.
FALLBACK = [r"\w+|\s+$", r"\W+|^x", r"\d+|\s+$", r"[[:punct:]]+|^x", r"[[:upper:]\s]+|x$"]


@pytest.mark.parametrize("regex", FALLBACK)
def test_classes_on_the_fallback_over_every_code_point(tmp_path: Path, regex: str) -> None:
    same_ids(tmp_path, regex, SWEEP, encoder="tokenizers")


def line_texts() -> list[str]:
    fixed = [
        "  a  \n  b  ",
        "\n\n  x\n",
        "a \r\n b \n",
        "  \n",
        "x\n",
        "\n",
        " a\n\n ",
        "a\u2028 b",
        "\t\n\t",
    ]
    rng = random.Random(0)
    pool = [" ", "  ", "\n", "\r", "\t", "a", "b", "x", "²", "\u200d", "\u2028", "\u0085"]
    return fixed + ["".join(rng.choice(pool) for _ in range(rng.randrange(12))) for _ in range(300)]


@pytest.mark.parametrize(
    "regex", [r"^\s+", r"\s+$", r"^[ \t]+|[ \t]+$", r"\s+$|\w+", r"^x|x$", r"[$^]+|\s+$"]
)
def test_line_anchors_on_the_fallback(tmp_path: Path, regex: str) -> None:
    # Oniguruma's `^` and `$` are line anchors; fancy-regex's, text anchors.
    same_ids(tmp_path, regex, line_texts(), encoder="tokenizers")


@pytest.mark.parametrize("regex", [r"\w", r"[[:punct:]\s]+", r" +$"])
def test_replace_normalizers_by_a_regex_on_the_fallback(tmp_path: Path, regex: str) -> None:
    data = tokenizer_json(r"\d+")
    data["normalizer"] = {"type": "Replace", "pattern": {"Regex": regex}, "content": ""}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data))
    ours = tokshuf.Tokenizer(path)
    assert ours.identity["encoder"] == "tokenizers", ours.identity
    ref = tokenizers.Tokenizer.from_file(str(path))
    texts = SWEEP + line_texts()
    expected = [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
    assert ours.encode_batch(texts) == expected


def test_leading_flags_scope_the_whole_pattern(tmp_path: Path) -> None:
    same_ids(tmp_path, r"(?i)a|b", ["aAbB x", "BAba"], encoder="fast_bpe")


@pytest.mark.parametrize(
    ("regex", "named"),
    [
        (r"(?i:ss)|\w+", "(?i:ss)"),  # Oniguruma's `(?i:ss)` matches `ß` in "Straße"
        (r"(?i:st)|\s+", "(?i:st)"),
        (r"\bx\w*", "word boundary"),
        (r"(?m).+", "without a scope"),
        (r"(?m:.)+", "m and s"),  # Oniguruma's `m` is "dot matches newline"
        (r"x(?i)a|b", "scope"),
        (r"(?i:[[:upper:]])+", "class"),
        (r"\w+\Z", "\\Z"),
        (r"[[:alpha:]]+|[[:bogus:]]", "bogus"),
        (r"\pL+", "the text pL"),  # Oniguruma: the letters "pL"; regex-syntax: \p{L}
    ],
)
def test_what_neither_path_reads_as_oniguruma_is_refused(tmp_path: Path, regex: str, named: str) -> None:
    with pytest.raises(tokshuf.ConfigError, match=r"Oniguruma") as e:
        tokshuf.Tokenizer(write(tmp_path, regex))
    assert named in str(e.value), e.value
