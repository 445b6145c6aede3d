"""The DuckDB catalog: views, comments, empty tables, pruning, exact digits, a live analyst."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import UTC, date, datetime, time
from decimal import Decimal
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import warehouse
from pipeline import spec
from tests.support.records import (
    ACCOUNT,
    DAY,
    DAY_START,
    EXTRACTED_AT,
    SUBACCOUNT_ID,
    closed_position,
    collateral_balance,
    conversion,
    funding_record,
    investment,
    movement,
    open_position,
    order,
    plan,
    position_event,
    subaccount,
    trade,
    transfer,
    watcher_link,
)
from tests.warehouse.test_normalize import decimal_strings
from warehouse import Warehouse, catalog, layout, normalize, partitions, schemas
from warehouse.display import decimal_text
from warehouse.root import CATALOG_FILE

REPO = Path(__file__).resolve().parents[2]


def write_funding(wh: Warehouse, records: list[object], day: date = DAY) -> None:
    batch = normalize.normalize(spec.FUNDING, records, extracted_at=EXTRACTED_AT, day=day)
    partitions.write_batch(wh, batch, account=ACCOUNT)


def _write(wh: Warehouse, answers: list[tuple[spec.History, object]]) -> None:
    for history, answer in answers:
        batch = normalize.normalize(history, answer, extracted_at=EXTRACTED_AT, day=DAY)
        assert batch.rejected == 0, (history.name, batch.rejects.to_pylist())
        partitions.write_batch(wh, batch, account=ACCOUNT)


def write_snapshots(wh: Warehouse) -> None:
    """A row or more in every snapshot table, of DAY."""
    closed = investment(id="inv-2", status=2, interestPaid="7.5")
    other_plan = plan(id="plan-2", interestTicker="BTC")
    investments = [investment(), closed, investment(id="inv-3", plan=other_plan)]
    pending = movement(method=2, status=1, amount="0.000000000000000001")
    _write(
        wh,
        [
            (spec.INVESTMENTS, investments),
            (spec.FIXED_PLANS, investments),
            (spec.MAIN_BALANCES, {"USDT": {"main_balance": "100.5"}, "BTC": {"main_balance": "0"}}),
            (spec.TRADING_BALANCES, {"USDT": {"available": "3", "freeze": "0.000000000000000001"}}),
            (spec.COLLATERAL_BALANCES, [collateral_balance()]),
            (spec.PENDING_FLOWS, [pending]),
            (spec.OPEN_POSITIONS_NOW, [open_position()]),
            (spec.SUBACCOUNTS, [subaccount()]),
            (spec.HEDGE, {"hedgeMode": False}),
            (spec.LINKS, {"pool-a": [watcher_link()]}),
        ],
    )


def write_histories(wh: Warehouse) -> None:
    """A row or more in every table partitioned by month but the funding history's, of DAY."""
    _write(
        wh,
        [
            (spec.TRADES, {"BTC_USDT": [trade()]}),
            (spec.ORDERS, {"BTC_USDT": [order()]}),
            (spec.CONVERSIONS, [conversion()]),
            (spec.DEPOSITS_WITHDRAWALS, [movement()]),
            (spec.SUBACCOUNT_TRANSFERS_HISTORY, {SUBACCOUNT_ID: [transfer()]}),
            (spec.POSITION_EVENTS, [position_event()]),
            (spec.CLOSED_POSITIONS, [closed_position()]),
            (spec.DAILY_CANDLES, {"BTC_USDT": [candle()]}),
        ],
    )


def candle() -> dict[str, object]:
    """A daily candle of DAY, as the walk names its values."""
    day = int(datetime.combine(DAY, time.min, UTC).timestamp())
    return {"time": day, "open": "1.5", "close": "2", "high": "2.5", "low": "1",
            "volume_stock": "3", "volume_money": "4.5"}  # fmt: skip


