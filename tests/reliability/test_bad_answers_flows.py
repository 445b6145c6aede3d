"""Every bad answer, for every history of the account's trading, flows and positions: it ends in
a clear error without waiting on anything but its answers (`BUSY_LIMIT_S`) with the warehouse
untouched, in ``_rejects``, or loaded and named (`bad_answer_cases_flows` has the table, made
from the declarations).

Each case makes one simulator of the module misbehave for one history's endpoint (a fault switch
on its path, a tamper of its answers, or a key the exchange refuses) and materializes that
history's asset in-process, with its real client and resources, on a warehouse that already
holds the clean run of every one of them (put back before each case, its catalog current).
Dagster's own step retries are off (the application decides those); the client keeps its retry
budget with a short backoff. The assets' day is pinned to the simulator's, so that the six-month
floor of a history the exchange forgets falls where it does on the day the data was made,
whatever day the suite runs.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import dagster as dg
import pytest

from assets import view_checks
from assets.resources import WhiteBITResource
from pipeline import spec
from pipeline.simulator import Credentials, Scale, SimClock, Simulator
from tests.reliability.bad_answer_cases_flows import (
    CASES,
    FIRST,
    HISTORIES,
    NEW_VALUE,
    TODAY,
    Case,
    Drifts,
    Fails,
    Rejects,
    Unlisted,
)
from tests.support.cli_runs import BUSY_LIMIT_S, Kept, Rows, failures, warehouse_rows
from tests.support.dagster_runs import (
    ACCOUNT,
    QUICK_RETRIES,
    asset,
    resources_for,
    without_step_retries,
)
from tests.support.simulated import FROZEN_AT
from warehouse import Warehouse, catalog, partitions, schemas
from warehouse.schemas import month_of

#: The assets' clock stands at the simulator's moment: the run's days and the six-month floor.
CLOCK: Final = SimClock(FROZEN_AT)


@pytest.fixture(scope="module")
def hostile() -> Iterator[Simulator]:
    """One simulator for the module; each case steers it and clears it after."""
    with Simulator(seed=7, scale=Scale.small(), clock=SimClock(FROZEN_AT)) as sim:
        yield sim


@pytest.fixture(scope="module")
def instance() -> Iterator[dg.DagsterInstance]:
    """One Dagster instance for the module's runs (each run is in-process)."""
    with dg.DagsterInstance.ephemeral() as shared:
        yield shared


def _run(
    history: spec.History,
    sim: Simulator,
    root: Path,
    instance: dg.DagsterInstance,
    credentials: Credentials | None = None,
) -> dg.ExecuteInProcessResult:
    """Materialize the history's asset (without step retries) against ``sim``: a monthly one for
    the days `FIRST` .. `TODAY`, a snapshot for the exchange's day."""
    resources = resources_for(sim, root, **QUICK_RETRIES)
    if credentials is not None:
        resources[ACCOUNT.resource_key] = WhiteBITResource(
            api_key=credentials.api_key,
            api_secret=credentials.api_secret,
            base_url=sim.url,
            **QUICK_RETRIES,
        )
    built = asset(history.name, clock=CLOCK)
    run: dict[str, Any] = {}
    if history.monthly:
        days = {"first_day": FIRST.isoformat(), "last_day": TODAY.isoformat()}
        run = {
            "partition_key": month_of(TODAY),
            "run_config": {"ops": {built.node_def.name: {"config": days}}},
        }
    return dg.materialize(
        [without_step_retries(built)],
        resources=resources,
        instance=instance,
        raise_on_error=False,
        **run,
    )


@dataclass(frozen=True)
class Warehouses:
    before: Kept  # the clean run of every history of the table
    rows: Rows


@pytest.fixture(scope="module")
def warehouses(
    hostile: Simulator, instance: dg.DagsterInstance, tmp_path_factory: pytest.TempPathFactory
) -> Warehouses:
    before = tmp_path_factory.mktemp("bad-answers") / "warehouse"
    for history in HISTORIES:
        result = _run(history, hostile, before, instance)
        assert result.success, failures(result)
    rows = warehouse_rows(before)
    for history in HISTORIES:  # each case below spoils a record it reads
        assert rows[history.name], f"the clean run of {history.name} holds no row"
    return Warehouses(Kept.of(before), rows)


