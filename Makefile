# Quick start (see README): `make selfcheck` runs the main job, `make test` runs the test suite.
# Each target creates .venv and installs the package with what it needs on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)
PROFILE ?= ci

.PHONY: selfcheck sweeps test lint bench install prove

$(STAMP): pyproject.toml
	rm -f $(VENV)/.installed-*
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -e '.[dev,torch]'
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
	TILEFOUNDRY_PROFILE=$(PROFILE) $(PY) -m pytest -q
	$(VENV)/bin/ruff check .
	$(VENV)/bin/tilefoundry prove

lint: $(STAMP)
	$(VENV)/bin/ruff check .

bench: $(STAMP)
	$(PY) benchmarks/bench_cast.py
	$(PY) benchmarks/bench_evaluator.py
	$(PY) benchmarks/bench_oracle_programs.py
	$(PY) benchmarks/bench_compiler.py

prove: $(STAMP)
	$(VENV)/bin/tilefoundry prove
