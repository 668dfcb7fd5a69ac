# distributor: the two commands a new user types are `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
# Every Python dependency (and pip, setuptools, wheel, uv) at the version CI resolved when the lock
# was committed. Refresh it on purpose with `make lock`.
LOCK   := requirements/constraints.txt
# pip installs from the lock only; the editable build uses the locked setuptools (no isolation).
PIPLOCK := $(PIP) install --quiet --constraint $(LOCK)

.PHONY: demo test install install-test peers lint bench clean lock test-latest

$(VENV)/.installed: pyproject.toml $(LOCK)
	$(PYTHON) -m venv $(VENV)
	$(PIPLOCK) pip setuptools wheel
	$(PIPLOCK) --no-build-isolation -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(PIPLOCK) --no-build-isolation -e '.[test]'
	touch $@

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test

## demo: create the virtualenv, install distributor and run the example publication
demo: install
	bash scripts/demo.sh

## peers: install the test peers the suite starts itself (OpenSSH server, PostgreSQL, nginx, faketime, chromium, zsh from Debian)
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
	$(PIPLOCK) --no-build-isolation -e '.[bench]'
	@echo "see bench/README.md"

## lock: refresh requirements/constraints.txt to the newest releases pyproject.toml allows (then run make test and commit it);
## `make lock LOCK_UPGRADE=` only adds what pyproject.toml gained and keeps every other pin
LOCK_UPGRADE ?= --upgrade
lock: install
	$(PIPLOCK) uv
	$(VENV)/bin/uv pip compile pyproject.toml requirements/tools.in --all-extras --universal \
		--python-version 3.11 $(LOCK_UPGRADE) --quiet --custom-compile-command 'make lock' -o $(LOCK)

## test-latest: the whole suite against the newest releases (in .venv-latest, ignoring the lock): what an upgrade would break
test-latest: peers
	$(PYTHON) -m venv .venv-latest
	.venv-latest/bin/pip install --quiet --upgrade pip setuptools wheel
	.venv-latest/bin/pip install --quiet --upgrade --upgrade-strategy eager -e '.[test]'
	.venv-latest/bin/pytest $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .venv-latest .pytest_cache build *.egg-info demo-output .dagster_home
