"""What the writers over a native writer share (:class:`tokshuf.IndexedDatasetWriter`,
:class:`tokshuf.olmo_tokens.TokenFileWriter`): their output appears only when finished, so a
``with`` block finishes it when the block succeeds and aborts it (nothing is left) when it raises."""

from __future__ import annotations

from types import TracebackType
from typing import Any, Self

__all__ = ["FinishOnExit"]


class FinishOnExit:
    """A context manager that calls :meth:`finish` on success and :meth:`abort` on an exception."""

    def finish(self) -> Any:
        raise NotImplementedError

    def abort(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            self.finish()
        else:
            self.abort()
