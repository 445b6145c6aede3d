"""Parquet partitions: layout, atomic replace under SIGKILL, reruns, rejects, path safety."""

from __future__ import annotations

import errno
import os
import resource
import signal
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline import spec
from tests.support.records import ACCOUNT, DAY, DAY_START, EXTRACTED_AT, funding_record
from tests.warehouse.children import large_funding_table
from warehouse import Warehouse, layout, normalize, partitions, schemas
from warehouse.layout import InvalidPartitionValue
from warehouse.partitions import SchemaMismatch
from warehouse.store import StoreError

REPO = Path(__file__).resolve().parents[2]


def funding_batch(records: list[object], day: date = DAY) -> normalize.Batch:
    return normalize.normalize(spec.FUNDING, records, extracted_at=EXTRACTED_AT, day=day)


FUNDING = schemas.TABLES["funding_history"]


def read(path: Path | str) -> pa.Table:
    return pq.read_table(str(path))


def partition_path(root: Path, table: str, partition: layout.Partition) -> Path:
    """Where a partition's file is on local disk."""
    return root / layout.partition_file(table, partition)


def test_layout_is_hive_one_zstd_file_per_partition(root: Path, wh: Warehouse) -> None:
    next_day = funding_record(fundingTime=str(DAY_START + 86400 + 1))
    writes = partitions.write_batch(
        wh, funding_batch([funding_record(), next_day]), account=ACCOUNT
    )
    assert [w.partition for w in writes] == [(ACCOUNT, "2024-03")]
    files = sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and ".locks" not in p.parts
    )
    assert files == ["parquet/funding_history/account=default/funding_month=2024-03/data.parquet"]
    assert writes[0].path == str(root / files[0])
    metadata = pq.ParquetFile(writes[0].path).metadata
    assert metadata.row_group(0).column(0).compression == "ZSTD"
    # The month lives in the path only; the day stays in the file.
    assert read(writes[0].path).schema == FUNDING.file_schema
    assert "funding_date" in FUNDING.file_schema.names
    # A snapshot's day lives in the path only.
    assert "snapshot_date" not in schemas.TABLES["main_balances"].file_schema.names


def test_rerun_with_the_same_input_gives_the_same_rows_and_no_duplicates(wh: Warehouse) -> None:
    records = [funding_record(market=f"M{i}_PERP") for i in range(50)]
    first = partitions.write_batch(wh, funding_batch(records), account=ACCOUNT)
    before = read(first[0].path)
    second = partitions.write_batch(wh, funding_batch(list(reversed(records))), account=ACCOUNT)
    after = read(second[0].path)
    assert after.num_rows == 50
    assert after.equals(before)
    assert after["market"].to_pylist() == sorted(f"M{i}_PERP" for i in range(50))


def test_rejects_are_written_with_their_partition_and_cleared_by_a_clean_rerun(
    root: Path, wh: Warehouse
) -> None:
    bad = funding_record(fundingRate="1e-5")
    partitions.write_batch(wh, funding_batch([funding_record(), bad]), account=ACCOUNT)
    rejects_file = partition_path(root, "_rejects", (ACCOUNT, "funding_history", "2024-03-01"))
    rejects = read(rejects_file)
    assert rejects["reason"].to_pylist() == ["fundingRate: not a decimal number"]
    assert rejects["raw_json"].to_pylist()[0].startswith('{"market":"BTC_PERP"')

    partitions.write_batch(wh, funding_batch([funding_record(), bad]), account=ACCOUNT)
    assert read(rejects_file).num_rows == 1  # rerun: replaced, not appended

    partitions.write_batch(wh, funding_batch([funding_record()]), account=ACCOUNT)
    assert not rejects_file.exists()
    rejects_dir = root / "parquet" / "_rejects" / "account=default"
    assert not (rejects_dir / "table=funding_history").exists()


def test_unreadable_time_is_rejected_into_the_partition_the_caller_named(
    root: Path, wh: Warehouse
) -> None:
    partitions.write_batch(
        wh,
        funding_batch([funding_record(fundingTime="soon")], day=date(2024, 2, 9)),
        account=ACCOUNT,
    )
    rejects_file = partition_path(root, "_rejects", (ACCOUNT, "funding_history", "2024-02-09"))
    assert read(rejects_file)["reason"].to_pylist() == [
        "fundingTime: not a Unix timestamp (ASCII digits only)"
    ]
    # The named day is covered: its (empty) data partition exists, so it reads as zero rows.
    day_file = partition_path(root, "funding_history", (ACCOUNT, date(2024, 2, 9)))
    assert read(day_file).num_rows == 0


