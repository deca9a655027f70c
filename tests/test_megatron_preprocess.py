"""Every indexed dataset of the Megatron fixtures, reproduced byte for byte."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from conftest import MEGATRON

import tokshuf


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def assert_matches(prefix: Path, expected: dict[str, Any]) -> None:
    assert sha256(Path(f"{prefix}.bin")) == expected["bin"]["sha256"]
    assert sha256(Path(f"{prefix}.idx")) == expected["idx"]["sha256"]


CORPUS_A = ["corpus_a.jsonl", "corpus_a.jsonl.gz", "corpus_a.jsonl.zst"]


@pytest.mark.parametrize("source", CORPUS_A)
@pytest.mark.parametrize("workers", range(1, 9))
def test_text_and_sents_outputs(
    tmp_path: Path, megatron_manifest: dict[str, Any], source: str, workers: int
) -> None:
    summary = tokshuf.preprocess(
        MEGATRON / "corpus" / source,
        tmp_path / "byte",
        "byte",
        ["text", "sents"],
        append_eod=True,
        num_threads=workers,
        batch_bytes=4096,  # many small batches: reordering must still give input order
    )
    ds = megatron_manifest["indexed_datasets"]
    assert_matches(tmp_path / "byte_text_document", ds["byte_text_document"])
    assert_matches(tmp_path / "byte_sents_document", ds["byte_sents_document"])
    assert summary["documents"] == 1000
    assert summary["dtype"] == "uint16"


@pytest.mark.parametrize(
    ("corpus", "name"),
    [("corpus_a.jsonl.zst", "byte_text_document_int32"), ("corpus_b.jsonl", "byteb_text_document_int32")],
)
def test_forced_int32(tmp_path: Path, megatron_manifest: dict[str, Any], corpus: str, name: str) -> None:
    tokshuf.preprocess(
        MEGATRON / "corpus" / corpus,
        tmp_path / "x",
        "byte",
        json_keys=["text"],
        append_eod=True,
        dtype="int32",
    )
    assert_matches(tmp_path / "x_text_document", megatron_manifest["indexed_datasets"][name])


@pytest.mark.parametrize("workers", [1, 4])
def test_round_robin_partitions(tmp_path: Path, megatron_manifest: dict[str, Any], workers: int) -> None:
    tokshuf.preprocess(
        MEGATRON / "corpus" / "corpus_a.jsonl.gz",
        tmp_path / "p2",
        "byte",
        json_keys=["text"],
        append_eod=True,
        partitions=2,
        num_threads=workers,
        batch_bytes=10_000,
    )
    assert_matches(
        tmp_path / "p2_text_document", megatron_manifest["indexed_datasets"]["bytep2_text_document"]
    )
    # No partition file is left behind.
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "p2.commit.json",
        "p2_summary.json",
        "p2_text_document.bin",
        "p2_text_document.idx",
    ]


def test_cli_preprocess(tmp_path: Path, megatron_manifest: dict[str, Any]) -> None:
    from tokshuf.cli import main

    rc = main(
        [
            "preprocess",
            "--input",
            str(MEGATRON / "corpus" / "corpus_a.jsonl"),
            "--output-prefix",
            str(tmp_path / "byte"),
            "--tokenizer",
            "byte",
            "--json-keys",
            "text",
            "--append-eod",
            "--workers",
            "2",
            "--quiet",
        ]
    )
    assert rc == 0
    assert_matches(
        tmp_path / "byte_text_document", megatron_manifest["indexed_datasets"]["byte_text_document"]
    )


@pytest.mark.parametrize("repeat_flag", [False, True])
def test_cli_takes_every_input(tmp_path: Path, repeat_flag: bool) -> None:
    # `--input a b` and `--input a --input b` both read both files (never only the last one).
    from tokshuf.cli import main

    a, b = MEGATRON / "corpus" / "corpus_a.jsonl", MEGATRON / "corpus" / "corpus_b.jsonl"
    inputs = ["--input", str(a), "--input", str(b)] if repeat_flag else ["--input", str(a), str(b)]
    out = tmp_path / "cli"
    assert main(["preprocess", *inputs, "--output-prefix", str(out), "--tokenizer", "byte", "--quiet"]) == 0
    tokshuf.preprocess([a, b], tmp_path / "api", "byte")
    for ext in (".bin", ".idx"):
        assert (
            Path(f"{out}_text_document{ext}").read_bytes()
            == (tmp_path / f"api_text_document{ext}").read_bytes()
        )
    assert tokshuf.IndexedDataset(f"{out}_text_document").num_documents == 1600

    parts = [tmp_path / "api_text_document", tmp_path / "api_text_document"]
    merge_inputs = (
        ["--input", str(parts[0]), "--input", str(parts[1])] if repeat_flag else ["--input", *map(str, parts)]
    )
    assert main(["merge", *merge_inputs, "--output-prefix", str(tmp_path / "m"), "--quiet"]) == 0
    assert tokshuf.IndexedDataset(tmp_path / "m").num_documents == 3200


def test_one_json_key_as_a_string(tmp_path: Path) -> None:
    a = MEGATRON / "corpus" / "corpus_a.jsonl"
    summary = tokshuf.preprocess(a, tmp_path / "s", "byte", json_keys="text", summary=False)
    assert [o["key"] for o in summary["outputs"]] == ["text"]
    tokshuf.preprocess(a, tmp_path / "l", "byte", json_keys=["text"], summary=False)
    for ext in (".bin", ".idx"):
        assert (tmp_path / f"s_text_document{ext}").read_bytes() == (
            tmp_path / f"l_text_document{ext}"
        ).read_bytes()


def test_merge_equals_concatenated_corpus(tmp_path: Path) -> None:
    a, b = MEGATRON / "corpus" / "corpus_a.jsonl", MEGATRON / "corpus" / "corpus_b.jsonl"
    parts = tmp_path / "parts"
    tokshuf.preprocess(a, parts / "0_a", "byte", json_keys=["text"], append_eod=True)
    tokshuf.preprocess(b, parts / "1_b", "byte", json_keys=["text"], append_eod=True)
    tokshuf.preprocess([a, b], tmp_path / "whole", "byte", json_keys=["text"], append_eod=True)
    summary = tokshuf.merge(parts, tmp_path / "merged")
    for ext in (".bin", ".idx"):
        assert (tmp_path / f"merged{ext}").read_bytes() == (
            tmp_path / f"whole_text_document{ext}"
        ).read_bytes()
    assert summary["documents"] == 1600

    # The golden files themselves merge the same way.
    fixtures = [MEGATRON / "data" / "byte_text_document", MEGATRON / "data" / "byte_sents_document"]
    tokshuf.merge(fixtures, tmp_path / "golden")
    merged = tokshuf.IndexedDataset(tmp_path / "golden")
    first, second = (tokshuf.IndexedDataset(p) for p in fixtures)
    assert len(merged) == len(first) + len(second)
    assert merged.num_documents == first.num_documents + second.num_documents
    assert (merged[len(first) + 5] == second[5]).all()


def test_merge_refuses_mixed_dtypes(tmp_path: Path) -> None:
    with pytest.raises(tokshuf.ConfigError, match=r"different dtypes.*int32"):
        tokshuf.merge(
            [MEGATRON / "data" / "byte_text_document", MEGATRON / "data" / "byte_text_document_int32"],
            tmp_path / "m",
        )
    assert list(tmp_path.iterdir()) == []


def test_merge_cli_sorts_directory_like_megatron(tmp_path: Path) -> None:
    from tokshuf.cli import main

    src = tmp_path / "src"
    for name in ["shard_2", "shard_10"]:
        with tokshuf.IndexedDatasetWriter(src / name, "uint16") as w:
            w.add_document([int(name.split("_")[1])], [1])
    assert main(["merge", "--input", str(src), "--output-prefix", str(tmp_path / "m"), "--quiet"]) == 0
    merged = tokshuf.IndexedDataset(tmp_path / "m")
    assert [int(merged[i][0]) for i in range(2)] == [10, 2]  # lexicographic: shard_10 < shard_2
