"""The ``tokshuf`` logger: what a run skipped or warns about, for applications and training
frameworks to route (the command line prints it on stderr). Nothing is configured here: without
a handler, Python prints warnings and above on stderr."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

log = logging.getLogger("tokshuf")


class RedactFilter(logging.Filter):
    """Every record of the ``tokshuf`` logger leaves with credentials masked (a path may be a
    URL with a password): whatever handler an application adds, it gets the redacted text."""

    def filter(self, record: logging.LogRecord) -> bool:
        from tokshuf._storage import redact

        record.msg, record.args = redact(record.getMessage()), None
        return True


log.addFilter(RedactFilter())

#: Skipped lines listed one by one (the summary keeps more).
_LISTED = 5


def log_run(command: str, summary: Mapping[str, Any]) -> None:
    """Log a run's skips and warnings (WARNING) and its outcome (INFO)."""
    for warning in summary.get("warnings") or []:
        log.warning("%s: %s", command, warning)
    skipped: Mapping[str, int] = summary.get("skipped") or {}
    if skipped:
        reasons = ", ".join(f"{k}: {v}" for k, v in sorted(skipped.items()))
        log.warning("%s: skipped %s bad lines (%s)", command, f"{sum(skipped.values()):,}", reasons)
        for rec in (summary.get("first_skipped") or [])[:_LISTED]:
            log.warning("  %s:%s: %s: %s", rec["path"], rec["line"], rec["reason"], rec["message"])
    for rec in summary.get("skipped_files") or []:
        log.warning("%s: skipped file %s: %s: %s", command, rec["path"], rec["reason"], rec["message"])
    passed_over: Mapping[str, int] = summary.get("scan_skipped") or {}
    if passed_over:
        reasons = ", ".join(f"{k}: {v}" for k, v in sorted(passed_over.items()))
        log.warning(
            "%s: the input directories hold %s paths that were not read (%s)",
            command,
            f"{sum(passed_over.values()):,}",
            reasons,
        )
        for rec in (summary.get("first_scan_skipped") or [])[:_LISTED]:
            log.warning("  %s: %s", rec["path"], rec["reason"])
    log.info(
        "%s: %s documents, %s tokens in %.2f s",
        command,
        f"{summary.get('documents', 0):,}",
        f"{summary.get('tokens', 0):,}",
        float(summary.get("seconds", 0.0)),
    )
