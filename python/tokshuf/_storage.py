"""Remote paths for the readers that map their data: a storage URL (``s3://``, ``gs://``,
``az://``, ``https://``) becomes the path of its local copy in the cache directory
(``$TOKSHUF_CACHE_DIR``, else ``$XDG_CACHE_HOME/tokshuf``, else ``~/.cache/tokshuf``), downloaded
once and again only when the object changes (its size or ETag). A `.bin/.idx` prefix becomes a
local prefix. Everything after this boundary sees local files.

:func:`redact` is the package's one redaction: every text that may hold a URL or a store's words
(messages, logs, summaries, progress) passes through it before it is printed or written.
"""

from __future__ import annotations

import os

from tokshuf import _core

__all__ = ["is_remote", "local_path", "local_prefix", "localize", "redact"]


def redact(text: str) -> str:
    """``text`` with credentials masked as ``***``: a URL's ``user:password@``, the secrets of
    signed URLs and headers (``X-Amz-Signature=``, ``X-Amz-Credential=``,
    ``x-amz-security-token:``, ``Signature=``, ``sig=``, ...) and the values of the environment's
    credential variables (``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ...)."""
    return _core.redact(text)


def is_remote(path: str | os.PathLike[str]) -> bool:
    return _core.is_remote(os.fspath(path))


def local_path(path: str | os.PathLike[str]) -> str:
    """``path`` itself, or for a storage URL the path of the object's local copy."""
    s = os.fspath(path)
    return _core.local_copy(s) if _core.is_remote(s) else s


def local_prefix(prefix: str | os.PathLike[str]) -> str:
    """``prefix`` itself, or for a storage URL the local prefix of copies of its ``.idx``
    (fetched first: it is small, and a missing one fails before a large ``.bin`` is fetched)
    and ``.bin``."""
    s = os.fspath(prefix)
    if not _core.is_remote(s):
        return s
    idx = _core.local_copy(s + ".idx")
    _core.local_copy(s + ".bin")
    return idx[: -len(".idx")]


def localize(path: str | os.PathLike[str]) -> str:
    """``path`` itself, or for a storage URL its local copy: of a ``.bin/.idx`` prefix (named by
    either file, which keeps its suffix, or by the prefix itself), else of the object."""
    s = os.fspath(path)
    if not _core.is_remote(s):
        return s
    for suffix in (".bin", ".idx"):
        if s.endswith(suffix):
            return local_prefix(s[: -len(suffix)]) + suffix
    if _core.remote_exists(s + ".idx"):
        return local_prefix(s)
    return local_path(s)
