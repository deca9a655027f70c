# ruff: noqa: RUF001  (the test alphabets are confusable characters on purpose)
"""The fast BPE encoder (``tokshuf._core.BpeEncoder``) against the real thing: ``tiktoken``'s
``encode_ordinary`` (r50k, p50k, cl100k, o200k) and ``tokenizers``' ``encode`` (GPT-2
``tokenizer.json``, and the same vocabulary behind the cl100k/o200k split rules), on generated
adversarial text and on corpus samples. Zero mismatches allowed.

``tiktoken`` has no network here, so its encodings are built by tiktoken's own constructors
(patterns, special tokens) from ``.tiktoken`` files rebuilt out of the extension's embedded ranks;
the rebuilt files must have the sha256 that tiktoken pins, so the reference does not depend on
the code under test.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tiktoken
import tiktoken.load
import tokenizers
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from tiktoken_ext import openai_public

import tokshuf
from tokshuf._core import BpeEncoder
from tokshuf.errors import ConfigError

FIXTURES = Path(__file__).parent / "fixtures" / "bpe"
GPT2_JSON = Path(__file__).parent / "fixtures" / "gpt2" / "tokenizer.json"
GPT2_JSON_SHA256 = "a743c9f171ef0c4cc0574c43cd3613a084a1e9f2b1fe499da55282de23c5eb3d"
TIKTOKEN = ["r50k_base", "p50k_base", "cl100k_base", "o200k_base"]
SPECIALS = ["<|endoftext|>", "<|fim_prefix|>", "<|endofprompt|>"]


def rebuilt_tiktoken_file(enc: BpeEncoder) -> bytes:
    ranks = sorted(enc.mergeable_ranks().items(), key=lambda kv: kv[1])
    return b"".join(base64.b64encode(tok) + b" %d\n" % rank for tok, rank in ranks)


@pytest.fixture(scope="session")
def ours() -> dict[str, BpeEncoder]:
    return {name: BpeEncoder.from_tiktoken(name) for name in TIKTOKEN}


@pytest.fixture(scope="session")
def reference(ours: dict[str, BpeEncoder]) -> dict[str, tiktoken.Encoding]:
    files = {f"{name}.tiktoken": rebuilt_tiktoken_file(enc) for name, enc in ours.items()}

    def read(blobpath: str, expected_hash: str | None = None) -> bytes:
        data = files[blobpath.rsplit("/", 1)[-1]]
        assert expected_hash is not None
        assert hashlib.sha256(data).hexdigest() == expected_hash, f"ranks of {blobpath} differ"
        return data

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tiktoken.load, "read_file_cached", read)
        return {name: tiktoken.Encoding(**openai_public.ENCODING_CONSTRUCTORS[name]()) for name in TIKTOKEN}


def hf_json_with_pattern(pattern: str | None) -> str:
    """The GPT-2 ``tokenizer.json``, optionally with its pre-tokenizer replaced by
    ``Sequence[Split(Regex(pattern), Isolated), ByteLevel(use_regex=False)]``."""
    data: dict[str, Any] = json.loads(GPT2_JSON.read_text())
    if pattern is not None:
        data["pre_tokenizer"] = {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False},
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
            ],
        }
    return json.dumps(data)


CL100K_CLASSIC = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)


@pytest.fixture(scope="session")
def hf_pairs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[BpeEncoder, tokenizers.Tokenizer]]:
    """GPT-2's vocabulary behind three split rules: ours and ``tokenizers``' on the same file."""
    assert hashlib.sha256(GPT2_JSON.read_bytes()).hexdigest() == GPT2_JSON_SHA256
    out = {}
    for label, pattern in [
        ("gpt2", None),
        ("cl100k_classic", CL100K_CLASSIC),
        ("o200k", O200K_PATTERN),
    ]:
        path = tmp_path_factory.mktemp("hf") / f"{label}.json"
        path.write_text(hf_json_with_pattern(pattern))
        ours = BpeEncoder.from_hf_file(path)
        assert ours.pattern == label
        out[label] = (ours, tokenizers.Tokenizer.from_file(str(path)))
    return out


def _o200k_pattern() -> str:
    # tiktoken's own definition (its constructor needs the ranks, so read the pattern from a
    # constructor call with a stub reader).
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(openai_public, "load_tiktoken_bpe", lambda *a, **k: {})
        return str(openai_public.o200k_base()["pat_str"])


O200K_PATTERN = _o200k_pattern()


# --- generated text ----------------------------------------------------------------------------

TRICKY = (
    "abxABX" + "stdmlverSTDMLVER" + "ſK'’" + "   \t\n\n\r\x0b\x0c\x85\xa0\u2028\u3000\u200b"
    "()/-_.,!?<|>019²Ⅷ٣𝟙中あア한اعनम\u094dก\u0e31ǅʰßİΣσς"
    "\u0301\u0302\u20dd\ufe0f\u200d😀👩🏽\x00\x7f\ufeff"
)

tricky_text = st.text(alphabet=st.sampled_from(TRICKY), max_size=60)
any_text = st.text(st.characters(blacklist_categories=["Cs"]), max_size=60)
runs = st.lists(st.tuples(st.sampled_from(TRICKY), st.integers(1, 6)), max_size=12).map(
    lambda rs: "".join(c * n for c, n in rs)
)
words = st.lists(
    st.sampled_from(
        [
            " ",
            "  ",
            "\t",
            "\n",
            "\r\n",
            " \n ",
            "'s",
            "'S",
            "'ll",
            "'LL",
            "'Re",
            "'ve",
            "'d",
            "'m",
            "'t",
            "don",
            "I",
            "HTML",
            "Parser",
            "iPhone",
            "hello",
            "Hello",
            "HELLO",
            "123",
            "4567",
            "(",
            ")",
            ":",
            "//",
            "...",
            "—",
            "«",
            "»",
            "中文",
            "日本語",
            "한국어",
            "ру́сский",
            "e\u0301",
            "👩\u200d👩\u200d👧",
            "🏳️\u200d🌈",
            "x" * 40,
            "0" * 17,
            "_" * 9,
        ]
    ),
    max_size=25,
).map("".join)
texts = st.one_of(tricky_text, any_text, runs, words)


def assert_same(ours: list[int], expected: list[int], text: str) -> None:
    assert ours == expected, f"ids differ on {text!r}"


@settings(max_examples=300)
@given(text=texts)
def test_generated_text_matches_tiktoken(
    text: str, ours: dict[str, BpeEncoder], reference: dict[str, tiktoken.Encoding]
) -> None:
    for name in TIKTOKEN:
        assert_same(ours[name].encode(text), reference[name].encode_ordinary(text), text)


@settings(max_examples=300)
@given(text=texts)
def test_generated_text_matches_tokenizers(
    text: str, hf_pairs: dict[str, tuple[BpeEncoder, tokenizers.Tokenizer]]
) -> None:
    # `tokenizers` always matches its added tokens in the text; ours only when asked.
    text = text.replace("<|endoftext|>", "<|endoftext|")
    for ours, theirs in hf_pairs.values():
        assert_same(ours.encode(text), theirs.encode(text, add_special_tokens=False).ids, text)


EDGE_CASES = [
    "",
    "x\n ",
    "x\n \n  ",
    "\n\t\t'magic'\t't_op'\t(struct\t-I",
    "It's, IT'S, it'S, we'LL, they'Re 'ſ",
    "a" * 30_000,
    " " * 20_000,
    "\n" * 20_000,
    "7" * 20_000,
    "中" * 10_000,
    "ab" * 20_000 + "\n\n  x",
    " " * 5000 + "x" + "\t" * 5000,
    "e\u0301" * 3000,
    "👩\u200d👩\u200d👧\u200d👦" * 500,
    "<|endoftext|>" * 100,
    "\x00\x01\x7f\ufeff\ufffd",
    # Pieces of 64 KiB and more merge through a bucket queue instead of a binary heap.
    "a" * 70_000,
    " " * 70_000 + "x",
    "\n" * 66_000,
    "".join("etaoinshrdlu"[(i * i + 7 * i) % 12] for i in range(80_000)),
    "中文字" * 25_000,
]


@pytest.mark.parametrize("text", EDGE_CASES, ids=range(len(EDGE_CASES)))
def test_edge_cases(
    text: str,
    ours: dict[str, BpeEncoder],
    reference: dict[str, tiktoken.Encoding],
    hf_pairs: dict[str, tuple[BpeEncoder, tokenizers.Tokenizer]],
) -> None:
    for name in TIKTOKEN:
        assert_same(ours[name].encode(text), reference[name].encode_ordinary(text), text[:50])
    if "<|endoftext|>" not in text:
        for enc, hf in hf_pairs.values():
            assert_same(enc.encode(text), hf.encode(text, add_special_tokens=False).ids, text[:50])


# One long input of each kind that benches/bench_long_inputs.py times: most are a single piece of
# the split pattern, hundreds of KB long, which the merge of long pieces must get exactly right.
LONG_INPUT_BYTES = 200_000
LONG_INPUTS = {
    "word": "abcdefghijklmnopqrstuvwxyz",
    "repeat": "a",
    "alternating": "ab",  # "q" + "abab...": every merge of the word is a tie
    "digits": "0123456789",
    "spaces": " ",
    "newlines": "\n",
    "random": "".join(map(chr, range(0x20, 0x3001))),
    "punctuation": "!@#$%^&*()-=+[]{};:,.<>/?",
}


def long_input(kind: str) -> str:
    alphabet = LONG_INPUTS[kind]
    if kind == "alternating":
        return "q" + "ab" * (LONG_INPUT_BYTES // 2)
    if len(alphabet) == 1:
        return alphabet * LONG_INPUT_BYTES
    chars = random.Random(kind).choices(alphabet, k=LONG_INPUT_BYTES)
    return "".join(chars).encode()[:LONG_INPUT_BYTES].decode("utf-8", "ignore")


@pytest.fixture(scope="session")
def token_bytes(
    ours: dict[str, BpeEncoder], hf_pairs: dict[str, tuple[BpeEncoder, tokenizers.Tokenizer]]
) -> dict[int, dict[int, bytes]]:
    """Each encoder's id -> bytes (by ``id()`` of the encoder)."""
    encoders = [*ours.values(), *(enc for enc, _ in hf_pairs.values())]
    return {id(enc): {v: k for k, v in enc.mergeable_ranks().items()} for enc in encoders}


