"""A ``tokshuf shuffle`` output (open_lm / DCLM webdataset): ``manifest.jsonl`` + ``shard_*.tar``."""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import os
import tarfile
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from tokshuf import _core
from tokshuf._inspect._report import HIDDEN, Report
from tokshuf.errors import FormatError

__all__ = ["ShardReport", "ShardsReport", "inspect_shards"]

MANIFEST = "manifest.jsonl"
RECORD = "commit.json"


@dataclasses.dataclass(frozen=True)
class ShardReport:
    shard: str
    bytes: int
    #: What the manifest says, and what the tar holds.
    manifest_sequences: int | None
    members: int | None


@dataclasses.dataclass(frozen=True)
class ShardsReport(Report):
    path: str
    shards: int
    contexts: int
    shard_bytes: int
    #: Shard sizes in bytes: min, median, max.
    shard_bytes_min: int
    shard_bytes_median: float
    shard_bytes_max: int
    #: Problems between manifest and tars (empty when they agree).
    problems: list[str]
    #: Contexts decoded: every one with ``verify``, else the first shard's.
    contexts_read: int
    verified: bool
    #: Tokens per context (``None`` when none was read); ``mixed`` lists others seen.
    sequence_length: int | None
    tokens_read: int
    #: The special ids asked about (``None`` when not given) and how often each was seen.
    eos_token_id: int | None
    pad_token_id: int | None
    bos_token_id: int | None
    special_counts: dict[str, int]
    #: PAD tokens at context ends / tokens read (needs ``pad_token_id``).
    padding_fraction: float | None
    #: The most frequent ids among the contexts read: ``[(id, count), ...]``.
    top_ids: list[tuple[int, int]]
    per_shard: list[ShardReport] | None = dataclasses.field(
        default=None, repr=False, compare=False, metadata=HIDDEN
    )
    kind: str = "shards"


def _read_member(name: str, data: bytes) -> list[int]:
    if name.endswith(".json.gz"):
        ids: list[int] = json.loads(gzip.decompress(data))
        return ids
    if name.endswith(".npy"):
        return [int(x) for x in np.load(io.BytesIO(data))]
    raise FormatError(f"unexpected member {name}: expected .json.gz or .npy contexts")


def _padding(ctx: list[int], pad: int, eot: int | None) -> int:
    """PAD tokens filling the end of a context. When PAD is EOT (tokshuf's ``native`` preset), the
    first of the trailing run is the last document's EOT, not padding."""
    n = 0
    for t in reversed(ctx):
        if t != pad:
            break
        n += 1
    if pad == eot and n:
        n -= 1
    return n


def _manifest(root: Path, problems: list[str]) -> list[dict[str, Any]]:
    path = root / MANIFEST
    if not path.is_file():
        problems.append(f"no {MANIFEST}: open_lm cannot read this directory")
        return []
    text = path.read_text()
    if text and not text.endswith("\n"):
        # open_lm splits on "\n" and drops the last element: an unterminated last line is lost.
        problems.append(f"{MANIFEST} does not end with a newline: open_lm would drop its last row")
    rows = []
    for i, line in enumerate(text.splitlines(), 1):
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            problems.append(f"{MANIFEST} line {i} is not JSON: {e}")
            continue
        if not isinstance(row, dict) or "shard" not in row or "num_sequences" not in row:
            problems.append(f"{MANIFEST} line {i} lacks shard or num_sequences: {line[:80]}")
            continue
        rows.append(row)
    return rows


def _check_record(root: Path, verify: bool, problems: list[str]) -> None:
    """Compare the output with its commit record (``commit.json``), when it has one: every file
    it lists must be there with its size (and, with ``verify``, its checksum), and nothing else
    may claim to belong to the set."""
    path = root / RECORD
    if not path.is_file():
        return
    try:
        record = json.loads(path.read_text())
        members = {str(m["name"]): m for m in record["members"]}
        state = record["state"]
    except (ValueError, KeyError, TypeError) as e:
        problems.append(f"{RECORD} is not a readable commit record: {e}")
        return
    if state != "committed":
        problems.append(
            f"{RECORD} says the output is still being written (or its run stopped before it finished): "
            "no reader should trust it yet; rerun the shuffle"
        )
        return
    for name, m in members.items():
        file = root / name
        if not file.is_file():
            problems.append(f"{name} is in {RECORD} but missing")
            continue
        size = file.stat().st_size
        if size != m["bytes"]:
            problems.append(
                f"{name} holds {size} bytes, {RECORD} lists {m['bytes']}: changed after the commit"
            )
        elif verify and _core.checksum_file(file)[1] != m["crc32c"]:
            problems.append(
                f"{name}: its bytes are not those {RECORD} lists (CRC32C differs): changed after the commit"
            )
    for file in [*sorted(root.glob("*.tar")), root / MANIFEST]:
        if file.is_file() and file.name not in members:
            problems.append(f"{file.name} is not in {RECORD}: not part of the committed output")


