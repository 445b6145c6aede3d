"""Malformed and hostile answers end in a clear error or in ``_rejects``, never in a silent change
or a crash without a message.

Each case makes the simulator serve one bad answer (`FaultInjector.tamper` rewrites every
successful answer of one endpoint, after authentication and validation ran as usual) and runs
the asset that reads it through Dagster, real resources, on a warehouse that already holds the
data (put back in one place before each case, its catalog with it: a catalog names the root it
reads, so one built there once stays current). Each declares its outcome:

- `Fails`: the step fails with a message naming what was wrong (and how often it was asked:
  twice for an answer that breaks the contract, the whole budget for one that is not JSON), and
  the warehouse is byte for byte as it was;
- `Rejects`: the bad records (a field missing, null or of another JSON type, a value out of its
  rules) are in ``_rejects`` with their reason, the good ones are written, nothing else changed,
  and the blocking ``no_rejects`` check fails;
- `Keeps`: the value is data and stays data (a path-like account name), is read exactly by a
  documented rule (a funding time in milliseconds), or is a change the exchange may make without
  notice (a new field, smaller pages): success, the rows as they should be.

The client keeps its retry budget, with a short backoff, so a case ends in seconds; Dagster's own
30-second step retries are off for these runs (the application decides those).
"""

from __future__ import annotations

import hashlib
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from pipeline.simulator import Scale, SimClock, Simulator
from tests.reliability.bad_input_cases import (
    CASES,
    HELD,
    NEW,
    Case,
    Fails,
    Keeps,
    funding_history,
    hedge_mode,
    investments,
    main_balances,
    same,
    trading_balances,
    untouched,
    watcher_links_asset,
)
from tests.support.cli_runs import BUSY_LIMIT_S, Kept, Rows, failures, warehouse_rows
from tests.support.dagster_runs import (
    ACCOUNT,
    QUICK_RETRIES,
    funding_run,
    resources_for,
    without_step_retries,
)
from tests.support.simulated import FROZEN_AT
from warehouse import Warehouse, catalog, partitions, schemas
from warehouse.sources import SOURCES_DIR

# --- The warehouse before, and a run -----------------------------------------------------------


@pytest.fixture(scope="module")
def hostile() -> Iterator[Simulator]:
    """One simulator for the module; each case sets its own tamper and clears it after."""
    with Simulator(seed=7, scale=Scale.small(), clock=SimClock(FROZEN_AT)) as sim:
        yield sim


@dataclass(frozen=True)
class Warehouses:
    before: Kept  # the held funding days and today's snapshots
    before_rows: Rows
    clean_rows: Rows  # what a clean run of the funding days adds to it: the new day too


def _run(
    case: Case, sim: Simulator, root: Path, asset: dg.AssetsDefinition | None = None
) -> dg.ExecuteInProcessResult:
    """Materialize the case's asset (or ``asset``, the same made otherwise) against ``sim``."""
    resources = resources_for(sim, root, **QUICK_RETRIES)
    if case.asset is funding_history:
        return dg.materialize(
            [asset or funding_history],
            resources=resources,
            raise_on_error=False,
            **funding_run(case.days[0], case.days[-1]),
        )
    return dg.materialize([asset or case.asset], resources=resources, raise_on_error=False)


@pytest.fixture(scope="module")
def warehouses(hostile: Simulator, tmp_path_factory: pytest.TempPathFactory) -> Warehouses:
    base = tmp_path_factory.mktemp("bad-input")
    clean = base / "clean"
    for asset in (funding_history, investments, main_balances, trading_balances, hedge_mode):
        result = _run(Case("clean", "", untouched, asset, Keeps(same)), hostile, clean)
        assert result.success, failures(result)
    result = _run(Case("clean", "", untouched, watcher_links_asset, Keeps(same)), hostile, clean)
    assert result.success, failures(result)
    root = base / "case" / "warehouse"
    shutil.copytree(clean / "parquet", root / "parquet")
    # Which exchange filled the account: a run checks it before any request.
    shutil.copytree(clean / SOURCES_DIR, root / SOURCES_DIR)
    # The new day is not held yet: its month holds nothing of it.
    empty = schemas.TABLES["funding_history"].arrow_schema.empty_table()
    wh = Warehouse.open(root)
    partitions.replace_partition(wh, "funding_history", (ACCOUNT.name, NEW), empty, covers=[NEW])
    catalog.refresh(wh)
    return Warehouses(Kept.of(root), warehouse_rows(root), warehouse_rows(clean))


