"""The account statement against the simulator's ledger: a main account and a sub-account,
snapshots at three moments of the simulator's clock and every history between them read over
loopback HTTP into a warehouse. Every interval reconciles to the last of 18 decimals, and a
record dropped from an answer is named by the reconciliation: its account, asset, interval and
amount. The exports for tax tools hold what the statement counts, as each tool documents its
file."""

from __future__ import annotations

import asyncio
import csv
import itertools
import os
import re
import shutil
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import ROUND_DOWN, Decimal, localcontext
from fractions import Fraction
from pathlib import Path
from typing import Any

import orjson
import pytest

from assets.prices import load_prices, price_paths
from pipeline import spec
from pipeline.simulator import EPOCH, Scale, SimClock, Simulator
from pipeline.whitebit import AsyncWhiteBIT
from tests.simulator.ledger_reading import (
    PRECISION,
    Flows,
    balances,
    every,
    investments_state,
    sum_of,
)
from tests.support.cli_runs import invoke
from tests.support.client import FAST_RETRIES
from tests.warehouse.simulated_ledger import DAY_S, Edit, Extraction
from warehouse import Warehouse, catalog, flows, sources

#: 2026-09-23 14:33:54: two days after the epoch, inside a funding round.
T1 = EPOCH + 2 * DAY_S + 1_234
#: 2026-09-24 16:00:00, a funding time: its payments are the last of (T1, T2].
T2 = 1_790_265_600
#: Two days later, a few seconds past a minute.
T3 = T2 + 2 * DAY_S + 77
MOMENTS = (T1, T2, T3)
#: Deposits pending at T1 were made at most two days before it (docs/simulator.md).
SINCE = T1 - 3 * DAY_S
MAIN, SUB = "main", "sub_1"


def _instant(moment: int) -> datetime:
    return datetime.fromtimestamp(moment, UTC)


def day_of(moment: int) -> date:
    return _instant(moment).date()


@dataclass
class Ledger:
    sim: Simulator
    root: Path
    accounts: dict[str, Extraction]
    #: What the simulator's ledger says each account holds at each moment, per asset: its
    #: balances and the principal of its active investments.
    held: dict[tuple[str, int], Flows]

    def query(self, sql: str, *params: object, root: Path | None = None) -> list[tuple[Any, ...]]:
        with catalog.connect(Warehouse.open(root or self.root)) as con:
            return con.execute(sql, list(params) or None).fetchall()


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ledger]:
    """The two accounts' snapshots at T1, T2 and T3, their histories read at T3; the simulator
    stays at T3 for the tests that read an answer again."""
    root = tmp_path_factory.mktemp("ledger") / "warehouse"
    with Simulator(seed=7, scale=Scale.small(), clock=SimClock(T1), rate_limits=False) as sim:
        wh = Warehouse.open(root)
        accounts = {
            MAIN: Extraction(sim, wh, MAIN, sim.credentials),
            SUB: Extraction(sim, wh, SUB, sim.credentials_for(SUB)),
        }
        held = {}
        for moment in MOMENTS:
            sim.clock.advance(moment - sim.clock.now())
            for name, account in accounts.items():
                account.snapshot(main=name == MAIN)
                held[name, moment] = sum_of(
                    balances(sim, account.creds), investments_state(sim, account.creds)[0]
                )
        for name, account in accounts.items():
            account.histories(SINCE, main=name == MAIN)
        catalog.refresh(wh)
        asyncio.run(_prices(sim, wh))
        catalog.refresh(wh)
        yield Ledger(sim, root, accounts, held)


async def _prices(sim: Simulator, wh: Warehouse) -> None:
    """The exchange's candles of what the accounts hold or moved, as the prices asset loads
    them: over loopback HTTP, with no key."""
    async with AsyncWhiteBIT(base_url=sim.url, pacing=False, retry=FAST_RETRIES) as client:
        priced = await load_prices(
            client,
            wh,
            today=day_of(T3),
            extracted_at=_instant(T3),
            source=sources.Source.address(sim.url),
            environ={},
        )
    assert priced.load is not None
    assert priced.load.written.rows > 0