def test_replace_window_empties_days_that_lost_their_records(root: Path, wh: Warehouse) -> None:
    partitions.write_batch(wh, funding_batch([funding_record()]), account=ACCOUNT)
    partitions.write_batch(
        wh, funding_batch([], day=date(2024, 2, 1)), replace=[DAY], account=ACCOUNT
    )
    assert read(partition_path(root, "funding_history", (ACCOUNT, DAY))).num_rows == 0


@pytest.mark.parametrize(
    "value", ["../x", "..", "a/b", ".hidden", "x=1", "", "a b", "a\\b", "ü", "a" * 200]
)
def test_unsafe_path_segments_are_refused(value: str) -> None:
    with pytest.raises(InvalidPartitionValue):
        layout.partition_file("_rejects", (ACCOUNT, "funding_history", value))


def test_partition_values_must_be_dates_of_a_known_table() -> None:
    with pytest.raises(InvalidPartitionValue, match="expected a date"):
        layout.partition_file("main_balances", (ACCOUNT, "2024-03-01"))
    for value in ("2024-03-01", "2024-13", "../x"):
        with pytest.raises(InvalidPartitionValue, match="expected a month like 2025-03 or a day"):
            layout.partition_file("funding_history", (ACCOUNT, value))
    assert layout.partition_file("funding_history", (ACCOUNT, DAY)) == layout.partition_file(
        "funding_history", (ACCOUNT, "2024-03")
    )
    with pytest.raises(InvalidPartitionValue, match="not a data table"):
        layout.partition_file("_rejects", (ACCOUNT, "secrets", "2024-03-01"))
    with pytest.raises(ValueError, match="unknown table"):
        layout.partition_file("nope", (ACCOUNT, DAY))


def test_rows_that_do_not_match_the_schema_are_refused(root: Path, wh: Warehouse) -> None:
    rows = funding_batch([funding_record()]).rows
    as_float = rows.set_column(
        rows.schema.get_field_index("funding_amount"),
        "funding_amount",
        rows["funding_amount"].cast(pa.float64()),
    )
    with pytest.raises(SchemaMismatch, match="funding_amount: expected decimal128"):
        partitions.replace_partition(wh, "funding_history", (ACCOUNT, DAY), as_float)
    with pytest.raises(SchemaMismatch, match="rows of 2024-03-01 given to a write of 2024-02"):
        partitions.replace_partition(wh, "funding_history", (ACCOUNT, date(2024, 2, 1)), rows)
    with pytest.raises(SchemaMismatch, match=r"that covers 2024-03-02 \.\. 2024-03-02"):
        partitions.replace_partition(
            wh, "funding_history", (ACCOUNT, DAY), rows, covers=[date(2024, 3, 2)]
        )
    doubled = pa.concat_tables([rows, rows])
    with pytest.raises(SchemaMismatch, match="share a key"):
        partitions.replace_partition(wh, "funding_history", (ACCOUNT, DAY), doubled)
    assert not root.exists() or not any(root.rglob("*.parquet"))


def test_a_write_killed_midway_leaves_the_old_partition_whole(root: Path, wh: Warehouse) -> None:
    old = large_funding_table(DAY, 1000, seed=7)
    written = partitions.replace_partition(wh, "funding_history", (ACCOUNT, DAY), old)
    relative = layout.partition_file("funding_history", (ACCOUNT, DAY))
    target = root / relative
    assert written.path == str(target)
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
    # The temp file is no partition: the listing names the old file alone.
    assert partitions.partition_files(wh.store, "funding_history") == [relative]

    # The next write of that partition clears what the killed writer left.
    partitions.replace_partition(wh, "funding_history", (ACCOUNT, DAY), old)
    assert list(target.parent.iterdir()) == [target]


