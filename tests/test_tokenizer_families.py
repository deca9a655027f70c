# ruff: noqa: RUF001  (the test alphabets are confusable characters on purpose)
"""Today's tokenizer families on tokshuf's fast encoder, against the libraries that define them:
``tokenizers`` for the ``tokenizer.json`` files (GPT-NeoX-20B, OLMo-2 dolma2, Qwen2, Mistral
Tekken, a converted SentencePiece model), ``sentencepiece`` for the ``.model`` file and
``tiktoken`` for Llama 3's rank file. The files are the real ones (``fixtures/tokenizers``); the
texts are two generated corpora (prose, code, a hundred languages) and edge cases. Zero
mismatching documents allowed.
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import sentencepiece
import tiktoken
import tiktoken.load
import tokenizers
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

import tokshuf
from tokshuf.indexed import IndexedDataset

FIXTURES = Path(__file__).parent / "fixtures"
# family: (file name, sha256 of the file)
FILES = {
    "neox": (
        "gpt-neox-20b_tokenizer.json",
        "56ac4821e129d2c520fdaba60abd920fa852ada51b45c0dd52bbb6bd8c985ade",
    ),
    "dolma2": (
        "olmo2-dolma2_tokenizer.json",
        "3ca996cca8afea58b34e95c353e859333592642a5e51d695d7a6dbbaf692dfe9",
    ),
    "qwen2": ("qwen2_tokenizer.json", "f7c9b2dba4a296b1aa76c16a34b8225c0c118978400d4bb66bff0902d702f5b8"),
    "tekken": (
        "mistral-tekken_tokenizer.json",
        "a4a46593c229fecfd57601b6d355584e4c78e66f7d1de29fef3c7465642b5974",
    ),
    "mistral-v1": (
        "mistral-v1-sentencepiece_tokenizer.json",
        "a2699839c243202a04a90537576fc719283f638e90fe80feb469888275289575",
    ),
    "mistral-v1.model": (
        "mistral-v1-sentencepiece_tokenizer.model",
        "dadfd56d766715c61d2ef780a525ab43b8e6da4de6865bda3d95fdef5e134055",
    ),
    "llama3.model": (
        "llama3_tokenizer.model",
        "82e9d31979e92ab929cd544440f129d9ecd797b69e327f80f17e1c50d5551b55",
    ),
}
JSON_FAMILIES = ["neox", "dolma2", "qwen2", "tekken", "mistral-v1"]
LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

EDGE_TEXTS = [
    "",
    " ",
    "  two  spaces  and   three   ",
    "\t\tindented\n        code();\n\n\n",
    "x\n 's\n'LL 'Ve it's IT'S don't",
    "<|endoftext|> <s> </s> <unk> [INST] hi [/INST] <|im_start|> |||EMAIL_ADDRESS||| <|extra_id_3|>",
    "a" * 30_000,
    " " * 5_000 + "x",
    "7" * 5_000 + " 12 123 1234 12345 ²³ ٣٤٥ 𝟙𝟚",
    "中文文本，没有空格。日本語のテキスト。한국어 텍스트 العربية हिन्दी ภาษาไทย",
    "e\u0301 A\u030a \u2126 \u1100\u1161\u11a8 \u212b caf\u00e9 cafe\u0301",
    "emoji 👩\u200d👩\u200d👧\u200d👦 🇫🇷 ✌🏽 \ufe0f",
    "controls \x00\x01\x7f \ufeff \ue000 \U000e0041 \U00020000 \U0001d11e",
    "ΣΑΣ σας ſ ǅ İ ß",
    "path/to/file.txt\n//comment\r\n/*x*/",
]


@pytest.fixture(scope="session")
def paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The real files, decompressed, each checked against its published sha256."""
    root = tmp_path_factory.mktemp("tokenizers")
    out = {}
    for family, (name, sha256) in FILES.items():
        data = zstandard.ZstdDecompressor().decompress(
            (FIXTURES / "tokenizers" / f"{name}.zst").read_bytes(), max_output_size=64 << 20
        )
        assert hashlib.sha256(data).hexdigest() == sha256, name
        path = root / family / name.split("_", 1)[1]
        path.parent.mkdir()
        path.write_bytes(data)
        out[family] = path
    return out


