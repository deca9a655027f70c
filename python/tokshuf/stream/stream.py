"""The stream: sub-datasets plus settings, and the per-worker iterators that produce batches."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal, get_args

import numpy as np
import numpy.typing as npt

from tokshuf import _core, _limits
from tokshuf._deprecation import renamed_attribute, renamed_parameters
from tokshuf._summaries import TokenDtype
from tokshuf.errors import ConfigError, FormatError
from tokshuf.stream.mix import (
    MixPhase,
    Phase,
    describe,
    effective_mix,
    integer_weights,
    mix_json,
    phase_at,
    resolve_schedule,
)
from tokshuf.stream.sources import SubDataset
from tokshuf.stream.state import (
    _IdentityCache,
    check_compatible,
    checked,
    make_state,
    state_mix,
    state_step,
    worker_tables,
)

__all__ = ["TokenStream", "WorkerStream", "integer_weights"]

_log = logging.getLogger("tokshuf")
# Mix changes already logged, per state (its rows table): a loader opens one worker per
# DataLoader worker from the same state, and says it once.
_LOGGED = _IdentityCache()

#: Columns of the ``segments`` array of a batch (with ``provenance=True``).
SEGMENT_COLUMNS = ("line", "at", "sub", "shard", "epoch", "doc", "start", "len")
_TOKEN_DTYPES: tuple[TokenDtype, ...] = get_args(TokenDtype)


class TokenStream:
    """Sub-datasets and the settings that define the token stream of every global worker.

    Parameters
    ----------
    datasets : sequence of SubDataset
        The mix, in order (the order is part of the checkpoint's identity).
    sequence_length : int
        Tokens per training sequence; lines hold ``sequence_length + 1`` tokens when
        ``add_extra_token`` (``input`` and ``label`` are the shifted halves). Recorded in
        checkpoints as ``seq_length``.
    batch_size : int
        Lines per batch (per global worker and per step).
    seed : int
        Seed of every permutation and random draw.
    logical_shards : int
        Documents of each sub-dataset are split into this many shards; it caps the number of
        global workers (GPUs x DataLoader workers) and must stay fixed across restarts.
    chunk_size : int
        Documents are cut into chunks of at most this many tokens; mixing switches sub-datasets
        only at chunk ends and keeps each within one chunk of its exact share.
    bos_token_id, eos_token_id : int, optional
        Added around every document (structurally; ids inside documents are never interpreted).
    strip_tokens : sequence of int
        Removed from a document's ends (one token at each end at most) before bos/eos.
    min_length : int
        Documents shorter than this with bos/eos are skipped; empty ones always are.
    shuffle_window : int
        Lines in each worker's shuffle buffer (0: none).
    token_dtype : str
        ``int64`` (default, what embeddings take), ``int32`` or ``uint32``.
    doc_lens, position_ids, label_mask_boundaries, provenance : bool
        Extra batch fields: per-line document run lengths (``doc_lens``, zero-padded, OLMo's
        layout), positions restarting at every run (``position_ids``), ``label = -100`` where
        the next token starts another document, and the runs themselves (``segments``).
    validate : bool
        Check every ``.idx`` entry again whenever a worker opens the files (they are checked
        once when the :class:`SubDataset` is built; reads are always bounds-checked).
    mix_schedule : sequence of MixPhase (or mappings with its fields)
        Phases of the mix: from its start step (or token count) on, a phase's weights apply to
        every token drawn; before the first phase, the sub-datasets' own weights. See
        ``docs/mixes.md``.
    """

    seq_length = renamed_attribute[int]("sequence_length")
    bos_token = renamed_attribute[int | None]("bos_token_id")
    eos_token = renamed_attribute[int | None]("eos_token_id")

    @renamed_parameters(seq_length="sequence_length", bos_token="bos_token_id", eos_token="eos_token_id")
    def __init__(
        self,
        datasets: Sequence[SubDataset],
        *,
        sequence_length: int,
        batch_size: int = 1,
        seed: int = 0,
        logical_shards: int = 960,
        chunk_size: int = 1024,
        bos_token_id: int | None = None,
        eos_token_id: int | None = None,
        strip_tokens: Sequence[int] = (),
        min_length: int = 1,
        shuffle_window: int = 0,
        add_extra_token: bool = True,
        token_dtype: TokenDtype = "int64",
        doc_lens: bool = True,
        position_ids: bool = False,
        label_mask_boundaries: bool = False,
        provenance: bool = False,
        validate: bool = False,
        mix_schedule: Sequence[MixPhase | Mapping[str, Any]] | None = None,
    ) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise ConfigError("a stream needs at least one sub-dataset")
        names = [d.name for d in self.datasets]
        if len(set(names)) != len(names):
            raise ConfigError(f"sub-dataset names must be unique: {names}")
        # The rules of tokshuf._limits, as the command line's: integers (numpy's too), never a
        # float or a string cut to one, within bounds that keep every buffer allocatable.
        integer = _limits.integer
        sequence_length = _limits.sequence_length(sequence_length)
        batch_size = integer(batch_size, "batch_size", 1)
        chunk_size = integer(chunk_size, "chunk_size", 1)
        logical_shards = integer(logical_shards, "logical_shards", 1, _limits.MAX_LOGICAL_SHARDS)
        seed = integer(seed, "seed", 0, 2**64 - 1)
        bos_token_id = _limits.token_id(bos_token_id, "bos_token_id", optional=True)
        eos_token_id = _limits.token_id(eos_token_id, "eos_token_id", optional=True)
        strip_tokens = [_limits.token_id(t, "strip_tokens") for t in strip_tokens]
        min_length = integer(min_length, "min_length", 0)
        shuffle_window = integer(shuffle_window, "shuffle_window", 0)
        if token_dtype not in _TOKEN_DTYPES:
            raise ConfigError(f"token_dtype {token_dtype!r}: expected one of {', '.join(_TOKEN_DTYPES)}")
        if label_mask_boundaries and (token_dtype == "uint32" or not add_extra_token):
            raise ConfigError("label_mask_boundaries needs a signed token_dtype and add_extra_token=True")
        self.sequence_length = int(sequence_length)
        self.batch_size = int(batch_size)
        self.seed = int(seed)
        self.logical_shards = int(logical_shards)
        self.chunk_size = int(chunk_size)
        self.bos_token_id = None if bos_token_id is None else int(bos_token_id)
        self.eos_token_id = None if eos_token_id is None else int(eos_token_id)
        self.strip_tokens = sorted({int(t) for t in strip_tokens})
        self.min_length = int(min_length)
        self.shuffle_window = int(shuffle_window)
        self.add_extra_token = bool(add_extra_token)
        self.token_dtype = token_dtype
        self.doc_lens = doc_lens
        self.position_ids = position_ids
        self.label_mask_boundaries = label_mask_boundaries
        self.provenance = provenance
        self.validate = validate
        self.weights = integer_weights([d.weight for d in self.datasets])
        self.mix_schedule = [MixPhase.of(p) for p in mix_schedule or ()]
        self.schedule(1)  # every phase's weights checked now, not in a worker
        self._core_json: dict[tuple[Phase, ...], str] = {}
        self._manifest: dict[str, Any] | None = None

    @property
    def line_len(self) -> int:
        return self.sequence_length + int(self.add_extra_token)

    @property
    def names(self) -> list[str]:
        return [d.name for d in self.datasets]

    def schedule(self, world_size: int = 1) -> list[Phase]:
        """The configured mix schedule as (first step, integer weights), the first at step 0;
        token counts become steps of ``world_size x batch_size x sequence_length`` tokens."""
        tps = world_size * self.batch_size * self.sequence_length
        return resolve_schedule(self.weights, self.mix_schedule, self.names, tps)

    def effective_mix(
        self,
        state: Mapping[str, Any] | None,
        world_size: int = 1,
        *,
        log: Literal["no", "once", "always"] = "no",
    ) -> list[Phase]:
        """The schedule workers resuming from ``state`` run: the recorded phases before the
        state's step, the configured ones from it on (a change of the weights in force there
        starts a phase at that step; said on the ``tokshuf`` logger with ``log``: ``"once"`` per
        state, or ``"always"``)."""
        configured = self.schedule(world_size)
        if state is None:
            return configured
        state = checked(state)
        step = state_step(state)
        mix, changed = effective_mix(state_mix(state), configured, step)
        if changed and log != "no":
            self._log_change(state, mix, configured, step, again=log == "always")
        return mix

    def _log_change(
        self,
        state: Mapping[str, Any],
        mix: Sequence[Phase],
        configured: Sequence[Phase],
        step: int,
        again: bool = False,
    ) -> None:
        recorded = state_mix(state)
        was = recorded[phase_at(recorded, step)]
        now = [p for p in mix if p[0] >= step] or [mix[phase_at(mix, step)]]
        phases = "; ".join(f"from step {s}: {describe(w, self.names)}" for s, w in now)
        msg = (
            f"the mix differs from the checkpoint's from its step {step} on, and the new one applies from "
            f"there: {phases} (the checkpoint had {describe(was[1], self.names)} since step {was[0]}); "
            f"tokens drawn before step {step} keep their mix"
        )
        rows = state["rows"]
        logged = _LOGGED.get(rows)
        if logged is None:
            logged = set()
            if not rows.flags.writeable:
                _LOGGED.put(rows, logged)
        if again or msg not in logged:
            logged.add(msg)
            # Weights that change at the resume step itself (no phase of the schedule starts
            # there) are a decision of this resume: said at WARNING, seen without configuring
            # logging. Phases that differ only later are said at INFO.
            inserted = any(s == step for s, _ in mix) and not any(s == step for s, _ in configured)
            _log.log(logging.WARNING if inserted else logging.INFO, msg)

    def core_config(self, mix: Sequence[Phase] | None = None) -> dict[str, Any]:
        """The settings the Rust core takes (``tokshuf_core::stream::StreamConfig``)."""
        return {
            "seed": self.seed,
            "logical_shards": self.logical_shards,
            "mix": mix_json(self.schedule(1) if mix is None else mix),
            "line_len": self.line_len,
            "chunk_size": self.chunk_size,
            "bos": self.bos_token_id,
            "eos": self.eos_token_id,
            "strip": self.strip_tokens,
            "min_length": self.min_length,
            "shuffle_window": self.shuffle_window,
        }

    def manifest(self, mix: Sequence[Phase] | None = None) -> dict[str, Any]:
        """The identity a checkpoint records and is checked against, with the schedule the
        workers ran (``mix``, default the configured one at world size 1; never checked)."""
        return {**self._identity(), "mix": mix_json(self.schedule(1) if mix is None else mix)}

    def _identity(self) -> dict[str, Any]:
        if self._manifest is None:
            self._manifest = {
                "seed": self.seed,
                "logical_shards": self.logical_shards,
                "datasets": [d.describe() for d in self.datasets],
                "document": {
                    "bos": self.bos_token_id,
                    "eos": self.eos_token_id,
                    "strip": self.strip_tokens,
                    "min_length": self.min_length,
                    "chunk_size": self.chunk_size,
                },
                "packing": {
                    "seq_length": self.sequence_length,
                    "add_extra_token": self.add_extra_token,
                    "batch_size": self.batch_size,
                    "shuffle_window": self.shuffle_window,
                },
            }
        return self._manifest

    def check_state(self, state: Mapping[str, Any], world_size: int = 1) -> dict[str, Any]:
        """``state`` checked (see :func:`check_compatible`), as version 2; raises if it cannot
        continue this stream. Logs a change of the mix from the state's step on (every load:
        the workers then opened from it do not say it again)."""
        state = checked(state)
        self._check_identity(state)
        self.effective_mix(state, world_size, log="always")
        return state

    def _check_identity(self, state: Mapping[str, Any]) -> None:
        check_compatible(state["manifest"], self._identity())
        p_s, p_c = state["manifest"]["packing"], self._identity()["packing"]
        resized = (p_s["seq_length"], p_s["add_extra_token"]) != (p_c["seq_length"], p_c["add_extra_token"])
        if resized and len(state["buffer"]):
            raise ConfigError(
                f"seq_length changed ({p_s['seq_length']} -> {p_c['seq_length']}) while the shuffle buffer "
                "holds lines of the old length; resume with the old sequence_length, or from a state without "
                "buffer"
            )

    def worker(
        self,
        worker: int,
        n_workers: int,
        state: Mapping[str, Any] | None = None,
        *,
        step: int | None = None,
        step_stride: int = 1,
    ) -> WorkerStream:
        """The stream of global worker ``worker`` of ``n_workers``, fresh or from ``state``
        (any topology: the same worker count resumes bit-exactly, another one rescales).

        ``step`` is the training step of its next batch and ``step_stride`` the steps between
        its batches: what places its batches in the mix schedule. By default each worker counts
        its own batches (a worker per rank): from 0, or from its recorded step (the state's step
        after a rescale). :class:`StreamingDataLoader` passes its DataLoader's turns."""
        n_workers = _limits.integer(n_workers, "n_workers", 1, 2**32 - 1)
        worker = _limits.integer(worker, "worker", 0, n_workers - 1)
        step_stride = _limits.integer(step_stride, "step_stride", 1, n_workers)
        if step is not None:
            step = _limits.integer(step, "step", 0, _limits.COUNT_MAX)
        if n_workers % step_stride:
            raise ConfigError(f"step_stride {step_stride} must divide the {n_workers} global workers")
        world = n_workers // step_stride
        if state is not None:
            state = checked(state)
            self._check_identity(state)
        mix = self.effective_mix(state, world, log="once")
        tables = worker_tables(state, worker, n_workers, step=step, step_stride=step_stride, mix=mix)
        first = step if step is not None else (0 if tables is None else tables["step"])
        sources = [d.core_source(self.validate) for d in self.datasets]
        key = tuple(mix)
        if key not in self._core_json:
            self._core_json[key] = json.dumps(self.core_config(mix))
        core = _core.StreamWorker(
            self._core_json[key], sources, worker, n_workers, tables, step=first, step_stride=step_stride
        )
        found = list(core.num_docs)
        expected = [d.num_docs for d in self.datasets]
        if found != expected:
            names = [d.name for d in self.datasets]
            raise FormatError(
                f"the sub-datasets {names} now hold {found} documents, not the {expected} counted when they "
                "were built: a file changed underneath the loader"
            )
        return WorkerStream(self, core, worker, n_workers, mix)

    def state(
        self,
        sections: Mapping[int, Mapping[str, Any]],
        topology: Mapping[str, Any],
        mix: Sequence[Phase] | None = None,
    ) -> dict[str, Any]:
        """A state dict from worker sections (``WorkerStream.tables()``) of workers that ran the
        schedule ``mix`` (default: the configured one)."""
        return make_state(self.manifest(mix), topology, sections)


