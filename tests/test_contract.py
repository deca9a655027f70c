"""One contract per command: the command line, the Python function and the native binding give an
option one name, and its default is declared once (the Rust config for preprocess and shuffle,
``tokshuf.instances._options`` and the classes for the instance datasets). Walks the argparse
parsers, the Python signatures and the native text signatures."""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

import tokshuf
from tokshuf import _core, olmo_tokens
from tokshuf.cli import build_parser
from tokshuf.instances import (
    FSLDataset,
    InterleavedFSLDataset,
    PackedFSLDataset,
    PaddedFSLDataset,
    VSLDataset,
)
from tokshuf.instances._named import STRATEGIES
from tokshuf.instances._options import DEFAULTS, InstanceOptions

#: The words the API replaced, which no layer may use for a parameter any more.
OLD_WORDS = {"threads", "workers", "eot_id", "eod_id", "pad_id", "bos_id", "seqlen", "work_dir"}


@dataclass
class Command:
    name: str
    function: Callable[..., Any]
    native: Callable[..., Any] | None
    #: CLI destination -> Python parameter, where the flag is spelled otherwise.
    cli_names: dict[str, str] = field(default_factory=dict)
    #: Flags without a Python parameter.
    cli_only: set[str] = field(default_factory=set)
    #: Flags whose default differs from the Python one on purpose, and why.
    cli_defaults_differ: dict[str, str] = field(default_factory=dict)
    #: Python parameters the native function does not take, and native ones Python names otherwise.
    python_only: set[str] = field(default_factory=set)
    native_only: set[str] = field(default_factory=set)


CLI_AUTO_PROGRESS = "the command line's auto prints JSON lines off a terminal, for job logs"

COMMANDS = [
    Command(
        "preprocess",
        tokshuf.preprocess,
        _core.preprocess,
        cli_names={"input": "inputs"},
        cli_defaults_differ={"progress": CLI_AUTO_PROGRESS},
        # The tokenizer is built in Python with them; the native function takes the built one.
        python_only={"eos_token_id", "special_tokens"},
    ),
    Command(
        "shuffle",
        tokshuf.shuffle,
        _core.shuffle,
        cli_names={"input": "inputs", "buffer_mb": "buffer_bytes"},
        cli_only={"use_tiktoken", "s3_retries", "input_json", "output_json"},
        cli_defaults_differ={
            "progress": CLI_AUTO_PROGRESS,
            "special_tokens": "unset, the command line uses the native ids and says which they were",
        },
        python_only={"tokenizer_special_tokens", "summary"},
        native_only={"summary_path"},  # where the summary goes, if written
    ),
    Command(
        "merge",
        tokshuf.merge,
        _core.merge,
        cli_names={"input": "inputs"},
        cli_only={"parts"},  # tokshuf.merge_parts
        python_only={"summary"},
        native_only={"prefixes", "summary_path"},  # the inputs expanded to prefixes; where the summary goes
    ),
    Command(
        "olmo-convert",
        olmo_tokens.from_indexed,
        _core.convert_indexed,
        cli_names={"input": "prefix"},
        python_only={"metadata", "summary"},
        native_only={"metadata_path", "summary_path"},  # where the metadata and summary go, if written
    ),
]


def subcommand(name: str) -> argparse.ArgumentParser:
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            parser: argparse.ArgumentParser = action.choices[name]
            return parser
    raise AssertionError("no subcommands")


def flags(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """The options of a subcommand by destination, without help, the output flags every command
    shares (--json, --quiet) and Megatron's flags, which name Megatron's options."""
    megatron = {
        id(a)
        for g in parser._action_groups
        if g.title and g.title.startswith("Megatron")
        for a in g._group_actions
    }
    return {
        a.dest: a
        for a in parser._actions
        if a.dest not in ("help", "json", "quiet") and id(a) not in megatron
    }


def cli_default(dest: str, action: argparse.Action) -> Any:
    """A flag's default as the Python value it stands for."""
    if dest == "summary":  # unset: the summary beside the outputs
        return True if action.default is None else action.default
    if dest == "buffer_mb":
        return action.default << 20
    if dest == "json_keys":
        return tuple(action.default)
    return action.default


def params(func: Callable[..., Any]) -> dict[str, inspect.Parameter]:
    return dict(inspect.signature(func).parameters)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.name)
def test_every_flag_is_a_python_parameter_with_its_default(command: Command) -> None:
    python = params(command.function)
    for dest, action in flags(subcommand(command.name)).items():
        if dest in command.cli_only:
            continue
        name = command.cli_names.get(dest, dest)
        assert name in python, f"{command.name}: --{dest} is not a parameter of {command.function.__name__}"
        if dest in command.cli_defaults_differ or action.required:
            continue
        want = python[name].default
        if want is inspect.Parameter.empty:
            continue  # required in Python, e.g. the inputs: the flag is required, or positional
        assert cli_default(dest, action) == want, f"{command.name}: --{dest} defaults otherwise"


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.name)
def test_the_native_function_takes_the_python_names_and_declares_no_default(command: Command) -> None:
    assert command.native is not None
    python, native = params(command.function), params(command.native)
    assert set(native) - command.native_only <= set(python), command.name
    # Every option of the Python function crosses under its name (what Python keeps aside
    # excepted): no renaming at the boundary.
    keyword = {n for n, p in python.items() if p.kind == p.KEYWORD_ONLY}
    assert keyword - command.python_only <= set(native), command.name
    for name, p in native.items():
        if p.kind == p.KEYWORD_ONLY:
            assert p.default is inspect.Parameter.empty, f"_core.{command.native.__name__}({name}=...)"


