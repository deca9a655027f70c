"""``NanosetConfig``: what to read, how to split it, and Megatron's switches; loadable from
nanotron's YAML."""

from __future__ import annotations

import dataclasses
import numbers
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from tokshuf import _core, _limits
from tokshuf._deprecation import deprecated_parameters, renamed_attribute, renamed_parameters
from tokshuf.errors import ConfigError
from tokshuf.indexed import RemoteRead, check_remote
from tokshuf.nanoset.stages import NanosetStage, check_stages

__all__ = ["NanosetConfig", "SampleCounts"]

#: Sample counts per split (train, valid, test); ``None`` means one full pass.
SampleCounts = tuple[int | None, int | None, int | None]

DataPath = str | list[str] | dict[str, float]

_SCHEMES = ("megatron", "repeat")
#: Keys of nanotron's NanosetDatasetsArgs that do not change which samples are read.
_NANOTRON_READER_KEYS = frozenset({"tokenizer_name", "vocab_size", "token_size_in_bytes", "return_positions"})


def _is_number(x: object) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool | np.bool_)


@dataclasses.dataclass(frozen=True)
class NanosetConfig:
    """Configuration of :func:`tokshuf.build_nanosets`.

    Parameters
    ----------
    data_path
        One prefix (``data/corpus_text_document``: a :class:`Nanoset`); a list of prefixes (an
        unweighted :class:`BlendedNanoset`, each dataset weighted by its size, as Megatron's
        blend without weights); or ``{prefix: weight}`` (a weighted blend; weights are
        normalized and must be non-negative, not all zero; a zero weight excludes the prefix).
    sequence_length
        Tokens per sample (labels come from one extra token, see ``add_extra_token_to_sequence``).
    split
        Megatron's split string, e.g. ``"949,50,1"``: the share of each prefix's sequences given to
        train, valid and test.
    cache_dir
        Root of the caches (created if missing; the index arrays go to ``<cache_dir>/nanoset/``).
        ``None``: ``$TOKSHUF_CACHE_DIR``, else ``$XDG_CACHE_HOME/tokshuf``, else
        ``~/.cache/tokshuf``, as for every cache of tokshuf. ``False``: build in memory every
        time, write nothing. (Megatron's ``path_to_cache``; that name still works, deprecated.)
    seed
        The index seed (``numpy.random.RandomState``; ``0 <= seed < 2**32``).
    num_samples
        Samples per split (train, valid, test); ``None`` for one full pass. Overridden by the
        ``num_samples`` argument of :func:`build_nanosets`.
    add_extra_token_to_sequence, drop_last_partial_validation_sequence, reset_position_ids, \
reset_attention_mask, eod_mask_loss, create_attention_mask
        Megatron's switches, with Megatron's defaults. The last four only shape
        :meth:`Nanoset.megatron_item`.
    eos_token_id
        The end-of-document id (Megatron's ``tokenizer.eod``); required by ``eod_mask_loss`` and
        the two ``reset_*`` switches.
    pad_token_id
        Fills the padded last validation sample (``drop_last_partial_validation_sequence=False``);
        ``-1`` (Megatron's value without a pad token) marks padding unambiguously.
    mid_level_dataset_surplus
        Extra share of samples each blended dataset is built for (Megatron's 0.005).
    index_scheme
        ``"megatron"``: Megatron-LM's indices (one permutation across epochs). ``"repeat"``: one
        shuffled epoch whose order repeats every epoch (the Nanoset design of seed 000).
    stages
        A staged run (nanotron's ``data_stages``): :class:`~tokshuf.nanoset.NanosetStage` s (or
        mappings of their fields), each owning the training steps from its ``start_step`` to the
        next stage's with its own blend; the train split is then a
        :class:`~tokshuf.nanoset.StagedNanoset` of ``num_samples[0]`` samples, and valid/test are
        built from ``data_path`` (the first stage's blend). See ``docs/mixes.md``.
    global_batch_size
        Samples per training step (what turns the stages' steps into samples); needed by stages.
    remote
        For prefixes in a store (``s3://...``): ``"ranges"`` reads each batch's tokens by ranged
        requests (few, coalesced), ``"copy"`` downloads every ``.bin`` once and maps it. The
        ``.idx`` files are always local copies. Copies go under ``remote/`` of the cache root
        (``$TOKSHUF_CACHE_DIR``, else ``$XDG_CACHE_HOME/tokshuf``, else ``~/.cache/tokshuf``),
        not under ``cache_dir``, so every dataset on a node shares them. See
        :class:`tokshuf.IndexedDataset`.
    """

    data_path: DataPath
    sequence_length: int
    split: str = "949,50,1"
    cache_dir: str | Literal[False] | None = None
    seed: int = 1234
    num_samples: SampleCounts = (None, None, None)
    add_extra_token_to_sequence: bool = True
    drop_last_partial_validation_sequence: bool = True
    reset_position_ids: bool = False
    reset_attention_mask: bool = False
    eod_mask_loss: bool = False
    create_attention_mask: bool = True
    eos_token_id: int | None = None
    pad_token_id: int = -1
    mid_level_dataset_surplus: float = 0.005
    index_scheme: Literal["megatron", "repeat"] = "megatron"
    remote: RemoteRead = "ranges"
    stages: tuple[NanosetStage, ...] = ()
    global_batch_size: int | None = None

    path_to_cache = renamed_attribute[str | Literal[False] | None]("cache_dir")
    eod_token_id = renamed_attribute[int | None]("eos_token_id")

    def __post_init__(self) -> None:
        object.__setattr__(self, "stages", tuple(NanosetStage.of(x) for x in self.stages or ()))
        if isinstance(self.cache_dir, os.PathLike):
            object.__setattr__(self, "cache_dir", os.fspath(self.cache_dir))
        path = self.data_path
        if isinstance(path, os.PathLike):
            object.__setattr__(self, "data_path", os.fspath(path))
        elif isinstance(path, Mapping):
            # numpy numbers as Python's (the config goes into JSON cache keys)
            weights = {os.fspath(k): v.item() if isinstance(v, np.generic) else v for k, v in path.items()}
            object.__setattr__(self, "data_path", weights)
        elif isinstance(path, Sequence) and not isinstance(path, str):
            object.__setattr__(self, "data_path", [os.fspath(p) for p in path])
        self._validate()

    def _validate(self) -> None:
        path = self.data_path
        if isinstance(path, str):
            if not path:
                raise ConfigError("data_path is empty")
        elif isinstance(path, list):
            if not path:
                raise ConfigError("data_path is an empty list; give at least one prefix")
        elif isinstance(path, dict):
            if not path:
                raise ConfigError("data_path is an empty mapping; give at least one {prefix: weight}")
            for k, w in path.items():
                if not _is_number(w):
                    raise ConfigError(f"the weight of {k!r} is {w!r}; weights must be numbers")
            _core.normalize([float(w) for w in path.values()])
        else:
            raise ConfigError(
                f"data_path must be a prefix, a list of prefixes or a {{prefix: weight}} mapping, "
                f"got {type(path).__name__}"
            )
        if not (self.cache_dir is None or self.cache_dir is False or isinstance(self.cache_dir, str)):
            raise ConfigError(f"cache_dir must be a directory, None or False, got {self.cache_dir!r}")
        # Normalized to Python ints (numpy's are accepted): they go into JSON cache keys.
        object.__setattr__(self, "sequence_length", _limits.sequence_length(self.sequence_length))
        object.__setattr__(self, "seed", _limits.integer(self.seed, "seed", 0, 2**32 - 1))
        if not isinstance(self.split, str):
            raise ConfigError(f"split must be a string such as '949,50,1', got {self.split!r}")
        _core.parse_split(self.split)
        counts = tuple(self.num_samples)
        object.__setattr__(self, "num_samples", check_counts(counts))
        if not _is_number(self.mid_level_dataset_surplus) or not (0 <= self.mid_level_dataset_surplus < 1e6):
            raise ConfigError(
                "mid_level_dataset_surplus must be a number in [0, 1e6), "
                f"got {self.mid_level_dataset_surplus!r}"
            )
        if self.index_scheme not in _SCHEMES:
            raise ConfigError(f"index_scheme must be one of {_SCHEMES}, got {self.index_scheme!r}")
        check_remote(self.remote)
        needs_eod = [
            n for n in ("eod_mask_loss", "reset_position_ids", "reset_attention_mask") if getattr(self, n)
        ]
        eos = _limits.token_id(self.eos_token_id, "eos_token_id", optional=True)
        object.__setattr__(self, "eos_token_id", eos)
        if needs_eod and self.eos_token_id is None:
            raise ConfigError(f"{', '.join(needs_eod)} need eos_token_id")
        # Any int64 (Megatron's -1 marks padding when there is no pad token).
        pad = _limits.integer(self.pad_token_id, "pad_token_id", -(2**63), _limits.COUNT_MAX)
        object.__setattr__(self, "pad_token_id", pad)
        check_stages(self.stages, self.global_batch_size)

    # -- derived ---------------------------------------------------------------------------
    @property
    def blend(self) -> tuple[list[str], list[float] | None]:
        """Megatron's ``blend``: (prefixes, weights or ``None``)."""
        path = self.data_path
        if isinstance(path, str):
            return [path], None
        if isinstance(path, dict):
            return list(path), [float(w) for w in path.values()]
        return list(path), None

    # -- loading ---------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> NanosetConfig:
        """Build from a mapping of this class's field names (unknown keys are errors)."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names - set(deprecated_parameters(cls)))
        if unknown:
            raise ConfigError(f"unknown NanosetConfig keys {unknown}; valid keys: {sorted(names)}")
        kwargs = dict(d)
        if "num_samples" in kwargs and kwargs["num_samples"] is not None:
            kwargs["num_samples"] = tuple(kwargs["num_samples"])
        try:
            return cls(**kwargs)
        except TypeError as e:
            raise ConfigError(f"incomplete NanosetConfig: {e}") from None

    @classmethod
    def from_yaml(cls, source: str | os.PathLike[str], *, stage: int | str | None = None) -> NanosetConfig:
        """Load from YAML text or a file, in nanotron's shape or flat.

        nanotron's shape with several ``data_stages`` is the whole staged run (``stages``): each
        stage starts at its ``start_training_step`` (nanotron counts steps from 1), blends its
        ``dataset_folder`` (with ``dataset_weights``; a list without weights: equal weights, as
        nanotron's staged runs read it), and every other key of the stages must agree (one
        ``seed``, ``split``, sequence length: each prefix is numbered once for the whole run);
        ``data_path`` is the first stage's. ``stage`` (an index or a name) picks one stage alone.

        One stage, or ``data``: the dataset of ``data`` (or of ``data_stages[stage].data``): its
        ``dataset_folder`` (or ``dataset_path``: one prefix, a list, or ``{prefix: weight}``;
        ``dataset_weights`` may weight a list) is ``data_path``, ``data.seed`` the seed,
        ``tokens.sequence_length`` the sequence length. The sample counts are nanotron's:
        with its global batch ``tokens.micro_batch_size x tokens.batch_accumulation_per_replica x
        parallelism.dp``, train is ``tokens.train_steps`` batches (the whole run, as nanotron
        builds its Nanoset), valid ``tokens.limit_val_batches`` batches and test
        ``tokens.limit_test_batches`` batches (each validation, every ``val_check_interval``
        steps, reads the same samples, so the interval does not change the count; ``0``, its
        default, means the whole split). Keys of nanotron's reader that do not change the
        samples (``tokenizer_name``, ``vocab_size``, ``token_size_in_bytes``,
        ``return_positions``) are ignored; any of this class's fields may also appear in the
        dataset mapping, and a flat mapping of field names is accepted too.
        """
        import yaml

        text = os.fspath(source)
        looks_like_path = isinstance(source, os.PathLike) or ("\n" not in text and ":" not in text)
        if looks_like_path or ("\n" not in text and Path(text).is_file()):
            text = Path(text).read_text()
        root = yaml.safe_load(text)
        if not isinstance(root, dict):
            raise ConfigError("the YAML document must be a mapping")
        return cls.from_dict(_from_nanotron(root, stage))


# The dataclass writes __init__; the old field names stay accepted as its deprecated keywords.
NanosetConfig.__init__ = renamed_parameters(  # type: ignore[method-assign]
    path_to_cache="cache_dir", eod_token_id="eos_token_id"
)(NanosetConfig.__init__)


def _from_nanotron(root: dict[str, Any], stage: int | str | None) -> dict[str, Any]:
    if "data_stages" in root:
        stages = root["data_stages"] or []
        if stage is None and len(stages) > 1:
            return _staged(root, stages)
        if stage is None:
            stage = 0
        if isinstance(stage, str):
            found = [s for s in stages if isinstance(s, dict) and s.get("name") == stage]
            if not found:
                names = [s.get("name") for s in stages if isinstance(s, dict)]
                raise ConfigError(f"no data stage named {stage!r} (stages: {names})")
            data = found[0].get("data", {})
        else:
            if not 0 <= stage < len(stages):
                raise ConfigError(f"data stage {stage} does not exist ({len(stages)} stages)")
            data = stages[stage].get("data", {})
    elif "data" in root:
        data = root["data"]
    else:
        return root
    return _from_data(root, data)


def _staged(root: dict[str, Any], stages: list[Any]) -> dict[str, Any]:
    """The whole run of nanotron's ``data_stages``: one config whose ``stages`` hold each stage's
    start and blend; everything else must be the same in every stage."""
    parts: list[tuple[str, int, dict[str, Any]]] = []
    for k, st in enumerate(stages):
        if not isinstance(st, dict) or "start_training_step" not in st:
            raise ConfigError(f"data stage {k} needs start_training_step (nanotron counts steps from 1)")
        name, start = st.get("name", f"stage {k}"), st["start_training_step"]
        start = _limits.integer(start, f"data stage {name!r}: start_training_step", 1)
        seq = st.get("sequence_length")
        if seq is not None and seq != (root.get("tokens") or {}).get("sequence_length", seq):
            raise ConfigError(
                f"data stage {name!r} has sequence_length {seq}, the run "
                f"{root['tokens']['sequence_length']}: a staged run keeps one sequence length (nanotron "
                "does not support changing it either)"
            )
        out = _from_data(root, st.get("data", {}))
        path = out.pop("data_path", None)
        if isinstance(path, list):  # nanotron's staged runs weight a list of folders equally
            path = dict.fromkeys(path, 1.0)
        parts.append((name, start, {**out, "data_path": path}))
    parts.sort(key=lambda p: p[1])
    first = {k: v for k, v in parts[0][2].items() if k != "data_path"}
    for name, _, out in parts[1:]:
        rest = {k: v for k, v in out.items() if k != "data_path"}
        for key in sorted(set(first) | set(rest)):
            if first.get(key) != rest.get(key):
                raise ConfigError(
                    f"data stage {name!r} has {key}={rest.get(key, '(unset)')!r}, stage {parts[0][0]!r} "
                    f"{first.get(key, '(unset)')!r}: the stages of a run share everything but their blend "
                    "(each prefix is read once for the whole run)"
                )
    tokens = root.get("tokens") or {}
    dp = (root.get("parallelism") or {}).get("dp", 1)
    gbs = tokens.get("micro_batch_size", 1) * tokens.get("batch_accumulation_per_replica", 1) * dp
    return {
        **first,
        "data_path": parts[0][2]["data_path"],
        "stages": [{"name": n, "start_step": s - 1, "data_path": o["data_path"]} for n, s, o in parts],
        "global_batch_size": gbs,
    }


def _from_data(root: dict[str, Any], data: Any) -> dict[str, Any]:
    if not isinstance(data, dict) or not isinstance(data.get("dataset"), dict):
        raise ConfigError("the YAML has no data.dataset mapping (nanotron's NanosetDatasetsArgs)")
    out: dict[str, Any] = {k: v for k, v in data["dataset"].items() if k not in _NANOTRON_READER_KEYS}
    weights = out.pop("dataset_weights", None)
    for key in ("dataset_folder", "dataset_path"):
        if key in out and "data_path" not in out:
            out["data_path"] = out.pop(key)
    if weights is not None and isinstance(out.get("data_path"), list):
        if len(weights) != len(out["data_path"]):
            raise ConfigError(f"{len(weights)} dataset_weights for {len(out['data_path'])} datasets")
        out["data_path"] = dict(zip(out["data_path"], weights, strict=True))
    if "seed" in data and "seed" not in out:
        out["seed"] = data["seed"]
    tokens = _mapping(root, "tokens")
    if "sequence_length" in tokens and "sequence_length" not in out:
        out["sequence_length"] = tokens["sequence_length"]
    if tokens.get("train_steps") is not None and "num_samples" not in out:

        def count(section: dict[str, Any], key: str, default: int, minimum: int = 0) -> int:
            value = section.get(key)
            return default if value is None else _limits.integer(value, key, minimum)

        steps = count(tokens, "train_steps", 0)
        dp = count(_mapping(root, "parallelism"), "dp", 1, 1)
        gbs = (
            count(tokens, "micro_batch_size", 1, 1)
            * count(tokens, "batch_accumulation_per_replica", 1, 1)
            * dp
        )
        valid, test = (count(tokens, k, 0) for k in ("limit_val_batches", "limit_test_batches"))
        out["num_samples"] = (steps * gbs, valid * gbs or None, test * gbs or None)
    return out


def _mapping(root: dict[str, Any], key: str) -> dict[str, Any]:
    value = root.get(key) or {}
    if not isinstance(value, dict):
        raise ConfigError(f"{key} must be a mapping, got {value!r}")
    return value


def check_counts(counts: Sequence[int | None]) -> SampleCounts:
    """Validate (train, valid, test) sample counts."""
    if len(counts) != 3:
        raise ConfigError(f"num_samples must be (train, valid, test), got {tuple(counts)!r}")
    checked = [
        _limits.integer(n, f"the {name} sample count (num_samples; None: one pass)", 0, optional=True)
        for name, n in zip(("train", "valid", "test"), counts, strict=True)
    ]
    return (checked[0], checked[1], checked[2])
