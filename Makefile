# colosched — the two set-up commands are `make demo` and `make test`; both install what they need.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
CARGO_TEST := cargo test --release --workspace --exclude colosched-py
export CARGO_TERM_PROGRESS_WHEN = never

.PHONY: demo test lint build venv sysdeps rust-test py-test bench clean

demo: build
	$(VENV)/bin/colosched demo --out out

test: build sysdeps rust-test py-test

venv: $(VENV)/.deps-ok
$(VENV)/.deps-ok: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet "maturin>=1.5,<2" "polars>=1.0" "rich>=13" "matplotlib>=3.7" "numpy>=1.24" \
		"pytest>=8" "ruff>=0.5"
	touch $@

# Builds the Rust engine in release mode and installs the package (editable) into .venv.
build: venv
	VIRTUAL_ENV=$(abspath $(VENV)) $(VENV)/bin/maturin develop --release --quiet

# Debian packages the tests use: Chromium checks the HTML report in a real browser.
sysdeps:
	@command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }

rust-test:
	$(CARGO_TEST)

py-test: build
	$(VENV)/bin/pytest -q

lint: venv
	cargo fmt --all --check
	cargo clippy --release --workspace --all-targets -- -D warnings
	$(VENV)/bin/ruff check python tests bench scripts
	$(VENV)/bin/ruff format --check python tests bench scripts

bench: build
	$(PY) bench/run.py

clean:
	rm -rf target out $(VENV) python/colosched/_native*.so
