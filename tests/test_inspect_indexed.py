"""``tokshuf inspect`` of .bin/.idx datasets and OLMo token files: every number recomputed here
from the files (an independent .idx parser, numpy over the .bin) or from the written tokens."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import write_jsonl
from megatron_idx import parse_idx

import tokshuf
from tokshuf import IndexedDatasetWriter, olmo_tokens
from tokshuf._inspect import detect
from tokshuf._inspect.indexed import inspect_indexed
from tokshuf._inspect.olmo import inspect_token_file
from tokshuf.cli import main
from tokshuf.errors import ConfigError

QS = (0.01, 0.1, 0.5, 0.9, 0.99)


def _write(prefix: Path, seed: int = 0) -> list[list[np.ndarray]]:
    """Documents of 0-3 sequences (so some are empty), random lengths and ids."""
    rng = np.random.default_rng(seed)
    docs = []
    with IndexedDatasetWriter(prefix, dtype=np.uint16) as w:
        for _ in range(200):
            seqs = [
                rng.integers(0, 50, size=int(rng.integers(1, 90))) for _ in range(int(rng.integers(0, 4)))
            ]
            w.add_document(np.concatenate(seqs) if seqs else np.empty(0, np.int64), [len(s) for s in seqs])
            docs.append(seqs)
    return docs


def _expected(prefix: Path) -> dict[str, Any]:
    """From the files alone: the spec's .idx layout and the .bin as an array."""
    idx = parse_idx(str(prefix) + ".idx")
    lengths, docs = idx["lengths"].astype(np.int64), idx["document_indices"]
    doc_lengths = np.array([lengths[docs[i] : docs[i + 1]].sum() for i in range(len(docs) - 1)])
    tokens = np.fromfile(str(prefix) + ".bin", dtype=idx["dtype"])
    counts = Counter(tokens.tolist())
    return {
        "dtype": idx["dtype"].name,
        "documents": len(docs) - 1,
        "sequences": len(lengths),
        "tokens": len(tokens),
        "doc_lengths": doc_lengths,
        "top": sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:10],
        "distinct": len(counts),
    }


def test_indexed_numbers_match_the_files(tmp_path: Path) -> None:
    prefix = tmp_path / "ds"
    written = _write(prefix)
    exp = _expected(prefix)
    r = inspect_indexed(prefix)
    assert (r.kind, r.dtype, r.documents, r.sequences, r.tokens) == (
        "indexed",
        exp["dtype"],
        exp["documents"],
        exp["sequences"],
        exp["tokens"],
    )
    assert r.empty_documents == sum(1 for d in written if not d) == int((exp["doc_lengths"] == 0).sum())
    assert r.empty_documents > 0
    lengths = exp["doc_lengths"]
    s = r.document_lengths
    assert (s.count, s.total, s.min, s.max) == (len(lengths), lengths.sum(), lengths.min(), lengths.max())
    assert s.mean == pytest.approx(lengths.mean())
    for q in QS:
        assert s.quantiles[f"p{q * 100:g}"] == pytest.approx(np.quantile(lengths, q))
    assert r.ids is not None
    assert r.ids.top == exp["top"]
    assert r.ids.distinct == exp["distinct"]
    assert r.bin_bytes == (prefix.with_suffix(".bin")).stat().st_size


def test_indexed_from_either_file_and_without_a_scan(tmp_path: Path) -> None:
    prefix = tmp_path / "ds"
    _write(prefix)
    for given in (prefix, tmp_path / "ds.bin", tmp_path / "ds.idx"):
        assert detect(given) == "indexed"
        assert tokshuf.inspect(given).documents == 200
    assert inspect_indexed(prefix, scan=False).ids is None
    # By name where the name tells (a bare prefix in a store is looked up: tests/test_inspect_errors.py).
    assert detect("s3://bucket/corpus_text_document.idx") == "indexed"  # read through local copies
    assert detect("s3://bucket/shards/manifest.jsonl") == "shards"
    assert detect("s3://bucket/shards/") == "shards"