def query(wh: Warehouse, sql: str, *parameters: object) -> list[tuple[object, ...]]:
    with catalog.connect(wh) as con:
        return con.execute(sql, parameters or None).fetchall()


def row_count(wh: Warehouse, view: str) -> int:
    with catalog.connect(wh) as con:
        return len(con.table(view).fetchall())


def test_a_fresh_warehouse_has_every_view_typed_and_empty(wh: Warehouse) -> None:
    refreshed = catalog.refresh(wh)
    assert set(refreshed.empty_tables) == set(schemas.TABLES)
    assert set(refreshed.curated_views) >= {
        "daily_funding_by_market",
        "latest_balances",
        "active_investments",
        "interest_paid_by_ticker",
        "trading_fees",
        "traded_volume",
        "orders_with_fills",
        "realized_pnl",
        "net_flows",
        "account_statement",
        "reconciliation",
    }
    for view in (*schemas.TABLES, *refreshed.curated_views):
        assert row_count(wh, view) == 0


def test_views_have_the_schema_types_and_comments_with_or_without_files(wh: Warehouse) -> None:
    catalog.refresh(wh)
    empty_types = query(wh, "SELECT table_name, column_name, data_type FROM duckdb_columns()")
    write_funding(wh, [funding_record(fundingRate="x")])
    write_funding(wh, [funding_record()])  # clears the rejects again, after one existed
    write_snapshots(wh)
    write_histories(wh)
    partitions.replace_partition(
        wh,
        "_rejects",
        (ACCOUNT, "hedge_mode", "2024-03-01"),
        normalize.normalize(spec.HEDGE, [], extracted_at=EXTRACTED_AT, day=DAY).rejects,
    )
    assert catalog.refresh(wh).empty_tables == ()
    full_types = query(wh, "SELECT table_name, column_name, data_type FROM duckdb_columns()")
    assert sorted(full_types) == sorted(empty_types)
    for schema in schemas.TABLES.values():
        with catalog.connect(wh) as con:
            view = con.table(schema.name)
            described = list(zip(view.columns, map(str, view.types), strict=True))
        assert described == [(c.name, catalog.duckdb_type(c.type)) for c in schema.view_columns]
        comments = dict(
            query(
                wh,
                "SELECT column_name, comment FROM duckdb_columns() WHERE table_name = ?",
                schema.name,
            )
        )
        assert comments == {c.name: c.description for c in schema.view_columns}
    assert query(wh, 'SELECT "table", "partition", reason FROM _rejects') == [
        ("hedge_mode", "2024-03-01", "hedge mode: expected a JSON object")
    ]


def test_refresh_is_idempotent(root: Path, wh: Warehouse) -> None:
    write_funding(wh, [funding_record()])
    catalog.refresh(wh)
    first = query(wh, "SELECT view_name, sql FROM duckdb_views() WHERE NOT internal ORDER BY 1")
    catalog.refresh(wh)
    second = query(wh, "SELECT view_name, sql FROM duckdb_views() WHERE NOT internal ORDER BY 1")
    assert first == second
    # Only the refreshes' lock file is left beside the catalog: no temp file, no WAL.
    left = [p.name for p in root.iterdir() if p.name.startswith(".")]
    assert left == [f".{CATALOG_FILE}.lock"]


