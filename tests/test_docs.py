"""The documentation is tested as code: every code block of the README and of docs/ runs as
written (or says why not: see ``tests/docs_blocks.py``), the Python ones type-check under
``mypy --strict`` against the package, every relative link and anchor resolves, the README stays
short, and the README's benchmark table is the one ``make bench`` last wrote."""

from __future__ import annotations

import importlib.util
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from docs_blocks import PARSE, PREPARED, REPO, RUN, SHOW, blocks, needs, pages

import tokshuf

README = REPO / "README.md"
FIXTURES = REPO / "tests" / "fixtures"
RUNNER = Path(__file__).with_name("docs_blocks.py")
TEXT = "the of and to in is that for it as with was on be by model data token 2048 3.14 naïve 東京 ( ) : ."
WORDS = TEXT.split()


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ALL = {path: blocks(path) for path in pages()}
RUNNABLE = [path for path, bs in ALL.items() if any(b.runs for b in bs)]


def _rel(path: Path) -> str:
    return str(path.relative_to(REPO))


# --- what the pages start from --------------------------------------------------------------


def _unpack(name: str, dest: Path) -> None:
    import zstandard

    dest.parent.mkdir(parents=True, exist_ok=True)
    data = (FIXTURES / "tokenizers" / f"{name}.zst").read_bytes()
    dest.write_bytes(zstandard.ZstdDecompressor().decompress(data, max_output_size=64 << 20))


@pytest.fixture(scope="session")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What a newcomer has: two directories of .jsonl.zst and two tokenizers."""
    from conftest import write_jsonl

    root = tmp_path_factory.mktemp("docs-inputs")
    rng = random.Random(0)
    for name in ("web", "code"):
        for shard in range(2):
            docs = [
                {"id": f"{name}-{shard}-{i}", "text": " ".join(rng.choices(WORDS, k=rng.randint(1, 300)))}
                for i in range(300)
            ]
            write_jsonl(root / "corpus" / name / f"shard_{shard:05d}.jsonl.zst", docs, "zst")
    _unpack("llama3_tokenizer.model", root / "Meta-Llama-3-8B" / "original" / "tokenizer.model")
    _unpack("gpt-neox-20b_tokenizer.json", root / "gpt-neox-20b" / "tokenizer.json")
    return root


@pytest.fixture(scope="session")
def prepared(inputs: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each of :data:`PREPARED`, made on first use, as a directory to copy into a page's."""
    made: dict[str, Path] = {}

    class Lazy(dict[str, Path]):
        def __missing__(self, key: str) -> Path:
            root = tmp_path_factory.mktemp(f"docs-{key}")
            llama3 = inputs / "Meta-Llama-3-8B" / "original" / "tokenizer.model"
            if key == "tok":
                for name in ("web", "code"):
                    tokshuf.preprocess(
                        inputs / "corpus" / name, root / "tok" / name / "llama3", llama3, append_eod=True
                    )
            elif key == "shards":
                tokshuf.shuffle(
                    inputs / "corpus",
                    root / "cells",
                    root / "shards",
                    inputs / "gpt-neox-20b",
                    context_length=2049,
                    special_tokens="dclm",
                )
                shutil.rmtree(root / "cells")
            elif key == "ckpt":
                pytest.importorskip("torch", reason="a streaming-loader checkpoint needs torch")
                from tokshuf.stream import LoaderConfig, build_dataloader

                tok = self["tok"] / "tok"
                cfg = LoaderConfig(
                    data_path=str(tok), datasets="web,code", weights="7,3", file_type="bin",
                    seq_length=256, batch_size=8, eos_token=128001, num_workers=0, seed=2023,
                )  # fmt: skip
                loader = build_dataloader(cfg)
                for step, _ in enumerate(loader):
                    if step == 3:
                        loader.save(root / "ckpt" / "step_3" / "loader")
                        break
            else:
                raise KeyError(key)
            self[key] = root
            return root

    return Lazy(made)


def _page_dir(path: Path, inputs: Path, prepared: dict[str, Path], tmp_path: Path) -> Path:
    work = tmp_path / "page"
    shutil.copytree(inputs, work)
    for key in needs(path):
        assert key in PREPARED, f"{_rel(path)} needs {key!r}; known: {', '.join(PREPARED)}"
        shutil.copytree(prepared[key], work, dirs_exist_ok=True)
    # `tokshuf` on PATH is this interpreter and this package, whatever is installed elsewhere.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "tokshuf"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m tokshuf "$@"\n')
    shim.chmod(0o755)
    return work


