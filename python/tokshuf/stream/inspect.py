"""What a loader checkpoint says, without the data: tokens per sub-dataset and epoch progress."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from tokshuf.stream.checkpoint import load_state
from tokshuf.stream.state import shard_docs, validate_state

__all__ = ["render", "summarize"]


def summarize(state: Mapping[str, Any]) -> dict[str, Any]:
    """Per sub-dataset: tokens read from the source, held in shuffle buffers, consumed (read
    minus buffered), documents finished, and shard epoch progress (epochs + position/size)."""
    validate_state(state)
    man = state["manifest"]
    n_shards = man["logical_shards"]
    rows = np.asarray(state["rows"], dtype=np.uint64)
    buf = np.asarray(state["buffer"], dtype=np.uint64)
    total_w = sum(d["weight"] for d in man["datasets"]) or 1.0
    subs = []
    for i, d in enumerate(man["datasets"]):
        r = rows[rows[:, 0] == i]
        sizes = np.array(
            [len(shard_docs(d["num_docs"], n_shards, int(s))) for s in r[:, 1]], dtype=np.float64
        )
        nonempty = sizes > 0
        progress = r[nonempty, 2].astype(np.float64) + r[nonempty, 3] / sizes[nonempty]
        read = int(r[:, 5].sum())
        buffered = int(buf[buf[:, 2] == i, 7].sum())
        subs.append(
            {
                "name": d["name"],
                "weight": d["weight"] / total_w,
                "documents": d["num_docs"],
                "shards": len(r),
                "tokens_read": read,
                "tokens_buffered": buffered,
                "tokens_consumed": read - buffered,
                "docs_finished": int(r[:, 6].sum()),
                "epoch_min": float(progress.min()) if len(progress) else 0.0,
                "epoch_mean": float(progress.mean()) if len(progress) else 0.0,
                "epoch_max": float(progress.max()) if len(progress) else 0.0,
                "shards_past_first_epoch": int((r[:, 2] >= 1).sum()),
            }
        )
    consumed = sum(s["tokens_consumed"] for s in subs) or 1
    for s in subs:
        s["share"] = s["tokens_consumed"] / consumed
    return {
        "format": f"{state['format']} v{state['version']}",
        "seed": man["seed"],
        "logical_shards": n_shards,
        "topology": {k: v for k, v in state["topology"].items() if k != "ranks"},
        "ranks_present": len(state["topology"].get("ranks", [])),
        "rows": len(rows),
        "buffered_lines": len({(int(a), int(b)) for a, b in buf[:, :2]}),
        "document": man["document"],
        "packing": man["packing"],
        "datasets": subs,
    }


def inspect_path(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Load (and validate) a checkpoint directory or part file, then summarize it."""
    return summarize(load_state(path))


def render(summary: Mapping[str, Any]) -> str:
    """A human-readable table."""
    t = summary["topology"]
    lines = [
        f"{summary['format']}: seed {summary['seed']}, {summary['logical_shards']} logical shards, "
        f"saved by {t['world_size']} rank(s) x {t['num_workers']} worker(s) = {t['workers']} global workers",
        f"{summary['rows']} shard rows, {summary['buffered_lines']} lines in shuffle buffers; "
        f"seq_length {summary['packing']['seq_length']}, chunk_size {summary['document']['chunk_size']}",
        "",
        f"{'sub-dataset':<28} {'weight':>7} {'share':>7} {'consumed':>14} {'buffered':>10} "
        f"{'docs done':>10} {'epoch min/mean/max':>20}",
    ]
    for s in summary["datasets"]:
        lines.append(
            f"{s['name'][:28]:<28} {s['weight']:>7.2%} {s['share']:>7.2%} {s['tokens_consumed']:>14,} "
            f"{s['tokens_buffered']:>10,} {s['docs_finished']:>10,} "
            f"{s['epoch_min']:>6.3f}/{s['epoch_mean']:.3f}/{s['epoch_max']:.3f}"
        )
    return "\n".join(lines)