@pytest.mark.parametrize("kind", LONG_INPUTS)
def test_long_inputs_round_trip_and_match_the_references(
    kind: str,
    ours: dict[str, BpeEncoder],
    reference: dict[str, tiktoken.Encoding],
    hf_pairs: dict[str, tuple[BpeEncoder, tokenizers.Tokenizer]],
    token_bytes: dict[int, dict[int, bytes]],
) -> None:
    # This asserts behaviour only. Whether the time grows as O(n log n) (and stays under the
    # defining library's) is measured by benches/bench_long_inputs.py, not timed here: a timed
    # assertion fails on a loaded machine. (tiktoken 0.14 and `tokenizers` 0.23 take about 0.1 s
    # on each of these 200 KB: both merge long pieces in better than quadratic time.)
    text = long_input(kind)
    data = text.encode()
    assert len(data) > LONG_INPUT_BYTES - 4
    pairs: list[tuple[str, BpeEncoder, list[int]]] = [
        (name, ours[name], reference[name].encode_ordinary(text)) for name in ("cl100k_base", "o200k_base")
    ]
    pairs += [
        (label, enc, hf.encode(text, add_special_tokens=False).ids) for label, (enc, hf) in hf_pairs.items()
    ]
    for name, enc, expected in pairs:
        ids = enc.encode(text)
        inverse = token_bytes[id(enc)]
        assert b"".join(inverse[i] for i in ids) == data, f"{name}: the ids of {kind} do not decode to it"
        assert ids == expected, f"{name}: ids differ from the reference's on {kind}"