def _fingerprint(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _credentials(case: Case, sim: Simulator) -> Credentials | None:
    if case.wrong_secret:
        return Credentials(sim.credentials.api_key, "not-the-secret-of-this-key-at-all")
    if case.role is not None:
        return sim.keys[case.role].credentials
    return None


def _checks(result: dg.ExecuteInProcessResult, table: str) -> dict[str, dg.AssetCheckEvaluation]:
    return {
        e.check_name: e
        for e in result.get_asset_check_evaluations()
        if e.asset_key == dg.AssetKey([ACCOUNT.name, table])
    }


def test_every_history_of_flows_meets_every_kind_of_bad_answer() -> None:
    """The table covers each history the bad-input suite does not read (those of issues 37 and
    38 at least), each with every kind, and a status it does not document where it keeps one."""
    named = {h.name for h in HISTORIES}
    assert named >= {
        "trades", "orders", "conversions", "deposits_withdrawals", "pending_flows", "subaccounts",
        "subaccount_transfers", "position_events", "closed_positions", "open_positions",
        "collateral_balances",
    }  # fmt: skip
    assert not named & {"funding_history", "main_balances", "hedge_mode", "watcher_links"}
    kinds: dict[str, set[str]] = {}
    for case in CASES:
        kinds.setdefault(case.history.name, set()).add(case.kind)
    every = set.intersection(*kinds.values())
    assert {"refused-wrong-signature", "gateway-429", "http-5xx", "cut-json", "html-with-200",
            "new-field-in-every-record", "number-for-a-string"} <= every  # fmt: skip
    for history in HISTORIES:
        kept = bool(view_checks.kept_columns(history))
        assert ("undocumented-status" in kinds[history.name]) == kept, history.name


def _reason(failed: Any, path: str) -> str:
    """What the failed step says: the failure the step raised (a refusal, a broken contract),
    else the client's error it let through for Dagster to retry (the one naming the path)."""
    if failed.user_failure_data is not None:
        return str(failed.user_failure_data.description)
    error = failed.error
    while error is not None and path not in error.message:
        error = error.cause
    assert error is not None, failed
    return str(error.message)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_a_bad_answer_of_a_flow_ends_in_time_with_its_reason(
    case: Case,
    hostile: Simulator,
    instance: dg.DagsterInstance,
    warehouses: Warehouses,
    capfd: pytest.CaptureFixture[str],
) -> None:
    table = case.history.name
    root = warehouses.before.put_back()
    wh = Warehouse.open(root)
    if case.fresh:
        for name in partitions.partition_files(wh.store, table, account=ACCOUNT.name):
            wh.store.delete(name)
    before = _fingerprint(root)
    served: list[bool] = []  # for each answer of the path: whether it was spoiled
    credentials = _credentials(case, hostile)
    case.steer(hostile)
    steered = hostile.faults.tampered(case.path)
    if steered is not None:

        def watched(params: dict[str, Any], body: bytes) -> bytes:
            spoiled: bytes = steered(params, body)
            served.append(spoiled != body)
            return spoiled

        hostile.faults.tamper(case.path, watched)
    injected = sum(hostile.faults.injected.values())
    started = time.monotonic()
    try:
        result = _run(case.history, hostile, root, instance, credentials)
    finally:
        elapsed = time.monotonic() - started
        hostile.faults.clear()
    # The bad answer was served: a tampered answer changed, a fault injected, or the key used.
    if steered is not None:
        assert any(served), "the tamper changed no answer"
    elif credentials is None:
        assert sum(hostile.faults.injected.values()) > injected, "no fault was injected"
    assert elapsed < BUSY_LIMIT_S, f"{case.name} took {elapsed:.1f} s"
    said = "\n".join([*failures(result), *(str(e) for e in result.all_events)])
    said += "".join(capfd.readouterr())
    for secret in {
        hostile.credentials.api_secret,
        *([credentials.api_secret] if credentials else []),
    }:
        assert secret not in said
    # Whatever the answer said, every file is where the warehouse puts its own.
    assert [p.name for p in root.parent.iterdir()] == ["warehouse"]
    placed = {p for t in schemas.TABLES for p in partitions.partition_files(wh.store, t)}
    assert {str(p.relative_to(root)) for p in root.rglob("*.parquet")} == placed

    outcome = case.outcome
    if isinstance(outcome, Fails):
        assert not result.success
        (failed,) = [e.step_failure_data for e in result.all_events if e.is_step_failure]
        reason = _reason(failed, outcome.path)
        assert "\n" not in reason.strip(), reason  # one line, no stack
        # The endpoint; a refused key is refused on every path of the step, the first named.
        paths = {outcome.path}
        if credentials is not None:
            keys = asset(table, clock=CLOCK).keys
            paths |= {spec.HISTORIES[key.path[-1]].operation.path for key in keys}
        assert any(path in reason for path in paths), reason
        assert "Decimal(" not in reason, reason  # what it quotes of the answer is JSON
        for text in outcome.says:
            assert text in reason, reason
        assert _fingerprint(root) == before  # nothing written: the partitions as they were
        return

    rows = warehouse_rows(root)
    checks = _checks(result, table)
    if isinstance(outcome, Rejects):
        assert not result.success  # the blocking check stops what would read the partition
        assert checks["no_rejects"].passed is False
        rejected = rows.pop("_rejects")
        assert len(rejected) == 1, rejected
        assert rejected[0][0] == table
        assert outcome.says in rejected[0][4], rejected[0]
        kept, clean = rows.pop(table), warehouses.rows[table]
        assert all(row in clean for row in kept)  # the good records are written, none changed
        assert len(clean) - len(kept) == 1
        assert rows == {t: r for t, r in warehouses.rows.items() if t not in ("_rejects", table)}
        return

    assert result.success, said
    if isinstance(outcome, Drifts):
        assert rows == warehouses.rows  # the rows as without the field
        drift = checks["schema_drift"]
        assert drift.passed is False
        assert drift.severity == dg.AssetCheckSeverity.WARN
        assert f'{outcome.field} (e.g. "{NEW_VALUE}")' in (drift.description or "")
        assert "Decimal(" not in (drift.description or "")
        (materialized,) = [
            m for m in result.get_asset_materialization_events()
            if m.asset_key == dg.AssetKey([ACCOUNT.name, table])
        ]  # fmt: skip
        unknown = materialized.materialization.metadata["unknown_fields"].value
        assert isinstance(unknown, dict)
        assert [k for k in unknown if k.endswith(f".{outcome.field}")], unknown
        return

    assert isinstance(outcome, Unlisted)
    # The record lands, with the value as the exchange sent it; nothing else changed.
    changed, clean = rows.pop(table), warehouses.rows[table]
    assert rows == {t: r for t, r in warehouses.rows.items() if t != table}
    assert len(changed) == len(clean)
    (new,) = [row for row in changed if row not in clean]
    assert outcome.raw in new, new
    with catalog.connect(wh) as con:
        landed = con.execute(
            f'SELECT count(*) FROM "{table}" WHERE "{outcome.column}" = ?',  # noqa: S608
            [outcome.raw],
        ).fetchone()
    assert landed == (1,)
    named = view_checks.unlisted_values(
        wh, table, ACCOUNT.name, key=dg.AssetKey([ACCOUNT.name, table])
    )
    assert named.passed is False
    assert named.severity == dg.AssetCheckSeverity.WARN
    description = named.description or ""
    # Named with its column and count: "side 'SURPRISE' (1)", "status 'method 1, status 99' (1)".
    assert f"{outcome.column} '" in description, description
    assert f"{outcome.raw}' (1)" in description, description
