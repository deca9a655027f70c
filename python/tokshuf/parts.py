"""Putting a job's task parts together: ``tokshuf preprocess --shard i/N`` writes part ``i``;
:func:`merge_parts` writes, from the N parts, the outputs of the one-task run, byte for byte.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from typing import Any

from tokshuf import _core, _storage
from tokshuf._log import log_run
from tokshuf._summary_file import check_summary, summary_target, write_summary
from tokshuf.errors import ConfigError
from tokshuf.indexed import merge

__all__ = ["merge_parts"]

_PART = re.compile(r"-part-(\d{5,})-of-(\d{5,})_summary\.json$")
#: Counts that add up over parts.
_SUMS = ("files", "lines", "documents", "sequences", "tokens", "input_bytes", "decompressed_bytes")
_FIRST_SKIPPED = 20


def _parts(prefix: str) -> list[tuple[str, dict[str, Any]]]:
    """(part prefix, part summary) of every part of ``prefix``, in task order, all present."""
    remote = _core.is_remote(prefix)
    directory, stem = prefix.rsplit("/", 1) if remote else os.path.split(prefix)
    if remote:
        names = [u.rsplit("/", 1)[1] for u in _core.list_objects(directory + "/", ["_summary.json"])]
    else:
        names = os.listdir(directory or ".")
    found: dict[int, tuple[int, str]] = {}
    for name in names:
        m = _PART.search(name)
        if m and name[: m.start()] == stem:
            part = name[: -len("_summary.json")]
            found[int(m.group(1))] = (
                int(m.group(2)),
                f"{directory}/{part}" if remote else os.path.join(directory, part),
            )
    if not found:
        raise ConfigError(f"no parts of {prefix!r}: expected {prefix}-part-IIIII-of-NNNNN_summary.json files")
    counts = {n for n, _ in found.values()}
    if len(counts) != 1:
        raise ConfigError(
            f"the parts of {prefix!r} come from runs cut into different numbers of tasks: {sorted(counts)}"
        )
    (n,) = counts
    missing = [i for i in range(n) if i not in found]
    if missing:
        raise ConfigError(
            f"{prefix!r}: {len(missing)} of {n} parts are missing (tasks {missing[:10]}); run them first"
        )
    parts = []
    for i in range(n):
        part = found[i][1]
        with open(_storage.local_path(part + "_summary.json"), encoding="utf-8") as f:
            parts.append((part, json.load(f)))
    first = parts[0][1]
    for part, s in parts[1:]:
        for field in ("config", "tokenizer", "dtype"):
            if s.get(field) != first.get(field):
                raise ConfigError(
                    f"{part} was made with a different {field} than {parts[0][0]}: "
                    f"{s.get(field)!r} != {first.get(field)!r}"
                )
    return parts


def merge_parts(
    output_prefix: str | os.PathLike[str], *, summary: bool | str | os.PathLike[str] = True
) -> dict[str, Any]:
    """Merge the parts ``{output_prefix}-part-IIIII-of-NNNNN`` of a preprocess cut into tasks
    into ``{output_prefix}_{key}_document.bin/.idx`` for every key, and write the combined
    summary as :func:`tokshuf.preprocess` does (``summary``: ``True`` →
    ``{output_prefix}_summary.json``, a path → there, ``False`` → nowhere). The outputs are
    byte-identical to a single ``preprocess`` over all inputs (without ``shard``). Every part must
    be present and made by the same command (keys, options, tokenizer); the parts are left in place.
    """
    check_summary(summary)
    started = time.perf_counter()
    prefix = os.fspath(output_prefix)
    parts = _parts(prefix)
    if _core.is_remote(prefix):
        # Parts in object storage: local copies (the cache), merged in a staging directory, then
        # every .bin, every .idx and the summary uploaded in that order.
        with tempfile.TemporaryDirectory(
            prefix="tokshuf-merge-", dir=os.environ.get("TOKSHUF_STAGING_DIR")
        ) as tmp:
            local = os.path.join(tmp, prefix.rsplit("/", 1)[1])
            keys: list[str] = parts[0][1]["config"]["json_keys"]
            merged = _merge(local, [(_local_part(p, keys), s) for p, s in parts], started)
            for ext in ("bin", "idx"):
                for out in merged["outputs"]:
                    key_prefix = f"{prefix}_{out['key']}_document"
                    _core.upload(f"{out['prefix']}.{ext}", f"{key_prefix}.{ext}")
            for out in merged["outputs"]:
                out["prefix"] = f"{prefix}_{out['key']}_document"
    else:
        merged = _merge(prefix, parts, started)
    target = summary_target(summary, prefix + "_summary.json")
    if target is not None:
        write_summary(merged, target)
    log_run("merge", merged)
    return merged


def _local_part(part: str, keys: list[str]) -> str:
    """The local prefix of the copies of a remote part's datasets (one per key)."""
    local = ""
    for key in keys:
        local = _storage.local_prefix(f"{part}_{key}_document")
    return local[: -len(f"_{keys[-1]}_document")]


def _merge(prefix: str, parts: list[tuple[str, dict[str, Any]]], started: float) -> dict[str, Any]:
    """Merge local parts into ``prefix``'s datasets; the combined summary."""
    first = parts[0][1]
    keys: list[str] = first["config"]["json_keys"]
    outputs = []
    for key in keys:
        written = merge(
            [f"{part}_{key}_document" for part, _ in parts], f"{prefix}_{key}_document", summary=False
        )
        outputs.append({"key": key, "prefix": f"{prefix}_{key}_document", **written})
    summary: dict[str, Any] = {k: v for k, v in first.items() if k not in ("task", "outputs")}
    for field in _SUMS:
        summary[field] = sum(int(s.get(field, 0)) for _, s in parts)
    skipped: dict[str, int] = {}
    for _, s in parts:
        for reason, count in s.get("skipped", {}).items():
            skipped[reason] = skipped.get(reason, 0) + int(count)
    summary["skipped"] = dict(sorted(skipped.items()))
    summary["first_skipped"] = [r for _, s in parts for r in s.get("first_skipped", [])][:_FIRST_SKIPPED]
    summary["skipped_files"] = [r for _, s in parts for r in s.get("skipped_files", [])]
    summary["inputs"] = [p for _, s in parts for p in s.get("inputs", [])]
    summary["outputs"] = outputs
    summary["parts"] = len(parts)
    summary["task_seconds"] = sum(float(s.get("seconds", 0.0)) for _, s in parts)
    summary["seconds"] = time.perf_counter() - started
    return summary
