"""Checks of what an account's data says, read from the catalog's views (`checks` has those of
the partitions a run wrote):

- ``fills_have_orders`` (warns): every fill's order is among the account's closed orders, but
  for fills of an order that may still be open. The order history lists closed orders only, so
  an order is taken as still open when its latest fill held came after the newest close the
  account's orders hold (`OPEN_RULE`): an order filled since its orders were last read may not
  have closed. An order still open that has not been filled since is named too; it warns rather
  than fails because a limit order can stay open for weeks.
- ``orders_match_fills``: an order's deal_stock, deal_money and deal_fee are the sums of its
  fills, where every fill of it is in the warehouse (``orders_with_fills.fills_held``).
- ``unlisted_values`` (warns): a value of a column the declarations keep when it is new
  (``unlisted="keep"``) that they do not document: a status whose label is null, a text outside
  its ``choices``; each named with its count.
- ``balances_reconcile`` (blocking): between consecutive snapshots, each asset's holdings moved
  by exactly the flows its records tell (``reconciliation``); a residual names the account, the
  asset, the days and the amount.
- ``holdings_valued`` (warns): every asset held at a snapshot or moved in an interval has a
  price on its day (``account_value``, ``flow_values``); one without is named with its days.

Which table's asset carries which (`view_specs`) follows the declarations: the fills and the
orders (`spec.TRADES`, `spec.ORDERS`), the snapshot whose instant opens and closes an interval
(`spec.MAIN_BALANCES`), and every history with a kept column. Each check is a plain function of
the warehouse and an account; `for_views` gives a table's results, for the specs `view_specs`
declares. They read the catalog, so they run once the night's tables are written, in the daily
watch job (`views_check`), over the intervals that closed before the day it runs: the histories
of the day the latest snapshot was taken are written the night after, and until then its
interval's residual is that day's flows.
"""

from collections.abc import Collection, Iterator, Mapping, Sequence
from datetime import date
from typing import Any, Final

import dagster as dg
from dagster import AssetCheckExecutionContext

from pipeline import spec
from warehouse import catalog, display, schemas
from warehouse.root import Warehouse

from .resources import WarehouseResource

FILLS_HAVE_ORDERS: Final = "fills_have_orders"
ORDERS_MATCH_FILLS: Final = "orders_match_fills"
UNLISTED_VALUES: Final = "unlisted_values"
BALANCES_RECONCILE: Final = "balances_reconcile"
HOLDINGS_VALUED: Final = "holdings_valued"
#: How many a failed check's description names; its metadata counts them all.
FIRST: Final = 5
OPEN_RULE: Final = "filled after the newest close the account's orders hold"


def view_specs(asset: dg.AssetKey, history: spec.History) -> list[dg.AssetCheckSpec]:
    """The checks of the catalog's views the table's asset carries."""
    out = []
    if history.name == spec.TRADES.name:
        out.append(
            dg.AssetCheckSpec(
                FILLS_HAVE_ORDERS,
                asset=asset,
                description="Every fill's order is among the closed orders, but those of an "
                f"order that may still be open ({OPEN_RULE}); warns",
            )
        )
    if history.name == spec.ORDERS.name:
        out.append(
            dg.AssetCheckSpec(
                ORDERS_MATCH_FILLS,
                asset=asset,
                description="Each order's deal sums are its fills' where all its fills are held",
            )
        )
    if kept_columns(history):
        out.append(
            dg.AssetCheckSpec(
                UNLISTED_VALUES,
                asset=asset,
                description="No status or text outside the documented values; warns",
            )
        )
    if history.name == spec.MAIN_BALANCES.name:
        out.append(
            dg.AssetCheckSpec(
                BALANCES_RECONCILE,
                asset=asset,
                blocking=True,
                description="Between snapshots, holdings moved by exactly the flows the records "
                "tell (reconciliation)",
            )
        )
        out.append(
            dg.AssetCheckSpec(
                HOLDINGS_VALUED,
                asset=asset,
                description="Every asset held at a snapshot or moved has a price on its day "
                "(account_value, flow_values); warns",
            )
        )
    return out


