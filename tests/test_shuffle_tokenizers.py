"""`tokshuf shuffle` with real tokenizers: the contexts equal an oracle built on the `tiktoken` and
`tokenizers` packages with tokshuf-rust's rules (spec §15), for the native and DCLM conventions."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from conftest import write_jsonl
from corpus import GPT2
from shuffle_helpers import open_lm_samples, read_contexts
from tiktoken_offline import tiktoken_encoding

import tokshuf

SEQLEN = 2049


Encode = Callable[[str], list[int]]


def oracle(
    files: Sequence[Sequence[str]], encode: Encode, eot: int, pad: int, bos: int | None = None
) -> Counter[tuple[int, ...]]:
    """Per file: [BOS] + encode(text) + [EOT] per document, concatenated, cut every SEQLEN tokens,
    the remainder padded with PAD (no all-PAD context)."""
    out: Counter[tuple[int, ...]] = Counter()
    for docs in files:
        buf: list[int] = []
        for text in docs:
            buf += ([bos] if bos is not None else []) + encode(text) + [eot]
            while len(buf) >= SEQLEN:
                out[tuple(buf[:SEQLEN])] += 1
                del buf[:SEQLEN]
        if buf:
            out[tuple(buf + [pad] * (SEQLEN - len(buf)))] += 1
    return out


@pytest.fixture(scope="module")
def corpus(make_corpus: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[list[list[str]], list[Path]]:
    """A generated corpus (prose, code, ~100 languages) plus a file of awkward documents."""
    generated, _ = make_corpus("shuffle-tok.jsonl.zst", "--size", "1MB", "--seed", "5")
    texts = [json.loads(line)["text"] for line in _lines(generated)]
    tricky = ["", " ", "<|endoftext|> is text here", "a\r\nb", "🙂" * 50, "x" * 5000]
    extra = write_jsonl(tmp_path_factory.mktemp("tok") / "tricky.jsonl", [{"text": t} for t in tricky])
    return [texts, tricky], [generated, extra]


def _lines(path: Path) -> list[str]:
    import zstandard

    with path.open("rb") as f, zstandard.ZstdDecompressor().stream_reader(f) as r:
        return r.read().decode().splitlines()


def test_tiktoken_native_convention(corpus: tuple[list[list[str]], list[Path]], tmp_path: Path) -> None:
    files, paths = corpus
    s = tokshuf.shuffle(paths, tmp_path / "c", tmp_path / "o", "tiktoken:r50k_base", num_threads=2)
    assert s["special_tokens"] == {"bos": None, "eot": 50256, "pad": 50256}
    enc = tiktoken_encoding("r50k_base")
    assert Counter(read_contexts(tmp_path / "o")) == oracle(files, enc.encode_ordinary, 50256, 50256)
    samples = open_lm_samples(tmp_path / "o" / "manifest.jsonl")
    assert len(samples) == s["contexts"]
    assert all(len(x) == SEQLEN for x in samples)


def test_hf_tokenizer_json_with_dclm_ids(corpus: tuple[list[list[str]], list[Path]], tmp_path: Path) -> None:
    import tokenizers

    files, paths = corpus
    s = tokshuf.shuffle(
        paths, tmp_path / "c", tmp_path / "o", str(GPT2), special_tokens="dclm", num_threads=2
    )
    assert s["special_tokens"] == {"bos": None, "eot": 0, "pad": 50256}
    assert not s["warnings"], "every DCLM id is inside GPT-2's vocabulary"
    hf = tokenizers.Tokenizer.from_file(str(GPT2 / "tokenizer.json"))

    def encode(text: str) -> list[int]:
        ids: list[int] = hf.encode(text, add_special_tokens=False).ids
        return ids

    assert Counter(read_contexts(tmp_path / "o")) == oracle(files, encode, 0, 50256)


def test_bos_and_explicit_ids(corpus: tuple[list[list[str]], list[Path]], tmp_path: Path) -> None:
    files, paths = corpus
    tokshuf.shuffle(
        paths,
        tmp_path / "c",
        tmp_path / "o",
        "tiktoken:r50k_base",
        bos_token_id=50256,
        eos_token_id=50256,
        pad_token_id=0,
    )
    enc = tiktoken_encoding("r50k_base")
    assert Counter(read_contexts(tmp_path / "o")) == oracle(files, enc.encode_ordinary, 50256, 0, bos=50256)


def _shards(out: Path) -> dict[str, bytes]:
    return {
        p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.name.startswith(("shard_", "manifest"))
    }


def test_a_tokenizer_object_or_path_gives_the_shards_of_its_spec(
    corpus: tuple[list[list[str]], list[Path]], tmp_path: Path
) -> None:
    _, paths = corpus
    opts: dict[str, Any] = {"context_length": 257, "num_local_cells": 4, "num_threads": 2, "summary": False}
    tokshuf.shuffle(paths, tmp_path / "c-spec", tmp_path / "spec", str(GPT2), **opts)
    tokshuf.shuffle(paths, tmp_path / "c-path", tmp_path / "path", GPT2, **opts)
    tokshuf.shuffle(paths, tmp_path / "c-obj", tmp_path / "obj", tokshuf.Tokenizer(GPT2), **opts)
    expected = _shards(tmp_path / "spec")
    assert len(expected) > 1
    assert _shards(tmp_path / "path") == expected
    assert _shards(tmp_path / "obj") == expected


def test_a_tokenizer_objects_end_of_text_id_is_the_native_eot(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "a.jsonl", [{"text": "hello world"}] * 20)
    opts: dict[str, Any] = {"context_length": 16, "num_local_cells": 2, "summary": False}
    a = tokshuf.shuffle(data, tmp_path / "c-a", tmp_path / "a", "byte", eos_token_id=7, **opts)
    b = tokshuf.shuffle(
        data, tmp_path / "c-b", tmp_path / "b", tokshuf.Tokenizer("byte", eos_token_id=7), **opts
    )
    assert a["special_tokens"] == b["special_tokens"] == {"bos": None, "eot": 7, "pad": 7}
    assert _shards(tmp_path / "a") == _shards(tmp_path / "b")


def test_a_tokenizer_built_in_memory_gives_the_shards_of_its_file(
    corpus: tuple[list[list[str]], list[Path]], tmp_path: Path
) -> None:
    # The built tokenizer itself is handed to the workers (as preprocess does), so one built in
    # memory works and writes what its tokenizer.json writes.
    import tokenizers

    _, paths = corpus
    opts: dict[str, Any] = {"context_length": 257, "num_local_cells": 4, "num_threads": 2, "summary": False}
    tokshuf.shuffle(paths, tmp_path / "c-file", tmp_path / "file", GPT2 / "tokenizer.json", **opts)
    hf = tokenizers.Tokenizer.from_file(str(GPT2 / "tokenizer.json"))
    for i, tok in enumerate((hf, tokshuf.Tokenizer(hf))):
        s = tokshuf.shuffle(paths, tmp_path / f"c-{i}", tmp_path / f"mem{i}", tok, **opts)
        assert s["tokenizer"]["spec"] == "tokenizers.Tokenizer"
        assert _shards(tmp_path / f"mem{i}") == _shards(tmp_path / "file")
    with pytest.raises(TypeError, match="cannot make a tokenizer from int"):
        tokshuf.shuffle(paths, tmp_path / "c", tmp_path / "o", 5)
