"""Each check fails on data made to break it, and passes on the same data made right."""

from __future__ import annotations

import json
import shlex
from collections import Counter
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from assets import checks
from assets.accounts import DEFAULT_ACCOUNT as ACCOUNT
from assets.cli import main
from assets.loading import Written
from pipeline import spec
from pipeline.simulator import Scale, SimClock, Simulator
from tests.support.dagster_runs import resources_for, snapshots
from tests.support.simulated import FROZEN_AT
from warehouse import Warehouse, catalog, layout, normalize, partitions
from warehouse.monthly import DayWrite
from warehouse.store import Store

DAY = date(2026, 9, 1)
FUNDING = dg.AssetKey([ACCOUNT, "funding_history"])
EXTRACTED = datetime(2026, 9, 3, tzinfo=UTC)


def _record(market: str, amount: str = "1.5", time: int = 1_788_220_800) -> dict[str, str]:
    return {
        "market": market,
        "fundingTime": str(time),
        "fundingRate": "0.0001",
        "fundingAmount": amount,
        "positionAmount": "2",
        "settlementPrice": "100",
        "rateCalculatedTime": str(time - 300),
    }


def _store(root: Path | str) -> Store:
    return Warehouse.open(root).store


def _path(root: Path, day: date = DAY) -> Path:
    """The file of the day's month partition, on local disk."""
    return root / layout.partition_file("funding_history", (ACCOUNT, day))


def _write(root: Path | str, records: list[dict[str, str]], day: date = DAY) -> Written:
    batch = normalize.normalize(spec.FUNDING, records, extracted_at=EXTRACTED, day=day)
    partitions.write_batch(Warehouse.open(root), batch, account=ACCOUNT, replace=[day])
    written = Written("funding_history", ACCOUNT)
    written.took(batch.received, batch.duplicates)
    written.wrote(DayWrite.of(day, batch.rows, batch.rejects))
    return written


def test_unique_keys_fails_on_a_file_holding_a_key_twice(root: Path) -> None:
    _write(root, [_record("BTC_PERP"), _record("ETH_PERP")])
    store = _store(root)
    assert checks.unique_keys(store, "funding_history", ACCOUNT, [DAY], key=FUNDING).passed
    # Break it behind the writer's back, as a faulty tool or a hand edit would.
    path = _path(root)
    table = pq.read_table(path)
    pq.write_table(pa.concat_tables([table, table.slice(0, 1)]), path)
    result = checks.unique_keys(store, "funding_history", ACCOUNT, [DAY], key=FUNDING)
    assert not result.passed
    assert "BTC_PERP" in str(result.metadata["duplicated_keys"].value)
    assert "BTC_PERP" in (result.description or "")


def test_no_rejects_fails_when_a_record_was_rejected(root: Path) -> None:
    _write(root, [_record("BTC_PERP")])
    store = _store(root)
    assert checks.no_rejects(store, "funding_history", ACCOUNT, [DAY], key=FUNDING).passed
    _write(root, [_record("BTC_PERP"), _record("ETH_PERP", amount="1e-5")])
    result = checks.no_rejects(store, "funding_history", ACCOUNT, [DAY], key=FUNDING)
    assert not result.passed
    assert result.metadata["rejected"].value == 1
    assert "not a decimal number" in str(result.metadata["first_reasons"].value)


