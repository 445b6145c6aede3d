"""Parquet partitions: layout, atomic replace under SIGKILL, reruns, rejects, path safety."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support.records import DAY, DAY_START, EXTRACTED_AT, funding_record
from tests.warehouse.children import large_funding_table
from warehouse import normalize, parquet, schemas
from warehouse.parquet import InvalidPartitionValue, SchemaMismatch
from warehouse.schemas import DEFAULT_ACCOUNT
from warehouse.settings import location

REPO = Path(__file__).resolve().parents[2]


def funding_batch(records: list[object], day: date = DAY) -> normalize.Batch:
    return normalize.normalize_funding_history(
        records, extracted_at=EXTRACTED_AT, partition_for_rejects=day
    )


def read(path: Path | str) -> pa.Table:
    return pq.read_table(str(path))


def test_layout_is_hive_one_zstd_file_per_partition(root: Path) -> None:
    next_day = funding_record(fundingTime=str(DAY_START + 86400 + 1))
    writes = parquet.write_batch(
        root, funding_batch([funding_record(), next_day]), account=DEFAULT_ACCOUNT
    )
    assert [w.partition for w in writes] == [(DEFAULT_ACCOUNT, "2024-03")]
    files = sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and ".locks" not in p.parts
    )
    assert files == ["parquet/funding_history/account=default/funding_month=2024-03/data.parquet"]
    metadata = pq.ParquetFile(writes[0].path).metadata
    assert metadata.row_group(0).column(0).compression == "ZSTD"
    # The month lives in the path only; the day stays in the file.
    assert read(writes[0].path).schema == schemas.FUNDING_HISTORY.file_schema
    assert "funding_date" in schemas.FUNDING_HISTORY.file_schema.names
    # A snapshot's day lives in the path only.
    assert "snapshot_date" not in schemas.MAIN_BALANCES.file_schema.names


def test_rerun_with_the_same_input_gives_the_same_rows_and_no_duplicates(root: Path) -> None:
    records = [funding_record(market=f"M{i}_PERP") for i in range(50)]
    first = parquet.write_batch(root, funding_batch(records), account=DEFAULT_ACCOUNT)
    before = read(first[0].path)
    second = parquet.write_batch(
        root, funding_batch(list(reversed(records))), account=DEFAULT_ACCOUNT
    )
    after = read(second[0].path)
    assert after.num_rows == 50
    assert after.equals(before)
    assert after["market"].to_pylist() == sorted(f"M{i}_PERP" for i in range(50))


def test_rejects_are_written_with_their_partition_and_cleared_by_a_clean_rerun(root: Path) -> None:
    bad = funding_record(fundingRate="1e-5")
    parquet.write_batch(root, funding_batch([funding_record(), bad]), account=DEFAULT_ACCOUNT)
    rejects_file = parquet.partition_path(
        root, "_rejects", (DEFAULT_ACCOUNT, "funding_history", "2024-03-01")
    )
    rejects = read(rejects_file)
    assert rejects["reason"].to_pylist() == ["fundingRate: not a decimal number"]
    assert rejects["raw_json"].to_pylist()[0].startswith('{"market":"BTC_PERP"')

    parquet.write_batch(root, funding_batch([funding_record(), bad]), account=DEFAULT_ACCOUNT)
    assert read(rejects_file).num_rows == 1  # rerun: replaced, not appended

    parquet.write_batch(root, funding_batch([funding_record()]), account=DEFAULT_ACCOUNT)
    assert not rejects_file.exists()
    rejects = root / "parquet" / "_rejects" / "account=default"
    assert not (rejects / "table=funding_history").exists()


def test_unreadable_time_is_rejected_into_the_partition_the_caller_named(root: Path) -> None:
    parquet.write_batch(
        root,
        funding_batch([funding_record(fundingTime="soon")], day=date(2024, 2, 9)),
        account=DEFAULT_ACCOUNT,
    )
    rejects_file = parquet.partition_path(
        root, "_rejects", (DEFAULT_ACCOUNT, "funding_history", "2024-02-09")
    )
    assert read(rejects_file)["reason"].to_pylist() == [
        "fundingTime: not a Unix timestamp (ASCII digits only)"
    ]
    # The named day is covered: its (empty) data partition exists, so it reads as zero rows.
    assert (
        read(
            parquet.partition_path(root, "funding_history", (DEFAULT_ACCOUNT, date(2024, 2, 9)))
        ).num_rows
        == 0
    )


def test_replace_window_empties_days_that_lost_their_records(root: Path) -> None:
    parquet.write_batch(root, funding_batch([funding_record()]), account=DEFAULT_ACCOUNT)
    parquet.write_batch(
        root, funding_batch([], day=date(2024, 2, 1)), replace=[DAY], account=DEFAULT_ACCOUNT
    )
    assert (
        read(parquet.partition_path(root, "funding_history", (DEFAULT_ACCOUNT, DAY))).num_rows == 0
    )


@pytest.mark.parametrize(
    "value", ["../x", "..", "a/b", ".hidden", "x=1", "", "a b", "a\\b", "ü", "a" * 200]
)
def test_unsafe_path_segments_are_refused(root: Path, value: str) -> None:
    with pytest.raises(InvalidPartitionValue):
        parquet.partition_path(root, "_rejects", (DEFAULT_ACCOUNT, "funding_history", value))


def test_partition_values_must_be_dates_of_a_known_table(root: Path) -> None:
    with pytest.raises(InvalidPartitionValue, match="expected a date"):
        parquet.partition_path(root, "main_balances", (DEFAULT_ACCOUNT, "2024-03-01"))
    for value in ("2024-03-01", "2024-13", "../x"):
        with pytest.raises(InvalidPartitionValue, match="expected a month like 2025-03 or a day"):
            parquet.partition_path(root, "funding_history", (DEFAULT_ACCOUNT, value))
    assert parquet.partition_path(
        root, "funding_history", (DEFAULT_ACCOUNT, DAY)
    ) == parquet.partition_path(root, "funding_history", (DEFAULT_ACCOUNT, "2024-03"))
    with pytest.raises(InvalidPartitionValue, match="not a data table"):
        parquet.partition_path(root, "_rejects", (DEFAULT_ACCOUNT, "secrets", "2024-03-01"))
    with pytest.raises(ValueError, match="unknown table"):
        parquet.partition_path(root, "nope", (DEFAULT_ACCOUNT, DAY))


def test_rows_that_do_not_match_the_schema_are_refused(root: Path) -> None:
    rows = funding_batch([funding_record()]).rows
    as_float = rows.set_column(
        rows.schema.get_field_index("funding_amount"),
        "funding_amount",
        rows["funding_amount"].cast(pa.float64()),
    )
    with pytest.raises(SchemaMismatch, match="funding_amount: expected decimal128"):
        parquet.replace_partition(root, "funding_history", (DEFAULT_ACCOUNT, DAY), as_float)
    with pytest.raises(SchemaMismatch, match="rows of 2024-03-01 given to a write of 2024-02"):
        parquet.replace_partition(
            root, "funding_history", (DEFAULT_ACCOUNT, date(2024, 2, 1)), rows
        )
    with pytest.raises(SchemaMismatch, match=r"that covers 2024-03-02 \.\. 2024-03-02"):
        parquet.replace_partition(
            root, "funding_history", (DEFAULT_ACCOUNT, DAY), rows, covers=[date(2024, 3, 2)]
        )
    doubled = pa.concat_tables([rows, rows])
    with pytest.raises(SchemaMismatch, match="share a key"):
        parquet.replace_partition(root, "funding_history", (DEFAULT_ACCOUNT, DAY), doubled)
    assert not root.exists() or not any(root.rglob("*.parquet"))


def test_a_write_killed_midway_leaves_the_old_partition_whole(root: Path) -> None:
    old = large_funding_table(DAY, 1000, seed=7)
    target = Path(
        parquet.replace_partition(root, "funding_history", (DEFAULT_ACCOUNT, DAY), old).path
    )
    old_bytes = target.read_bytes()

    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.warehouse.children",
            "write-large",
            str(root),
            DAY.isoformat(),
            "1500000",
        ],
        cwd=REPO,
    )
    deadline = time.monotonic() + 60
    temps: list[Path] = []
    while not temps and child.poll() is None and time.monotonic() < deadline:
        temps = list(target.parent.glob(".data.parquet.*.tmp"))
        time.sleep(0.001)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert child.returncode == -signal.SIGKILL
    assert temps, "the child finished before its temp file was seen"
    assert all(t.exists() for t in temps), "killed after the rename, not mid-write"

    assert target.read_bytes() == old_bytes
    assert read(target).equals(
        old.sort_by(
            [("market", "ascending"), ("funding_time", "ascending"), ("position_side", "ascending")]
        )
    )
    assert parquet.partition_files(root, "funding_history") == [target]

    # The next write of that partition clears what the killed writer left.
    parquet.replace_partition(root, "funding_history", (DEFAULT_ACCOUNT, DAY), old)
    assert list(target.parent.iterdir()) == [target]


def test_writers_of_one_partition_take_turns(root: Path) -> None:
    """A rerun during the schedule: both replace the partition; it ends whole, never broken."""
    from concurrent.futures import ThreadPoolExecutor

    batches = [
        funding_batch([funding_record(market=f"M{i}_PERP") for i in range(n)]) for n in (40, 60)
    ]

    def write(n: int) -> None:
        for _ in range(15):
            parquet.write_batch(root, batches[n % 2], account=DEFAULT_ACCOUNT)

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(write, range(4)))  # raises if any rename failed
    (path,) = parquet.partition_files(root, "funding_history")
    assert read(str(path)).num_rows in (40, 60)
    assert [p.name for p in path.parent.iterdir()] == ["data.parquet"]


def test_a_month_write_replaces_the_days_it_covers_and_keeps_the_others(root: Path) -> None:
    days = [funding_record(fundingTime=str(DAY_START + n * 86400 + 60)) for n in range(3)]
    bad = funding_record(fundingTime=str(DAY_START + 86400 + 120), fundingRate="1e-5")
    parquet.write_batch(root, funding_batch([*days, bad]), account=DEFAULT_ACCOUNT)
    second = date(2024, 3, 2)
    rejects_file = parquet.partition_path(
        root, "_rejects", (DEFAULT_ACCOUNT, "funding_history", "2024-03-02")
    )
    assert rejects_file.exists()

    again = funding_batch([funding_record(market="ETH_PERP", fundingTime=days[1]["fundingTime"])])
    write = parquet.replace_partition(
        root,
        "funding_history",
        (DEFAULT_ACCOUNT, "2024-03"),
        again.rows,
        rejects=again.rejects,
        covers=[second],
    )
    held = read(write.path)
    pairs = zip(held["funding_date"].to_pylist(), held["market"].to_pylist(), strict=True)
    assert sorted(pairs) == [
        (DAY, "BTC_PERP"), (second, "ETH_PERP"), (date(2024, 3, 3), "BTC_PERP")
    ]  # fmt: skip
    assert not rejects_file.exists()  # the covered day's rejects went with its rows


@pytest.mark.parametrize("root", ["s3://bucket/prefix", "/srv/warehouse", "relative/warehouse"])
def test_partition_locations_are_the_locations_of_partition_paths(root: str) -> None:
    partitions: dict[str, list[parquet.Partition]] = {
        "funding_history": [("main", date(2025, 3, 14)), ("sub_1", "2025-04")],
        "main_balances": [("main", date(2025, 3, 14))],
        "_rejects": [("main", "funding_history", "2025-03-14")],
    }
    for table, wanted in partitions.items():
        assert parquet.partition_locations(root, table, wanted) == [
            location(parquet.partition_path(root, table, p)) for p in wanted
        ]
