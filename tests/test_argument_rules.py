"""The Python readers and loaders take indices and sizes as Python sequences and the command line
do (issue 40, item 4): negative indices count from the end or raise ``IndexError`` naming what
and where, never return another item; a float, a string or a bool is a ``TypeError`` (an index)
or a ``ConfigError`` naming the argument (a size); numpy integers work wherever an int does; and a
size no machine can hold is a ``ConfigError``, never an abort."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from instance_data import common, write_files
from stream_helpers import make_stream, scratch, simple_corpus

import tokshuf
from tokshuf import _limits
from tokshuf.cli import _args, main
from tokshuf.errors import ConfigError
from tokshuf.instances import (
    FSLDataset,
    InterleavedFSLDataset,
    PackedFSLDataset,
    PaddedFSLDataset,
    VSLDataset,
)

# -- IndexedDataset: sequences and documents ---------------------------------------------------


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> tuple[tokshuf.IndexedDataset, list[list[int]]]:
    """Seven documents of one to three sequences each, every sequence's ids distinct."""
    prefix = tmp_path_factory.mktemp("indexed") / "ds"
    docs: list[list[int]] = []
    nxt = 10
    with tokshuf.IndexedDatasetWriter(prefix, np.int32) as w:
        for d in range(7):
            seqs = []
            for _ in range(d % 3 + 1):
                seq = list(range(nxt, nxt + d + 2))
                nxt += d + 2
                w.add_sequence(seq)
                seqs.append(seq[0])
            w.end_document()
            docs.append(seqs)
    return tokshuf.IndexedDataset(prefix), docs


def test_documents_take_negative_numbers_as_python_does(indexed: Any) -> None:
    ds, docs = indexed
    n = len(docs)
    for d in range(-n, n):
        assert [int(s[0]) for s in ds.document(d)] == docs[d], d
    for d in (n, n + 1, -n - 1, -100):
        with pytest.raises(IndexError, match=rf"document {d} is out of range for the {n} documents of .*ds"):
            ds.document(d)


def test_sequences_take_negative_indices_and_numpy_integers(indexed: Any) -> None:
    ds, docs = indexed
    firsts = [s for d in docs for s in d]
    for i in range(-len(firsts), len(firsts)):
        assert int(ds[i][0]) == firsts[i]
        assert int(ds[np.int64(i)][0]) == firsts[i]
        assert int(ds.get(np.int16(i), offset=np.uint8(1), length=np.int64(1))[0]) == firsts[i] + 1
    assert [int(s[0]) for s in ds.document(np.uint32(2))] == docs[2]
    with pytest.raises(IndexError, match=rf"sequence {len(firsts)} is out of range .*ds"):
        ds[len(firsts)]


@pytest.mark.parametrize("bad", [1.0, 1.7, "3", True, False, np.float64(2), np.bool_(True), None])
def test_indices_that_are_not_integers_are_type_errors(indexed: Any, bad: Any) -> None:
    ds, _ = indexed
    with pytest.raises(TypeError, match="indices must be integers"):
        ds[bad]
    with pytest.raises(TypeError, match="indices must be integers"):
        ds.document(bad)
    with pytest.raises(TypeError, match="indices must be integers"):
        ds.get(bad)


def test_offsets_and_lengths_are_integers(indexed: Any) -> None:
    ds, _ = indexed
    with pytest.raises(TypeError):
        ds.get(0, offset=0.5)
    with pytest.raises(TypeError):
        ds.get(0, length="1")


def test_nanoset_samples_index_as_python_does(indexed: Any) -> None:
    ds, _ = indexed
    train = tokshuf.build_nanosets(
        tokshuf.NanosetConfig(ds.prefix, sequence_length=4, split="1,0,0", cache_dir=False),
        num_samples=(10, None, None),
    )[0]
    assert train is not None
    n = len(train)
    assert np.array_equal(train[-1]["input_ids"], train[n - 1]["input_ids"])
    assert np.array_equal(train[np.int64(-n)]["input_ids"], train[0]["input_ids"])
    with pytest.raises(IndexError, match=rf"sample {n} is out of range for the {n} samples"):
        train[n]
    for bad in (True, 1.0, "1"):
        with pytest.raises(TypeError, match="indices must be integers"):
            train[bad]


# -- one rule for the command line and the API -------------------------------------------------


