# The two commands a new user runs are `make demo` and `make test`; both build .venv first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
TSTAMP := $(VENV)/.installed-test

.PHONY: demo test bench bench-ray live lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(TSTAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[test,ray]'
	touch $@ $(STAMP)

demo: $(STAMP)
	$(BIN)/utilon compare examples/facebook-mix.yaml --policies all --out runs/demo

test: $(TSTAMP)
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_sim.py

# Ray overhead: utilon's RayBackend against the same short tasks submitted to Ray directly.
bench-ray: $(TSTAMP)
	$(BIN)/python benchmarks/bench_ray.py --json benchmarks/results-ray.json

# Real jobs on local worker processes under the three baselines.
live: $(STAMP)
	for p in fifo fair edf-p; do $(BIN)/utilon run examples/live-mix.yaml --policy $$p || exit 1; done

lint: $(TSTAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy

clean:
	rm -rf $(VENV) runs .pytest_cache .mypy_cache .ruff_cache
