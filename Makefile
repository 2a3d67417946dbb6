# Quick start (see README): `make selfcheck` runs the main job, `make test` runs the test suite.
# Each target creates .venv and installs the package with what it needs on first use, pinned by
# the committed lock requirements/lock.txt (`make lock` refreshes it; `make test-latest` runs the
# suite against the newest versions pyproject.toml allows, in .venv-latest).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
LOCK := requirements/lock.txt
# the extras `make test` installs (ray: the Ray executor's tests run in CI); part of the stamp,
# so changing them reinstalls an existing .venv
EXTRAS := dev,torch,ray
STAMP := $(VENV)/.installed-$(shell (cat pyproject.toml $(LOCK); echo '$(EXTRAS)') | sha1sum | cut -c1-12)
PROFILE ?= ci
PIP := -m pip install -q --disable-pip-version-check
# make test-latest PINS='ml_dtypes==0.6.0': the newest versions but these
PINS ?=
LATEST := .venv-latest

.PHONY: selfcheck sweeps test test-latest lint bench install prove lock

$(STAMP): pyproject.toml $(LOCK)
	rm -f $(VENV)/.installed-*
	$(PYTHON) -m venv $(VENV)
	$(PY) $(PIP) -c $(LOCK) --upgrade setuptools
	$(PY) $(PIP) -c $(LOCK) -e '.[$(EXTRAS)]'
	touch $@

install: $(STAMP)

selfcheck: $(STAMP)
	rm -f build/conformance-quick.jsonl
	$(VENV)/bin/tilefoundry conformance run --backend reference --tier quick -j 2 \
		--jsonl build/conformance-quick.jsonl --junit build/conformance-quick.xml
	$(VENV)/bin/tilefoundry prove

sweeps: $(STAMP)
	$(VENV)/bin/tilefoundry selfcheck

test: $(STAMP)
	TILEFOUNDRY_LOCKED=1 TILEFOUNDRY_PROFILE=$(PROFILE) $(PY) -m pytest -q
	$(VENV)/bin/ruff check .
	$(VENV)/bin/tilefoundry prove

test-latest:
	rm -rf $(LATEST)
	$(PYTHON) -m venv $(LATEST)
	$(LATEST)/bin/python $(PIP) --upgrade setuptools
	$(LATEST)/bin/python $(PIP) --upgrade --upgrade-strategy eager -e '.[dev,torch]' $(PINS)
	$(LATEST)/bin/tilefoundry --version --verbose
	TILEFOUNDRY_PROFILE=$(PROFILE) $(LATEST)/bin/python -m pytest -q
	$(LATEST)/bin/ruff check .
	$(LATEST)/bin/tilefoundry prove

lock: $(STAMP)
	$(PY) requirements/lockfile.py refresh

lint: $(STAMP)
	$(VENV)/bin/ruff check .

bench: $(STAMP)
	$(PY) benchmarks/bench_cast.py
	$(PY) benchmarks/bench_evaluator.py
	$(PY) benchmarks/bench_oracle_programs.py
	$(PY) benchmarks/bench_compiler.py

prove: $(STAMP)
	$(VENV)/bin/tilefoundry prove