def test_no_rejects_says_how_many_where_why_and_the_command_that_lists_them(root: Path) -> None:
    later = DAY + timedelta(days=2)
    time = int(datetime.combine(later, datetime.min.time(), UTC).timestamp()) + 60
    _write(root, [_record("BTC_PERP"), _record("ETH_PERP", "NaN"), _record("SOL_PERP", "1,5")])
    _write(root, [_record("BTC_PERP", "x", time=time), _record("ETH_PERP", time=time)], later)
    catalog.refresh(Warehouse.open(root))
    result = checks.no_rejects(
        _store(root), "funding_history", ACCOUNT, [DAY, DAY + timedelta(days=1), later], key=FUNDING
    )
    assert not result.passed
    assert result.metadata["rejected"].value == 3
    assert result.metadata["partitions"].value == {"2026-09-01": 2, "2026-09-03": 1}
    lines = (result.description or "").splitlines()
    assert lines[0] == "3 record(s) of default/funding_history rejected, in 2 partition(s): " + (
        "2026-09-01 (2), 2026-09-03 (1)"
    )
    assert lines[1:4] == [
        "first reasons:",
        "  2026-09-01 record 1: fundingAmount: not a decimal number",
        "  2026-09-01 record 2: fundingAmount: not a decimal number",
    ]
    command = result.metadata["list_them"].value
    assert lines[-1] == f"list them: {command}"
    # The line runs as printed, through a shell's quoting, and lists exactly those records.
    program, *args = shlex.split(str(command))
    assert program == "whitebit-etl"
    listed = CliRunner().invoke(main, [*args, "--json"], env={"WAREHOUSE_ROOT": str(root)})
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.output)
    assert [(r["partition"], r["record_index"]) for r in rows] == [
        ("2026-09-01", 1), ("2026-09-01", 2), ("2026-09-03", 0)
    ]  # fmt: skip
    assert '"fundingAmount":"1,5"' in rows[1]["raw_json"].replace(" ", "")


def test_schema_drift_warns_naming_each_unknown_field_with_its_example() -> None:
    assert checks.schema_drift(dg.AssetKey("main_balances"), {}).passed
    result = checks.schema_drift(
        dg.AssetKey("main_balances"), {"BTC.newField": '"x"', "ETH.otherField": "12"}
    )
    assert not result.passed
    assert result.severity == dg.AssetCheckSeverity.WARN
    assert (result.description or "").endswith('BTC.newField (e.g. "x"); ETH.otherField (e.g. 12)')
    assert result.metadata["unknown_fields"].value == {
        "BTC.newField": '"x"', "ETH.otherField": "12"
    }  # fmt: skip


def test_reconciles_fails_when_counts_or_files_disagree(root: Path) -> None:
    written = _write(root, [_record("BTC_PERP"), _record("ETH_PERP")])
    store = _store(root)
    assert checks.reconciles(store, written, fetched=2, key=FUNDING).passed
    missing = checks.reconciles(store, written, fetched=3, key=FUNDING)  # a record went missing
    assert not missing.passed
    assert (missing.description or "").startswith("fetched 3, the warehouse received 2")
    # The file lost a row after the write.
    path = _path(root)
    pq.write_table(pq.read_table(path).slice(0, 1), path)
    assert not checks.reconciles(store, written, fetched=2, key=FUNDING).passed


def test_a_range_longer_than_a_query_is_checked_whole(root: Path) -> None:
    """A month's file counts as its month's days: a range of more months than one query reads
    is read in several, and a key held twice in the last is found, every row counted."""
    months = checks.DAYS_PER_QUERY // 31 + 2
    days = [date(DAY.year - 1, DAY.month, 1) + timedelta(days=31 * i) for i in range(months)]
    days = [day.replace(day=1) for day in days]
    for day in days:
        at = int(datetime.combine(day, datetime.min.time(), UTC).timestamp()) + 60
        _write(root, [_record("BTC_PERP", time=at)], day)
    store = _store(root)
    assert len(checks._batches("funding_history", [str(day) for day in days])) == 2
    assert checks.stored_rows(store, "funding_history", ACCOUNT, days) == months
    assert checks.unique_keys(store, "funding_history", ACCOUNT, days, key=FUNDING).passed
    _key_twice(root, days[-1])
    result = checks.unique_keys(store, "funding_history", ACCOUNT, days, key=FUNDING)
    assert not result.passed
    assert str(days[-1]) in str(result.metadata["duplicated_keys"].value)
    assert checks.stored_rows(store, "funding_history", ACCOUNT, days) == months + 1


