"""Putting a job's task parts together: ``tokshuf preprocess --shard i/N`` writes part ``i``;
:func:`merge_parts` writes, from the N parts, the outputs of the one-task run, byte for byte.
"""

from __future__ import annotations

import json
import os
import re
import time
from typing import Any

from tokshuf import _core, _storage
from tokshuf._log import log_run
from tokshuf._summary_file import check_summary, staging_directory, summary_target, write_summary
from tokshuf.errors import ConfigError

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


def _record(part: str) -> dict[str, Any] | None:
    """The commit record of a part (``None`` for a part written before records existed)."""
    url = part + ".commit.json"
    if _core.is_remote(url):
        if not _core.remote_exists(url):
            return None
        url = _core.local_copy(url)
    try:
        with open(url, encoding="utf-8") as f:
            record: dict[str, Any] = json.load(f)
    except FileNotFoundError:
        return None
    return record


def _listing(parts: list[tuple[str, dict[str, Any]]]) -> Any:
    """The input listing every part was cut from, checked to be one and the same: parts of
    different listings (the input directory changed between tasks) would read some files twice
    and miss others. ``None`` when the parts predate commit records."""
    records = [(part, _record(part)) for part, _ in parts]
    if all(r is None for _, r in records):
        return None
    for part, r in records:
        if r is None or r.get("state") != "committed":
            what = "has no commit record" if r is None else "is not committed (its run did not finish)"
            raise ConfigError(f"{part} {what}; rerun its task")
    first, listing = records[0][0], records[0][1]["inputs"]  # type: ignore[index]
    for part, r in records[1:]:
        other = r["inputs"]  # type: ignore[index]
        if other != listing:
            raise ConfigError(
                f"{part} and {first} were cut from different input listings "
                f"({_difference(listing, other)}): the inputs changed between the tasks; rerun every "
                "task on the same inputs"
            )
    return listing


def _name(identity: dict[str, Any]) -> str:
    return str(identity.get("path") or identity.get("url") or "?")


def _difference(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> str:
    """What tells two listings apart: the files only one of them lists (changed files count as
    listed by one and not the other)."""
    only_a = [_name(i) for i in a if i not in b]
    only_b = [_name(i) for i in b if i not in a]
    said = []
    if only_b:
        said.append(f"only the first lists {', '.join(only_b[:3])}")
    if only_a:
        said.append(f"only the second lists {', '.join(only_a[:3])}")
    return "; ".join(said) or "the same files in another order"


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
    if not prefix:
        raise ConfigError("output_prefix must not be empty")
    parts = _parts(prefix)
    listing = _listing(parts)
    target = summary_target(summary, prefix + "_summary.json")
    run, record = {"parts": len(parts)}, prefix + ".commit.json"
    if _core.is_remote(prefix):
        # Parts in object storage: local copies (the cache), merged in a staging directory, then
        # published as one set: every .bin, every .idx, the summary, the commit record last.
        with staging_directory("tokshuf-merge") as tmp:
            local = os.path.join(tmp, prefix.rsplit("/", 1)[1])
            keys: list[str] = parts[0][1]["config"]["json_keys"]
            staged = _core.StagedSet()
            merged = _merge(staged, local, [(_local_part(p, keys), s) for p, s in parts], started)
            staged.commit(local + ".commit.json", "merge --parts", run, listing)
            files = [
                (f"{out['prefix']}.{ext}", f"{prefix}_{out['key']}_document.{ext}")
                for ext in ("bin", "idx")
                for out in merged["outputs"]
            ]
            for out in merged["outputs"]:
                out["prefix"] = f"{prefix}_{out['key']}_document"
            remote_summary = (target, merged) if target is not None and _core.is_remote(target) else None
            _core.publish_remote(record, "merge --parts", run, listing, files, remote_summary)
            if target is not None and remote_summary is None:
                write_summary(merged, target)
    else:
        staged = _core.StagedSet()
        merged = _merge(staged, prefix, parts, started)
        local_summary = None
        if target is not None and not _core.is_remote(target):
            local_summary = (target, merged)
        staged.commit(record, "merge --parts", run, listing, local_summary)
        if target is not None and local_summary is None:
            write_summary(merged, target)
    log_run("merge", merged)
    return merged


def _local_part(part: str, keys: list[str]) -> str:
    """The local prefix of the copies of a remote part's datasets (one per key)."""
    local = ""
    for key in keys:
        local = _storage.local_prefix(f"{part}_{key}_document")
    return local[: -len(f"_{keys[-1]}_document")]


def _merge(
    staged: _core.StagedSet, prefix: str, parts: list[tuple[str, dict[str, Any]]], started: float
) -> dict[str, Any]:
    """Merge local parts into ``prefix``'s datasets, staged in ``staged``; the combined summary."""
    first = parts[0][1]
    keys: list[str] = first["config"]["json_keys"]
    outputs = []
    for key in keys:
        written = staged.merge([f"{part}_{key}_document" for part, _ in parts], f"{prefix}_{key}_document")
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
