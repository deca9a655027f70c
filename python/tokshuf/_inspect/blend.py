"""A Nanoset or blend: samples, tokens and epochs per source and split, and what one training step
reads (which source, which documents)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from tokshuf._inspect._report import HIDDEN, Report
from tokshuf._inspect.decode import decode
from tokshuf._inspect.indexed import document_lengths
from tokshuf._inspect.yaml_config import load_blend_yaml
from tokshuf.errors import ConfigError
from tokshuf.indexed import IndexedDataset
from tokshuf.nanoset import BlendedNanoset, Nanoset, NanosetConfig, StagedNanoset, build_nanosets

__all__ = [
    "BlendReport",
    "Piece",
    "SampleOrigin",
    "SourceReport",
    "SourceShare",
    "SplitReport",
    "StageReport",
    "StepReport",
    "inspect_blend",
]

SPLITS = ("train", "valid", "test")


@dataclasses.dataclass(frozen=True)
class SourceReport:
    name: str
    #: The normalized weight of the config (``None`` in an unweighted blend: sizes decide).
    target_weight: float | None
    samples: int
    #: ``samples / split samples``: the realized mixture.
    share: float
    #: ``samples x sequence_length`` (the extra label token not counted).
    tokens: int
    #: Passes over this source's split documents that the samples need.
    epochs: int
    #: Documents (Megatron's unit: sequences of the ``.idx``) and tokens in the split's range.
    documents: int
    document_tokens: int


@dataclasses.dataclass(frozen=True)
class SplitReport:
    split: str
    samples: int
    tokens: int
    sources: list[SourceReport]


@dataclasses.dataclass(frozen=True)
class SourceShare:
    name: str
    target: float
    share: float
    samples: int


@dataclasses.dataclass(frozen=True)
class StageReport:
    """One stage of a staged run: its steps and samples, and per source of the run its target
    (the stage's normalized weight) and realized share of the stage's samples."""

    name: str
    start_step: int
    first_sample: int
    samples: int
    sources: list[SourceShare]


@dataclasses.dataclass(frozen=True)
class Piece:
    """``length`` tokens of document ``document`` from token ``offset``."""

    document: int
    offset: int
    length: int


@dataclasses.dataclass(frozen=True)
class SampleOrigin:
    #: Index in the split dataset (what the sampler hands out).
    sample: int
    dp_rank: int
    source: int
    name: str
    #: Index in that source's Nanoset.
    source_sample: int
    pieces: list[Piece]
    text: str | None


@dataclasses.dataclass(frozen=True)
class StepReport:
    split: str
    step: int
    batch_size: int
    dp_size: int
    #: ``None``: every rank's samples.
    dp_rank: int | None
    samples: list[SampleOrigin]
    note: str | None


@dataclasses.dataclass(frozen=True)
class BlendReport(Report):
    path: str
    data_path: Any
    sequence_length: int
    split: str
    seed: int
    index_scheme: str
    splits: list[SplitReport]
    step: StepReport | None
    #: The global batch size the YAML implies (or was given), for the mixture plot's x axis.
    batch_size: int | None
    kind: str = "blend"
    #: The stages of a staged run (nanotron's data_stages), in order; ``None`` for one blend.
    stages: list[StageReport] | None = None
    #: Source index of every train sample, and tokens per document of every source, for plots.
    train_sources: npt.NDArray[Any] | None = dataclasses.field(
        default=None, repr=False, compare=False, metadata=HIDDEN
    )
    lengths: dict[str, npt.NDArray[np.int64]] | None = dataclasses.field(
        default=None, repr=False, compare=False, metadata=HIDDEN
    )


def _parts(ds: Nanoset | BlendedNanoset) -> tuple[list[Nanoset | None], npt.NDArray[Any] | None]:
    if isinstance(ds, BlendedNanoset):
        return ds.datasets, ds.dataset_index
    return [ds], None


def _pieces(ds: Nanoset, s: int, seq_lengths: npt.NDArray[Any]) -> list[Piece]:
    """The documents Megatron's indices put in sample ``s`` (as GPTDataset's
    ``_query_document_sample_shuffle_indices`` reads them)."""
    extra = int(ds.config.add_extra_token_to_sequence)
    j = int(ds.shuffle_index[s])
    (b, bo), (e, eo) = ds.sample_index[j], ds.sample_index[j + 1]
    di = ds.document_index
    b, bo, e, eo = int(b), int(bo), int(e), int(eo)
    if b == e:
        out = [Piece(int(di[b]), bo, eo + extra - bo)]
    else:
        out = [Piece(int(di[b]), bo, int(seq_lengths[di[b]]) - bo)]
        out += [Piece(int(di[i]), 0, int(seq_lengths[di[i]])) for i in range(b + 1, e)]
        out.append(Piece(int(di[e]), 0, eo + extra))
    return [p for p in out if p.length > 0]


def _step(
    ds: Nanoset | BlendedNanoset,
    split: str,
    step: int,
    batch_size: int,
    dp_rank: int | None,
    dp_size: int,
    tokenizer: str | None,
    excerpt_tokens: int,
) -> StepReport:
    if batch_size <= 0 or dp_size <= 0 or batch_size % dp_size:
        raise ConfigError(
            f"--batch-size {batch_size} must be a positive multiple of --dp-size {dp_size} "
            "(it is the global batch: every data-parallel rank reads batch_size / dp_size samples)"
        )
    if dp_rank is not None and not 0 <= dp_rank < dp_size:
        raise ConfigError(f"--dp-rank {dp_rank} must be in 0..{dp_size - 1} (--dp-size {dp_size})")
    if step < 0:
        raise ConfigError(f"--step {step} must be non-negative")
    end = (step + 1) * batch_size
    if end > len(ds):
        raise ConfigError(
            f"step {step} of batch size {batch_size} reads samples up to {end - 1}, "
            f"but the {split} split has {len(ds)} (last step: {len(ds) // batch_size - 1})"
        )
    # nanotron's sampler: rank r takes samples r, r + R, r + 2R, ... of the (already shuffled)
    # dataset, batch_size / R of them per step, so step N covers [N * B, (N + 1) * B).
    ranks = range(dp_size) if dp_rank is None else [dp_rank]
    ks = sorted(step * batch_size + j * dp_size + r for r in ranks for j in range(batch_size // dp_size))
    _, index = _parts(ds)
    lengths: dict[int, npt.NDArray[Any]] = {}
    samples = []
    note = None
    for k in ks:
        src = 0 if index is None else int(index[k])
        sub = ds if isinstance(ds, Nanoset) else ds.datasets[src]
        assert sub is not None
        s = k if isinstance(ds, Nanoset) else int(ds.dataset_sample_index[k])
        if src not in lengths:
            lengths[src] = IndexedDataset(sub.prefix, validate=False).sequence_lengths
        text = None
        if tokenizer is not None:
            ids = [int(t) for t in ds.get(k)[:excerpt_tokens]]
            text, note = decode(tokenizer, ids)
        samples.append(SampleOrigin(k, k % dp_size, src, sub.prefix, s, _pieces(sub, s, lengths[src]), text))
    return StepReport(split, step, batch_size, dp_size, dp_rank, samples, note)


def inspect_blend(
    config: NanosetConfig | str | os.PathLike[str],
    *,
    step: int | None = None,
    batch_size: int | None = None,
    dp_rank: int | None = None,
    dp_size: int = 1,
    split: str = "train",
    tokenizer: str | None = None,
    excerpt_tokens: int = 64,
    stage: int | str | None = None,
) -> BlendReport:
    """Build the datasets of ``config`` (a :class:`NanosetConfig`, or a nanotron / Megatron-LM
    YAML file) as training would, and report them; with ``step`` and ``batch_size``, the origin of
    every sample of that step (``dp_rank`` of ``dp_size``: only that rank's). A YAML with several
    ``data_stages`` is the whole staged run (``stage``: one stage alone), reported stage by stage."""
    if isinstance(config, NanosetConfig):
        cfg, path, hint = config, "<NanosetConfig>", None
    else:
        path = os.fspath(config)
        cfg, hint = load_blend_yaml(Path(path), stage=stage)
    if batch_size is None:
        batch_size = hint
    if split not in SPLITS:
        raise ConfigError(f"split must be one of {SPLITS}, got {split!r}")
    built = dict(zip(SPLITS, build_nanosets(cfg), strict=True))
    prefixes, weights = cfg.blend
    target = None if weights is None else [w / sum(weights) for w in weights]
    seq = cfg.sequence_length
    reports = []
    stage_reports = None
    for name, ds in built.items():
        if ds is None:
            continue
        parts, index = _parts(ds)
        names, goal = (ds.prefixes, ds.weights) if isinstance(ds, StagedNanoset) else (prefixes, target)
        drawn = [len(ds)] if index is None else np.bincount(index, minlength=len(parts)).tolist()
        sources = []
        for d, part in enumerate(parts):
            n = int(drawn[d])
            rng = part.index_range if part is not None else (0, 0)
            lengths = IndexedDataset(names[d], validate=False).sequence_lengths
            sources.append(
                SourceReport(
                    name=names[d],
                    target_weight=None if goal is None else goal[d],
                    samples=n,
                    share=n / len(ds) if len(ds) else 0.0,
                    tokens=n * seq,
                    epochs=0 if part is None else part.num_epochs,
                    documents=rng[1] - rng[0],
                    document_tokens=int(lengths[rng[0] : rng[1]].sum(dtype=np.int64)),
                )
            )
        reports.append(SplitReport(name, len(ds), len(ds) * seq, sources))
        if isinstance(ds, StagedNanoset):
            stage_reports = _stages(ds)
    step_report = None
    if step is not None:
        if batch_size is None:
            raise ConfigError("--step needs --batch-size (the global batch size, in samples)")
        ds = built[split]
        if ds is None:
            raise ConfigError(f"the {split} split is empty under split {cfg.split!r}")
        step_report = _step(ds, split, step, batch_size, dp_rank, dp_size, tokenizer, excerpt_tokens)
    train = built["train"]
    train_sources = None
    if train is not None:
        _, index = _parts(train)
        train_sources = np.zeros(len(train), np.int64) if index is None else np.asarray(index)
    return BlendReport(
        path=path,
        data_path=cfg.data_path,
        sequence_length=seq,
        split=cfg.split,
        seed=cfg.seed,
        index_scheme=cfg.index_scheme,
        splits=reports,
        step=step_report,
        batch_size=batch_size,
        train_sources=train_sources,
        lengths={p: document_lengths(IndexedDataset(p, validate=False)) for p in _all_prefixes(cfg)},
        stages=stage_reports,
    )


def _all_prefixes(cfg: NanosetConfig) -> list[str]:
    out = list(cfg.blend[0])
    for st in cfg.stages:
        out += [
            p
            for p in ([st.data_path] if isinstance(st.data_path, str) else list(st.data_path))
            if p not in out
        ]
    return out


def _stages(ds: StagedNanoset) -> list[StageReport]:
    out = []
    n = len(ds.prefixes)
    for st in ds.stages:
        idx = ds.dataset_index[st.first_sample : st.first_sample + st.samples]
        counts = np.bincount(idx, minlength=n) if len(idx) else np.zeros(n, np.int64)
        sources = [
            SourceShare(p, t, int(c) / st.samples if st.samples else 0.0, int(c))
            for p, t, c in zip(ds.prefixes, st.share(n), counts, strict=True)
        ]
        out.append(StageReport(st.name, st.start_step, st.first_sample, st.samples, sources))
    return out