def for_views(
    wh: Warehouse,
    account: str,
    history: spec.History,
    *,
    key: dg.AssetKey,
    before: date | None = None,
    only: Collection[str] | None = None,
) -> list[dg.AssetCheckResult]:
    """The results of `view_specs` (those named in ``only``), in its order, of the account's
    whole tables; with ``before``, of the statement's intervals that closed before that day
    only."""
    results = []
    for check in view_specs(key, history):
        if only is not None and check.name not in only:
            continue
        if check.name == FILLS_HAVE_ORDERS:
            results.append(fills_have_orders(wh, account, key=key))
        elif check.name == ORDERS_MATCH_FILLS:
            results.append(orders_match_fills(wh, account, key=key))
        elif check.name == UNLISTED_VALUES:
            results.append(unlisted_values(wh, history.name, account, key=key))
        elif check.name == HOLDINGS_VALUED:
            results.append(holdings_valued(wh, account, before, key=key))
        else:
            results.append(balances_reconcile(wh, account, before, key=key))
    return results


def _answerable(check: str, tables: Collection[str], reconciles: bool) -> bool:
    """Whether the account's tables hold what the check reads: the fills and the orders both;
    for the reconciliation, every history the account's key may read."""
    if check == BALANCES_RECONCILE:
        return reconciles
    if check in (FILLS_HAVE_ORDERS, ORDERS_MATCH_FILLS):
        return {spec.TRADES.name, spec.ORDERS.name} <= set(tables)
    return True


def views_check(
    account: str, keys: Mapping[str, dg.AssetKey], clock: spec.Clock, *, reconciles: bool = True
) -> dg.AssetChecksDefinition | None:
    """The checks of the catalog's views over the account's tables (``keys`` by table name), as
    one definition the watch job runs (None when no table carries one). A check whose tables the
    account does not extract is left out; the reconciliation, unless ``reconciles`` (the
    account extracts every history). Today is ``clock``'s."""
    carried = {
        name: chosen
        for name, key in keys.items()
        if (
            chosen := [
                c
                for c in view_specs(key, spec.HISTORIES[name])
                if _answerable(c.name, keys, reconciles)
            ]
        )
    }
    if not carried:
        return None

    @dg.multi_asset_check(
        specs=[c for specs in carried.values() for c in specs],
        name=f"{account}_views",
        description=f"What the catalog's views say of {account}: fills and their orders, "
        "undocumented values, and the reconciliation of the intervals that closed before today",
        # A job of one table (trades_job) selects that table's checks only.
        can_subset=True,
    )
    def check(
        context: AssetCheckExecutionContext, warehouse: WarehouseResource
    ) -> Iterator[dg.AssetCheckResult]:
        today = clock.today()
        selected = context.selected_asset_check_keys
        # Another machine's run may have written a table this machine's catalog shows empty.
        catalog.refresh_if_stale(warehouse.warehouse)
        for name, specs in carried.items():
            only = [c.name for c in specs if c.key in selected]
            if only:
                yield from for_views(
                    warehouse.warehouse,
                    account,
                    spec.HISTORIES[name],
                    key=keys[name],
                    before=today,
                    only=only,
                )

    return check


