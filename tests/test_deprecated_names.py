"""Every old spelling of the API still works, gives what the new spelling gives, and warns.

The table below is the list of deprecated aliases; a test checks that it is complete, so an alias
added without a case here fails."""

from __future__ import annotations

import dataclasses
import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tokshuf
from tokshuf import IndexedDatasetWriter, NanosetConfig, build_nanosets, instances
from tokshuf import olmo_tokens as ot
from tokshuf._deprecation import deprecated_parameters
from tokshuf.instances._base import InstanceDataset
from tokshuf.stream import NpyHandler, SubDataset, TokenStream
from tokshuf.tokenizer import as_tokenizer

EOS, PAD = 0, 999


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("data")
    lines = [{"text": f"document {i} " + "word " * (i % 13)} for i in range(60)]
    (d / "c.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    tokens = np.array([t for i in range(40) for t in [*range(2, 2 + i % 17), EOS]], dtype=np.uint16)
    (d / "tokens").mkdir()
    ot.write_tokens(d / "tokens" / "part-0.npy", [tokens], np.uint16)
    with IndexedDatasetWriter(d / "idx", np.uint16) as w:
        for i in range(50):
            w.add_document([*range(2, 2 + i % 11), EOS], [i % 11 + 1])
    return d


def _with(func: Callable[..., Any], defaults: dict[str, Any], kw: dict[str, Any]) -> dict[str, Any]:
    """``defaults`` and ``kw``, without the defaults that ``kw`` gives under an old name."""
    renamed = {deprecated_parameters(func).get(k) for k in kw}
    return {**{k: v for k, v in defaults.items() if k not in renamed}, **kw}


def _bytes(prefix: Path) -> tuple[bytes, bytes]:
    return Path(f"{prefix}.bin").read_bytes(), Path(f"{prefix}.idx").read_bytes()


def _tree(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.is_file()}


def _instances(cls: type[InstanceDataset], **extra: Any) -> Callable[[Path, Path, dict[str, Any]], Any]:
    def make(data: Path, tmp: Path, kw: dict[str, Any]) -> Any:
        kw = _with(cls, {"cache_dir": tmp.parent / "cache", "num_threads": 1}, kw)
        ds = cls(
            data / "tokens" / "part-0.npy",
            pad_token_id=PAD,
            eos_token_id=EOS,
            dtype=np.uint16,
            document_boundaries="eos",
            **extra,
            **kw,
        )
        return (len(ds), ds.fingerprint, ds.cache_dir, ds.num_threads)

    return make


def _preprocess(data: Path, tmp: Path, kw: dict[str, Any]) -> Any:
    tokshuf.preprocess(data / "c.jsonl", tmp / "p", "byte", append_eod=True, summary=False, **kw)
    return _bytes(tmp / "p_text_document")


def _shuffle(data: Path, tmp: Path, kw: dict[str, Any]) -> Any:
    kw = _with(tokshuf.shuffle, {"context_length": 9, "num_local_cells": 4, "wds_chunk_size": 16}, kw)
    tokshuf.shuffle(data / "c.jsonl", tmp / "cells", tmp / "out", "byte", summary=False, **kw)
    return _tree(tmp / "out")


def _stream(data: Path, tmp: Path, kw: dict[str, Any]) -> Any:
    sub = SubDataset.from_path("s", data / "idx", file_type="bin")
    kw = _with(TokenStream, {"sequence_length": 6, "logical_shards": 2}, kw)
    stream = TokenStream([sub], **kw)
    batch = next(iter(stream.worker(0, 1)))
    return (stream.sequence_length, stream.bos_token_id, stream.eos_token_id, batch["input"].tolist())


def _nanoset_config(data: Path, tmp: Path, kw: dict[str, Any]) -> Any:
    kw = _with(NanosetConfig, {"eos_token_id": 0}, kw)
    return NanosetConfig(str(data / "idx"), 8, split="1,0,0", eod_mask_loss=True, **kw)


def _get_batch(data: Path, tmp: Path, kw: dict[str, Any]) -> Any:
    train, _, _ = build_nanosets(NanosetConfig(str(data / "idx"), 8, split="1,0,0"))
    assert train is not None
    return train.get_batch([0, 3, 1], **kw).tolist()


#: (function, old keyword, new keyword, a value) for every deprecated parameter.
CASES: list[tuple[Callable[..., Any], Callable[[Path, Path, dict[str, Any]], Any], str, str, Any]] = [
    (
        tokshuf.Tokenizer,
        lambda d, t, kw: tokshuf.Tokenizer("byte", **kw).eos_token_id,
        "eod_id",
        "eos_token_id",
        7,
    ),
    (as_tokenizer, lambda d, t, kw: as_tokenizer("byte", **kw).eos_token_id, "eod_id", "eos_token_id", 9),
    (tokshuf.preprocess, _preprocess, "eod_id", "eos_token_id", 5),
    (tokshuf.preprocess, _preprocess, "workers", "num_threads", 2),
    (tokshuf.shuffle, _shuffle, "seqlen", "context_length", 7),
    (tokshuf.shuffle, _shuffle, "sequence_length", "context_length", 7),
    (tokshuf.shuffle, _shuffle, "threads", "num_threads", 2),
    (tokshuf.shuffle, _shuffle, "eot_id", "eos_token_id", 3),
    (tokshuf.shuffle, _shuffle, "pad_id", "pad_token_id", 4),
    (tokshuf.shuffle, _shuffle, "bos_id", "bos_token_id", 6),
    (TokenStream, _stream, "seq_length", "sequence_length", 5),
    (TokenStream, _stream, "bos_token", "bos_token_id", 1),
    (TokenStream, _stream, "eos_token", "eos_token_id", 0),
    (NpyHandler, lambda d, t, kw: NpyHandler("uint16", **kw).eos_token_id, "eos_token", "eos_token_id", 3),
    (NanosetConfig, _nanoset_config, "path_to_cache", "cache_dir", "/tmp/somewhere"),
    (NanosetConfig, _nanoset_config, "eod_token_id", "eos_token_id", 0),
    (tokshuf.Nanoset.get_batch, _get_batch, "threads", "num_threads", 2),
    (
        ot.document_spans,
        lambda d, t, kw: ot.document_spans(
            d / "tokens" / "part-0.npy", np.uint16, EOS, boundaries="eos", **kw
        ).tolist(),
        "threads",
        "num_threads",
        2,
    ),
]
_DATASETS: list[tuple[type[InstanceDataset], dict[str, Any]]] = [
    (instances.FSLDataset, {"sequence_length": 8}),
    (instances.PaddedFSLDataset, {"sequence_length": 8}),
    (instances.PackedFSLDataset, {"sequence_length": 8}),
    (
        instances.InterleavedFSLDataset,
        {"sequence_length": 8, "seed": 1, "docs_per_instance": 2, "chunks_per_doc": 2},
    ),
    (instances.VSLDataset, {"max_sequence_length": 16, "min_sequence_length": 4}),
]
for _cls, _extra in _DATASETS:
    CASES.append((_cls, _instances(_cls, **_extra), "work_dir", "cache_dir", None))
    CASES.append((_cls, _instances(_cls, **_extra), "threads", "num_threads", 2))


def _id(case: tuple[Any, ...]) -> str:
    return f"{getattr(case[0], '__qualname__', case[0])}-{case[2]}"


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_old_parameter_works_and_warns(data: Path, tmp_path: Path, case: tuple[Any, ...]) -> None:
    _, call, old, new, value = case
    if value is None:  # a directory
        value = tmp_path / "cache-given"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        expected = call(data, tmp_path / "new", {new: value})
    with pytest.warns(DeprecationWarning, match=rf"'{old}' is deprecated .* use '{new}'"):
        got = call(data, tmp_path / "old", {old: value})
    assert got == expected


@pytest.mark.parametrize("case", CASES[:1], ids=_id)
def test_both_spellings_at_once_are_refused(case: tuple[Any, ...]) -> None:
    with pytest.raises(TypeError, match="'eod_id' is the old name of 'eos_token_id'"):
        tokshuf.Tokenizer("byte", eod_id=1, eos_token_id=2)  # type: ignore[call-arg]


def test_the_table_lists_every_alias() -> None:
    declared = {(f, old, new) for f in {c[0] for c in CASES} for old, new in deprecated_parameters(f).items()}
    assert declared == {(c[0], c[2], c[3]) for c in CASES}
    public = [tokshuf.Tokenizer, tokshuf.preprocess, tokshuf.shuffle, NanosetConfig, TokenStream, NpyHandler]
    public += [cls for cls, _ in _DATASETS] + [tokshuf.Nanoset.get_batch, ot.document_spans, as_tokenizer]
    assert all(deprecated_parameters(f) for f in public)


def test_shuffle_sequence_length_warns_what_it_meant_and_gives_the_same_shards(
    data: Path, tmp_path: Path
) -> None:
    # shuffle's sequence_length counted the +1 target token, unlike sequence_length elsewhere:
    # the warning says that the value carries over unchanged.
    expected = _shuffle(data, tmp_path / "new", {"context_length": 2049})
    with pytest.warns(DeprecationWarning, match=r"use 'context_length' \(the same value: .* \+ 1"):
        got = _shuffle(data, tmp_path / "old", {"sequence_length": 2049})
    assert got == expected
    with pytest.raises(TypeError, match="'sequence_length' is the old name of 'context_length'"):
        tokshuf.shuffle(
            data / "c.jsonl", tmp_path / "c", tmp_path / "o", "byte", sequence_length=9, context_length=9
        )


#: (object factory, old attribute, new attribute) for every deprecated attribute.
ATTRIBUTES: list[tuple[Callable[[Path, Path], Any], str, str]] = [
    (lambda d, t: NanosetConfig("x", 8, cache_dir="c"), "path_to_cache", "cache_dir"),
    (lambda d, t: NanosetConfig("x", 8, eos_token_id=3), "eod_token_id", "eos_token_id"),
    (lambda d, t: NpyHandler("uint16", eos_token_id=5), "eos_token", "eos_token_id"),
    (
        lambda d, t: instances.FSLDataset(
            d / "idx", sequence_length=8, pad_token_id=PAD, eos_token_id=EOS, cache_dir=t, num_threads=1
        ),
        "work_dir",
        "cache_dir",
    ),
    (
        lambda d, t: instances.FSLDataset(
            d / "idx", sequence_length=8, pad_token_id=PAD, eos_token_id=EOS, cache_dir=t, num_threads=1
        ),
        "threads",
        "num_threads",
    ),
]
for _old, _new in (
    ("seq_length", "sequence_length"),
    ("bos_token", "bos_token_id"),
    ("eos_token", "eos_token_id"),
):
    ATTRIBUTES.append(
        (
            lambda d, t: TokenStream(
                [SubDataset.from_path("s", d / "idx", file_type="bin")],
                sequence_length=6,
                bos_token_id=1,
                eos_token_id=0,
            ),
            _old,
            _new,
        )
    )


@pytest.mark.parametrize("case", ATTRIBUTES, ids=lambda c: c[1])
def test_old_attribute_reads_the_new_one_and_warns(data: Path, tmp_path: Path, case: tuple[Any, ...]) -> None:
    make, old, new = case
    obj = make(data, tmp_path)
    with pytest.warns(DeprecationWarning, match=rf"'{old}' is deprecated .* use '{new}'"):
        assert getattr(obj, old) == getattr(obj, new)
    if dataclasses.is_dataclass(obj):  # frozen: both spellings are refused
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, old, None)
    else:
        with pytest.warns(DeprecationWarning, match=rf"'{old}' is deprecated"):
            setattr(obj, old, 11)
        assert getattr(obj, new) == 11


