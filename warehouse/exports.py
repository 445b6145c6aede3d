"""Exports for tax tools: an account's movements of a UTC year as a file a tool imports, in the
form the tool's own documentation gives (docs/exports.md maps each column and cites the page).

What goes in is what the statement counts: the rows of ``flow_records`` (the histories' declared
flows) of the account whose ``day`` is in the year, so that each asset's received less sent less
fee over an export is its ``net_flows`` over the year, to the last decimal. Each record
(``source``, ``record_id``) is one row: its movements netted per asset (a canceled withdrawal's
give-back cancels it, and a record that moved nothing in the end is left out), the part its flows
declare a fee apart. Amounts are the decimals as stored, never through a float, never rounded.
"""

from __future__ import annotations

import csv
import io
import itertools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, Final

from warehouse import catalog, display
from warehouse.errors import WarehouseError
from warehouse.root import Warehouse
from warehouse.store import read_again, replace_text


class ExportError(WarehouseError):
    """An export that cannot be made as asked (an unknown format, an account the warehouse does
    not hold, a year it holds no movement of)."""


#: An asset and a positive amount of it.
Amount = tuple[str, Decimal]

#: The kinds of flow a trade is made of: a spot fill, a conversion.
TRADES: Final = frozenset({"spot_trades", "conversions"})
#: Kinds that move the account's own money in or out (to an address, or another account).
TRANSFERS: Final = frozenset(
    {"deposits", "withdrawals", "withdrawals_returned", "transfers_in", "transfers_out"}
)
#: Kinds that are the collateral positions' profit or loss (funding paid or received included).
PNL: Final = frozenset({"funding", "realized_pnl"})

# Per record and asset, in the order the records moved: what it moved besides the fee it paid
# (signed as it moves the holdings), and that fee (a fee given back is moved). Summed here, exact:
# Python's decimals round sums to 28 digits.
_MOVEMENTS: Final = """
SELECT source, record_id, ticker, list(DISTINCT kind) AS kinds, min(moved_at) AS at,
    sum(amount) + greatest(-sum(fee), 0) AS moved, greatest(-sum(fee), 0) AS fee
FROM flow_records
WHERE account = ? AND year(day) = ?
GROUP BY source, record_id, ticker
ORDER BY min(min(moved_at)) OVER (PARTITION BY source, record_id), source, record_id, ticker
"""


@dataclass(frozen=True, slots=True)
class Row:
    """One record's movements as a tax tool's row holds them: what left the holdings, what came
    in, and the fee charged, each of one asset and positive."""

    source: str
    record_id: str
    kinds: frozenset[str]
    moved_at: datetime
    sent: Amount | None = None
    received: Amount | None = None
    fee: Amount | None = None

    @property
    def description(self) -> str:
        return f"WhiteBIT {'/'.join(sorted(self.kinds))}: {self.source} {self.record_id}"


def _of(amounts: Sequence[Amount], ticker: str) -> Amount | None:
    return next((amount for amount in amounts if amount[0] == ticker), None)


def _record_rows(
    record: Row, moves: Sequence[tuple[str, Decimal, Decimal]], two_sided: bool
) -> list[Row]:
    """A record's row from its movements per asset (what it moved besides its fee, and the fee);
    a fee alone is what the record sent. A record that does not fit one row (two assets moved the
    same way; or both ways, in a one-sided format) is a row per asset."""
    sent: list[Amount] = []
    received: list[Amount] = []
    fees: list[Amount] = []
    for ticker, moved, fee in moves:
        if moved:
            (sent if moved < 0 else received).append((ticker, moved.copy_abs()))
        if fee:
            fees.append((ticker, fee))
    if not (sent or received):
        sent, fees = fees[:1], fees[1:]
    sides = len(sent) + len(received)
    if not sides:
        return []
    if len(sent) <= 1 and len(received) <= 1 and len(fees) <= 1 and (two_sided or sides == 1):
        return [
            replace(
                record,
                sent=sent[0] if sent else None,
                received=received[0] if received else None,
                fee=fees[0] if fees else None,
            )
        ]
    tickers = sorted({ticker for ticker, _ in (*sent, *received, *fees)})
    return [
        replace(
            record,
            sent=_of(sent, ticker),
            received=_of(received, ticker),
            fee=_of(fees, ticker),
        )
        for ticker in tickers
    ]