# --- special tokens ----------------------------------------------------------------------------


def test_special_tokens_are_text_unless_asked(reference: dict[str, tiktoken.Encoding]) -> None:
    text = "a<|endoftext|>b <|fim_prefix|><|endofprompt|> <|endoftext"
    plain = BpeEncoder.from_tiktoken("cl100k_base")
    assert plain.encode(text) == reference["cl100k_base"].encode_ordinary(text)
    assert 100257 not in plain.encode(text)
    asked = BpeEncoder.from_tiktoken("cl100k_base", special_tokens_in_text=True)
    expected = reference["cl100k_base"].encode(text, allowed_special="all")
    assert asked.encode(text) == expected
    assert 100257 in expected
    assert 100258 in expected


def test_hf_special_tokens_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "gpt2.json"
    path.write_text(hf_json_with_pattern(None))
    asked = BpeEncoder.from_hf_file(path, special_tokens_in_text=True)
    hf = tokenizers.Tokenizer.from_file(str(path))
    text = "x<|endoftext|>y <|endoftext|><|endoftext|"
    assert asked.encode(text) == hf.encode(text, add_special_tokens=False).ids
    assert BpeEncoder.from_hf_file(path).eod_id == 50256


@pytest.mark.parametrize(
    ("name", "size", "eod"),
    [
        ("r50k_base", 50257, 50256),
        ("p50k_base", 50281, 50256),
        ("cl100k_base", 100277, 100257),
        ("o200k_base", 200019, 199999),
    ],
)
def test_vocab_size_and_eod(
    name: str, size: int, eod: int, ours: dict[str, BpeEncoder], reference: dict[str, tiktoken.Encoding]
) -> None:
    assert ours[name].vocab_size == size == reference[name].n_vocab
    assert ours[name].eod_id == eod == reference[name].eot_token


