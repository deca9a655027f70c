"""Byte-identity with Megatron-LM's preprocess_data.py (HuggingFaceTokenizer, GPT-2, --append-eod),
and ids identical to `tiktoken` / `tokenizers` on a generated corpus of a few MB."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tokenizers
from conftest import FIXTURES
from corpus import GPT2
from megatron_idx import parse_idx
from megatron_ref import assert_dataset_equals, read_values, reference_dataset
from tiktoken_offline import tiktoken_encoding

import tokshuf

GOLDEN = FIXTURES / "megatron_hf"


@pytest.fixture(scope="module")
def golden() -> dict[str, Any]:
    outputs: dict[str, Any] = json.loads((GOLDEN / "golden.json").read_text())["outputs"]
    return outputs


@pytest.fixture(scope="module")
def corpus(make_corpus: Any, golden: dict[str, Any]) -> Path:
    path, manifest = make_corpus("c3.jsonl", *golden["generated"]["make_corpus_args"])
    assert manifest["uncompressed_sha256"] == golden["generated"]["corpus_uncompressed_sha256"], (
        "make_corpus.py produced a different corpus on this machine (its source pool differs: "
        f"pool_sha256 {manifest['pool_sha256']}), so the recorded Megatron output does not apply"
    )
    return path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_generated_corpus_matches_megatron(tmp_path: Path, corpus: Path, golden: dict[str, Any]) -> None:
    summary = tokshuf.preprocess(corpus, tmp_path / "g", GPT2, append_eod=True, num_threads=2)
    assert summary["documents"] == golden["generated"]["documents"]
    assert sha256(tmp_path / "g_text_document.bin") == golden["generated"]["bin_sha256"]
    assert sha256(tmp_path / "g_text_document.idx") == golden["generated"]["idx_sha256"]


@pytest.mark.parametrize("workers", [1, 3])
def test_tricky_corpus_matches_megatron(tmp_path: Path, golden: dict[str, Any], workers: int) -> None:
    tokshuf.preprocess(
        GOLDEN / "tricky.jsonl", tmp_path / "t", GPT2 / "tokenizer.json", append_eod=True, num_threads=workers
    )
    assert sha256(tmp_path / "t_text_document.bin") == golden["tricky"]["bin_sha256"]
    assert sha256(tmp_path / "t_text_document.idx") == golden["tricky"]["idx_sha256"]
    # The literal "<|endoftext|>" of the first document ("hello <|endoftext|> world") is id 50256
    # in Megatron's output too, followed by the appended eod.
    first = np.fromfile(tmp_path / "t_text_document.bin", np.uint16)[
        : parse_idx(tmp_path / "t_text_document.idx")["lengths"][0]
    ]
    assert first[-1] == 50256
    assert 50256 in first[:-1]


def test_hf_ids_match_tokenizers(tmp_path: Path, corpus: Path) -> None:
    hf = tokenizers.Tokenizer.from_file(str(GPT2 / "tokenizer.json"))
    expected = reference_dataset(
        read_values(corpus),
        lambda texts: [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)],
        eod=50256,
        dtype=np.uint16,
    )
    tokshuf.preprocess(corpus, tmp_path / "h", GPT2, append_eod=True, num_threads=2)
    assert_dataset_equals(tmp_path / "h_text_document", expected)


@pytest.mark.parametrize(("name", "dtype"), [("r50k_base", np.uint16), ("cl100k_base", np.int32)])
def test_tiktoken_ids_match_tiktoken(tmp_path: Path, corpus: Path, name: str, dtype: Any) -> None:
    enc = tiktoken_encoding(name)
    expected = reference_dataset(
        read_values(corpus), lambda texts: enc.encode_ordinary_batch(texts), eod=enc.eot_token, dtype=dtype
    )
    summary = tokshuf.preprocess(corpus, tmp_path / "t", f"tiktoken:{name}", append_eod=True, num_threads=2)
    assert summary["dtype"] == np.dtype(dtype).name
    assert_dataset_equals(tmp_path / "t_text_document", expected)
