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

from assets import SNAPSHOTS, checks
from assets.cli import main
from assets.loading import Written
from pipeline.simulator import Scale, SimClock, Simulator
from tests.support.dagster_runs import resources_for
from tests.support.simulated import FROZEN_AT
from warehouse import catalog, normalize, parquet
from warehouse.monthly import DayWrite
from warehouse.schemas import DEFAULT_ACCOUNT as ACCOUNT

DAY = date(2026, 9, 1)
FUNDING = dg.AssetKey("funding_history")
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


def _write(root: Path | str, records: list[dict[str, str]], day: date = DAY) -> Written:
    batch = normalize.normalize_funding_history(
        records, extracted_at=EXTRACTED, partition_for_rejects=day
    )
    parquet.write_batch(root, batch, account=ACCOUNT, replace=[day])
    written = Written("funding_history", ACCOUNT)
    written.took(batch.received, batch.duplicates)
    written.wrote(DayWrite.of(day, batch.rows, batch.rejects))
    return written


def test_unique_keys_fails_on_a_file_holding_a_key_twice(root: Path) -> None:
    _write(root, [_record("BTC_PERP"), _record("ETH_PERP")])
    assert checks.unique_keys(root, "funding_history", ACCOUNT, [DAY], key=FUNDING).passed
    # Break it behind the writer's back, as a faulty tool or a hand edit would.
    path = parquet.partition_path(root, "funding_history", (ACCOUNT, DAY)).path
    table = pq.read_table(path)
    pq.write_table(pa.concat_tables([table, table.slice(0, 1)]), path)
    result = checks.unique_keys(root, "funding_history", ACCOUNT, [DAY], key=FUNDING)
    assert not result.passed
    assert "BTC_PERP" in str(result.metadata["duplicated_keys"].value)
    assert "BTC_PERP" in (result.description or "")


def test_no_rejects_fails_when_a_record_was_rejected(root: Path) -> None:
    _write(root, [_record("BTC_PERP")])
    assert checks.no_rejects(root, "funding_history", ACCOUNT, [DAY], key=FUNDING).passed
    _write(root, [_record("BTC_PERP"), _record("ETH_PERP", amount="1e-5")])
    result = checks.no_rejects(root, "funding_history", ACCOUNT, [DAY], key=FUNDING)
    assert not result.passed
    assert result.metadata["rejected"].value == 1
    assert "not a decimal number" in str(result.metadata["first_reasons"].value)


def test_no_rejects_says_how_many_where_why_and_the_command_that_lists_them(root: Path) -> None:
    later = DAY + timedelta(days=2)
    time = int(datetime.combine(later, datetime.min.time(), UTC).timestamp()) + 60
    _write(root, [_record("BTC_PERP"), _record("ETH_PERP", "NaN"), _record("SOL_PERP", "1,5")])
    _write(root, [_record("BTC_PERP", "x", time=time), _record("ETH_PERP", time=time)], later)
    catalog.refresh(root)
    result = checks.no_rejects(
        root, "funding_history", ACCOUNT, [DAY, DAY + timedelta(days=1), later], key=FUNDING
    )
    assert not result.passed
    assert result.metadata["rejected"].value == 3
    assert result.metadata["partitions"].value == {"2026-09-01": 2, "2026-09-03": 1}
    lines = (result.description or "").splitlines()
    assert lines[0] == "3 record(s) of funding_history rejected, in 2 partition(s): " + (
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
    assert checks.reconciles(root, written, fetched=2, key=FUNDING).passed
    missing = checks.reconciles(root, written, fetched=3, key=FUNDING)  # a record went missing
    assert not missing.passed
    assert (missing.description or "").startswith("fetched 3, the warehouse received 2")
    # The file lost a row after the write.
    path = parquet.partition_path(root, "funding_history", (ACCOUNT, DAY)).path
    pq.write_table(pq.read_table(path).slice(0, 1), path)
    assert not checks.reconciles(root, written, fetched=2, key=FUNDING).passed


def test_freshness_fails_on_a_missing_or_too_early_partition(root: Path) -> None:
    day = EXTRACTED.date() - timedelta(days=1)
    assert not checks.fresh(
        root, "funding_history", ACCOUNT, day, complete_day=True, key=FUNDING
    ).passed
    time = int(datetime.combine(day, datetime.min.time(), UTC).timestamp()) + 3600
    batch = normalize.normalize_funding_history(
        [_record("BTC_PERP", time=time)],
        extracted_at=datetime.combine(day, datetime.min.time(), UTC) + timedelta(hours=5),
        partition_for_rejects=day,
    )
    parquet.write_batch(root, batch, account=ACCOUNT)
    early = checks.fresh(root, "funding_history", ACCOUNT, day, complete_day=True, key=FUNDING)
    assert not early.passed
    assert "before the day ended" in (early.description or "")
    assert checks.fresh(
        root, "funding_history", ACCOUNT, day, complete_day=False, key=FUNDING
    ).passed


@pytest.mark.slow
def test_complete_fails_when_a_slice_is_out_of_reach(
    root: Path, instance: dg.DagsterInstance
) -> None:
    scale = Scale.parse("investments=25000,tickers=1,markets=2,days=2")
    with Simulator(seed=7, scale=scale, clock=SimClock(FROZEN_AT)) as sim:
        sim.limits.enabled = False
        result = dg.materialize(
            [a for a in SNAPSHOTS if "investments" in {k.to_user_string() for k in a.keys}],
            resources=resources_for(sim, root),
            instance=instance,
            raise_on_error=False,
        )
    evaluations = {
        (e.asset_key.to_user_string(), e.check_name): e
        for e in result.get_asset_check_evaluations()
    }
    complete = evaluations[("investments", "complete")]
    assert not complete.passed
    assert "status=1" in (complete.description or "")
    assert "10100" in (complete.description or "").replace(",", "")


def _key_twice(root: Path | str, day: date) -> None:
    """A key held twice in the day's file, written behind the writer's back (a faulty tool)."""
    path = parquet.partition_path(root, "funding_history", (ACCOUNT, day))
    with path.open("rb") as source:
        table = pq.read_table(source)
    sink = pa.BufferOutputStream()
    pq.write_table(pa.concat_tables([table, table.slice(0, 1)]), sink)
    path.write_bytes(sink.getvalue().to_pybytes())


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
        s3_requests.clear()
        results[where] = [
            checks.unique_keys(where, "funding_history", ACCOUNT, days, key=FUNDING),
            checks.no_rejects(where, "funding_history", ACCOUNT, days, key=FUNDING),
            checks.reconciles(where, written, fetched=2, key=FUNDING),
        ]
        requests[where] = dict(s3_requests)
        s3_requests.clear()
        results[where] += checks.for_written(where, written, 2, {}, key=FUNDING)
    local, remote = ([(r.passed, r.description, r.metadata) for r in results[w]] for w in results)
    assert remote == local
    assert [passed for passed, _, _ in local] == [False] * 6 + [True]
    # unique_keys: the two month files; no_rejects: the two days' rejects; reconciles: both.
    assert requests[s3_root] == {"list_objects_v2": 3, "get_object": 2 + 2 + 2}
    # All of them at once: the two month files and the two rejects, fetched once.
    assert s3_requests == {"list_objects_v2": 2, "get_object": 2 + 2}