def corpus(name: str) -> list[str]:
    with (FIXTURES / "bpe" / name).open("rb") as f:
        reader = io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(f), encoding="utf-8")
        return [json.loads(line)["text"] for line in reader]


@pytest.fixture(scope="session")
def texts() -> list[str]:
    return corpus("corpus-mixed.jsonl.zst") + corpus("corpus-i18n.jsonl.zst") + EDGE_TEXTS


@pytest.fixture(scope="session")
def loaded(paths: dict[str, Path]) -> dict[str, tuple[tokshuf.Tokenizer, object]]:
    """Each family: ours, and the reference library's encoder (a callable on a list of texts)."""
    out: dict[str, tuple[tokshuf.Tokenizer, object]] = {}
    for family in JSON_FAMILIES:
        ref = tokenizers.Tokenizer.from_file(str(paths[family]))
        out[family] = (
            tokshuf.Tokenizer(paths[family]),
            lambda batch, ref=ref: [e.ids for e in ref.encode_batch(batch, add_special_tokens=False)],
        )
    sp = sentencepiece.SentencePieceProcessor(model_file=str(paths["mistral-v1.model"]))
    out["mistral-v1.model"] = (tokshuf.Tokenizer(paths["mistral-v1.model"]), sp.encode)
    ranks = tiktoken.load.load_tiktoken_bpe(str(paths["llama3.model"]))
    llama3 = tiktoken.Encoding("llama3", pat_str=LLAMA3_PATTERN, mergeable_ranks=ranks, special_tokens={})
    out["llama3.model"] = (tokshuf.Tokenizer(paths["llama3.model"]), llama3.encode_ordinary_batch)
    return out


def mismatches(ours: list[list[int]], expected: list[list[int]], batch: list[str]) -> list[str]:
    return [repr(t[:80]) for t, a, b in zip(batch, ours, expected, strict=True) if a != b]


@pytest.mark.parametrize("family", [*JSON_FAMILIES, "mistral-v1.model", "llama3.model"])
def test_every_document_matches_the_reference(
    family: str, loaded: dict[str, tuple[tokshuf.Tokenizer, object]], texts: list[str]
) -> None:
    ours, reference = loaded[family]
    assert ours.identity["encoder"] == "fast_bpe", ours.identity
    got = ours.encode_batch(texts)
    expected = reference(texts)  # type: ignore[operator]
    bad = mismatches(got, expected, texts)
    assert not bad, f"{len(bad)} of {len(texts)} documents differ, e.g. {bad[:3]}"


TRICKY = (
    "a",
    "Z",
    "é",
    "e\u0301",
    " ",
    "  ",
    "\t",
    "\n",
    "\r\n",
    "'s",
    "'LL",
    "1",
    "123",
    "²",
    "中",
    "日本",
    "ا",
    "👩\u200d",
    "\U0001f1eb",
    "\x00",
    "\ue000",
    "▁",
    "<s>",
    "</s>",
    "<|endoftext|>",
    "[INST]",
    "|||IP_ADDRESS|||",
    "Σ",
    "ſ",
    "\u2126",
    "-",
    "//",
    ".",
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(TRICKY), max_size=24).map("".join))
def test_generated_text_matches_every_reference(
    loaded: dict[str, tuple[tokshuf.Tokenizer, object]], text: str
) -> None:
    for family, (ours, reference) in loaded.items():
        assert ours.encode(text) == reference([text])[0], (family, text)  # type: ignore[operator]


