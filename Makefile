# The two set-up commands of the README: `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
SRC := nbflow tests benchmarks

.PHONY: setup demo test lint typecheck unit notebooks browser bench

setup:
	@./scripts/bootstrap.sh

# The full test run includes the real-browser test: setup then installs Chromium when it may, and a
# missing browser is a failure, not a skip (NEED_BROWSER=0 make test to run without it).
test browser: export NEED_BROWSER ?= 1

demo: setup
	$(PY) -m nbflow.demo

lint: setup
	$(VENV)/bin/ruff check $(SRC)
	$(VENV)/bin/ruff format --check $(SRC)
	$(VENV)/bin/lint-imports

typecheck: setup
	$(VENV)/bin/mypy

NBVAL := --nbval-lax --nbval-sanitize-with tests/nbval_sanitize.cfg

unit: setup
	$(VENV)/bin/pytest tests

notebooks: setup
	$(VENV)/bin/pytest $(NBVAL) notebooks

# One pytest session for everything, so its closing line counts every test.
test: lint typecheck
	$(VENV)/bin/pytest $(NBVAL) tests notebooks

# The real-browser test alone (JupyterLab + headless Chromium); NEED_BROWSER=1 makes setup install Chromium.
browser: setup
	$(VENV)/bin/pytest -m browser tests

bench: setup
	$(PY) benchmarks/engine_overhead.py
	$(PY) benchmarks/batch_throughput.py
	$(PY) benchmarks/tracing_overhead.py
