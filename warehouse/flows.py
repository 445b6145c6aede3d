"""The SQL of the account's money made from the histories' flows (`spec.Flow`, `spec.Change`):
the body of the ``flow_records`` view, one ``SELECT`` per declared flow, and each kind's column
of ``net_flows`` and ``account_statement``. The curated views name them as ``{{NAME}}``
(`PARTS`), so that a history declared with its flows is in the views with no SQL of its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from pipeline import spec

#: A sub-account's alias on its main account's latest list (``subaccounts``): the name of its
#: account here.
_NAMES: Final = "subaccount_names"
_SUBACCOUNT_NAMES: Final = """subaccount_names AS (
    SELECT account, subaccount_id, alias
    FROM subaccounts
    QUALIFY snapshot_date = max(snapshot_date) OVER (PARTITION BY account)
)"""


def _as(expression: str, name: str) -> str:
    return name if expression == name else f"{expression} AS {name}"


def _text(history: spec.History, name: str) -> str:
    """A key column as text: a time as ISO 8601 in UTC, to the precision its field has."""
    column = history.columns_by_name[name]
    if column.day_of is not None:
        return f"strftime({name}, '%Y-%m-%d')"
    if column.derived or column.source == spec.OWNER:
        return name
    kind = history.field_of(column).type
    if kind is spec.FieldType.STRING:
        return name
    if kind is spec.FieldType.TIMESTAMP_FRACTIONAL:
        return f"strftime({name} AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%S.%fZ')"
    if kind in (spec.FieldType.TIMESTAMP, spec.FieldType.TIMESTAMP_STRING):
        return f"strftime({name} AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%SZ')"
    return f"CAST({name} AS VARCHAR)"


def record_id(history: spec.History) -> str:
    """The record a flow row comes from, as text: its key's values, space-separated."""
    return " || ' ' || ".join(_text(history, name) for name in history.key)


def _select(history: spec.History, flow: spec.Flow) -> str:
    assert isinstance(history.partition, spec.Monthly)  # a Flow is of a monthly history
    time, day = history.partition.time, history.partition.day
    account, source = "account", history.name
    if flow.account is not None:
        account = "n.alias"
        source = (
            f"{history.name} AS r\nJOIN {_NAMES} AS n "
            f"ON n.account = r.account AND n.subaccount_id = r.{flow.account.column}"
        )
    return (
        f"SELECT {_as(account, 'account')}, {_as(flow.ticker, 'ticker')}, '{flow.kind}' AS kind, "
        f"'{history.name}' AS source,\n"
        f"    {record_id(history)} AS record_id,\n"
        f"    {time} AS moved_at, {day} AS day, '{flow.timing}' AS timing,\n"
        f"    {_as(flow.amount, 'amount')}, CAST({flow.fee} AS DECIMAL(38, 18)) AS fee\n"
        f"FROM {source}" + (f"\nWHERE {flow.where}" if flow.where else "")
    )


def _changes(history: spec.History, change: spec.Change) -> str:
    """The CTEs of a `spec.Change`: the total per ticker on each snapshot, and its change."""
    table, ticker, total = history.name, change.ticker, change.total
    # Names and SQL from the declarations, none from a user.
    return f"""-- The change of {table}.{total} per {ticker} since the snapshot before (zero where
-- a snapshot has no row of a ticker).
{change.kind}_totals AS (
    SELECT d.account, d.snapshot_date, t.ticker, coalesce(sum(r.{total}), 0) AS total
    FROM (SELECT DISTINCT account, snapshot_date FROM {table}) AS d
    JOIN (SELECT DISTINCT account, {ticker} AS ticker FROM {table}) AS t
        ON t.account = d.account
    LEFT JOIN {table} AS r
        ON r.account = d.account AND r.snapshot_date = d.snapshot_date
        AND r.{ticker} = t.ticker
    GROUP BY d.account, d.snapshot_date, t.ticker
),
{change.kind}_changes AS (
    SELECT account, ticker, snapshot_date,
        total - lag(total) OVER (PARTITION BY account, ticker ORDER BY snapshot_date) AS change
    FROM {change.kind}_totals
)"""  # noqa: S608


def _change_select(history: spec.History, change: spec.Change) -> str:
    """A `spec.Change`'s flows, each a record of its snapshot day and ticker."""
    return (
        f"SELECT account, ticker, '{change.kind}' AS kind, '{history.name}' AS source,\n"
        "    strftime(snapshot_date, '%Y-%m-%d') || ' ' || ticker AS record_id,\n"
        "    snapshot_date::TIMESTAMP AT TIME ZONE 'UTC' AS moved_at, snapshot_date AS day, "
        "'snapshot' AS timing,\n"
        "    change AS amount, CAST(0 AS DECIMAL(38, 18)) AS fee\n"
        f"FROM {change.kind}_changes\nWHERE change IS NOT NULL"
    )


def records_sql(histories: Iterable[spec.History]) -> str:
    """The ``flow_records`` query of ``histories``' flows."""
    ctes, selects = [], []
    for history in histories:
        for flow in history.flows:
            if isinstance(flow, spec.Change):
                ctes.append(_changes(history, flow))
                selects.append(_change_select(history, flow))
                continue
            if flow.account is not None and _SUBACCOUNT_NAMES not in ctes:
                ctes.insert(0, _SUBACCOUNT_NAMES)
            selects.append(_select(history, flow))
    union = "\nUNION ALL\n".join(selects)
    return "WITH " + ",\n".join(ctes) + "\n" + union if ctes else union


#: What the views of the account's money name as ``{{NAME}}``.
PARTS: Final = {
    "FLOW_RECORDS": records_sql(spec.HISTORIES.values()),
    "FLOW_KINDS": ", ".join(spec.FLOW_KINDS),
    "CONTRIBUTION_KINDS": ", ".join(f"'{kind}'" for kind in spec.CONTRIBUTION_KINDS),
    # Each kind's sum, a column of its name (net_flows, the statement's placed flows).
    "FLOW_SUMS": "\n".join(
        f"coalesce(sum(amount) FILTER (WHERE kind = '{kind}'), 0) AS {kind},"
        for kind in spec.FLOW_KINDS
    ),
    # Each kind's column of the statement's placed flows (p), zero where none are.
    "FLOW_COLUMNS": "\n".join(f"coalesce(p.{kind}, 0) AS {kind}," for kind in spec.FLOW_KINDS),
}
