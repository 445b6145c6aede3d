"""How the client reads a declared history (`spec.History`): a walk of its pages, as its paging
declares, or a snapshot's answer; and the exchange's present, which the walks go by.

`Histories` is that part of `AsyncWhiteBIT`, which it extends: it needs of the client only its
checked, retried `call`, its `ping`, its concurrency and its clock (`_clock.ExchangeClock`).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal

from pipeline import spec

from ._clock import ExchangeClock
from ._report import WalkReport
from ._retry import RetryPolicy
from ._timewindows import TimeWindowsWalk
from ._walks import NewestFirstWalk, Records, Walk
from ._window import OffsetWindowWalk

log = logging.getLogger("pipeline.whitebit")


#: Collects of `Histories.together` before it keeps one that no second collect confirmed.
COLLECTS: Final = 4


@dataclass(frozen=True, slots=True)
class Together:
    """Snapshots taken together (`Histories.together`): each one's answer and report (of the
    collect kept), by history name; ``span``, the times of the collects that agreed (the
    account was as the answers show at an instant after ``span.observed_from`` and before
    ``span.observed_until`` + 1 s, by the exchange's clock); how many collects it took, and
    whether two in a row agreed."""

    answers: dict[str, Any]
    reports: dict[str, WalkReport]
    span: WalkReport
    collects: int
    #: None: asked once (`one`).
    consistent: bool | None

    @classmethod
    def one(cls, history: spec.History, answer: Any, report: WalkReport) -> Together:
        """A snapshot taken alone, as if together with nothing."""
        return cls({history.name: answer}, {history.name: report}, report, 1, None)


class Histories:
    """The walks and snapshots of the account's histories, and the exchange's present."""

    max_concurrency: int
    _clock: ExchangeClock

    async def call(
        self,
        operation: spec.Operation,
        params: Mapping[str, Any],
        *,
        report: WalkReport | None = None,
        retry: RetryPolicy | None = None,
    ) -> Any:
        raise NotImplementedError  # the client's

    async def ping(self, *, preflight: bool = False) -> None:
        raise NotImplementedError  # the client's

    def walk(
        self,
        history: spec.History,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        values: Mapping[str, Sequence[str]] | None = None,
        on_window_exceeded: Literal["raise", "report"] = "raise",
    ) -> Walk[Records]:
        """Every record of a history with ``since <= time < until`` (each end open when None),
        in pages, as its paging declares; ``values`` are the account's settings by name (its
        ``markets``, ``mining_accounts``), each walk taking those its declaration names.

        A newest-first history (`NewestFirstWalk`) is walked newest first; given the values of
        its ``split_setting`` (the account's markets), each is walked on its own, concurrently,
        and merged. A history read by offset window (`OffsetWindowWalk`) gives every record of
        the range (all of a snapshot), each once, its splits taking ``values`` too. A history read
        in time windows (`TimeWindowsWalk`) is walked a window at a time, newest first; a window
        out of the offset's reach is reported as ``on_window_exceeded`` says, like an offset
        window's slice.
        """
        paging, settings = history.paging, values or {}
        first, end = _seconds(since, "since"), _seconds(until, "until")
        if isinstance(paging, spec.NewestFirst):
            return NewestFirstWalk(self, history, since=first, until=end, values=settings)
        if isinstance(paging, spec.OffsetWindow):
            return OffsetWindowWalk(
                self,
                history,
                since=first,
                until=end,
                on_window_exceeded=on_window_exceeded,
                values=settings,
            )
        if isinstance(paging, spec.TimeWindows):
            return TimeWindowsWalk(
                self, history, since=first, until=end, on_window_exceeded=on_window_exceeded
            )
        raise TypeError(f"{history.name} is not walked: it is a snapshot (see `snapshot`)")

    async def snapshot(
        self,
        history: spec.History,
        *,
        values: Mapping[str, Sequence[str]] | None = None,
        report: WalkReport | None = None,
    ) -> Any:
        """A snapshot's answer as the exchange gave it, its history's fixed parameters sent; for
        one fanned out over the values of a setting (a mining account each, from ``values``, the
        account's settings by name), each value's records by value. ``report`` (when given)
        takes the exchange's time of the first answer (``observed_at``), its retries and the
        fields the spec does not name."""
        op, fixed = history.operation, dict(history.params)
        if not isinstance(history.paging, spec.Fanout):
            return await self.call(op, fixed, report=report)
        param = history.paging.param
        fanned = list((values or {}).get(history.paging.setting, ()))
        answers = await asyncio.gather(
            *(self.call(op, {**fixed, param: value}, report=report) for value in fanned)
        )
        return {value: _listed(op, answer) for value, answer in zip(fanned, answers, strict=True)}

    async def whole(
        self, history: spec.History, *, values: Mapping[str, Sequence[str]] | None = None
    ) -> tuple[Any, WalkReport]:
        """A snapshot's answer as the exchange gave it (every page's records of one walked by
        offset window, a slice out of the window's reach reported), and its report."""
        if isinstance(history.paging, spec.OffsetWindow):
            walk = self.walk(history, values=values, on_window_exceeded="report")
            records: Any = None
            async for page in walk:
                records = _joined(records, page)
            return (records if records is not None else []), walk.report
        paging = history.paging
        if isinstance(paging, spec.Fanout) and not (values or {}).get(paging.setting):
            log.warning(f"no {paging.setting} configured: no {history.name} to list")
        report = WalkReport(history.name)
        return await self.snapshot(history, values=values, report=report), report

    async def together(
        self,
        histories: Sequence[spec.History],
        *,
        values: Mapping[str, Sequence[str]] | None = None,
        collects: int = COLLECTS,
    ) -> Together:
        """Snapshots that show the account at one instant: each asked at once (concurrently),
        then all again, until two collects in a row answer alike (each of them then held from
        the first collect's answer to the second's: so all of them at an instant between the
        two), at most ``collects`` times; then the last collect is kept, not ``consistent``."""
        names = [h.name for h in histories]
        last = max(collects, 2)
        before: tuple[list[Any], WalkReport] | None = None  # the collect before: answers, span
        for collect in range(1, last + 1):
            got = await asyncio.gather(*(self.whole(h, values=values) for h in histories))
            answers = [answer for answer, _ in got]
            reports = {name: report for name, (_, report) in zip(names, got, strict=True)}
            agreed = before is not None and answers == before[0]
            if agreed or collect == last:
                first = before[1] if agreed and before is not None else None
                return Together(
                    dict(zip(names, answers, strict=True)),
                    reports,
                    _span(first, reports),
                    collect,
                    consistent=agreed,
                )
            before = answers, _span(None, reports)
        raise AssertionError("unreachable: the last collect returns")

    async def exchange_time(self) -> float:
        """The exchange's present, in Unix seconds: the client's ``clock`` if it was given one,
        else the latest answer's ``Date`` plus the time since (a ping first, when no answer has
        come yet), else this machine's clock (an exchange that sends no ``Date``)."""
        if not self._clock.known and not self._clock.asked:
            self._clock.asked = True
            await self.ping()
        return self._clock.now()


def _seconds(moment: datetime | None, name: str) -> int | None:
    if moment is None:
        return None
    if moment.tzinfo is None:
        raise ValueError(f"{name} must be timezone-aware (UTC), not a naive datetime")
    return math.floor(moment.timestamp())


def _span(first: WalkReport | None, reports: Mapping[str, WalkReport]) -> WalkReport:
    """The times of a collect (from ``first``'s start, when given, to its end): when its
    first request was sent and its last answer came, by the exchange's clock and by this
    machine's."""
    span = WalkReport("together")
    every = list(reports.values())
    starts = [first] if first is not None else every
    span.observed_at = _least([r.observed_at for r in starts])
    span.observed_from = _least([r.observed_from for r in starts])
    span.asked_at = _least([r.asked_at for r in starts])
    span.observed_until = _most([r.observed_until for r in every])
    span.answered_at = _most([r.answered_at for r in every])
    return span


def _least(times: Sequence[datetime | None]) -> datetime | None:
    known = [t for t in times if t is not None]
    return min(known) if known else None


def _most(times: Sequence[datetime | None]) -> datetime | None:
    known = [t for t in times if t is not None]
    return max(known) if known else None


def _joined(records: Any, page: Any) -> Any:
    """Pages gathered: lists of records, or records by owner (``{owner: [record, ...]}``)."""
    if records is None:
        return page
    if isinstance(page, dict):
        for owner, more in page.items():
            records.setdefault(owner, []).extend(more)
        return records
    records.extend(page)
    return records


def _listed(operation: spec.Operation, answer: Any) -> Any:
    """The records of an answer that lists them under an envelope field."""
    shape = operation.answer
    return answer[shape.envelope] if isinstance(shape, spec.Listed) else answer
