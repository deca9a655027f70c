"""Run every benchmark in this directory (``make bench``): each ``bench_*.py`` in turn, with the
arguments given here passed on (e.g. ``--quick``). Exits non-zero if any benchmark failed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def main() -> int:
    failed = []
    for bench in sorted(Path(__file__).resolve().parent.glob("bench_*.py")):
        print(f"== {bench.name}", flush=True)
        if subprocess.run([sys.executable, str(bench), *sys.argv[1:]], check=False).returncode != 0:
            failed.append(bench.name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
