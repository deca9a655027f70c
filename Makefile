# The habits of this project. `make help` lists them.
PY ?= python3
EXTRAS ?= test,torch,ray,plot,docs
CARGO_TEST_FLAGS ?=
PYTEST_FLAGS ?=

RUST_SOURCES := Cargo.toml $(wildcard Cargo.lock) pyproject.toml $(shell find rust -name '*.rs' -o -name 'Cargo.toml')
comma := ,
# `make dev` builds the `fast` profile (release speed for the hot loops, no fat LTO: minutes
# less to link); `make bench` and wheels use `release`.
PROFILE ?= fast
STAMP := build/.installed-$(PROFILE)-$(subst $(comma),-,$(EXTRAS))

.DEFAULT_GOAL := help
.PHONY: help dev test test-rust test-python lint fmt docs bench example wheel-check clean

help:  ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "} {printf "  %-12s %s\n", $$1, $$2}'

$(STAMP): $(RUST_SOURCES)
	MATURIN_PEP517_ARGS="--profile $(PROFILE)" $(PY) -m pip install -e ".[$(EXTRAS)]"
	@rm -f build/.installed-* && mkdir -p build && touch $@

dev: $(STAMP)  ## build the extension (release) and install the package in editable mode with its extras

test: dev test-rust test-python  ## the whole suite: Rust unit/property tests, then pytest

# The Rust tests build with the extension's profile, so they reuse every dependency `make dev`
# (and `make example`) compiled, the C libraries included; the core and the BPE engine alone get
# their debug assertions and overflow checks back, as the dev profile would give them.
RUST_TEST_PROFILE := --profile $(PROFILE) \
	--config 'profile.$(PROFILE).package.tokshuf-core.debug-assertions=true' \
	--config 'profile.$(PROFILE).package.tokshuf-core.overflow-checks=true' \
	--config 'profile.$(PROFILE).package.tokshuf-bpe.debug-assertions=true' \
	--config 'profile.$(PROFILE).package.tokshuf-bpe.overflow-checks=true'

test-rust:  ## cargo test for the workspace (the core needs no Python), on the extension's profile
	cargo test --workspace $(RUST_TEST_PROFILE) $(CARGO_TEST_FLAGS)

test-python: dev  ## pytest (PYTEST_FLAGS="-k storage" to pick tests)
	$(PY) -m pytest $(PYTEST_FLAGS)

PY_SOURCES := python tests benches examples docs/hooks

lint:  ## rustfmt, clippy, ruff, mypy
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings
	$(PY) -m ruff check $(PY_SOURCES)
	$(PY) -m ruff format --check $(PY_SOURCES)
	$(PY) -m mypy

fmt:  ## format Rust and Python sources
	cargo fmt --all
	$(PY) -m ruff format $(PY_SOURCES)
	$(PY) -m ruff check --fix $(PY_SOURCES)

docs: dev  ## the documentation site into site/ (warnings, broken links included, are errors)
	$(PY) docs/hooks/bench_table.py
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

bench:  ## run benches/ on a release build beside the peers (the `bench` extra); rewrites docs/benchmarks*.md
	$(MAKE) dev PROFILE=release EXTRAS=$(EXTRAS),bench
	$(PY) benches/run_all.py
	$(PY) docs/hooks/bench_table.py

# The example's build: release speed for the hot loops without fat LTO's link time.
EXAMPLE_PROFILE ?= fast

example:  ## install (no extras: no torch; a quick-to-compile build) and run the pipeline on a small corpus
	MATURIN_PEP517_ARGS="--profile $(EXAMPLE_PROFILE)" $(PY) -m pip install -e .
	$(PY) examples/quickstart.py

wheel-check:  ## build the release wheel into dist/, install it where no Rust toolchain is, run the example
	PY=$(PY) .ci/wheel-check

clean:  ## remove build outputs
	cargo clean
	rm -rf build site python/tokshuf/*.so