# --- corpus samples ----------------------------------------------------------------------------


def corpus(name: str) -> Iterator[str]:
    raw = zstandard.ZstdDecompressor().stream_reader(io.BytesIO((FIXTURES / name).read_bytes()))
    for line in io.TextIOWrapper(raw, encoding="utf-8"):
        yield json.loads(line)["text"]


@pytest.mark.parametrize("sample", ["corpus-mixed.jsonl.zst", "corpus-i18n.jsonl.zst"])
def test_corpus_samples(
    sample: str,
    ours: dict[str, BpeEncoder],
    reference: dict[str, tiktoken.Encoding],
    hf_pairs: dict[str, tuple[BpeEncoder, tokenizers.Tokenizer]],
) -> None:
    docs = list(corpus(sample))
    assert len(docs) > 300
    for name in TIKTOKEN:
        ids, offsets = (
            np.frombuffer(b, dt)
            for b, dt in zip(ours[name].encode_batch(docs, num_threads=2), (np.uint32, np.int64), strict=True)
        )
        expected = reference[name].encode_ordinary_batch(docs, num_threads=2)
        bad = [i for i, e in enumerate(expected) if ids[offsets[i] : offsets[i + 1]].tolist() != e]
        assert not bad, f"{name}: {len(bad)} mismatching documents, first {bad[0]}"
    for label, (enc, hf) in hf_pairs.items():
        got = [enc.encode(d) for d in docs]
        expected = [e.ids for e in hf.encode_batch(docs, add_special_tokens=False)]
        bad = [i for i, (g, e) in enumerate(zip(got, expected, strict=True)) if g != e]
        assert not bad, f"tokenizers {label}: {len(bad)} mismatching documents, first {bad[0]}"


# --- construction and the Python boundary -----------------------------------------------------


def test_tiktoken_file_and_pattern_names(tmp_path: Path, ours: dict[str, BpeEncoder]) -> None:
    path = tmp_path / "cl100k.tiktoken"
    path.write_bytes(rebuilt_tiktoken_file(ours["cl100k_base"]))
    enc = tokshuf.Tokenizer(f"{path}@cl100k", special_tokens={"<|endoftext|>": 100257})
    text = "Hello world's\n\n  end"
    assert enc.encode(text) == ours["cl100k_base"].encode(text)
    assert enc.eos_token_id == 100257
    with pytest.raises(ConfigError, match="o200k"):
        tokshuf.Tokenizer(f"{path}@bert")
    with pytest.raises(ConfigError, match="cl100k_base"):
        BpeEncoder.from_tiktoken("cl100k")
    with pytest.raises(ConfigError, match=r"missing\.tiktoken.* nor a \.tiktoken file"):
        tokshuf.Tokenizer(f"{tmp_path / 'missing.tiktoken'}@cl100k")
    (tmp_path / "bad.tiktoken").write_text("not base64!! 1\n")
    with pytest.raises(ValueError, match="line 1"):
        tokshuf.Tokenizer(f"{tmp_path / 'bad.tiktoken'}@cl100k")