def inspect_shards(
    path: str | os.PathLike[str],
    *,
    verify: bool = False,
    eos_token_id: int | None = None,
    pad_token_id: int | None = None,
    bos_token_id: int | None = None,
    top: int = 10,
) -> ShardsReport:
    """Check ``manifest.jsonl`` against the tars and describe the contexts.

    Member lists come from the tar headers. Contexts are decoded from the first shard only, or
    from every shard with ``verify`` (which also checks that each member decodes and has the same
    length as the others). ``pad_token_id`` (default ``eos_token_id``, as ``tokshuf shuffle``'s ``native``
    preset) gives the padding fraction.
    """
    root = Path(path)
    if root.name == MANIFEST:
        root = root.parent
    if pad_token_id is None:
        pad_token_id = eos_token_id
    problems: list[str] = []
    _check_record(root, verify, problems)
    rows = _manifest(root, problems)
    listed = {str(r["shard"]): int(r["num_sequences"]) for r in rows}
    tars = sorted(p.stem for p in root.glob("*.tar"))
    names = list(listed) + [t for t in tars if t not in listed]
    per_shard: list[ShardReport] = []
    counts: Counter[int] = Counter()
    lengths: Counter[int] = Counter()
    pad_tokens = 0
    read = 0
    for i, name in enumerate(names):
        tar = root / f"{name}.tar"
        if not tar.is_file():
            problems.append(f"{name}.tar is in {MANIFEST} but missing")
            per_shard.append(ShardReport(name, 0, listed.get(name), None))
            continue
        if name not in listed:
            problems.append(f"{name}.tar is not in {MANIFEST}: open_lm will not read it")
        decode = verify or i == 0
        members = 0
        try:
            with tarfile.open(tar) as t:
                for m in t:
                    if not m.isfile():
                        continue
                    members += 1
                    if not decode:
                        continue
                    f = t.extractfile(m)
                    assert f is not None
                    try:
                        ctx = _read_member(m.name, f.read())
                    except (OSError, ValueError) as e:
                        problems.append(f"{name}.tar: member {m.name} does not decode: {e}")
                        continue
                    read += 1
                    lengths[len(ctx)] += 1
                    counts.update(ctx)
                    if pad_token_id is not None:
                        pad_tokens += _padding(ctx, pad_token_id, eos_token_id)
        except tarfile.TarError as e:
            problems.append(f"{name}.tar is not a readable tar: {e}")
        if name in listed and members != listed[name]:
            problems.append(f"{name}.tar holds {members} members, {MANIFEST} says {listed[name]}")
        per_shard.append(ShardReport(name, tar.stat().st_size, listed.get(name), members))
    if len(lengths) > 1:
        seen = ", ".join(f"{n} ({c}x)" for n, c in sorted(lengths.items()))
        problems.append(f"contexts of different lengths: {seen}")
    sizes = np.array([s.bytes for s in per_shard], dtype=np.int64)
    tokens = sum(lengths[n] * n for n in lengths)
    specials = {"eot": eos_token_id, "pad": pad_token_id, "bos": bos_token_id}
    return ShardsReport(
        path=os.fspath(root),
        shards=len(per_shard),
        contexts=sum(listed.values()),
        shard_bytes=int(sizes.sum()),
        shard_bytes_min=int(sizes.min()) if len(sizes) else 0,
        shard_bytes_median=float(np.median(sizes)) if len(sizes) else 0.0,
        shard_bytes_max=int(sizes.max()) if len(sizes) else 0,
        problems=problems,
        contexts_read=read,
        verified=verify,
        sequence_length=lengths.most_common(1)[0][0] if lengths else None,
        tokens_read=tokens,
        eos_token_id=eos_token_id,
        pad_token_id=pad_token_id,
        bos_token_id=bos_token_id,
        special_counts={k: counts[v] for k, v in specials.items() if v is not None},
        padding_fraction=pad_tokens / tokens if pad_token_id is not None and tokens else None,
        top_ids=sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top],
        per_shard=per_shard,
    )