@pytest.mark.parametrize(
    ("value", "low", "high"), [(-1, 0, 9), (10, 0, 9), (0, 1, _limits.COUNT_MAX), (2**40, 1, 2**30)]
)
def test_the_command_line_and_the_api_give_the_same_complaint(value: int, low: int, high: int) -> None:
    import argparse

    with pytest.raises(argparse.ArgumentTypeError) as flag:
        _args.integer(low, high)(str(value))
    with pytest.raises(ConfigError) as api:
        _limits.integer(value, "n", low, high)
    assert str(api.value) == f"n {flag.value}"


@pytest.mark.parametrize("bad", [1.5, "16", True, b"1", None, [1], np.float32(2)])
def test_a_size_that_is_not_an_integer_names_the_argument(bad: Any) -> None:
    with pytest.raises(ConfigError, match=r"^batch_size must be an integer, got"):
        _limits.integer(bad, "batch_size", 1)


# -- NanosetConfig -----------------------------------------------------------------------------


def test_nanoset_config_takes_numpy_integers_as_ints() -> None:
    cfg = tokshuf.NanosetConfig(
        {"a": np.int64(3), "b": np.float32(1.5)},
        sequence_length=np.int64(32),
        seed=np.uint32(7),
        num_samples=(np.int64(10), None, np.uint8(2)),
        eos_token_id=np.int32(0),
        pad_token_id=np.int64(-1),
        cache_dir=False,
    )
    for name in ("sequence_length", "seed", "eos_token_id", "pad_token_id"):
        assert type(getattr(cfg, name)) is int, name
    assert cfg.sequence_length == 32
    assert cfg.seed == 7
    assert cfg.num_samples == (10, None, 2)
    assert all(type(n) in (int, type(None)) for n in cfg.num_samples)
    json.dumps(dataclass_fields(cfg))  # the cache key's JSON


def dataclass_fields(cfg: Any) -> dict[str, Any]:
    import dataclasses

    return {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"sequence_length": 1.5}, "sequence_length must be an integer, got float 1.5"),
        ({"sequence_length": "32"}, "sequence_length must be an integer, got str"),
        ({"sequence_length": True}, "sequence_length must be an integer, got bool"),
        ({"sequence_length": 2**30 + 1}, r"sequence_length must be between 1 and 1073741824"),
        ({"seed": np.float64(3)}, "seed must be an integer"),
        ({"eos_token_id": -1}, r"eos_token_id must be between 0 and 4294967295, got -1"),
        ({"num_samples": (1.5, None, None)}, "train sample count"),
    ],
)
def test_nanoset_config_refuses_what_is_not_an_integer(kwargs: dict[str, Any], match: str) -> None:
    kwargs.setdefault("sequence_length", 8)
    with pytest.raises(ConfigError, match=match):
        tokshuf.NanosetConfig("data/x", cache_dir=False, **kwargs)


# -- the streaming loader ----------------------------------------------------------------------

CORPUS = simple_corpus([[[3, 11, 1, 7, 2, 5], [9, 4]]])


def test_stream_worker_numbers_are_checked_by_name() -> None:
    with scratch() as tmp:
        s = make_stream(Path(tmp), CORPUS, logical_shards=8)
        for worker, n, match in [
            (-1, 4, r"^worker must be between 0 and 3, got -1"),
            (4, 4, r"^worker must be between 0 and 3, got 4"),
            (0, 0, r"^n_workers must be between 1 and"),
            (0.0, 4, r"^worker must be an integer, got float"),
            (0, "4", r"^n_workers must be an integer, got str"),
            (True, 4, r"^worker must be an integer, got bool"),
        ]:
            with pytest.raises(ConfigError, match=match):
                s.worker(worker, n)
        # numpy integers are integers
        a = s.worker(np.int64(1), np.uint8(4)).next_batch()
        b = s.worker(1, 4).next_batch()
        assert np.array_equal(a["input"], b["input"])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"sequence_length": 1.5}, r"^sequence_length must be an integer, got float 1.5"),
        ({"sequence_length": "16"}, r"^sequence_length must be an integer, got str '16'"),
        ({"sequence_length": 2**40}, r"^sequence_length must be between 1 and 1073741824"),
        ({"batch_size": 2.0}, r"^batch_size must be an integer"),
        ({"chunk_size": 0}, r"^chunk_size must be >= 1, got 0"),
        ({"logical_shards": 2**31}, r"^logical_shards must be between 1 and 1048576"),
        ({"eos_token_id": -1}, r"^eos_token_id must be between 0 and 4294967295, got -1"),
        ({"bos_token_id": 2**32}, r"^bos_token_id must be between 0 and 4294967295"),
        ({"strip_tokens": [3, 1.0]}, r"^strip_tokens must be an integer"),
        ({"seed": -1}, r"^seed must be between 0 and 18446744073709551615, got -1"),
        ({"shuffle_window": 0.5}, r"^shuffle_window must be an integer"),
    ],
)
def test_stream_arguments_follow_the_rules(kwargs: dict[str, Any], match: str) -> None:
    with scratch() as tmp, pytest.raises(ConfigError, match=match):
        make_stream(Path(tmp), CORPUS, **kwargs)