def test_a_write_the_disk_refuses_says_the_file_and_why_and_leaves_the_old_partition(
    root: Path, wh: Warehouse, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A disk full, or a file grown past what the process may write: one line naming the file
    and the reason, and the partition as it was."""
    old = large_funding_table(DAY, 1000, seed=7)
    partitions.replace_partition(wh, "funding_history", (ACCOUNT, DAY), old)
    target = root / layout.partition_file("funding_history", (ACCOUNT, DAY))
    old_bytes = target.read_bytes()

    # A real refusal, whoever runs the test (root too): a child whose files may not pass 64 KiB.
    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))

    child = subprocess.run(
        [sys.executable, "-m", "tests.warehouse.children", "write-large", str(root),
         DAY.isoformat(), "20000"],
        cwd=REPO,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        preexec_fn=limited,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )  # fmt: skip
    assert child.returncode == 1, child.stderr
    said = child.stderr.strip().splitlines()[-1]
    assert said == f"warehouse.store.StoreError: cannot write {target}: file too large"
    assert target.read_bytes() == old_bytes
    assert list(target.parent.iterdir()) == [target]

    # A disk full (ENOSPC) as the file is made durable: the same, in this process.
    def full(_fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(StoreError) as refused:
        partitions.replace_partition(wh, "funding_history", (ACCOUNT, DAY), old.slice(0, 10))
    assert str(refused.value) == f"cannot write {target}: no space left on device"
    assert target.read_bytes() == old_bytes
    assert list(target.parent.iterdir()) == [target]


def test_writers_of_one_partition_take_turns(root: Path, wh: Warehouse) -> None:
    """A rerun during the schedule: both replace the partition; it ends whole, never broken."""
    from concurrent.futures import ThreadPoolExecutor

    batches = [
        funding_batch([funding_record(market=f"M{i}_PERP") for i in range(n)]) for n in (40, 60)
    ]

    def write(n: int) -> None:
        for _ in range(15):
            partitions.write_batch(wh, batches[n % 2], account=ACCOUNT)

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(write, range(4)))  # raises if any rename failed
    (relative,) = partitions.partition_files(wh.store, "funding_history")
    path = root / relative
    assert read(path).num_rows in (40, 60)
    assert [p.name for p in path.parent.iterdir()] == ["data.parquet"]


def test_a_month_write_replaces_the_days_it_covers_and_keeps_the_others(
    root: Path, wh: Warehouse
) -> None:
    days = [funding_record(fundingTime=str(DAY_START + n * 86400 + 60)) for n in range(3)]
    bad = funding_record(fundingTime=str(DAY_START + 86400 + 120), fundingRate="1e-5")
    partitions.write_batch(wh, funding_batch([*days, bad]), account=ACCOUNT)
    second = date(2024, 3, 2)
    rejects_file = partition_path(root, "_rejects", (ACCOUNT, "funding_history", "2024-03-02"))
    assert rejects_file.exists()

    again = funding_batch([funding_record(market="ETH_PERP", fundingTime=days[1]["fundingTime"])])
    write = partitions.replace_partition(
        wh,
        "funding_history",
        (ACCOUNT, "2024-03"),
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


@pytest.mark.parametrize(
    ("root", "location"),
    [
        ("s3://bucket/prefix", "s3://bucket/prefix"),
        ("/srv/warehouse", "/srv/warehouse"),
        ("relative/warehouse", str(Path.cwd() / "relative" / "warehouse")),
    ],
)
def test_partition_locations_are_the_root_then_the_partition_file(root: str, location: str) -> None:
    store = Warehouse.open(root).store
    assert store.location == location
    wanted: dict[str, list[layout.Partition]] = {
        "funding_history": [("main", date(2025, 3, 14)), ("sub_1", "2025-04")],
        "main_balances": [("main", date(2025, 3, 14))],
        "_rejects": [("main", "funding_history", "2025-03-14")],
    }
    files = [
        "parquet/funding_history/account=main/funding_month=2025-03/data.parquet",
        "parquet/funding_history/account=sub_1/funding_month=2025-04/data.parquet",
        "parquet/main_balances/account=main/snapshot_date=2025-03-14/data.parquet",
        "parquet/_rejects/account=main/table=funding_history/partition=2025-03-14/data.parquet",
    ]
    made = [layout.partition_file(table, p) for table, ps in wanted.items() for p in ps]
    assert made == files
    assert [store.url(f) for f in made] == [f"{location}/{f}" for f in files]
