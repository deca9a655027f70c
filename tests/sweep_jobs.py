"""The jobs of the crash sweep (``test_crash_sweep.py``), each run in a process of its own:

    python sweep_jobs.py JOB WORK OUT [POINT]

prints ``ready`` once imported, then runs JOB on the inputs in WORK, writing OUT (a local path or
an ``s3://`` URL); with POINT, the process dies at that write point (the fault hook), as a kill
there would.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import tokshuf
from tokshuf import _core
from tokshuf.olmo_tokens import from_indexed

KEYS = ("text", "title")
SHUFFLE = {
    "context_length": 33,
    "wds_chunk_size": 30,
    "num_local_cells": 4,
    "progress": "none",
    "num_threads": 1,
}


def preprocess(work: str, out: str) -> None:
    tokshuf.preprocess(f"{work}/new.jsonl", out, "byte", json_keys=KEYS, append_eod=True)


def merge(work: str, out: str) -> None:
    tokshuf.merge([f"{work}/a_text_document", f"{work}/b_text_document"], out)


def convert(work: str, out: str) -> None:
    from_indexed(f"{work}/b_text_document", out)


def shuffle(work: str, out: str) -> None:
    tokshuf.shuffle(f"{work}/new.jsonl", f"{work}/cells", out, "byte", **SHUFFLE)  # type: ignore[arg-type]


def staged(work: str, out: str) -> None:
    def step(**kw: object) -> None:
        tokshuf.shuffle(f"{work}/new.jsonl", f"{work}/cells", out, "byte", **SHUFFLE, **kw)  # type: ignore[arg-type]

    for i in range(2):
        step(stage="cells", task=(i, 2))
    for j in range(2):
        step(stage="shards", task=(j, 2))
    step(stage="manifest")


def parts(work: str, out: str) -> None:
    tokshuf.merge_parts(out)


JOBS: dict[str, Callable[[str, str], None]] = {
    "preprocess": preprocess,
    "merge": merge,
    "convert": convert,
    "shuffle": shuffle,
    "staged": staged,
    "parts": parts,
}

if __name__ == "__main__":
    job, work, out = sys.argv[1:4]
    if len(sys.argv) > 4:
        _core._fail_writes_after(int(sys.argv[4]), True)
    print("ready", flush=True)
    JOBS[job](work, out)
