# The README's two set-up commands: `make demo` (lean: what the demo needs) and `make test` (everything).
# Each installs what it needs into .venv first (scripts/bootstrap.sh); both work on a fresh clone.
VENV ?= .venv
PY := $(VENV)/bin/python
SRC := nbflow tests benchmarks scripts conftest.py
NBVAL := --nbval-lax --nbval-sanitize-with tests/nbval_sanitize.cfg
# More options for JupyterLab (e.g. LAB_ARGS="--no-browser --port=8890"); root must say --allow-root.
LAB_ARGS ?=
LAB_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)

.PHONY: demo test check lab setup lint typecheck docs docs-serve suite pythons unit notebooks mdtest \
	package notebooks-build browser bench clean

# The demo: nbflow with its notebook extra and the demo's LLM client, nothing else.
demo:
	@./scripts/bootstrap.sh demo
	$(PY) -m nbflow.demo

# JupyterLab on the notebooks (paired with their sources in notebooks/src by jupytext).
lab:
	@./scripts/bootstrap.sh lab
	$(VENV)/bin/jupyter lab --ServerApp.root_dir=notebooks $(LAB_ROOT) $(LAB_ARGS)

# Everything: lint, types, the strict docs build, then the whole suite on the main Python (its closing
# line is the last one printed). `make pythons` runs the suite on every other Python found.
# The real-browser test is part of it: setup installs Chromium when it may, and a missing browser is a
# failure, not a skip (NEED_BROWSER=0 make test runs without it).
test: lint typecheck docs suite

# The same on the main Python only.
check: lint typecheck docs suite

test check suite pythons browser: export NEED_BROWSER ?= 1

# The full development environment (every extra and dependency group).
setup:
	@./scripts/bootstrap.sh test

lint: setup
	$(VENV)/bin/ruff check $(SRC)
	$(VENV)/bin/ruff format --check $(SRC)
	$(VENV)/bin/lint-imports

typecheck: setup
	$(VENV)/bin/mypy

# The docs site (MkDocs Material): guides, API reference, executed notebooks. --strict: a broken link,
# a missing reference or any other warning fails the build (never add --quiet: it hides the warnings
# from the strict check).
docs:
	@./scripts/bootstrap.sh docs
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict
	@echo "docs built: site/index.html"

docs-serve:
	@./scripts/bootstrap.sh docs
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve

# One pytest session for everything, so its closing line counts every test: unit, property, kernel,
# browser and packaging tests, every notebook under nbval, every code block of README.md and docs/.
suite: setup
	$(VENV)/bin/pytest $(NBVAL) --markdown-docs tests notebooks README.md docs

# `suite` on every other CPython >= 3.11 found on this machine (scripts/pythons.sh), each in its own
# .venv-3.X; nothing is downloaded.
pythons: setup
	@main=$$($(PY) -c 'import sys; print("%d.%d" % sys.version_info[:2])'); \
	others=$$(./scripts/pythons.sh | awk -v main="$$main" '$$1 != main'); \
	if [ -z "$$others" ]; then echo "pythons: only Python $$main on this machine"; fi; \
	echo "$$others" | while read -r ver exe; do \
		[ -n "$$ver" ] || continue; \
		echo "== the suite on Python $$ver ($$exe)"; \
		$(MAKE) --no-print-directory suite VENV=.venv-$$ver PYTHON=$$exe || exit 1; \
	done

# Parts of `suite`.
unit: setup
	$(VENV)/bin/pytest tests

notebooks: setup
	$(VENV)/bin/pytest $(NBVAL) notebooks

mdtest: setup
	$(VENV)/bin/pytest --markdown-docs README.md docs

# Build the wheel and sdist, `twine check` them, install the wheel into a clean environment, run the demo.
package: setup
	$(VENV)/bin/pytest -m package tests/test_package.py

# Re-execute notebooks from their sources (all, or NB="02_resilience 04_batch_eval").
notebooks-build: setup
	$(PY) scripts/build_notebooks.py $(NB)

# The real-browser test alone (JupyterLab + headless Chromium); NEED_BROWSER=1 makes setup install Chromium.
browser: setup
	$(VENV)/bin/pytest -m browser tests

bench: setup
	$(PY) benchmarks/engine_overhead.py
	$(PY) benchmarks/batch_throughput.py
	$(PY) benchmarks/tracing_overhead.py
	$(PY) benchmarks/build_compile.py --sizes 1000 --cycle 30000
	$(PY) benchmarks/import_cost.py
	$(PY) benchmarks/io_fanout.py
	$(PY) benchmarks/fanout_memory.py

clean:
	rm -rf site dist build .cache/mkdocs-jupyter
