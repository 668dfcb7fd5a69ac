# distributor: the two commands a new user types are `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip

.PHONY: demo test install install-test peers lint bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(PIP) install --quiet -e '.[test]'
	touch $@

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test

## demo: create the virtualenv, install distributor and run the example publication
demo: install
	bash scripts/demo.sh

## peers: install the test peers the suite starts itself (OpenSSH server, PostgreSQL and nginx from Debian)
peers:
	bash scripts/install-test-peers.sh

## test: install the test extra and the test peers, then lint (ruff, import contracts) and run the whole test suite
test: install-test peers
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/pytest $(PYTEST_ARGS)

## lint: ruff and the architecture's import contracts (pyproject.toml [tool.importlinter])
lint: install-test
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports --no-cache

bench: install
	$(PIP) install --quiet -e '.[bench]'
	@echo "see bench/README.md"

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info demo-output .dagster_home
