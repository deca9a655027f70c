"""PyTorch integration: the stream as an ``IterableDataset``, and a ``DataLoader`` whose state
is exactly what the training loop consumed.

Each DataLoader worker of each rank is one global worker (``rank * num_workers + worker_id`` of
``world_size * num_workers``), and produces whole batches in Rust. Workers run ahead of the
training loop (prefetch); to checkpoint what was *consumed*, every batch carries its worker id
and index, and every ``snapshot_every`` batches a worker attaches its (small) state. The loader
keeps, per worker, the last snapshot and the batches consumed since, and ``state_dict()`` replays
those few batches in Rust from the snapshot. Prefetched batches are never counted.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Any, get_args

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from tokshuf import _limits
from tokshuf._summaries import BatchOutput
from tokshuf.errors import ConfigError
from tokshuf.stream.mix import Phase
from tokshuf.stream.state import state_step
from tokshuf.stream.stream import TokenStream, WorkerStream

__all__ = ["StreamingDataLoader", "StreamingDataset", "distributed_rank"]

_META = "_tokshuf"


def distributed_rank() -> tuple[int, int]:
    """``(rank, world_size)`` from ``torch.distributed`` if initialized, else ``RANK`` /
    ``WORLD_SIZE`` from the environment, else ``(0, 1)``."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


def _identity(x: Any) -> Any:
    return x