def rows(
    wh: Warehouse,
    account: str,
    year: int,
    *,
    takes: Callable[[frozenset[str]], bool] = lambda kinds: True,
    two_sided: bool = True,
) -> list[Row]:
    """The account's records of ``year`` (UTC) whose kinds of flow ``takes``, each a row, in the
    order they moved; or `ExportError` naming the account, or the year, it holds no movement of."""

    @read_again
    def movements() -> tuple[list[tuple[Any, ...]], dict[str, tuple[int, int]]]:
        with catalog.connect(wh) as con:
            found = con.execute(_MOVEMENTS, [account, year]).fetchall()
            spans = con.execute(
                "SELECT account, min(year(day)), max(year(day)) FROM flow_records "
                "GROUP BY account ORDER BY account"
            ).fetchall()
        return found, {str(name): (int(first), int(last)) for name, first, last in spans}

    found, spans = movements()
    if not found:
        if account not in spans:
            raise ExportError(
                f"no account {account!r} in the warehouse at {wh.location} (accounts with "
                f"movements: {', '.join(spans) or 'none'})"
            )
        first, last = spans[account]
        raise ExportError(
            f"account {account!r} has no movement in {year} (its movements are of "
            f"{first}..{last}, UTC years)"
        )
    out: list[Row] = []
    for (source, record_id), group in itertools.groupby(found, key=lambda r: (r[0], r[1])):
        kinds: set[str] = set()
        moves: list[tuple[str, Decimal, Decimal]] = []
        times: list[datetime] = []
        for _, _, ticker, ticker_kinds, at, moved, fee in group:
            kinds.update(ticker_kinds)
            times.append(at)
            moves.append((str(ticker), moved, fee))
        if takes(frozenset(kinds)):
            record = Row(str(source), str(record_id), frozenset(kinds), min(times))
            out += _record_rows(record, moves, two_sided)
    return out


# --- The formats --------------------------------------------------------------------------------


def _amount(amount: Amount | None) -> tuple[str, str]:
    return ("", "") if amount is None else (display.decimal_text(amount[1]), amount[0])


def _koinly_label(row: Row) -> str:
    """Koinly's tag for the row: none for a trade or a transfer (Koinly tells them by the sides
    filled); interest is lending interest; funding and realized P&L are realized P&L; a position's
    fee alone is a margin fee."""
    if "interest" in row.kinds:
        return "Lending interest"
    if row.kinds & PNL:
        return "Realized PNL"
    if row.kinds == {"position_fees"}:
        return "Margin fee"
    return ""


def _koinly(row: Row) -> tuple[str, ...]:
    sent_amount, sent_currency = _amount(row.sent)
    received_amount, received_currency = _amount(row.received)
    fee_amount, fee_currency = _amount(row.fee)
    return (
        row.moved_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        sent_amount,
        sent_currency,
        received_amount,
        received_currency,
        fee_amount,
        fee_currency,
        "",
        "",
        _koinly_label(row),
        row.description,
        "",
    )


#: rotki's location for an exchange it does not list.
ROTKI_LOCATION: Final = "external"