def test_every_interval_of_a_main_account_and_a_sub_account_reconciles(ledger: Ledger) -> None:
    intervals = ledger.query(
        "SELECT account, opening_date, closing_date, opening_at, closing_at, reconciled "
        "FROM reconciliation_intervals ORDER BY ALL"
    )
    assert intervals == [
        (account, day_of(t1), day_of(t2), _instant(t1), _instant(t2), True)
        for account in (MAIN, SUB)
        for t1, t2 in itertools.pairwise(MOMENTS)
    ]
    assert ledger.query("SELECT * FROM reconciliation") == []


def test_every_asset_the_simulator_holds_is_checked_at_its_balance(ledger: Ledger) -> None:
    """The holdings the statement closes T3 with are the simulator's own sums at T3 (main,
    trading and collateral), asset by asset, none left out, and the principal of the active
    investments (which no balance of the simulator holds)."""
    for account, role in ((MAIN, "partner"), (SUB, SUB)):
        held = balances(ledger.sim, ledger.sim.credentials_for(role))
        rows = ledger.query(
            "SELECT h.ticker, h.main_balance + h.trading_balance + h.collateral_balance, "
            "h.invested, s.closing FROM holdings AS h JOIN account_statement AS s "
            "ON s.account = h.account AND s.closing_date = h.snapshot_date "
            "AND s.ticker = h.ticker WHERE h.account = ? AND h.snapshot_date = ?",
            account,
            day_of(T3),
        )
        assert {ticker: balance for ticker, balance, _, _ in rows} == held, account
        with localcontext() as exact:
            exact.prec = PRECISION  # 28 digits would round a sum of twenty-digit amounts
            summed = [balance + invested for _, balance, invested, _ in rows]
        assert [closing for _, _, _, closing in rows] == summed
        assert any(invested for _, _, invested, _ in rows) == (account == MAIN)


def test_the_intervals_hold_every_kind_of_flow(ledger: Ledger) -> None:
    """Each rule of the statement placed records that moved the balances: none of the
    reconciliations above holds by having nothing to reconcile."""
    moved = {
        (account, kind)
        for account, kind in ledger.query(
            "SELECT DISTINCT s.account, k.kind FROM account_statement AS s, "
            "(VALUES ('deposits'), ('withdrawals'), ('withdrawals_returned'), ('spot_trades'), "
            "('conversions'), ('funding'), ('realized_pnl'), ('position_fees'), "
            "('transfers_in'), ('transfers_out'), ('interest')) AS k(kind) "
            "WHERE CASE k.kind WHEN 'deposits' THEN s.deposits "
            "WHEN 'withdrawals' THEN s.withdrawals "
            "WHEN 'withdrawals_returned' THEN s.withdrawals_returned "
            "WHEN 'spot_trades' THEN s.spot_trades WHEN 'conversions' THEN s.conversions "
            "WHEN 'funding' THEN s.funding WHEN 'realized_pnl' THEN s.realized_pnl "
            "WHEN 'position_fees' THEN s.position_fees WHEN 'transfers_in' THEN s.transfers_in "
            "WHEN 'interest' THEN s.interest ELSE s.transfers_out END <> 0"
        )
    }
    kinds = {kind for _, kind in moved}
    assert kinds == {
        "deposits", "withdrawals", "withdrawals_returned", "spot_trades", "conversions",
        "funding", "realized_pnl", "position_fees", "transfers_in", "transfers_out", "interest",
    }  # fmt: skip
    assert {account for account, _ in moved} == {MAIN, SUB}


def test_an_investment_ends_at_its_payment_time(ledger: Ledger) -> None:
    """Investments active at T1 end between the snapshots: closed at T3, last updated at their
    payment time, their principal out of the invested holdings (and back in the main balance, as
    every interval reconciles), the rest of their interest an interest flow. No snapshot shows an
    investment active past its payment time."""
    ended = ledger.query(
        "SELECT b.updated = b.payment_time, b.interest_paid > a.interest_paid "
        "FROM investments AS a JOIN investments AS b USING (account, investment_id) "
        "WHERE a.snapshot_date = ? AND b.snapshot_date = ? AND a.status = 1 AND b.status = 2",
        day_of(T1),
        day_of(T3),
    )
    assert ended
    assert all(updated for updated, _ in ended)
    assert any(more_interest for _, more_interest in ended)
    for moment in MOMENTS:
        late = ledger.query(
            "SELECT investment_id FROM investments "
            "WHERE snapshot_date = ? AND status = 1 AND payment_time <= ?",
            day_of(moment),
            _instant(moment),
        )
        assert late == [], moment


