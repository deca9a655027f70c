"""Human-readable summaries of the inspect reports."""

from __future__ import annotations

from typing import Any

from tokshuf._inspect._excerpt import Excerpt
from tokshuf._inspect._stats import IdStats, LengthStats

__all__ = ["render"]


def _distribution(what: str, s: LengthStats) -> str:
    q = s.quantiles
    return (
        f"{what}: mean {s.mean:,.1f}, min {s.min:,}, p10 {q['p10']:,.0f}, median {q['p50']:,.0f}, "
        f"p90 {q['p90']:,.0f}, p99 {q['p99']:,.0f}, max {s.max:,}"
    )


def _lengths(s: LengthStats) -> str:
    return _distribution("document length", s)


def _ids(ids: IdStats | None) -> str:
    if ids is None:
        return "token ids: not scanned (large file; pass --scan to count them)"
    if not ids.tokens:
        return "token ids: none (no tokens)"
    top = ", ".join(f"{i}:{c:,}" for i, c in ids.top)
    span = f"[{ids.min_id}, {ids.max_id}]"
    return f"token ids: {ids.distinct:,} distinct in {span}; most frequent (id:count) {top}"


def _excerpt(ex: Excerpt | None) -> list[str]:
    if ex is None:
        return []
    head = f"document {ex.document} ({ex.length:,} tokens), first {len(ex.ids)} ids: {ex.ids}"
    lines = [head]
    if ex.text is not None:
        lines.append(f"  text: {ex.text!r}")
    if ex.note:
        lines.append(f"  ({ex.note})")
    return lines


def _documents(r: Any) -> list[str]:
    """What the two token-file views show after their counts: lengths, ids, the excerpt."""
    return [_lengths(r.document_lengths), _ids(r.ids), *_excerpt(r.excerpt)]


def _indexed(r: Any) -> list[str]:
    return [
        f"{r.path}: Megatron .bin/.idx, {r.dtype}, {r.bin_bytes:,} bytes",
        f"{r.documents:,} documents, {r.sequences:,} sequences, {r.tokens:,} tokens, "
        f"{r.empty_documents:,} empty documents",
        *_documents(r),
    ]


def _olmo(r: Any) -> list[str]:
    return [
        f"{r.path}: OLMo token file, {r.dtype}, documents from {r.boundaries}",
        f"{r.documents:,} documents, {r.tokens:,} tokens ({r.tokens_outside_documents:,} in no document), "
        f"{r.empty_documents:,} empty documents",
        *_documents(r),
    ]


def _shards(r: Any) -> list[str]:
    lines = [
        f"{r.path}: webdataset shards, {r.shards:,} shards, {r.contexts:,} contexts"
        + (f" of {r.sequence_length:,} tokens" if r.sequence_length else ""),
        f"shard size: {r.shard_bytes:,} bytes in all; min {r.shard_bytes_min:,}, "
        f"median {r.shard_bytes_median:,.0f}, max {r.shard_bytes_max:,}",
        f"contexts decoded: {r.contexts_read:,}"
        + (" (all: --verify)" if r.verified else " (first shard; --verify reads all)"),
    ]
    if r.special_counts:
        ids = {"eot": r.eos_token_id, "pad": r.pad_token_id, "bos": r.bos_token_id}
        seen = ", ".join(f"{k.upper()} {ids[k]}: {n:,}" for k, n in r.special_counts.items())
        lines.append(f"special ids seen: {seen}")
    if r.padding_fraction is not None:
        lines.append(f"padding: {r.padding_fraction:.2%} of the tokens decoded")
    else:
        lines.append("padding: unknown (give --pad-id or --eot-id)")
    lines.append("most frequent ids (id:count): " + ", ".join(f"{i}:{c:,}" for i, c in r.top_ids))
    if r.problems:
        lines.append(f"PROBLEMS ({len(r.problems)}):")
        lines += [f"  - {p}" for p in r.problems]
    else:
        lines.append("manifest and tars agree")
    return lines


