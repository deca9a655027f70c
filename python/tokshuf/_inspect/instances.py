"""OLMo-style instances (:mod:`tokshuf.instances`): how full they are and which documents fill them.

Given a dataset, the summary file ``tokshuf instances`` writes
(``instances-STRATEGY-FINGERPRINT_summary.json``, which records how to open the dataset again),
or the index's cache entry beside such a file. Everything comes from the index arrays and the
documents' spans, except the interleaved strategy's tokens: every instance is read, since the
special tokens dropped from its documents decide how full it is.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from tokshuf._inspect._report import HIDDEN, Report
from tokshuf._inspect._stats import LengthStats, length_stats
from tokshuf.errors import ConfigError

__all__ = ["SUMMARY_GLOB", "InstancesReport", "inspect_instances", "is_cache_entry"]

#: The summary files of ``tokshuf instances``.
SUMMARY_GLOB = "instances-*_summary.json"
#: Cache entries of the strategies that build an index (concatenate-and-chunk needs none).
_ENTRIES = ("padded", "packed", "interleaved", "vsl")


@dataclasses.dataclass(frozen=True)
class InstancesReport(Report):
    path: str
    #: ``fsl``, ``padded``, ``packed``, ``interleaved`` or ``vsl``.
    strategy: str
    #: The strategy's parameters that shape the instances (beyond ``sequence_length``).
    options: dict[str, Any]
    #: Tokens per instance (the maximum, for ``vsl``).
    sequence_length: int
    sources: int
    source_tokens: int
    #: Documents in the sources (from the same boundaries as the instances), and those longer than
    #: ``sequence_length`` (truncated, fragmented, split or cut, as the strategy does).
    documents: int
    long_documents: int
    instances: int
    #: Data tokens in the instances, the room they take (instances x sequence_length; for ``vsl``
    #: each instance's own length) and the padding that fills the rest.
    tokens: int
    capacity: int
    padding_tokens: int
    #: tokens / capacity and padding_tokens / capacity (0 without instances).
    efficiency: float
    padding_fraction: float
    #: tokens / source_tokens: what is left after truncation, dropped remainders, pieces below
    #: the minimum length (for ``interleaved``, special tokens are dropped and BOS/EOS added).
    data_fraction: float
    #: Documents (or pieces of one) per instance.
    documents_per_instance: LengthStats
    #: Tokens each document contributes to an instance (for ``interleaved``, at most
    #: ``sequence_length / docs_per_instance``, special tokens included).
    document_lengths: LengthStats
    #: ``vsl``: instances per bucket length.
    instances_per_bucket: dict[int, int] | None
    fingerprint: str
    #: The index's cache entry (``None`` for ``fsl``).
    cache: str | None
    kind: str = "instances"
    #: Tokens / room of every instance (for the packing-efficiency plot).
    fill: npt.NDArray[np.float64] | None = dataclasses.field(
        default=None, repr=False, compare=False, metadata=HIDDEN
    )


@dataclasses.dataclass(frozen=True)
class _Layout:
    """Per instance: data tokens, room, documents; per document in an instance: its tokens."""

    tokens: npt.NDArray[np.int64]
    room: npt.NDArray[np.int64]
    documents: npt.NDArray[np.int64]
    pieces: npt.NDArray[np.int64]


def _lengths(spans: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
    a = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
    return a[:, 1] - a[:, 0]


def _fsl(ds: Any) -> _Layout:
    """Windows of ``seq`` tokens from each file's start; a document touching several windows is a
    piece of each."""
    seq = ds.sequence_length
    docs, pieces = [], []
    for (_, spans), n in zip(ds._documents(), ds.instances_per_file, strict=True):
        a = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
        s, e = a[:, 0], np.minimum(a[:, 1], n * seq)  # a file's remainder is in no window
        s, e = s[e > s], e[e > s]
        first, last = s // seq, (e - 1) // seq
        reps = last - first + 1
        within = np.arange(int(reps.sum())) - np.repeat(np.cumsum(reps) - reps, reps)
        window = np.repeat(first, reps) + within
        end = np.minimum(np.repeat(e, reps), (window + 1) * seq)
        pieces.append(end - np.maximum(np.repeat(s, reps), window * seq))
        docs.append(np.bincount(window, minlength=n))
    total = len(ds)
    full = np.full(total, seq, np.int64)
    return _Layout(full, full, _cat(docs), _cat(pieces))


def _one_per_instance(lengths: npt.NDArray[np.int64], room: npt.NDArray[np.int64]) -> _Layout:
    return _Layout(lengths, room, np.ones(len(lengths), np.int64), lengths)


def _packed(ds: Any) -> _Layout:
    offsets = np.asarray(ds.instance_offsets, dtype=np.int64)
    pieces = _lengths(ds.documents)[np.asarray(ds.documents_by_instance, dtype=np.int64)]
    ends = np.concatenate([[0], np.cumsum(pieces)])
    tokens = ends[offsets[1:]] - ends[offsets[:-1]]
    return _Layout(tokens, np.full(len(tokens), ds.sequence_length, np.int64), np.diff(offsets), pieces)


def _interleaved(ds: Any) -> _Layout:
    seq, k = ds.sequence_length, ds.docs_per_instance
    base = _lengths(ds._base)
    exempt = np.minimum(base[np.asarray(ds._exempt, dtype=np.int64)], seq)
    n = len(ds) - len(exempt)
    mixed = np.minimum(base[np.asarray(ds._order, dtype=np.int64)[: n * k]], seq // k)
    documents = np.concatenate([np.ones(len(exempt), np.int64), np.full(n, k, np.int64)])
    tokens = ds.instance_token_counts()
    return _Layout(tokens, np.full(len(tokens), seq, np.int64), documents, np.concatenate([exempt, mixed]))


def _layout(strategy: str, ds: Any) -> _Layout:
    seq = ds.sequence_length
    if strategy == "fsl":
        return _fsl(ds)
    if strategy == "packed":
        return _packed(ds)
    if strategy == "interleaved":
        return _interleaved(ds)
    lengths = _lengths(ds.spans)
    if strategy == "padded":
        lengths = np.minimum(lengths, seq)
        return _one_per_instance(lengths, np.full(len(lengths), seq, np.int64))
    return _one_per_instance(lengths, lengths)  # vsl: each instance as long as its bucket


def _cat(parts: list[npt.NDArray[Any]]) -> npt.NDArray[np.int64]:
    return np.concatenate(parts).astype(np.int64) if parts else np.empty(0, np.int64)


#: Parameters of each strategy shown beside sequence_length.
_OPTIONS = {
    "fsl": ("max_target_sequence_length",),
    "padded": ("long_doc_strategy",),
    "packed": ("long_doc_strategy", "source_group_size"),
    "interleaved": ("seed", "docs_per_instance", "chunks_per_doc"),
    "vsl": ("min_sequence_length",),
}


def _ratio(a: int, b: int) -> float:
    return a / b if b else 0.0


def report(dataset: Any, path: str) -> InstancesReport:
    """The report on an open instance dataset."""
    from tokshuf.instances._named import strategy_of

    strategy = strategy_of(dataset)
    seq = dataset.sequence_length
    docs = _cat([_lengths(s) for s in dataset._global_spans()])
    lay = _layout(strategy, dataset)
    tokens, capacity = int(lay.tokens.sum()), int(lay.room.sum())
    source_tokens = sum(s.num_tokens for s in dataset.sources)
    buckets = None
    if strategy == "vsl":
        buckets = {length: len(ids) for length, ids in dataset.buckets}
    return InstancesReport(
        path=path,
        strategy=strategy,
        options={k: getattr(dataset, k) for k in _OPTIONS[strategy]},
        sequence_length=seq,
        sources=len(dataset.sources),
        source_tokens=source_tokens,
        documents=len(docs),
        long_documents=int((docs > seq).sum()),
        instances=len(dataset),
        tokens=tokens,
        capacity=capacity,
        padding_tokens=capacity - tokens,
        efficiency=_ratio(tokens, capacity),
        padding_fraction=_ratio(capacity - tokens, capacity),
        data_fraction=_ratio(tokens, source_tokens),
        documents_per_instance=length_stats(lay.documents),
        document_lengths=length_stats(lay.pieces),
        instances_per_bucket=buckets,
        fingerprint=dataset.fingerprint,
        cache=None if dataset.cache_path is None else str(dataset.cache_path),
        fill=lay.tokens / np.maximum(lay.room, 1),
    )


def is_cache_entry(path: Path) -> bool:
    """Whether ``path`` is the index cache entry of an instance strategy (``packed-<key>/``)."""
    name, _, key = path.name.partition("-")
    return name in _ENTRIES and len(key) == 32 and (path / "meta.json").is_file()


def _summary_of_entry(entry: Path) -> Path:
    """The ``tokshuf instances`` summary file beside ``entry`` that names it (the newest one)."""
    found = []
    for p in entry.parent.glob(SUMMARY_GLOB):
        try:
            cache = json.loads(p.read_text()).get("cache")
        except (OSError, ValueError):
            continue
        if cache is not None and Path(cache).resolve() == entry.resolve():
            found.append(p)
    if not found:
        raise ConfigError(
            f"{entry} is an instance index, but no {SUMMARY_GLOB} beside it names it, so its data "
            "files are unknown: build it with `tokshuf instances` (which writes that file), or "
            "inspect the dataset from Python: tokshuf.inspect(dataset)"
        )
    return max(found, key=lambda p: p.stat().st_mtime_ns)


def inspect_instances(path: Any) -> InstancesReport:
    """Report on an instance dataset, a ``tokshuf instances`` summary file or its cache entry."""
    from tokshuf.instances._base import InstanceDataset
    from tokshuf.instances._named import open_strategy

    if isinstance(path, InstanceDataset):
        return report(path, f"<{type(path).__name__}>")
    p = Path(path)
    summary_file = _summary_of_entry(p) if p.is_dir() else p
    try:
        summary = json.loads(summary_file.read_text())
        strategy, paths, arguments = summary["strategy"], summary["paths"], summary["arguments"]
    except (ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"{summary_file} is not a `tokshuf instances` summary: {e}") from e
    return report(open_strategy(strategy, paths, arguments), os.fspath(path))
