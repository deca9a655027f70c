"""`tokshuf.ray` on a real local Ray cluster of several nodes (one CPU each): preprocess and
shuffle byte-identical to the one-node run for several task counts, a task whose worker dies
retried with the same output, and inputs read from the S3 test server."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_tasks import CL100K, SHUFFLE, corpus, outputs, shards

import tokshuf

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

import tokshuf.ray as tray  # noqa: E402


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, s3: Any) -> Iterator[Path]:
    # Started after the S3 test server, so that the nodes' workers inherit its endpoint.
    hook = tmp_path_factory.mktemp("kill-hook")
    os.environ["TOKSHUF_TEST_RAY_KILL_ONCE"] = str(hook)  # inherited by the nodes' workers
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    c.add_node(num_cpus=1)
    c.add_node(num_cpus=1)
    ray.init(address=c.address, log_to_driver=False)
    try:
        yield hook
    finally:
        ray.shutdown()
        c.shutdown()
        os.environ.pop("TOKSHUF_TEST_RAY_KILL_ONCE", None)
        gc.collect()


@pytest.mark.parametrize("tasks", [1, 2, 5])
def test_preprocess_on_ray(cluster: Path, tmp_path: Path, tasks: int) -> None:
    data = corpus(tmp_path)
    kw: dict[str, Any] = {"append_eod": True, "on_error": "skip"}
    whole = tokshuf.preprocess(data, tmp_path / "whole", CL100K, ("text", "title"), **kw)
    merged = tray.preprocess(
        data, tmp_path / "r" / "ds", CL100K, ("text", "title"), tasks=tasks, progress=False, **kw
    )
    assert outputs(tmp_path / "r" / "ds") == outputs(tmp_path / "whole")
    assert merged["documents"] == whole["documents"]


@pytest.mark.parametrize(("n", "m"), [(2, 1), (5, 3)])
def test_shuffle_on_ray(cluster: Path, tmp_path: Path, n: int, m: int) -> None:
    data = corpus(tmp_path)
    whole = tokshuf.shuffle(data, tmp_path / "c1", tmp_path / "o1", CL100K, **SHUFFLE)
    done = tray.shuffle(
        data,
        tmp_path / "cr",
        tmp_path / "or",
        CL100K,
        cells_tasks=n,
        shards_tasks=m,
        progress=False,
        **SHUFFLE,
    )
    assert shards(tmp_path / "or") == shards(tmp_path / "o1")
    assert done["contexts"] == whole["contexts"]


def test_a_dead_worker_is_retried(cluster: Path, tmp_path: Path) -> None:
    data = corpus(tmp_path)
    tokshuf.shuffle(data, tmp_path / "c1", tmp_path / "o1", CL100K, **SHUFFLE)
    (cluster / "armed").touch()
    try:
        tray.shuffle(
            data,
            tmp_path / "cr",
            tmp_path / "or",
            CL100K,
            cells_tasks=3,
            shards_tasks=2,
            progress=False,
            **SHUFFLE,
        )
    finally:
        (cluster / "armed").unlink()
    assert (cluster / "fired").exists()  # one attempt did die
    assert shards(tmp_path / "or") == shards(tmp_path / "o1")


def test_inputs_from_s3(cluster: Path, s3: Any, tmp_path: Path) -> None:
    data = corpus(tmp_path)
    bucket = s3.bucket("ray-in")
    for f in sorted(data.iterdir()):
        s3.put(bucket, f"corpus/{f.name}", f.read_bytes())
    kw: dict[str, Any] = {"append_eod": True, "on_error": "skip"}
    tokshuf.preprocess(data, tmp_path / "whole", CL100K, ("text", "title"), **kw)
    tray.preprocess(
        "s3://ray-in/corpus/", tmp_path / "r" / "ds", CL100K, ("text", "title"), tasks=3, progress=False, **kw
    )
    assert outputs(tmp_path / "r" / "ds") == outputs(tmp_path / "whole")


def test_the_ray_command_line(cluster: Path, tmp_path: Path) -> None:
    from tokshuf.cli import main

    data = corpus(tmp_path)
    kw: dict[str, Any] = {"append_eod": True, "on_error": "skip"}
    tokshuf.preprocess(data, tmp_path / "whole", CL100K, ("text", "title"), **kw)
    common = [
        "--input",
        str(data),
        "--tokenizer",
        CL100K,
        "--on-error",
        "skip",
        "--progress",
        "none",
        "--quiet",
    ]
    args = ["ray", "preprocess", *common, "--output-prefix", str(tmp_path / "r" / "ds"), "--append-eod"]
    assert main([*args, "--json-keys", "text", "title", "--tasks", "3"]) == 0
    assert outputs(tmp_path / "r" / "ds") == outputs(tmp_path / "whole")
    tokshuf.shuffle(data, tmp_path / "c1", tmp_path / "o1", CL100K, **SHUFFLE)
    shuffle_args = ["--local-cell-dir", str(tmp_path / "cr"), "--output", str(tmp_path / "or")]
    shuffle_args += ["--seqlen", "129", "--wds-chunk-size", "40", "--num-local-cells", "5"]
    assert main(["ray", "shuffle", *common, *shuffle_args, "--cells-tasks", "4", "--shards-tasks", "2"]) == 0
    assert shards(tmp_path / "or") == shards(tmp_path / "o1")
