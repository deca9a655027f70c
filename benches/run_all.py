"""Run every benchmark in this directory (`make bench`): each `bench_*.py` with its defaults,
one after another, printing their JSON lines. Benchmarks measure; tests assert.

    python benches/run_all.py [NAME ...]   # e.g. `instances` runs bench_instances.py only
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def main() -> int:
    here = Path(__file__).parent
    wanted = set(sys.argv[1:])
    failed = 0
    for script in sorted(here.glob("bench_*.py")):
        name = script.stem.removeprefix("bench_")
        if wanted and name not in wanted:
            continue
        print(f"# {script.name}", file=sys.stderr, flush=True)
        failed += subprocess.run([sys.executable, str(script)], check=False).returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