def _fingerprint(root: Path) -> dict[str, str]:
    """Every file under the root, with a digest of its bytes."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_a_bad_answer_ends_in_a_clear_error_or_in_rejects(
    case: Case,
    hostile: Simulator,
    warehouses: Warehouses,
) -> None:
    root = warehouses.before.put_back()
    wh = Warehouse.open(root)
    before = _fingerprint(root)
    baseline = warehouses.clean_rows if case.asset is funding_history else warehouses.before_rows
    if case.days == tuple(HELD):
        baseline = warehouses.before_rows
    served: list[bool] = []  # for each answer of the path: whether the tamper changed it

    def watched(params: dict[str, Any], body: bytes) -> bytes:
        tampered = case.tamper(params, body)
        served.append(tampered != body)
        return tampered

    hostile.faults.tamper(case.path, watched)
    hostile.page_cap = case.page_cap
    started = time.monotonic()
    try:
        result = _run(case, hostile, root, without_step_retries(case.asset))
    finally:
        hostile.faults.clear()
        hostile.page_cap = None
    # The bad answer was served: the asset asked for the path, and got it changed (or, where
    # the case is a smaller page, got pages of that size); else the case would pass on a clean
    # answer.
    assert served, f"the run never asked for {case.path}"
    assert any(served) or case.page_cap is not None, "the tamper changed no answer"
    # A bad answer ends without waiting on anything but its answers (with the client's backoff
    # shortened): within a bound that a backoff would pass and a machine busy with the suite
    # would not. The promise of 30 s is timed alone (serial) in tests/reliability/test_terminal.
    assert time.monotonic() - started < BUSY_LIMIT_S
    said = "\n".join(failures(result))
    assert hostile.credentials.api_secret not in said
    # Whatever the answer named, every file stayed where the warehouse puts its own.
    assert [p.name for p in root.parent.iterdir()] == ["warehouse"]
    placed = {p for table in schemas.TABLES for p in partitions.partition_files(wh.store, table)}
    assert {str(p.relative_to(root)) for p in root.rglob("*.parquet")} == placed

    outcome = case.outcome
    if isinstance(outcome, Fails):
        assert not result.success
        step_failures = [str(e.step_failure_data) for e in result.all_events if e.is_step_failure]
        assert len(step_failures) == 1, said
        for text in outcome.says:
            assert text in step_failures[0], step_failures[0]
        assert _fingerprint(root) == before  # never a silent change
        return

    rows = warehouse_rows(root)
    if isinstance(outcome, Keeps):
        assert result.success, said
        outcome.check(rows, baseline)
        return

    assert not result.success  # the blocking check stops what would read the partition
    checks = {(e.asset_key.path[-1], e.check_name): e.passed
              for e in result.get_asset_check_evaluations()}  # fmt: skip
    assert checks[(outcome.table, "no_rejects")] is False
    rejected = rows.pop("_rejects")
    assert len(rejected) == outcome.records, rejected
    assert {row[0] for row in rejected} == {outcome.table}
    for row in rejected:
        assert outcome.says in row[4], row
    kept, clean = rows.pop(outcome.table), baseline[outcome.table]
    assert all(row in clean for row in kept)  # the good records are written, none changed
    assert len(clean) - len(kept) == outcome.lost
    assert rows == {t: r for t, r in baseline.items() if t not in ("_rejects", outcome.table)}