@pytest.mark.parametrize("name", ["preprocess", "shuffle"])
def test_the_defaults_are_the_rust_configs(name: str) -> None:
    command = next(c for c in COMMANDS if c.name == name)
    python = params(command.function)
    declared = _core.defaults(name)
    for option, value in declared.items():
        default = python[option].default
        assert (tuple(default) if isinstance(value, list) else default) == (
            tuple(value) if isinstance(value, list) else value
        ), option
    # Each default the Python function gives an option it passes on comes from there.
    native = params(command.native)  # type: ignore[arg-type]
    python_declared = {"summary"}  # where the summary goes is the Python layer's
    for option, p in python.items():
        if option in native and p.default not in (None, inspect.Parameter.empty):
            assert option in declared or option in python_declared, f"{name}: {option} declared in Python"


def test_defaults_of_an_unknown_command_name_the_valid_ones() -> None:
    with pytest.raises(tokshuf.ConfigError, match="preprocess, shuffle"):
        _core.defaults("shufle")


def test_the_help_shows_the_rust_configs_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["shuffle", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    d = _core.defaults("shuffle")
    for flag, option in [("--wds-chunk-size", "wds_chunk_size"), ("--num-local-cells", "num_local_cells")]:
        assert f"(default: {d[option]})" in out.split(flag, 1)[1], flag


# -- instance datasets ----------------------------------------------------------------------------

INSTANCE_CLI_ONLY = {"strategy", "summary"}
#: tokshuf instances's defaults for options OLMo-core (and so the classes) requires.
INSTANCE_CLI_DEFAULTS = {"seed", "docs_per_instance", "chunks_per_doc"}


def test_instance_flags_are_parameters_of_the_strategies_with_their_defaults() -> None:
    classes = {name: params(cls) for name, cls in STRATEGIES.items()}
    assert list(STRATEGIES) == list(subcommand("instances")._option_string_actions["--strategy"].choices)
    for dest, action in flags(subcommand("instances")).items():
        if dest in INSTANCE_CLI_ONLY:
            continue
        takers = {
            name: ps[("max_" + dest) if name == "vsl" and dest == "sequence_length" else dest]
            for name, ps in classes.items()
            if dest in ps or (name == "vsl" and dest == "sequence_length")
        }
        assert takers, f"--{dest} is no strategy's parameter"
        for name, p in takers.items():
            if p.default is inspect.Parameter.empty:
                assert action.required or dest in INSTANCE_CLI_DEFAULTS or dest == "paths", (name, dest)
            else:
                assert action.default == p.default, (name, dest)


def test_every_instance_dataset_takes_the_shared_options_with_one_default() -> None:
    assert set(DEFAULTS) <= set(InstanceOptions.__annotations__)
    required = set(InstanceOptions.__annotations__) - set(DEFAULTS)
    assert required == {"pad_token_id", "eos_token_id"}
    for cls in (FSLDataset, PaddedFSLDataset, PackedFSLDataset, InterleavedFSLDataset, VSLDataset):
        ps = params(cls)
        for option in InstanceOptions.__annotations__:
            assert ps[option].kind == inspect.Parameter.KEYWORD_ONLY, (cls.__name__, option)
            assert ps[option].default == DEFAULTS.get(option, inspect.Parameter.empty), (cls.__name__, option)
        assert "Options of every instance dataset" in (cls.__doc__ or "")
        assert "cache_dir" in (cls.__doc__ or "")


def test_an_unknown_or_missing_option_is_a_type_error_naming_it(tmp_path: Any) -> None:
    with pytest.raises(TypeError, match=r"FSLDataset\(\) got an unexpected keyword argument 'pad_id'"):
        FSLDataset(tmp_path, sequence_length=8, pad_token_id=0, eos_token_id=0, pad_id=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="missing required keyword argument: 'eos_token_id'"):
        PaddedFSLDataset(tmp_path, sequence_length=8, pad_token_id=0)  # type: ignore[call-arg]


# -- the native module's vocabulary ---------------------------------------------------------------


def _native_callables() -> list[tuple[str, Callable[..., Any]]]:
    out = []
    for name in dir(_core):
        obj = getattr(_core, name)
        if callable(obj) and not name.startswith("__"):
            out.append((name, obj))
            if isinstance(obj, type):
                out += [(f"{name}.{m}", getattr(obj, m)) for m in vars(obj) if not m.startswith("__")]
    return out


def test_no_native_parameter_keeps_an_old_name() -> None:
    checked = 0
    for name, func in _native_callables():
        try:
            sig = inspect.signature(func)
        except (TypeError, ValueError):
            continue  # no text signature (a property, a class without one)
        checked += 1
        old = OLD_WORDS & set(sig.parameters)
        assert not old, f"_core.{name} takes {sorted(old)}"
    assert checked > 40
