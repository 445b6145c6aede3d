"""What a month file records of the days a walk covered, and the days at stake or lost of a
history the exchange forgets after six months."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from pipeline import spec
from warehouse import Warehouse, archive, partitions, schemas

ACCOUNT = "main"


def _end_of(day: date, minutes: int = 30) -> datetime:
    return datetime.combine(day + timedelta(days=1), time.min, UTC) + timedelta(minutes=minutes)


def _empty(table: str) -> pa.Table:
    return schemas.TABLES[table].arrow_schema.empty_table()


def _walk(wh: Warehouse, table: str, days: list[date], at: datetime) -> None:
    partitions.replace_partition(
        wh, table, (ACCOUNT, days[0]), _empty(table), covers=days, walked_at=at
    )


def test_a_month_file_records_each_day_walked_and_when(tmp_path: Path) -> None:
    wh = Warehouse.open(tmp_path)
    first = [date(2026, 5, 1), date(2026, 5, 2)]
    _walk(wh, "trades", first, _end_of(first[-1]))
    later = [date(2026, 5, 2), date(2026, 5, 3)]
    _walk(wh, "trades", later, datetime(2026, 5, 3, 12, tzinfo=UTC))  # during its last day
    walked = partitions.coverage(wh.store, "trades", ACCOUNT)
    assert walked == {
        date(2026, 5, 1): _end_of(first[-1]),
        date(2026, 5, 2): datetime(2026, 5, 3, 12, tzinfo=UTC),
        date(2026, 5, 3): datetime(2026, 5, 3, 12, tzinfo=UTC),
    }
    assert archive.archived(date(2026, 5, 2), walked[date(2026, 5, 2)])
    # Walked before it ended: not archived.
    assert not archive.archived(date(2026, 5, 3), walked[date(2026, 5, 3)])


def test_a_write_without_a_walk_keeps_what_the_file_recorded(tmp_path: Path) -> None:
    wh = Warehouse.open(tmp_path)
    _walk(wh, "orders", [date(2026, 6, 1)], _end_of(date(2026, 6, 1)))
    partitions.replace_partition(
        wh, "orders", (ACCOUNT, "2026-06"), _empty("orders"), covers=[date(2026, 6, 2)]
    )
    assert set(partitions.coverage(wh.store, "orders", ACCOUNT)) == {date(2026, 6, 1)}


def test_the_footer_is_read_alone(tmp_path: Path) -> None:
    wh = Warehouse.open(tmp_path)
    _walk(wh, "trades", [date(2026, 5, 1)], _end_of(date(2026, 5, 1)))
    [path] = partitions.partition_files(wh.store, "trades", account=ACCOUNT)
    metadata = wh.store.read_metadata(path)
    assert metadata is not None
    assert archive.covered(metadata) == {date(2026, 5, 1): _end_of(date(2026, 5, 1))}
    assert wh.store.read_metadata(path.replace("2026-05", "2026-04")) is None


def _walked_every_day(first: date, last: date) -> dict[date, datetime]:
    return {
        first + timedelta(days=n): _end_of(first + timedelta(days=n))
        for n in range((last - first).days + 1)
    }


def test_a_nightly_stopped_five_months_and_a_half_leaves_days_at_stake() -> None:
    today = date(2026, 11, 26)
    stopped = today - timedelta(days=168)  # five months and a half
    walked = _walked_every_day(date(2026, 5, 1), stopped - timedelta(days=1))
    found = archive.horizon(walked, date(2026, 5, 1), today)
    assert found.lost == ()
    [gap] = found.at_stake
    assert (gap.first, gap.last) == (stopped, today - timedelta(days=1))
    # Stopped on 2026-06-11, answered by the exchange until 2026-12-11: sixteen days left.
    assert gap.lost_on == date(2026, 12, 12) == spec.lost_on(stopped)
    assert found.due_within(today, 14) == ()
    # Two weeks later, the first of them is lost within a fortnight.
    assert archive.horizon(walked, date(2026, 5, 1), today + timedelta(days=14)).due_within(
        today + timedelta(days=14), 14
    )


def test_a_nightly_stopped_past_six_months_has_lost_days() -> None:
    today = date(2026, 11, 26)
    walked = _walked_every_day(date(2026, 3, 1), date(2026, 4, 30))
    found = archive.horizon(walked, date(2026, 3, 1), today)
    floor = spec.floor_day(today)
    assert [(g.first, g.last) for g in found.lost] == [(date(2026, 5, 1), floor - timedelta(1))]
    assert [(g.first, g.last) for g in found.at_stake] == [(floor, today - timedelta(days=1))]


@pytest.mark.parametrize(
    ("day", "lost"),
    [
        (date(2026, 5, 26), date(2026, 11, 27)),
        # Six months after August 31 is February 28: the day is still answered then.
        (date(2026, 8, 31), date(2027, 3, 1)),
        (date(2024, 8, 31), date(2025, 3, 1)),
    ],
)
def test_the_day_a_day_is_lost(day: date, lost: date) -> None:
    assert spec.lost_on(day) == lost
    assert spec.floor_day(lost) > day
    assert spec.floor_day(lost - timedelta(days=1)) <= day


def test_lost_days_are_recorded_once_said(tmp_path: Path) -> None:
    wh = Warehouse.open(tmp_path)
    # Never looked at: no record; looked at with nothing lost: an empty one.
    assert archive.reported_lost(wh.store, "trades", ACCOUNT) is None
    archive.record_lost(wh.store, "trades", ACCOUNT, [])
    assert archive.reported_lost(wh.store, "trades", ACCOUNT) == set()
    archive.record_lost(wh.store, "trades", ACCOUNT, [date(2026, 1, 2), date(2026, 1, 1)])
    archive.record_lost(wh.store, "trades", ACCOUNT, [date(2026, 1, 3)])
    assert archive.reported_lost(wh.store, "trades", ACCOUNT) == {
        date(2026, 1, 1),
        date(2026, 1, 2),
        date(2026, 1, 3),
    }
    # The record is no table: the catalog's views never read it.
    assert not partitions.partition_files(wh.store, "trades")
