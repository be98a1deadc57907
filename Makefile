# `make demo` and `make test` each build .venv when it is missing or stale.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test venv clean bench-readme

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/hookline demo --out results

# tests/browser drive the dashboard in the system Chromium (never `playwright install`):
# install it with apt-get when missing (CI runs as root on Debian); without it the browser
# tests skip locally and fail when CI is set. `hookline bench --compare` (and its test)
# starts a throwaway redis-server for Celery: the same goes for it, and for bindfs (the test
# that a database on a FUSE mount is refused mounts one).
CHROMIUM := /usr/bin/chromium

test: $(STAMP)
	@if [ ! -x $(CHROMIUM) ]; then \
	    if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	        apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; \
	    else \
	        echo "make test: $(CHROMIUM) is missing and this is not root on Debian;" \
	             "install chromium for the browser tests" >&2; \
	    fi; \
	fi
	@if ! command -v redis-server >/dev/null; then \
	    if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	        apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server; \
	    else \
	        echo "make test: redis-server is missing and this is not root on Debian;" \
	             "install redis-server for the bench --compare test" >&2; \
	    fi; \
	fi
	@if ! command -v bindfs >/dev/null; then \
	    if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	        apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y bindfs; \
	    else \
	        echo "make test: bindfs is missing and this is not root on Debian;" \
	             "install bindfs for the FUSE storage test" >&2; \
	    fi; \
	fi
	$(BIN)/python -m pytest -q

# README.md's results table, regenerated from fresh runs on this machine (never edited by
# hand): a flat-out run, a steady run at 1,000 events/s, then `hookline bench-table`; a
# compare.json at COMPARE_JSON is included when present (make it first with
# `hookline bench --compare --out results/readme/compare`).
# Quick trial: make bench-readme BENCH_EVENTS=3000 BENCH_ARGS='--load python --idle-s 2'
BENCH_EVENTS ?= 20000
BENCH_ARGS ?=
BENCH_OUT := results/readme
COMPARE_JSON ?= $(BENCH_OUT)/compare/compare.json

bench-readme: $(STAMP)
	$(BIN)/hookline bench --events $(BENCH_EVENTS) $(BENCH_ARGS) --out $(BENCH_OUT)/flat
	$(BIN)/hookline bench --events $(BENCH_EVENTS) --rate 1000 $(BENCH_ARGS) \
	    --out $(BENCH_OUT)/rate-1000
	$(BIN)/hookline bench-table --flat $(BENCH_OUT)/flat/bench.json \
	    --steady $(BENCH_OUT)/rate-1000/bench.json \
	    $$(test -f $(COMPARE_JSON) && echo --compare $(COMPARE_JSON)) --readme README.md

clean:
	rm -rf $(VENV) results .pytest_cache