def test_the_settle_rule_meets_deposits_pending_at_either_end(ledger: Ledger) -> None:
    """A deposit pending at an opening snapshot and credited by the closing one, and one made
    in an interval and still pending at its close: both there, so the rule was needed."""
    credited_later = ledger.query(
        "SELECT count(*) FROM pending_flows AS p JOIN reconciliation_intervals AS i "
        "ON i.account = p.account AND i.opening_date = p.snapshot_date "
        "JOIN deposits_withdrawals AS d ON d.account = p.account "
        "AND d.transaction_id = p.transaction_id "
        "WHERE p.method = 1 AND d.status IN (3, 7) AND p.transaction_id NOT IN "
        "(SELECT transaction_id FROM pending_flows AS q "
        "WHERE q.account = p.account AND q.snapshot_date = i.closing_date)"
    )
    pending_at_close = ledger.query(
        "SELECT count(*) FROM pending_flows AS p JOIN reconciliation_intervals AS i "
        "ON i.account = p.account AND i.closing_date = p.snapshot_date "
        "WHERE p.created_at >= i.opening_at"
    )
    assert credited_later[0][0] > 0
    assert pending_at_close[0][0] > 0


def test_a_funding_payment_at_the_closing_instant_is_in_the_interval(ledger: Ledger) -> None:
    at_close = ledger.query(
        "SELECT count(*) FROM funding_history WHERE account = ? AND funding_time = ?",
        MAIN,
        _instant(T2),
    )
    assert at_close[0][0] > 0


_CUT = Decimal(10) ** -18


def _times(amount: Decimal, price: Decimal) -> Decimal:
    """``amount * price`` cut toward zero at 18 places, as the views value."""
    with localcontext() as context:
        context.prec = PRECISION
        return (amount * price).quantize(_CUT, rounding=ROUND_DOWN)


class _Closes:
    """Each asset's price in USDT on a day, from the simulator's own candles as its clock (T3)
    makes them: its market's close, else the product of two closes through an intermediate."""

    def __init__(self, sim: Simulator, assets: set[str]) -> None:
        self.candles = sim.state.prices
        self.paths, self.unpriced = price_paths(
            orjson.loads(self.candles.markets_body), assets, "USDT"
        )

    def __call__(self, asset: str, day: date) -> Decimal | None:
        if asset == "USDT":
            return Decimal(1)
        if asset in self.unpriced:
            return None
        number = int(datetime.combine(day, datetime.min.time(), UTC).timestamp()) // DAY_S
        closes = [Decimal(str(self.candles.candle(m, number, T3)[2])) for m in self.paths[asset]]
        return closes[0] if len(closes) == 1 else _times(*closes)


