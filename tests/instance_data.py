"""Small corpora for the instance-strategy tests: OLMo token files (and the same documents as
an indexed dataset) generated from hypothesis-drawn documents."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import strategies as st

from tokshuf import IndexedDatasetWriter
from tokshuf import olmo_tokens as ot

EOS, PAD, BOS = 0, 999, 1
#: Documents: bodies of ids 2..40 (never EOS, BOS or PAD), EOS appended when written.
bodies = st.lists(st.integers(2, 40), max_size=40)
files = st.lists(st.lists(bodies, max_size=12), min_size=1, max_size=3)
#: Files with at least one document each (padded and interleaved datasets reject a file without).
files_with_documents = st.lists(st.lists(bodies, min_size=1, max_size=12), min_size=1, max_size=3)


def flatten(docs: list[list[int]], tail: list[int] | None = None) -> list[int]:
    out = [t for d in docs for t in [*d, EOS]]
    return out + (tail or [])


def write_files(
    d: Path, corpus: list[list[list[int]]], tail: list[int] | None = None
) -> tuple[list[Path], list[list[int]]]:
    """One uint16 token file per entry (documents end with EOS; `tail` without EOS is appended
    to the last file); returns the paths and each file's tokens."""
    paths, tokens = [], []
    for f, docs in enumerate(corpus):
        flat = flatten(docs, tail if f == len(corpus) - 1 else None)
        p = d / f"part-{f}.npy"
        ot.write_tokens(p, [np.array(flat, dtype=np.int64)], np.uint16)
        paths.append(p)
        tokens.append(flat)
    return paths, tokens


def write_indexed(d: Path, corpus: list[list[list[int]]]) -> list[Path]:
    """The same documents (with EOS) as one indexed dataset per file."""
    prefixes = []
    for f, docs in enumerate(corpus):
        prefix = d / f"idx-{f}"
        with IndexedDatasetWriter(prefix, np.uint16) as w:
            for doc in docs:
                w.add_document([*doc, EOS], [len(doc) + 1])
        prefixes.append(prefix)
    return prefixes


def common(work_dir: Path, **extra: Any) -> dict[str, Any]:
    return {
        "pad_token_id": PAD,
        "eos_token_id": EOS,
        "dtype": np.uint16,
        "cache_dir": work_dir,
        "document_boundaries": "eos",
        **extra,
    }
