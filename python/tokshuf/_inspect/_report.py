"""The base of every inspect result: a frozen dataclass that turns into plain JSON."""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["HIDDEN", "Report", "jsonable"]


#: Metadata of a field kept for plots (an array of lengths, a mixture curve) but left out of JSON.
HIDDEN = {"json": False}


def jsonable(value: Any) -> Any:
    """Dataclasses, tuples and numpy scalars as JSON values, skipping hidden fields."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: jsonable(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if f.metadata.get("json", True)
        }
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return value.item()
    return value


class Report:
    """Mixin of the result dataclasses: ``kind`` names the artifact, ``to_dict`` gives JSON."""

    kind: str

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = jsonable(self)
        return out
