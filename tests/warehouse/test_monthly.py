"""Funding into month partitions: the splitting logic (`MonthlyLoad`), in this process."""

from __future__ import annotations

import os
from datetime import date
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipeline import spec
from tests.support.records import ACCOUNT, D1, D2, D3, D4, EXTRACTED_AT, at, markets
from warehouse import Warehouse, layout, normalize, schemas, store
from warehouse.monthly import (
    DayOrderError,
    FewerRowsRefused,
    LoadAbandoned,
    MonthlyLoad,
    MonthlyTarget,
)


def loader(
    root: Path, days: list[date], *, allow_fewer_rows: bool = False, parent: int | None = None
) -> MonthlyLoad:
    target = MonthlyTarget(
        Warehouse.open(root),
        spec.FUNDING,
        account=ACCOUNT,
        days=days,
        extracted_at=EXTRACTED_AT,
        allow_fewer_rows=allow_fewer_rows,
    )
    return MonthlyLoad(target, parent=parent)


def test_a_month_is_written_once_complete_and_a_month_spanning_chunks_whole(root: Path) -> None:
    # D4 is 2024-03-01; D1 .. D3 end February.
    funding = loader(root, [D2, D3, D4])
    first = funding.take([at(D4, 8), at(D3, 16, "ETH_PERP")])
    assert [(d.day, d.rows) for d in first.days] == [(D4, 1)]
    assert (first.received, first.duplicates) == (2, 0)
    assert markets(root, D3) is None  # February may go on in the next chunk
    second = funding.take([at(D3, 8), at(D2, 8)])
    assert second.days == []
    assert markets(root, D3) is None
    last = funding.finish()
    assert [(d.day, d.rows) for d in last.days] == [(D2, 1), (D3, 2)]
    assert markets(root, D3) == ["BTC_PERP", "ETH_PERP"]
    assert markets(root, D2) == ["BTC_PERP"]


def test_a_month_in_several_chunks_is_the_file_of_its_rows_sorted_at_once(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Row groups of 7 rows: the month's 60 rows are taken in the file's order 7 at a time.
    monkeypatch.setattr(store, "ROW_GROUP_ROWS", 7)
    names = ["ETH_PERP", "BTC_PERP", "ADA_PERP", "XRP_PERP", "DOT_PERP"]
    newest_first = [at(day, hour, m) for day in (D3, D2, D1) for hour in (20, 9, 3, 1)
                    for m in names]  # fmt: skip
    funding = loader(root, [D1, D2, D3])
    for start in range(0, len(newest_first), 25):
        assert funding.take(newest_first[start : start + 25]).days == []
    funding.finish()
    path = root / layout.partition_file("funding_history", (ACCOUNT, "2024-02"))
    written = pq.ParquetFile(path)
    # What a write of the month at once, its rows sorted by key, held.
    rows = normalize.normalize(spec.FUNDING, newest_first, extracted_at=EXTRACTED_AT, day=D3).rows
    table = schemas.TABLES["funding_history"]
    at_once = rows.select(table.file_schema.names).sort_by([(k, "ascending") for k in table.key])
    assert written.read().equals(at_once.cast(table.file_schema))
    assert [written.metadata.row_group(n).num_rows for n in range(9)] == [7] * 8 + [4]


def test_every_day_of_the_range_is_replaced_those_without_records_emptied(root: Path) -> None:
    funding = loader(root, [D1, D2, D3, D4])
    assert funding.take([at(D3, 8)]).days == []
    finished = funding.finish()
    assert [(d.day, d.rows) for d in finished.days] == [(D1, 0), (D2, 0), (D3, 1), (D4, 0)]
    assert [markets(root, day) for day in (D1, D2, D3, D4)] == [[], [], ["BTC_PERP"], []]


def test_a_load_replaces_its_days_and_keeps_the_others_of_their_month(root: Path) -> None:
    first = loader(root, [D1, D2, D3])
    first.take([at(D3, 8), at(D2, 8), at(D1, 8)])
    first.finish()
    again = loader(root, [D2])
    again.take([at(D2, 8), at(D2, 9, "ETH_PERP")])
    assert [(d.day, d.rows) for d in again.finish().days] == [(D2, 2)]
    assert [markets(root, day) for day in (D1, D2, D3)] == [
        ["BTC_PERP"], ["BTC_PERP", "ETH_PERP"], ["BTC_PERP"]
    ]  # fmt: skip


def test_rejects_go_into_their_day_with_the_rows(root: Path) -> None:
    funding = loader(root, [D4])
    funding.take([at(D4, 8), at(D4, 9, fundingAmount="1e5")])
    [write] = funding.finish().days
    assert (write.day, write.rows, write.rejected) == (D4, 1, 1)
    assert write.reasons == ("fundingAmount: not a decimal number",)


def test_a_newer_month_after_an_older_one_is_an_order_error(root: Path) -> None:
    funding = loader(root, [D2, D3, D4])
    funding.take([at(D3, 8)])
    with pytest.raises(DayOrderError, match="out of order: after 2024-02, 2024-03"):
        funding.take([at(D4, 8)])


def test_a_month_that_begins_again_after_it_was_written_is_an_order_error(root: Path) -> None:
    funding = loader(root, [D3, D4])
    funding.take([at(D4, 8), at(D3, 8)])
    with pytest.raises(DayOrderError, match="2024-03 began again after it was written"):
        funding.take([at(D4, 9)])


def test_a_day_outside_the_range_is_an_order_error(root: Path) -> None:
    funding = loader(root, [D3, D4])
    with pytest.raises(DayOrderError, match=f"a record of {D1} came with the window"):
        funding.take([at(D2, 8), at(D1, 8)])
    assert markets(root, D3) is None


def test_fewer_payments_than_the_partition_holds_are_refused_unless_allowed(root: Path) -> None:
    first = loader(root, [D4])
    first.take([at(D4, 8), at(D4, 8, "ETH_PERP")])
    first.finish()
    again = loader(root, [D4])
    again.take([at(D4, 8)])
    with pytest.raises(FewerRowsRefused, match=r"did not list 1 record\(s\).*'ETH_PERP'"):
        again.finish()
    assert markets(root, D4) == ["BTC_PERP", "ETH_PERP"]  # left as it was
    allowed = loader(root, [D4], allow_fewer_rows=True)
    allowed.take([at(D4, 8)])
    allowed.finish()
    assert markets(root, D4) == ["BTC_PERP"]


def test_no_partition_is_written_once_the_parent_is_gone(root: Path) -> None:
    # This process's parent is not this process: as if the parent had died and left it.
    funding = loader(root, [D4], parent=os.getpid())
    funding.take([at(D4, 8)])
    with pytest.raises(LoadAbandoned, match="process is gone"):
        funding.finish()
    assert markets(root, D4) is None


# --- The writer process, end to end -------------------------------------------------------------
