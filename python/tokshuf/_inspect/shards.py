"""A ``tokshuf shuffle`` output (open_lm / DCLM webdataset): ``manifest.jsonl`` + ``shard_*.tar``."""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import os
import tarfile
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from tokshuf import _core
from tokshuf._inspect._report import HIDDEN, Report
from tokshuf._storage import is_remote, local_path
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
    """A context's ids, or :class:`FormatError` saying why the member holds none."""
    if name.endswith(".json.gz"):
        try:
            ids = json.loads(gzip.decompress(data))
        except (OSError, EOFError, zlib.error) as e:
            raise FormatError(f"not gzip: {e}") from None
        if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise FormatError(f"expected a JSON list of token ids, got {type(ids).__name__}")
        return ids
    if name.endswith(".npy"):
        arr = np.load(io.BytesIO(data))
        if arr.ndim != 1 or arr.dtype.kind not in "iu":
            raise FormatError(f"expected a 1-D integer array, got {arr.dtype} of shape {arr.shape}")
        return [int(x) for x in arr]
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


class _Output:
    """Where the shards are: a local directory, or a prefix in object storage (whose manifest is
    read through a local copy, and whose tars are listed with their sizes and copied only when
    read)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        s = os.fspath(path)
        self.remote = is_remote(s)
        if self.remote:
            s = s.rstrip("/")
            self.root = s[: -len(MANIFEST) - 1] if s.endswith("/" + MANIFEST) else s
        else:
            root = Path(s)
            self.root = os.fspath(root.parent if root.name == MANIFEST else root)

    def read(self, name: str) -> str | None:
        """The text of file ``name`` of the output, ``None`` if there is none."""
        if self.remote:
            url = f"{self.root}/{name}"
            return Path(local_path(url)).read_text() if _core.remote_exists(url) else None
        path = Path(self.root) / name
        return path.read_text() if path.is_file() else None

    def sizes(self) -> dict[str, int]:
        """``{file name: bytes}`` of the files directly in the output."""
        if self.remote:
            out = {}
            for url, size in _core.list_object_sizes(self.root + "/", [""]):
                name = url[len(self.root) + 1 :]
                if "/" not in name:
                    out[name] = size
            return out
        return {p.name: p.stat().st_size for p in Path(self.root).iterdir() if p.is_file()}

    def tars(self) -> dict[str, int]:
        """``{shard name: bytes}`` of the tars directly in the output."""
        return {name[: -len(".tar")]: n for name, n in sorted(self.sizes().items()) if name.endswith(".tar")}

    def tar(self, name: str) -> str:
        """A local path of shard ``name`` (for an object: its local copy in the cache)."""
        if self.remote:
            return local_path(f"{self.root}/{name}.tar")
        return os.path.join(self.root, f"{name}.tar")


def _manifest(out: _Output, problems: list[str]) -> list[dict[str, Any]]:
    text = out.read(MANIFEST)
    if text is None:
        problems.append(f"no {MANIFEST}: open_lm cannot read this directory")
        return []
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
        n = row["num_sequences"]
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            # open_lm sums these: anything but a count breaks its sampling.
            problems.append(f"{MANIFEST} line {i}: num_sequences must be a non-negative integer, got {n!r}")
            continue
        rows.append(row)
    return rows


def _check_record(out: _Output, verify: bool, problems: list[str]) -> None:
    """Compare the output with its commit record (``commit.json``), when it has one: every file
    it lists must be there with its size (and, with ``verify``, a local file its checksum), and
    nothing else may claim to belong to the set."""
    text = out.read(RECORD)
    if text is None:
        return
    try:
        record = json.loads(text)
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
    sizes = out.sizes()
    for name, m in members.items():
        if name not in sizes:
            problems.append(f"{name} is in {RECORD} but missing")
            continue
        if sizes[name] != m["bytes"]:
            problems.append(
                f"{name} holds {sizes[name]} bytes, {RECORD} lists {m['bytes']}: changed after the commit"
            )
        elif (
            verify
            and not out.remote
            and "crc32c" in m
            and _core.checksum_file(os.path.join(out.root, name))[1] != m["crc32c"]
        ):
            problems.append(
                f"{name}: its bytes are not those {RECORD} lists (CRC32C differs): changed after the commit"
            )
    for name in sorted(sizes):
        if (name.endswith(".tar") or name == MANIFEST) and name not in members:
            problems.append(f"{name} is not in {RECORD}: not part of the committed output")


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

    ``path`` may be a prefix in object storage (``s3://bucket/shards``, as ``tokshuf shuffle
    --output`` writes it): the tars are listed with their sizes, and those read (the first, or
    all with ``verify``) are copied into the cache as every remote input is; without ``verify``
    only the first shard's members are counted.
    """
    out = _Output(path)
    if pad_token_id is None:
        pad_token_id = eos_token_id
    problems: list[str] = []
    _check_record(out, verify, problems)
    rows = _manifest(out, problems)
    listed = {str(r["shard"]): int(r["num_sequences"]) for r in rows}
    tars = out.tars()
    names = list(listed) + [t for t in tars if t not in listed]
    per_shard: list[ShardReport] = []
    counts: Counter[int] = Counter()
    lengths: Counter[int] = Counter()
    pad_tokens = 0
    read = 0
    for i, name in enumerate(names):
        if name not in tars:
            problems.append(f"{name}.tar is in {MANIFEST} but missing")
            per_shard.append(ShardReport(name, 0, listed.get(name), None))
            continue
        if name not in listed:
            problems.append(f"{name}.tar is not in {MANIFEST}: open_lm will not read it")
        decode = verify or i == 0
        if out.remote and not decode:
            # Counting an object's members means reading all of it: --verify does.
            per_shard.append(ShardReport(name, tars[name], listed.get(name), None))
            continue
        members = 0
        try:
            with tarfile.open(out.tar(name)) as t:
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
                    except (OSError, EOFError, ValueError) as e:
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
        per_shard.append(ShardReport(name, tars[name], listed.get(name), members))
    if len(lengths) > 1:
        seen = ", ".join(f"{n} ({c}x)" for n, c in sorted(lengths.items()))
        problems.append(f"contexts of different lengths: {seen}")
    sizes = np.array([s.bytes for s in per_shard], dtype=np.int64)
    tokens = sum(lengths[n] * n for n in lengths)
    specials = {"eot": eos_token_id, "pad": pad_token_id, "bos": bos_token_id}
    return ShardsReport(
        path=out.root,
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