def test_loader_config_and_handlers_follow_the_rules(tmp_path: Path) -> None:
    from tokshuf.stream import LoaderConfig
    from tokshuf.stream.config import build_stream
    from tokshuf.stream.handlers import NpyHandler

    with pytest.raises(ConfigError, match=r"^eos_token_id must be between 0 and 4294967295, got -1"):
        NpyHandler(eos_token_id=-1)
    with pytest.raises(ConfigError, match=r"^eos_token_id must be an integer, got float"):
        NpyHandler(eos_token_id=0.5)
    with scratch() as tmp:
        make_stream(Path(tmp), CORPUS)  # writes sub-dataset directories under tmp
        for bad, match in (
            ({"strip_tokens": [3, 1.5]}, "strip_tokens"),
            ({"seq_length": 8.0}, "sequence_length"),
        ):
            cfg = LoaderConfig(data_path=tmp, file_type="bin", eos_token=1, **bad)  # type: ignore[arg-type]
            with pytest.raises(ConfigError, match=rf"^{match} must be an integer"):
                build_stream(cfg)


def test_stream_takes_numpy_integers() -> None:
    with scratch() as tmp:
        s = make_stream(
            Path(tmp), CORPUS, sequence_length=np.int64(8), batch_size=np.uint8(2), seed=np.uint64(5)
        )
        assert type(s.sequence_length) is int
        assert s.sequence_length == 8
        assert s.worker(0, 1).next_batch()["input"].shape == (2, 8)


def test_a_batch_no_machine_can_hold_is_a_config_error() -> None:
    # sequence_length at the bound, batch_size far past what 8-byte ids of any machine hold.
    with scratch() as tmp:
        s = make_stream(Path(tmp), CORPUS, sequence_length=2**30, batch_size=2**40)
        with pytest.raises(ConfigError, match=r"batch_size 1099511627776 x sequence_length 1073741824"):
            s.worker(0, 1).next_batch()


# -- the instance datasets ---------------------------------------------------------------------


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    paths, _ = write_files(tmp_path, [[[5, 6], [7, 8, 9], [4]]])
    return paths[0]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"eos_token_id": -1}, r"^eos_token_id must be between 0 and 4294967295, got -1"),
        ({"pad_token_id": 2**32}, r"^pad_token_id must be between 0 and 4294967295"),
        ({"bos_token_id": 1.0}, r"^bos_token_id must be an integer, got float"),
        ({"sequence_length": 1.5}, r"^sequence_length must be an integer, got float"),
        ({"sequence_length": "4"}, r"^sequence_length must be an integer, got str"),
        ({"sequence_length": 0}, r"^sequence_length must be between 1 and"),
        ({"sequence_length": 2**40}, r"^sequence_length must be between 1 and 1073741824"),
        ({"vocab_size": 0}, r"^vocab_size must be between 1 and"),
        ({"dtype": "bogus"}, r"^dtype must be an integer dtype .*got 'bogus'"),
        ({"dtype": np.float32}, r"^dtype must be an integer dtype"),
        ({"num_threads": 0}, r"^num_threads must be between 1 and 1024"),
    ],
)
def test_instance_arguments_follow_the_rules(token_file: Path, kwargs: dict[str, Any], match: str) -> None:
    args = {"sequence_length": 4, **common(token_file.parent / "w"), **kwargs}
    with pytest.raises(ConfigError, match=match):
        FSLDataset(token_file, **args)


