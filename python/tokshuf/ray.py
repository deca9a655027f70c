"""``preprocess`` and ``shuffle`` as tasks on a Ray cluster (``pip install "tokshuf[ray]"``).

The jobs are cut into the same tasks the command line runs one by one (``preprocess --shard``,
``shuffle --stage ... --task``), so the outputs are byte-identical to the one-node run, for any
number of tasks and nodes. Tasks exchange paths and small summaries only: token data never goes
through Ray's object store, and every path must be one that every node reads and writes the same
way: ``local_cell_dir`` on a shared filesystem, inputs and outputs there or in object storage.
Ray retries a task whose worker or node died (``max_retries``); tasks are idempotent, so a retry
or a duplicate leaves the same files.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import tokshuf
from tokshuf._deprecation import renamed_parameters
from tokshuf._shuffle import RENAMED_PARAMETERS
from tokshuf.errors import ConfigError

__all__ = ["preprocess", "shuffle"]

#: A test hook: a directory; while it holds a file `armed` and no file `fired`, the first task
#: attempt to get there creates `fired` and dies after doing its work, before it reports, as a
#: worker lost with its node would.
_KILL_ONCE = "TOKSHUF_TEST_RAY_KILL_ONCE"

Paths = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]


def _ray() -> Any:
    try:
        import ray
    except ImportError as e:  # pragma: no cover - the extra is installed where this is used
        raise ImportError('tokshuf.ray needs Ray: pip install "tokshuf[ray]"') from e
    return ray


def _connect(address: str | None) -> Any:
    ray = _ray()
    if not ray.is_initialized():
        ray.init(address=address, log_to_driver=False)
    return ray


def _default_tasks(ray: Any, cpus_per_task: int) -> int:
    cpus = int(ray.cluster_resources().get("CPU", 1))
    return max(1, cpus // cpus_per_task)


def _maybe_die() -> None:
    hook = os.environ.get(_KILL_ONCE)
    if not hook or not os.path.exists(os.path.join(hook, "armed")):
        return
    try:
        with open(os.path.join(hook, "fired"), "x"):
            pass
    except FileExistsError:
        return
    os._exit(1)


def _run_all(ray: Any, what: str, refs: list[Any], progress: bool) -> list[dict[str, Any]]:
    """Wait for ``refs`` (task summaries), drawing one status line on the driver."""
    started = time.perf_counter()
    done: dict[int, dict[str, Any]] = {}
    index = {ref: i for i, ref in enumerate(refs)}
    pending = list(refs)
    tty = sys.stderr.isatty()
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        for ref in ready:
            done[index[ref]] = ray.get(ref)
        if progress:
            tokens = sum(int(s.get("tokens", 0)) for s in done.values())
            rate = tokens / max(time.perf_counter() - started, 1e-9) / 1e6
            line = (
                f"{what}: {len(done)}/{len(refs)} tasks, {tokens / 1e6:,.1f} M tokens, {rate:,.2f} M tokens/s"
            )
            print(
                ("\r" + line) if tty else line,
                end="" if tty and pending else "\n",
                file=sys.stderr,
                flush=True,
            )
    return [done[i] for i in range(len(refs))]


def _remote(ray: Any, fn: Callable[..., dict[str, Any]], cpus: int, max_retries: int) -> Any:
    return ray.remote(num_cpus=cpus, max_retries=max_retries)(fn)


def _preprocess_task(args: tuple[Any, ...], kwargs: dict[str, Any], shard: tuple[int, int]) -> dict[str, Any]:
    summary = tokshuf.preprocess(*args, shard=shard, **kwargs)
    _maybe_die()
    return {k: summary[k] for k in ("documents", "tokens", "files", "seconds")}


def preprocess(
    inputs: Paths,
    output_prefix: str | os.PathLike[str],
    tokenizer: Any,
    json_keys: str | Sequence[str] = ("text",),
    *,
    tasks: int | None = None,
    cpus_per_task: int = 1,
    address: str | None = None,
    max_retries: int = 3,
    progress: bool = True,
    **options: Any,
) -> dict[str, Any]:
    """:func:`tokshuf.preprocess` on a Ray cluster: ``tasks`` tasks (default: one per
    ``cpus_per_task`` CPUs of the cluster) each tokenize a slice of the inputs into a part,
    then the driver merges the parts (:func:`tokshuf.merge_parts`) into the outputs of the
    one-node run. ``address`` is passed to ``ray.init`` when Ray is not initialized yet;
    ``options`` are :func:`tokshuf.preprocess`'s. Returns the merged summary."""
    if {"shard", "num_threads", "workers"} & set(options):
        raise ConfigError(
            "tokshuf.ray.preprocess sets shard and num_threads itself; use tasks and cpus_per_task"
        )
    ray = _connect(address)
    n = tasks or _default_tasks(ray, cpus_per_task)
    # Every part writes its summary (the merge reads them); ``summary`` is the merged run's.
    kwargs = {**options, "num_threads": cpus_per_task, "progress": "none", "summary": True}
    run = _remote(ray, _preprocess_task, cpus_per_task, max_retries)
    keys = (json_keys,) if isinstance(json_keys, str) else tuple(json_keys)
    args = (inputs, output_prefix, tokenizer, keys)
    _run_all(ray, "preprocess", [run.remote(args, kwargs, (i, n)) for i in range(n)], progress)
    return tokshuf.merge_parts(output_prefix, summary=options.get("summary", True))


def _shuffle_task(
    args: tuple[Any, ...], kwargs: dict[str, Any], stage: str, task: tuple[int, int]
) -> dict[str, Any]:
    summary = tokshuf.shuffle(*args, stage=stage, task=task, **kwargs)
    _maybe_die()
    return {k: summary.get(k, 0) for k in ("documents", "tokens", "contexts", "seconds")}


# Renamed here, so that an old spelling warns once, on the driver, and not in every task.
@renamed_parameters(**RENAMED_PARAMETERS)
def shuffle(
    inputs: Paths,
    local_cell_dir: str | os.PathLike[str],
    output: str | os.PathLike[str],
    tokenizer: Any,
    *,
    cells_tasks: int | None = None,
    shards_tasks: int | None = None,
    cpus_per_task: int = 1,
    address: str | None = None,
    max_retries: int = 3,
    progress: bool = True,
    **options: Any,
) -> tokshuf.ShuffleSummary:
    """:func:`tokshuf.shuffle` on a Ray cluster: ``cells_tasks`` stage-1 tasks, then
    ``shards_tasks`` stage-2 tasks (each default: one per ``cpus_per_task`` CPUs of the
    cluster), then the manifest on the driver. ``local_cell_dir`` and ``output`` must be shared
    by the nodes. The shards and manifest are byte-identical to the one-node run. Returns the
    run's summary."""
    if {"stage", "task", "num_threads"} & set(options):
        raise ConfigError("tokshuf.ray.shuffle sets stage, task and num_threads itself")
    ray = _connect(address)
    n = cells_tasks or _default_tasks(ray, cpus_per_task)
    m = shards_tasks or _default_tasks(ray, cpus_per_task)
    kwargs = {**options, "num_threads": cpus_per_task, "progress": "none"}
    run = _remote(ray, _shuffle_task, cpus_per_task, max_retries)
    args = (inputs, local_cell_dir, output, tokenizer)
    _run_all(ray, "shuffle cells", [run.remote(args, kwargs, "cells", (i, n)) for i in range(n)], progress)
    _run_all(ray, "shuffle shards", [run.remote(args, kwargs, "shards", (j, m)) for j in range(m)], progress)
    return tokshuf.shuffle(*args, stage="manifest", **kwargs)