def test_old_read_only_attribute_reads_the_new_one_and_warns() -> None:
    tok = tokshuf.Tokenizer("byte", eos_token_id=4)
    with pytest.warns(DeprecationWarning, match="'eod_id' is deprecated .* use 'eos_token_id'"):
        assert tok.eod_id == tok.eos_token_id == 4


def test_nanoset_config_from_dict_accepts_the_old_keys() -> None:
    with pytest.warns(DeprecationWarning, match="'path_to_cache' is deprecated"):
        old = NanosetConfig.from_dict({"data_path": "x", "sequence_length": 8, "path_to_cache": "c"})
    assert old == NanosetConfig("x", 8, cache_dir="c")


@pytest.mark.parametrize(
    ("module", "name"), [("tokshuf.shuffle", "SPECIAL_TOKEN_PRESETS"), ("tokshuf.preprocess", "preprocess")]
)
def test_old_module_paths_import_and_warn(module: str, name: str) -> None:
    import importlib

    with pytest.warns(DeprecationWarning, match=rf"use 'tokshuf\.{name}'"):
        value = getattr(importlib.import_module(module), name)
    assert value is getattr(tokshuf, name)
    assert callable(tokshuf.shuffle)
    assert callable(tokshuf.preprocess)


@pytest.mark.parametrize("name", ["summarize", "render"])
def test_checkpoint_summaries_import_from_their_old_module_and_warn(name: str) -> None:
    # They moved to tokshuf._inspect (one home for inspection); tokshuf.stream exports them.
    import importlib

    import tokshuf.stream

    with pytest.warns(DeprecationWarning, match=rf"use 'tokshuf\.stream\.{name}'"):
        value = getattr(importlib.import_module("tokshuf.stream.inspect"), name)
    assert value is getattr(tokshuf.stream, name)
