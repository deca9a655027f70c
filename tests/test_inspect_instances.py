"""``tokshuf inspect`` of OLMo-style instances: every number recomputed from the token lists with
the independent model of the strategies (``olmo_model``), and the command line's way in through
``tokshuf instances``'s summary file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from instance_data import EOS, PAD, common, write_files
from olmo_model import eos_documents, fsl_windows, interleave, limit, obfd, vsl_pieces

import tokshuf
from tokshuf._inspect import detect
from tokshuf._inspect.instances import InstancesReport
from tokshuf._inspect.render import render
from tokshuf.cli import main
from tokshuf.errors import ConfigError
from tokshuf.instances import (
    FSLDataset,
    InterleavedFSLDataset,
    PackedFSLDataset,
    PaddedFSLDataset,
    VSLDataset,
)

SEQ = 16
TAIL = [5] * (2 * SEQ)  # tokens after the last EOS, in no document: one window at least


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path], list[list[int]]]:
    rng = np.random.default_rng(4)
    corpus = [
        [rng.integers(2, 41, size=int(n)).tolist() for n in rng.integers(0, 3 * SEQ, size=docs)]
        for docs in (14, 1, 9)
    ]
    root = tmp_path_factory.mktemp("inst")
    paths, tokens = write_files(root, corpus, tail=TAIL)
    return root, paths, tokens


def _documents(tokens: list[list[int]]) -> list[list[tuple[int, int]]]:
    """Per file, the global spans of its documents."""
    out, base = [], 0
    for toks in tokens:
        out.append([(base + s, base + e) for s, e in eos_documents(toks, EOS)])
        base += len(toks)
    return out


def _check_stats(stats: Any, values: list[int]) -> None:
    a = np.array(values, dtype=np.int64)
    assert (stats.count, stats.total, stats.min, stats.max) == (len(a), int(a.sum()), a.min(), a.max())
    assert stats.empty == int((a == 0).sum())
    assert stats.mean == pytest.approx(a.mean())
    for q in (0.01, 0.1, 0.5, 0.9, 0.99):
        assert stats.quantiles[f"p{q * 100:g}"] == pytest.approx(np.quantile(a, q))


def _check(
    r: InstancesReport,
    tokens: list[list[int]],
    *,
    per_instance: list[int],
    room: list[int],
    documents: list[int],
    pieces: list[int],
    limit_len: int = SEQ,
) -> None:
    """Compare a report with the model's instances: data tokens and room per instance, documents
    per instance and the tokens each document contributes."""
    docs = [e - s for f in _documents(tokens) for s, e in f]
    source_tokens = sum(len(t) for t in tokens)
    assert (r.sources, r.source_tokens, r.documents) == (len(tokens), source_tokens, len(docs))
    assert r.long_documents == sum(n > limit_len for n in docs)
    assert r.instances == len(per_instance)
    assert (r.tokens, r.capacity) == (sum(per_instance), sum(room))
    assert r.padding_tokens == sum(room) - sum(per_instance)
    assert r.efficiency == pytest.approx(sum(per_instance) / sum(room))
    assert r.padding_fraction == pytest.approx(1 - sum(per_instance) / sum(room))
    assert r.data_fraction == pytest.approx(sum(per_instance) / source_tokens)
    _check_stats(r.documents_per_instance, documents)
    _check_stats(r.document_lengths, pieces)
    assert r.fill is not None
    fill = sorted(t / n for t, n in zip(per_instance, room, strict=True))
    assert sorted(r.fill.tolist()) == pytest.approx(fill)
    out = r.to_dict()
    json.dumps(out)  # plain JSON
    assert "fill" not in out


def test_fsl(data: tuple[Path, list[Path], list[list[int]]]) -> None:
    root, paths, tokens = data
    ds = FSLDataset(*paths, sequence_length=SEQ, **common(root / "w"))
    r = tokshuf.inspect(ds)
    assert isinstance(r, InstancesReport)
    assert (r.kind, r.strategy, r.path, r.cache) == ("instances", "fsl", "<FSLDataset>", None)
    spans = [d for f in _documents(tokens) for d in f]
    windows = fsl_windows([len(t) for t in tokens], SEQ)
    overlaps = [[min(e, we) - max(s, ws) for s, e in spans if min(e, we) > max(s, ws)] for ws, we in windows]
    assert any(len(o) == 0 for o in overlaps)  # a window of the tail alone: no document in it
    _check(
        r,
        tokens,
        per_instance=[SEQ] * len(windows),
        room=[SEQ] * len(windows),
        documents=[len(o) for o in overlaps],
        pieces=[n for o in overlaps for n in o],
    )
    assert r.efficiency == 1.0


@pytest.mark.parametrize("strategy", ["truncate", "fragment"])
def test_padded(data: tuple[Path, list[Path], list[list[int]]], strategy: str) -> None:
    root, paths, tokens = data
    ds = PaddedFSLDataset(*paths, sequence_length=SEQ, long_doc_strategy=strategy, **common(root / "w"))
    r = tokshuf.inspect(ds)
    lengths = [e - s for f in _documents(tokens) for s, e in limit(f, SEQ, strategy)]
    _check(
        r,
        tokens,
        per_instance=lengths,
        room=[SEQ] * len(lengths),
        documents=[1] * len(lengths),
        pieces=lengths,
    )
    assert r.options == {"long_doc_strategy": strategy}


def test_packed(data: tuple[Path, list[Path], list[list[int]]]) -> None:
    root, paths, tokens = data
    ds = PackedFSLDataset(*paths, sequence_length=SEQ, **common(root / "w"))
    r = tokshuf.inspect(ds)
    bins: list[list[int]] = []
    for f in _documents(tokens):
        lengths = [e - s for s, e in limit(f, SEQ, "truncate")]
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])  # obfd's positions
        bins += [[lengths[order[t]] for t in b] for b in obfd(lengths, SEQ)]
    _check(
        r,
        tokens,
        per_instance=[sum(b) for b in bins],
        room=[SEQ] * len(bins),
        documents=[len(b) for b in bins],
        pieces=[n for b in bins for n in b],
    )
    assert r.padding_fraction > 0


def test_interleaved(data: tuple[Path, list[Path], list[list[int]]]) -> None:
    root, paths, tokens = data
    k, chunks, seed = 2, 2, 9
    ds = InterleavedFSLDataset(
        *paths,
        sequence_length=SEQ,
        seed=seed,
        docs_per_instance=k,
        chunks_per_doc=chunks,
        **common(root / "w"),
    )
    r = tokshuf.inspect(ds)
    flat = np.array([t for f in tokens for t in f], dtype=np.int64)
    base = [(s, min(e, s + SEQ)) for f in _documents(tokens) for s, e in f]
    order = np.random.default_rng(seed).permutation(len(base))
    groups = [order[j * k : (j + 1) * k] for j in range(len(order) // k)]
    rows = [
        interleave([flat[base[i][0] : base[i][1]] for i in g], SEQ, chunks, PAD, EOS, None) for g in groups
    ]
    _check(
        r,
        tokens,
        per_instance=[int((row != PAD).sum()) for row in rows],
        room=[SEQ] * len(rows),
        documents=[k] * len(rows),
        pieces=[min(base[i][1] - base[i][0], SEQ // k) for g in groups for i in g],
    )


def test_vsl(data: tuple[Path, list[Path], list[list[int]]]) -> None:
    root, paths, tokens = data
    ds = VSLDataset(*paths, max_sequence_length=SEQ, min_sequence_length=2, **common(root / "w"))
    r = tokshuf.inspect(ds)
    pieces = [e - s for s, e in vsl_pieces([d for f in _documents(tokens) for d in f], 2, SEQ)]
    _check(r, tokens, per_instance=pieces, room=pieces, documents=[1] * len(pieces), pieces=pieces)
    assert r.instances_per_bucket == {n: pieces.count(n) for n in (2, 4, 8, 16)}
    assert r.efficiency == 1.0
    assert "instances per bucket: 2: " in render(r)


def test_through_the_instances_summary_file(
    data: tuple[Path, list[Path], list[list[int]]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, paths, _ = data
    work = tmp_path / "work"
    args = ["instances", *map(str, paths), "--strategy", "packed", "--sequence-length", str(SEQ)]
    args += ["--eos-token-id", str(EOS), "--pad-token-id", str(PAD), "--dtype", "uint16"]
    args += ["--boundaries", "eos", "--work-dir", str(work), "--json"]
    assert main(args) == 0
    built = json.loads(capsys.readouterr().out)
    summary_file = work / "instances" / f"instances-packed-{built['fingerprint']}_summary.json"
    entry = Path(built["cache"])
    assert detect(summary_file) == detect(entry) == "instances"

    ds = PackedFSLDataset(*paths, sequence_length=SEQ, **common(work))
    expected = tokshuf.inspect(ds).to_dict()
    for given in (summary_file, entry):
        assert main(["inspect", str(given), "--json"]) == 0
        assert json.loads(capsys.readouterr().out) == {**expected, "path": str(given)}

    assert main(["inspect", str(summary_file)]) == 0
    text = capsys.readouterr().out
    assert "OLMo-style instances, packed" in text
    assert f"{len(ds):,} instances" in text
    assert f"index: {entry}" in text

    # --summary writes the JSON report too.
    assert main(["inspect", str(summary_file), "--summary", str(tmp_path / "r.json")]) == 0
    capsys.readouterr()
    assert json.loads((tmp_path / "r.json").read_text()) == {**expected, "path": str(summary_file)}


def test_an_index_without_its_summary_file(
    data: tuple[Path, list[Path], list[list[int]]], tmp_path: Path
) -> None:
    _, paths, _ = data
    ds = PaddedFSLDataset(*paths, sequence_length=SEQ, **common(tmp_path / "w"))
    assert ds.cache_path is not None
    with pytest.raises(ConfigError, match=r"no instances-\*_summary\.json beside it"):
        tokshuf.inspect(ds.cache_path)
