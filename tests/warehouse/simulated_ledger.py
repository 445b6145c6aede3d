"""An account of the simulator extracted into a warehouse: its snapshots at the simulator's clock
and its histories over a range of days, each read over loopback HTTP (signed requests, paged to
the end, each time window within its operation's span) and written as the warehouse writes them
(`normalize.normalize`, then `partitions.write_batch`).

Numbers with a fraction (the times of fills and position events) are parsed exactly, as the
client parses them: a float would be refused by the warehouse.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from pipeline import spec
from pipeline.simulator import Credentials, Simulator
from tests.support.signing import post
from warehouse import Warehouse, normalize, partitions

DAY_S = 86_400
#: An answer edited before it is written: a record dropped, a value changed.
Edit = Callable[[spec.History, Any], Any]


def _same(history: spec.History, answer: Any) -> Any:
    return answer


def ok(sim: Simulator, op: spec.Operation, params: dict[str, Any], creds: Credentials) -> Any:
    """The answer's JSON, fractions as exact decimals."""
    answer = post(sim.url, op.path, params, creds)
    assert answer.status_code == 200, (op.name, params, answer.status_code, answer.text[:300])
    return json.loads(answer.content, parse_float=Decimal)


def _records(page: Any) -> list[Any]:
    if isinstance(page, list):
        return page
    return list(page["records"] if "records" in page else page["data"])


def every(
    sim: Simulator, op: spec.Operation, params: dict[str, Any], creds: Credentials
) -> list[Any]:
    """Every record within ``params``, paged to the end."""
    size = op.bound("limit")
    out: list[Any] = []
    while True:
        page = _records(ok(sim, op, {**params, "offset": len(out), "limit": size}, creds))
        out += page
        if len(page) < size:
            return out


def every_grouped(
    sim: Simulator, op: spec.Operation, params: dict[str, Any], creds: Credentials
) -> dict[str, list[Any]]:
    """Every record of an answer grouped by market, paged to the end: its records by market."""
    size = op.bound("limit")
    out: dict[str, list[Any]] = {}
    offset = 0
    while True:
        page = ok(sim, op, {**params, "offset": offset, "limit": size}, creds)
        count = sum(len(group) for group in page.values())
        for market, group in page.items():
            out.setdefault(market, []).extend(group)
        offset += count
        if count < size:
            return out


def _windows(start: int, end: int, span: int) -> Iterable[tuple[int, int]]:
    """``[start, end]`` in windows of at most ``span`` seconds, both ends included."""
    while start <= end:
        yield start, min(end, start + span - 1)
        start += span