def test_the_catalog_is_rebuilt_only_when_a_view_would_not_show_a_tables_files(
    wh: Warehouse, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert catalog.refresh_if_stale(wh) is not None  # no catalog yet
    assert catalog.refresh_if_stale(wh) is None
    write_funding(wh, [funding_record()])
    built = catalog.refresh_if_stale(wh)  # its view was the empty one
    assert built is not None
    assert "funding_history" not in built.empty_tables
    write_funding(wh, [funding_record(), funding_record(fundingTime=str(DAY_START + 16 * 3600))])
    assert catalog.refresh_if_stale(wh) is None
    assert row_count(wh, "funding_history") == 2  # the view read the new file as it was
    _write(wh, [(spec.TRADES, {"BTC_USDT": [trade()]})])  # trades' view was still empty
    assert catalog.refresh_if_stale(wh) is not None
    assert row_count(wh, "trades") == 1
    # A table whose last file went (a clean rerun removes a day's rejects): its view is the
    # empty one again, never one over no files.
    for path in partitions.partition_files(wh.store, "trades", account=ACCOUNT):
        wh.store.delete(path)
    assert catalog.refresh_if_stale(wh) is not None
    assert row_count(wh, "trades") == 0
    # A catalog built from other schemas or curated SQL (an older version) is rebuilt.
    monkeypatch.setattr(catalog, "design", lambda *_: "another version")
    assert catalog.refresh_if_stale(wh) is not None
    assert catalog.refresh_if_stale(wh) is None


def test_a_refresh_sweeps_what_a_killed_refresh_left(root: Path, wh: Warehouse) -> None:
    write_funding(wh, [funding_record()])
    catalog.refresh(wh)
    # What a refresh SIGKILLed while building leaves beside the catalog (the kill tests make one).
    killed = root / f".{CATALOG_FILE}.{'0' * 32}.tmp"
    with duckdb.connect(str(killed)) as con:
        con.execute("CREATE VIEW half AS SELECT 1")
    (root / f"{killed.name}.wal").write_bytes(b"\0" * 64)
    catalog.refresh(wh)
    # Only the refreshes' lock file is left beside the catalog: no temp file, no WAL.
    left = [p.name for p in root.iterdir() if p.name.startswith(".")]
    assert left == [f".{CATALOG_FILE}.lock"]
    assert query(wh, "SELECT count(*) FROM funding_history") == [(1,)]


def test_refreshes_at_once_take_turns(root: Path, wh: Warehouse) -> None:
    write_funding(wh, [funding_record()])
    script = (
        "import sys\nfrom warehouse import Warehouse, catalog\n"
        "for _ in range(6):\n    catalog.refresh(Warehouse.open(sys.argv[1]))\n"
    )
    children = [
        subprocess.Popen([sys.executable, "-c", script, str(root)], stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    # Neither sweeps the other's catalog while it is being built.
    for child in children:
        _, err = child.communicate(timeout=300)
        assert child.returncode == 0, err.decode()
    assert query(wh, "SELECT count(*) FROM funding_history") == [(1,)]
    # Only the refreshes' lock file is left beside the catalog: no temp file, no WAL.
    left = [p.name for p in root.iterdir() if p.name.startswith(".")]
    assert left == [f".{CATALOG_FILE}.lock"]


def test_curated_views_answer_from_the_snapshots(wh: Warehouse) -> None:
    write_snapshots(wh)
    write_funding(wh, [funding_record(), funding_record(market="ETH_PERP", fundingAmount="2")])
    catalog.refresh(wh)
    assert query(
        wh, "SELECT market, payments, funding_amount FROM daily_funding_by_market ORDER BY 1"
    ) == [
        ("BTC_PERP", 1, Decimal("-0.123456789012345678")),
        ("ETH_PERP", 1, Decimal("2")),
    ]
    assert query(
        wh,
        "SELECT ticker, main_balance, trading_available, trading_frozen "
        "FROM latest_balances ORDER BY 1",
    ) == [
        ("BTC", Decimal(0), None, None),
        ("USDT", Decimal("100.5"), Decimal(3), Decimal("0.000000000000000001")),
    ]
    assert query(wh, "SELECT investment_id, plan_percent FROM active_investments ORDER BY 1") == [
        ("inv-1", Decimal("5.25")),
        ("inv-3", Decimal("5.25")),
    ]
    assert query(
        wh,
        "SELECT interest_ticker, investments, interest_paid "
        "FROM interest_paid_by_ticker ORDER BY 1",
    ) == [
        ("BTC", 1, Decimal("0.000123456789")),
        ("USDT", 2, Decimal("7.500123456789")),
    ]


def test_a_month_is_one_file_and_a_one_day_query_scans_only_its_row_groups(
    wh: Warehouse,
) -> None:
    # 2024-02-27 .. 2024-03-02: two months, five days.
    for offset in range(-3, 2):
        write_funding(wh, [funding_record(fundingTime=str(DAY_START + offset * 86400 + 60))])
    files = partitions.partition_files(wh.store, "funding_history")
    assert [f.split("/")[-2] for f in files] == ["funding_month=2024-02", "funding_month=2024-03"]
    catalog.refresh(wh)
    with catalog.connect(wh) as con:
        day = con.execute(
            "SELECT funding_date, count(*) FROM funding_history "
            "WHERE funding_date = DATE '2024-03-02' GROUP BY 1"
        ).fetchall()
        plan_text = con.execute(
            "EXPLAIN ANALYZE SELECT sum(funding_amount) FROM funding_history "
            "WHERE funding_date = DATE '2024-03-02'"
        ).fetchall()[0][1]
        columns = [r[0] for r in con.execute("DESCRIBE funding_history").fetchall()]
    assert day == [(date(2024, 3, 2), 1)]
    # funding_date is in the files, so their row groups' statistics leave February's out.
    scanned = re.search(r"Row Groups Scanned:\s*(\d+)\s*/\s*(\d+)", plan_text)
    assert scanned is not None, plan_text
    assert (int(scanned.group(1)), int(scanned.group(2))) == (1, 2)
    # The month in the path is not a column of the view: its columns are the schema's.
    assert columns == [c.name for c in schemas.TABLES["funding_history"].view_columns]


@pytest.fixture(scope="module")
def balances_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    """A warehouse whose catalog's main_balances view reads its files: a write to the table
    shows in the next query without a refresh."""
    wh = Warehouse.open(tmp_path_factory.mktemp("decimals"))
    write_main_balances(wh, ["0"])
    assert "main_balances" not in catalog.refresh(wh).empty_tables
    return wh


def write_main_balances(wh: Warehouse, values: list[str]) -> None:
    batch = normalize.normalize(
        spec.MAIN_BALANCES,
        {f"T{i:02}": {"main_balance": v} for i, v in enumerate(values)},
        extracted_at=EXTRACTED_AT,
        day=DAY,
    )
    partitions.write_batch(wh, batch, account=ACCOUNT)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(values=st.lists(decimal_strings, min_size=1, max_size=30))
def test_every_decimal_comes_out_of_duckdb_with_the_same_digits(
    balances_warehouse: Warehouse, values: list[str]
) -> None:
    # Each example replaces the day's partition that the catalog's view reads.
    write_main_balances(balances_warehouse, values)
    rows = query(
        balances_warehouse,
        "SELECT ticker, main_balance, CAST(main_balance AS VARCHAR) "
        "FROM main_balances ORDER BY ticker",
    )
    for (_, value, text), original in zip(rows, values, strict=True):
        assert value == Decimal(original)
        assert decimal_text(Decimal(text)) == canonical(original)


def canonical(text: str) -> str:
    negative = text.startswith("-")
    whole, _, fraction = text.lstrip("-").partition(".")
    whole, fraction = whole.lstrip("0") or "0", fraction.rstrip("0")
    result = whole + ("." + fraction if fraction else "")
    return "-" + result if negative and result != "0" else result


class Analyst:
    """A second process holding one read-only connection to the catalog."""

    def __init__(self, root: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.warehouse.children", "analyst", str(root)],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert json.loads(self.answer()) == {"ready": True}

    def answer(self) -> str:
        assert self.process.stdout is not None
        return self.process.stdout.readline()

    def ask(self, sql: str) -> object:
        assert self.process.stdin is not None
        self.process.stdin.write(sql + "\n")
        self.process.stdin.flush()
        reply = json.loads(self.answer())
        assert "error" not in reply, reply
        return reply["rows"]

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write("exit\n")
        self.process.stdin.close()
        assert self.process.wait(timeout=30) == 0


def test_an_open_read_only_analyst_survives_refresh_and_partition_replace(
    root: Path, wh: Warehouse
) -> None:
    write_funding(wh, [funding_record()])
    catalog.refresh(wh)
    analyst = Analyst(root)
    try:
        assert analyst.ask("SELECT count(*) FROM funding_history") == [[1]]

        # DuckDB refuses a read-write open while another process holds the file read-only:
        with pytest.raises(duckdb.IOException, match="lock"):
            duckdb.connect(str(wh.catalog_path)).close()
        # ... which is why refresh builds beside and renames, and succeeds here.
        write_funding(wh, [funding_record(market=f"M{i}_PERP") for i in range(3)])
        write_snapshots(wh)
        refreshed = catalog.refresh(wh)
        assert "main_balances" not in refreshed.empty_tables

        # The analyst's open connection keeps working, reading the replaced partition.
        assert analyst.ask("SELECT count(*) FROM funding_history") == [[3]]
        assert analyst.ask("SELECT count(*) FROM daily_funding_by_market") == [[3]]
        # A new connection sees the new catalog (balances had no files at the first refresh).
        assert query(wh, "SELECT count(*) FROM main_balances") == [(2,)]
    finally:
        analyst.close()


def test_query_gives_analysts_an_exact_dataframe(root: Path, wh: Warehouse) -> None:
    tiny, big = "0.000000000000000001", "12345678901234567890.123456789012345678"
    write_funding(
        wh,
        [
            funding_record(fundingAmount=tiny),
            funding_record(market="ETH_PERP", fundingAmount=big),
            funding_record(market="ETH_PERP", fundingAmount=tiny, positionAmount="-2"),
        ],
    )
    frame = warehouse.query(
        "SELECT market, sum(funding_amount) AS total, min(funding_time) AS first "
        "FROM funding_history WHERE funding_date = ? GROUP BY market ORDER BY market",
        [DAY],
        root=str(root),
    )
    assert list(frame["market"]) == ["BTC_PERP", "ETH_PERP"]
    # Decimal, not float: a float sum would lose the 10^-18 beside twenty integer digits.
    assert list(frame["total"]) == [
        Decimal(tiny),
        Decimal("12345678901234567890.123456789012345679"),
    ]
    assert str(frame["first"].dtype) == "datetime64[us, UTC]"
    assert frame["first"][0].isoformat() == "2024-03-01T08:00:00+00:00"


def test_query_names_a_bad_query(root: Path, wh: Warehouse) -> None:
    write_funding(wh, [funding_record()])
    with pytest.raises(duckdb.Error, match="no_such_table"):
        warehouse.query("SELECT * FROM no_such_table", root=str(root))


def test_query_of_a_root_with_nothing_in_it_says_so(root: Path) -> None:
    with pytest.raises(catalog.CatalogError, match=f"no warehouse at {root}: nothing has been"):
        warehouse.query("SELECT * FROM funding_history", root=str(root))
    assert not (root / CATALOG_FILE).exists()


def test_a_column_added_after_a_tables_files_were_written_reads_as_null(
    root: Path, wh: Warehouse
) -> None:
    """Files written before a column was declared (a warehouse of an earlier version) keep
    their table's view, and the views over it, working: the column is null in them."""
    write_snapshots(wh)
    catalog.refresh(wh)
    holdings = "SELECT ticker, holdings FROM holdings ORDER BY 1"
    before = query(wh, holdings)
    for path in root.rglob(f"main_balances/**/{layout.PARTITION_FILE}"):
        pq.write_table(pq.read_table(path).drop_columns(["observed_from"]), path)
    catalog.refresh(wh)
    assert query(wh, "SELECT ticker, observed_from FROM main_balances ORDER BY 1") == [
        ("BTC", None),
        ("USDT", None),
    ]
    assert query(wh, holdings) == before