def test_preprocess_is_byte_identical_to_the_reference_encoder(
    paths: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The `.bin/.idx` of a family that used to run on the `tokenizers` crate are unchanged."""
    source = FIXTURES / "bpe" / "corpus-i18n.jsonl.zst"
    fast = tokshuf.Tokenizer(paths["neox"])
    tokshuf.preprocess(source, tmp_path / "fast", fast, append_eod=True, num_threads=2)
    monkeypatch.setenv("TOKSHUF_FAST_BPE", "0")
    slow = tokshuf.Tokenizer(paths["neox"])
    assert slow.identity["encoder"] == "tokenizers"
    tokshuf.preprocess(source, tmp_path / "slow", slow, append_eod=True, num_threads=2)
    for ext in ("bin", "idx"):
        a = (tmp_path / f"fast_text_document.{ext}").read_bytes()
        b = (tmp_path / f"slow_text_document.{ext}").read_bytes()
        assert a == b, ext


def test_the_identity_says_which_encoder_ran_and_why(paths: dict[str, Path], tmp_path: Path) -> None:
    data = json.loads(paths["qwen2"].read_text())
    data["normalizer"] = {"type": "NFKC"}
    path = tmp_path / "nfkc.json"
    path.write_text(json.dumps(data))
    tok = tokshuf.Tokenizer(path)
    assert tok.identity["encoder"] == "tokenizers"
    assert "NFKC" in tok.identity["fast_bpe_unsupported"]
    ref = tokenizers.Tokenizer.from_file(str(path))
    text = "ﬁne ①②③ Ｆｕｌｌ"
    assert tok.encode(text) == ref.encode(text, add_special_tokens=False).ids


def test_llama3_specials_and_declared_specials(paths: dict[str, Path], tmp_path: Path) -> None:
    llama3 = paths["llama3.model"]
    # Recognised by its hash: Meta's pattern and special tokens, <|end_of_text|> as eod.
    tok = tokshuf.Tokenizer(llama3)
    assert (tok.eos_token_id, tok.vocab_size) == (128001, 128256)
    assert tokshuf.Tokenizer(f"tiktoken:{llama3}@llama3").eos_token_id == 128001
    # Given a pattern only, the file has no special tokens; they can be declared.
    plain = tokshuf.Tokenizer(f"{llama3}@cl100k_classic")
    assert (plain.eos_token_id, plain.vocab_size) == (None, 128000)
    specials = tmp_path / "specials.json"
    specials.write_text(json.dumps({"<|begin_of_text|>": 128000, "<|end_of_text|>": 128001}))
    declared = tokshuf.Tokenizer(f"{llama3}@cl100k_classic", special_tokens=specials)
    assert (declared.eos_token_id, declared.vocab_size) == (128001, 128002)
    with pytest.raises(tokshuf.ConfigError, match="is a rank"):
        tokshuf.Tokenizer(f"{llama3}@cl100k_classic", special_tokens={"<x>": 5})
    with pytest.raises(tokshuf.ConfigError, match="rank files only"):
        tokshuf.Tokenizer(paths["qwen2"], special_tokens={"<x>": 200_000})

    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"text": "hello world"}\n{"text": "second"}\n')
    cli = [sys.executable, "-m", "tokshuf", "preprocess", "--input", str(corpus), "--append-eod"]
    out = tmp_path / "o"
    run = subprocess.run(
        [
            *cli,
            "--output-prefix",
            str(out),
            "--tokenizer",
            f"{llama3}@cl100k_classic",
            "--special-tokens-file",
            str(specials),
        ],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    ds = IndexedDataset(f"{out}_text_document")
    assert [int(ds[i][-1]) for i in range(len(ds))] == [128001, 128001]
    assert np.array_equal(ds[0][:-1], tok.encode("hello world"))
    # The shuffle's end-of-text id comes from the declared tokens too.
    summary = tokshuf.shuffle(
        corpus,
        tmp_path / "cells",
        tmp_path / "shards",
        f"{llama3}@cl100k_classic",
        context_length=8,
        num_local_cells=2,
        tokenizer_special_tokens=specials,
    )
    assert summary["tokenizer"]["eod"] == 128001


def test_sentencepiece_model_reads_what_the_library_reads(paths: dict[str, Path], tmp_path: Path) -> None:
    model = paths["mistral-v1.model"]
    tok = tokshuf.Tokenizer(model)
    assert tok.identity["kind"] == "sentencepiece"
    assert (tok.eos_token_id, tok.vocab_size) == (2, 32000)
    # A directory holding it, and the same model converted to tokenizer.json: the same ids except
    # where the text holds a control token (the converted file matches `<s>` as an added token).
    assert tokshuf.Tokenizer(model.parent).encode("Hello  world") == tok.encode("Hello  world")
    converted = tokshuf.Tokenizer(paths["mistral-v1"])
    assert converted.encode("Hello  world\tx") == tok.encode("Hello  world\tx")
    assert converted.encode("a</s>b") != tok.encode("a</s>b")
    not_a_model = tmp_path / "tokenizer.model"
    not_a_model.write_bytes(b"\x0a\xff\xff")
    with pytest.raises(tokshuf.ConfigError, match="not a SentencePiece model"):
        tokshuf.Tokenizer(not_a_model)


def test_tokenizer_check_reports_the_encoder_and_compares(paths: dict[str, Path], tmp_path: Path) -> None:
    from tokshuf.tokenizer_check import check_tokenizer, sample_texts

    texts = sample_texts(limit=300)
    for family, reference in [("qwen2", "tokenizers"), ("mistral-v1.model", "sentencepiece")]:
        result = check_tokenizer(paths[family], texts)
        assert result["encoder"] == "fast_bpe"
        assert (result["reference"], result["documents"]) == (reference, len(texts))
        assert result["mismatching_documents"] == 0, result["first_mismatch"]

    data = json.loads(paths["neox"].read_text())
    data["pre_tokenizer"] = {"type": "Punctuation", "behavior": "Isolated"}
    path = tmp_path / "punct.json"
    path.write_text(json.dumps(data))
    run = subprocess.run(
        [sys.executable, "-m", "tokshuf", "tokenizer", "check", str(path), "--limit", "100", "--json"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["encoder"] == "tokenizers"
    assert "Punctuation" in result["fast_bpe_unsupported"]
    assert result["mismatching_documents"] == 0


def test_a_prepared_vocabulary_is_stored_once_and_read_back(
    paths: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tokenizer.json or .model is prepared on its first load and the result stored under the
    file's SHA-256; later loads read it back. A damaged entry, or another file's, is not used (and
    is replaced); a cache that cannot be written only means nothing is kept."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("TOKSHUF_CACHE_DIR", str(cache))
    texts = [*EDGE_TEXTS, "<|im_start|>user<|im_end|> </s> ▁▁x"]
    entries, encoded = {}, {}
    for family, kind in [("qwen2", "hf-json"), ("mistral-v1.model", "sp-model")]:
        first = tokshuf.Tokenizer(paths[family])
        # <sha256>.<build of the tokenizer code>.<kind>
        (entry,) = (cache / "tokenizers").glob(f"{FILES[family][1]}.*.{kind}")
        entries[family] = entry
        ids = encoded[family] = first.encode_batch(texts)
        stored, written = entry.read_bytes(), entry.stat()
        again = tokshuf.Tokenizer(paths[family])
        assert (entry.stat().st_ino, entry.stat().st_mtime_ns) == (written.st_ino, written.st_mtime_ns)
        assert (again.encode_batch(texts), again.identity) == (ids, first.identity)
        entry.write_bytes(stored[:-1] + bytes([stored[-1] ^ 1]))
        assert tokshuf.Tokenizer(paths[family]).encode_batch(texts) == ids
        assert entry.read_bytes() == stored, family
    # Qwen2's entry under GPT-NeoX's name is Qwen2's: GPT-NeoX prepares its own.
    neox = entries["qwen2"].with_name(entries["qwen2"].name.replace(FILES["qwen2"][1], FILES["neox"][1]))
    neox.write_bytes(entries["qwen2"].read_bytes())
    ref = tokenizers.Tokenizer.from_file(str(paths["neox"]))
    expected = [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
    assert tokshuf.Tokenizer(paths["neox"]).encode_batch(texts) == expected
    assert neox.read_bytes() != entries["qwen2"].read_bytes()
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setenv("TOKSHUF_CACHE_DIR", str(blocked))
    assert tokshuf.Tokenizer(paths["qwen2"]).encode_batch(texts) == encoded["qwen2"]


# DeepSeek-V3's pipeline (its tokenizer.json): no normalizer, three Split steps, then bytes.
DEEPSEEK_V3_SPLITS = [
    r"\p{N}{1,3}",
    "[一-龥぀-ゟ゠-ヿ]+",
    r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"""
    r"""| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
]
DEEPSEEK_V3_RAW = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>"]
DEEPSEEK_V3_ADDED = ["<｜User｜>", "<｜Assistant｜>", "<think>", "</think>"] + [
    f"<｜place▁holder▁no▁{i}｜>" for i in range(12)
]


def deepseek_v3_like(qwen2: Path, out: Path) -> Path:
    """A stand-in for DeepSeek-V3's tokenizer.json, laid out as it is: its vocabulary starts with
    its special tokens written as they are (not in GPT-2's byte-to-character spelling), which are
    also added tokens with those ids; its other added tokens follow the vocabulary. The merges
    and byte-level tokens are Qwen2's (ids moved up by three); one more raw token is in the
    vocabulary only."""
    data = json.loads(qwen2.read_text(encoding="utf-8"))
    data["normalizer"] = {"type": "Sequence", "normalizers": []}
    split = [
        {"type": "Split", "pattern": {"Regex": r}, "behavior": "Isolated", "invert": False}
        for r in DEEPSEEK_V3_SPLITS
    ]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
    data["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [*split, byte_level]}
    vocab = {token: i for i, token in enumerate(DEEPSEEK_V3_RAW)}
    vocab.update({token: i + len(DEEPSEEK_V3_RAW) for token, i in data["model"]["vocab"].items()})
    vocab["<｜tool▁sep｜>"] = len(vocab)
    data["model"]["vocab"] = vocab

    def added(content: str, id: int, special: bool, normalized: bool) -> dict[str, object]:
        flags = {"single_word": False, "lstrip": False, "rstrip": False}
        return {"id": id, "content": content, **flags, "normalized": normalized, "special": special}

    qwen_added = [t["content"] for t in data["added_tokens"]]
    tokens = [added(t, i, True, True) for i, t in enumerate(DEEPSEEK_V3_RAW)]
    for i, t in enumerate(qwen_added + DEEPSEEK_V3_ADDED):
        special = "holder" in t or t in qwen_added
        tokens.append(added(t, len(vocab) + i, special=special, normalized="｜" in t))
    data["added_tokens"] = tokens
    path = out / "tokenizer.json"
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    config = {"bos_token": {"content": DEEPSEEK_V3_RAW[0]}, "eos_token": {"content": DEEPSEEK_V3_RAW[1]}}
    (out / "tokenizer_config.json").write_text(json.dumps(config, ensure_ascii=False), encoding="utf-8")
    return path


def test_deepseek_v3_raw_special_tokens_take_the_fast_encoder(
    paths: dict[str, Path], texts: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = deepseek_v3_like(paths["qwen2"], tmp_path)
    ref = tokenizers.Tokenizer.from_file(str(path))
    tok = tokshuf.Tokenizer(path)
    assert tok.identity["encoder"] == "fast_bpe", tok.identity
    assert tok.eos_token_id == ref.token_to_id(DEEPSEEK_V3_RAW[1]) == 1
    # Each special and added token, whole, cut, doubled and beside what the splits treat apart.
    specials = [*DEEPSEEK_V3_RAW, "<｜tool▁sep｜>", "<|endoftext|>", *DEEPSEEK_V3_ADDED]
    neighbours = ["", " ", "\n", "a", "A1", "12345", "中文", "カナ", "!", "｜", "▁", "<", ">", "<｜"]
    around = [f"{a}{s}{b}" for s in specials for a in neighbours for b in neighbours[::3]]
    cut = [part for s in specials for k in range(1, len(s)) for part in (s[:k], s[k:])]
    chat = "".join(
        f"{DEEPSEEK_V3_RAW[0]}You are kind.<｜User｜>1+1=? 日本語で<｜Assistant｜><think>\n2</think>"
        f"2{DEEPSEEK_V3_RAW[1]}{s}"
        for s in specials
    )
    batch = [*texts, *around, *cut, chat, "".join(specials), " ".join(specials) * 3]
    got = tok.encode_batch(batch)
    expected = [e.ids for e in ref.encode_batch(batch, add_special_tokens=False)]
    bad = mismatches(got, expected, batch)
    assert not bad, f"{len(bad)} of {len(batch)} documents differ, e.g. {bad[:3]}"
    # The same tokenizer on the `tokenizers` crate: the same size and identity.
    monkeypatch.setenv("TOKSHUF_FAST_BPE", "0")
    slow = tokshuf.Tokenizer(path)
    assert slow.identity["encoder"] == "tokenizers"
    same = {k: v for k, v in tok.identity.items() if k not in ("encoder", "fast_bpe_unsupported")}
    assert same == {k: v for k, v in slow.identity.items() if k not in ("encoder", "fast_bpe_unsupported")}
