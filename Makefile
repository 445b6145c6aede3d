# Every target bootstraps what it needs: uv (installed with pip when missing), then the locked
# environment, its packages compiled to bytecode once (where PYTHONDONTWRITEBYTECODE is set, as
# on our build machines, each process would otherwise compile Dagster and the rest again).
# Nothing else has to be on the machine but python3 and make.
SHELL := /bin/bash
# The python3 of the PATH, but never an activated environment's (.venv's has neither pip nor uv):
# make looks past its bin directory.
ifdef VIRTUAL_ENV
PYTHON ?= $(or $(shell PATH='$(subst $(VIRTUAL_ENV)/bin:,,$(PATH))' command -v python3),python3)
endif
PYTHON ?= python3
UV := $(PYTHON) -m uv
RUN := $(UV) run --locked --no-sync

.PHONY: demo test test-fast bench ui serve lint typecheck simulator bootstrap browser postgres redis clean screenshot

bootstrap:
	@$(UV) --version >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet --user uv \
		|| $(PYTHON) -m pip install --quiet --user --break-system-packages uv
	@$(UV) sync --locked --quiet --compile-bytecode

demo: bootstrap
	@$(RUN) whitebit-etl demo

# The suite runs as two pytest sessions. First, on PYTEST_WORKERS processes (pytest-xdist; whole
# modules to a worker, so module fixtures are set up once, the longest modules first; loadgroup
# would split finer, but pytest-xdist 3.8 drops its groups under pytest 9.2, pytest-xdist#1386),
# every test but those marked serial (they measure time) and the secrets scan (after_all); then
# those, with the machine to themselves, the scan last. Each process saves its ledger of secrets
# in one directory; the scan takes them all in and reads the files of both sessions
# (tests/conftest.py). The sessions' files are removed when both pass, kept when one fails.
# Three processes on two cores: the three longest modules mostly wait on Dagster's daemon (a
# schedule's minute, a backfill's 30 s, run monitoring's 15 s) and run side by side
# (docs/benchmarks.md has the figures).
PYTEST_WORKERS ?= 3
PARALLEL := -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder
# Each session ends with its slowest tests, so a run's log says where the suite's minutes go.
DURATIONS := --durations=25
# pytest rewrites the asserts of every test module it imports and keeps the result as bytecode,
# unless PYTHONDONTWRITEBYTECODE is set: then each process of a session would rewrite them all
# again, so the suite's sessions let it keep them.
PYTEST := PYTHONDONTWRITEBYTECODE= $(RUN) pytest

test: bootstrap browser postgres redis lint typecheck
	@tmp="$$(mktemp -d -t whitebit-tests.XXXXXX)"; \
	set -x; \
	$(PYTEST) $(PARALLEL) $(DURATIONS) -m "not serial and not after_all" \
		--basetemp="$$tmp/parallel" --secrets-ledgers="$$tmp/ledgers"; parallel=$$?; \
	$(PYTEST) $(DURATIONS) -m "serial or after_all" \
		--basetemp="$$tmp/serial" --secrets-ledgers="$$tmp/ledgers"; serial=$$?; \
	{ set +x; } 2>/dev/null; \
	if [ $$parallel -eq 0 ] && [ $$serial -eq 0 ]; then rm -rf "$$tmp"; \
	else echo "the sessions' files are kept in $$tmp"; exit 1; fi

# The quick loop: everything but the tests marked slow (many seconds each) or browser, in the
# same two sessions (no secrets scan: it is slow).
test-fast: bootstrap lint typecheck
	$(PYTEST) $(PARALLEL) -m "not slow and not browser and not serial"; parallel=$$?; \
	$(PYTEST) -m "serial and not slow and not browser"; serial=$$?; \
	exit $$((parallel || serial))

# The Dagster UI test drives Debian's Chromium; installed here when missing.
browser:
	@scripts/ensure-chromium

# The service tests start their own PostgreSQL server from Debian's binaries; installed here when
# missing.
postgres:
	@scripts/ensure-postgres

# The Celery service tests (and `whitebit-etl serve --workers N` without CELERY_BROKER_URL) start
# Debian's redis-server as the workers' broker; installed here when missing.
redis:
	@scripts/ensure-redis

lint: bootstrap
	$(RUN) ruff check .
	$(RUN) ruff format --check .
	$(RUN) lint-imports

typecheck: bootstrap
	$(RUN) mypy

bench: bootstrap postgres redis
	@$(UV) sync --locked --quiet --compile-bytecode --group bench
	$(UV) run --locked --no-sync --group bench python -m bench

# The README's picture of the report (docs/report.png): the demo's page, in headless Chromium.
screenshot: bootstrap browser
	$(RUN) python scripts/report_screenshot.py

# The Dagster UI over the instance the CLI and the demo use (whitebit-etl ui).
ui: bootstrap
	@$(RUN) whitebit-etl ui

# The nightly service: webserver, daemon and code location server (whitebit-etl serve).
serve: bootstrap
	@$(RUN) whitebit-etl serve

simulator: bootstrap
	@$(RUN) whitebit-etl simulator

clean:
	rm -rf data .venv .mypy_cache .ruff_cache .pytest_cache .hypothesis
