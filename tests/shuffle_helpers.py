"""Helpers for the shuffle tests: an independent model of context formation, corpus writers,
and readers of the output (plain tarfile, and open_lm's exact webdataset pipeline)."""

from __future__ import annotations

import gc
import gzip
import hashlib
import io
import json
import random
import tarfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from conftest import write_jsonl


def byte_ids(text: str) -> list[int]:
    """The byte tokenizer, written independently: UTF-8 byte + 1."""
    return [b + 1 for b in text.encode("utf-8")]


def model_contexts(
    files: Sequence[Sequence[str]],
    seqlen: int,
    *,
    eot: int = 0,
    pad: int = 0,
    bos: int | None = None,
    all_pad: bool = False,
) -> list[tuple[int, ...]]:
    """tokshuf-rust's context formation (spec §5), per file: [BOS] + ids + [EOT] per document,
    concatenated, cut every ``seqlen`` tokens, the remainder padded into one last context."""
    out: list[tuple[int, ...]] = []
    for docs in files:
        buf: list[int] = []
        for text in docs:
            if bos is not None:
                buf.append(bos)
            buf.extend(byte_ids(text))
            buf.append(eot)
            while len(buf) >= seqlen:
                out.append(tuple(buf[:seqlen]))
                del buf[:seqlen]
        if buf or all_pad:
            out.append(tuple(buf + [pad] * (seqlen - len(buf))))
    return out


def random_docs(rng: random.Random, n: int, max_len: int = 300) -> list[str]:
    alphabet = 'abcdefghij klmnopqrstuvwxyz\n\tÄé漢字🙂"\\'
    docs = []
    for _ in range(n):
        k = rng.choice([0, 1, rng.randint(0, max_len), rng.randint(0, max_len // 10)])
        docs.append("".join(rng.choice(alphabet) for _ in range(k)))
    return docs


def write_corpus(root: Path, files: Sequence[Sequence[str]]) -> list[Path]:
    """Write one file per document list, cycling through .jsonl, .jsonl.gz and .jsonl.zst."""
    paths = []
    for i, docs in enumerate(files):
        compress = [None, "gz", "zst"][i % 3]
        suffix = {None: ".jsonl", "gz": ".jsonl.gz", "zst": ".jsonl.zst"}[compress]
        paths.append(write_jsonl(root / f"part_{i:03d}{suffix}", [{"text": d} for d in docs], compress))
    return paths


def read_members(out: Path) -> list[tuple[str, str, bytes]]:
    """(shard file, member name, raw bytes) of every member, in manifest order."""
    rows = read_manifest(out)
    members = []
    for row in rows:
        with tarfile.open(out / f"{row['shard']}.tar") as t:
            for m in t.getmembers():
                data = t.extractfile(m)
                assert data is not None
                members.append((row["shard"], m.name, data.read()))
    return members


def read_contexts(out: Path) -> list[tuple[int, ...]]:
    """Every context in output order (json.gz or npy members)."""
    contexts = []
    for _, name, data in read_members(out):
        if name.endswith(".json.gz"):
            contexts.append(tuple(json.loads(gzip.decompress(data))))
        elif name.endswith(".npy"):
            contexts.append(tuple(int(x) for x in np.load(io.BytesIO(data))))
        else:
            raise AssertionError(f"unexpected member {name}")
    return contexts


def read_manifest(out: Path) -> list[dict[str, Any]]:
    text = (out / "manifest.jsonl").read_text()
    assert text == "" or text.endswith("\n"), "every manifest line must end with a newline"
    return [json.loads(line) for line in text.splitlines()]


def open_lm_samples(manifest: Path) -> list[Any]:
    """Read a dataset exactly as open_lm's get_wds_dataset does in manifest mode."""
    import webdataset as wds

    # open_lm's file_utils.get_metadata_file: split on "\n" and drop the last element.
    rows = [json.loads(r) for r in manifest.read_bytes().decode().split("\n")[:-1]]
    names = ",".join(r["shard"] for r in rows)
    url = str(manifest.parent) + "/{" + names + "}.tar" if len(rows) > 1 else f"{manifest.parent}/{names}.tar"
    pipeline = wds.DataPipeline(
        wds.SimpleShardList(url),
        wds.split_by_node,
        wds.split_by_worker,
        wds.tarfile_to_samples(handler=wds.reraise_exception),
        wds.decode(),
        wds.rename(json="json.gz"),
        wds.to_tuple("json"),
    )
    # webdataset leaves the last tar's file object to the garbage collector: collect it here,
    # where its ResourceWarning is expected, rather than at an arbitrary later point.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        samples = [sample[0] for sample in pipeline]
        del pipeline
        gc.collect()
    return samples


def tree_digest(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` by relative path, but the run summary
    (``summary.json``, which records timings, and its entry in ``commit.json``): the dataset's
    bytes."""

    def content(p: Path) -> bytes:
        if p.name != "commit.json":
            return p.read_bytes()
        record = json.loads(p.read_bytes())
        record["members"] = [m for m in record["members"] if m["name"] != "summary.json"]
        return json.dumps(record, sort_keys=True).encode()

    return {
        str(p.relative_to(root)): hashlib.sha256(content(p)).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "summary.json"
    }


def chi2_sf(x: float, df: int) -> float:
    """Upper tail of the chi-square distribution (Wilson-Hilferty; good for df >= 10)."""
    import math

    z = ((x / df) ** (1 / 3) - (1 - 2 / (9 * df))) / math.sqrt(2 / (9 * df))
    return 0.5 * math.erfc(z / math.sqrt(2))