class StreamingDataset(IterableDataset[dict[str, Any]]):
    """A :class:`TokenStream` as a torch ``IterableDataset`` of whole batches.

    Use it with :class:`StreamingDataLoader` (exact, rescalable checkpoints), or with torchdata's
    ``StatefulDataLoader(dataset, batch_size=None)``, which calls :meth:`state_dict` /
    :meth:`load_state_dict` in each worker (exact resume with the same number of workers).
    """

    def __init__(
        self,
        stream: TokenStream,
        rank: int | None = None,
        world_size: int | None = None,
        output: BatchOutput = "torch",
        snapshot_every: int | None = None,
    ) -> None:
        super().__init__()
        if output not in get_args(BatchOutput):
            raise ConfigError(f"output {output!r}: expected one of {', '.join(get_args(BatchOutput))}")
        r, w = distributed_rank()
        self.stream = stream
        self.world_size = _limits.integer(w if world_size is None else world_size, "world_size", 1)
        self.rank = _limits.integer(r if rank is None else rank, "rank", 0, self.world_size - 1)
        self.output = output
        self.snapshot_every = _limits.integer(snapshot_every, "snapshot_every", 1, optional=True)
        self._start: Mapping[str, Any] | None = None
        self._live: WorkerStream | None = None
        self._num_workers = 1
        self._meta = False
        self._rotation = 0

    def _where(self) -> tuple[int, int, int]:
        info = get_worker_info()
        nw, wid = (info.num_workers, info.id) if info is not None else (1, 0)
        # torch deals batches round-robin from its worker 0; after a resume the next batch
        # belongs to another global worker, so torch worker i plays global worker i + rotation.
        return self.rank * nw + (wid + self._rotation) % nw, self.world_size * nw, nw

    def _open(self, g: int, nw: int, state: Mapping[str, Any] | None) -> WorkerStream:
        """Global worker ``g``'s stream from ``state``, placed on the training steps: a rank's
        ``nw`` workers take turns, so each worker's batches are ``nw`` steps apart; its first
        comes at the state's step plus its place in the turn after the resume (its own recorded
        step when the topology is the one saved)."""
        n = self.world_size * nw
        same = state is not None and (state["topology"]["workers"], state["topology"]["num_workers"]) == (
            n,
            nw,
        )
        if same and state is not None and bool((state["workers"][:, 0] == g).any()):
            return self.stream.worker(g, n, state, step_stride=nw)
        start = 0 if state is None else state_step(state)
        step = start + (g % nw - self._rotation) % nw
        return self.stream.worker(g, n, state, step=step, step_stride=nw)

    def _every(self, n_workers: int) -> int:
        """Batches between state snapshots: about an eighth of the batch bytes per batch goes to
        state (rows of the owned shards, buffered runs), and replay stays under 256 batches."""
        if self.snapshot_every is not None:
            return self.snapshot_every
        s = self.stream
        rows = len(s.datasets) * -(-s.logical_shards // n_workers)
        state_bytes = 56 * rows + 4 * 48 * s.shuffle_window
        batch_bytes = 2 * s.batch_size * s.sequence_length * np.dtype(s.token_dtype).itemsize
        return int(min(256, max(1, -(-8 * state_bytes // batch_bytes))))

    def __iter__(self) -> Iterator[dict[str, Any]]:
        g, n, nw = self._where()
        w = self._open(g, nw, self._start)
        self._live, self._num_workers = w, nw
        every = self._every(n)
        k = 0
        while True:
            batch: dict[str, Any] = w.next_batch()
            k += 1
            if self.output == "torch":
                batch = {key: torch.from_numpy(v) for key, v in batch.items()}
            if self._meta:
                batch[_META] = (g, k, w.tables() if k % every == 0 else None)
            yield batch

    # torchdata's StatefulDataLoader protocol (called inside each worker) ----------------------
    def state_dict(self) -> dict[str, Any]:
        """The state after the last batch this worker yielded (``{}`` before the first)."""
        if self._live is None:
            return dict(self._start) if self._start else {}
        return self._live.state_dict(self.world_size, self._num_workers, self.rank)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Start the next iteration from ``state`` (``{}``: fresh)."""
        self._start = self.stream.check_state(state, self.world_size) if state else None
        self._live = None


class StreamingDataLoader(DataLoader[dict[str, Any]]):
    """A ``torch.utils.data.DataLoader`` over a :class:`StreamingDataset` whose
    :meth:`state_dict` matches the batches handed to the training loop, for any
    ``num_workers`` and prefetch depth, and whose :meth:`load_state_dict` accepts a state saved
    by any topology (same number of global workers: bit-exact; another: rescaled, nothing read
    before the checkpoint is read again within its shard's epoch).

    Iteration never restarts the stream: a new ``iter()`` continues from the consumed state.
    """

    def __init__(
        self,
        dataset: StreamingDataset,
        *,
        num_workers: int = 0,
        pin_memory: bool = False,
        prefetch_factor: int | None = None,
        timeout: float = 0,
        multiprocessing_context: Any = None,
        worker_init_fn: Any = None,
    ) -> None:
        if not isinstance(dataset, StreamingDataset):
            raise ConfigError("StreamingDataLoader needs a StreamingDataset")
        super().__init__(
            dataset,
            batch_size=None,
            collate_fn=_identity,
            num_workers=num_workers,
            pin_memory=pin_memory,
            prefetch_factor=prefetch_factor,
            timeout=timeout,
            multiprocessing_context=multiprocessing_context,
            worker_init_fn=worker_init_fn,
            persistent_workers=False,
        )
        self._ds = dataset
        self._base: Mapping[str, Any] | None = dataset._start
        self._progress: dict[int, tuple[int, int, Any]] = {}
        self._generation = 0
        self._cached: dict[str, Any] | None = None
        # Per global worker, a main-process copy of its stream at some consumed position, so
        # that frequent state_dict() calls only replay what was consumed since the last one.
        self._replay: dict[int, tuple[int, WorkerStream]] = {}
        self._mix: list[Phase] | None = None

    @property
    def stream(self) -> TokenStream:
        return self._ds.stream

    def _topology(self) -> dict[str, Any]:
        nw = max(self.num_workers, 1)
        ds = self._ds
        return {
            "world_size": ds.world_size,
            "num_workers": nw,
            "workers": ds.world_size * nw,
            "ranks": [ds.rank],
        }

    def __iter__(self) -> _TrackedIterator:  # type: ignore[override]
        start = self.state_dict() if self._progress else self._base
        self._base, self._progress, self._cached, self._replay, self._mix = start, {}, None, {}, None
        self._generation += 1
        self._ds._start = start
        self._ds._meta = True
        self._ds._rotation = self._next_worker(start)
        return _TrackedIterator(self, super().__iter__(), self._generation)

    def _next_worker(self, state: Mapping[str, Any] | None) -> int:
        """The local worker whose batch comes next. Batches are consumed round-robin, so the
        workers' batch counters read [k+1]*j + [k]*(n-j) and j is their sum modulo n."""
        topo = self._topology()
        nw = topo["num_workers"]
        if state is None or state["topology"]["workers"] != topo["workers"] or nw == 1:
            return 0
        first = self._ds.rank * nw
        workers = state["workers"]
        mine = workers[(workers[:, 0] >= first) & (workers[:, 0] < first + nw)]
        return int(mine[:, 2].sum()) % nw

    def _consumed(self, g: int, k: int, snapshot: Any) -> None:
        if snapshot is not None:
            self._progress[g] = (k, k, snapshot)
        else:
            _, sk, snap = self._progress.get(g, (0, 0, None))
            self._progress[g] = (k, sk, snap)
        self._cached = None

    def state_dict(self) -> dict[str, Any]:
        """The state after the last batch the training loop received (this rank's workers)."""
        if self._cached is not None:
            return self._cached
        topo = self._topology()
        nw, rank = topo["num_workers"], self._ds.rank
        sections: dict[int, Any] = {}
        buffer_cost = self.stream.shuffle_window / self.stream.batch_size  # in batches of reading
        for wid in range(nw):
            g = rank * nw + wid
            k, sk, snap = self._progress.get(g, (0, 0, None))
            if snap is not None and k == sk:
                sections[g] = snap
                continue
            pos, w = self._replay.get(g, (-1, None))
            # Go on from the kept copy, or restart from the snapshot (which re-reads the
            # buffered lines), whichever replays less.
            if w is None or pos > k or (snap is not None and (k - sk) + buffer_cost < k - pos):
                origin = (
                    self.stream.state({g: snap}, topo, self._run_mix()) if snap is not None else self._base
                )
                pos, w = sk, self._ds._open(g, nw, origin)
            w.skip(k - pos)
            self._replay[g] = (k, w)
            sections[g] = w.tables()
        self._cached = self.stream.state(sections, topo, self._run_mix())
        return self._cached

    def _run_mix(self) -> list[Phase]:
        """The schedule the workers of this iteration run (from the state they started at)."""
        if self._mix is None:
            self._mix = self.stream.effective_mix(self._base, self._ds.world_size)
        return self._mix

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from ``state`` at the next ``iter()`` (live iterators become invalid)."""
        state = self.stream.check_state(state, self._ds.world_size)
        self._base, self._progress, self._cached, self._replay, self._mix = state, {}, None, {}, None
        self._generation += 1

    def save(self, directory: str | os.PathLike[str], **kwargs: Any) -> str:
        """Write this rank's state into a checkpoint directory (see :func:`save_state`)."""
        from tokshuf.stream.checkpoint import save_state

        return save_state(directory, self.state_dict(), **kwargs)

    def load(self, directory: str | os.PathLike[str]) -> None:
        """Load a committed checkpoint directory written by any topology."""
        from tokshuf.stream.checkpoint import load_state

        self.load_state_dict(load_state(directory))


class _TrackedIterator:
    def __init__(self, loader: StreamingDataLoader, inner: Iterator[dict[str, Any]], generation: int) -> None:
        self.loader, self.inner, self.generation = loader, inner, generation

    def __iter__(self) -> _TrackedIterator:
        return self

    def __next__(self) -> dict[str, Any]:
        if self.generation != self.loader._generation:
            raise RuntimeError(
                "this iterator is stale: the loader's state was replaced (load_state_dict) or a newer "
                "iterator was created; call iter(loader) again"
            )
        batch = next(self.inner)
        g, k, snap = batch.pop(_META)
        self.loader._consumed(g, k, snap)
        return batch
