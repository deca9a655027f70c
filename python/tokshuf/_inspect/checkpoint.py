"""A streaming-loader checkpoint (``tokshuf.stream``): the summary of :mod:`tokshuf.stream.inspect`."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from tokshuf._inspect._report import Report

__all__ = ["CheckpointReport", "inspect_checkpoint"]


@dataclasses.dataclass(frozen=True)
class CheckpointReport(Report):
    path: str
    #: :func:`tokshuf.stream.inspect.summarize`'s dict (its keys are the JSON output's, as before).
    summary: dict[str, Any]
    kind: str = "checkpoint"

    def to_dict(self) -> dict[str, Any]:
        # Flat, as `tokshuf inspect CHECKPOINT --json` printed before there were other kinds.
        return {"kind": self.kind, "path": self.path, **self.summary}


def inspect_checkpoint(path: str | os.PathLike[str]) -> CheckpointReport:
    from tokshuf.stream.inspect import inspect_path

    return CheckpointReport(os.fspath(path), inspect_path(path))
