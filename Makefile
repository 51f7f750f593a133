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

install-test: $(BIN)/python
	$(PIP) install 'torch==2.13.0'  # the CPU wheel, before anything that depends on torch
	$(PIP) install -e '.[dev,embeddings]'

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
