# `make demo` and `make test` each build .venv when it is missing or stale.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test venv clean

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
# tests skip locally and fail when CI is set.
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
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) results .pytest_cache