def test_excerpt_decodes_with_the_byte_tokenizer_and_tiktoken(tmp_path: Path) -> None:
    texts = ["héllo wörld, " * k for k in (1, 3, 0, 9)]
    src = write_jsonl(tmp_path / "in.jsonl", [{"text": t} for t in texts])
    for spec in ("byte", "tiktoken:gpt2"):
        out = tmp_path / spec.replace(":", "_")
        tokshuf.preprocess(src, out, spec, progress="none", summary=False)
        prefix = f"{out}_text_document"
        r = inspect_indexed(prefix, doc=1, tokenizer=spec, excerpt_tokens=10_000)
        assert r.excerpt is not None
        assert r.excerpt.text == texts[1]
        assert r.excerpt.length == len(tokshuf.Tokenizer(spec).encode(texts[1]))
        short = inspect_indexed(prefix, doc=3, tokenizer=spec, excerpt_tokens=5)
        assert short.excerpt is not None
        assert short.excerpt.ids == tokshuf.Tokenizer(spec).encode(texts[3])[:5]
    no_tok = inspect_indexed(prefix, doc=0)
    assert no_tok.excerpt is not None
    assert no_tok.excerpt.text is None
    assert "--tokenizer" in (no_tok.excerpt.note or "")
    with pytest.raises(ConfigError, match=r"--doc 4 does not exist.*4 documents \(0\.\.3\)"):
        inspect_indexed(prefix, doc=4)


def test_cli_json_and_text(tmp_path: Path, capsys: Any) -> None:
    prefix = tmp_path / "ds"
    _write(prefix)
    exp = _expected(prefix)
    assert main(["inspect", str(prefix) + ".idx", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["kind"], out["documents"], out["tokens"]) == ("indexed", exp["documents"], exp["tokens"])
    assert [tuple(x) for x in out["ids"]["top"]] == exp["top"]
    assert "lengths" not in out  # the plot data stays out of JSON
    assert main(["inspect", str(prefix)]) == 0
    text = capsys.readouterr().out
    assert f"{exp['documents']:,} documents" in text
    assert f"{exp['tokens']:,} tokens" in text
    assert main(["inspect", str(tmp_path / "nothing")]) == 1
    assert "cannot tell what" in capsys.readouterr().err


def test_cli_summary_none_writes_no_file(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    prefix = tmp_path / "ds"
    _write(prefix)
    monkeypatch.chdir(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["inspect", str(prefix), "--json", "--summary", "none"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    capsys.readouterr()
    assert main(["inspect", str(prefix), "--json", "--summary", "report.json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert json.loads((tmp_path / "report.json").read_text()) == printed


# -- OLMo token files --------------------------------------------------------------------------


def _olmo_docs(seed: int = 1) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    eos = 0
    return [np.append(rng.integers(1, 70000, size=int(rng.integers(0, 120))), eos) for _ in range(150)]


def test_olmo_file_with_metadata_infers_its_dtype(tmp_path: Path) -> None:
    docs = _olmo_docs()
    path = tmp_path / "part-0.npy"
    olmo_tokens.write_tokens(path, docs, np.uint32, metadata=True)
    assert detect(path) == "olmo"
    r = tokshuf.inspect(path)
    flat = np.fromfile(path, dtype=np.uint32)
    lengths = np.array([len(d) for d in docs])
    assert (r.kind, r.dtype, r.boundaries) == ("olmo", "uint32", "metadata")
    assert (r.documents, r.tokens, r.tokens_outside_documents) == (len(docs), len(flat), 0)
    assert r.document_lengths.quantiles["p50"] == pytest.approx(np.quantile(lengths, 0.5))
    assert r.document_lengths.max == lengths.max()
    counts = Counter(flat.tolist())
    assert r.ids is not None
    assert r.ids.top == sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
    assert r.ids.top[0] == (0, len(docs))  # the EOS of every document


def test_olmo_file_scanned_for_eos(tmp_path: Path) -> None:
    docs = _olmo_docs(2)
    path = tmp_path / "a.npy"
    olmo_tokens.write_tokens(path, [*docs, np.array([5, 6, 7])], np.uint32)  # a tail with no EOS
    with pytest.raises(ConfigError, match="cannot tell the token dtype"):
        tokshuf.inspect(path)
    r = inspect_token_file(path, dtype="uint32", eos_token_id=0, doc=2)
    assert (r.boundaries, r.documents, r.tokens_outside_documents) == ("eos", len(docs), 3)
    assert r.empty_documents == 0
    assert r.excerpt is not None
    assert r.excerpt.ids == docs[2][:64].tolist()
