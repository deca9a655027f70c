"""A run's summary as a JSON file beside its outputs, local or in object storage."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import tempfile
from collections.abc import Mapping
from typing import Any

from tokshuf import _core
from tokshuf._storage import redact
from tokshuf.errors import ConfigError

__all__ = ["check_summary", "exists", "summary_target", "write_summary"]

PathLike = str | os.PathLike[str]


def summary_target(option: bool | PathLike, default: str) -> str | None:
    """Where a run's ``summary`` option says to write: ``True`` → ``default`` (beside the
    outputs), a path → there, ``False`` → nowhere (``None``)."""
    check_summary(option)
    if option is True:
        return default
    if option is False:
        return None
    return os.fspath(option)


def check_summary(option: object) -> None:
    """Raise :class:`ConfigError` unless ``option`` is a valid ``summary`` argument."""
    if not (option is True or option is False or isinstance(option, str | os.PathLike)):
        raise ConfigError(
            f"summary must be True (beside the outputs), False (no file) or a path, got {option!r}"
        )


def exists(target: str) -> bool:
    return _core.remote_exists(target) if _core.is_remote(target) else os.path.exists(target)


def write_summary(summary: Mapping[str, Any] | list[Any], target: PathLike) -> str:
    """Write ``summary`` (or a list of them) as indented JSON to ``target``: a local file is
    replaced atomically (a reader sees the old file or the new one whole); a storage URL is
    written to a local temporary file and uploaded. Returns ``target``."""
    t = os.fspath(target)
    # A summary lists inputs and outputs: no URL's password or signature in the file.
    text = redact(json.dumps(summary, indent=2)) + "\n"
    if _core.is_remote(t):
        with tempfile.TemporaryDirectory(
            prefix="tokshuf-summary-", dir=os.environ.get("TOKSHUF_STAGING_DIR")
        ) as tmp:
            local = os.path.join(tmp, "summary.json")
            with open(local, "w", encoding="utf-8") as f:
                f.write(text)
            _core.upload(local, t)
        return t
    if os.path.isdir(t):
        raise IsADirectoryError(errno.EISDIR, "the summary's path is a directory", t)
    tmp_path = f"{t}.tmp-{os.getpid()}"
    try:
        with open(tmp_path, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp_path, t)
    except BaseException:
        # A failed write (the target a directory, a full disk, Ctrl-C) leaves nothing behind.
        with contextlib.suppress(OSError):
            os.unlink(tmp_path)
        raise
    return t