def _rows(wh: Warehouse, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of a query over the catalog, as dicts."""
    with catalog.connect(wh) as con:
        # DuckDB refuses a parameter the query does not use.
        found = con.execute(sql, {k: v for k, v in params.items() if f"${k}" in sql})
        names = [d[0] for d in found.description or ()]
        return [dict(zip(names, row, strict=True)) for row in found.fetchall()]


def _text(value: object) -> str:
    return display.text(value)


def fills_have_orders(wh: Warehouse, account: str, *, key: dg.AssetKey) -> dg.AssetCheckResult:
    """Fills whose order is not among the account's orders, by order; those of an order that
    may still be open (`OPEN_RULE`) are counted apart and pass."""
    missing = _rows(
        wh,
        """
        WITH closed AS (SELECT max(finished_at) AS until FROM orders WHERE account = $account)
        SELECT t.order_id, t.market, count(*) AS fills, max(t.trade_time) AS last_fill,
            coalesce(max(t.trade_time) > any_value(closed.until), false) AS may_be_open
        FROM trades AS t, closed
        WHERE t.account = $account AND NOT EXISTS (
            SELECT 1 FROM orders AS o WHERE o.account = t.account AND o.order_id = t.order_id)
        GROUP BY t.order_id, t.market
        ORDER BY may_be_open, last_fill, t.order_id
        """,
        {"account": account},
    )
    named = [m for m in missing if not m["may_be_open"]]
    still_open = [m for m in missing if m["may_be_open"]]
    description = None
    if named:
        shown = "; ".join(
            f"order {m['order_id']} ({m['market']}, {m['fills']} fill(s), the last at "
            f"{_text(m['last_fill'])})"
            for m in named[:FIRST]
        )
        more = f" and {len(named) - FIRST} more" if len(named) > FIRST else ""
        description = (
            f"{sum(m['fills'] for m in named)} fill(s) of {account} belong to "
            f"{len(named)} order(s) not in orders (missing, or open and not filled since its "
            f"orders were read): {shown}{more}"
        )
    return dg.AssetCheckResult(
        check_name=FILLS_HAVE_ORDERS,
        asset_key=key,
        passed=not named,
        severity=dg.AssetCheckSeverity.WARN,
        description=description,
        metadata={
            "orders_missing": len(named),
            "fills_without_order": sum(m["fills"] for m in named),
            "orders_that_may_be_open": len(still_open),
            "fills_of_orders_that_may_be_open": sum(m["fills"] for m in still_open),
            "first_missing": [str(m["order_id"]) for m in named[:FIRST]],
        },
    )


_SUMS: Final = (
    ("deal_stock", "fills_amount", "amount_matches"),
    ("deal_money", "fills_deal", "deal_matches"),
    ("deal_fee", "fills_fee", "fee_matches"),
)


def orders_match_fills(wh: Warehouse, account: str, *, key: dg.AssetKey) -> dg.AssetCheckResult:
    """Orders whose deal sums differ from their fills', among those whose fills are all held."""
    (counted,) = _rows(
        wh,
        "SELECT count(*) FILTER (WHERE fills_held) AS held, "
        "count(*) FILTER (WHERE NOT fills_held) AS not_held "
        "FROM orders_with_fills WHERE account = $account",
        {"account": account},
    )
    differ = _rows(
        wh,
        "SELECT * FROM orders_with_fills WHERE account = $account AND fills_held "
        "AND NOT matches ORDER BY finished_at, order_id",
        {"account": account},
    )

    def differences(row: dict[str, Any]) -> str:
        return ", ".join(
            f"{ordered} {_text(row[ordered])} against {_text(row[summed])}"
            + (f" {row['fee_asset']}" if ordered == "deal_fee" else "")
            for ordered, summed, matches in _SUMS
            if not row[matches]
        )

    shown = "; ".join(
        f"order {r['order_id']} ({r['market']}, {r['fills']} fill(s)): {differences(r)}"
        for r in differ[:FIRST]
    )
    more = f" and {len(differ) - FIRST} more" if len(differ) > FIRST else ""
    return dg.AssetCheckResult(
        check_name=ORDERS_MATCH_FILLS,
        asset_key=key,
        passed=not differ,
        description=None
        if not differ
        else f"{len(differ)} order(s) of {account} differ from the sums of their fills "
        f"(order's against fills'): {shown}{more}",
        metadata={
            "orders_checked": int(counted["held"]),
            "orders_not_checked": int(counted["not_held"]),
            "orders_differing": len(differ),
            "first_differing": [str(r["order_id"]) for r in differ[:FIRST]],
        },
    )


def kept_columns(history: spec.History) -> list[spec.Column]:
    """The columns whose undocumented values land as received: labelled, or of ``choices``."""
    return [
        c for c in history.columns if c.unlisted == "keep" and (c.labelled or c.choices is not None)
    ]


def _unlisted_query(table: str, column: spec.Column, days: bool) -> str:
    name = column.name
    if column.labelled:
        where = f'"{name}_label" IS NULL AND "{name}" IS NOT NULL'
    else:
        where = f'"{name}" IS NOT NULL AND NOT list_contains($choices, "{name}")'
    value = f'"{name}"'
    if column.labels_by is not None:  # read by another column: named with it
        by = column.labels_by[0]
        value = f"'{by} ' || \"{by}\" || ', {name} ' || \"{name}\""
    within = ""
    if days:
        within = f' AND list_contains($days, "{schemas.TABLES[table].partition_column}")'
    return (
        f'SELECT CAST({value} AS VARCHAR) AS value, count(*) AS count FROM "{table}" '  # noqa: S608
        f"WHERE account = $account AND {where}{within} GROUP BY ALL ORDER BY count DESC, value"
    )


def unlisted_values(
    wh: Warehouse,
    table: str,
    account: str,
    days: Sequence[date] | None = None,
    *,
    key: dg.AssetKey,
) -> dg.AssetCheckResult:
    """Values the declarations do not document in the account's table (the partitions of
    ``days``, else all), each with its count: ``side 'hold' (3)``; a status read by another
    column is named with it (``status 'method 1, status 42' (2)``)."""
    history = schemas.TABLES[table].history
    assert history is not None  # a declared table
    found: dict[str, dict[str, int]] = {}
    for column in kept_columns(history):
        rows = _rows(
            wh,
            _unlisted_query(table, column, days is not None),
            {"account": account, "choices": list(column.choices or ()), "days": list(days or [])},
        )
        if rows:
            found[column.name] = {r["value"]: int(r["count"]) for r in rows}
    named = "; ".join(
        f"{name} " + ", ".join(f"{value!r} ({count})" for value, count in values.items())
        for name, values in found.items()
    )
    return dg.AssetCheckResult(
        check_name=UNLISTED_VALUES,
        asset_key=key,
        passed=not found,
        severity=dg.AssetCheckSeverity.WARN,
        description=None
        if not found
        else f"{table} of {account} holds values its documentation does not list: {named}",
        metadata={
            "columns": [c.name for c in kept_columns(history)],
            "unlisted": dg.MetadataValue.json(found),
        },
    )


def balances_reconcile(
    wh: Warehouse,
    account: str,
    before: date | None = None,
    *,
    key: dg.AssetKey,
) -> dg.AssetCheckResult:
    """Residuals of the account's statement (of the intervals closing before the day
    ``before``, else all): each names the asset, the two snapshot days and the amount the
    records do not explain."""
    within = "" if before is None else " AND closing_date < $before"
    params = {"account": account, "before": before}
    residuals = _rows(
        wh,
        "SELECT ticker, opening_date, closing_date, opening, flows, closing, residual "  # noqa: S608
        f"FROM reconciliation WHERE account = $account{within} "
        "ORDER BY closing_date, ticker",
        params,
    )
    (intervals,) = _rows(
        wh,
        "SELECT count(*) AS checked, coalesce(sum(assets_checked), 0) AS lines "  # noqa: S608
        f"FROM reconciliation_intervals WHERE account = $account{within}",
        params,
    )
    candidates = _candidates(wh, account, before)
    shown = "; ".join(
        f"{r['ticker']} {_text(r['opening_date'])} .. {_text(r['closing_date'])}: "
        f"{_text(r['residual'])} (opening {_text(r['opening'])}, flows {_text(r['flows'])}, "
        f"closing {_text(r['closing'])}; "
        + candidates.get((r["ticker"], r["closing_date"]), "no record of this amount")
        + ")"
        for r in residuals[:FIRST]
    )
    more = f" and {len(residuals) - FIRST} more" if len(residuals) > FIRST else ""
    return dg.AssetCheckResult(
        check_name=BALANCES_RECONCILE,
        asset_key=key,
        passed=not residuals,
        description=None
        if not residuals
        else f"{len(residuals)} holding(s) of {account} moved by other than the flows its "
        f"records tell (residual = closing - opening - flows): {shown}{more}",
        metadata={
            "intervals_checked": int(intervals["checked"]),
            "assets_checked": int(intervals["lines"]),
            "residuals": dg.MetadataValue.json(
                [
                    {
                        "ticker": r["ticker"],
                        "opening_date": _text(r["opening_date"]),
                        "closing_date": _text(r["closing_date"]),
                        "residual": _text(r["residual"]),
                        "records": candidates.get(
                            (r["ticker"], r["closing_date"]), "no record of this amount"
                        ),
                    }
                    for r in residuals
                ]
            ),
        },
    )


def holdings_valued(
    wh: Warehouse, account: str, before: date | None = None, *, key: dg.AssetKey
) -> dg.AssetCheckResult:
    """Warns naming each asset the account held at a snapshot, or moved in an interval, that
    has no price on its day (of the snapshots and intervals before the day ``before``, else
    all): the value views leave it out, never count it at zero."""
    within = "" if before is None else " AND snapshot_date < $before"
    placed = "" if before is None else " AND closing_date < $before"
    missing = _rows(
        wh,
        "SELECT ticker, min(day) AS first, max(day) AS last, count(DISTINCT day) AS days "  # noqa: S608
        "FROM (SELECT unnest(unpriced_assets) AS ticker, value_date AS day FROM account_value "
        f"WHERE account = $account{within} UNION ALL SELECT ticker, day FROM flow_values "
        f"WHERE account = $account AND value IS NULL AND amount <> 0{placed}) "
        "GROUP BY ticker ORDER BY ticker",
        {"account": account, "before": before},
    )
    shown = "; ".join(
        f"{r['ticker']} on {r['days']} day(s), {_text(r['first'])} .. {_text(r['last'])}"
        for r in missing[:FIRST]
    )
    more = f" and {len(missing) - FIRST} more" if len(missing) > FIRST else ""
    return dg.AssetCheckResult(
        check_name=HOLDINGS_VALUED,
        asset_key=key,
        passed=not missing,
        severity=dg.AssetCheckSeverity.WARN,
        description=None
        if not missing
        else f"{len(missing)} asset(s) of {account} have no price on a day it held or moved "
        f"them, and are in no value (exchange/daily_candles, asset_prices): {shown}{more}",
        metadata={"unvalued": [r["ticker"] for r in missing]},
    )


def _candidates(wh: Warehouse, account: str, before: date | None) -> dict[tuple[str, date], str]:
    """Per residual (asset, closing day), the records of its amount (``residual_candidates``),
    named: history, day and record, and the interval a record the statement holds is in."""
    within = "" if before is None else " AND closing_date < $before"
    rows = _rows(
        wh,
        "SELECT ticker, closing_date, history, day, record_id, kind, amount, placed_in "  # noqa: S608
        f"FROM residual_candidates WHERE account = $account AND history IS NOT NULL{within} "
        "ORDER BY closing_date, ticker, history, day, record_id",
        {"account": account, "before": before},
    )
    named: dict[tuple[str, date], list[str]] = {}
    for r in rows:
        record = f" {r['record_id']}" if r["record_id"] is not None else ""
        where = f", in the interval closing {_text(r['placed_in'])}" if r["placed_in"] else ""
        what = f"{r['kind']} {_text(r['amount'])}" if r["kind"] else "a field of that value"
        named.setdefault((r["ticker"], r["closing_date"]), []).append(
            f"{r['history']} of {_text(r['day'])}{record} ({what}{where})"
        )
    return {
        key: "records of this amount: "
        + ", ".join(found[:FIRST])
        + (f" and {len(found) - FIRST} more" if len(found) > FIRST else "")
        for key, found in named.items()
    }
