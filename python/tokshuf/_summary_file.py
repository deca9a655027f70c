"""A run's summary as a JSON file beside its outputs, local or in object storage."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from collections.abc import Mapping
from typing import Any

from tokshuf import _core
from tokshuf.errors import ConfigError

__all__ = ["check_summary", "exists", "staging_directory", "summary_target", "write_summary"]

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
    """Write ``summary`` (or a list of them) as a summary file at ``target``, in the bytes the
    commands write theirs (indented JSON, credentials masked): a local file is replaced atomically
    (a reader sees the old file or the new one whole); an object in a store appears whole.
    Returns ``target``."""
    t = os.fspath(target)
    if not _core.is_remote(t) and os.path.isdir(t):
        raise IsADirectoryError(errno.EISDIR, "the summary's path is a directory", t)
    _core.write_summary(summary, t)
    return t


def staging_directory(prefix: str) -> tempfile.TemporaryDirectory[str]:
    """A temporary directory ``{prefix}-{pid}-XXXX`` (under ``TOKSHUF_STAGING_DIR``, else the
    system's), removed when done; those that killed processes left are removed first."""
    root = os.environ.get("TOKSHUF_STAGING_DIR") or tempfile.gettempdir()
    stem = f"{prefix}-"
    with contextlib.suppress(OSError):
        for name in os.listdir(root):
            pid = name[len(stem) :].split("-", 1)[0] if name.startswith(stem) else ""
            if pid.isdigit() and not _alive(int(pid)):
                shutil.rmtree(os.path.join(root, name), ignore_errors=True)
    return tempfile.TemporaryDirectory(prefix=f"{stem}{os.getpid()}-", dir=root)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