def _blend(r: Any) -> list[str]:
    lines = [
        f"{r.path}: {'blend' if len(r.splits and r.splits[0].sources) > 1 else 'Nanoset'}, "
        f"sequence_length {r.sequence_length}, split {r.split!r}, seed {r.seed}, {r.index_scheme} indices",
    ]
    for s in r.splits:
        lines.append(f"{s.split}: {s.samples:,} samples, {s.tokens:,} tokens")
        lines.append(
            f"  {'source':<40} {'target':>7} {'share':>7} {'samples':>12} {'tokens':>15} "
            f"{'epochs':>6} {'documents':>10}"
        )
        for src in s.sources:
            target = "-" if src.target_weight is None else f"{src.target_weight:.2%}"
            lines.append(
                f"  {src.name[-40:]:<40} {target:>7} {src.share:>7.2%} {src.samples:>12,} {src.tokens:>15,} "
                f"{src.epochs:>6} {src.documents:>10,}"
            )
    for stage in r.stages or []:
        end = stage.first_sample + stage.samples
        lines.append(
            f"stage {stage.name!r}: from step {stage.start_step}, samples {stage.first_sample:,}-{end - 1:,} "
            f"({stage.samples:,})"
        )
        for src in stage.sources:
            if src.target or src.samples:
                lines.append(
                    f"  {src.name[-40:]:<40} target {src.target:>7.2%}  realized {src.share:>7.2%} "
                    f"{src.samples:>12,}"
                )
    if r.step is not None:
        st = r.step
        who = "every rank" if st.dp_rank is None else f"dp rank {st.dp_rank} of {st.dp_size}"
        lines.append(f"{st.split} step {st.step} (batch size {st.batch_size}, {who}):")
        for o in st.samples:
            docs = ", ".join(f"doc {p.document}[{p.offset}:{p.offset + p.length}]" for p in o.pieces)
            lines.append(
                f"  sample {o.sample} (rank {o.dp_rank}) <- source {o.source} "
                f"sample {o.source_sample}: {docs}"
            )
            if o.text is not None:
                lines.append(f"    {o.text!r}")
        if st.note:
            lines.append(f"  ({st.note})")
    return lines


#: How each instance strategy fills its instances, in words.
_STRATEGIES = {
    "fsl": "concatenated and chunked",
    "padded": "one document per instance, padded",
    "packed": "documents packed by best-fit decreasing, padded",
    "interleaved": "chunks of several documents interleaved, padded",
    "vsl": "variable sequence length (power-of-two pieces of documents)",
}


def _instances(r: Any) -> list[str]:
    options = "".join(f", {k} {v}" for k, v in r.options.items() if v is not None)
    limit = "max sequence_length" if r.strategy == "vsl" else "sequence_length"
    lines = [
        f"{r.path}: OLMo-style instances, {r.strategy}: {_STRATEGIES[r.strategy]}",
        f"{limit} {r.sequence_length:,}{options}",
        f"{r.sources:,} source files: {r.source_tokens:,} tokens, {r.documents:,} documents "
        f"({r.long_documents:,} longer than {r.sequence_length:,} tokens)",
        f"{r.instances:,} instances: {r.tokens:,} tokens in room for {r.capacity:,}, "
        f"{r.padding_tokens:,} padding ({r.efficiency:.2%} efficiency, {r.padding_fraction:.2%} padding); "
        f"{r.data_fraction:.2%} of the source tokens",
        _distribution("documents per instance", r.documents_per_instance),
        _distribution("tokens per document in an instance", r.document_lengths),
    ]
    if r.instances_per_bucket is not None:
        lines.append(
            "instances per bucket: " + ", ".join(f"{n}: {c:,}" for n, c in r.instances_per_bucket.items())
        )
    lines.append(f"index: {r.cache or 'none (no index needed)'}")
    return lines


def render(report: Any) -> str:
    """One report as text."""
    if report.kind == "checkpoint":
        from tokshuf._inspect.checkpoint import render as render_checkpoint

        return render_checkpoint(report.summary)
    return "\n".join(
        {"indexed": _indexed, "olmo": _olmo, "shards": _shards, "blend": _blend, "instances": _instances}[
            report.kind
        ](report)
    )