def test_freshness_fails_on_a_missing_or_too_early_partition(root: Path) -> None:
    day = EXTRACTED.date() - timedelta(days=1)
    store = _store(root)
    assert not checks.fresh(
        store, "funding_history", ACCOUNT, day, complete_day=True, key=FUNDING
    ).passed
    time = int(datetime.combine(day, datetime.min.time(), UTC).timestamp()) + 3600
    batch = normalize.normalize(
        spec.FUNDING,
        [_record("BTC_PERP", time=time)],
        extracted_at=datetime.combine(day, datetime.min.time(), UTC) + timedelta(hours=5),
        day=day,
    )
    partitions.write_batch(Warehouse.open(root), batch, account=ACCOUNT)
    early = checks.fresh(store, "funding_history", ACCOUNT, day, complete_day=True, key=FUNDING)
    assert not early.passed
    assert "before the day ended" in (early.description or "")
    assert checks.fresh(
        store, "funding_history", ACCOUNT, day, complete_day=False, key=FUNDING
    ).passed


@pytest.mark.slow
def test_complete_fails_when_a_slice_is_out_of_reach(
    root: Path, instance: dg.DagsterInstance
) -> None:
    scale = Scale.parse("investments=25000,tickers=1,markets=2,days=2")
    with Simulator(seed=7, scale=scale, clock=SimClock(FROZEN_AT)) as sim:
        sim.limits.enabled = False
        result = dg.materialize(
            [a for a in snapshots() if dg.AssetKey([ACCOUNT, "investments"]) in a.keys],
            resources=resources_for(sim, root),
            instance=instance,
            raise_on_error=False,
        )
    evaluations = {
        (e.asset_key.to_user_string(), e.check_name): e
        for e in result.get_asset_check_evaluations()
    }
    complete = evaluations[(f"{ACCOUNT}/investments", "complete")]
    assert not complete.passed
    assert "status=1" in (complete.description or "")
    assert "10100" in (complete.description or "").replace(",", "")


def _key_twice(root: Path | str, day: date) -> None:
    """A key held twice in the day's file, written behind the writer's back (a faulty tool)."""
    store = _store(root)
    path = layout.partition_file("funding_history", (ACCOUNT, day))
    held = store.read_bytes(path)
    assert held is not None
    table = pq.read_table(pa.BufferReader(held))
    sink = pa.BufferOutputStream()
    pq.write_table(pa.concat_tables([table, table.slice(0, 1)]), sink)
    store.write_bytes(path, sink.getvalue().to_pybytes())


def test_on_s3_the_checks_say_what_they_say_on_local_disk_from_one_get_per_file(
    root: Path, s3_root: str, s3_requests: Counter[str]
) -> None:
    """Two months, rejects in both, a key held twice: the same results from a store, which
    each check reads with one listing and one GET per file, and no HEAD; a run's checks
    together fetch each file once."""
    earlier = DAY - timedelta(days=3)
    at_earlier = int(datetime.combine(earlier, datetime.min.time(), UTC).timestamp()) + 60
    days = [earlier, DAY]
    results, requests = {}, {}
    for where in (root, s3_root):
        _write(
            where, [_record("BTC_PERP", time=at_earlier), _record("X", "NaN", at_earlier)], earlier
        )
        written = _write(where, [_record("BTC_PERP"), _record("ETH_PERP", "1,5")])
        written.days[earlier] = 1  # the run wrote both days
        _key_twice(where, DAY)
        wh = Warehouse.open(where)
        s3_requests.clear()
        results[where] = [
            checks.unique_keys(wh.store, "funding_history", ACCOUNT, days, key=FUNDING),
            checks.no_rejects(wh.store, "funding_history", ACCOUNT, days, key=FUNDING),
            checks.reconciles(wh.store, written, fetched=2, key=FUNDING),
        ]
        requests[where] = dict(s3_requests)
        s3_requests.clear()
        results[where] += checks.for_written(wh, written, 2, {}, key=FUNDING)
    local, remote = ([(r.passed, r.description, r.metadata) for r in results[w]] for w in results)
    assert remote == local
    assert [passed for passed, _, _ in local] == [False] * 6 + [True]
    # unique_keys: the two month files; no_rejects: the two days' rejects; reconciles: both.
    assert requests[s3_root] == {"list_objects_v2": 3, "get_object": 2 + 2 + 2}
    # All of them at once: the two month files and the two rejects, fetched once.
    assert s3_requests == {"list_objects_v2": 2, "get_object": 2 + 2}
