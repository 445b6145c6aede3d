"""What a simulator's ledger holds for a history read in time windows, read from its dataset (not
through the API), and a walk's pages in the same form: the two sides of the walks' tests."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

import httpx
import orjson

from pipeline import spec
from pipeline.simulator import Simulator
from pipeline.simulator._series import Series
from pipeline.simulator._windows import history_floor

#: Each history read in time windows, and the ledger's series of its records.
SERIES = {
    spec.TRADES.name: "fills",
    spec.ORDERS.name: "orders",
    spec.CONVERSIONS.name: "conversions",
    spec.POSITION_EVENTS.name: "events",
    spec.CLOSED_POSITIONS.name: "closed",
}
WINDOWED = [h for h in spec.HISTORIES.values() if isinstance(h.paging, spec.TimeWindows)]

#: A record and the market it is listed under (None: the history is not grouped by market).
Row = tuple[str | None, Any]


def series(sim: Simulator, history: spec.History) -> Series:
    ledger = sim.dataset.ledger
    ledger.current()
    found: Series = getattr(ledger, SERIES[history.name])
    return found


def floor_of(sim: Simulator) -> int:
    """The six-month floor at the simulator's present, as the simulator reckons it."""
    return history_floor(sim.clock.now())


def truth(sim: Simulator, history: spec.History, since: int | None, until: int | None) -> list[Row]:
    """The ledger's records with ``since <= time < until``, newest first, numbers exact: what a
    walk of that range must yield. The range ends at the present second (a window's end is the
    second before it) and, for a history the exchange keeps six months, starts at its floor."""
    records = series(sim, history)
    low = since if since is not None else 0
    if history.forgotten:
        low = max(low, floor_of(sim))
    now = int(sim.clock.now())
    high = now if until is None else min(until, now)
    times = records.times
    positions = [
        i for i in range(len(records) - 1, -1, -1) if low * 1_000_000 <= times[i] < high * 1_000_000
    ]
    grouped = isinstance(history.operation.answer, spec.Grouped)
    return [
        (str(records.value("market", i)) if grouped else None, exact(raw))
        for i, raw in zip(positions, records.written(positions), strict=True)
    ]


def exact(raw: bytes | str) -> Any:
    return json.loads(raw, parse_float=Decimal)


def rows(pages: Iterable[Any]) -> list[Row]:
    """A walk's pages as rows: a page of records by market, or a list of records."""
    out: list[Row] = []
    for page in pages:
        if isinstance(page, dict):
            out.extend((market, record) for market, group in page.items() for record in group)
        else:
            out.extend((None, record) for record in page)
    return out


def by_market(found: list[Row]) -> dict[str | None, list[Any]]:
    """Each market's records in the order they came (a page's markets come in any order)."""
    out: dict[str | None, list[Any]] = {}
    for market, record in found:
        out.setdefault(market, []).append(record)
    return out


def sent(request: httpx.Request) -> dict[str, Any]:
    """A signed request's parameters, as its payload carries them."""
    body: dict[str, Any] = orjson.loads(base64.b64decode(request.headers["X-TXC-PAYLOAD"]))
    return body
