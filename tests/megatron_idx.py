"""An independent, numpy-only parser of the MMIDIDX layout (the spec, not our reader)."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np

CODES = {
    1: np.uint8,
    2: np.int8,
    3: np.int16,
    4: np.int32,
    5: np.int64,
    6: np.float64,
    7: np.float32,
    8: np.uint16,
}


def parse_idx(path: Path | str) -> dict[str, Any]:
    b = Path(path).read_bytes()
    assert b[:9] == b"MMIDIDX\x00\x00"
    (version,) = struct.unpack("<Q", b[9:17])
    code = b[17]
    s, d = struct.unpack("<QQ", b[18:34])
    off = 34
    lengths = np.frombuffer(b, np.int32, s, off)
    off += 4 * s
    pointers = np.frombuffer(b, np.int64, s, off)
    off += 8 * s
    docs = np.frombuffer(b, np.int64, d, off)
    off += 8 * d
    modes = np.frombuffer(b, np.int8, s, off) if len(b) == off + s and s else None
    return {
        "version": version,
        "dtype": np.dtype(CODES[code]),
        "lengths": lengths,
        "pointers": pointers,
        "document_indices": docs,
        "modes": modes,
    }


def write_idx_bytes(dtype: np.dtype[Any], lengths: list[int], doc_indices: list[int]) -> bytes:
    """What Megatron's _IndexWriter writes for these arrays."""
    code = {np.dtype(v): k for k, v in CODES.items()}[np.dtype(dtype)]
    out = b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + struct.pack("<B", code)
    out += struct.pack("<Q", len(lengths)) + struct.pack("<Q", len(doc_indices))
    ptrs = np.zeros(len(lengths), np.int64)
    if lengths:
        ptrs[1:] = np.cumsum(np.asarray(lengths, np.int64) * np.dtype(dtype).itemsize)[:-1]
    out += (
        np.asarray(lengths, np.int32).tobytes() + ptrs.tobytes() + np.asarray(doc_indices, np.int64).tobytes()
    )
    return out
