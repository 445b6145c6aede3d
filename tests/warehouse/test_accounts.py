"""Accounts in the warehouse: a path segment each, views across them and per account, a write of
one never touching another's files, and a warehouse written before accounts adopted whole."""

from __future__ import annotations

import shutil
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.support.cli_runs import account_files
from tests.support.records import DAY, EXTRACTED_AT, funding_record, watcher_link
from warehouse import catalog, normalize, parquet, schemas
from warehouse.parquet import InvalidPartitionValue

NEXT = DAY + timedelta(days=1)


def _balances(root: Path, account: str, day: date, usdt: str) -> None:
    snapshot = {"snapshot_date": day, "extracted_at": EXTRACTED_AT}
    for batch in (
        normalize.normalize_main_balances({"USDT": {"main_balance": usdt}}, **snapshot),
        normalize.normalize_trading_balances(
            {"USDT": {"available": "1", "freeze": "0"}}, **snapshot
        ),
        normalize.normalize_hedge_mode({"hedgeMode": account == "main"}, **snapshot),
        normalize.normalize_watcher_links({f"{account}-pool": [watcher_link()]}, **snapshot),
    ):
        parquet.write_batch(root, batch, account=account)


def _funding(root: Path, account: str, amount: str) -> None:
    batch = normalize.normalize_funding_history(
        [funding_record(fundingAmount=amount)], extracted_at=EXTRACTED_AT, partition_for_rejects=DAY
    )
    parquet.write_batch(root, batch, account=account)


def _query(root: Path, sql: str) -> list[tuple[object, ...]]:
    with catalog.connect(root) as con:
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
    funding = parquet.partition_files(root, "funding_history")
    assert [f.relative_to(root / "parquet").as_posix() for f in funding] == [
        "funding_history/account=main/funding_month=2024-03/data.parquet",
        "funding_history/account=sub_1/funding_month=2024-03/data.parquet",
    ]
    # The account lives in the path only, as a partition value does.
    assert "account" not in pq.read_schema(funding[0]).names
    catalog.refresh(root)
    assert _query(root, "SELECT account, funding_amount FROM funding_history ORDER BY 1") == [
        ("main", Decimal("1.5")), ("sub_1", Decimal("-2.25"))
    ]  # fmt: skip


def test_curated_views_answer_per_account_and_across_accounts(root: Path) -> None:
    _balances(root, "main", DAY, "10.000000000000000001")
    _balances(root, "sub_1", DAY, "20")
    _balances(root, "sub_1", NEXT, "21")
    catalog.refresh(root)
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
def test_a_name_that_is_not_an_account_name_never_becomes_a_path(root: Path, name: str) -> None:
    with pytest.raises(InvalidPartitionValue, match="not an account name"):
        parquet.partition_path(root, "main_balances", (name, DAY))


def test_a_warehouse_written_before_accounts_is_adopted_by_the_first_account(
    root: Path, tmp_path: Path
) -> None:
    _funding(root, "default", "1.5")
    _balances(root, "default", DAY, "10")
    parquet.write_batch(
        root,
        normalize.normalize_funding_history(
            [funding_record(fundingRate="x")], extracted_at=EXTRACTED_AT, partition_for_rejects=DAY
        ),
        account="default",
        replace=[NEXT],
    )
    catalog.refresh(root)
    expected = {
        table: _query(root, f'SELECT * EXCLUDE (account) FROM "{table}" ORDER BY ALL')  # noqa: S608
        for table in schemas.TABLES
    }
    assert expected["_rejects"]
    # The layout of before: no account in the path, and the mining account in the column
    # `account` of watcher_links.
    for table in schemas.TABLES:
        accounted = root / "parquet" / table / "account=default"
        if accounted.exists():
            for partition in accounted.iterdir():
                shutil.move(partition, accounted.parent / partition.name)
            accounted.rmdir()
    (links,) = (root / "parquet" / "watcher_links").glob("*/data.parquet")
    old = pq.read_table(links)
    pq.write_table(old.rename_columns(["account", *old.column_names[1:]]), links)

    assert sorted(parquet.adopt_unaccounted(root, "main")) == sorted(
        ["funding_history", "main_balances", "trading_balances", "hedge_mode", "watcher_links",
         "_rejects"]
    )  # fmt: skip
    assert parquet.adopt_unaccounted(root, "main") == []  # once adopted, nothing to do
    catalog.refresh(root)
    for table, rows in expected.items():
        assert _query(root, f'SELECT * EXCLUDE (account) FROM "{table}" ORDER BY ALL') == rows  # noqa: S608
        assert {a for (a,) in _query(root, f'SELECT DISTINCT account FROM "{table}"')} <= {"main"}  # noqa: S608
