# graphroute developer entry points. `make demo` and `make test` are the README's two commands.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
EXTRAS ?= all,dev
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install demo test lint typecheck unit docs neo4j-up neo4j-down clean bench

$(VENV)/.installed-$(EXTRAS): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e ".[$(EXTRAS)]"
	$(PIP) install -q -e examples/graphroute-example-plugin
	rm -f $(VENV)/.installed-*
	touch $@

install: $(VENV)/.installed-$(EXTRAS)

demo: install
	$(VENV)/bin/graphroute demo

lint: install
	$(VENV)/bin/ruff check core plugins tests examples

# mypy cannot follow setuptools' editable import hook, so it checks a symlink view of the
# mapped package (graphroute.core -> core/, graphroute.plugins -> plugins/).
typecheck: install
	rm -rf .typecheck && mkdir -p .typecheck/graphroute
	ln -s ../../core .typecheck/graphroute/core
	ln -s ../../plugins .typecheck/graphroute/plugins
	ln -s ../../routes .typecheck/graphroute/routes
	cd .typecheck && MYPYPATH=. ../$(VENV)/bin/mypy --config-file ../pyproject.toml -p graphroute.core -p graphroute.plugins

unit: install
	$(VENV)/bin/pytest -q

# Reference pages are generated from the code (and committed): --check rewrites stale ones and
# fails, then a strict build fails on any broken link or anchor (never add --quiet: it hides the
# warnings --strict counts).
docs: install
	$(PY) -m graphroute.core.docgen --check
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict -f docs/mkdocs.yml

test: lint typecheck docs unit

clean:
	rm -rf $(VENV) .typecheck build *.egg-info .pytest_cache .mypy_cache .ruff_cache