def _milliseconds(moment: datetime) -> str:
    """A UTC Unix timestamp in milliseconds, exact (the microseconds below a millisecond cut)."""
    delta = moment - datetime(1970, 1, 1, tzinfo=UTC)
    return str((delta.days * 86_400 + delta.seconds) * 1_000 + delta.microseconds // 1_000)


def _rotki_trade(row: Row) -> tuple[str, ...]:
    spent, spent_currency = _amount(row.sent)
    got, got_currency = _amount(row.received)
    fee, fee_currency = _amount(row.fee)
    return (
        ROTKI_LOCATION,
        spent_currency,
        spent,
        got_currency,
        got,
        fee,
        fee_currency,
        row.description,
        _milliseconds(row.moved_at),
    )


def _rotki_type(row: Row) -> str:
    """rotki's event type: money of the account's own in or out is a deposit or a withdrawal;
    anything else received is income; P&L lost a loss; a fee alone spent."""
    if row.kinds & TRANSFERS:
        return "Deposit" if row.received else "Withdrawal"
    if row.received:
        return "Income"
    return "Loss" if row.kinds & PNL else "Spend"


def _rotki_event(row: Row) -> tuple[str, ...]:
    amount, currency = _amount(row.received or row.sent)
    fee, fee_currency = _amount(row.fee)
    return (
        _rotki_type(row),
        ROTKI_LOCATION,
        currency,
        amount,
        fee,
        fee_currency,
        row.description,
        _milliseconds(row.moved_at),
    )


@dataclass(frozen=True, slots=True)
class Format:
    """A tool's import file: its header, in order, and a row's cells; the records it takes (by
    their kinds of flow), and whether a row holds what was sent and what was received together."""

    name: str
    tool: str
    #: The tool's documentation page of the format.
    page: str
    header: tuple[str, ...]
    cells: Callable[[Row], tuple[str, ...]]
    takes: Callable[[frozenset[str]], bool] = lambda kinds: True
    two_sided: bool = True


FORMATS: Final = {
    f.name: f
    for f in (
        Format(
            "koinly",
            "Koinly (universal template)",
            "https://support.koinly.io/en/articles/9489976-how-to-create-a-custom-csv-file-with-your-data",
            (
                "Date",
                "Sent Amount",
                "Sent Currency",
                "Received Amount",
                "Received Currency",
                "Fee Amount",
                "Fee Currency",
                "Net Worth Amount",
                "Net Worth Currency",
                "Label",
                "Description",
                "TxHash",
            ),
            _koinly,
        ),
        Format(
            "rotki-trades",
            "rotki (generic trades import)",
            "https://docs.rotki.com/usage-guides/history/import-data.html",
            (
                "Location",
                "Spend Currency",
                "Spend Amount",
                "Receive Currency",
                "Receive Amount",
                "Fee",
                "Fee Currency",
                "Description",
                "Timestamp",
            ),
            _rotki_trade,
            takes=lambda kinds: bool(kinds & TRADES),
        ),
        Format(
            "rotki-events",
            "rotki (generic events import)",
            "https://docs.rotki.com/usage-guides/history/import-data.html",
            (
                "Type",
                "Location",
                "Currency",
                "Amount",
                "Fee",
                "Fee Currency",
                "Description",
                "Timestamp",
            ),
            _rotki_event,
            takes=lambda kinds: not kinds & TRADES,
            two_sided=False,
        ),
    )
}


@dataclass(frozen=True, slots=True)
class Written:
    path: Path
    rows: int
    records: int


def text(fmt: Format, found: Sequence[Row]) -> str:
    """The file's text: the header, then a row per line (CSV as RFC 4180 has it)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(fmt.header)
    writer.writerows(fmt.cells(row) for row in found)
    return buffer.getvalue()


def write(
    wh: Warehouse, name: str, account: str, year: int, out: str | os.PathLike[str]
) -> Written:
    """Export ``account``'s records of ``year`` in the format ``name`` to ``out``, atomically (a
    reader never sees half a file); `ExportError` for a format, an account or a year that cannot
    be, `StoreError` for a file that cannot be written."""
    fmt = FORMATS.get(name)
    if fmt is None:
        raise ExportError(f"unknown export format {name!r}; formats: {', '.join(FORMATS)}")
    found = rows(wh, account, year, takes=fmt.takes, two_sided=fmt.two_sided)
    target = Path(replace_text(out, text(fmt, found), newline=""))
    records = len({(row.source, row.record_id) for row in found})
    return Written(target, len(found), records)