# --- every block runs, or says why not -------------------------------------------------------


def test_every_block_is_run_or_says_why_not() -> None:
    problems = []
    for bs in ALL.values():
        for b in bs:
            if b.marker in ("skip", "sketch") and not b.argument:
                problems.append(f"{b.where}: a {b.marker} marker without a reason")
            elif b.marker == "file" and not b.argument:
                problems.append(f"{b.where}: a file marker without a file name")
            elif b.marker not in (None, "skip", "sketch", "file"):
                problems.append(f"{b.where}: unknown marker {b.marker!r}")
            elif b.lang and b.lang not in RUN | PARSE | SHOW:
                problems.append(f"{b.where}: language {b.lang!r} is neither run, parsed nor shown")
    assert not problems, "\n".join(problems)


def test_config_blocks_parse() -> None:
    for bs in ALL.values():
        for b in bs:
            if b.lang == "yaml":
                yaml.safe_load(b.code)
            elif b.lang == "json":
                json.loads(b.code)
            elif b.lang == "toml":
                tomllib.loads(b.code)


@pytest.mark.parametrize("path", RUNNABLE, ids=_rel)
def test_page_code_runs(path: Path, inputs: Path, prepared: dict[str, Path], tmp_path: Path) -> None:
    """The page's blocks, in order, in a directory of their own, as a reader would run them."""
    code = "".join(b.code for b in ALL[path] if b.runs)
    if "torch" in code or "DataLoader" in code or "build_dataloader" in code:
        pytest.importorskip("torch", reason=f"{_rel(path)} feeds a torch DataLoader")
    if "webdataset" in code:
        pytest.importorskip("webdataset")
    work = _page_dir(path, inputs, prepared, tmp_path)
    specs: list[dict[str, str]] = []
    for b in ALL[path]:
        if b.marker == "file":
            specs.append({"where": b.where, "lang": "file", "name": b.argument, "code": b.code})
        elif b.runs:
            specs.append({"where": b.where, "lang": b.lang, "code": b.code})
    package = str(Path(tokshuf.__file__).resolve().parents[1])
    env = {
        **os.environ,
        "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": os.pathsep.join([package, *filter(None, [os.environ.get("PYTHONPATH")])]),
        "TOKSHUF_CACHE_DIR": str(tmp_path / "cache-root"),
        "MPLBACKEND": "Agg",
        "COLUMNS": "100",
    }
    done = subprocess.run(
        [sys.executable, str(RUNNER)],
        input=json.dumps(specs),
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-6000:]


