# ruff: noqa: RUF001  (the test alphabets are confusable characters on purpose)
"""Pipelines built for the occasion (small vocabularies, one component at a time) on the fast
encoder against ``tokenizers`` on the same file: what it reproduces must give the same ids, and
what it does not must be refused, leaving the file to the ``tokenizers`` crate with the same ids.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

import pytest
import tokenizers
from tokenizer_helpers import byte_chars

import tokshuf
from tokshuf._core import BpeEncoder

BC = byte_chars()


def model(vocab: list[str], merges: list[tuple[str, str]], **extra: Any) -> dict[str, Any]:
    ids: dict[str, int] = {}
    for t in vocab:
        ids.setdefault(t, len(ids))
    return {"type": "BPE", "vocab": ids, "merges": [list(m) for m in merges], "dropout": None, **extra}


GPT2_SPLIT = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}


def byte_level(pre: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """A byte-level file: all bytes, "ab", "Ġa"; GPT-2's split unless ``pre`` is given."""
    vocab = [BC[b] for b in range(256)] + ["ab", "Ġa"]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": None,
        "pre_tokenizer": pre
        or {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None,
        "decoder": None,
        "model": model(vocab, [("a", "b"), ("Ġ", "a")]),
        **extra,
    }


def split(regex: str, behavior: str = "Isolated") -> dict[str, Any]:
    return {
        "type": "Sequence",
        "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": regex}, "behavior": behavior, "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
        ],
    }


SENTENCEPIECE = {
    "type": "Sequence",
    "normalizers": [
        {"type": "Prepend", "prepend": "▁"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
    ],
}


def chars(byte_fallback: bool = False, fuse_unk: bool = True, **extra: Any) -> dict[str, Any]:
    """A SentencePiece-style file: characters, unknown token or byte fallback."""
    vocab = ["<unk>", "<s>", "</s>", *([f"<0x{b:02X}>" for b in range(256)] if byte_fallback else [])]
    vocab += ["▁", "a", "b", "c", "▁a", "ab", "bc"]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": SENTENCEPIECE,
        "pre_tokenizer": None,
        "post_processor": None,
        "decoder": None,
        "model": model(
            vocab,
            [("▁", "a"), ("a", "b"), ("b", "c")],
            unk_token="<unk>",
            fuse_unk=fuse_unk,
            byte_fallback=byte_fallback,
            **extra,
        ),
    }


def added(content: str, special: bool = False, **flags: bool) -> dict[str, Any]:
    base = {"single_word": False, "lstrip": False, "rstrip": False, "normalized": not special}
    return {"id": 0, "content": content, "special": special, **base, **flags}


POOL = [
    "a",
    "b",
    "c",
    "ab",
    " ",
    "  ",
    "\n",
    "\t",
    "é",
    "e\u0301",
    "x",
    "yz",
    "<s>",
    "</s>",
    "<m>",
    "▁",
    "²",
    "-",
]


def texts(n: int = 400, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    fixed = ["", " ", "xyz", "a\t\n", "a\t\nbc", "ab", "abc ab", "a<m>  b", "b ab", "a²b c\u200dd"]
    return fixed + ["".join(rng.choice(POOL) for _ in range(rng.randrange(10))) for _ in range(n)]


def same_as_tokenizers(tmp_path: Path, data: dict[str, Any], fast: bool) -> None:
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data))
    ours = tokshuf.Tokenizer(path)
    assert (ours.identity["encoder"] == "fast_bpe") == fast, ours.identity
    ref = tokenizers.Tokenizer.from_file(str(path))
    sample = texts()
    expected = [e.ids for e in ref.encode_batch(sample, add_special_tokens=False)]
    got = ours.encode_batch(sample)
    bad = [t for t, a, b in zip(sample, got, expected, strict=True) if a != b]
    assert not bad, bad[:5]


@pytest.mark.parametrize(
    "fuse_unk", [True, False], ids=["fused unknowns are never cut apart", "each unknown alone"]
)
def test_unknown_characters(tmp_path: Path, fuse_unk: bool) -> None:
    same_as_tokenizers(tmp_path, chars(fuse_unk=fuse_unk), fast=True)


def test_byte_fallback(tmp_path: Path) -> None:
    same_as_tokenizers(tmp_path, chars(byte_fallback=True), fast=True)


def test_a_character_that_is_also_an_added_token(tmp_path: Path) -> None:
    data = chars(byte_fallback=True)
    data["added_tokens"] = [added("b", single_word=True)]
    same_as_tokenizers(tmp_path, data, fast=True)


def test_ignore_merges_over_characters_is_left_to_tokenizers(tmp_path: Path) -> None:
    data = chars()
    data["model"]["ignore_merges"] = True
    same_as_tokenizers(tmp_path, data, fast=False)


def test_metaspace_first_after_a_replace_of_several_characters(tmp_path: Path) -> None:
    data = chars()
    data["normalizer"] = {"type": "Replace", "pattern": {"String": "ab"}, "content": "x"}
    data["pre_tokenizer"] = {
        "type": "Metaspace",
        "replacement": "▁",
        "prepend_scheme": "first",
        "split": True,
    }
    same_as_tokenizers(tmp_path, data, fast=False)


@pytest.mark.parametrize("regex", [r"(?m).+", r"(?i:ss)|\w+", r"(?i:st)|\s+"])
def test_regex_oniguruma_reads_otherwise_is_refused(tmp_path: Path, regex: str) -> None:
    # Neither the fast encoder nor the fallback (fancy-regex) reads it as Oniguruma does.
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(byte_level(split(regex))))
    with pytest.raises(tokshuf.ConfigError, match="Oniguruma"):
        tokshuf.Tokenizer(path)


