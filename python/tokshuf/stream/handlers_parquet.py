"""Parquet files with a text column, tokenized on the fly (Hugging Face datasets' layout).

Needs ``pyarrow``. One row is one document; a row group's column is read once and kept while
its documents are used, so a worker walking a shard reads each row group about once.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from typing import Any

import numpy as np
import numpy.typing as npt

from tokshuf.errors import FormatError
from tokshuf.stream.handlers import strip_ends
from tokshuf.stream.handlers_arrow import _pyarrow
from tokshuf.stream.text_tokenizer import resolve_tokenizer

__all__ = ["ParquetHandler"]


class _ParquetReader:
    def __init__(self, path: str, col_names: Sequence[str]) -> None:
        _pyarrow()
        import pyarrow.parquet as pq  # type: ignore[import-untyped]

        self.path = path
        self.file = pq.ParquetFile(path)
        names = self.file.schema_arrow.names
        self.column = next((c for c in col_names if c in names), None)
        if self.column is None:
            raise FormatError(f"{path}: no column {list(col_names)} (it has {names})")
        md = self.file.metadata
        self.starts = np.cumsum([0] + [md.row_group(i).num_rows for i in range(md.num_row_groups)])
        self._group = -1
        self._texts: list[Any] = []

    def text(self, i: int) -> Any:
        g = int(np.searchsorted(self.starts, i, side="right")) - 1
        if g != self._group:
            self._texts = self.file.read_row_group(g, columns=[self.column]).column(0).to_pylist()
            self._group = g
        return self._texts[i - int(self.starts[g])]


class ParquetHandler:
    """``*.parquet``; document ``i`` is row ``i``'s ``col_name`` text, tokenized with
    ``tokenizer`` (a spec such as ``"byte"`` or an object with ``encode``). ``max_doclen``
    truncates very long texts (in characters) before tokenizing."""

    def __init__(
        self, tokenizer: Any = "byte", col_name: str | Sequence[str] = "text", max_doclen: int | None = None
    ) -> None:
        self._spec = tokenizer
        self._tokenizer = resolve_tokenizer(tokenizer)
        self.col_names = [col_name] if isinstance(col_name, str) else list(col_name)
        self.max_doclen = max_doclen

    @property
    def tokenizer(self) -> Any:
        if self._tokenizer is None:
            self._tokenizer = resolve_tokenizer(self._spec)
        return self._tokenizer

    def __getstate__(self) -> dict[str, Any]:
        # A tokenizer named by a spec is rebuilt in the worker (native tokenizers do not pickle).
        state = self.__dict__.copy()
        if isinstance(self._spec, str):
            state["_tokenizer"] = None
        return state

    def is_legal(self, path: str) -> bool:
        return "parquet" in os.path.splitext(path)[1]

    def open(self, path: str) -> _ParquetReader:
        return _ParquetReader(path, self.col_names)

    def length(self, path: str) -> int:
        _pyarrow()
        import pyarrow.parquet as pq

        return int(pq.ParquetFile(path).metadata.num_rows)

    def get(self, reader: _ParquetReader, index: int, drop_tokens: AbstractSet[int]) -> npt.NDArray[Any]:
        text = reader.text(index)
        if text is None:
            return np.zeros(0, np.uint32)
        text = str(text)
        if self.max_doclen is not None:
            text = text[: self.max_doclen]
        doc = np.asarray(self.tokenizer.encode(text))
        return strip_ends(doc, drop_tokens)

    def slice(self, doc: Any, start: int, n: int) -> npt.NDArray[Any]:
        return np.asarray(doc[start : start + n])
