"""The torch adapter, and that nothing else imports torch."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from instance_data import common, write_files


def test_no_torch_import_without_torch(tmp_path: Path) -> None:
    paths, _ = write_files(tmp_path, [[[3, 4, 5]] * 20])
    code = textwrap.dedent(
        f"""
        import sys
        sys.modules["torch"] = None  # any `import torch` now fails
        import numpy as np
        import tokshuf, tokshuf.instances
        from tokshuf.instances import PackedFSLDataset
        ds = PackedFSLDataset(*{[str(p) for p in paths]!r}, sequence_length=8, pad_token_id=999,
                              eos_token_id=0, dtype=np.uint16, cache_dir={str(tmp_path / "w")!r})
        assert ds.get_batch([0, 1])["input_ids"].shape == (2, 8)
        assert sys.modules["torch"] is None
        """
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr


def test_dataloader_with_workers_gets_rust_filled_batches(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from tokshuf.instances import PackedFSLDataset
    from tokshuf.instances.torch import TorchInstances, collate

    rng = np.random.default_rng(0)
    paths, _ = write_files(
        tmp_path, [[rng.integers(2, 40, int(rng.integers(1, 60))).tolist() for _ in range(200)]]
    )
    ds = PackedFSLDataset(*paths, sequence_length=64, generate_doc_lengths=True, **common(tmp_path / "w"))
    loader = torch.utils.data.DataLoader(
        TorchInstances(ds), batch_size=4, collate_fn=collate, num_workers=2, multiprocessing_context="fork"
    )
    n = 0
    for k, batch in enumerate(loader):
        idx = np.arange(4 * k, min(4 * k + 4, len(ds)))
        expect = ds.get_batch(idx)
        assert batch["input_ids"].dtype == torch.int64
        assert batch["label_mask"].dtype == torch.bool
        assert torch.equal(batch["input_ids"], torch.from_numpy(expect["input_ids"]))
        assert torch.equal(batch["doc_lens"], torch.from_numpy(expect["doc_lens"]))
        assert batch["max_doc_lens"] == expect["max_doc_lens"]
        assert batch["index"].tolist() == idx.tolist()
        n += len(idx)
    assert n == len(ds)


def test_collate_of_items_pads_like_olmo() -> None:
    torch = pytest.importorskip("torch")
    from tokshuf.instances.torch import collate

    items = [
        {"input_ids": torch.tensor([1, 2, 3]), "doc_lens": torch.tensor([2, 1], dtype=torch.int32)},
        {"input_ids": torch.tensor([4]), "doc_lens": torch.tensor([1], dtype=torch.int32)},
    ]
    out = collate(items, pad_token_id=9)
    assert out["input_ids"].tolist() == [[1, 2, 3], [4, 9, 9]]
    assert out["doc_lens"].tolist() == [[2, 1], [1, 0]]
    assert out["max_doc_lens"] == [2, 1]
