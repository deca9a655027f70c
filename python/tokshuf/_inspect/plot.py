"""``--plot FILE.png|.html``: document lengths per source, the realized mixture of a blend against
its target weights, shard sizes, and how full instances are. Needs matplotlib (the ``plot`` extra)."""

from __future__ import annotations

import dataclasses
import html
import io
import json
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from tokshuf.errors import ConfigError

__all__ = ["Panel", "PlotResult", "panels", "plot"]

#: Log-spaced length bins per histogram.
BINS = 40
#: Bins of the packing-efficiency histogram (5% each).
FILL_BINS = 20
#: Points kept per mixture curve (an HTML file stays small for a million-step run).
MAX_POINTS = 1000


@dataclasses.dataclass(frozen=True)
class Panel:
    title: str
    xlabel: str
    ylabel: str
    #: ``{name: {"x": [...], "y": [...], "style": "bar" | "line" | "dashed" | "boundary"}}``
    #: (``boundary``: vertical lines at ``x``, phase or stage starts; no ``y``)
    series: dict[str, dict[str, Any]]
    log_x: bool = False


@dataclasses.dataclass(frozen=True)
class PlotResult:
    path: str
    panels: list[Panel]


def _length_panel(lengths: dict[str, npt.NDArray[Any]]) -> Panel:
    top = max((int(a.max()) for a in lengths.values() if len(a)), default=1)
    # Log bins from 1 token: empty documents (length 0) have no place on a log axis and are
    # reported as counts instead.
    edges = np.geomspace(1, top + 1, BINS + 1)
    series = {}
    for name, a in lengths.items():
        counts, _ = np.histogram(a[a > 0], edges)
        series[name] = {"x": edges[:-1].tolist(), "width": np.diff(edges).tolist(), "y": counts.tolist()}
        series[name]["style"] = "bar"
    return Panel("document length", "tokens per document (log bins)", "documents", series, log_x=True)


def _mixture_panel(report: Any) -> Panel | None:
    sources = report.train_sources
    if sources is None or not len(sources):
        return None
    train = next(s for s in report.splits if s.split == "train")
    per_step = report.batch_size or 1
    n_steps = len(sources) // per_step
    if n_steps == 0:
        return None
    seq = report.sequence_length
    steps = np.arange(1, n_steps + 1)
    keep = np.unique(np.linspace(0, n_steps - 1, min(n_steps, MAX_POINTS)).astype(np.int64))
    # The target per sample: the split's weights, or in a staged run each stage's own.
    stages = report.stages or []
    goal = np.zeros((n_steps * per_step, len(train.sources)))
    if stages:
        for st in stages:
            goal[st.first_sample : st.first_sample + st.samples] = [s.target for s in st.sources]
    has_goal = bool(stages) or all(src.target_weight is not None for src in train.sources)
    if not stages and has_goal:
        goal[:] = [src.target_weight for src in train.sources]
    series: dict[str, dict[str, Any]] = {}
    for d, src in enumerate(train.sources):
        drawn = np.cumsum(sources[: n_steps * per_step] == d).reshape(n_steps, per_step)[:, -1]
        x = steps[keep].tolist()
        series[f"{src.name} (realized)"] = {"x": x, "y": (drawn[keep] * seq).tolist(), "style": "line"}
        if has_goal:
            target = np.cumsum(goal[:, d]).reshape(n_steps, per_step)[:, -1] * seq
            series[f"{src.name} (target)"] = {"x": x, "y": target[keep].tolist(), "style": "dashed"}
    starts = [st.first_sample / per_step for st in stages[1:] if 0 < st.first_sample < n_steps * per_step]
    if starts:
        series["stage starts"] = {"x": starts, "style": "boundary"}
    xlabel = "training step" if report.batch_size else "sample"
    return Panel("tokens per source", xlabel, "tokens (cumulative)", series)


def _phase_panel(report: Any) -> Panel | None:
    """A loader checkpoint's mix schedule: tokens drawn per source, cumulative at each phase's
    start and at the saved step, against the phases' targets."""
    mix = [p for p in report.summary.get("mix", []) if p["status"] != "scheduled"]
    if not mix:
        return None
    x = [p["start_step"] for p in mix] + [report.summary["step"]]
    series: dict[str, dict[str, Any]] = {}
    for i, src in enumerate(mix[0]["sources"]):
        drawn = np.cumsum([0] + [p["sources"][i]["tokens"] for p in mix])
        target = np.cumsum([0] + [p["sources"][i]["target"] * p["tokens"] for p in mix])
        series[f"{src['name']} (realized)"] = {"x": x, "y": drawn.tolist(), "style": "line"}
        series[f"{src['name']} (target)"] = {"x": x, "y": target.tolist(), "style": "dashed"}
    if len(mix) > 1:
        series["phase starts"] = {"x": [p["start_step"] for p in mix[1:]], "style": "boundary"}
    return Panel("tokens drawn per source, by mix phase", "training step", "tokens (cumulative)", series)


