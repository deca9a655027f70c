"""Parity with OLMo-core itself: every field of every instance of every strategy, on edge-case
corpora, against OLMo-core's own ``Numpy*Dataset`` classes, and every rank's batches of its
``NumpyVSLDataLoader``.

OLMo-core pins an older torch than tokshuf's tests use, so it runs in its own interpreter:
``OLMO_PYTHON=/path/to/venv/bin/python`` (a venv where ``pip install ai2-olmo-core`` worked), or
this interpreter if it imports ``olmo_core``. Without either the test is skipped.

Every corpus has Dolma metadata (``.csv.gz``) beside its tokens, some with documents that lack
their EOS. Compared: OLMo-core's defaults (an EOS scan) with tokshuf's ``"eos"``, or ``"auto"``
where the metadata agrees with the scan; OLMo-core reading the metadata
(``use_array_if_local=False``, ``OLMO_DATA_PREP_USE_ARRAY_IF_LOCAL=0``) with tokshuf's
``"metadata"``; ``metadata={}`` and a real metadata dict; seeds beyond 64 bits; ranks and world
sizes in and out of range.

Known, documented differences (docs/olmo-instances.md) are left out: padded and interleaved with
a BOS on scanned data where it matters (OLMo-core's padded documents ignore the BOS); FSL
``doc_lens`` and VSL from metadata (OLMo-core always scans those). OLMo-core's packing sort is
made stable in the peer (its default ``argsort`` orders equal lengths arbitrarily); tokshuf takes
them in file order.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from olmo_model import eos_documents

from tokshuf import ConfigError
from tokshuf import olmo_tokens as ot
from tokshuf.instances import (
    FSLDataset,
    InterleavedFSLDataset,
    PackedFSLDataset,
    PaddedFSLDataset,
    VSLDataset,
)


def olmo_python() -> str | None:
    if os.environ.get("OLMO_PYTHON"):
        return os.environ["OLMO_PYTHON"]
    return sys.executable if importlib.util.find_spec("olmo_core") is not None else None


pytestmark = pytest.mark.skipif(
    olmo_python() is None, reason="OLMo-core not installed (set OLMO_PYTHON to a venv with ai2-olmo-core)"
)


@dataclass(frozen=True)
class Corpus:
    dtype: str
    vocab: int
    eos: int
    pad: int
    bos: int | None = None
    masks: bool = False
    #: The last file ends with a document without EOS.
    tail: bool = False
    #: Some documents lose their EOS (the metadata still bounds them).
    no_eos: bool = False


CORPORA: dict[str, Corpus] = {
    "dolma2": Corpus("uint32", 100278, 100257, 100277, tail=True),
    "neox_pad1": Corpus("uint16", 50280, 50279, 1),
    "gpt2_pad_is_eos": Corpus("uint16", 50257, 50256, 50256, tail=True),
    "bos_is_eos": Corpus("uint32", 100278, 100257, 100277, 100257),
    "distinct_bos": Corpus("uint16", 1000, 2, 0, 3),
    "distinct_bos_tail": Corpus("uint16", 1000, 2, 0, 3, tail=True),
    "label_masks": Corpus("uint32", 100278, 100257, 100277, masks=True),
    "dolma2_no_eos": Corpus("uint32", 100278, 100257, 100277, no_eos=True),
    "pad_is_eos_no_eos": Corpus("uint16", 50257, 50256, 50256, no_eos=True, tail=True),
    "distinct_bos_no_eos": Corpus("uint16", 1000, 2, 0, 3, no_eos=True),
    "bos_is_eos_no_eos": Corpus("uint32", 100278, 100257, 100277, 100257, no_eos=True),
    "label_masks_no_eos": Corpus("uint32", 100278, 100257, 100277, masks=True, no_eos=True),
}
SEQ = 64


def write_corpus(d: Path, name: str, seed: int) -> tuple[list[Path], list[Path] | None, bool]:
    """The corpus's token files (with Dolma metadata), its label-mask files, and whether the
    metadata gives the documents that an EOS scan finds (by the model's scan)."""
    c = CORPORA[name]
    agrees = True
    rng = np.random.default_rng(seed)
    special = {c.eos, c.pad} | ({c.bos} if c.bos is not None else set())
    paths, mask_paths = [], []
    for f in range(2):
        docs = []
        for n in np.minimum(rng.geometric(1 / 30, 40), 3 * SEQ):  # some longer than SEQ
            body = rng.integers(4, c.vocab, int(n))
            body = body[~np.isin(body, list(special))]
            eos = [] if c.no_eos and rng.random() < 0.25 else [c.eos]
            docs.append(np.array([*([c.bos] if c.bos is not None else []), *body.tolist(), *eos], np.int64))
        if c.tail and f == 1:
            docs.append(rng.integers(4, 200, 7))  # without EOS: a document only in the metadata
        p = d / f"{name}-{f}.npy"
        spans = ot.write_tokens(p, docs, np.dtype(c.dtype), metadata=True)
        tokens = np.concatenate(docs).tolist()
        agrees &= eos_documents(tokens, c.eos, c.bos) == [tuple(x) for x in spans.tolist()]
        paths.append(p)
        if c.masks:
            m = d / f"{name}-mask-{f}.npy"
            (rng.random(os.path.getsize(p) // np.dtype(c.dtype).itemsize) < 0.8).tofile(m)
            mask_paths.append(m)
    return paths, mask_paths or None, agrees


def cases(d: Path) -> list[dict[str, Any]]:
    """Per corpus and strategy: the same arguments for OLMo-core and tokshuf, and the document
    boundaries tokshuf takes to equal OLMo-core's."""
    out = []
    for k, name in enumerate(CORPORA):
        c = CORPORA[name]
        paths, masks, agrees = write_corpus(d, name, k)
        # metadata={} means no metadata, on both sides; one corpus has a real dict.
        base: dict[str, Any] = {
            "pad_token_id": c.pad,
            "eos_token_id": c.eos,
            "vocab_size": c.vocab,
            "dtype": c.dtype,
            "metadata": {"label": name} if name == "neox_pad1" else {},
        }
        if masks is not None:
            base["label_mask_paths"] = [str(m) for m in masks]
        with_bos = {**base, "bos_token_id": c.bos} if c.bos is not None else base
        packed = {**with_bos, "sequence_length": SEQ, "generate_doc_lengths": True}
        interleaved = {
            **with_bos,
            "sequence_length": SEQ,
            "seed": 7,
            "docs_per_instance": 2,
            "chunks_per_doc": 4,
        }
        # OLMo-core's defaults scan for EOS: tokshuf's "eos", or "auto" where the metadata agrees.
        scan = "auto" if agrees else "eos"
        # "auto" takes the metadata, OLMo-core's use_array_if_local=False: packed doc_lens are the
        # loaded documents', where OLMo-core's default rescans the row (merging a truncated or
        # fragmented document with the next one), so packing compares with "eos" and "metadata".
        fragment = {**packed, "long_doc_strategy": "fragment"}
        local_false = {"olmo_kwargs": {"use_array_if_local": False}}
        strategies: dict[str, tuple[dict[str, Any], str, dict[str, Any]]] = {
            "fsl": ({**with_bos, "sequence_length": SEQ, "generate_doc_lengths": True}, scan, {}),
            "packed_truncate": (packed, "eos", {}),
            "packed_fragment": (fragment, "eos", {}),
            # From the metadata: OLMo-core's use_array_if_local=False (packed) and its environment
            # variable (padded; interleaved builds on padded).
            "packed_metadata": (packed, "metadata", local_false),
            "packed_metadata_fragment": (fragment, "auto", local_false),
        }
        from_metadata = {"env": {"OLMO_DATA_PREP_USE_ARRAY_IF_LOCAL": "0"}}
        strategies["padded_metadata"] = ({**with_bos, "sequence_length": SEQ}, "metadata", from_metadata)
        strategies["interleaved_metadata"] = (interleaved, "metadata", from_metadata)
        # Documented difference: OLMo-core's padded dataset ignores the BOS, so it cuts BOS = EOS
        # data at every BOS and keeps the last document before a document without EOS.
        if c.bos is None or (c.bos != c.eos and agrees):
            strategies["padded"] = ({**with_bos, "sequence_length": SEQ}, scan, {})
            strategies["interleaved"] = (interleaved, scan, {})
        if name == "dolma2":  # a seed beyond 64 bits, read as numpy reads it
            strategies["interleaved_bigseed"] = ({**interleaved, "seed": 2**64 + 5}, scan, {})
        if c.bos is None and masks is None:  # OLMo-core's VSL takes neither
            vsl = {**base, "max_sequence_length": SEQ, "min_sequence_length": 8}
            strategies["vsl"] = (vsl, scan, {})
        for strategy, (kw, boundaries, olmo) in strategies.items():
            out.append(
                {
                    "name": f"{name}-{strategy}",
                    "strategy": strategy.split("_")[0],
                    "paths": [str(p) for p in paths],
                    "kwargs": kw,
                    "boundaries": boundaries,
                    "work_dir": str(d / "olmo-work" / f"{name}-{strategy}"),
                    **olmo,
                }
            )
    return out


MAKERS = {
    "fsl": FSLDataset,
    "padded": PaddedFSLDataset,
    "packed": PackedFSLDataset,
    "interleaved": InterleavedFSLDataset,
    "vsl": VSLDataset,
}


def run_peer(tmp_path: Path, all_cases: list[dict[str, Any]]) -> Path:
    spec = tmp_path / "cases.json"
    spec.write_text(json.dumps(all_cases))
    out = tmp_path / "olmo"
    out.mkdir()
    peer = Path(__file__).with_name("olmo_parity_peer.py")
    python = olmo_python()
    assert python is not None
    r = subprocess.run(
        [python, os.fspath(peer), os.fspath(spec), os.fspath(out)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "OLMO_DATA_PREP_WORKERS": "1"},
    )
    assert r.returncode == 0, r.stderr[-4000:]
    return out


def test_every_field_of_every_instance_equals_olmo_core(tmp_path: Path) -> None:
    all_cases = cases(tmp_path)
    out = run_peer(tmp_path, all_cases)
    for case in all_cases:
        theirs = np.load(out / f"{case['name']}.npz")
        side = json.loads((out / f"{case['name']}.json").read_text())
        ds = MAKERS[case["strategy"]](
            *case["paths"],
            **case["kwargs"],
            document_boundaries=case["boundaries"],
            cache_dir=tmp_path / "ours",
        )
        assert len(ds) == int(theirs["count"]), case["name"]
        keys = {k for k in theirs.files if k != "count" and not k.endswith("_len")}
        ours: dict[str, list[np.ndarray]] = {}
        for i in range(len(ds)):
            item = ds[np.int64(i)] if i % 2 else ds[np.array(i)]  # OLMo-core takes int(index)
            assert sorted(item) == side["keys"], (case["name"], i)
            assert item.get("metadata") == side["metadata"][i], (case["name"], i)
            for key in keys:
                ours.setdefault(key, []).append(np.asarray(item[key]).reshape(-1))
        for key in keys:
            lens = theirs[f"{key}_len"]
            assert [v.size for v in ours[key]] == lens.tolist(), (case["name"], key)
            flat = np.concatenate(ours[key]).astype(np.int64) if ours[key] else np.zeros(0, np.int64)
            assert np.array_equal(flat, theirs[key]), (case["name"], key)


#: (rank, world size) probes outside the valid range: OLMo-core fails on each, tokshuf raises
#: ConfigError.
BAD_RANKS = [(2, 2), (3, 2), (-1, 2), (5, 4), (0, 0), (0, -2)]


def test_vsl_loader_batches_of_every_rank_equal_olmo_core(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    docs = [np.array([*rng.integers(4, 900, int(rng.integers(1, 40))), 2]) for _ in range(120)]
    path = tmp_path / "vsl.npy"
    ot.write_tokens(path, docs, np.uint16)
    kw = {"pad_token_id": 0, "eos_token_id": 2, "vocab_size": 1000, "dtype": "uint16"}
    kw |= {"max_sequence_length": 16, "min_sequence_length": 2}
    loaders = [
        (0, 1, 1),
        (3, 2, 2),
        (11, 1, 4),
        (2**64 - 1, 1, 2),  # seed + epoch beyond 64 bits
        (2**64 + 5, 3, 1),
        (2**70 + 12345, 1, 4),
    ]
    all_cases = [
        {
            "name": f"loader-{n}",
            "strategy": "vsl",
            "paths": [str(path)],
            "kwargs": kw,
            "work_dir": str(tmp_path / "olmo-work" / f"loader-{n}"),
            "loader": {
                "global_batch_size": 64,
                "seed": seed,
                "epoch": epoch,
                "world_size": world_size,
                "probes": BAD_RANKS if n == 0 else [],
            },
        }
        for n, (seed, epoch, world_size) in enumerate(loaders)
    ]
    out = run_peer(tmp_path, all_cases)
    ds = VSLDataset(path, **kw, cache_dir=tmp_path / "ours")
    for case in all_cases:
        lo = case["loader"]
        theirs = np.load(out / f"{case['name']}.npz")
        e = ds.epoch(lo["global_batch_size"], seed=lo["seed"], epoch=lo["epoch"], seed_mode="olmo")
        for r in range(lo["world_size"]):
            batches = [e.batch(step, rank=r, world_size=lo["world_size"]) for step in range(len(e))]
            assert [b.size for b in batches] == theirs[f"rank{r}_len"].tolist(), (case["name"], r)
            assert np.concatenate(batches).tolist() == theirs[f"rank{r}"].tolist(), (case["name"], r)
        raised = json.loads((out / f"{case['name']}.json").read_text())["raised"]
        for (rank, world_size), olmo_raised in zip(lo["probes"], raised, strict=True):
            assert olmo_raised is not None, (rank, world_size)  # OLMo-core refuses it too
            with pytest.raises(ConfigError, match=r"rank|world_size"):
                e.batch(0, rank=rank, world_size=world_size)
