# Two commands do all the set-up on a fresh machine:
#   make demo   load the sample research-agent memories into data/memory.db and search them
#   make test   install what the tests need and run lint, type check and the whole suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip --disable-pip-version-check -q

.PHONY: demo test lint typecheck pytest bench clean install install-test

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip

install: $(BIN)/python
	$(PIP) install -e .

install-test: $(BIN)/python tests/cypher/node_modules/.package-lock.json
	$(PIP) install -e '.[dev,graph]'

# Neo4j's Cypher parser for tests/test_cypher_lint.py (needs the machine's Node.js and npm).
tests/cypher/node_modules/.package-lock.json: tests/cypher/package.json tests/cypher/package-lock.json
	cd tests/cypher && npm ci --no-audit --no-fund --loglevel=error

demo: install
	$(BIN)/memkit demo

lint:
	$(BIN)/ruff check memkit tests bench

typecheck:
	$(BIN)/mypy

pytest:
	$(BIN)/python -m pytest

test: install-test lint typecheck pytest

bench: install
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