def test_the_value_and_earnings_by_source_are_the_ledgers_at_the_exchanges_closes(
    ledger: Ledger,
) -> None:
    """Each snapshot's value is the simulator's holdings at that moment, each at the close of
    the day before it; the month's earnings are the flows the statement places (which reconcile
    to the ledger), each valued at its day's close, summed by source, with the market effect
    the remainder: all to the last of 18 decimals. Funding is the simulator's funding history.
    The return is Modified Dietz, to double precision; a transfer between the two accounts is
    worth as much on both sides, so it nets to zero across them."""
    assets = {t for held in ledger.held.values() for t in held}
    flows_placed = ledger.query(
        "SELECT account, kind, ticker, day, moved_at, amount, fee, record_id "
        "FROM flow_placement WHERE closing_date IN (?, ?)",
        day_of(T2),
        day_of(T3),
    )
    price = _Closes(ledger.sim, assets | {row[2] for row in flows_placed})
    assert price.unpriced == ["XLM"]  # held at zero: a zero is worth zero, named nowhere
    values = {}
    for (account, moment), held in ledger.held.items():
        on = day_of(moment) - timedelta(days=1)
        values[account, moment] = sum(
            (_times(h, p) for t, h in held.items() if h and (p := price(t, on)) is not None),
            Decimal(0),
        )
    got = ledger.query("SELECT account, snapshot_at, value, unpriced_assets FROM account_value")
    assert {(a, t): (v, u) for a, t, v, u in got} == {
        (a, _instant(m)): (v, []) for (a, m), v in values.items()
    }
    rows = {
        r[0]: r[1:]
        for r in ledger.query(
            "SELECT account, month, opening_value, net_contributions, funding, interest, "
            "realized_pnl, fees, market_effect, closing_value, unpriced_assets, monthly_return "
            "FROM monthly_earnings"
        )
    }
    assert set(rows) == {MAIN, SUB}
    funding_paid = {
        name: sum(
            (
                Decimal(e["fundingAmount"])
                for e in every(ledger.sim, spec.FUNDING_HISTORY, {}, account.creds)
                if T1 < int(e["fundingTime"]) <= T3
            ),
            Decimal(0),
        )
        for name, account in ledger.accounts.items()
    }
    # A transfer's value on each side it has in the warehouse (sub_2 is not extracted).
    transfers: dict[str, list[Decimal]] = defaultdict(list)
    for account, (month, *figures, unpriced, monthly_return) in rows.items():
        by: dict[str, Decimal] = defaultdict(Decimal)
        weighted = Fraction(0)
        for _, kind, ticker, day, moved_at, amount, fee, record in (
            r for r in flows_placed if r[0] == account
        ):
            p = price(ticker, day)
            assert p is not None, ticker
            net, fee_value = _times(amount, p) - _times(fee, p), _times(fee, p)
            source = "contributions" if kind in spec.CONTRIBUTION_KINDS else kind
            by[source] += net
            by["fees"] += fee_value
            if kind.startswith("transfers"):
                transfers[record].append(net)
            if source == "contributions":
                left = (_instant(T3) - moved_at) / (_instant(T3) - _instant(T1))
                weighted += Fraction(net) * Fraction(min(1.0, max(0.0, left)))
        opening, closing = values[account, T1], values[account, T3]
        sources_ = [by[k] for k in ("contributions", "funding", "interest", "realized_pnl")]
        market = closing - opening - sum(sources_) - by["fees"]
        assert month == day_of(T3).strftime("%Y-%m")
        assert figures == [opening, *sources_, by["fees"], market, closing], account
        assert unpriced == []
        assert sum(figures[:-1]) == closing  # to the last digit, by its construction
        assert by["funding"] == funding_paid[account] != 0, account
        dietz = Fraction(closing - opening - by["contributions"]) / (Fraction(opening) + weighted)
        assert monthly_return == pytest.approx(float(dietz), rel=1e-12, abs=1e-15)
    between = [sides for sides in transfers.values() if len(sides) == 2]
    assert between
    assert all(sum(sides) == 0 for sides in between)
    ((accounts, total, contributions),) = ledger.query(
        "SELECT accounts, closing_value, net_contributions FROM monthly_earnings_across_accounts"
    )
    assert accounts == 2
    assert total == values[MAIN, T3] + values[SUB, T3]
    assert contributions == rows[MAIN][2] + rows[SUB][2]


def test_each_order_is_the_sum_of_its_fills_and_each_fill_has_its_order(ledger: Ledger) -> None:
    """What the checks over the views read: the simulator's orders sum their fills (its dealStock,
    dealMoney and dealFee), and no fill is without its order at T3."""
    compared = ledger.query(
        "SELECT account, count(*) FILTER (WHERE fills_held), "
        "count(*) FILTER (WHERE fills_held AND NOT matches) FROM orders_with_fills "
        "GROUP BY account ORDER BY account"
    )
    assert [(account, mismatched) for account, _, mismatched in compared] == [(MAIN, 0), (SUB, 0)]
    assert all(held > 50 for _, held, _ in compared)
    orphans = ledger.query(
        "SELECT count(*) FROM trades AS t WHERE NOT EXISTS (SELECT 1 FROM orders AS o "
        "WHERE o.account = t.account AND o.order_id = t.order_id)"
    )
    assert orphans == [(0,)]