def _shard_panel(report: Any) -> Panel:
    sizes = np.array([s.bytes for s in report.per_shard or []], dtype=np.int64)
    counts, edges = np.histogram(sizes, bins=min(BINS, max(1, len(np.unique(sizes)))))
    series = {report.path: {"x": edges[:-1].tolist(), "width": np.diff(edges).tolist(), "y": counts.tolist()}}
    series[report.path]["style"] = "bar"
    return Panel("shard size", "shard size (bytes)", "shards", series)


def _efficiency_panel(reports: Sequence[Any]) -> Panel:
    """Instances by fill (data tokens / room), in bins of 5%, per dataset."""
    edges = np.linspace(0.0, 1.0, FILL_BINS + 1)
    series = {}
    for r in reports:
        counts, _ = np.histogram(r.fill, edges)  # the last bin holds full instances (1.0)
        name = f"{os.path.basename(r.path)}: {r.strategy}, {r.efficiency:.1%} efficiency"
        series[name] = {"x": edges[:-1].tolist(), "width": np.diff(edges).tolist(), "y": counts.tolist()}
        series[name]["style"] = "bar"
    return Panel("packing efficiency", "tokens / room per instance", "instances", series)


def panels(reports: Sequence[Any]) -> list[Panel]:
    """What :func:`plot` draws for these reports (also its data, for tests and HTML)."""
    lengths: dict[str, npt.NDArray[Any]] = {}
    out: list[Panel] = []
    for r in reports:
        if r.kind in ("indexed", "olmo") and r.lengths is not None:
            lengths[r.path] = r.lengths
        elif r.kind == "blend":
            lengths.update(r.lengths or {})
            mix = _mixture_panel(r)
            if mix is not None:
                out.append(mix)
        elif r.kind == "shards":
            out.append(_shard_panel(r))
        elif r.kind == "checkpoint":
            phases = _phase_panel(r)
            if phases is not None:
                out.append(phases)
    filled = [r for r in reports if r.kind == "instances" and r.fill is not None]
    if filled:
        out.append(_efficiency_panel(filled))
    if lengths:
        out.insert(0, _length_panel(lengths))
    return out


def _figure(drawn: list[Panel]) -> Any:
    from matplotlib.figure import Figure  # no pyplot: no global state, no display backend

    fig = Figure(figsize=(7, 3.6 * len(drawn)), layout="constrained")
    for ax, p in zip(np.atleast_1d(fig.subplots(len(drawn), 1)), drawn, strict=True):
        color = None
        for name, s in p.series.items():
            if s["style"] == "boundary":
                for k, at in enumerate(s["x"]):
                    ax.axvline(at, linestyle=":", color="grey", alpha=0.8, label=name if k == 0 else None)
            elif s["style"] == "bar":
                ax.bar(s["x"], s["y"], width=s["width"], align="edge", alpha=0.5, label=name)
            elif s["style"] == "dashed":  # a target, in the colour of the realized curve before it
                ax.plot(s["x"], s["y"], linestyle="--", color=color, alpha=0.7, label=name)
            else:
                (line,) = ax.plot(s["x"], s["y"], label=name)
                color = line.get_color()
        if p.log_x:
            ax.set_xscale("log")
        ax.set_title(p.title)
        ax.set_xlabel(p.xlabel)
        ax.set_ylabel(p.ylabel)
        # Out of the layout: long names (paths) would otherwise squeeze the axes to nothing.
        ax.legend(fontsize="small").set_in_layout(False)
    return fig


def plot(reports: Sequence[Any], path: str | os.PathLike[str]) -> PlotResult:
    """Draw every panel that ``reports`` support into ``path`` (``.png``, or ``.html``: an inline
    SVG plus the series as JSON in ``<script id="tokshuf-series">``)."""
    p = os.fspath(path)
    if not p.endswith((".png", ".html")):
        raise ConfigError(f"--plot {p!r}: the file must end with .png or .html")
    drawn = panels(reports)
    if not drawn:
        kinds = sorted({r.kind for r in reports})
        raise ConfigError(
            f"nothing to plot for {kinds}: plots cover .bin/.idx, .npy, shards, blends, instances and "
            "loader checkpoints"
        )
    try:
        import matplotlib
    except ImportError:
        raise ConfigError("--plot needs matplotlib: pip install 'tokshuf[plot]'") from None
    fig = _figure(drawn)
    if p.endswith(".png"):
        fig.savefig(p, dpi=100)
    else:
        svg = io.StringIO()
        with matplotlib.rc_context({"svg.fonttype": "none"}):  # labels stay text, searchable
            fig.savefig(svg, format="svg")
        data = json.dumps([dataclasses.asdict(d) for d in drawn]).replace("</", "<\\/")
        titles = ", ".join(d.title for d in drawn)
        with open(p, "w", encoding="utf-8") as f:
            f.write(
                f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>tokshuf inspect: "
                f"{html.escape(titles)}</title></head>\n<body>\n{svg.getvalue()}\n"
                f'<script type="application/json" id="tokshuf-series">{data}</script>\n</body></html>\n'
            )
    return PlotResult(p, drawn)