class WorkerStream:
    """One global worker's batches; ``iter()`` gives an endless iterator of batch dicts."""

    def __init__(
        self,
        stream: TokenStream,
        core: _core.StreamWorker,
        worker: int,
        n_workers: int,
        mix: Sequence[Phase] | None = None,
    ) -> None:
        self.stream = stream
        self.core = core
        self.worker = worker
        self.n_workers = n_workers
        #: The schedule this worker runs (recorded phases, then the configured ones).
        self.mix = list(stream.schedule(1) if mix is None else mix)
        self._pool: list[tuple[npt.NDArray[Any], ...]] = []

    def __iter__(self) -> Iterator[dict[str, npt.NDArray[Any]]]:
        while True:
            yield self.next_batch()

    @property
    def batches(self) -> int:
        """Batches produced since the fresh start of the stream (or the last rescale)."""
        return self.core.batches

    @property
    def step(self) -> int:
        """The training step of the next batch."""
        return self.core.step

    def next_batch(self) -> dict[str, npt.NDArray[Any]]:
        """``input``, ``label`` (``[batch, sequence_length]``), and the optional fields."""
        s = self.stream
        b, n = s.batch_size, s.sequence_length
        arrays = self._arrays()
        inp, lab, pos = (
            arrays[0],
            arrays[1] if s.add_extra_token else None,
            arrays[2] if s.position_ids else None,
        )
        del arrays
        raw = self.core.next_batch(b, inp, lab, pos)
        seg = np.frombuffer(raw, dtype="<u8").reshape(-1, 8)
        out: dict[str, npt.NDArray[Any]] = {"input": inp, "label": inp if lab is None else lab}
        if s.label_mask_boundaries and lab is not None:
            at = seg[:, 1].astype(np.int64)
            sel = (at >= 1) & (at <= n)
            lab[seg[sel, 0].astype(np.int64), at[sel] - 1] = -100
        if s.doc_lens:
            out["doc_lens"] = _doc_lens(seg, b, n)
        if pos is not None:
            out["position_ids"] = pos
        if s.provenance:
            out["segments"] = seg.astype(np.int64)
        return out

    def _arrays(self) -> tuple[npt.NDArray[Any], ...]:
        """Output arrays: a set from an earlier batch that nobody references any more, else
        new ones. Writing into warm memory instead of freshly mapped pages doubles throughput."""
        for arrays in self._pool:
            # References: the pool's tuple, the loop variable, getrefcount's argument.
            if all(sys.getrefcount(a) <= 3 for a in arrays):
                return arrays
        s = self.stream
        shape = (s.batch_size, s.sequence_length)
        try:
            fresh = (
                np.empty(shape, dtype=s.token_dtype),
                np.empty(shape, dtype=s.token_dtype),
                np.empty(shape, dtype=np.int32),
            )
        except (MemoryError, ValueError):  # ValueError: past what any address space holds
            gib = 3 * s.batch_size * s.sequence_length * 8 / 2**30
            raise ConfigError(
                f"a batch of batch_size {s.batch_size} x sequence_length {s.sequence_length} tokens needs "
                f"about {gib:,.1f} GiB, more than this machine can allocate: lower either"
            ) from None
        if len(self._pool) < 4:
            self._pool.append(fresh)
        return fresh

    def skip(self, batches: int) -> None:
        """Produce and drop ``batches`` batches (fast, in Rust)."""
        if batches:
            self.core.skip_batches(int(batches), self.stream.batch_size)

    def tables(self) -> dict[str, Any]:
        """The core's state tables after the last batch."""
        return dict(self.core.state())

    def state_dict(
        self, world_size: int | None = None, num_workers: int = 1, rank: int = 0
    ) -> dict[str, Any]:
        """This worker's state as a (partial) stream state; the topology defaults to one
        process per global worker."""
        topology = {
            "world_size": world_size if world_size is not None else self.n_workers,
            "num_workers": num_workers,
            "workers": self.n_workers,
            "ranks": [rank],
        }
        return self.stream.state({self.worker: self.tables()}, topology, self.mix)


def _doc_lens(seg: npt.NDArray[np.uint64], b: int, n: int) -> npt.NDArray[np.int32]:
    """Per line, the lengths of its document runs within the first ``n`` tokens, zero-padded."""
    line = seg[:, 0].astype(np.int64)
    at = seg[:, 1].astype(np.int64)
    end = np.minimum(at + seg[:, 7].astype(np.int64), n)
    keep = end > at
    line, lens = line[keep], (end - at)[keep]
    counts = np.bincount(line, minlength=b)
    out = np.zeros((b, max(int(counts.max()) if len(counts) else 0, 1)), dtype=np.int32)
    first = np.cumsum(counts) - counts
    out[line, np.arange(len(line)) - np.repeat(first, counts)] = lens
    return out
