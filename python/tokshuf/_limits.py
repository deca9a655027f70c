"""The rules for the numbers users give: integers and their bounds, checked before a run starts or
anything is allocated, so that a bad value fails at once with its name rather than minutes later
with what the operating system refused ("failed to spawn thread", "Too many open files", an abort
on a failed allocation).

One rule per concept, used by the command line (:func:`tokshuf.cli._args.integer` turns a rule's
complaint into a usage error naming the flag) and by the Python API (:func:`integer` raises
:class:`~tokshuf.ConfigError` naming the argument) alike. An integer is a Python ``int`` or a
numpy integer (anything with ``__index__``), never a ``bool``, a float or a string: ``1.5`` is not
silently 1 and ``"16"`` not 16.
"""

from __future__ import annotations

import operator
from typing import Any, overload

from tokshuf.errors import ConfigError

__all__ = [
    "COUNT_MAX",
    "ID_MAX",
    "MAX_LOGICAL_SHARDS",
    "MAX_SEQUENCE_LENGTH",
    "MAX_THREADS",
    "as_index",
    "check_num_threads",
    "check_open_files",
    "integer",
    "integer_dtype",
    "out_of_range",
    "position",
    "sequence_length",
    "token_id",
]

#: Token ids are unsigned 32-bit in every format tokshuf writes.
ID_MAX = 2**32 - 1
#: Sizes and counts: what the native core holds in a signed 64-bit integer.
COUNT_MAX = 2**63 - 1
#: Threads of one run; more only costs memory and start-up (the native core of ``preprocess``
#: has the same bound).
MAX_THREADS = 1024
#: The longest sequence of tokens anything holds whole in memory: a shuffle context, an instance,
#: a streamed line, a Nanoset sample (4 GiB of 32-bit ids; a batch row of int64 is 8 GiB). The
#: packing of instances also keeps a table of this many free-space slots.
MAX_SEQUENCE_LENGTH = 1 << 30
#: Logical shards of a stream: every worker keeps a table row per shard and sub-dataset, so the
#: count is a memory size (2**20 rows: ~250 MB; more global workers than any cluster has).
MAX_LOGICAL_SHARDS = 1 << 20
#: Files a run holds open besides its outputs: inputs, the summary, the standard streams.
_SPARE_FILES = 64


def as_index(value: object) -> int:
    """``value`` as a Python int if it is an integer (``int``, a numpy integer, a 0-d integer
    array), else :class:`TypeError`. A ``bool`` is refused: ``ds[True]`` is a mistake, never
    item 1."""
    if isinstance(value, bool):
        raise TypeError("expected an integer, got a bool")
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"expected an integer, got {type(value).__name__} {value!r}") from None


def out_of_range(value: int, minimum: int | None, maximum: int | None) -> str | None:
    """What is wrong with ``value`` against ``[minimum, maximum]`` (``None``: unbounded), as
    "must be ..., got V", or ``None`` when it is in range. The text both the command line and the
    API errors use."""
    if (minimum is None or value >= minimum) and (maximum is None or value <= maximum):
        return None
    if maximum is None or maximum == COUNT_MAX:
        bound = f">= {minimum}"
    elif minimum is None:
        bound = f"<= {maximum}"
    else:
        bound = f"between {minimum} and {maximum}"
    return f"must be {bound}, got {value}"


@overload
def integer(value: object, name: str, minimum: int | None = 0, maximum: int | None = COUNT_MAX) -> int: ...
@overload
def integer(
    value: object, name: str, minimum: int | None = 0, maximum: int | None = COUNT_MAX, *, optional: bool
) -> int | None: ...
def integer(
    value: object,
    name: str,
    minimum: int | None = 0,
    maximum: int | None = COUNT_MAX,
    *,
    optional: bool = False,
) -> int | None:
    """``value`` as a Python int in ``[minimum, maximum]``, else :class:`ConfigError` naming
    ``name``, the value and the bounds (``None`` passes with ``optional``)."""
    if value is None and optional:
        return None
    try:
        v = as_index(value)
    except TypeError:
        raise ConfigError(f"{name} must be an integer, got {type(value).__name__} {value!r}") from None
    problem = out_of_range(v, minimum, maximum)
    if problem:
        raise ConfigError(f"{name} {problem}")
    return v


def token_id(value: object, name: str, *, optional: bool = False) -> Any:
    """A token id: an integer in ``[0, ID_MAX]`` (``None`` too with ``optional``)."""
    return integer(value, name, 0, ID_MAX, optional=optional)


def sequence_length(value: object, name: str = "sequence_length") -> int:
    """A number of tokens held whole: an integer in ``[1, MAX_SEQUENCE_LENGTH]``."""
    return integer(value, name, 1, MAX_SEQUENCE_LENGTH)


def position(index: object, n: int, what: str, where: str = "") -> int:
    """Item ``index`` of ``n`` as Python sequences take it: ``-n <= index < n``, negative counting
    from the end. A non-integer is a :class:`TypeError`, anything else outside the range an
    :class:`IndexError` naming ``what`` (e.g. "document") and ``where`` (e.g. the file)."""
    try:
        i = as_index(index)
    except TypeError as e:
        raise TypeError(f"{what} indices must be integers: {e}") from None
    if not -n <= i < n:
        place = f" of {where}" if where else ""
        valid = f"valid: {-n} to {n - 1}" if n else "there are none"
        raise IndexError(f"{what} {i} is out of range for the {n} {what}s{place} ({valid})")
    return i + n if i < 0 else i


def integer_dtype(value: object, name: str = "dtype") -> Any:
    """``value`` as the numpy dtype of token ids (an integer type: ``uint16``, ``"u4"``,
    ``np.int32``, ...), else :class:`ConfigError` naming ``name``."""
    import numpy as np

    try:
        d = np.dtype(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        d = None
    if d is None or d.kind not in "iu":
        raise ConfigError(
            f"{name} must be an integer dtype (uint8, uint16, uint32, uint64, int8, ..., int64), "
            f"got {value!r}"
        )
    return d


def check_num_threads(num_threads: object) -> None:
    """``None`` (every CPU) or ``1 <= num_threads <= MAX_THREADS``."""
    if num_threads is None:
        return
    try:
        integer(num_threads, "num_threads", 1, MAX_THREADS)
    except ConfigError:
        raise ConfigError(
            f"num_threads must be between 1 and {MAX_THREADS} (or None: every CPU), got {num_threads!r}"
        ) from None


def check_open_files(files: int, what: str) -> None:
    """Refuse a run that would hold ``files`` files open at once, beyond this process's limit."""
    try:
        import resource
    except ImportError:  # not on this platform
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = files + _SPARE_FILES
    if soft == resource.RLIM_INFINITY or need <= soft:
        return
    raise ConfigError(
        f"{what} would hold up to {need:,} files open, above this process's limit of {soft:,} "
        f"(`ulimit -n`; the hard limit is "
        f"{'unlimited' if hard == resource.RLIM_INFINITY else f'{hard:,}'}): lower it, or raise the limit"
    )
