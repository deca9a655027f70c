"""`tokshuf olmo-convert` and `tokshuf instances`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tokshuf import IndexedDatasetWriter
from tokshuf import olmo_tokens as ot
from tokshuf.cli import main
from tokshuf.instances import PackedFSLDataset
from tokshuf.instances._named import open_strategy


def test_convert_then_prepare_an_index_offline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with IndexedDatasetWriter(tmp_path / "ds", np.uint16) as w:
        for i in range(60):
            w.add_document([*range(2, 2 + i % 23), 0], [i % 23 + 1])
    assert (
        main(
            ["olmo-convert", "--input", str(tmp_path / "ds"), "--output", str(tmp_path / "ds.npy"), "--json"]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["documents"] == 60
    assert out["tokens"] == sum(i % 23 + 1 for i in range(60))
    assert ot.metadata_path(tmp_path / "ds.npy").is_file()
    args = ["instances", str(tmp_path / "ds.npy"), "--strategy", "packed", "--sequence-length", "32"]
    args += [
        "--eos-token-id",
        "0",
        "--pad-token-id",
        "999",
        "--dtype",
        "uint16",
        "--work-dir",
        str(tmp_path / "w"),
        "--json",
    ]
    assert main(args) == 0
    summary = json.loads(capsys.readouterr().out)
    ds = PackedFSLDataset(
        tmp_path / "ds.npy",
        sequence_length=32,
        eos_token_id=0,
        pad_token_id=999,
        dtype=np.uint16,
        cache_dir=tmp_path / "w",
    )
    assert summary["instances"] == len(ds)
    assert summary["cache"] == str(ds.cache_path)  # the training job finds the index ready
    assert 0 <= summary["padding_fraction"] < 0.2
    # The summary file beside the index, from which the same dataset opens again.
    written = tmp_path / "w" / "instances" / f"instances-packed-{ds.fingerprint}_summary.json"
    assert json.loads(written.read_text()) == summary
    assert summary["paths"] == [str(tmp_path / "ds.npy")]
    again = open_strategy(summary["strategy"], summary["paths"], summary["arguments"])
    assert (type(again), len(again), again.fingerprint) == (PackedFSLDataset, len(ds), ds.fingerprint)
    assert json.loads((tmp_path / "ds_summary.json").read_text())["documents"] == 60  # olmo-convert's


def test_missing_dtype_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ot.write_tokens(tmp_path / "a.npy", [np.arange(5)], np.uint16)
    args = ["instances", str(tmp_path / "a.npy"), "--strategy", "fsl", "--sequence-length", "2"]
    assert main([*args, "--eos-token-id", "0", "--pad-token-id", "9", "--work-dir", str(tmp_path)]) == 1
    assert "dtype" in capsys.readouterr().err


def test_instances_thread_flags_give_the_same_index(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with IndexedDatasetWriter(tmp_path / "ds", np.uint16) as w:
        for i in range(40):
            w.add_document([*range(2, 2 + i % 17), 0], [i % 17 + 1])
    base = ["instances", str(tmp_path / "ds"), "--strategy", "fsl", "--sequence-length", "16"]
    base += ["--eos-token-id", "0", "--pad-token-id", "999", "--json"]
    summaries = []
    # 0 is every CPU, as for shuffle --threads; --num-threads is the API's name for the same flag.
    for i, flags in enumerate([[], ["--threads", "0"], ["--threads", "1"], ["--num-threads", "2"]]):
        assert main([*base, "--work-dir", str(tmp_path / f"w{i}"), *flags]) == 0
        summary = json.loads(capsys.readouterr().out)
        summaries.append((summary["instances"], summary["fingerprint"]))
    assert len(set(summaries)) == 1
    with pytest.raises(SystemExit):
        main([*base, "--threads", "-1"])
    assert "argument --threads/--num-threads: must be between 0 and 1024, got -1" in capsys.readouterr().err
