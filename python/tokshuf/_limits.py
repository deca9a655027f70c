"""Bounds checked before a run starts, so that a run fails at once with the value named rather
than minutes later with what the operating system refused ("failed to spawn thread", "Too many
open files")."""

from __future__ import annotations

from tokshuf.errors import ConfigError

__all__ = ["MAX_THREADS", "check_num_threads", "check_open_files"]

#: Threads of one run; more only costs memory and start-up (the native core of ``preprocess``
#: has the same bound).
MAX_THREADS = 1024
#: Files a run holds open besides its outputs: inputs, the summary, the standard streams.
_SPARE_FILES = 64


def check_num_threads(num_threads: int | None) -> None:
    """``None`` (every CPU) or ``1 <= num_threads <= MAX_THREADS``."""
    if num_threads is None:
        return
    if (
        isinstance(num_threads, bool)
        or not isinstance(num_threads, int)
        or not 1 <= num_threads <= MAX_THREADS
    ):
        raise ConfigError(
            f"num_threads must be between 1 and {MAX_THREADS} (or None: every CPU), got {num_threads!r}"
        )


def check_open_files(files: int, what: str) -> None:
    """Refuse a run that would hold ``files`` files open at once, beyond this process's limit."""
    try:
        import resource
    except ImportError:  # not on this platform
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = files + _SPARE_FILES
    if soft == resource.RLIM_INFINITY or need <= soft:
        return
    raise ConfigError(
        f"{what} would hold up to {need:,} files open, above this process's limit of {soft:,} "
        f"(`ulimit -n`; the hard limit is "
        f"{'unlimited' if hard == resource.RLIM_INFINITY else f'{hard:,}'}): lower it, or raise the limit"
    )
