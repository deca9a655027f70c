"""Bamba-style construction: one config object → a ready ``torch`` DataLoader."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tokshuf._summaries import BatchOutput, TokenDtype
from tokshuf.errors import ConfigError
from tokshuf.stream.mix import MixPhase
from tokshuf.stream.sources import SubDataset
from tokshuf.stream.stream import TokenStream

__all__ = ["LoaderConfig", "build_dataloader", "build_stream"]


def _split(v: str | Sequence[Any] | None) -> list[str] | None:
    if v is None:
        return None
    if isinstance(v, str):
        return [s.strip() for s in v.split(",") if s.strip()]
    return [str(s) for s in v]


@dataclass
class LoaderConfig:
    """The settings of :func:`build_dataloader` (field names follow fms-fsdp's training config
    where they exist, so Bamba's documented config carries over: hence ``seq_length``,
    ``bos_token`` and ``eos_token`` here, which are ``sequence_length``, ``bos_token_id`` and
    ``eos_token_id`` everywhere else).

    ``data_path`` holds one directory per sub-dataset (``datasets``: their names, relative paths,
    as a list or a comma-separated string; default every subdirectory except ``meta``), mixed by
    ``weights`` (same forms; default equal). ``file_type`` is ``auto``, ``bin`` (``.bin/.idx``),
    ``arrow`` (``col_name``: the token column), ``parquet``/``hf_parquet`` (``col_name``: the
    text column, tokenized with ``tokenizer``), ``tar`` or ``npy`` (``npy_dtype``,
    ``npy_eos_token``, default ``eos_token``), or a handler object.

    ``mix_schedule`` lists phases of the mix: :class:`~tokshuf.stream.MixPhase` objects or
    mappings ``{"start_step": N, "weights": ...}`` (or ``"start_tokens"``), ``weights`` in the
    forms of ``weights`` or as ``{name: weight}``; ``weights`` applies until the first phase
    (``docs/mixes.md``).
    """

    data_path: str
    datasets: str | Sequence[str] | None = None
    weights: str | Sequence[float] | None = None
    file_type: Any = "auto"
    col_name: str | Sequence[str] = "tokens"
    tokenizer: Any = "byte"
    npy_dtype: str = "uint32"
    npy_eos_token: int | None = None
    seq_length: int = 4096
    batch_size: int = 1
    bos_token: int | None = None
    eos_token: int | None = None
    strip_tokens: str | Sequence[int] = ()
    min_length: int = 1
    chunk_size: int = 1024
    logical_shards: int = 960
    shuffle_window: int = 0
    seed: int = 2023
    num_workers: int = 1
    prefetch_factor: int | None = None
    pin_memory: bool = False
    rank: int | None = None
    world_size: int | None = None
    output: BatchOutput = "torch"
    token_dtype: TokenDtype = "int64"
    doc_lens: bool = True
    position_ids: bool = False
    label_mask_boundaries: bool = False
    provenance: bool = False
    add_extra_token: bool = True
    snapshot_every: int | None = None
    ckpt_load_path: str | None = None
    mix_schedule: Sequence[MixPhase | Mapping[str, Any]] = ()
    extra_handler_options: dict[str, Any] = field(default_factory=dict)

    def sub_datasets(self) -> list[SubDataset]:
        names = _split(self.datasets)
        if names is None:
            names = sorted(e.name for e in os.scandir(self.data_path) if e.is_dir() and e.name != "meta")
        if not names:
            raise ConfigError(f"no sub-datasets under {self.data_path}")
        raw = _split(self.weights)
        weights = [1.0] * len(names) if raw is None else [float(w) for w in raw]
        if len(weights) != len(names):
            raise ConfigError(f"{len(weights)} weights for {len(names)} datasets ({names})")
        options = {
            "col_name": _split(self.col_name) if isinstance(self.col_name, str) else self.col_name,
            "tokenizer": self.tokenizer,
            "dtype": self.npy_dtype,
            "eos_token_id": self.npy_eos_token if self.npy_eos_token is not None else (self.eos_token or 0),
            **self.extra_handler_options,
        }
        return [
            SubDataset.from_path(
                n, os.path.join(self.data_path, n), file_type=self.file_type, weight=w, **options
            )
            for n, w in zip(names, weights, strict=True)
        ]


def build_stream(cfg: LoaderConfig) -> TokenStream:
    """The :class:`TokenStream` a config describes."""
    # A comma-separated string is parsed here; a list goes to TokenStream's checks as given.
    strip = (
        [int(t) for t in _split(cfg.strip_tokens) or []]
        if isinstance(cfg.strip_tokens, str)
        else list(cfg.strip_tokens)
    )
    return TokenStream(
        cfg.sub_datasets(),
        sequence_length=cfg.seq_length,
        batch_size=cfg.batch_size,
        seed=cfg.seed,
        logical_shards=cfg.logical_shards,
        chunk_size=cfg.chunk_size,
        bos_token_id=cfg.bos_token,
        eos_token_id=cfg.eos_token,
        strip_tokens=strip,
        min_length=cfg.min_length,
        shuffle_window=cfg.shuffle_window,
        add_extra_token=cfg.add_extra_token,
        token_dtype=cfg.token_dtype,
        doc_lens=cfg.doc_lens,
        position_ids=cfg.position_ids,
        label_mask_boundaries=cfg.label_mask_boundaries,
        provenance=cfg.provenance,
        mix_schedule=cfg.mix_schedule,
    )


def build_dataloader(cfg: LoaderConfig) -> Any:
    """A :class:`~tokshuf.stream.StreamingDataLoader` for ``cfg`` on this rank, resumed from
    ``cfg.ckpt_load_path`` when that names a committed checkpoint."""
    from tokshuf.stream.loader import StreamingDataLoader, StreamingDataset

    ds = StreamingDataset(
        build_stream(cfg),
        rank=cfg.rank,
        world_size=cfg.world_size,
        output=cfg.output,
        snapshot_every=cfg.snapshot_every,
    )
    loader = StreamingDataLoader(
        ds, num_workers=cfg.num_workers, pin_memory=cfg.pin_memory, prefetch_factor=cfg.prefetch_factor
    )
    if cfg.ckpt_load_path:
        loader.load(cfg.ckpt_load_path)
    return loader