def test_python_blocks_pass_mypy_strict(tmp_path: Path) -> None:
    """Each page's Python blocks, in order as one module (a page's blocks continue each other),
    type-check under --strict: what a user copies is what the API declares."""
    pytest.importorskip("mypy")
    files = []
    for path, bs in ALL.items():
        code = "".join(b.code for b in bs if b.typechecked)
        if code:
            name = re.sub(r"\W", "_", _rel(path)) + ".py"
            (tmp_path / name).write_text(code, encoding="utf-8")
            files.append(str(tmp_path / name))
    assert len(files) >= 10
    config = tmp_path / "mypy.ini"
    # torch as Any: following its annotations would take most of the run, and they are not ours.
    config.write_text(
        "[mypy]\nstrict = True\n[mypy-torch.*]\nfollow_imports = skip\nfollow_imports_for_stubs = True\n"
        "[mypy-webdataset.*]\nignore_missing_imports = True\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(config), "--cache-dir", str(tmp_path), *files],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


# --- links --------------------------------------------------------------------------------------

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def _outside_blocks(text: str) -> str:
    lines, inside = [], False
    for line in text.splitlines():
        if re.match(r"^\s*```", line):
            inside = not inside
        elif not inside:
            lines.append(line)
    return "\n".join(lines)


def _prose(text: str) -> str:
    """The text outside code blocks and code spans."""
    return re.sub(r"`[^`\n]*`", "", _outside_blocks(text))


def github_slug(heading: str) -> str:
    """The anchor GitHub (and the site: pymdownx.slugs, case lower) gives a heading."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = _outside_blocks(path.read_text(encoding="utf-8"))
    return {github_slug(m.group(2)) for line in text.splitlines() if (m := HEADING.match(line))}


def _generated_pages() -> set[Path]:
    """The command pages the site's build generates (docs/hooks/cli_pages.py)."""
    hook = _load(REPO / "docs" / "hooks" / "cli_pages.py")
    return {REPO / "docs" / "cli" / f"{command.replace(' ', '-')}.md" for command in hook.GUIDES}


def test_relative_links_and_anchors_resolve() -> None:
    generated = _generated_pages()
    problems = []
    for path in ALL:
        for m in LINK.finditer(_prose(path.read_text(encoding="utf-8"))):
            target = m.group(1)
            if re.match(r"[a-z]+:", target):
                continue  # https://, mailto: ... (no network here)
            file, _, anchor = target.partition("#")
            dest = (path.parent / file).resolve() if file else path
            if not (dest.exists() or dest in generated):
                problems.append(f"{_rel(path)}: {target}: no such file")
            elif anchor and dest.suffix == ".md" and dest.exists() and anchor not in anchors(dest):
                problems.append(f"{_rel(path)}: {target}: no heading #{anchor} in {_rel(dest)}")
    assert not problems, "\n".join(problems)


def test_docs_pages_are_in_the_site_navigation() -> None:
    """A page missing from mkdocs.yml's nav is a page nobody finds (and the site build warns)."""
    text = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    listed = set(re.findall(r":\s*([\w./-]+\.md)\s*$", text, re.M))
    on_disk = {str(p.relative_to(REPO / "docs")) for p in ALL if p.is_relative_to(REPO / "docs")}
    assert on_disk - listed == set()
    assert {p for p in listed - on_disk if not p.startswith("cli/")} == set()


# --- the README ---------------------------------------------------------------------------------


def test_the_readme_stays_a_five_minute_read() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 160, f"README.md has {len(lines)} lines: move the details into a page of docs/"


def test_the_readme_answers_a_newcomers_questions_on_its_first_screen() -> None:
    """Llama 3 on a directory of .jsonl.zst, a blend, a DataLoader and its resume, S3, many
    nodes, and what is in a dataset: each is named in the README's first 40 lines."""
    first = "\n".join(README.read_text(encoding="utf-8").splitlines()[:40]).lower()
    for needle in (".jsonl.zst", "llama 3", "blend", "dataloader", "resume", "s3://", "32 nodes", "inspect"):
        assert needle in first, needle


def test_the_readme_benchmark_table_is_the_last_runs() -> None:
    """`make docs` (and `make bench`) copy the headline table of docs/benchmarks.md into the README."""
    tool = _load(REPO / "docs" / "hooks" / "bench_table.py")
    text = README.read_text(encoding="utf-8")
    assert tool.updated(text, (REPO / "docs" / "benchmarks.md").read_text(encoding="utf-8")) == text, (
        "the README's benchmark table differs from docs/benchmarks.md: run `make docs`"
    )


# --- names ----------------------------------------------------------------------------------------


def _deprecated_names() -> set[str]:
    """Every old name the package still accepts: parameters and attributes, from the helpers."""
    import importlib
    import inspect
    import pkgutil

    from tokshuf._deprecation import deprecated_parameters, renamed_attribute

    found: set[str] = set()
    for info in pkgutil.walk_packages(tokshuf.__path__, "tokshuf."):
        if info.name.endswith((".__main__", ".torch", ".ray")):
            continue  # the command line, and modules of optional dependencies
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if inspect.isfunction(obj) or inspect.isclass(obj):
                found |= set(deprecated_parameters(obj))
            if inspect.isclass(obj):
                found |= {k for k, v in vars(obj).items() if isinstance(v, renamed_attribute)}
                for member in vars(obj).values():
                    if inspect.isfunction(member):
                        found |= set(deprecated_parameters(member))
    return found


def test_every_deprecated_name_is_listed_in_the_docs() -> None:
    names = _deprecated_names()
    assert {"eod_id", "seqlen", "path_to_cache"} <= names  # the walk finds them
    page = (REPO / "docs" / "names.md").read_text(encoding="utf-8")
    missing = sorted(n for n in names if f"`{n}`" not in page)
    assert not missing, f"docs/names.md does not list the deprecated names {missing}"
