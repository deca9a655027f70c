"""``tokshuf ray preprocess|shuffle``: the same commands, as tasks on a Ray cluster (their
handlers run the Ray jobs when ``args.ray`` is set)."""

from __future__ import annotations

import argparse
from typing import Any

from tokshuf.cli import _args, preprocess, shuffle

__all__ = ["add_parser"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "ray",
        help="preprocess or shuffle as tasks on a Ray cluster (pip install 'tokshuf[ray]')",
        description="The same commands, cut into deterministic tasks that a Ray cluster runs: the "
        "outputs are byte-identical to the one-node command. Paths must be shared by the nodes.",
    )
    jobs = p.add_subparsers(title="jobs", metavar="JOB", required=True)
    for job in (preprocess.add_parser(jobs), shuffle.add_parser(jobs)):
        g = job.add_argument_group("Ray")
        g.add_argument(
            "--address", help="the cluster to connect to (ray.init's address; default: auto/local)"
        )
        g.add_argument(
            "--cpus-per-task", type=_args.integer(1, _args.MAX_THREADS), default=1, help="CPUs per task"
        )
        job.set_defaults(ray=True)
    preprocess_job, shuffle_job = jobs.choices["preprocess"], jobs.choices["shuffle"]
    preprocess_job.add_argument(
        "--tasks", type=_args.integer(1), help="tasks (default: the cluster's CPUs / --cpus-per-task)"
    )
    shuffle_job.add_argument("--cells-tasks", type=_args.integer(1), help="stage 1 tasks (default: CPUs)")
    shuffle_job.add_argument("--shards-tasks", type=_args.integer(1), help="stage 2 tasks (default: CPUs)")
    return p
