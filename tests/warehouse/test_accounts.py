"""Accounts in the warehouse: a path segment each, views across them and per account, a write of
one never touching another's files."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipeline import spec
from tests.support.cli_runs import account_files
from tests.support.records import DAY, EXTRACTED_AT, funding_record, watcher_link
from warehouse import Warehouse, catalog, layout, normalize, partitions
from warehouse.layout import InvalidPartitionValue

NEXT = DAY + timedelta(days=1)


def _balances(root: Path, account: str, day: date, usdt: str) -> None:
    answers: list[tuple[spec.History, object]] = [
        (spec.MAIN_BALANCES, {"USDT": {"main_balance": usdt}}),
        (spec.TRADING_BALANCES, {"USDT": {"available": "1", "freeze": "0"}}),
        (spec.HEDGE, {"hedgeMode": account == "main"}),
        (spec.LINKS, {f"{account}-pool": [watcher_link()]}),
    ]
    for history, answer in answers:
        batch = normalize.normalize(history, answer, extracted_at=EXTRACTED_AT, day=day)
        partitions.write_batch(Warehouse.open(root), batch, account=account)


def _funding(root: Path, account: str, amount: str) -> None:
    batch = normalize.normalize(
        spec.FUNDING, [funding_record(fundingAmount=amount)], extracted_at=EXTRACTED_AT, day=DAY
    )
    partitions.write_batch(Warehouse.open(root), batch, account=account)


def _query(root: Path, sql: str) -> list[tuple[object, ...]]:
    with catalog.connect(Warehouse.open(root)) as con:
        return con.execute(sql).fetchall()


def test_each_account_is_a_path_segment_and_a_write_of_one_leaves_the_others_files(
    root: Path,
) -> None:
    _funding(root, "main", "1.5")
    _balances(root, "main", DAY, "10")
    before = account_files(root, "main")
    _funding(root, "sub_1", "-2.25")
    _balances(root, "sub_1", DAY, "20")
    _balances(root, "sub_1", NEXT, "21")
    assert account_files(root, "main") == before
    funding = partitions.partition_files(Warehouse.open(root).store, "funding_history")
    assert funding == [
        "parquet/funding_history/account=main/funding_month=2024-03/data.parquet",
        "parquet/funding_history/account=sub_1/funding_month=2024-03/data.parquet",
    ]
    # The account lives in the path only, as a partition value does.
    assert "account" not in pq.read_schema(root / funding[0]).names
    catalog.refresh(Warehouse.open(root))
    assert _query(root, "SELECT account, funding_amount FROM funding_history ORDER BY 1") == [
        ("main", Decimal("1.5")), ("sub_1", Decimal("-2.25"))
    ]  # fmt: skip


def test_curated_views_answer_per_account_and_across_accounts(root: Path) -> None:
    _balances(root, "main", DAY, "10.000000000000000001")
    _balances(root, "sub_1", DAY, "20")
    _balances(root, "sub_1", NEXT, "21")
    catalog.refresh(Warehouse.open(root))
    # Each account's latest snapshot, not the warehouse's: main's is a day older than sub_1's.
    assert _query(
        root, "SELECT account, ticker, main_balance, main_snapshot_date FROM latest_balances "
        "ORDER BY account"
    ) == [
        ("main", "USDT", Decimal("10.000000000000000001"), DAY),
        ("sub_1", "USDT", Decimal("21"), NEXT),
    ]  # fmt: skip
    assert _query(root, "SELECT ticker, main_balance, accounts FROM balances_across_accounts") == [
        ("USDT", Decimal("31.000000000000000001"), 2)
    ]
    summary = _query(root, "SELECT account, latest_snapshot_date, hedge_mode FROM account_summary")
    assert summary == [("main", DAY, True), ("sub_1", NEXT, False)]


@pytest.mark.parametrize("name", ["../x", "Main", "a/b", "", "a" * 41, "1st"])
def test_a_name_that_is_not_an_account_name_never_becomes_a_path(name: str) -> None:
    with pytest.raises(InvalidPartitionValue, match="not an account name"):
        layout.partition_file("main_balances", (name, DAY))