@dataclass
class Extraction:
    """One account's extraction into ``wh``: its name in the warehouse and its key."""

    sim: Simulator
    wh: Warehouse
    account: str
    creds: Credentials
    #: Applied to every answer before it is written (a test drops a record with it).
    edit: Edit = field(default=_same)

    def write(
        self,
        history: spec.History,
        answer: Any,
        *,
        at: int,
        day: date,
        replace: Iterable[date] = (),
    ) -> None:
        extracted_at = datetime.fromtimestamp(at, UTC)
        batch = normalize.normalize(
            history,
            self.edit(history, answer),
            extracted_at=extracted_at,
            day=day,
            observed_at=None if history.monthly else extracted_at,
        )
        assert batch.rejected == 0, (history.name, batch.rejects.to_pylist()[:3])
        partitions.write_batch(self.wh, batch, account=self.account, replace=replace)

    def snapshot(self, *, main: bool) -> None:
        """Every snapshot of the account at the simulator's clock (its time in whole seconds);
        the sub-account list and the investments only for the main account, whose partner key
        alone may ask for them."""
        at = int(self.sim.clock.now())
        day = datetime.fromtimestamp(at, UTC).date()
        sim, creds = self.sim, self.creds
        pending = {"status": list(spec.PENDING_STATUSES)}
        answers: list[tuple[spec.History, Any]] = [
            (spec.MAIN_BALANCES, ok(sim, spec.MAIN_BALANCE, {}, creds)),
            (spec.TRADING_BALANCES, ok(sim, spec.TRADING_BALANCE, {}, creds)),
            (spec.COLLATERAL_BALANCES, ok(sim, spec.COLLATERAL_BALANCE_SUMMARY, {}, creds)),
            (spec.PENDING_FLOWS, every(sim, spec.MAIN_ACCOUNT_HISTORY, pending, creds)),
            (spec.OPEN_POSITIONS_NOW, ok(sim, spec.OPEN_POSITIONS, {}, creds)),
            (spec.HEDGE, ok(sim, spec.HEDGE_MODE, {}, creds)),
        ]
        if main:
            investments = every(sim, spec.INVESTMENTS_HISTORY, {}, creds)
            answers += [
                (spec.INVESTMENTS, investments),
                (spec.FIXED_PLANS, investments),
                (spec.SUBACCOUNTS, every(sim, spec.SUBACCOUNT_LIST, {}, creds)),
            ]
        for history, answer in answers:
            self.write(history, answer, at=at, day=day)

    def histories(
        self, since: int, *, main: bool, only: Iterable[spec.History] | None = None
    ) -> None:
        """Every history of the account (or ``only`` these) from ``since`` (Unix seconds) to
        the simulator's clock; the sub-accounts' transfers only for the main account."""
        until = int(self.sim.clock.now())
        first = datetime.fromtimestamp(since, UTC).date()
        last = datetime.fromtimestamp(until, UTC).date()
        days = [first + timedelta(days=n) for n in range((last - first).days + 1)]
        start = int(datetime.combine(first, datetime.min.time(), UTC).timestamp())
        windows = list(_windows(start, until, DAY_S))
        reads = self._reads(start, windows, main=main)
        for name in reads if only is None else [h.name for h in only]:
            history, read = reads[name]
            self.write(history, read(), at=until, day=last, replace=days)

    def _reads(
        self, start: int, windows: list[tuple[int, int]], *, main: bool
    ) -> dict[str, tuple[spec.History, Callable[[], Any]]]:
        """How each history is read: within each window, or whole."""
        sim, creds = self.sim, self.creds

        def grouped(op: spec.Operation) -> dict[str, list[Any]]:
            out: dict[str, list[Any]] = {}
            for lo, hi in windows:
                window = {"startDate": lo, "endDate": hi}
                for market, group in every_grouped(sim, op, window, creds).items():
                    out.setdefault(market, []).extend(group)
            return out

        def windowed(op: spec.Operation, low: str = "startDate", high: str = "endDate") -> Any:
            return [r for lo, hi in windows for r in every(sim, op, {low: lo, high: hi}, creds)]

        def transfers() -> dict[str, list[Any]]:
            subaccounts = every(sim, spec.SUBACCOUNT_LIST, {}, creds)
            return {
                sub["id"]: every(sim, spec.SUBACCOUNT_TRANSFERS, {"id": sub["id"]}, creds)
                for sub in subaccounts
            }

        reads: list[tuple[spec.History, Callable[[], Any]]] = [
            (spec.TRADES, lambda: grouped(spec.EXECUTED_HISTORY)),
            (spec.ORDERS, lambda: grouped(spec.ORDER_HISTORY)),
            (spec.CONVERSIONS, lambda: windowed(spec.CONVERT_HISTORY, "from", "to")),
            (spec.POSITION_EVENTS, lambda: windowed(spec.POSITIONS_HISTORY)),
            (spec.CLOSED_POSITIONS, lambda: windowed(spec.CLOSED_PNL)),
            (spec.DEPOSITS_WITHDRAWALS, lambda: every(sim, spec.MAIN_ACCOUNT_HISTORY, {}, creds)),
            (
                spec.FUNDING,
                lambda: [
                    entry
                    for entry in every(sim, spec.FUNDING_HISTORY, {}, creds)
                    if start <= int(entry["fundingTime"])
                ],
            ),
        ]
        if main:
            reads.append((spec.SUBACCOUNT_TRANSFERS_HISTORY, transfers))
        return {history.name: (history, read) for history, read in reads}
