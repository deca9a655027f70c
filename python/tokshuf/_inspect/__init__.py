"""``tokshuf.inspect``: look at any tokshuf artifact before training on it.

:func:`inspect` recognizes what it is given and returns a typed report (``.to_dict()`` for JSON):

=============================================  =====================================================
given                                          report
=============================================  =====================================================
``x_text_document`` (or its ``.bin``/``.idx``)  :class:`IndexedReport` — documents, lengths, ids
an OLMo token file ``*.npy``                   :class:`TokenFileReport` — the same, per file
a shuffle output dir (``manifest.jsonl``)      :class:`ShardsReport` — manifest vs tars, padding
a :class:`NanosetConfig` or a ``.yaml``        :class:`BlendReport` — per source and split, a step
an instance dataset, ``tokshuf instances``'s   :class:`InstancesReport` — packing efficiency,
summary file or its index directory            documents per instance
a loader checkpoint dir or ``part-*.json``     :class:`CheckpointReport`
=============================================  =====================================================

Submodules import numpy and the dataset modules only when called.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from tokshuf.errors import ConfigError

if TYPE_CHECKING:
    from tokshuf._inspect.blend import BlendReport
    from tokshuf._inspect.checkpoint import CheckpointReport
    from tokshuf._inspect.indexed import IndexedReport
    from tokshuf._inspect.instances import InstancesReport
    from tokshuf._inspect.olmo import TokenFileReport
    from tokshuf._inspect.shards import ShardsReport

    AnyReport: TypeAlias = (
        IndexedReport | TokenFileReport | ShardsReport | BlendReport | InstancesReport | CheckpointReport
    )

__all__ = ["KINDS", "detect", "inspect"]

#: Messages go to ``tokshuf.inspect`` (a child of ``tokshuf``), for frameworks that route logs.
log = logging.getLogger("tokshuf.inspect")
# The library's rule: no output unless the application configures logging (without a handler,
# Python's last-resort handler would repeat the report's problems on stderr).
log.addHandler(logging.NullHandler())

#: What :func:`detect` can answer.
KINDS = ("indexed", "olmo", "shards", "blend", "instances", "checkpoint")


def detect(path: Any) -> str:
    """Which kind of artifact ``path`` is (one of :data:`KINDS`), from names, and for a URL whose
    name does not tell (``s3://bucket/x``), from what is stored under it."""
    from tokshuf._inspect.instances import SUMMARY_GLOB, is_cache_entry
    from tokshuf.instances._base import InstanceDataset
    from tokshuf.nanoset import NanosetConfig

    if isinstance(path, NanosetConfig):
        return "blend"
    if isinstance(path, InstanceDataset):
        return "instances"
    s = os.fspath(path)
    p = Path(s)
    if s.endswith((".yaml", ".yml")):
        return "blend"
    if fnmatch.fnmatch(p.name, SUMMARY_GLOB) or (p.is_dir() and is_cache_entry(p)):
        return "instances"
    if s.endswith(".npy"):
        return "olmo"
    if s.endswith((".bin", ".idx")) or Path(s + ".idx").is_file():
        return "indexed"
    from tokshuf import _core

    if _core.is_remote(s):
        return _detect_remote(s)
    if p.name == "manifest.jsonl" or (
        p.is_dir()
        and ((p / "manifest.jsonl").is_file() or (p / "commit.json").is_file() or any(p.glob("*.tar")))
    ):
        return "shards"
    if (p.is_file() and p.name.startswith("part-") and p.suffix == ".json") or (
        p.is_dir() and ((p / "COMMITTED").exists() or any(p.glob("part-*.json")))
    ):
        return "checkpoint"
    raise ConfigError(
        f"cannot tell what {s!r} is: expected a .bin/.idx prefix (or either file), an OLMo .npy token file, "
        "a shuffle output directory (manifest.jsonl + shard_*.tar), a blend .yaml, `tokshuf instances`'s "
        f"{SUMMARY_GLOB} (or the index directory beside it), or a loader checkpoint (a directory with "
        "COMMITTED, or a part-*.json)"
    )


def _detect_remote(url: str) -> str:
    """An object-storage URL: a shuffle output (its ``manifest.jsonl``, or the prefix holding
    one) or a ``.bin/.idx`` prefix (a local copy of the ``.idx``, the ``.bin`` read by ranges)."""
    from tokshuf import _core

    root = url.rstrip("/")
    # A .bin/.idx prefix never ends with "/": a directory does.
    if root.endswith("/manifest.jsonl") or url.endswith("/") or _core.remote_exists(root + "/manifest.jsonl"):
        return "shards"
    if _core.remote_exists(url + ".idx"):
        return "indexed"
    raise ConfigError(
        f"cannot tell what {url!r} is: neither {root}/manifest.jsonl (a shuffle output) nor {url}.idx "
        "(a .bin/.idx prefix) exists"
    )


def inspect(path: Any, *, kind: str | None = None, **options: Any) -> AnyReport:
    """Report on ``path`` (anything :func:`detect` recognizes, or force ``kind``).

    ``options`` go to the kind's function, and those that do not apply to it are ignored, so one
    set of command-line options serves every path:
    :func:`~tokshuf._inspect.indexed.inspect_indexed` (``scan``, ``top``, ``doc``, ``tokenizer``),
    :func:`~tokshuf._inspect.olmo.inspect_token_file` (also ``dtype``, ``eos_token_id``, ``bos_token_id``,
    ``vocab_size``), :func:`~tokshuf._inspect.shards.inspect_shards` (``verify``, ``eos_token_id``,
    ``pad_token_id``, ``bos_token_id``, ``top``), :func:`~tokshuf._inspect.blend.inspect_blend` (``step``,
    ``batch_size``, ``dp_rank``, ``dp_size``, ``split``, ``tokenizer``),
    :func:`~tokshuf._inspect.instances.inspect_instances` (none).
    """
    import inspect as _pyinspect

    kind = kind or detect(path)
    if kind not in KINDS:
        raise ConfigError(f"kind must be one of {KINDS}, got {kind!r}")
    fn = _function(kind)
    accepted = set(_pyinspect.signature(fn).parameters)
    name = os.fspath(path) if isinstance(path, str | os.PathLike) else f"<{type(path).__name__}>"
    log.info("inspect: %s is a %s artifact", name, kind)
    start = time.perf_counter()
    report = fn(path, **{k: v for k, v in options.items() if k in accepted and v is not None})
    log.info("inspect: %s done in %.3f s", name, time.perf_counter() - start)
    for problem in getattr(report, "problems", []):
        log.warning("inspect: %s: %s", name, problem)
    return report


def _function(kind: str) -> Any:
    if kind == "indexed":
        from tokshuf._inspect.indexed import inspect_indexed

        return inspect_indexed
    if kind == "olmo":
        from tokshuf._inspect.olmo import inspect_token_file

        return inspect_token_file
    if kind == "shards":
        from tokshuf._inspect.shards import inspect_shards

        return inspect_shards
    if kind == "blend":
        from tokshuf._inspect.blend import inspect_blend

        return inspect_blend
    if kind == "instances":
        from tokshuf._inspect.instances import inspect_instances

        return inspect_instances
    from tokshuf._inspect.checkpoint import inspect_checkpoint

    return inspect_checkpoint
