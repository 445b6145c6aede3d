"""The demo's runs through Dagster, on the embedded simulator: the day between its two snapshots
reconciles to zero for every asset of both accounts, plans that ended that day among them; then
the exchange's prices value both accounts and their day's earnings."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest
from rich.console import Console

from assets.cli._materialize import demo_requests
from assets.definitions import Location, location
from assets.instance import instance
from assets.jobs import prices_request
from assets.runs import materialize
from assets.settings import Settings
from warehouse import Warehouse, catalog

#: The day the demo is asked on: its snapshots are of this day's start and the day's before.
ASKED = date(2026, 10, 15)
#: Days of history before the opening snapshot the test's runs keep of the demo's ranges: the
#: deposits pending at the opening were made at most two days before it (docs/simulator.md).
LEAD_DAYS = 3


#: The tables the statement and the reconciliation read: the runs leave the demo's others out.
STATEMENT_TABLES = frozenset({
    "trades", "position_events", "funding_history", "conversions", "deposits_withdrawals",
    "subaccount_transfers", "pending_flows", "subaccounts", "main_balances", "trading_balances",
    "collateral_balances", "investments", "fixed_plans",
})  # fmt: skip


def _narrowed(demo: Location, account: str, request: dg.RunRequest, first: date) -> dg.RunRequest:
    """The demo's run of the statement's tables, its histories from ``first`` on (up to the
    demo's own last day): the days that could move the balances between the two snapshots
    (deposits pending at the first one included), not the demo's months before them."""
    assets = demo.assets_of(account)
    selection = [k for k in request.asset_selection or () if k.path[-1] in STATEMENT_TABLES]
    ops = (request.run_config or {}).get("ops", {})
    config = {
        "ops": {
            op: {"config": {**body["config"], "first_day": first.isoformat()}}
            for op, body in ops.items()
            if any(
                assets.tables[t].node_def.name == op for t in STATEMENT_TABLES & {*assets.tables}
            )
        }
    }
    return request.with_replaced_attrs(
        asset_selection=selection,
        asset_check_keys=assets.run_checks(selection),
        run_config=config if ops else request.run_config,
    )


@pytest.mark.slow
def test_the_demos_day_between_its_two_snapshots_reconciles_to_zero(tmp_path: Path) -> None:
    """The demo's runs, as it asks for them on ``ASKED`` (of the tables and days the statement
    reads): its two snapshots stand at the
    simulator's midnights (the day before's and ``ASKED``'s), and every asset of both accounts
    moved between them by exactly the flows of the histories loaded, the funding paid at the
    closing midnight (in the balances of the closing snapshot) included."""
    settings = Settings.from_env({"WAREHOUSE_ROOT": str(tmp_path / "warehouse")})
    demo = location(settings)
    opening = datetime.combine(ASKED - timedelta(days=1), datetime.min.time(), UTC)
    closing = opening + timedelta(days=1)
    first = opening.date() - timedelta(days=LEAD_DAYS)
    quiet = Console(quiet=True)
    with instance(settings, command_line=True) as runs:
        for account, request in demo_requests(demo.built, ASKED):
            narrowed = _narrowed(demo, account, request, first)
            outcome = materialize(demo, narrowed, runs, console=quiet, title=account)
            assert outcome.success, (account, outcome.said)
        assert demo.prices is not None
        priced = materialize(
            demo, prices_request(demo.prices, ASKED), runs, console=quiet, title="exchange"
        )
        assert priced.success, priced.said
    wh = Warehouse.open(tmp_path / "warehouse")
    catalog.refresh(wh)
    with catalog.connect(wh) as con:
        intervals = con.execute(
            "SELECT account, opening_at, closing_at, assets_checked > 1, reconciled "
            "FROM reconciliation_intervals ORDER BY account"
        ).fetchall()
        off = con.execute("SELECT account, ticker, residual FROM reconciliation").fetchall()
        paid_at_close = con.execute(
            "SELECT DISTINCT account FROM funding_history WHERE funding_time = ? ORDER BY 1",
            [closing],
        ).fetchall()
        ended = con.execute(
            "SELECT a.account, a.investment_id, b.updated FROM investments AS a "
            "JOIN investments AS b USING (account, investment_id) WHERE a.snapshot_date = ? "
            "AND b.snapshot_date = ? AND a.status = 1 AND b.status = 2",
            [opening.date(), closing.date()],
        ).fetchall()
        active_past_term = con.execute(
            "SELECT i.investment_id FROM investments AS i JOIN holdings AS h "
            "USING (account, snapshot_date) WHERE i.status = 1 AND i.payment_time <= h.snapshot_at"
        ).fetchall()
        valued = con.execute(
            "SELECT account, count(*), bool_and(value > 0), flatten(list(unpriced_assets)) "
            "FROM account_value GROUP BY account ORDER BY account"
        ).fetchall()
        earned = con.execute(
            "SELECT account, opening_date, closing_date, opening_value + net_contributions "
            "+ funding + interest + realized_pnl + fees + market_effect = closing_value, "
            "funding <> 0, monthly_return IS NOT NULL FROM monthly_earnings ORDER BY account"
        ).fetchall()
        team = con.execute(
            "SELECT e.accounts, e.closing_value = v.value FROM monthly_earnings_across_accounts "
            "AS e JOIN value_across_accounts AS v ON v.value_date = ?",
            [ASKED - timedelta(days=1)],
        ).fetchall()
    assert off == []
    # Both accounts worth something at both snapshots, every asset held priced; the day's
    # earnings sum to the closing value, funding among them, and the team's is both accounts'.
    assert valued == [(account, 2, True, []) for account in ("main", "sub_1")]
    assert earned == [
        (account, opening.date(), closing.date(), True, True, True) for account in ("main", "sub_1")
    ]
    assert team == [(2, True)]
    # Plans ended between the snapshots, at their payment times, their principal given back:
    # the day reconciles with them.
    assert ended
    assert all(opening < updated <= closing for _, _, updated in ended)
    assert active_past_term == []
    assert intervals == [(account, opening, closing, True, True) for account in ("main", "sub_1")]
    # The closing instant is a funding time: its payments moved the closing balances.
    assert paid_at_close == [("main",), ("sub_1",)]
