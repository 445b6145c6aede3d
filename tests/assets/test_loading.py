"""The funding load: streamed by month across chunks, bad records kept, no silent shrinking."""

from __future__ import annotations

import re
from datetime import date, timedelta
from pathlib import Path

import dagster as dg
import orjson
import pytest

from assets import loading
from pipeline.simulator import Simulator, left_out
from tests.support.dagster_runs import asset, resources_for
from warehouse import Warehouse, catalog

DAYS = [date(2026, 9, 12) + timedelta(days=n) for n in range(4)]
#: A run of the month that holds DAYS, narrowed to them.
DAYS_CONFIG = {"first_day": DAYS[0].isoformat(), "last_day": DAYS[-1].isoformat()}
FUNDING_PATH = "/api/v4/collateral-account/funding-history"
funding_history = asset("funding_history")


def _rows(root: Path) -> list[tuple[object, ...]]:
    with catalog.connect(Warehouse.open(root)) as con:
        return con.execute(
            "SELECT * EXCLUDE (extracted_at) FROM funding_history ORDER BY ALL"
        ).fetchall()


def _run(
    sim: Simulator, root: Path, instance: dg.DagsterInstance, **config: object
) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        [funding_history],
        resources=resources_for(sim, root),
        instance=instance,
        partition_key="2026-09",
        raise_on_error=False,
        run_config={"ops": {funding_history.node_def.name: {"config": {**DAYS_CONFIG, **config}}}},
    )


def test_chunks_of_any_size_give_the_same_partitions(
    own_sim: Simulator,
    root: Path,
    tmp_path: Path,
    instance: dg.DagsterInstance,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert _run(own_sim, root, instance).success
    whole = _rows(root)
    monkeypatch.setattr(loading, "CHUNK_RECORDS", 7)  # days now span many chunks
    other = tmp_path / "small-chunks"
    assert _run(own_sim, other, instance).success
    assert _rows(other) == whole
    assert len(whole) > 60


def test_an_empty_answer_does_not_empty_the_warehouse(
    own_sim: Simulator, root: Path, instance: dg.DagsterInstance
) -> None:
    assert _run(own_sim, root, instance).success
    before = _rows(root)
    own_sim.faults.tamper(
        FUNDING_PATH,
        lambda params, body: (
            b'{"offset":%d,"limit":%d,"records":[]}' % (params["offset"], params["limit"])
        ),
    )
    failed = _run(own_sim, root, instance)
    assert not failed.success
    message = str(next(e for e in failed.all_events if e.is_step_failure).step_failure_data)
    # Every answer was whole (an empty first page ends the walk): the exchange no longer lists
    # them, and the message never proposes writing fewer.
    assert "the exchange no longer lists them as the warehouse can read them" in message
    assert "allow_fewer_rows" not in message
    assert _rows(root) == before
    # Said on purpose, the partitions are emptied.
    assert _run(own_sim, root, instance, allow_fewer_rows=True).success
    assert _rows(root) == []


def test_a_record_with_an_unreadable_time_lands_in_rejects_with_its_day(
    own_sim: Simulator, root: Path, instance: dg.DagsterInstance
) -> None:
    def spoil(params: dict[str, object], body: bytes) -> bytes:
        page = orjson.loads(body)
        for record in page["records"]:
            if (
                record["market"] == "ETH_PERP" and record["fundingTime"] == "1789171200"
            ):  # 09-12 00:00
                record["fundingTime"] = "yesterday"
        return orjson.dumps(page)

    own_sim.faults.tamper(FUNDING_PATH, spoil)
    result = _run(own_sim, root, instance)
    # The partitions are written, and the blocking check stops the run, saying why.
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert "blocking asset check failed" in str(failure.step_failure_data)
    evaluations = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert evaluations == {
        "unique_keys": True, "no_rejects": False, "reconciles": True, "schema_drift": True
    }  # fmt: skip
    with catalog.connect(Warehouse.open(root)) as con:
        rejects = con.execute('SELECT "table", "partition", reason FROM _rejects').fetchall()
    assert rejects == [
        ("funding_history", "2026-09-12", "fundingTime: not a Unix timestamp (ASCII digits only)")
    ]


def test_a_held_payment_answered_malformed_is_refused_naming_the_reject(
    own_sim: Simulator, root: Path, instance: dg.DagsterInstance
) -> None:
    assert _run(own_sim, root, instance).success
    before = _rows(root)

    def spoil(params: dict[str, object], body: bytes) -> bytes:
        page = orjson.loads(body)
        for record in page["records"]:
            if record["market"] == "ETH_PERP" and record["fundingTime"] == "1789171200":
                record["fundingRate"] = "1e-5"
        return orjson.dumps(page)

    own_sim.faults.tamper(FUNDING_PATH, spoil)
    failed = _run(own_sim, root, instance)
    assert not failed.success
    message = str(next(e for e in failed.all_events if e.is_step_failure).step_failure_data)
    assert "funding_history of default, 2026-09-12: the exchange did not list 1 record(s)" in (
        message
    )
    assert "1 record(s) of that day were rejected (first: fundingRate: not a decimal" in message
    assert _rows(root) == before


def test_a_payment_left_out_of_every_answer_of_a_page_fails_the_run_naming_it(
    own_sim: Simulator, root: Path, tmp_path: Path, instance: dg.DagsterInstance
) -> None:
    """Fresh: every other payment is written, then the run fails naming the history and the
    day. Held: the month is left as it was, and the message says one answer left it out."""
    assert _run(own_sim, root, instance).success
    whole = _rows(root)

    def second_page(params: dict[str, object]) -> bool:  # the days of DAYS, newest first
        return params["offset"] == 99 and params["limit"] == 100

    own_sim.faults.tamper(FUNDING_PATH, left_out(40, when=second_page, answers=None))
    fresh = tmp_path / "fresh"
    failed = _run(own_sim, fresh, instance)
    assert not failed.success
    message = str(next(e for e in failed.all_events if e.is_step_failure).step_failure_data)
    assert "funding_history slice all: the answer at offset 99 held 99 of 100 records" in message
    found = _rows(fresh)
    assert set(found) < set(whole)
    (gone,) = set(whole) - set(found)
    (day,) = (value for value in gone if type(value) is date)  # its funding_date
    days = re.search(r"of (\S+?)(?:\.\.(\S+))? \(UTC\)", message)
    assert days is not None
    assert days.group(1) <= day.isoformat() <= (days.group(2) or days.group(1))

    held = _run(own_sim, root, instance)
    assert not held.success
    message = str(next(e for e in held.all_events if e.is_step_failure).step_failure_data)
    assert "the exchange did not list 1 record(s) the warehouse holds" in message
    assert "missing from one answer, not forgotten by the exchange" in message
    assert "allow_fewer_rows" not in message
    assert _rows(root) == whole
