"""Label-mask files (OLMo-core's ``label_mask_paths``), carried into ``label_mask`` by every strategy
(False on padding), and per-path ``metadata``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from instance_data import EOS, PAD, common, files_with_documents, write_files

from tokshuf import ConfigError, FormatError
from tokshuf.instances import (
    FSLDataset,
    InterleavedFSLDataset,
    PackedFSLDataset,
    PaddedFSLDataset,
    VSLDataset,
)


def write_masks(d: Path, tokens: list[list[int]], seed: int) -> tuple[list[Path], np.ndarray]:
    rng = np.random.default_rng(seed)
    paths, flags = [], []
    for f, toks in enumerate(tokens):
        m = rng.random(len(toks)) < 0.7
        p = d / f"mask-{f}.npy"
        m.tofile(p)  # OLMo writes them with np.memmap: raw bools
        paths.append(p)
        flags.append(m)
    return paths, np.concatenate(flags) if flags else np.zeros(0, bool)


@given(corpus=files_with_documents, seq=st.integers(1, 16), seed=st.integers(0, 1000))
def test_masks_follow_tokens(
    tmp_path_factory: pytest.TempPathFactory, corpus: list, seq: int, seed: int
) -> None:
    d = tmp_path_factory.mktemp("m")
    paths, tokens = write_files(d, corpus)
    masks, flags = write_masks(d, tokens, seed)
    flat = np.array([t for f in tokens for t in f], dtype=np.int64)
    kw = common(d / "w", label_mask_paths=masks)

    fsl = FSLDataset(*paths, sequence_length=seq, **kw)
    if len(fsl):
        b = fsl.get_batch(np.arange(len(fsl)))
        starts = np.cumsum([0] + [len(t) for t in tokens])
        for i in range(len(fsl)):
            f = int(np.searchsorted(np.cumsum(fsl.instances_per_file), i, side="right"))
            s = starts[f] + (i - sum(fsl.instances_per_file[:f])) * seq
            assert b["label_mask"][i].tolist() == flags[s : s + seq].tolist()

    padded = PaddedFSLDataset(*paths, sequence_length=seq, **kw)
    if len(padded):
        b = padded.get_batch(np.arange(len(padded)))
        for i, (s, e) in enumerate(padded.spans.tolist()):
            assert b["label_mask"][i].tolist() == flags[s:e].tolist() + [False] * (seq - (e - s))

    packed = PackedFSLDataset(*paths, sequence_length=seq, **kw)
    if len(packed):
        b = packed.get_batch(np.arange(len(packed)))
        for i in range(len(packed)):
            m = np.concatenate([flags[s:e] for s, e in packed.instance_documents(i).tolist()])
            assert b["label_mask"][i].tolist() == m.tolist() + [False] * (seq - len(m))

    k = 2
    il = InterleavedFSLDataset(
        *paths, sequence_length=2 * seq, seed=seed, docs_per_instance=k, chunks_per_doc=2, **kw
    )
    if len(il):
        b = il.get_batch(np.arange(len(il)))
        base = PaddedFSLDataset(*paths, sequence_length=2 * seq, **kw).spans.tolist()
        order = np.random.default_rng(seed).permutation(len(base))
        for j in range(len(il)):
            parts = []
            for s, e in (base[x] for x in order[j * k : (j + 1) * k]):
                s_e = slice(s, min(e, s + seq))
                keep = ~np.isin(flat[s_e], [PAD, EOS])  # specials dropped with their flags
                parts.append(np.array_split(flags[s_e][keep], 2))
            m = [bool(x) for c in range(2) for p in parts for x in p[c]]
            if len(m) < 2 * seq:
                m.append(True)  # the EOS added
            assert b["label_mask"][j].tolist() == m + [False] * (2 * seq - len(m))


def test_vsl_and_validation(tmp_path: Path) -> None:
    paths, tokens = write_files(tmp_path, [[[3] * 20, [4] * 9]])
    masks, flags = write_masks(tmp_path, tokens, 0)
    ds = VSLDataset(
        *paths, min_sequence_length=4, max_sequence_length=16, label_mask_paths=masks, **common(tmp_path)
    )
    b = ds.get_batch(np.arange(len(ds)))
    for i, (s, e) in enumerate(ds.spans.tolist()):
        assert b["label_mask"][i, : e - s].tolist() == flags[s:e].tolist()
        assert not b["label_mask"][i, e - s :].any()
    with pytest.raises(ConfigError, match="one per path"):
        FSLDataset(*paths, sequence_length=4, label_mask_paths=[], **common(tmp_path))
    masks[0].write_bytes(b"\x01" * 5)
    with pytest.raises(FormatError, match="label mask"):
        FSLDataset(*paths, sequence_length=4, label_mask_paths=masks, **common(tmp_path))


def test_metadata_per_source(tmp_path: Path) -> None:
    paths, _ = write_files(tmp_path, [[[3] * 9, [4] * 5], [[5] * 7], [[6] * 3, [7] * 2]])
    meta = [{"label": "a"}, {"label": "b"}, {"label": "c"}]
    kw = common(tmp_path / "w", metadata=meta)
    fsl = FSLDataset(*paths, sequence_length=4, **kw)
    labels = [m["label"] for m in fsl.get_batch(np.arange(len(fsl)))["metadata"]]
    assert labels == ["a"] * 4 + ["b"] * 2 + ["c"]  # 16, 8 and 7 tokens
    padded = PaddedFSLDataset(*paths, sequence_length=8, **kw)
    assert [m["label"] for m in padded.get_batch(np.arange(len(padded)))["metadata"]] == list("aabcc")
    item = padded[2]
    assert item["metadata"] == {"label": "b"}
    item["metadata"]["label"] = "changed"  # a copy
    assert padded[2]["metadata"] == {"label": "b"}
    packed = PackedFSLDataset(*paths, sequence_length=16, source_group_size=2, **kw)
    groups = packed.get_batch(np.arange(len(packed)))["metadata"]
    assert all(g in ([meta[0], meta[1]], [meta[2]]) for g in groups)  # a list per group, as OLMo
    assert [meta[2]] in groups
    il = InterleavedFSLDataset(
        *paths,
        sequence_length=8,
        seed=0,
        docs_per_instance=2,
        chunks_per_doc=1,
        interleaving_exempt_paths=[paths[1]],
        **kw,
    )
    assert il.get_batch([0])["metadata"] == [{"label": "b"}]  # the exempt file's instance comes first
    one = FSLDataset(*paths, sequence_length=4, **common(tmp_path / "w", metadata={"x": 1}))
    assert one[0]["metadata"] == {"x": 1}
    with pytest.raises(ConfigError, match="one per path"):
        FSLDataset(*paths, sequence_length=4, **common(tmp_path / "w", metadata=meta[:2]))