def test_a_collateral_fill_is_its_position_events_change(ledger: Ledger) -> None:
    """Why the statement counts a collateral fill's fee once, from the position events: each
    fill of a perpetual market is one position event, at the same instant, with the same fee."""
    ((fills, paired, same),) = ledger.query(
        "SELECT (SELECT count(*) FROM trades WHERE regexp_matches(market, ?)), count(*), "
        "count(*) FILTER (WHERE t.fee = p.trade_fee AND t.trade_time = p.event_time) "
        "FROM trades AS t JOIN position_events AS p "
        "ON p.account = t.account AND p.order_id = t.order_id",
        spec.PERP_MARKET,
    )
    assert fills > 0
    assert fills == paired == same


@pytest.mark.slow  # the statement twice per history
def test_each_historys_declared_flows_are_what_the_statement_needs(ledger: Ledger) -> None:
    """Walking the declarations: without one history's flows (flow_records made from the others'),
    the residuals are exactly what that history's kinds placed in each interval, and a history
    whose records moved anything leaves some. No history's flows are spare, and none is counted
    twice."""
    for history in spec.HISTORIES.values():
        kinds = sorted({flow.kind for flow in history.flows})
        others = [h for h in spec.HISTORIES.values() if h is not history]
        with catalog.connect(Warehouse.open(ledger.root)) as con:
            placed = con.execute(
                "SELECT account, ticker, opening_date, closing_date, moved FROM "  # noqa: S608
                f"(SELECT *, {' + '.join(kinds) or '0'} AS moved FROM account_statement) "
                "WHERE moved <> 0 ORDER BY ALL"
            ).fetchall()
            moved = con.execute(
                "SELECT count(*) FROM flow_records WHERE source = ? AND amount <> 0", [history.name]
            ).fetchone()
            # A view of this connection's own is read before the catalog's, by the views too.
            con.execute(f"CREATE TEMP VIEW flow_records AS {flows.records_sql(others)}")
            named = con.execute(
                "SELECT account, ticker, opening_date, closing_date, residual FROM reconciliation "
                "ORDER BY ALL"
            ).fetchall()
        assert named == placed, history.name
        assert bool(named) == bool(moved and moved[0]), history.name


# --- A record dropped -------------------------------------------------------------------------

#: What a test drops: the account whose answer it is dropped from, the history, the edit that
#: drops it, and the reconciliation's rows then expected.
Dropped = tuple[str, spec.History, Edit, list[tuple[Any, ...]]]


def _without(history: spec.History, *keys: str, value: tuple[object, ...]) -> Edit:
    """An edit that drops the records of ``history`` whose ``keys`` hold ``value``."""

    def kept(record: dict[str, Any]) -> bool:
        return tuple(record[k] for k in keys) != value

    def drop(edited: spec.History, answer: Any) -> Any:
        if edited is not history:
            return answer
        if isinstance(answer, dict):
            return {owner: [r for r in rs if kept(r)] for owner, rs in answer.items()}
        return [r for r in answer if kept(r)]

    return drop


def _pending_deposit(ledger: Ledger) -> Dropped:
    """A deposit of the sub-account pending at T1 and credited by T2."""
    ((transaction, ticker, credited),) = ledger.query(
        "SELECT transaction_id, ticker, amount - fee FROM deposits_withdrawals "
        "WHERE account = ? AND method = 1 AND status IN (3, 7) AND transaction_id IN "
        "(SELECT transaction_id FROM pending_flows WHERE account = ? AND snapshot_date = ?) "
        "ORDER BY transaction_id LIMIT 1",
        SUB,
        SUB,
        day_of(T1),
    )
    history = spec.DEPOSITS_WITHDRAWALS
    edit = _without(history, "transactionId", value=(transaction,))
    return SUB, history, edit, [(SUB, ticker, day_of(T1), day_of(T2), credited)]


def _transfer(ledger: Ledger) -> Dropped:
    """A transfer from the main account to the sub-account between T2 and T3: both sides."""
    ((transfer, ticker, amount),) = ledger.query(
        "SELECT transfer_id, ticker, amount FROM subaccount_transfers AS t "
        "JOIN subaccounts AS s ON s.account = t.account AND s.subaccount_id = t.subaccount_id "
        "AND s.snapshot_date = ? WHERE t.account = ? AND s.alias = ? "
        "AND t.direction = 'main_to_sub' AND t.created_at >= ? AND t.created_at < ? "
        "ORDER BY transfer_id LIMIT 1",
        day_of(T3),
        MAIN,
        SUB,
        _instant(T2),
        _instant(T3),
    )
    history = spec.SUBACCOUNT_TRANSFERS_HISTORY
    edit = _without(history, "transactionId", value=(transfer,))
    interval = (day_of(T2), day_of(T3))
    both = [(MAIN, ticker, *interval, -amount), (SUB, ticker, *interval, amount)]
    return MAIN, history, edit, both


