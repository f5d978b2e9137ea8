# graphroute developer entry points. `make demo` and `make test` are the README's two commands.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
EXTRAS ?= all,dev
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install demo test lint typecheck unit docs neo4j-up neo4j-down clean bench perf test-load chromium test-torch

$(VENV)/.installed-$(EXTRAS): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e ".[$(EXTRAS)]"
	$(PIP) install -q -e examples/graphroute-example-plugin
	rm -f $(VENV)/.installed-*
	touch $@

install: $(VENV)/.installed-$(EXTRAS)

# The demo needs the offline models (graphroute[local]: spaCy, OpenVINO, no torch) and the
# loader of its sample corpus's HTML invoice (graphroute[html]: beautifulsoup4).
DEMO_EXTRAS ?= local,html
demo:
	$(MAKE) install EXTRAS=$(DEMO_EXTRAS)
	$(VENV)/bin/graphroute demo

# ruff, then the layer contracts of pyproject.toml's [tool.importlinter] (lint-imports).
lint: install
	$(VENV)/bin/ruff check core plugins tests examples
	$(VENV)/bin/lint-imports

# mypy cannot follow setuptools' editable import hook, so it checks a symlink view of the
# mapped package (graphroute.core -> core/, graphroute.plugins -> plugins/).
typecheck: install
	rm -rf .typecheck && mkdir -p .typecheck/graphroute
	ln -s ../../core .typecheck/graphroute/core
	ln -s ../../plugins .typecheck/graphroute/plugins
	ln -s ../../routes .typecheck/graphroute/routes
	cd .typecheck && MYPYPATH=. ../$(VENV)/bin/mypy --config-file ../pyproject.toml -p graphroute.core -p graphroute.plugins

# The Neo4j conformance cases run against the project's own server, so `unit` starts it
# (a no-op when it already runs). Stop it with `make neo4j-down`.
unit: install neo4j-up chromium
	$(VENV)/bin/pytest -q -m "not load and not torch"

# Debian's Chromium for the playground's browser tests (tests/playground, via Playwright):
# installed when missing and we are root, as in CI; elsewhere those tests skip and say how.
CHROMIUM ?= /usr/bin/chromium
chromium:
	@if [ -x "$(CHROMIUM)" ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else echo "note: no $(CHROMIUM): the browser tests skip (apt-get install -y chromium)"; fi

# The long reliability tests (tests/reliability/test_load.py, marked `load`): 32 HTTP clients for
# 60 s, 20 MB / million-character documents at the default limits, Neo4j stopped mid-index.
test-load: install neo4j-up
	$(VENV)/bin/pytest -q -s -m load tests/reliability

# The torch extra (the sentence_transformers embedder, torch's sparse products and spaCy ops;
# tests marked `torch`) in a venv of its own, so `make test` proves the default install needs
# no torch. PyPI's Linux torch brings the CUDA libraries (the venv is ~6 GB); uv (a dev
# dependency) fetches and unpacks them in parallel: ~1 min on a cold cache where pip took ~10.
# UV_NATIVE_TLS: the system's certificate store, as pip uses (uv bundles its own otherwise).
TORCH_VENV ?= .venv-torch
TORCH_TESTS ?= tests/indexing tests/route2
$(TORCH_VENV)/.installed: pyproject.toml | install
	$(VENV)/bin/uv venv -q --allow-existing --python $(PYTHON) $(TORCH_VENV)
	VIRTUAL_ENV=$(abspath $(TORCH_VENV)) UV_NATIVE_TLS=1 $(VENV)/bin/uv pip install -q -e ".[local,torch,dev]"
	touch $@

test-torch: $(TORCH_VENV)/.installed
	$(TORCH_VENV)/bin/pytest -q -m torch $(TORCH_TESTS)

# Neo4j Community 2026.08 for development and CI (tests/neo4j_server: Maven-built embedded
# launcher, Bolt on 127.0.0.1:NEO4J_PORT or 7687, user neo4j, password NEO4J_PASSWORD or graphroute-dev).
neo4j-up: install
	PY=$(abspath $(PY)) tests/neo4j_server/neo4j.sh up

neo4j-down:
	tests/neo4j_server/neo4j.sh down

# Reference pages are generated from the code (and committed): --check rewrites stale ones and
# fails, then a strict build fails on any broken link or anchor (never add --quiet: it hides the
# warnings --strict counts).
docs: install
	$(PY) -m graphroute.core.apps.docgen --check
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict -f docs/mkdocs.yml

test: lint typecheck docs unit

# Performance figures against the models' own cost (docs/performance.md): a table on stdout,
# the full result in .graphroute/perf.json. PERF_ARGS=--quick for a smoke run; the Neo4j
# part uses the project's server when it runs (`make neo4j-up`) and is skipped otherwise.
PERF_ARGS ?=
perf: install
	$(VENV)/bin/graphroute perf $(PERF_ARGS)

clean:
	rm -rf $(VENV) $(TORCH_VENV) .typecheck build *.egg-info .pytest_cache .mypy_cache .ruff_cache
