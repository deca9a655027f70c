"""Long pathological inputs: tokshuf's time on one huge piece, beside the defining library's.

    python benches/bench_long_inputs.py                    # gpt2, cl100k, o200k, qwen2; 1 MB and 10 MB
    python benches/bench_long_inputs.py --families cl100k,gpt2 --repeat 3
    python benches/bench_long_inputs.py --sizes 100KB,1MB  # smaller and quicker
    python benches/bench_long_inputs.py --quick            # a smoke run: GPT-2, 100 KB and 1 MB

Inputs (one text each, generated from ``--seed``; MB = 10^6 bytes of UTF-8, cut at a character):
a word without spaces (random a-z), one repeated character, digits, spaces, newlines, random
characters U+0020..U+3000, and a punctuation run (random ``!@#$%^&*()-=+[]{};:,.<>/?``). Most of
them are a single piece of the split pattern, or a few, so they measure the merge of long pieces,
which text from the web never exercises.

Measured, each in its own process (pinned to one core, ``RAYON_NUM_THREADS=1``) with a wall-clock
limit on that whole process (``--timeout``, 120 s; "> 120 s" when it ran out), as CPU time
(``time.process_time``, every thread of the process) of the call alone, with a freshly built
tokenizer for each measurement (building it and one call on a short sentence, which does the work
some libraries defer from loading to their first call, are not timed: ``bench_startup.py``
measures those); the median of ``--repeat`` measurements:

* tokshuf: ``Tokenizer(spec).encode(text)`` at each size, and the ratio of the largest size's
  time to the smallest's;
* the defining library (tiktoken for rank files, ``tokenizers`` for ``tokenizer.json``, loaded
  and called as ``bench_peers.py`` does: ``encode_ordinary_batch([text])``,
  ``encode_batch_fast([text])``) at the smallest size, and tokshuf's time over the library's.
  Where the library finishes, its ids must equal tokshuf's (compared by digest); any difference,
  or a tokshuf run that fails, makes the exit status 1.

Targets (issue 42): the 10 MB / 1 MB ratio <= 12, i.e. O(n log n) (in general 1.2x the ratio of
the sizes); tokshuf <= 1x the library's time on every input.

Tokenizer files: ``--tokenizers DIR`` (or ``$TOKSHUF_BENCH_TOKENIZERS``) laid out as
``../shared/tokenizers``; by default unpacked from ``tests/fixtures`` as ``bench_peers.py`` does.

Output: a Markdown table, printed and written to ``--docs`` (``docs/benchmarks-long-inputs.md``;
a ``--quick`` run writes it beside ``--out`` instead) with the command, the date, the machine,
the versions and the load average; every figure as JSON lines in ``--out``
(``bench-out/long-inputs/results.json``, ``results-quick.json`` for ``--quick``): a ``meta`` line,
one line per measurement and one per (tokenizer, input) summary.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import random
import re
import shlex
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_peers import (  # beside this file (benches/ is not a package)
    FAMILIES,
    REFERENCE,
    REPO,
    default_tokenizers,
    digest,
    encoder,
    form_of,
    machine,
    page_header,
    pinned,
    versions,
)

DEFAULT_FAMILIES = ("gpt2", "cl100k", "o200k", "qwen2")
DEFAULT_SIZES = "1MB,10MB"
QUICK_FAMILIES = ("gpt2",)
QUICK_SIZES = "100KB,1MB"
PUNCTUATION = "!@#$%^&*()-=+[]{};:,.<>/?"
# kind -> (label, alphabet drawn from at random; one character: repeated)
KINDS: dict[str, tuple[str, str]] = {
    "word": ("word without spaces (a-z)", "abcdefghijklmnopqrstuvwxyz"),
    "repeat": ("one repeated character (`a`)", "a"),
    "digits": ("digits (0-9)", "0123456789"),
    "spaces": ("spaces", " "),
    "newlines": ("newlines", "\n"),
    "random": ("random characters U+0020..U+3000", "".join(map(chr, range(0x20, 0x3001)))),
    "punctuation": ("punctuation run", PUNCTUATION),
}
UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9}
WARM_UP = "Warm up: 12 words, not 1 of them long."
RATIO_MARGIN = 1.2  # O(n log n) with room: 10x the bytes -> <= 12x the time


def parse_size(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMG]?B)\s*", text.upper())
    if not m:
        raise ValueError(f"not a size: {text!r} (e.g. 100KB, 1MB, 10MB)")
    return int(float(m.group(1)) * UNITS[m.group(2)])


def make_text(kind: str, size: int, seed: int) -> str:
    """``size`` bytes of UTF-8 (less the tail of a character cut) of input ``kind``."""
    alphabet = KINDS[kind][1]
    if len(alphabet) == 1:
        return alphabet * size
    rng = random.Random(f"{seed}-{kind}")
    chars = rng.choices(alphabet, k=size)  # at least one byte each: enough, cut below
    return "".join(chars).encode("utf-8")[:size].decode("utf-8", "ignore")


# --- one measurement (a worker process) ---------------------------------------------------------


def measure(task: dict[str, Any]) -> dict[str, Any]:
    text = make_text(task["kind"], task["bytes"], task["seed"])
    if task["lib"] == "tokshuf":
        import tokshuf

        def make() -> Any:
            tok = tokshuf.Tokenizer(task["spec"])
            return tok.encode

    else:
        task_for_peers = {**task, "threads": 1}
        make_batch, split = encoder(task_for_peers)

        def make() -> Any:
            call = make_batch()
            return lambda t: split(call([t]))[0]

    t0 = time.perf_counter()
    encode = make()
    encode(WARM_UP)  # work deferred from loading to the first call is start-up, not this input's
    load = time.perf_counter() - t0
    gc.collect()
    c0, t0 = time.process_time(), time.perf_counter()
    ids = encode(text)
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    return {
        "cpu_seconds": cpu,
        "wall_seconds": wall,
        "load_seconds": load,
        "chars": len(text),
        "tokens": len(ids),
        "digest": digest(ids),
    }


def worker(task: dict[str, Any]) -> None:
    try:
        result = measure(task)
        result["status"] = "ok"
    except BaseException as e:  # tiktoken panics (a PanicException) on some long inputs
        result = {"status": "error", "reason": f"{type(e).__name__}: {e}"[:300]}
        traceback.print_exc()
    Path(task["result"]).write_text(json.dumps(result))


# --- the driver ------------------------------------------------------------------------------


def run_once(task: dict[str, Any], tmp: Path, timeout: float) -> dict[str, Any]:
    task = {**task, "result": str(tmp / f"result-{os.getpid()}.json")}
    prefix, hook, _ = pinned(1)
    env = dict(os.environ, RAYON_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", TOKSHUF_NUM_THREADS="1")
    cmd = [*prefix, sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(task)]
    result_path = Path(task["result"])
    result_path.unlink(missing_ok=True)
    try:
        proc = subprocess.run(
            cmd, env=env, preexec_fn=hook, check=False, stderr=subprocess.PIPE, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "reason": f"> {timeout:g} s"}
    if result_path.exists():
        result: dict[str, Any] = json.loads(result_path.read_text())
        result_path.unlink()
    else:
        tail = proc.stderr.strip().splitlines()[-1:] if proc.stderr else []
        result = {"status": "error", "reason": f"exit {proc.returncode}: {' '.join(tail)}"[:300]}
    if result["status"] != "ok" and proc.stderr:
        sys.stderr.write(proc.stderr[-2000:])
    return result


def run_measurement(task: dict[str, Any], repeat: int, tmp: Path, timeout: float) -> dict[str, Any]:
    """The median of ``repeat`` runs of ``task`` (stops at the first that does not finish)."""
    load = os.getloadavg()[0]
    runs = []
    for _ in range(repeat):
        got = run_once(task, tmp, timeout)
        if got["status"] != "ok":
            record = {**got}
            break
        runs.append(got)
    else:
        digests = {r["digest"] for r in runs}
        record = {
            "status": "ok" if len(digests) == 1 else "error",
            "cpu_seconds": [r["cpu_seconds"] for r in runs],
            "wall_seconds": [r["wall_seconds"] for r in runs],
            "load_seconds": [r["load_seconds"] for r in runs],
            "seconds": statistics.median(r["cpu_seconds"] for r in runs),
            "chars": runs[0]["chars"],
            "tokens": runs[0]["tokens"],
            "digest": runs[0]["digest"],
        }
        if len(digests) > 1:
            record["reason"] = "the ids differ from one run to the next"
    keys = ("lib", "family", "kind", "size", "bytes", "form", "path")
    return {
        "record": "measurement",
        **{k: task[k] for k in keys},
        **record,
        "load_average": load,
    }


def seconds_cell(r: dict[str, Any] | None) -> str:
    if r is None:
        return ""
    if r["status"] == "ok":
        return f"{r['seconds']:.3f}"
    if r["status"] == "timeout":
        return str(r["reason"])
    return "error"


def summarize(
    family: str, kind: str, ours: list[dict[str, Any]], lib: dict[str, Any] | None, size_ratio: float | None
) -> dict[str, Any]:
    """Ratios, targets and the ids check of one (tokenizer, input)."""
    row: dict[str, Any] = {"record": "summary", "family": family, "kind": kind}
    small, large = ours[0], ours[-1]
    if size_ratio is not None:
        row["size_ratio"] = size_ratio
        row["ratio_target"] = RATIO_MARGIN * size_ratio
        if small["status"] == large["status"] == "ok" and small["seconds"] > 0:
            row["ratio"] = large["seconds"] / small["seconds"]
            row["ratio_met"] = row["ratio"] <= row["ratio_target"]
        elif large["status"] == "timeout":
            row["ratio_met"] = False
    if lib is not None:
        row["library"] = lib["lib"]
        if lib["status"] == "ok" and small["status"] == "ok":
            row["vs_library"] = small["seconds"] / lib["seconds"] if lib["seconds"] > 0 else None
            row["vs_library_met"] = lib["seconds"] > 0 and small["seconds"] <= lib["seconds"]
            row["ids_match"] = small["digest"] == lib["digest"]
        elif lib["status"] == "timeout" and small["status"] == "ok":
            row["vs_library_met"] = True  # the library did not finish in the time tokshuf took at most
        elif small["status"] == "timeout":
            row["vs_library_met"] = False
    return row


def report(meta: dict[str, Any], records: list[dict[str, Any]]) -> str:
    sizes = meta["sizes"]
    small = sizes[0][0]
    size_ratio = sizes[-1][1] / sizes[0][1] if len(sizes) > 1 else None
    by = {(r["family"], r["kind"], r["lib"], r["size"]): r for r in records if r["record"] == "measurement"}
    summary = {(r["family"], r["kind"]): r for r in records if r["record"] == "summary"}
    lines = [
        *page_header("long pathological inputs", "bench_long_inputs.py", "this page", meta, records, "high"),
        "",
        "Method: one text per input, generated with seed "
        f"{meta['seed']} (MB = 10^6 bytes of UTF-8); each measurement in its own process, pinned to one "
        "core, with a freshly built tokenizer and one short call first (not timed); CPU seconds of the "
        "call alone (`process_time`), "
        f"the median of {meta['repeat']} measurement{'s' if meta['repeat'] > 1 else ''}; "
        f"at most {meta['timeout']:g} s of wall time each. tokshuf: `Tokenizer(spec).encode(text)`; the "
        "defining library (tiktoken for rank files, `tokenizers` for `tokenizer.json`) as "
        "`benches/bench_peers.py` calls it, on the "
        f"{small} input. Ids: tokshuf's against the library's on that input.",
        "",
        "Targets (issue 42): "
        + (
            f"{sizes[-1][0]} / {small} time <= {RATIO_MARGIN * size_ratio:g} (O(n log n)); "
            if size_ratio
            else ""
        )
        + "tokshuf <= 1x the library's time. ✗ marks a figure that misses its target.",
        "",
        "Inputs: " + "; ".join(f"{k}: {label}" for k, (label, _) in KINDS.items()) + ".",
        "",
    ]
    head = ["tokenizer", "input", *(f"tokshuf {label} (s)" for label, _ in sizes)]
    if size_ratio:
        head.append(f"{sizes[-1][0]} / {small}")
    head += ["library", f"library {small} (s)", "tokshuf / library", "ids"]
    lines += ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    missed = []
    for family in meta["families"]:
        for kind in meta["kinds"]:
            s = summary.get((family, kind), {})
            row = [FAMILIES[family].label, kind]
            row += [seconds_cell(by.get((family, kind, "tokshuf", label))) for label, _ in sizes]
            if size_ratio:
                cell = f"{s['ratio']:.1f}" if "ratio" in s else ""
                if s.get("ratio_met") is False:
                    cell = f"{cell} ✗".strip()
                    missed.append(f"{FAMILIES[family].label} {kind}: {sizes[-1][0]} / {small}")
                row.append(cell)
            lib_name = s.get("library", "")
            lib = by.get((family, kind, lib_name, small))
            row += [lib_name, seconds_cell(lib)]
            cell = f"{s['vs_library']:.2f}x" if s.get("vs_library") is not None else ""
            if s.get("vs_library_met") is False:
                cell = f"{cell} ✗".strip()
                missed.append(f"{FAMILIES[family].label} {kind}: x library")
            row.append(cell)
            ids = s.get("ids_match")
            unchecked = "not compared" if lib is not None else ""
            row.append("same" if ids else "**differ**" if ids is False else unchecked)
            lines.append("| " + " | ".join(row) + " |")
    met = sum(1 for s in summary.values() for k in ("ratio_met", "vs_library_met") if s.get(k) is True)
    total = sum(1 for s in summary.values() for k in ("ratio_met", "vs_library_met") if k in s)
    lines += ["", f"Targets met: {met} of {total}."]
    if missed:
        lines += ["", "Missed: " + "; ".join(missed) + "."]
    errors = [r for r in records if r["record"] == "measurement" and r["status"] == "error"]
    if errors:
        lines += ["", "## Errors", ""]
        lines += [
            f"- {r['lib']}, {FAMILIES[r['family']].label}, {r['kind']}, {r['size']}: {r['reason']}"
            for r in errors
        ]
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--families", default=None, help=f"of {', '.join(FAMILIES)} (default {','.join(DEFAULT_FAMILIES)})"
    )
    p.add_argument("--kinds", default=",".join(KINDS), help=f"inputs, of {', '.join(KINDS)}")
    p.add_argument("--sizes", default=None, help=f"input sizes, smallest first (default {DEFAULT_SIZES})")
    p.add_argument("--repeat", type=int, default=1, help="measurements per figure (median)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per measurement")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--tokenizers",
        type=Path,
        default=os.environ.get("TOKSHUF_BENCH_TOKENIZERS"),
        help="tokenizer files laid out as ../shared/tokenizers ($TOKSHUF_BENCH_TOKENIZERS; default: "
        "unpacked from tests/fixtures)",
    )
    p.add_argument("--out", type=Path, default=None, help="JSON lines of every figure")
    p.add_argument("--docs", type=Path, default=None, help="the Markdown page")
    p.add_argument("--quick", action="store_true", help=f"a smoke run: {QUICK_FAMILIES[0]}, {QUICK_SIZES}")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(json.loads(args.worker))
        return 0

    families = (args.families or ",".join(QUICK_FAMILIES if args.quick else DEFAULT_FAMILIES)).split(",")
    for name in families:
        if name not in FAMILIES:
            p.error(f"--families: unknown {name!r}; expected some of {', '.join(FAMILIES)}")
    kinds = args.kinds.split(",")
    for kind in kinds:
        if kind not in KINDS:
            p.error(f"--kinds: unknown {kind!r}; expected some of {', '.join(KINDS)}")
    try:
        sizes = [
            (s.strip(), parse_size(s))
            for s in (args.sizes or (QUICK_SIZES if args.quick else DEFAULT_SIZES)).split(",")
        ]
    except ValueError as e:
        p.error(f"--sizes: {e}")
    if [b for _, b in sizes] != sorted({b for _, b in sizes}):
        p.error("--sizes: give distinct sizes, smallest first")
    base = REPO / "bench-out" / "long-inputs"
    out = args.out or base / ("results-quick.json" if args.quick else "results.json")
    docs = args.docs or (base / "quick" if args.quick else REPO / "docs") / "benchmarks-long-inputs.md"
    tmp = out.parent / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    tokenizers = (args.tokenizers or default_tokenizers(out.parent, families)).resolve()

    libs = ["tokshuf", *sorted({REFERENCE[FAMILIES[n].form] for n in families})]
    meta: dict[str, Any] = {
        "record": "meta",
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python benches/bench_long_inputs.py " + shlex.join(sys.argv[1:]),
        "machine": machine(),
        "versions": versions([*libs, "numpy"]),
        "load_average": {"start": os.getloadavg()},
        "families": families,
        "kinds": kinds,
        "sizes": sizes,
        "repeat": args.repeat,
        "timeout": args.timeout,
        "seed": args.seed,
        "tokenizers": str(tokenizers),
    }
    size_ratio = sizes[-1][1] / sizes[0][1] if len(sizes) > 1 else None
    records: list[dict[str, Any]] = []
    failed = False
    for name in families:
        fam = FAMILIES[name]
        mine = form_of("tokshuf", fam, tokenizers)
        ref_lib = REFERENCE[fam.form]
        ref = form_of(ref_lib, fam, tokenizers)
        if isinstance(mine, str):
            print(f"[{name}] tokshuf cannot run it: {mine}", file=sys.stderr)
            failed = True
            continue
        for kind in kinds:
            common = {"family": name, "kind": kind, "seed": args.seed}
            ours = []
            for label, size in sizes:
                task = {**common, "lib": "tokshuf", "size": label, "bytes": size,
                        "spec": fam.tokshuf or mine[1], "form": mine[0], "path": mine[1]}  # fmt: skip
                r = run_measurement(task, args.repeat, tmp, args.timeout)
                records.append(r)
                ours.append(r)
                failed |= r["status"] == "error"
                print(f"[{name} {kind} {label}] tokshuf: {seconds_cell(r)} s", file=sys.stderr, flush=True)
            lib = None
            if isinstance(ref, str):
                print(f"[{name}] {ref_lib} cannot run it: {ref}", file=sys.stderr)
            else:
                label, size = sizes[0]
                task = {
                    **common,
                    "lib": ref_lib,
                    "size": label,
                    "bytes": size,
                    "form": ref[0],
                    "path": ref[1],
                }
                lib = run_measurement(task, args.repeat, tmp, args.timeout)
                records.append(lib)
                print(
                    f"[{name} {kind} {label}] {ref_lib}: {seconds_cell(lib)} s", file=sys.stderr, flush=True
                )
            row = summarize(name, kind, ours, lib, size_ratio)
            records.append(row)
            if row.get("ids_match") is False:
                print(f"[{name} {kind}] ids differ from {ref_lib}'s", file=sys.stderr)
                failed = True
    meta["load_average"]["end"] = os.getloadavg()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(r) + "\n" for r in [meta, *records]))
    text = report(meta, records)
    docs.parent.mkdir(parents=True, exist_ok=True)
    docs.write_text(text)
    print(text)
    print(f"wrote {docs} and {out}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