def _funding_at_close(ledger: Ledger) -> Dropped:
    """The funding of the main account's first market at T2 (both sides of a hedged one)."""
    ((market, amount),) = ledger.query(
        "SELECT market, sum(funding_amount) FROM funding_history WHERE account = ? "
        "AND funding_time = ? GROUP BY market ORDER BY market LIMIT 1",
        MAIN,
        _instant(T2),
    )
    history = spec.FUNDING
    edit = _without(history, "market", "fundingTime", value=(market, str(T2)))
    return MAIN, history, edit, [(MAIN, spec.SETTLEMENT_TICKER, day_of(T1), day_of(T2), amount)]


@pytest.mark.parametrize(
    "pick", [_pending_deposit, _transfer, _funding_at_close], ids=["deposit", "transfer", "funding"]
)
def test_a_record_dropped_from_an_answer_is_named_with_its_amount(
    ledger: Ledger, tmp_path: Path, pick: Callable[[Ledger], Dropped]
) -> None:
    """The warehouse copied, the answer read again without the record and written over the
    copy's: the reconciliation names the account (both, for a transfer), the asset, the
    interval and the amount the records no longer explain."""
    account, history, edit, expected = pick(ledger)
    copy = tmp_path / "warehouse"
    shutil.copytree(ledger.root, copy)
    reader = Extraction(ledger.sim, Warehouse.open(copy), account, ledger.accounts[account].creds)
    reader.edit = edit
    reader.histories(SINCE, main=account == MAIN, only=[history])
    catalog.refresh(Warehouse.open(copy))
    named = ledger.query(
        "SELECT account, ticker, opening_date, closing_date, residual FROM reconciliation "
        "ORDER BY account",
        root=copy,
    )
    assert named == expected
    assert all(row[-1] != 0 for row in named)


# --- Exports for tax tools: what the statement counts, as each tool documents its file ----------

#: Each format's header, in order, as the tool's page gives it (docs/exports.md cites them).
KOINLY = ("Date", "Sent Amount", "Sent Currency", "Received Amount", "Received Currency",
          "Fee Amount", "Fee Currency", "Net Worth Amount", "Net Worth Currency", "Label",
          "Description", "TxHash")  # fmt: skip
ROTKI_TRADES = ("Location", "Spend Currency", "Spend Amount", "Receive Currency",
                "Receive Amount", "Fee", "Fee Currency", "Description", "Timestamp")  # fmt: skip
ROTKI_EVENTS = ("Type", "Location", "Currency", "Amount", "Fee", "Fee Currency", "Description",
                "Timestamp")  # fmt: skip


def _export(ledger: Ledger, out: Path, *args: str) -> Any:
    env = {"WAREHOUSE_ROOT": str(ledger.root), "PATH": os.environ.get("PATH", "")}
    return invoke(["export", *args, "--out", str(out)], env)


