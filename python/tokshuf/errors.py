"""The exceptions tokshuf raises.

Everything tokshuf-specific derives from :class:`TokshufError`; file-system problems are the
built-in :class:`OSError` subclasses (``FileNotFoundError``, ``PermissionError``, ...) with
``filename`` set, and Ctrl-C during a long call is :class:`KeyboardInterrupt`.
"""

from __future__ import annotations

__all__ = ["BadInputError", "ConfigError", "FormatError", "TokshufError"]


class TokshufError(Exception):
    """Base class of tokshuf's own errors."""


class FormatError(TokshufError, ValueError):
    """A file that is not what it claims to be: a corrupt or foreign ``.idx``/``.bin``, a torn
    archive, a damaged checkpoint. The message names the file and the fault."""


class ConfigError(TokshufError, ValueError):
    """An argument or configuration value that cannot be used; the message names the value and
    the valid choices."""


class BadInputError(TokshufError, ValueError):
    """An input record that cannot be processed under ``on_error="fail"``.

    Attributes
    ----------
    path : str
        The input file.
    line : int
        1-based line number in the decompressed file.
    reason : str
        The category, e.g. ``"invalid_json"``, ``"missing_key"``, ``"invalid_utf8"``.
    """

    def __init__(self, message: str, path: str = "", line: int = 0, reason: str = "") -> None:
        super().__init__(message)
        self.path = path
        self.line = line
        self.reason = reason
