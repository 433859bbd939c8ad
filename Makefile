# Quick start: `make run` (install + run the main job) and `make test` (install + all checks).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test lint typecheck pytest bench clean screenshots docs

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11 or newer is required")'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

run: $(STAMP)
	$(BIN)/learning-bot serve

test: $(STAMP) lint typecheck pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

# Test files run in parallel processes (pytest-xdist), one file per process at a time so a
# module's server fixture starts once; PYTEST_WORKERS=0 runs them in this process.
PYTEST_WORKERS ?= 3
# Under faketime (docs/development.md) only the date is faked: libfaketime's faked monotonic
# clock would make every timed wait wait forever.
export FAKETIME_DONT_FAKE_MONOTONIC := 1

pytest: $(STAMP)
	$(BIN)/pytest -q $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist loadfile)

bench: $(STAMP)
	$(BIN)/python -m bench.select

# The reference pages under docs/reference/, generated from the code (tests/docs checks them).
docs: $(STAMP)
	$(BIN)/python docs/generate.py

screenshots: $(STAMP)
	$(BIN)/python docs/console_screenshot.py
	$(BIN)/python docs/screenshots.py
	$(BIN)/python docs/alert_screenshots.py
	$(BIN)/python docs/chat_screenshots.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