def _read(file: Path) -> list[dict[str, str]]:
    with file.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_each_export_is_the_tools_file_of_what_the_statement_counts(
    ledger: Ledger, tmp_path: Path
) -> None:
    """Koinly's universal template and rotki's two generic imports, for each account: the header
    as documented, the date as documented, a row per record that moved anything, and per asset
    the year's received - sent - fee exactly its net_flows."""
    year = day_of(T1).year
    for account in (MAIN, SUB):
        expected = {
            f"{source} {record_id}"
            for source, record_id in ledger.query(
                "SELECT DISTINCT source, record_id FROM (SELECT source, record_id, "
                "sum(amount) AS a, sum(fee) AS f FROM flow_records WHERE account = ? AND "
                "year(day) = ? GROUP BY source, record_id, ticker) WHERE a <> 0 OR f <> 0",
                account,
                year,
            )
        }
        net = dict(
            ledger.query(
                "SELECT ticker, sum(net) FROM net_flows WHERE account = ? AND year(flow_date) = ? "
                "GROUP BY ticker HAVING sum(net) <> 0",
                account,
                year,
            )
        )
        files = {}
        for name, header in (
            ("koinly", KOINLY), ("rotki-trades", ROTKI_TRADES), ("rotki-events", ROTKI_EVENTS)
        ):  # fmt: skip
            out = tmp_path / f"{account}-{name}.csv"
            ran = _export(ledger, out, "--format", name, "--account", account, "--year", str(year))
            assert ran.exit_code == 0, ran.output
            assert out.read_bytes().decode().split("\r\n")[0] == ",".join(header)
            files[name] = _read(out)
        koinly, trades, events = files["koinly"], files["rotki-trades"], files["rotki-events"]
        assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", r["Date"]) for r in koinly)
        assert {r["Date"][:4] for r in koinly} == {str(year)}
        stamps = [int(r["Timestamp"]) for r in (*trades, *events)]
        first, last = (datetime(y, 1, 1, tzinfo=UTC).timestamp() * 1000 for y in (year, year + 1))
        assert all(first <= s < last for s in stamps)
        rotki = [*trades, *events]
        for rows in (koinly, rotki):
            records = [r["Description"].partition(": ")[2] for r in rows]
            assert len(records) == len(set(records)), account  # one row per record
            assert set(records) == expected, account
        assert {r["Type"] for r in events} <= {"Deposit", "Withdrawal", "Income", "Loss", "Spend"}
        assert {r["Location"] for r in rotki} == {"external"}
        # Every kind of record the account has is in: the interest of the main account's
        # investments too (a sub-account holds none).
        kinds = {r["Description"].partition(":")[0].removeprefix("WhiteBIT ") for r in koinly}
        assert set("/".join(kinds).split("/")) == {*spec.FLOW_KINDS} - {
            "withdrawals_returned",
            *(["interest"] if account == SUB else []),
        }
        assert _nets(koinly) == net, account
        assert _nets(trades, events) == net, account


#: Where a row of each file says an amount, its ticker, and which way it moves the holdings.
_SIDES = (
    ("Received Amount", "Received Currency", 1), ("Sent Amount", "Sent Currency", -1),
    ("Fee Amount", "Fee Currency", -1),  # Koinly
    ("Receive Amount", "Receive Currency", 1), ("Spend Amount", "Spend Currency", -1),
    ("Fee", "Fee Currency", -1),  # rotki's both files
)  # fmt: skip


def _nets(*files: list[dict[str, str]]) -> dict[str, Decimal]:
    """Per asset, the files' received - sent - fee, exact (not zero)."""
    found: dict[str, Decimal] = defaultdict(Decimal)
    with localcontext() as context:
        context.prec = PRECISION
        for row in itertools.chain(*files):
            sides = [*_SIDES]
            if "Type" in row:  # rotki's events: the type says which way
                sides.append(
                    ("Amount", "Currency", 1 if row["Type"] in ("Deposit", "Income") else -1)
                )
            for amount, ticker, sign in sides:
                if row.get(amount):
                    found[row[ticker]] += sign * Decimal(row[amount])
    return {ticker: total for ticker, total in found.items() if total}


def test_export_mistakes_each_say_one_line(ledger: Ledger, tmp_path: Path) -> None:
    """An unknown format, an unknown account, a year without movements, an --out that cannot be
    written: each one line naming it, and no file left."""
    year = str(day_of(T1).year)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    cases = {
        "'tax-o-matic'": ("--format", "tax-o-matic", "--account", MAIN, "--year", year),
        "'nobody'": ("--format", "koinly", "--account", "nobody", "--year", year),
        "no movement in 1999": ("--format", "koinly", "--account", MAIN, "--year", "1999"),
    }
    for named, args in cases.items():
        ran = _export(ledger, tmp_path / "out.csv", *args)
        assert ran.exit_code == 1, ran.output
        assert ran.output.count("\n") == 1, ran.output
        assert named in ran.output
    ran = _export(
        ledger, blocker / "out.csv", "--format", "koinly", "--account", MAIN, "--year", year
    )
    assert ran.exit_code == 1, ran.output
    assert ran.output.count("\n") == 1, ran.output
    assert str(blocker) in ran.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]
