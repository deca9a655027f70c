"""Arrow IPC files with a token column, one record batch per document (Bamba's format).

Needs ``pyarrow`` (the ``arrow`` extra). A Python handler rather than a Rust one: pyarrow is
already what produces these files, and an Arrow reader in the Rust core would cost minutes of
compile time for one call per document that pyarrow answers zero-copy from a memory map.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from typing import Any

import numpy as np
import numpy.typing as npt

from tokshuf.errors import ConfigError, FormatError
from tokshuf.stream.handlers import strip_ends

__all__ = ["ArrowHandler"]


def _pyarrow() -> Any:
    try:
        import pyarrow as pa  # type: ignore[import-untyped]
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ConfigError("Arrow files need pyarrow: pip install 'tokshuf[arrow]'") from e
    return pa


class ArrowHandler:
    """``*.arrow`` IPC files; document ``i`` is record batch ``i``, its tokens the first column
    of ``col_name`` (a name or a list of candidate names) that the batch has."""

    def __init__(self, col_name: str | Sequence[str] = "tokens") -> None:
        self.col_names = [col_name] if isinstance(col_name, str) else list(col_name)

    def is_legal(self, path: str) -> bool:
        return "arrow" in os.path.splitext(path)[1]

    def open(self, path: str) -> Any:
        pa = _pyarrow()
        try:
            return pa.ipc.open_file(pa.memory_map(path))
        except pa.ArrowInvalid as e:
            raise FormatError(f"{path}: not an Arrow IPC file ({e})") from e

    def length(self, path: str) -> int:
        return int(self.open(path).num_record_batches)

    def get(self, reader: Any, index: int, drop_tokens: AbstractSet[int]) -> npt.NDArray[Any]:
        batch = reader.get_batch(index)
        for name in self.col_names:
            i = batch.schema.get_field_index(name)
            if i >= 0:
                doc = batch.column(i).to_numpy(zero_copy_only=False)
                break
        else:
            raise FormatError(
                f"record batch {index} has no column {self.col_names} (it has {batch.schema.names})"
            )
        return strip_ends(doc, drop_tokens)

    def slice(self, doc: Any, start: int, n: int) -> npt.NDArray[Any]:
        return np.asarray(doc[start : start + n])
