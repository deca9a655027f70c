"""A streaming-loader checkpoint (``tokshuf.stream``), without the data: tokens per sub-dataset,
epoch progress and the mix schedule's phases (also ``tokshuf.stream.summarize`` and ``render``)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from tokshuf._inspect._report import Report

# The stream modules are imported where used: tokshuf.stream imports this module.

__all__ = ["CheckpointReport", "inspect_checkpoint", "render", "summarize"]


@dataclasses.dataclass(frozen=True)
class CheckpointReport(Report):
    path: str
    #: :func:`summarize`'s dict (its keys are the JSON output's).
    summary: dict[str, Any]
    kind: str = "checkpoint"

    def to_dict(self) -> dict[str, Any]:
        # Flat, as `tokshuf inspect CHECKPOINT --json` printed before there were other kinds.
        return {"kind": self.kind, "path": self.path, **self.summary}


def inspect_checkpoint(path: str | os.PathLike[str]) -> CheckpointReport:
    """Load (and validate) a checkpoint directory or part file, then summarize it."""
    from tokshuf.stream.checkpoint import load_state

    return CheckpointReport(os.fspath(path), summarize(load_state(path)))


def summarize(state: Mapping[str, Any]) -> dict[str, Any]:
    """Per sub-dataset: tokens read from the source, held in shuffle buffers, consumed (read
    minus buffered), documents finished, and shard epoch progress (epochs + position/size); per
    phase of the mix schedule, the target and the realized share of the tokens drawn in it."""
    from tokshuf.stream.state import checked, shard_docs, state_mix, state_step

    state = checked(state)
    man = state["manifest"]
    n_shards = man["logical_shards"]
    rows = np.asarray(state["rows"], dtype=np.uint64)
    buf = np.asarray(state["buffer"], dtype=np.uint64)
    # The weights in force at the saved step (the datasets' own ones without a schedule).
    in_force = [p for p in state_mix(state) if p[0] <= state_step(state)][-1][1]
    total_w = sum(in_force) or 1
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
                "weight": in_force[i] / total_w,
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
        "step": state_step(state),
        "mix": _phases(state),
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


def _phases(state: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per phase: its steps, target shares, and the tokens drawn in it per sub-dataset (what
    the workers' mixers counted: live counters, and those of phases they left)."""
    from tokshuf.stream.state import state_mix, state_step

    names = [d["name"] for d in state["manifest"]["datasets"]]
    mix, step = state_mix(state), state_step(state)
    drawn = np.zeros((len(mix), len(names)), np.uint64)
    for table, phase_col in ((state["history"], 1), (state["workers"], 4)):
        np.add.at(drawn, table[:, phase_col].astype(np.intp), table[:, phase_col + 1 :])
    out = []
    for k, (start, weights) in enumerate(mix):
        end = mix[k + 1][0] if k + 1 < len(mix) else None
        tokens = [int(t) for t in drawn[k]]
        total, wsum = sum(tokens), sum(weights)
        out.append(
            {
                "phase": k,
                "start_step": start,
                "end_step": end,
                "status": "done"
                if end is not None and end <= step
                else "running"
                if start <= step
                else "scheduled",
                "weights": list(weights),
                "sources": [
                    {
                        "name": n,
                        "target": w / wsum,
                        "tokens": t,
                        "share": t / total if total else 0.0,
                    }
                    for n, w, t in zip(names, weights, tokens, strict=True)
                ],
                "tokens": total,
            }
        )
    return out


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
    mix = summary.get("mix") or []
    if len(mix) > 1 or any(p["status"] != "running" for p in mix):
        lines += ["", f"mix schedule (saved at step {summary['step']}; tokens drawn per phase):"]
        for p in mix:
            end = "" if p["end_step"] is None else f"{p['end_step'] - 1}"
            lines.append(
                f"  phase {p['phase']}: steps {p['start_step']}-{end} ({p['status']}), "
                f"{p['tokens']:,} tokens drawn"
            )
            for src in p["sources"]:
                lines.append(
                    f"    {src['name'][:26]:<26} target {src['target']:>7.2%}  realized {src['share']:>7.2%}"
                    f"  {src['tokens']:>14,}"
                )
    return "\n".join(lines)
