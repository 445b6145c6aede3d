# Every target bootstraps what it needs: uv (installed with pip when missing), then the locked
# environment. Nothing else has to be on the machine but python3 and make.
SHELL := /bin/bash
PYTHON ?= python3
UV := $(PYTHON) -m uv
RUN := $(UV) run --locked --no-sync

.PHONY: demo test test-fast bench ui serve lint typecheck simulator bootstrap browser postgres clean

bootstrap:
	@$(UV) --version >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet --user uv \
		|| $(PYTHON) -m pip install --quiet --user --break-system-packages uv
	@$(UV) sync --locked --quiet

demo: bootstrap
	@$(RUN) whitebit-etl demo

test: bootstrap browser postgres lint typecheck
	$(RUN) pytest

# The quick loop: everything but the tests marked slow (end to end at scale) or browser.
test-fast: bootstrap lint typecheck
	$(RUN) pytest -m "not slow and not browser"

# The Dagster UI test drives Debian's Chromium; installed here when missing.
browser:
	@scripts/ensure-chromium

# The service tests start their own PostgreSQL server from Debian's binaries; installed here when
# missing.
postgres:
	@scripts/ensure-postgres

lint: bootstrap
	$(RUN) ruff check .
	$(RUN) ruff format --check .
	$(RUN) lint-imports

typecheck: bootstrap
	$(RUN) mypy

bench: bootstrap
	@$(UV) sync --locked --quiet --group bench
	$(UV) run --locked --no-sync --group bench python -m bench

# The Dagster instance the CLI and the demo use (WAREHOUSE_ROOT/dagster unless DAGSTER_HOME says).
ui: bootstrap
	DAGSTER_HOME="$$($(RUN) python -c 'from assets.runs import dagster_home; print(dagster_home())')" \
		$(RUN) dagster dev -w workspace.yaml

# The nightly service: webserver, daemon and code location server (whitebit-etl serve).
serve: bootstrap
	@$(RUN) whitebit-etl serve

simulator: bootstrap
	@$(RUN) whitebit-etl simulator

clean:
	rm -rf data .venv .mypy_cache .ruff_cache .pytest_cache .hypothesis