def test_strategy_arguments_follow_the_rules(token_file: Path) -> None:
    kw = common(token_file.parent / "w")
    with pytest.raises(ConfigError, match=r"^source_group_size must be >= 1, got 0"):
        PackedFSLDataset(token_file, sequence_length=4, source_group_size=0, **kw)
    with pytest.raises(ConfigError, match=r"^docs_per_instance must be an integer, got float"):
        InterleavedFSLDataset(
            token_file, sequence_length=4, seed=0, docs_per_instance=2.0, chunks_per_doc=1, **kw
        )
    with pytest.raises(ConfigError, match=r"^max_sequence_length must be an integer, got str"):
        VSLDataset(token_file, max_sequence_length="8", min_sequence_length=2, **kw)
    with pytest.raises(ConfigError, match=r"^max_target_sequence_length must be an integer"):
        FSLDataset(token_file, sequence_length=4, max_target_sequence_length=8.0, **kw)


def test_instances_take_numpy_integers(token_file: Path) -> None:
    kw = common(token_file.parent / "w")
    a = PaddedFSLDataset(token_file, sequence_length=4, **kw)
    b = PaddedFSLDataset(
        token_file,
        sequence_length=np.int64(4),
        **{**kw, "pad_token_id": np.uint16(kw["pad_token_id"]), "eos_token_id": np.int32(kw["eos_token_id"])},
    )
    assert b.sequence_length == 4
    assert type(b.sequence_length) is int
    assert a.fingerprint == b.fingerprint
    assert np.array_equal(a.get_batch([0, 1])["input_ids"], b.get_batch([0, 1])["input_ids"])


def test_token_file_dtypes_follow_the_rules(token_file: Path) -> None:
    from tokshuf import olmo_tokens
    from tokshuf._inspect.olmo import inspect_token_file

    with pytest.raises(ConfigError, match=r"^token dtype must be an integer dtype .*got 'bogus'"):
        olmo_tokens.read_tokens(token_file, "bogus")
    with pytest.raises(ConfigError, match=r"^dtype must be an integer dtype .*got 'float32'"):
        inspect_token_file(token_file, dtype="float32")


PACK_AT_THE_BOUND = """
import resource, sys
import numpy as np
from tokshuf import ConfigError
from tokshuf.instances import PackedFSLDataset
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
try:
    PackedFSLDataset(sys.argv[1], sequence_length=2**30, pad_token_id=999, eos_token_id=0, dtype=np.uint16,
                     cache_dir=sys.argv[2], document_boundaries="eos")
except ConfigError as e:
    print(e)
    sys.exit(3)
"""


def test_packing_at_the_longest_sequence_length_is_an_error_not_an_abort(token_file: Path) -> None:
    # The packing's free-space tables grow with sequence_length: under a 4 GiB address space their
    # allocation fails, which must be an error (it was SIGABRT).
    run = subprocess.run(
        [sys.executable, "-c", PACK_AT_THE_BOUND, str(token_file), str(token_file.parent / "w")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 3, (run.returncode, run.stderr[-2000:])
    assert "more than this machine can allocate" in run.stdout
    assert "sequence_length 1073741824" in run.stdout


def test_cli_instances_refuses_a_huge_sequence_length(token_file: Path, capsys: Any) -> None:
    argv = ["instances", str(token_file), "--work-dir", str(token_file.parent / "w"), "--strategy", "packed"]
    argv += ["--eos-token-id", "0", "--pad-token-id", "999", "--dtype", "uint16"]
    with pytest.raises(SystemExit) as e:
        main([*argv, "--sequence-length", str(2**40)])
    assert e.value.code == 2
    assert "--sequence-length: must be between 1 and 1073741824, got 1099511627776" in capsys.readouterr().err


@pytest.mark.parametrize(
    "command",
    [
        "olmo-convert --input {ds} --output {out}/t.npy",
        "instances {npy} --strategy fsl --sequence-length 2 --eos-token-id 0 --pad-token-id 0 "
        "--work-dir {out}/w",
        "inspect {npy}",
        "preprocess --input {out}/a.jsonl --output-prefix {out}/p --tokenizer byte",
    ],
)
def test_a_bad_dtype_is_a_usage_error_naming_the_flag(
    tmp_path: Path, token_file: Path, command: str, capsys: Any
) -> None:
    (tmp_path / "a.jsonl").write_text('{"text": "abc"}\n')
    tokshuf.preprocess(tmp_path / "a.jsonl", tmp_path / "d", "byte", summary=False)
    fill = {"ds": str(tmp_path / "d_text_document"), "out": str(tmp_path), "npy": str(token_file)}
    args = [a.format(**fill) for a in command.split()]
    with pytest.raises(SystemExit) as e:
        main([*args, "--dtype", "bogus"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "argument --dtype" in err, err
    assert "'bogus'" in err, err
