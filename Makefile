# The two commands a new user runs are `make demo` and `make test`; both build .venv first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
TSTAMP := $(VENV)/.installed-test
DSTAMP := $(VENV)/.installed-docs

.PHONY: demo test browser test-long bench bench-ray live lint docs clean trace-examples \
        replay-day league league-tuning league-held-out

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# The simulator's hot modules are compiled with mypyc at install time when a C compiler is
# there (setup.py; pure Python otherwise): editing one reinstalls, which rebuilds them.
HOT    := src/utilon/core/vec_native.py src/utilon/core/make.py src/utilon/core/state.py \
          src/utilon/core/ledger.py src/utilon/core/grants.py src/utilon/core/dispatch.py \
          src/utilon/core/views.py src/utilon/core/transitions.py src/utilon/core/scheduler.py \
          src/utilon/sim/fluid.py src/utilon/sim/loop.py src/utilon/sim/engine.py

$(STAMP): $(BIN)/python pyproject.toml setup.py $(HOT)
	$(BIN)/python -m pip install --quiet -e .
	touch $@

# The example plugin (examples/plugin, docs/plugins.md) is part of the test environment:
# tests/test_plugins.py drives it from the command line.
$(TSTAMP): $(BIN)/python pyproject.toml setup.py $(HOT) examples/plugin/pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[test,ray,docs]'
	$(BIN)/python -m pip install --quiet --no-build-isolation -e examples/plugin
	touch $@ $(STAMP) $(DSTAMP)

$(DSTAMP): $(BIN)/python pyproject.toml setup.py $(HOT)
	$(BIN)/python -m pip install --quiet -e '.[docs]'
	touch $@ $(STAMP)

demo: $(STAMP)
	$(BIN)/utilon compare examples/facebook-mix.yaml --policies all --out runs/demo --report

# (the slowest tests are listed at the end: the suite must stay within its 10-minute budget)
# One pytest-xdist worker per logical core (TEST_WORKERS=0: all in this process); --dist
# loadfile keeps each test file on one worker, so a module's fixtures (a server, a Ray
# cluster, a PostgreSQL) start once.
# utilon's own modules are byte-compiled first: with PYTHONDONTWRITEBYTECODE set, every
# spawned worker, server and Ray process would compile them anew (0.25 s of CPU each).
TEST_WORKERS ?= logical
test: $(TSTAMP) browser
	$(BIN)/python -m compileall -q src
	$(BIN)/python -m pytest -m "not long" -n $(TEST_WORKERS) --dist loadfile --durations=15

# The dashboard's browser tests drive Debian's Chromium (Playwright cannot download its own
# here); install it when it is missing and this user can.  Without it those tests skip, saying
# why.
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium \
	     >/dev/null) ; } || echo "chromium is not installed: the browser tests will skip"

# The tests kept out of `make test` for its 10-minute budget (see README, Tests).
test-long: $(TSTAMP)
	$(BIN)/python -m pytest -m long

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_sim.py
	$(BIN)/python benchmarks/bench_traces.py --json benchmarks/results-traces.json
	$(BIN)/python benchmarks/bench_cora.py --slots 10 --lp-max-n 1000 --out benchmarks/results-cora.json
	$(BIN)/python benchmarks/bench_rds.py
	$(BIN)/python benchmarks/bench_ras.py
	$(BIN)/python benchmarks/bench_alsched.py
	$(BIN)/python benchmarks/bench_cura.py
	$(BIN)/python benchmarks/bench_service.py
	$(BIN)/python benchmarks/bench_flood.py
	$(BIN)/python benchmarks/bench_failover.py
	$(BIN)/python benchmarks/bench_triage.py --day --json benchmarks/results-triage.json
	$(BIN)/python benchmarks/bench_dashboard.py
	$(BIN)/python benchmarks/bench_startup.py --bytecode both --json benchmarks/results-startup.json

# Rebuild examples/traces/*.yaml from the real traces in ../shared/data.
trace-examples: $(STAMP)
	UTILON=$(BIN)/utilon sh examples/traces/regenerate.sh

# The whole SWIM FB-2010 day (24,442 jobs) under every policy, two at a time, each stopped
# after 5 minutes of wall-clock time (the README's table says which were; about 25 minutes on
# 2 cores).
replay-day: $(STAMP)
	$(BIN)/utilon trace import swim ../shared/data/swim_facebook/FB-2010_samples_24_times_1hr_0.tsv \
	  --name fb2010-day --out runs/traces/fb2010-day.yaml
	$(BIN)/utilon compare runs/traces/fb2010-day.yaml --policies all --max-wall 300 --out runs/fb2010-day

# The league (docs/league.md): the candidate policy against every other on the tuning set, then
# on the held-out set -- run that one once, at the end, and report it as it comes out.  Each
# set runs 5 seeds with realistic and with exact estimates; results in runs/league/<set>/.
league: league-tuning league-held-out

league-tuning: $(STAMP)
	$(BIN)/utilon league --set tuning --out runs/league

league-held-out: $(STAMP)
	$(BIN)/utilon league --set held-out --out runs/league

# Ray overhead: utilon's RayBackend against the same short tasks submitted to Ray directly.
bench-ray: $(TSTAMP)
	$(BIN)/python benchmarks/bench_ray.py --json benchmarks/results-ray.json

# Real jobs on local worker processes under the three baselines.
live: $(STAMP)
	for p in fifo fair edf-p; do $(BIN)/utilon run examples/live-mix.yaml --policy $$p || exit 1; done

lint: $(TSTAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy

# The documentation site in site/: docs/*.md and the API reference from the docstrings
# (mkdocs.yml).  --strict: a broken link or anchor, a page left out of the nav or a docstring
# griffe cannot parse is an error (tests/test_docs_site.py builds it too).
docs: $(DSTAMP)
	$(BIN)/mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV) runs site .pytest_cache .mypy_cache .ruff_cache