def test_unsupported_hf_files_say_why(tmp_path: Path) -> None:
    path = tmp_path / "file.json"
    cases: list[tuple[str, str]] = []
    data = json.loads(hf_json_with_pattern(None))
    data["normalizer"] = {"type": "NFKC"}
    cases.append((json.dumps(data), "NFKC"))
    cases.append((hf_json_with_pattern(r"(?<=a)b|\w+"), r"\(\?<"))
    data = json.loads(hf_json_with_pattern(None))
    data["model"]["type"] = "WordPiece"
    cases.append((json.dumps(data), "WordPiece"))
    data = json.loads(hf_json_with_pattern(None))
    data["truncation"] = {"max_length": 8}
    cases.append((json.dumps(data), "truncation"))
    for text, reason in cases:
        path.write_text(text)
        with pytest.raises(ConfigError, match=reason):
            BpeEncoder.from_hf_file(path)


def test_pipelines_beyond_the_openai_families_match_tokenizers(tmp_path: Path) -> None:
    """GPT-2's vocabulary behind pre-tokenizers no OpenAI encoding has: ours (a compiled
    automaton, steps, a prefix space) against ``tokenizers`` on the same file."""
    variants: dict[str, Any] = {}
    data = json.loads(hf_json_with_pattern(None))
    data["pre_tokenizer"]["add_prefix_space"] = True
    variants["prefix space"] = data
    variants["words"] = json.loads(hf_json_with_pattern(r"\w+|\s+|[^\w\s]+"))
    data = json.loads(hf_json_with_pattern(None))
    data["pre_tokenizer"] = {
        "type": "Sequence",
        "pretokenizers": [
            {"type": "Digits", "individual_digits": True},
            {"type": "Split", "pattern": {"String": "-"}, "behavior": "MergedWithNext", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        ],
    }
    variants["steps"] = data
    texts = [*EDGE_CASES, "well-known x-ray 2024-01-05 a--b -lead trail-", "  two  spaces  ", "1234567"]
    for name, data in variants.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(data))
        ours = BpeEncoder.from_hf_file(path, special_tokens_in_text=True)
        ref = tokenizers.Tokenizer.from_file(str(path))
        for text in texts:
            expected = ref.encode(text, add_special_tokens=False).ids
            assert_same(ours.encode(text), expected, f"{name}: {text[:50]}")


def test_lone_surrogates_are_rejected(ours: dict[str, BpeEncoder]) -> None:
    with pytest.raises(UnicodeEncodeError):
        ours["r50k_base"].encode("a\ud800b")
    with pytest.raises(UnicodeEncodeError):
        ours["r50k_base"].encode_batch(["ok", "a\udfffb"])


def test_batch_offsets_and_threads(ours: dict[str, BpeEncoder]) -> None:
    docs = ["", "hello", " world" * 1000, "中文", ""] * 50
    enc = ours["o200k_base"]
    one = [bytes(b) for b in enc.encode_batch(docs, num_threads=1)]
    two = [bytes(b) for b in enc.encode_batch(docs, num_threads=2)]
    assert one == two
    ids = np.frombuffer(one[0], np.uint32)
    offsets = np.frombuffer(one[1], np.int64)
    assert len(offsets) == len(docs) + 1
    assert offsets[0] == 0
    assert offsets[-1] == len(ids)
    for i, d in enumerate(docs):
        assert ids[offsets[i] : offsets[i + 1]].tolist() == enc.encode(d)


def test_identity_is_json(ours: dict[str, BpeEncoder]) -> None:
    ident = json.loads(ours["o200k_base"].identity)
    assert ident["source"] == "tiktoken:o200k_base"
    assert ident["pattern"] == "o200k"
    assert ident["vocab_size"] == 200019