def test_inline_flags_are_refused(tmp_path: Path) -> None:
    # Oniguruma scopes `(?i)` to the end of the group, past `|`: `x(?i:a|b)`. (The `tokenizers`
    # crate the refused file falls back to, built with fancy-regex, reads `x(?i:a)|(?i:b)`.)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(byte_level(split(r"x(?i)a|b"))))
    with pytest.raises(tokshuf.ConfigError, match="inline flag"):
        BpeEncoder.from_hf_file(path)


@pytest.mark.parametrize(
    "regex",
    [
        r"\w+|\W+",
        r"[\w-]+|\s+|[^\w\s]+",
        r"\p{Greek}+|\d+|(?i:'s|'t)|.",
        r"(?i)a|b",
        r"[[:alpha:]]+|\s+|[^\s]",
    ],
)
def test_regex_rewritten_to_oniguruma(tmp_path: Path, regex: str) -> None:
    same_as_tokenizers(tmp_path, byte_level(split(regex)), fast=True)


def test_hostile_regexes_are_refused_quickly(tmp_path: Path) -> None:
    for regex in ["x{300000}", "(a|b)*a(a|b){20}"]:
        path = tmp_path / "hostile.json"
        path.write_text(json.dumps(byte_level(split(regex))))
        start = time.monotonic()
        with pytest.raises(tokshuf.ConfigError):
            BpeEncoder.from_hf_file(path)
        assert time.monotonic() - start < 2.0, regex


def test_added_tokens_as_tokenizers_loads_them(tmp_path: Path) -> None:
    data = byte_level()
    # Repeated: the later flags count.
    data["added_tokens"] = [added("<m>", special=True), added("<m>", special=True, rstrip=True)]
    same_as_tokenizers(tmp_path, data, fast=True)
    # Normalizing to nothing, or two alike: `tokenizers` breaks down or picks at random.
    lower = {"type": "Lowercase"}
    for tokens in ([added("Hello"), added("hello")], [added("qq")]):
        data = byte_level()
        data["normalizer"] = (
            lower if len(tokens) == 2 else {"type": "Replace", "pattern": {"String": "q"}, "content": ""}
        )
        data["added_tokens"] = tokens
        path = tmp_path / "bad.json"
        path.write_text(json.dumps(data))
        with pytest.raises(tokshuf.ConfigError, match="normalize"):
            BpeEncoder.from_hf_file(path)


def test_special_tokens_left_as_text_as_tokenizers_leaves_them(tmp_path: Path) -> None:
    data = byte_level()
    data["added_tokens"] = [added("<x>", normalized=False), added("<y>", special=True, normalized=True)]
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data))
    ours = BpeEncoder.from_hf_file(path, special_tokens_in_text=False)
    ref = tokenizers.Tokenizer.from_file(str(path))
    ref.encode_special_tokens = True
    for text in ["a<x>b<y>c", "<y><x>", "<x", "ab <y> <x> ab"]:
        assert ours.encode(text) == ref.encode(text, add_special_tokens=False).ids, text


GPT2_JSON = Path(__file__).parent / "fixtures" / "gpt2" / "tokenizer.json"

# The pre-tokenizers of other families' files, behind GPT-2's vocabulary.
OTHER_FAMILIES: dict[str, list[dict[str, Any]]] = {
    # DeepSeek-V3: three Splits (digits, CJK runs, words) before ByteLevel.
    "deepseek-v3": [
        {"type": "Split", "pattern": {"Regex": r"\p{N}{1,3}"}, "behavior": "Isolated", "invert": False},
        {"type": "Split", "pattern": {"Regex": "[一-龥぀-ゟ゠-ヿ]+"}, "behavior": "Isolated", "invert": False},
        {
            "type": "Split",
            "pattern": {
                "Regex": r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+"
                r"|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
            },
            "behavior": "Isolated",
            "invert": False,
        },
    ],
    # StarCoder: single digits, then GPT-2's split.
    "starcoder": [{"type": "Digits", "individual_digits": True}],
    # BLOOM: its own split regex, a nested character class.
    "bloom": [
        {
            "type": "Split",
            "pattern": {"Regex": " ?[^(\\s|[.,!?…。，、।۔،])]+"},
            "behavior": "Isolated",
            "invert": False,
        }
    ],
}


@pytest.mark.parametrize("family", list(OTHER_FAMILIES))
def test_other_families_pre_tokenizers_on_a_corpus(tmp_path: Path, family: str) -> None:
    import io

    import zstandard

    data = json.loads(GPT2_JSON.read_text())
    use_regex = family == "starcoder"
    byte_level = {
        "type": "ByteLevel",
        "add_prefix_space": False,
        "trim_offsets": True,
        "use_regex": use_regex,
    }
    data["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [*OTHER_FAMILIES[family], byte_level]}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data))
    ours = tokshuf.Tokenizer(path)
    assert ours.identity["encoder"] == "fast_bpe", ours.identity
    ref = tokenizers.Tokenizer.from_file(str(path))
    sample = texts()
    corpus = Path(__file__).parent / "fixtures" / "bpe" / "corpus-i18n.jsonl.zst"
    with corpus.open("rb") as f:
        reader = io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(f), encoding="utf-8")
        sample += [json.loads(line)["text"] for line in reader][:300]
    expected = [e.ids for e in ref.encode_batch(sample, add_special_tokens=False)]
    bad = [t[:60] for t, a, b in zip(sample, ours.encode_batch(sample), expected, strict=True) if a != b]
    assert not bad, bad[:3]
