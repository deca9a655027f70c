"""numpy views of the buffers the Rust core returns (zero-copy, read-only)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from tokshuf import _core


def view(buf: _core.MappedBuffer, dtype: type[Any]) -> npt.NDArray[Any]:
    """A flat numpy view of ``buf`` (its ``base`` keeps the buffer alive)."""
    return np.frombuffer(buf, dtype)  # type: ignore[call-overload]


def as_numpy(arr: _core.IndexArray) -> npt.NDArray[Any]:
    """A read-only numpy view of a native array (no copy; its ``base`` keeps the array alive)."""
    return np.frombuffer(arr, dtype=arr.dtype).reshape(arr.shape)  # type: ignore[call-overload]


def u64(buf: _core.MappedBuffer) -> npt.NDArray[np.uint64]:
    return view(buf, np.uint64)


def spans(buf: _core.MappedBuffer) -> npt.NDArray[np.uint64]:
    """An ``(n, 2)`` uint64 view."""
    return u64(buf).reshape(-1, 2)
