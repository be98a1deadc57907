# `make demo` and `make test` each build .venv when it is missing or stale.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint venv clean bench-readme dist

# Both distributions in development (editable) mode: the service and hookline-client, which
# it depends on at the same version (shared/client/hookline_client/_version.py).
CLIENT := shared/client
VERSION_FILE := $(CLIENT)/hookline_client/_version.py

$(STAMP): pyproject.toml setup.py $(CLIENT)/pyproject.toml $(VERSION_FILE)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e './$(CLIENT)[aio]' -e '.[test,bench,otel]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/hookline demo --out results

# The gates, before any test: ruff with the rule selection in pyproject.toml, and mypy
# --strict on the `hookline` package (mypy follows its symlinks to the product
# folders; ruff does not, so it gets the folders), then on `hookline_client` alone (it must
# type-check without the service); a finding fails `make test`.
LINTED := hookline supervisor workers ingest shared rehearsal tests
TYPED := hookline

# One test process more than the 2 cores the suite is kept for: many tests wait on child
# processes, sockets and timers, and with 2 the cores were busy about 60 % of the run.
TEST_PROCESSES ?= 3

lint: $(STAMP)
	$(BIN)/ruff check $(LINTED)
	$(BIN)/mypy --strict $(TYPED)
	$(BIN)/mypy --strict -p hookline_client

# What the tests need from the system, each from Debian's packages: Chromium (tests/browser
# drive the dashboard; never `playwright install`), redis-server (`hookline bench --compare`
# starts a throwaway one for Celery), PostgreSQL's server binaries (tests start a throwaway
# server), libfaketime (the clock-step test steps a real `hookline serve`'s wall clock),
# bindfs (the test that a database on a FUSE mount is refused mounts one) and systemd
# (`systemd-analyze verify` checks the units in deploy/) and prometheus (promtool checks the
# rules in deploy/prometheus and a live /metrics), wrk (`hookline bench`'s load), strace (the
# worker's WAL syncs are traced, and failed, in a real process). Missing ones are installed with
# apt-get when root on Debian (CI); elsewhere the tests that need them skip locally and fail
# when CI is set.
LIBFAKETIME = $(wildcard /usr/lib/*/faketime/libfaketime.so.1)
PG_BINARIES = $(wildcard /usr/lib/postgresql/*/bin/initdb)

test: $(STAMP) lint
	@missing=""; \
	test -x /usr/bin/chromium || missing="$$missing chromium"; \
	command -v redis-server >/dev/null || missing="$$missing redis-server"; \
	test -n "$(PG_BINARIES)" || command -v initdb >/dev/null || missing="$$missing postgresql"; \
	test -n "$(LIBFAKETIME)" || missing="$$missing faketime"; \
	command -v bindfs >/dev/null || missing="$$missing bindfs"; \
	command -v systemd-analyze >/dev/null || missing="$$missing systemd"; \
	command -v promtool >/dev/null || missing="$$missing prometheus"; \
	command -v wrk >/dev/null || missing="$$missing wrk"; \
	command -v strace >/dev/null || missing="$$missing strace"; \
	if [ -n "$$missing" ]; then \
	    if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	        apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y $$missing; \
	    else \
	        echo "make test: missing system packages:$$missing (not root on Debian:" \
	             "install them for the tests that need them)" >&2; \
	    fi; \
	fi
	$(BIN)/python -m pytest -q -n $(TEST_PROCESSES)

# README.md's results table, regenerated from fresh runs on this machine (never edited by
# hand): a flat-out run, a steady run at 1,000 events/s, then `hookline bench-table`; a
# compare.json at COMPARE_JSON is included when present (make it first with
# `hookline bench --compare --out results/readme/compare`), and so is a
# scenario-everyday.json at EVERYDAY_JSON (`hookline bench --scenario everyday --out
# results/readme/everyday`, about 8 minutes).
# Quick trial: make bench-readme BENCH_EVENTS=3000 BENCH_RUNS=1 BENCH_ARGS='--idle-s 2' (needs
# wrk: bench-table refuses a flat-out run loaded by the Python generator). The targets are
# medians of BENCH_RUNS runs (issue #33: medians of 3): the flat-out and the steady runs
# alternate, so a slow hour weighs on both alike.
BENCH_EVENTS ?= 20000
BENCH_RUNS ?= 3
BENCH_ARGS ?=
BENCH_OUT := results/readme
COMPARE_JSON ?= $(BENCH_OUT)/compare/compare.json
EVERYDAY_JSON ?= $(BENCH_OUT)/everyday/scenario-everyday.json
BENCH_NS = $(shell seq 1 $(BENCH_RUNS))

bench-readme: $(STAMP)
	set -e; for n in $(BENCH_NS); do \
	    $(BIN)/hookline bench --events $(BENCH_EVENTS) $(BENCH_ARGS) --out $(BENCH_OUT)/flat-$$n; \
	    $(BIN)/hookline bench --events $(BENCH_EVENTS) --rate 1000 $(BENCH_ARGS) \
	        --out $(BENCH_OUT)/rate-1000-$$n; \
	done
	$(BIN)/hookline bench-table \
	    --flat $(foreach n,$(BENCH_NS),$(BENCH_OUT)/flat-$(n)/bench.json) \
	    --steady $(foreach n,$(BENCH_NS),$(BENCH_OUT)/rate-1000-$(n)/bench.json) \
	    $$(test -f $(COMPARE_JSON) && echo --compare $(COMPARE_JSON)) \
	    $$(test -f $(EVERYDAY_JSON) && echo --everyday $(EVERYDAY_JSON)) --readme README.md

# The release files, in dist/: the sdist and the wheel of the service and of hookline-client
# (each wheel built from its sdist, in an isolated environment), then `twine check` of their
# metadata. A build leaves build/ behind (an old build/lib would be packed again): removed
# first.
dist: $(STAMP)
	rm -rf dist build $(CLIENT)/build
	$(BIN)/python -m build --outdir dist $(CLIENT)
	$(BIN)/python -m build --outdir dist .
	$(BIN)/twine check --strict dist/*

clean:
	rm -rf $(VENV) results .pytest_cache dist build $(CLIENT)/build
